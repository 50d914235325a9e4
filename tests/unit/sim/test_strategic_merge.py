"""The API server's strategic merge patch: every list with a merge key merges by it, the others are replaced.

Kubernetes is the reference: the merge keys are the `patchMergeKey` tags of the core/v1, apps/v1 and
admissionregistration/v1 Go types; lists without `patchStrategy:"merge"` (e.g. `status.containerStatuses`)
are atomic and a strategic patch replaces them whole.
"""

from __future__ import annotations

from typing import Any

import pytest

from vpa.sim.apiserver.patching import MERGE_KEYS, PRIMITIVE_MERGE, strategic_merge


@pytest.mark.parametrize(("field", "key"), sorted(MERGE_KEYS.items()), ids=sorted(MERGE_KEYS))
def test_every_merge_key_merges_updates_appends_and_deletes(field: str, key: str) -> None:
    original = {field: [{key: "a", "x": 1}, {key: "b", "x": 1}, {key: "c", "x": 1}]}
    patch = {
        field: [
            {key: "b", "y": 2},  # merged into b
            {key: "d", "x": 4},  # appended
            {key: "c", "$patch": "delete"},  # removed
        ]
    }
    out = strategic_merge(original, patch)
    assert out[field] == [{key: "a", "x": 1}, {key: "b", "x": 1, "y": 2}, {key: "d", "x": 4}]
    assert original[field][1] == {key: "b", "x": 1}  # the input is not changed


def test_conditions_merge_by_type_keeping_the_others() -> None:
    status: dict[str, Any] = {
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": "t0"},
        ]
    }
    out = strategic_merge(
        status,
        {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": None, "lastTransitionTime": "t1"},
                {"type": "PodResizePending", "status": "True", "reason": "Deferred"},
            ]
        },
    )
    assert out["conditions"] == [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t0"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "t1"},
        {"type": "PodResizePending", "status": "True", "reason": "Deferred"},
    ]
    # `$setElementOrder` (as kubectl sends it) reorders by type.
    ordered = strategic_merge(
        out,
        {
            "$setElementOrder/conditions": [
                {"type": "Ready"},
                {"type": "PodScheduled"},
                {"type": "PodResizePending"},
            ]
        },
    )
    assert [c["type"] for c in ordered["conditions"]] == ["Ready", "PodScheduled", "PodResizePending"]


def test_ports_merge_by_container_port_and_finalizers_as_a_set() -> None:
    container = {"ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}]}
    out = strategic_merge(container, {"ports": [{"containerPort": 443, "protocol": "TCP"}]})
    assert out["ports"] == [
        {"containerPort": 80, "name": "http"},
        {"containerPort": 443, "name": "https", "protocol": "TCP"},
    ]
    assert sorted(PRIMITIVE_MERGE) == ["finalizers"]
    md = {"finalizers": ["a", "b"]}
    assert strategic_merge(md, {"finalizers": ["b", "c"]}) == {"finalizers": ["a", "b", "c"]}
    assert strategic_merge(md, {"$deleteFromPrimitiveList/finalizers": ["a"]}) == {"finalizers": ["b"]}


@pytest.mark.parametrize(
    "field",
    ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "args", "tolerations"],
)
def test_lists_without_a_merge_strategy_are_replaced(field: str) -> None:
    original = {field: [{"name": "a", "x": 1}, {"name": "b", "x": 1}]}
    out = strategic_merge(original, {field: [{"name": "b", "y": 2}]})
    assert out == {field: [{"name": "b", "y": 2}]}
