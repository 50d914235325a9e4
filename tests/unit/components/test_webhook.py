"""The admission handler without TLS: decisions, answers, HTTP errors, metrics, and fuzzing.

Dependencies are small fakes: a VPA index (what the shared cache's `target` index returns), targets (pod →
top-most controller, target → selector), LimitRanges per namespace.
"""

from __future__ import annotations

import base64
import copy
import gc
import io
import os
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from tests.builders import make_pod, make_recommendation, make_vpa
from vpa.components.sampled_log import SampledLog
from vpa.components.webhook.admitter import PATCH_MEMO_BYTES, PATCH_MEMO_SIZE, Admitter
from vpa.components.webhook.caches import LimitRanges
from vpa.components.webhook.metrics import AdmissionMetrics
from vpa.components.webhook.server import MAX_BODY_BYTES, AdmissionServer
from vpa.kube.converting import vpa_from_dict
from vpa.logic.limitranges import NO_LIMITS, NamespaceLimits
from vpa.model.features import FeatureGates
from vpa.model.limitrange import LimitRangeView, limitrange_from_dict
from vpa.model.pod import PodView
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef, VpaView


class FakeVpas:
    def __init__(self, *vpas: VpaView) -> None:
        self.vpas = list(vpas)

    def by_index(self, name: str, value: str) -> list[VpaView]:
        assert name == "target"
        out = []
        for vpa in self.vpas:
            ref = vpa.target_ref
            if ref is not None and f"{vpa.namespace}/{ref.kind}/{ref.name}" == value:
                out.append(vpa)
        return out


class FakeTargets:
    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.calls = 0

    async def top_most(self, pod: PodView) -> str | None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("boom")
        if pod.owner is None:
            return None
        name = pod.owner.name.rsplit("-", 1)[0] if pod.owner.kind == "ReplicaSet" else pod.owner.name
        return f"{pod.namespace}/Deployment/{name}"

    async def selector(self, namespace: str, target: TargetRef) -> Selector | None:
        return Selector.from_match_labels({"app": target.name})


def _vpa(**kwargs: Any) -> VpaView:
    return vpa_from_dict(
        make_vpa(
            recommendation=[make_recommendation("app", target={"cpu": "300m", "memory": "300Mi"})], **kwargs
        )
    )


def _admitter(
    *vpas: VpaView,
    targets: FakeTargets | None = None,
    gates: FeatureGates | None = None,
    limits: NamespaceLimits = NO_LIMITS,
) -> Admitter:
    return Admitter(
        FakeVpas(*vpas),
        targets or FakeTargets(),
        lambda _ns: limits,
        gates or FeatureGates(),
        AdmissionMetrics(CollectorRegistry()),
    )


