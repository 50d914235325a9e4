"""PodMetrics items → exact usage: CPU millicores rounded up (upstream's `MilliValue`), memory bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vpa.kube.converting import ConversionError
from vpa.kube.metricsreading import ContainerUsage, ListStream, pod_usage_from_dict


def item(**containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "default"},
        "timestamp": "2026-01-01T00:05:00Z",
        "window": "30s",
        "containers": [{"name": name, "usage": usage} for name, usage in containers.items()],
    }


@pytest.mark.parametrize(
    ("usage", "want"),
    [
        ({"cpu": "500m", "memory": "204800Ki"}, ContainerUsage("app", 500, 200 * 2**20)),
        # metrics-server reports nanocores: 123456789n is 123.456789m, read as 124m like MilliValue().
        ({"cpu": "123456789n", "memory": "1Gi"}, ContainerUsage("app", 124, 2**30)),
        ({"cpu": "0", "memory": "0"}, ContainerUsage("app", 0, 0)),
        ({"memory": "1k"}, ContainerUsage("app", None, 1000)),
    ],
    ids=["millicores", "nanocores-round-up", "zero", "no-cpu"],
)
def test_usage_is_converted_exactly(usage: dict[str, str], want: ContainerUsage) -> None:
    got = pod_usage_from_dict(item(app=usage))
    assert (got.namespace, got.name, got.timestamp) == ("default", "web-1", 1_767_225_900.0)
    assert got.containers == (want,)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"timestamp": "2026-01-01T00:00:00Z"}, "metadata"),
        ({**item(app={"cpu": "1"}), "timestamp": "yesterday"}, "timestamp"),
        (item(app={"cpu": "lots"}), "containers[0].usage.cpu"),
        (item(app={"memory": True}), "containers[0].usage.memory"),
    ],
    ids=["no-metadata", "bad-time", "bad-cpu", "bool-memory"],
)
def test_malformed_items_name_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ConversionError) as err:
        pod_usage_from_dict(obj)
    assert err.value.field == field


# --- ListStream: a list document's items, one at a time, from a body that arrives in chunks -----------


def _streamed(chunks: list[bytes], others: dict[str, object] | None = None) -> list[object]:
    stream = ListStream(others)
    out: list[object] = []
    for chunk in chunks:
        out.extend(stream.feed(chunk))
    out.extend(stream.finish())
    return out


def _split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(raw)) for cut in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(
    st.lists(_JSON, max_size=8),
    st.dictionaries(st.sampled_from(["kind", "apiVersion", "metadata", "extra"]), _JSON, max_size=4),
    st.sampled_from([",", ", ", ",\n  "]),
    st.booleans(),
)
def test_list_stream_yields_the_parsed_documents_items_and_keeps_its_other_fields(
    items: list[object], others: dict[str, object], separator: str, items_first: bool
) -> None:
    fields = [("items", items), *others.items()] if items_first else [*others.items(), ("items", items)]
    body = "{" + separator.join(f"{json.dumps(k)}: {json.dumps(v, indent=None)}" for k, v in fields) + "}"
    got_others: dict[str, object] = {}
    assert _streamed([body.encode()], got_others) == json.loads(body)["items"]
    assert got_others == {k: v for k, v in json.loads(body).items() if k != "items"}


@pytest.mark.parametrize(
    ("body", "items"),
    [
        ('{"kind": "PodMetricsList", "items": []}', []),
        ('{"items": null, "kind": "PodMetricsList"}', []),
        ('{"kind": "PodMetricsList"}', []),
        ("{}", []),
        (' \n{ "items" : [ {"a": 1} , {"b": [2]} ] } \n', [{"a": 1}, {"b": [2]}]),
    ],
    ids=["empty", "null", "absent", "empty-object", "whitespace"],
)
def test_list_stream_edge_cases(body: str, items: list[object]) -> None:
    assert _streamed([body.encode()]) == items


@given(
    st.lists(_JSON, max_size=8),
    st.dictionaries(st.sampled_from(["kind", "apiVersion", "metadata", "extra"]), _JSON, max_size=4),
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_list_stream_yields_the_same_wherever_the_chunks_are_cut(
    items: list[object], others: dict[str, object], items_first: bool, cuts: list[int]
) -> None:
    """Chunk boundaries anywhere, inside a number, a string, a multi-byte character or between tokens,
    change nothing: the same items in the same order, and the same other fields."""
    fields = [("items", items), *others.items()] if items_first else [*others.items(), ("items", items)]
    body = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in fields) + "}"
    want_others: dict[str, object] = {}
    want = _streamed([body.encode()], want_others)
    got_others: dict[str, object] = {}
    assert _streamed(_split(body.encode(), cuts), got_others) == want
    assert got_others == want_others


@pytest.mark.parametrize(
    "body",
    ["[]", '{"items": {}}', '{"items": [1, 2', '{"items": [1 2]}', '{"items": [1]} x', '{"items" [1]}',
     '{"items": [1],}', "", "null", '{"items": [12'],
    ids=["array", "items-object", "truncated", "no-comma", "trailing-data", "no-colon", "trailing-comma",
         "empty", "null", "truncated-number"],
)
@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_list_stream_refuses_what_is_not_a_list_document(body: str, chunk: int) -> None:
    raw = body.encode()
    with pytest.raises(ValueError):
        _streamed([raw[i:i + chunk] for i in range(0, len(raw), chunk)])


@pytest.mark.parametrize("body", ['{"items": [0.1818, 1e5, -2.5E-3, 10, true, null, "x"]}'])
def test_list_stream_waits_for_a_number_cut_at_any_byte(body: str) -> None:
    """"0." then "1818", or "1" then "e5", is one number, whichever chunk the cut falls in."""
    raw = body.encode()
    for cut in range(len(raw) + 1):
        assert _streamed([raw[:cut], raw[cut:]]) == json.loads(body)["items"], cut
