"""Replica groups, minReplicas, eviction tolerance and the per-pass disruption budget (spec §4.3)."""

from __future__ import annotations

import pytest

from tests.unit.logic.updater.test_support import KEY, RS, pod, vpa
from vpa.logic.updater.restrictions import GroupKey, GroupProblem, build_groups
from vpa.model.settings import UpdaterSettings

UPSTREAM = UpdaterSettings(in_place_skip_disruption_budget=False)


def _pods(count: int, pending: int = 0, owner_kind: str = "ReplicaSet") -> list:  # type: ignore[type-arg]
    return [
        pod(f"web-{i}", phase="Pending" if i < pending else "Running", owner_kind=owner_kind)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("configured", "tolerance", "allowed"),
    [(4, 0.5, 2), (10, 0.5, 5), (3, 0.5, 1), (2, 0.5, 1), (5, 0.0, 1), (4, 1.0, 4)],
    ids=["4@0.5", "10@0.5", "3@0.5", "2@0.5", "zero-tolerance-one-goes", "4@1.0"],
)
def test_disruptions_per_pass(configured: int, tolerance: float, allowed: int) -> None:
    groups, problems = build_groups(
        _pods(configured), vpa(), UpdaterSettings(eviction_tolerance=tolerance), {KEY: configured}
    )
    assert not problems
    group = groups[KEY]
    done = 0
    while group.is_disruptable() and done < 100:
        group.charge_in_place() if done % 2 else group.charge_eviction(pod())
        done += 1
    assert done == allowed


def test_pending_pods_are_not_running_but_may_be_evicted() -> None:
    groups, _ = build_groups(_pods(3, pending=1), vpa(), UpdaterSettings(), {KEY: 3})
    group = groups[KEY]
    assert (group.live, group.pending, group.running, group.tolerance) == (3, 1, 2, 1)
    assert not group.is_disruptable()  # 2 running − 0 > 3 − 1 fails; not fully running
    assert group.can_evict(pod(phase="Pending"))
    assert not group.can_evict(pod())
    group.charge_eviction(pod(phase="Pending"))
    assert group.evicted == 0  # evicting a Pending pod costs nothing


@pytest.mark.parametrize(
    ("mode", "settings", "min_replicas", "expected"),
    [
        ("Recreate", UpdaterSettings(), None, GroupProblem.BELOW_MIN_REPLICAS),
        ("InPlaceOrRecreate", UPSTREAM, None, GroupProblem.BELOW_MIN_REPLICAS),
        ("InPlaceOrRecreate", UpdaterSettings(), None, "kept-below-min"),
        ("InPlace", UpdaterSettings(), None, "kept-below-min"),
        ("Recreate", UpdaterSettings(), 1, "kept"),  # per-VPA minReplicas overrides the flag
        ("Recreate", UpdaterSettings(min_replicas=1), None, "kept"),
    ],
    ids=["recreate", "in-place-upstream", "in-place-default", "inplace-default", "per-vpa-min", "flag-min"],
)
def test_single_replica_group(
    mode: str, settings: UpdaterSettings, min_replicas: int | None, expected: object
) -> None:
    groups, problems = build_groups([pod()], vpa(mode, min_replicas=min_replicas), settings, {KEY: 1})
    if isinstance(expected, GroupProblem):
        assert problems == {KEY: expected}
        assert not groups
        return
    group = groups[KEY]
    assert group.below_min_replicas is (expected == "kept-below-min")
    if group.below_min_replicas:
        assert not group.can_evict(pod())
        assert not group.can_disrupt_in_place()
    else:
        assert group.can_evict(pod())  # one of a fully running group may go even with tolerance 0


@pytest.mark.parametrize(
    ("kind", "supplied", "expected"),
    [
        ("ReplicaSet", None, GroupProblem.REPLICAS_UNKNOWN),
        ("StatefulSet", 0, GroupProblem.REPLICAS_UNKNOWN),
        ("DaemonSet", 4, 4),
        ("Job", None, 4),  # a Job counts its live pods
        ("CustomScalable", None, 0),  # upstream: unknown kinds count 0 ...
        ("CustomScalable", 6, 6),  # ... unless the caller knows better
    ],
    ids=["rs-missing", "sts-zero", "ds", "job", "other-kind", "other-kind-supplied"],
)
def test_configured_replicas(kind: str, supplied: int | None, expected: object) -> None:
    key = GroupKey("default", kind, RS)
    replicas = {key: supplied} if supplied is not None else {}
    groups, problems = build_groups(_pods(4, owner_kind=kind), vpa(), UpdaterSettings(), replicas)
    if isinstance(expected, GroupProblem):
        assert problems == {key: expected}
    else:
        assert groups[key].configured == expected


def test_pods_without_controller_form_no_group() -> None:
    groups, problems = build_groups([pod(owner=None)], vpa(), UpdaterSettings(), {})
    assert not groups
    assert not problems
