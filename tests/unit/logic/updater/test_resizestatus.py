"""Resize state from the ≥ 1.33 conditions or the legacy `status.resize` field, and the fallback timeouts."""

from __future__ import annotations

import pytest

from tests.unit.logic.updater.test_support import NOW, pod
from vpa.logic.updater.resizestatus import ResizeSource, ResizeState, resize_status

COND = ResizeSource.CONDITIONS
LEGACY = ResizeSource.LEGACY


@pytest.mark.parametrize(
    ("kwargs", "state", "source"),
    [
        ({}, ResizeState.NONE, ResizeSource.NONE),
        ({"pending_reason": "Deferred"}, ResizeState.DEFERRED, COND),
        ({"pending_reason": "Infeasible"}, ResizeState.INFEASIBLE, COND),
        ({"pending_reason": "Something"}, ResizeState.UNKNOWN, COND),
        ({"in_progress_reason": ""}, ResizeState.IN_PROGRESS, COND),
        ({"in_progress_reason": "Error"}, ResizeState.ERROR, COND),
        # both True: the pending one describes the newest desired state
        ({"pending_reason": "Deferred", "in_progress_reason": ""}, ResizeState.DEFERRED, COND),
        ({"legacy": "Proposed"}, ResizeState.PROPOSED, LEGACY),
        ({"legacy": "InProgress"}, ResizeState.IN_PROGRESS, LEGACY),
        ({"legacy": "Deferred"}, ResizeState.DEFERRED, LEGACY),
        ({"legacy": "Infeasible"}, ResizeState.INFEASIBLE, LEGACY),
        # conditions present: the legacy field is not consulted
        ({"legacy": "Infeasible", "in_progress_reason": ""}, ResizeState.IN_PROGRESS, COND),
    ],
    ids=[
        "none", "deferred", "infeasible", "pending-unknown", "in-progress", "kubelet-error", "both",
        "legacy-proposed", "legacy-in-progress", "legacy-deferred", "legacy-infeasible", "conditions-win",
    ],
)  # fmt: skip
def test_state(kwargs: dict[str, str], state: ResizeState, source: ResizeSource) -> None:
    status = resize_status(pod(**kwargs))  # type: ignore[arg-type]
    assert (status.state, status.source) == (state, source)


def test_false_condition_is_not_resizing() -> None:
    from dataclasses import replace

    p = pod(pending_reason="Deferred")
    assert p.resize_pending is not None
    p = replace(p, conditions=(replace(p.resize_pending, status="False"),))
    assert not resize_status(p).resizing


MIN = 60.0


@pytest.mark.parametrize(
    ("kwargs", "elapsed_s", "expected"),
    [
        ({"pending_reason": "Deferred"}, 4 * MIN + 59, False),
        ({"pending_reason": "Deferred"}, 5 * MIN + 1, True),
        ({"pending_reason": "Deferred"}, 5 * MIN, False),  # strictly more than 5 min
        ({"in_progress_reason": ""}, 59 * MIN, False),
        ({"in_progress_reason": ""}, 61 * MIN, True),
        ({"in_progress_reason": "Error"}, 59 * MIN, False),  # a kubelet error waits like in progress
        ({"in_progress_reason": "Error"}, 61 * MIN, True),
        ({"pending_reason": "Infeasible"}, 0.0, True),  # at once
        ({"legacy": "Deferred"}, 5 * MIN + 1, True),
        ({"legacy": "Proposed"}, 59 * MIN, False),
        ({}, 100 * 60 * MIN, False),
    ],
    ids=["deferred-4:59", "deferred-5:01", "deferred-5:00", "in-progress-59m", "in-progress-61m", "error-59m",
         "error-61m", "infeasible", "legacy-deferred-5:01", "legacy-proposed-59m", "not-resizing"],
)  # fmt: skip
def test_timeouts_from_our_patch(kwargs: dict[str, str], elapsed_s: float, expected: bool) -> None:
    # the condition appeared long before our patch: the clock runs from the patch time we pass
    status = resize_status(pod(condition_at=NOW - 10 * 60 * MIN, **kwargs))  # type: ignore[arg-type]
    assert status.timed_out(NOW - elapsed_s, NOW) is expected


def test_timer_falls_back_to_condition_time_then_waits() -> None:
    deferred = resize_status(pod(pending_reason="Deferred", condition_at=NOW - 301))
    assert deferred.timed_out(None, NOW)
    assert not resize_status(pod(pending_reason="Deferred", condition_at=NOW - 299)).timed_out(None, NOW)
    # legacy status has no time: without our patch time the wait cannot be measured
    assert not resize_status(pod(legacy="Deferred")).timed_out(None, NOW + 10**6)


@pytest.mark.parametrize(
    ("reason", "message", "state"),
    [
        ("", "", ResizeState.IN_PROGRESS),  # the kubelet is actuating: nothing to report yet
        ("", "cgroup write failed", ResizeState.UNKNOWN),  # a message without a reason is not "in progress"
        ("Error", "cgroup write failed", ResizeState.ERROR),
        ("Error", "", ResizeState.ERROR),
        ("SomethingNew", "", ResizeState.UNKNOWN),
    ],
    ids=["plain", "message-without-reason", "error-with-message", "error", "unknown-reason"],
)
def test_in_progress_condition_reason_and_message(reason: str, message: str, state: ResizeState) -> None:
    from dataclasses import replace

    from tests.builders import make_condition
    from vpa.kube.converting import pod_from_dict

    p = pod()
    raw_condition = make_condition("PodResizeInProgress", at=NOW - 60, reason=reason, message=message)
    condition = pod_from_dict(
        {"metadata": {"name": "x", "namespace": "default", "uid": "u"}, "spec": {"containers": []},
         "status": {"conditions": [raw_condition]}}
    ).resize_in_progress
    assert condition is not None
    assert resize_status(replace(p, conditions=(condition,))).state is state
