"""The recommender loop's pure pieces: condition updates (spec §1.6/§3.3) and OOM detection (spec §3.2)."""

from __future__ import annotations

import pytest

from vpa.components.recommender import next_conditions, ooms_from_pod_update, with_own_conditions
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.model.pod import ContainerStatusView, ContainerView, PodView
from vpa.model.resources import Resources
from vpa.model.vpa import Condition

MI = 2**20
T0 = 1_767_225_600.0


def types(conditions: tuple[Condition, ...]) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in conditions]


def test_first_recommendation_sets_provided_and_drops_deprecated_and_unsupported() -> None:
    previous = (
        Condition("ConfigDeprecated", "True", T0 - 100),
        Condition("ConfigUnsupported", "True", T0 - 100, message="old"),
        Condition("LowConfidence", "True", T0 - 100),
    )
    got = next_conditions(previous, unsupported=None, pods_matched=True, has_recommendation=True,
                          now=T0 + 0.7)
    assert types(got) == [("LowConfidence", "True", ""), ("RecommendationProvided", "True", "")]
    assert got[1].last_transition_time == T0  # whole seconds, as the API stores it


def test_no_pods_sets_no_pods_matched_and_a_false_provided_with_its_reason() -> None:
    got = next_conditions((), unsupported="Cannot read targetRef", pods_matched=False,
                          has_recommendation=False, now=T0)
    assert types(got) == [
        ("ConfigUnsupported", "True", ""),
        ("NoPodsMatched", "True", "NoPodsMatched"),
        ("RecommendationProvided", "False", "NoPodsMatched"),
    ]
    assert got[0].message == "Cannot read targetRef"
    assert got[1].message == got[2].message == "No pods match this VPA object"


@pytest.mark.parametrize(("same_status", "want_time"), [(True, T0), (False, T0 + 60)],
                         ids=["kept", "moved"])
def test_transition_time_moves_only_when_the_status_changes(same_status: bool, want_time: float) -> None:
    previous = (Condition("RecommendationProvided", "True" if same_status else "False", T0),)
    got = next_conditions(previous, unsupported=None, pods_matched=True, has_recommendation=True, now=T0 + 60)
    assert got[0].last_transition_time == want_time


def pod(restarts: int, state: str, reason: str | None = None, finished: float | None = None,
        last_reason: str | None = None, last_finished: float | None = None,
        memory: int = 256 * MI) -> PodView:
    return PodView(
        "default", "web-1", phase="Running",
        containers=(ContainerView("app", Resources(100, memory)),),
        container_statuses=(ContainerStatusView(
            "app", restart_count=restarts, state=state, state_reason=reason, state_finished_at=finished,
            last_terminated_reason=last_reason, last_terminated_at=last_finished),),
    )


APP = ContainerId(PodId("default", "web-1"), "app")


def test_oom_seen_as_a_restart_uses_last_state_and_the_old_request() -> None:
    old = pod(0, "running", memory=256 * MI)
    new = pod(1, "running", last_reason="OOMKilled", last_finished=T0 + 5, memory=300 * MI)
    kills = ooms_from_pod_update(old, new)
    assert [(k.container_id, k.timestamp, k.memory_bytes) for k in kills] == [(APP, T0 + 5, 256 * MI)]


def test_oom_seen_as_a_terminated_state_uses_its_finish_time_and_the_new_request() -> None:
    old = pod(0, "running")
    new = pod(0, "terminated", reason="OOMKilled", finished=T0 + 9, memory=300 * MI)
    kills = ooms_from_pod_update(old, new)
    assert [(k.timestamp, k.memory_bytes) for k in kills] == [(T0 + 9, 300 * MI)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (pod(1, "running", last_reason="OOMKilled", last_finished=T0),
         pod(1, "running", last_reason="OOMKilled", last_finished=T0)),
        (pod(0, "running"), pod(1, "running", last_reason="Error", last_finished=T0)),
        (pod(0, "terminated", reason="OOMKilled", finished=T0),
         pod(0, "terminated", reason="OOMKilled", finished=T0)),
    ],
    ids=["no-new-restart", "not-oom", "still-terminated"],
)
def test_updates_that_reveal_no_new_oom(old: PodView, new: PodView) -> None:
    assert ooms_from_pod_update(old, new) == []


OWN_CASES = [
    # (case, previous conditions, wanted, expected types with status/message, events due)
    ("raised", (), {"CappedToNode": ("R", "m1")}, {"CappedToNode": "m1"}, ["CappedToNode"]),
    ("unchanged: no new event", (Condition("CappedToNode", "True", 5.0, "R", "m1"),),
     {"CappedToNode": ("R", "m1")}, {"CappedToNode": "m1"}, []),
    ("message changed: event again", (Condition("CappedToNode", "True", 5.0, "R", "m1"),),
     {"CappedToNode": ("R", "m2")}, {"CappedToNode": "m2"}, ["CappedToNode"]),
    ("cleared", (Condition("ConflictingHPA", "True", 5.0, "R", "m"),), {"ConflictingHPA": None}, {}, []),
    ("others kept", (Condition("RecommendationProvided", "True", 5.0, "", ""),), {"ConflictingVPA": None},
     {"RecommendationProvided": ""}, []),
]


@pytest.mark.parametrize(("previous", "wanted", "expected", "events"), [c[1:] for c in OWN_CASES],
                         ids=[c[0] for c in OWN_CASES])
def test_with_own_conditions(previous: tuple[Condition, ...], wanted: dict[str, tuple[str, str] | None],
                             expected: dict[str, str], events: list[str]) -> None:
    conditions, raised = with_own_conditions(previous, wanted, 9.0)
    assert {c.type: c.message for c in conditions} == expected
    assert raised == events


def test_own_condition_keeps_its_transition_time() -> None:
    previous = (Condition("CappedToNode", "True", 5.0, "R", "m1"),)
    (condition,), _ = with_own_conditions(previous, {"CappedToNode": ("R", "m2")}, 9.0)
    assert condition.last_transition_time == 5.0
