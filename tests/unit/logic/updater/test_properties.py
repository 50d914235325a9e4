"""Properties over random histories: `InPlace` never evicts; `Off` and `Initial` never act.

Each example builds a small ReplicaSet, then runs a sequence of loop iterations. Between iterations the
clock advances, the recommendation changes, the feature gate and `--in-place-skip-disruption-budget` flip,
the kubelet reports a random resize state (conditions or legacy `status.resize`: Deferred, Infeasible,
InProgress, Error, Proposed, done) and every resize the plan asks for gets a random API answer (success,
403 NodeCapacity, rejected, transient error), fed back the way the loop will: `ResizeAttempt`s and the
`InfeasibleAttempts` tracker.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.logic.updater.test_support import DAY, KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import Action, ResizeAttempt
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.model.features import FeatureGates
from vpa.model.pod import PodCondition, PodView
from vpa.model.settings import UpdaterSettings

STATES = ["done", "Deferred", "Infeasible", "InProgress", "Error", "Unknown",
          "legacy:Proposed", "legacy:InProgress", "legacy:Deferred", "legacy:Infeasible"]  # fmt: skip
API_ANSWERS = ["success", "node-capacity", "rejected", "transient"]


def _with_state(p: PodView, state: str, at: float) -> PodView:
    others = tuple(c for c in p.conditions if c.type not in ("PodResizePending", "PodResizeInProgress"))
    p = replace(p, conditions=others, resize_status=None)
    if state == "done":
        return p
    if state.startswith("legacy:"):
        return replace(p, resize_status=state.removeprefix("legacy:"))
    if state in ("Deferred", "Infeasible", "Unknown"):
        return replace(p, conditions=(*others, PodCondition("PodResizePending", "True", state, "", at)))
    reason = "Error" if state == "Error" else ""
    return replace(p, conditions=(*others, PodCondition("PodResizeInProgress", "True", reason, "", at)))


steps = st.lists(
    st.fixed_dictionaries(
        {
            "states": st.lists(st.sampled_from(STATES), min_size=3, max_size=3),
            "answers": st.lists(st.sampled_from(API_ANSWERS), min_size=3, max_size=3),
            "advance_s": st.sampled_from([0.0, 30.0, 299.0, 301.0, 3599.0, 3601.0, DAY]),
            "cpu_m": st.integers(10, 8000),
            "mem_mi": st.integers(16, 16384),
            "bounds": st.sampled_from([(0.5, 2.0), (1.0, 1.0), (1.5, 3.0), (0.1, 0.5)]),
            "gate": st.booleans(),
            "skip_budget": st.booleans(),
        }
    ),
    min_size=1,
    max_size=8,
)
world = st.fixed_dictionaries(
    {
        "restart": st.lists(
            st.sampled_from([(), ("cpu",), ("memory",), ("cpu", "memory")]), min_size=3, max_size=3
        ),
        "ages": st.lists(st.sampled_from([60.0, 3600.0, DAY]), min_size=3, max_size=3),
        "phases": st.lists(st.sampled_from(["Running", "Running", "Pending"]), min_size=3, max_size=3),
        "oom": st.lists(st.booleans(), min_size=3, max_size=3),
        "limits": st.booleans(),
        "replicas": st.integers(1, 3),
        "min_replicas": st.sampled_from([None, 1, 5]),
        "requests_only": st.booleans(),
    }
)


def _run(mode: str, w: dict[str, Any], history: list[dict[str, Any]]) -> list[Any]:
    """Play the history; return every plan."""
    pods = [
        pod(
            f"web-{i}",
            [ctr(cpu="500m", mem="512Mi", cpu_limit="1" if w["limits"] else None,
                 mem_limit="1Gi" if w["limits"] else None, restart=w["restart"][i])],
            age_s=w["ages"][i],
            phase=w["phases"][i],
            oom=("app", 30.0) if w["oom"][i] else None,
        )
        for i in range(w["replicas"])
    ]  # fmt: skip
    policies = [{"containerName": "*", "controlledValues": "RequestsOnly"}] if w["requests_only"] else None
    now = NOW
    attempts: dict[str, ResizeAttempt] = {}
    tracker = InfeasibleAttempts()
    plans = []
    for step in history:
        now += step["advance_s"]
        pods = [_with_state(p, step["states"][i], now - 1) for i, p in enumerate(pods)]
        cpu, mem = step["cpu_m"], step["mem_mi"] * 2**20
        low, high = step["bounds"]
        recommendation = rec(
            cpu=f"{cpu}m",
            mem=str(mem),
            lower=(f"{int(cpu * low)}m", str(int(mem * low))),
            upper=(f"{int(cpu * high)}m", str(int(mem * high))),
        )
        v = vpa(mode, [recommendation], min_replicas=w["min_replicas"], policies=policies)
        inputs = PassInputs(
            now=now,
            settings=UpdaterSettings(in_place_skip_disruption_budget=step["skip_budget"]),
            gates=FeatureGates.parse(f"InPlace={'true' if step['gate'] else 'false'}"),
            replicas={KEY: w["replicas"]},
            attempts=attempts,
            infeasible=tracker.forget_missing(p.uid for p in pods),
        )
        plan = plan_vpa(v, pods, inputs)
        plans.append(plan)
        tracker = inputs.infeasible
        for uid, attempt in plan.record_infeasible:
            tracker = tracker.record(uid, attempt)
        for decision in plan.actions:
            if decision.action is Action.EVICT:
                continue
            answer = step["answers"][pods.index(decision.pod)]
            uid = decision.pod.uid
            if answer == "success":
                attempts[uid] = ResizeAttempt(now, disruptive=decision.disruptive)
                tracker = tracker.clear(uid)
            elif answer == "node-capacity":
                attempts[uid] = ResizeAttempt(now, rejected=True)
                tracker = tracker.record(uid, decision.attempted())
            elif answer == "rejected":
                attempts[uid] = ResizeAttempt(now, rejected=True)
    return plans


PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROFILE
@given(world, steps)
def test_in_place_mode_never_evicts(w: dict[str, Any], history: list[dict[str, Any]]) -> None:
    for plan in _run("InPlace", w, history):
        assert all(d.action is not Action.EVICT for d in plan.decisions), [
            d.explain() for d in plan.decisions
        ]
        assert all(d.reason for d in plan.decisions)


@PROFILE
@given(st.sampled_from(["Off", "Initial"]), world, steps)
def test_off_and_initial_never_act(mode: str, w: dict[str, Any], history: list[dict[str, Any]]) -> None:
    for plan in _run(mode, w, history):
        assert plan.skip_reason is not None
        assert plan.actions == ()
        assert plan.skipped == ()


@PROFILE
@given(world, steps)
def test_in_place_or_recreate_never_evicts_below_min_replicas(
    w: dict[str, Any], history: list[dict[str, Any]]
) -> None:
    required = w["min_replicas"] if w["min_replicas"] is not None else 2
    for plan in _run("InPlaceOrRecreate", w, history):
        evictions = [d for d in plan.actions if d.action is Action.EVICT]
        if w["replicas"] < required:
            assert all(d.pod.phase == "Pending" for d in evictions)
        # one group: never more running pods evicted than the tolerance allows (one if it rounds to 0)
        running_evicted = [d for d in evictions if d.pod.phase != "Pending"]
        assert len(running_evicted) <= max(1, int(w["replicas"] * 0.5))
