"""Property tests for the pod patch: random valid pods (as the API server hands them to the webhook, after
defaulting and LimitRanger), random recommendations, policies and LimitRanges never make the builder raise,
and the patched pod never has a limit below its request. (Schema validity of patched pods is checked on
every table row in `test_admission_patches.py`; doing it here too would cost ~50 ms per example.)"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import make_container, make_pod, make_recommendation, make_vpa
from tests.unit.logic.admission.test_patches import apply_patch
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import AdmissionOptions, pod_patch, pod_shape
from vpa.logic.limitranges import namespace_limits
from vpa.model.features import FeatureGates
from vpa.model.limitrange import limitrange_from_dict
from vpa.model.quantity import Quantity

JSON = dict[str, Any]
CPU = st.integers(1, 8000)  # millicores
MEMORY = st.integers(1, 2**36)  # bytes
RESOURCES = ("cpu", "memory")


def _text(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def _maybe(strategy: st.SearchStrategy[int]) -> st.SearchStrategy[int | None]:
    return st.none() | strategy


@st.composite
def resource_list(draw: st.DrawFn) -> JSON | None:
    if draw(st.booleans()):
        return None
    out = {}
    for resource, amounts in (("cpu", CPU), ("memory", MEMORY)):
        value = draw(_maybe(amounts))
        if value is not None:
            out[resource] = _text(resource, value)
    return out


@st.composite
def scenario(draw: st.DrawFn) -> tuple[JSON, JSON, list[JSON], AdmissionOptions]:
    drawn_default: JSON | None = draw(resource_list())
    default_limits: JSON = drawn_default or {}
    container_lr: JSON = {
        "type": "Container",
        "min": draw(resource_list()),
        "max": draw(resource_list()),
        "default": default_limits or None,
    }
    pod_lr = {"type": "Pod", "min": draw(resource_list()), "max": draw(resource_list())}
    containers = []
    recommendations = []
    policies = []
    for index in range(draw(st.integers(1, 3))):
        name = f"c{index}"
        amounts: dict[str, str | None] = {}
        for resource, strategy in (("cpu", CPU), ("memory", MEMORY)):
            request = draw(_maybe(strategy))
            limit = None
            if draw(st.booleans()):
                limit = (request or draw(strategy)) * draw(st.integers(1, 4)) + draw(st.integers(0, 100))
            default = default_limits.get(resource)
            if limit is None and default is not None:  # LimitRanger: default limit (and request at most it)
                limit = Quantity.parse(default).millis if resource == "cpu" else Quantity.parse(default).value
            if limit is not None and (request is None or request > limit):
                request = limit  # API defaulting: request = limit
            amounts[f"{resource}_request"] = None if request is None else _text(resource, request)
            amounts[f"{resource}_limit"] = None if limit is None else _text(resource, limit)
        containers.append(make_container(name, **amounts))  # type: ignore[arg-type]
        if draw(st.integers(0, 3)):
            target = {
                r: _text(r, draw(st.integers(0, 20000) if r == "cpu" else MEMORY))
                for r in RESOURCES
                if draw(st.booleans())
            }
            recommendations.append(make_recommendation(name, target=target))
        if draw(st.integers(0, 3)):
            policy: JSON = {"containerName": draw(st.sampled_from([name, "*"]))}
            for key, values in (
                ("mode", ["Auto", "Auto", "Off"]),
                ("controlledValues", ["RequestsAndLimits", "RequestsOnly"]),
                ("controlledResources", [["cpu"], ["memory"], ["cpu", "memory"], []]),
            ):
                if draw(st.integers(0, 3)):
                    policy[key] = draw(st.sampled_from(values))
            for key in ("minAllowed", "maxAllowed"):
                if (allowed := draw(resource_list())) is not None:
                    policy[key] = allowed
            if draw(st.booleans()):
                policy["startupBoost"] = {"cpu": {"type": "Factor", "factor": draw(st.integers(1, 4))}}
            policies.append(policy)
    raw_pod = make_pod(containers=containers)
    raw_pod.pop("status")
    raw_vpa = make_vpa(
        update_mode=draw(st.sampled_from(["Recreate", "Initial", "Off", "InPlaceOrRecreate"])),
        container_policies=policies or None,
        recommendation=recommendations or None,
        startup_boost={"cpu": {"type": "Quantity", "quantity": "500m"}} if draw(st.booleans()) else None,
    )
    ranges = [{k: v for k, v in item.items() if v is not None} for item in (container_lr, pod_lr)]
    options = AdmissionOptions(
        gates=FeatureGates.parse(draw(st.sampled_from(["", "CPUStartupBoost=true"]))),
        max_allowed_cpu_boost_millicores=draw(_maybe(CPU)),
    )
    return raw_pod, raw_vpa, ranges, options


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenario())
def test_patch_never_raises_and_keeps_limits_above_requests(
    case: tuple[JSON, JSON, list[JSON], AdmissionOptions],
) -> None:
    raw_pod, raw_vpa, ranges, options = case
    limits = namespace_limits(
        [limitrange_from_dict({"metadata": {"name": "lr"}, "spec": {"limits": ranges}})]
    )
    ops = pod_patch(pod_from_dict(raw_pod), pod_shape(raw_pod), vpa_from_dict(raw_vpa), limits, options)
    patched = apply_patch(raw_pod, ops)
    for container in patched["spec"]["containers"]:
        resources = container.get("resources", {})
        for resource, limit in resources.get("limits", {}).items():
            request = resources.get("requests", {}).get(resource)
            if request is not None:
                assert Quantity.parse(limit) >= Quantity.parse(request), (container["name"], resource, ops)