def _review(
    obj: Any,
    *,
    resource: str = "pods",
    group: str = "",
    operation: str = "CREATE",
    old: Any = None,
    namespace: str = "default",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {
            "group": group,
            "version": "v1",
            "kind": "Pod" if resource == "pods" else "VerticalPodAutoscaler",
        },
        "resource": {"group": group, "version": "v1", "resource": resource},
        "namespace": namespace,
        "operation": operation,
        "object": obj,
        "oldObject": old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _pod_being_created() -> dict[str, Any]:
    pod = make_pod()
    pod.pop("status")
    pod["metadata"].pop("name")
    pod["metadata"]["generateName"] = "web-7d9f8b6c4-"
    return pod


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    srv = TestServer(AdmissionServer(_admitter(_vpa())).app, host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()


async def _post(srv: TestServer, body: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            srv.make_url("/"), data=io.BytesIO(body), headers={"Content-Type": content_type}
        ) as resp,
    ):
        return resp.status, await resp.read()


def _answer(raw: bytes) -> dict[str, Any]:
    review = orjson.loads(raw)
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    response: dict[str, Any] = review["response"]
    return response


def _ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = orjson.loads(base64.b64decode(response["patch"]))
    return ops


# ----------------------------------------------------------------------------------------------- pods


async def test_pod_of_a_covered_deployment_gets_the_patch() -> None:
    admitter = _admitter(_vpa())
    verdict = await admitter.admit(_review(_pod_being_created())["request"])
    assert verdict.allowed
    assert verdict.outcome == "applied"
    assert verdict.patch is not None
    paths = {op["path"]: op["value"] for op in verdict.patch}
    assert paths["/spec/containers/0/resources/requests/cpu"] == "300m"
    assert paths["/metadata/annotations/vpaObservedContainers"] == "app, log-shipper"
    assert admitter.metrics.pods.labels(applied="true")._value.get() == 1


async def test_no_vpa_off_vpa_and_unowned_pods_pass_unchanged() -> None:
    for admitter, pod in (
        (_admitter(), _pod_being_created()),
        (_admitter(_vpa(update_mode="Off")), _pod_being_created()),
        (_admitter(_vpa()), make_pod(owner_kind=None)),
        (_admitter(_vpa(namespace="other")), _pod_being_created()),
    ):
        verdict = await admitter.admit(_review(pod)["request"])
        assert verdict.allowed
        assert verdict.patch is None
        assert verdict.outcome == "skipped"


class RecordedEvents:
    """Stands in for the EventRecorder: keeps what would be written."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def warning(self, ref: Any, reason: str, message: str) -> bool:
        self.seen.append((ref.kind, ref.name, reason, message))
        return True


@pytest.mark.parametrize(
    "pod_resources",
    [
        {"requests": {"cpu": "200m"}},  # a patch to 300m per container would exceed it
        {"limits": {"memory": "1Gi"}},
        {"requests": {"cpu": "10"}, "limits": {"cpu": "10"}},  # room enough today, but not ours to guess
    ],
    ids=["pod-requests", "pod-limits", "both"],
)
async def test_pods_with_pod_level_resources_are_admitted_unchanged_with_an_event(
    pod_resources: dict[str, Any],
) -> None:
    events = RecordedEvents()
    admitter = Admitter(
        FakeVpas(_vpa()), FakeTargets(), lambda _ns: NO_LIMITS, FeatureGates(),
        AdmissionMetrics(CollectorRegistry()), events=events,  # type: ignore[arg-type]
    )  # fmt: skip
    pod = _pod_being_created()
    pod["spec"]["resources"] = pod_resources
    verdict = await admitter.admit(_review(pod)["request"])
    assert verdict.allowed
    assert verdict.patch is None
    assert verdict.outcome == "skipped"
    assert len(events.seen) == 1
    kind, name, reason, message = events.seen[0]
    assert name == "web-vpa"
    assert (kind, reason) == ("VerticalPodAutoscaler", "PodLevelResourcesUnchanged")
    assert "default/web-7d9f8b6c4-%" in message
    # An empty stanza is no pod-level resources at all: patched as usual.
    pod["spec"]["resources"] = {}
    assert (await admitter.admit(_review(pod)["request"])).outcome == "applied"


async def test_an_internal_error_allows_the_pod_without_changes() -> None:
    admitter = _admitter(_vpa(), targets=FakeTargets(fail=True))
    verdict = await admitter.admit(_review(_pod_being_created())["request"])
    assert verdict.allowed
    assert verdict.patch is None
    assert verdict.outcome == "error"


async def test_pod_updates_and_other_resources_are_allowed_untouched() -> None:
    admitter = _admitter(_vpa())
    for review in (
        _review(_pod_being_created(), operation="UPDATE"),
        _review({"metadata": {}}, resource="deployments", group="apps"),
    ):
        verdict = await admitter.admit(review["request"])
        assert verdict.allowed
        assert verdict.patch is None


# ----------------------------------------------------------------------------------------------- VPAs


async def test_vpa_defaulting_warnings_and_denial() -> None:
    admitter = _admitter()
    created = make_vpa(update_mode=None)
    verdict = await admitter.admit(
        _review(created, resource="verticalpodautoscalers", group="autoscaling.k8s.io")["request"]
    )
    assert verdict.allowed
    assert verdict.patch == [{"op": "add", "path": "/spec/updatePolicy", "value": {"updateMode": "Recreate"}}]

    alias = make_vpa(update_mode="InPlaceOnly")
    verdict = await _admitter(gates=FeatureGates.parse("InPlace=true")).admit(
        _review(alias, resource="verticalpodautoscalers", group="autoscaling.k8s.io")["request"]
    )
    assert not verdict.allowed  # not an alias of InPlace: upstream's CRD has no such value

    bad = make_vpa(name="bad", min_replicas=0)
    raw = Admitter.response_body(
        "admission.k8s.io/v1",
        "u1",
        await admitter.admit(
            _review(
                bad,
                resource="verticalpodautoscalers",
                group="autoscaling.k8s.io",
                operation="UPDATE",
                old=make_vpa(name="bad"),
            )["request"]
        ),
    )
    response = _answer(raw)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid"
    assert response["status"]["message"] == (
        'VerticalPodAutoscaler.autoscaling.k8s.io "bad" is invalid: '
        "spec.updatePolicy.minReplicas: Invalid value: 0: minReplicas has to be positive"
    )


# ----------------------------------------------------------------------------------------------- HTTP


async def test_http_answers(server: TestServer) -> None:
    status, raw = await _post(server, orjson.dumps(_review(_pod_being_created())))
    assert status == 200
    response = _answer(raw)
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert response["allowed"] is True
    assert _ops(response)[-1]["path"] == "/metadata/annotations/vpaObservedContainers"

    assert (await _post(server, b"{}", "text/plain"))[0] == 415
    assert (await _post(server, b"not json"))[0] == 400
    assert (await _post(server, b'{"request": {"uid": 3}}'))[0] == 400
    assert (await _post(server, b"[" + b" " * (MAX_BODY_BYTES + 1) + b"]"))[0] == 413
    async with aiohttp.ClientSession() as session, session.get(server.make_url("/")) as resp:
        assert resp.status == 405
    # The review version is echoed for v1beta1 callers.
    beta = _review(_pod_being_created())
    beta["apiVersion"] = "admission.k8s.io/v1beta1"
    status, raw = await _post(server, orjson.dumps(beta))
    assert orjson.loads(raw)["apiVersion"] == "admission.k8s.io/v1beta1"


# -------------------------------------------------------------------------------------------- fuzzing

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=30,
)


def _mutations(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` with one nested field replaced by arbitrary JSON."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*path, index))

    walk(base, ())

    def replace(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
        out = copy.deepcopy(base)
        if not path:
            return {
                "request": {
                    "uid": "x",
                    "object": value,
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "operation": "CREATE",
                }
            }
        node = out
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return out

    return st.builds(replace, st.sampled_from(paths[1:]), json_values)


POD_REVIEW = _review(_pod_being_created())
VPA_REVIEW = _review(
    make_vpa(recommendation=[make_recommendation()]),
    resource="verticalpodautoscalers",
    group="autoscaling.k8s.io",
    operation="UPDATE",
    old=make_vpa(),
)


def _check(status: int, raw: bytes, *, pod: bool) -> None:
    assert status in (200, 400), (status, raw[:200])
    if status == 200:
        response = _answer(raw)
        if pod:
            assert response["allowed"] is True


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.binary(max_size=300) | json_values.map(orjson.dumps))
async def test_fuzz_random_bodies_never_crash(server: TestServer, body: bytes) -> None:
    status, raw = await _post(server, body)
    _check(status, raw, pod=False)


@FUZZ
@given(st.integers(min_value=0, max_value=len(orjson.dumps(POD_REVIEW)) - 1))
async def test_fuzz_truncated_reviews_are_400(server: TestServer, cut: int) -> None:
    status, _ = await _post(server, orjson.dumps(POD_REVIEW)[:cut])
    assert status == 400


@FUZZ
@given(_mutations(POD_REVIEW))
async def test_fuzz_pod_reviews_with_wrong_types_are_always_allowed(
    server: TestServer, review: dict[str, Any]
) -> None:
    status, raw = await _post(server, orjson.dumps(review))
    request = review.get("request")
    pod = isinstance(request, dict) and request.get("resource") == POD_REVIEW["request"]["resource"]
    _check(status, raw, pod=pod)


@FUZZ
@given(_mutations(VPA_REVIEW))
async def test_fuzz_vpa_objects_never_crash(server: TestServer, review: dict[str, Any]) -> None:
    status, raw = await _post(server, orjson.dumps(review))
    _check(status, raw, pod=False)


async def test_numbers_beyond_64_bits_are_answered(server: TestServer) -> None:
    body = orjson.dumps(POD_REVIEW).replace(b'"generation":1', b'"generation":' + b"9" * 40)
    status, raw = await _post(server, body)
    _check(status, raw, pod=True)


async def test_huge_pod_is_still_allowed(server: TestServer) -> None:
    pod = _pod_being_created()
    pod["metadata"]["annotations"] = {f"k{i}": "v" * 1000 for i in range(3000)}  # ~3 MiB
    status, raw = await _post(server, orjson.dumps(_review(pod)))
    assert status == 200
    assert _answer(raw)["allowed"] is True


# ------------------------------------------------------------------------------------------ memo, metrics


async def test_memoised_patch_follows_the_vpa_and_the_containers() -> None:
    first = _vpa(resource_version="1")
    vpas = FakeVpas(first)
    registry = CollectorRegistry()
    admitter = Admitter(
        vpas, FakeTargets(), lambda _ns: NO_LIMITS, FeatureGates(), AdmissionMetrics(registry)
    )

    async def cpu_request(pod: dict[str, Any]) -> str:
        verdict = await admitter.admit(_review(pod)["request"])
        assert verdict.patch is not None
        ops = {op["path"]: op["value"] for op in verdict.patch}
        value: str = ops["/spec/containers/0/resources/requests/cpu"]
        return value

    assert await cpu_request(_pod_being_created()) == "300m"
    assert await cpu_request(_pod_being_created()) == "300m"  # served from the memo
    # A new recommendation (new resourceVersion) is applied to the very next pod.
    vpas.vpas = [
        vpa_from_dict(
            make_vpa(
                resource_version="2",
                recommendation=[make_recommendation("app", target={"cpu": "700m", "memory": "300Mi"})],
            )
        )
    ]
    assert await cpu_request(_pod_being_created()) == "700m"
    # A pod with different containers gets its own patch: no `requests` map → `add …/requests {}` first.
    bare = _pod_being_created()
    bare["spec"]["containers"][0]["resources"] = {}
    verdict = await admitter.admit(_review(bare)["request"])
    assert verdict.patch is not None
    assert {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {}} in verdict.patch


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def test_hostile_distinct_large_pods_keep_the_memo_and_rss_bounded() -> None:
    # 400 pods with distinct 256 KiB containers (a long argument): keyed on the containers' JSON, the memo
    # kept all of them (~100 MiB); keyed on their digest and bounded in bytes, it keeps a few KiB each.
    admitter = _admitter(_vpa())
    pod = _pod_being_created()
    pod["spec"]["containers"][0]["args"] = ["x" * (256 * 1024)]
    gc.collect()
    before = _rss_bytes()
    for index in range(400):
        pod["spec"]["containers"][0]["args"][0] = f"{index:08d}" + "x" * (256 * 1024)
        verdict = await admitter.admit(_review(pod)["request"])
        assert verdict.outcome == "applied"
    gc.collect()
    grown = _rss_bytes() - before
    assert admitter.memo_bytes <= PATCH_MEMO_BYTES
    assert len(admitter._memo) == 400
    assert grown < 40 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"


async def test_memo_is_bounded_in_bytes_and_skips_huge_patches() -> None:
    admitter = _admitter(_vpa())
    pod = _pod_being_created()
    # A container name of 100 KiB (the webhook runs before validation): its patch is never memoised.
    pod["spec"]["containers"][0]["name"] = "app"
    long_names = _pod_being_created()
    long_names["spec"]["containers"].append({"name": "n" * (100 * 1024), "image": "busybox", "resources": {}})
    await admitter.admit(_review(long_names)["request"])
    assert admitter.memo_bytes == 0
    assert not admitter._memo
    # Many small distinct patches: the total stays under the byte bound, the newest are kept.
    for index in range(PATCH_MEMO_SIZE + 10):
        pod["spec"]["containers"][0]["image"] = f"busybox:{index}"
        await admitter.admit(_review(pod)["request"])
    assert len(admitter._memo) <= PATCH_MEMO_SIZE
    assert 0 < admitter.memo_bytes <= PATCH_MEMO_BYTES
    assert admitter.memo_bytes == sum(size for _, size in admitter._memo.values())


async def test_floods_of_unhandled_and_unconvertible_reviews_are_counted_and_logged_sampled() -> None:
    admitter = _admitter(_vpa())
    bad_pod = _pod_being_created()
    bad_pod["metadata"]["labels"] = {"app": 7}  # does not convert
    with capture_logs() as logs:
        for _ in range(500):
            await admitter.admit(_review({}, resource="secrets")["request"])
            await admitter.admit(_review(bad_pod)["request"])
    counter = admitter.metrics.notices.counter
    assert counter.labels(reason="unhandled_resource")._value.get() == 500
    assert counter.labels(reason="pod_not_converting")._value.get() == 500
    events = Counter(entry["reason"] for entry in logs if "reason" in entry)
    assert events == {"unhandled_resource": 1, "pod_not_converting": 1}


def test_sampled_log_reports_what_it_suppressed() -> None:
    now = [0.0]
    sampled = SampledLog(CollectorRegistry(), "x_total", "x", interval_s=10.0, clock=lambda: now[0])
    with capture_logs() as logs:
        logged = [sampled.event("r", "m") for _ in range(5)]
        now[0] = 10.0
        logged.append(sampled.event("r", "m"))
    assert logged == [True, False, False, False, False, True]
    assert [entry["suppressed"] for entry in logs] == [0, 4]


async def test_metrics_are_exposed_with_upstream_names() -> None:
    from prometheus_client import generate_latest

    registry = CollectorRegistry()
    admitter = Admitter(
        FakeVpas(_vpa()), FakeTargets(), lambda _ns: NO_LIMITS, FeatureGates(), AdmissionMetrics(registry)
    )
    srv = TestServer(AdmissionServer(admitter).app, host="127.0.0.1")
    await srv.start_server()
    try:
        for _ in range(3):
            assert (await _post(srv, orjson.dumps(_review(_pod_being_created()))))[0] == 200
    finally:
        await srv.close()
    text = generate_latest(registry).decode()
    assert 'vpa_admission_controller_admission_pods_total{applied="true"} 3.0' in text
    assert (
        'vpa_admission_controller_admission_latency_seconds_count{resource="Pod",status="applied"} 3.0'
        in text
    )
    assert (
        'vpa_admission_controller_admission_latency_seconds_bucket{le="+Inf",resource="Pod",'
        'status="applied"} 3.0' in text
    )
    for step in ("read_request", "admit", "build_response", "write_response", "total"):
        assert f'vpa_admission_controller_execution_latency_seconds_count{{step="{step}"}} 3.0' in text
    assert admitter.metrics.admissions("applied", "Pod") == 3


class _RacingLimitRangeCache:
    """A LimitRange cache whose content changes while the webhook merges it (the watch runs on another
    thread's loop than the webhook's)."""

    def __init__(self) -> None:
        self.ranges: list[LimitRangeView] = []
        self.forget: list[Any] = []
        self.change_during_merge: LimitRangeView | None = None

    def add_index(self, name: str, key: Any) -> None:
        pass

    def has_index(self, name: str) -> bool:
        return False

    def on_add(self, handler: Any) -> None:
        self.forget.append(handler)

    def on_update(self, handler: Any) -> None:
        pass

    def on_delete(self, handler: Any) -> None:
        pass

    def by_index(self, name: str, value: str) -> list[LimitRangeView]:
        found = [lr for lr in self.ranges if lr.namespace == value]
        added, self.change_during_merge = self.change_during_merge, None
        if added is not None:
            self.ranges.append(added)
            for handler in self.forget:
                handler(added)
        return found


def test_limitranges_merged_while_one_was_added_are_merged_again_next_time() -> None:
    cache = _RacingLimitRangeCache()
    limits = LimitRanges(cache)  # type: ignore[arg-type]
    cache.change_during_merge = limitrange_from_dict({
        "metadata": {"namespace": "ns", "name": "lr"},
        "spec": {"limits": [{"type": "Container", "max": {"memory": "1Gi"}}]},
    })
    assert limits("ns") == NO_LIMITS  # merged from what the cache held when the merge began
    assert limits("ns") != NO_LIMITS  # not kept: the LimitRange added meanwhile counts from now on
    assert limits("ns") is limits("ns")
