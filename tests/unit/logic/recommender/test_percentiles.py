"""AEP-9970 per-container target percentiles: resolution, the ConfigInvalid check, and the estimate."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_vpa
from tests.unit.logic.updater.test_support import KEY, NOW
from tests.unit.logic.updater.test_support import pod as upd_pod
from tests.unit.logic.updater.test_support import rec as upd_rec
from vpa.kube.converting import vpa_from_dict
from vpa.logic.admission.validation import validate_vpa
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.estimation import EstimatorConfig
from vpa.logic.recommender.percentiles import TargetPercentiles, config_invalid, target_percentiles
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.logic.updater.inplace import Reason
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.model.features import FeatureGates
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import ContainerResourcePolicy, ResourcePolicy, VpaView

MIDNIGHT = 1_767_225_600.0
MIB = 1024 * 1024


def _policy(*entries: tuple[str, int | None, int | None]) -> ResourcePolicy:
    return ResourcePolicy(
        tuple(
            ContainerResourcePolicy(name, target_cpu_percentile=cpu, target_memory_percentile=memory)
            for name, cpu, memory in entries
        )
    )


@pytest.mark.parametrize(
    ("policy", "container", "expected"),
    [
        (_policy(), "app", TargetPercentiles(None, None)),
        (_policy(("app", 95, None)), "app", TargetPercentiles(0.95, None)),
        (_policy(("app", 95, None)), "other", TargetPercentiles(None, None)),
        # per resource: the named entry's cpu, the wildcard's memory
        (_policy(("app", 95, None), ("*", 50, 60)), "app", TargetPercentiles(0.95, 0.60)),
        (_policy(("*", 50, 60), ("app", None, 80)), "app", TargetPercentiles(0.50, 0.80)),
        (_policy(("*", 50, 60)), "sidecar", TargetPercentiles(0.50, 0.60)),
    ],
)
def test_resolution_per_resource(policy: ResourcePolicy, container: str, expected: TargetPercentiles) -> None:
    assert target_percentiles(policy, container) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (_policy(("app", 95, 50)), None),  # at the bounds: valid
        (_policy(("app", 90, 90)), None),
        (
            _policy(("app", 99, None)),
            'container "app": cpu target percentile 99 is outside '
            "the recommender's bound percentiles [50, 95]",
        ),
        (
            _policy(("*", None, 10)),
            'container "*": memory target percentile 10 is outside '
            "the recommender's bound percentiles [50, 95]",
        ),
    ],
)
def test_config_invalid_against_the_bound_flags(policy: ResourcePolicy, message: str | None) -> None:
    assert config_invalid(policy, EstimatorConfig()) == message


WEB = Selector.from_match_labels({"app": "web"})


def _targets(policy: ResourcePolicy, per_vpa_config: bool) -> dict[str, Resources]:
    core = RecommenderCore(
        RecommenderConfig.from_settings(RecommenderSettings(), per_vpa_config=per_vpa_config)
    )
    core.cluster.add_or_update_vpa(VpaView(namespace="default", name="web", resource_policy=policy), WEB)
    pod = PodId("default", "web-1")
    core.cluster.add_or_update_pod(pod, {"app": "web"}, "Running", MIDNIGHT)
    for name in ("app", "sidecar"):
        core.cluster.add_or_update_container(ContainerId(pod, name), Resources(100, MIB), MIDNIGHT)
    for minute in range(8 * 1440):
        timestamp = MIDNIGHT + minute * 60
        for name in ("app", "sidecar"):
            # CPU spread from 100m to 1000m; daily memory peaks falling from 800 MiB to 100 MiB (the histogram
            # decays, so the recent, low days weigh most): every percentile reads differently.
            core.cluster.add_cpu_sample(ContainerId(pod, name), 100 + 100 * (minute % 10), timestamp)
            core.cluster.add_memory_sample(
                ContainerId(pod, name), (800 - 100 * (minute // 1440)) * MIB, timestamp
            )
    return {c.container_name: c.target for c in core.recommend("default", "web").containers}


def _amount(value: int | None) -> int:
    assert value is not None
    return value


def test_only_that_containers_cpu_target_moves() -> None:
    policy = _policy(("app", 50, None))
    baseline = _targets(policy, per_vpa_config=False)
    assert baseline["app"] == baseline["sidecar"]  # same usage, same flags
    moved = _targets(policy, per_vpa_config=True)
    assert moved["sidecar"] == baseline["sidecar"]
    assert moved["app"].memory_bytes == baseline["app"].memory_bytes
    assert _amount(moved["app"].cpu_millicores) < _amount(baseline["app"].cpu_millicores)


def test_wildcard_memory_target_moves_every_containers_memory_only() -> None:
    policy = _policy(("*", None, 50))
    baseline = _targets(policy, per_vpa_config=False)
    moved = _targets(policy, per_vpa_config=True)
    for name in ("app", "sidecar"):
        assert moved[name].cpu_millicores == baseline[name].cpu_millicores
        assert _amount(moved[name].memory_bytes) < _amount(baseline[name].memory_bytes)


# --- admission validation and the updater -------------------------------------------------------------------

P = "spec.resourcePolicy.containerPolicies[0].recommendationPercentiles"


@pytest.mark.parametrize(
    ("value", "gates", "old_has_it", "errors"),
    [
        ({"cpu": {"target": 95}, "memory": {"target": 50}}, "PerVPAConfig=true", False, []),
        ({"cpu": {"target": 1}}, "PerVPAConfig=true", False, []),
        (
            {"cpu": {"target": 0}},
            "PerVPAConfig=true",
            False,
            [f"{P}.cpu.target: Invalid value: 0: must be between 1 and 100"],
        ),
        (
            {"memory": {"target": 101}},
            "PerVPAConfig=true",
            False,
            [f"{P}.memory.target: Invalid value: 101: must be between 1 and 100"],
        ),
        (
            {"memory": {"target": "p95"}},
            "PerVPAConfig=true",
            False,
            [f'{P}.memory.target: Invalid value: "p95": expected an integer, got string'],
        ),
        ({"cpu": {}}, "PerVPAConfig=true", False, [f"{P}.cpu.target: Required value"]),
        (
            {"gpu": {"target": 50}},
            "PerVPAConfig=true",
            False,
            [f'{P}: Unsupported value: "gpu": supported values: "cpu", "memory"'],
        ),
        (
            {"cpu": {"target": 95}},
            "",
            False,
            [f"{P}: Forbidden: not supported when feature flag PerVPAConfig is disabled"],
        ),
        ({"cpu": {"target": 95}}, "", True, []),  # the old object had it
    ],
)
def test_validation(value: dict[str, Any], gates: str, old_has_it: bool, errors: list[str]) -> None:
    raw = make_vpa(container_policies=[{"containerName": "app", "recommendationPercentiles": value}])
    old = (
        make_vpa(
            container_policies=[
                {"containerName": "app", "recommendationPercentiles": {"cpu": {"target": 90}}}
            ]
        )
        if old_has_it
        else None
    )
    result = validate_vpa(raw, FeatureGates.parse(gates), old=old)
    assert [str(e) for e in result.errors] == errors
    if result.allowed:
        view = vpa_from_dict(raw)
        assert view.resource_policy.container_policies[0].target_cpu_percentile == value.get("cpu", {}).get(
            "target"
        )


@pytest.mark.parametrize(("status", "skipped"), [("True", True), ("False", False), (None, False)])
def test_updater_leaves_a_config_invalid_vpa_alone(status: str | None, skipped: bool) -> None:
    conditions = [] if status is None else [{"type": "ConfigInvalid", "status": status}]
    raw = make_vpa(
        update_mode="Recreate",
        recommendation=[upd_rec(cpu="2", lower=("1500m", "1Mi"))],
        conditions=conditions,
    )
    view = vpa_from_dict(raw)
    pods = [upd_pod(f"web-{i}") for i in range(3)]
    plan = plan_vpa(view, pods, PassInputs(now=NOW, replicas={KEY: 3}))
    assert (plan.skip_reason is Reason.CONFIG_INVALID) is skipped
    assert bool(plan.actions) is not skipped
