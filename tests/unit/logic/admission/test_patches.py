"""Pod admission: capping, proportional limits and the exact JSON patch, each row derived by hand.

Every patched pod is applied with a tiny RFC 6902 `add` applier and validated against the Kubernetes 1.35
schema (kubernetes-validate, strict), and checked for limit ≥ request.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from tests.builders import make_container, make_pod, make_recommendation, make_vpa
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import AdmissionOptions, escape_pointer, pod_patch, pod_shape
from vpa.logic.capping import (
    MAX_INT64,
    boundary_request,
    cap_pod_recommendations,
    container_resources_for_pod,
    proportional_limit,
)
from vpa.logic.limitranges import NO_LIMITS, NamespaceLimits, namespace_limits
from vpa.model.features import FeatureGates
from vpa.model.limitrange import limitrange_from_dict
from vpa.model.quantity import Quantity
from vpa.model.resources import Resources

JSON = dict[str, Any]
DEFAULT_OPTIONS = AdmissionOptions()
BOOST = AdmissionOptions(gates=FeatureGates.parse("CPUStartupBoost=true"))


# --- helpers --------------------------------------------------------------------------------------------


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(obj: JSON, ops: list[JSON]) -> JSON:
    """RFC 6902 `add` only (all the webhook emits): the parent must exist; objects get the member set."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] == "add", op
        tokens = [_unescape(t) for t in op["path"].split("/")[1:]]
        parent: Any = out
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        else:
            assert isinstance(parent, dict), f"parent of {op['path']} is not an object"
            parent[last] = copy.deepcopy(op["value"])
    return out


def check_patched_pod(raw_pod: JSON, ops: list[JSON]) -> JSON:
    patched = apply_patch(raw_pod, ops)
    kubernetes_validate.validate(patched, "1.35.0", strict=True)
    for container in patched["spec"]["containers"]:
        resources = container.get("resources", {})
        for name, limit in resources.get("limits", {}).items():
            request = resources.get("requests", {}).get(name)
            if request is not None:
                assert Quantity.parse(limit) >= Quantity.parse(request), (container["name"], name)
    return patched


def admission_pod(*containers: JSON, annotations: dict[str, str] | None = None) -> JSON:
    """A pod as the webhook sees it on CREATE: defaulted spec, no status."""
    raw = make_pod(containers=list(containers), annotations=annotations)
    raw.pop("status")
    if annotations is None:
        raw["metadata"].pop("annotations", None)
    return raw


def container(name: str = "app", **resources: str | None) -> JSON:
    args: dict[str, str | None] = {
        "cpu_request": None,
        "memory_request": None,
        "cpu_limit": None,
        "memory_limit": None,
    }
    args.update(resources)
    return make_container(name, **args)  # type: ignore[arg-type]


def rec(name: str = "app", **target: str) -> JSON:
    return make_recommendation(name, target=dict(target))


def vpa_json(
    *recommendations: JSON, policies: list[JSON] | None = None, mode: str | None = "Recreate", **kw: Any
) -> JSON:
    return make_vpa(recommendation=list(recommendations), container_policies=policies, update_mode=mode, **kw)


def limit_ranges(*items: JSON) -> NamespaceLimits:
    return namespace_limits(
        [
            limitrange_from_dict(
                {"metadata": {"namespace": "default", "name": "lr"}, "spec": {"limits": list(items)}}
            )
        ]
    )


def patch_for(
    raw_pod: JSON,
    raw_vpa: JSON,
    limits: NamespaceLimits = NO_LIMITS,
    options: AdmissionOptions = DEFAULT_OPTIONS,
) -> list[JSON]:
    return pod_patch(pod_from_dict(raw_pod), pod_shape(raw_pod), vpa_from_dict(raw_vpa), limits, options)


def by_path(ops: list[JSON]) -> dict[str, Any]:
    return {op["path"]: op["value"] for op in ops}


NO_CPU_LIMIT = "cpu: limit NOT set since originalLimit is nil or 0"
NO_MEMORY_LIMIT = "memory: limit NOT set since originalLimit is nil or 0"
C0 = "/spec/containers/0/resources"
C1 = "/spec/containers/1/resources"
UPDATES = "/metadata/annotations/vpaUpdates"
OBSERVED = "/metadata/annotations/vpaObservedContainers"


# --- the upstream docs' example, three ways -----------------------------------------------------------------

DOCS_POD = admission_pod(container(cpu_request="500m", memory_request="1G", memory_limit="2G"))
DOCS_VPA_REC = rec(cpu="1000m", memory="2G")


def test_docs_example_limit_kept_proportional() -> None:
    # memory limit/request = 2G/1G = 2 → new limit = 2 × 2G = 4G; no CPU limit to scale (note, as upstream).
    ops = patch_for(DOCS_POD, vpa_json(DOCS_VPA_REC))
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": f"{C0}/requests/cpu", "value": "1"},
        {"op": "add", "path": f"{C0}/requests/memory", "value": "2G"},
        {"op": "add", "path": f"{C0}/limits/memory", "value": "4G"},
        {
            "op": "add",
            "path": UPDATES,
            "value": "Pod resources updated by web-vpa: "
            f"container 0: {NO_CPU_LIMIT}, cpu request, memory request, memory limit",
        },
        {"op": "add", "path": OBSERVED, "value": "app"},
    ]
    check_patched_pod(DOCS_POD, ops)


def test_docs_example_limit_range_max_lowers_the_request() -> None:
    # Container LimitRange max memory 3G. Max request keeping the ratio = 1G × 3G / 2G = 1.5G, so the
    # recommended 2G is capped to 1.5G and the limit becomes 2 × 1.5G = 3G = the LimitRange max.
    limits = limit_ranges({"type": "Container", "max": {"memory": "3G"}})
    ops = patch_for(DOCS_POD, vpa_json(DOCS_VPA_REC), limits)
    paths = by_path(ops)
    assert paths[f"{C0}/requests/memory"] == "1500M"
    assert paths[f"{C0}/limits/memory"] == "3G"
    assert paths[f"{C0}/requests/cpu"] == "1"
    assert paths[UPDATES] == (
        "Pod resources updated by web-vpa: container 0: memory capped to fit Max in container LimitRange, "
        f"{NO_CPU_LIMIT}, cpu request, memory request, memory limit"
    )
    check_patched_pod(DOCS_POD, ops)


def test_docs_example_policy_min_allowed_wins_over_limit_range() -> None:
    # Same LimitRange, plus minAllowed 750m / 2G. LimitRange first caps memory to 1.5G, then the policy
    # raises it back to 2G (policy wins); limit = 2 × 2G = 4G although that exceeds the LimitRange max.
    # CPU 1000m ≥ 750m: untouched.
    limits = limit_ranges({"type": "Container", "max": {"memory": "3G"}})
    policy = {"containerName": "app", "minAllowed": {"cpu": "750m", "memory": "2G"}}
    ops = patch_for(DOCS_POD, vpa_json(DOCS_VPA_REC, policies=[policy]), limits)
    paths = by_path(ops)
    assert (paths[f"{C0}/requests/cpu"], paths[f"{C0}/requests/memory"], paths[f"{C0}/limits/memory"]) == (
        "1",
        "2G",
        "4G",
    )
    assert paths[UPDATES] == (
        "Pod resources updated by web-vpa: container 0: memory capped to fit Max in container LimitRange, "
        f"memory capped to minAllowed, {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
    )
    check_patched_pod(DOCS_POD, ops)


# --- table: one container, requests/limits after processing -------------------------------------------------

CASES: list[tuple[str, JSON, JSON, NamespaceLimits, dict[str, str], dict[str, str], tuple[str, ...]]] = [
    (
        # 250m→300m with limit 500m: 500 × 300 / 250 = 600m; memory 256Mi/512Mi → 300M/600M.
        "requests-and-limits",
        container(cpu_request="250m", memory_request="256Mi", cpu_limit="500m", memory_limit="512Mi"),
        vpa_json(rec(cpu="300m", memory="300M")),
        NO_LIMITS,
        {"cpu": "300m", "memory": "300M"},
        {"cpu": "600m", "memory": "600M"},
        (),
    ),
    (
        # Ratio 1000/300 kept with floor: 1000 × 200 / 300 = 666.67 → 666m.
        "ratio-floored",
        container(cpu_request="300m", cpu_limit="1"),
        vpa_json(rec(cpu="200m")),
        NO_LIMITS,
        {"cpu": "200m"},
        {"cpu": "666m"},
        (NO_MEMORY_LIMIT,),
    ),
    (
        # request == limit (Guaranteed): the limit follows the request.
        "equal-request-and-limit",
        container(cpu_request="500m", memory_request="1Gi", cpu_limit="500m", memory_limit="1Gi"),
        vpa_json(rec(cpu="700m", memory="2G")),
        NO_LIMITS,
        {"cpu": "700m", "memory": "2G"},
        {"cpu": "700m", "memory": "2G"},
        (),
    ),
    (
        # No limits at all: only requests (and no "limit NOT set" notes, as upstream).
        "no-limits",
        container(cpu_request="100m", memory_request="100M"),
        vpa_json(rec(cpu="150m", memory="200M")),
        NO_LIMITS,
        {"cpu": "150m", "memory": "200M"},
        {},
        (),
    ),
    (
        # RequestsOnly: CPU 900m capped to the 800m limit; limits never patched.
        "requests-only-capped-to-limit",
        container(cpu_request="200m", memory_request="100M", cpu_limit="800m", memory_limit="1G"),
        vpa_json(
            rec(cpu="900m", memory="300M"),
            policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}],
        ),
        NO_LIMITS,
        {"cpu": "800m", "memory": "300M"},
        {},
        ("cpu capped to container limit",),
    ),
    (
        # controlledResources [memory]: the CPU recommendation is ignored, the CPU limit is left alone.
        "controlled-resources-memory-only",
        container(cpu_request="100m", memory_request="100M", cpu_limit="200m", memory_limit="200M"),
        vpa_json(
            rec(cpu="900m", memory="150M"),
            policies=[{"containerName": "app", "controlledResources": ["memory"]}],
        ),
        NO_LIMITS,
        {"memory": "150M"},
        {"memory": "300M"},
        ("cpu: limit NOT set since recommendedRequest is nil or 0",),
    ),
    (
        # Container LimitRange min 200m. Request/limit = 100/200: min request for the limit = 100 × 200 / 200
        # = 100m, and the request itself must reach 200m → 200m; limit 200 × 200 / 100 = 400m.
        "limit-range-min",
        container(cpu_request="100m", cpu_limit="200m"),
        vpa_json(rec(cpu="50m")),
        limit_ranges({"type": "Container", "min": {"cpu": "200m"}}),
        {"cpu": "200m"},
        {"cpu": "400m"},
        ("cpu capped to fit Min in container LimitRange", NO_MEMORY_LIMIT),
    ),
    (
        # LimitRange default 400m stands in for the missing limit: 400 × 200 / 100 = 800m.
        "limit-range-default-as-limit",
        container(cpu_request="100m"),
        vpa_json(rec(cpu="200m")),
        limit_ranges({"type": "Container", "default": {"cpu": "400m"}}),
        {"cpu": "200m"},
        {"cpu": "800m"},
        (NO_MEMORY_LIMIT,),
    ),
    (
        # Policy maxAllowed below the LimitRange max: the policy caps.
        "policy-max-allowed",
        container(cpu_request="100m", cpu_limit="300m"),
        vpa_json(rec(cpu="2"), policies=[{"containerName": "app", "maxAllowed": {"cpu": "1"}}]),
        limit_ranges({"type": "Container", "max": {"cpu": "6"}}),
        {"cpu": "1"},
        {"cpu": "3"},
        ("cpu capped to maxAllowed", NO_MEMORY_LIMIT),
    ),
    (
        # Overflow: 8e18 bytes limit for a 1-byte request; 2 bytes recommended → 1.6e19 > int64: capped.
        "int64-overflow",
        container(memory_request="1", memory_limit="8E"),
        vpa_json(rec(memory="2")),
        NO_LIMITS,
        {"memory": "2"},
        {"memory": str(Quantity.from_int(MAX_INT64))},
        (NO_CPU_LIMIT, "memory: failed to keep limit to request ratio; capping limit to int64"),
    ),
]


@pytest.mark.parametrize(
    ("raw_container", "raw_vpa", "limits", "requests", "expected_limits", "notes"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_single_container(
    raw_container: JSON,
    raw_vpa: JSON,
    limits: NamespaceLimits,
    requests: dict[str, str],
    expected_limits: dict[str, str],
    notes: tuple[str, ...],
) -> None:
    raw_pod = admission_pod(raw_container)
    [result] = container_resources_for_pod(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), limits)
    assert result.requests == Resources.from_resource_list(requests)
    assert result.limits == Resources.from_resource_list(expected_limits)
    assert result.notes == notes
    ops = patch_for(raw_pod, raw_vpa, limits)
    patched = check_patched_pod(raw_pod, ops)
    resources = patched["spec"]["containers"][0]["resources"]
    for name, value in requests.items():
        assert resources["requests"][name] == value
    for name, value in expected_limits.items():
        assert resources["limits"][name] == value


# --- pod-level LimitRange ----------------------------------------------------------------------------------


def test_pod_limit_range_max_scales_requests_down() -> None:
    # Two containers 100m/200m (ratio 2), 400m recommended each → limits 800m + 800m = 1600m > Pod max 1000m.
    # Each request × 1000/1600 (floor): 250m; limits 500m each, summing exactly to the max.
    raw_pod = admission_pod(
        container("a", cpu_request="100m", cpu_limit="200m"),
        container("b", cpu_request="100m", cpu_limit="200m"),
    )
    raw_vpa = vpa_json(rec("a", cpu="400m"), rec("b", cpu="400m"))
    limits = limit_ranges({"type": "Pod", "max": {"cpu": "1"}})
    results = container_resources_for_pod(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), limits)
    assert [(r.requests.cpu_millicores, r.limits.cpu_millicores) for r in results] == [(250, 500), (250, 500)]
    check_patched_pod(raw_pod, patch_for(raw_pod, raw_vpa, limits))


def test_pod_limit_range_min_scales_requests_up() -> None:
    # Σ recommendations 200M + 300M = 500M < Pod min 1G (Σ limits 1G ≠ 0) → × 1G/500M (round up): 400M, 600M;
    # limits (ratio 2) 800M and 1.2G.
    raw_pod = admission_pod(
        container("a", memory_request="100M", memory_limit="200M"),
        container("b", memory_request="100M", memory_limit="200M"),
    )
    raw_vpa = vpa_json(rec("a", memory="200M"), rec("b", memory="300M"))
    limits = limit_ranges({"type": "Pod", "min": {"memory": "1G"}})
    results = container_resources_for_pod(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), limits)
    assert [(r.requests.memory_bytes, r.limits.memory_bytes) for r in results] == [
        (400_000_000, 800_000_000),
        (600_000_000, 1_200_000_000),
    ]
    check_patched_pod(raw_pod, patch_for(raw_pod, raw_vpa, limits))


def test_pod_limit_range_rounds_up_in_millicores() -> None:
    # Σ = 100m + 200m = 300m < min 1000m; 100 × 1000 / 300 = 333.3 → 334m, 200 × 1000 / 300 = 666.7 → 667m.
    raw_pod = admission_pod(
        container("a", cpu_request="50m", cpu_limit="50m"), container("b", cpu_request="50m", cpu_limit="50m")
    )
    raw_vpa = vpa_json(rec("a", cpu="100m"), rec("b", cpu="200m"))
    limits = limit_ranges({"type": "Pod", "min": {"cpu": "1"}})
    results = container_resources_for_pod(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), limits)
    assert [r.requests.cpu_millicores for r in results] == [334, 667]
    patched = check_patched_pod(raw_pod, patch_for(raw_pod, raw_vpa, limits))
    assert [c["resources"]["requests"]["cpu"] for c in patched["spec"]["containers"]] == ["334m", "667m"]


def test_pod_limit_range_keeps_unrecommended_container() -> None:
    # Sidecar has no recommendation: it counts in the sums (limit 200m) but is never changed.
    # Σ limits = 800m (app: 2 × 400m) + 200m = 1000m > max 500m → app 400 × 500/1000 = 200m, limit 400m.
    raw_pod = admission_pod(
        container("app", cpu_request="100m", cpu_limit="200m"),
        container("sidecar", cpu_request="100m", cpu_limit="200m"),
    )
    raw_vpa = vpa_json(rec("app", cpu="400m"))
    limits = limit_ranges({"type": "Pod", "max": {"cpu": "500m"}})
    results = container_resources_for_pod(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), limits)
    assert (results[0].requests.cpu_millicores, results[0].limits.cpu_millicores) == (200, 400)
    assert results[1].requests.is_empty()
    assert results[1].limits.is_empty()
    patched = check_patched_pod(raw_pod, patch_for(raw_pod, raw_vpa, limits))
    assert patched["spec"]["containers"][1] == raw_pod["spec"]["containers"][1]


def test_limit_range_merge_lowest_max_highest_min_last_default() -> None:
    ranges = [
        limitrange_from_dict(
            {
                "metadata": {"name": "a"},
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "max": {"cpu": "2", "memory": "1G"},
                            "min": {"cpu": "10m"},
                            "default": {"cpu": "1"},
                        }
                    ]
                },
            }
        ),
        limitrange_from_dict(
            {
                "metadata": {"name": "b"},
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "max": {"cpu": "1"},
                            "min": {"cpu": "20m", "memory": "1M"},
                            "default": {"memory": "2G"},
                        },
                        {"type": "Pod", "max": {"cpu": "4"}},
                    ]
                },
            }
        ),
    ]
    merged = namespace_limits(ranges)
    assert merged.container is not None
    assert merged.pod is not None
    assert merged.container.max is not None
    assert merged.container.min is not None
    assert (merged.container.max.cpu_millicores, merged.container.max.memory_bytes) == (1000, 1_000_000_000)
    assert (merged.container.min.cpu_millicores, merged.container.min.memory_bytes) == (20, 1_000_000)
    assert merged.container.default is not None
    assert (merged.container.default.cpu_millicores, merged.container.default.memory_bytes) == (
        None,
        2_000_000_000,
    )
    assert merged.pod.max is not None
    assert merged.pod.max.cpu_millicores == 4000
    assert namespace_limits([]) == NO_LIMITS


# --- multi-container patches, exact strings -----------------------------------------------------------------


def test_multi_container_patch_exact() -> None:
    raw_pod = admission_pod(
        container("app", cpu_request="250m", memory_request="256Mi", memory_limit="512Mi"),
        container("log-shipper", cpu_request="50m"),
        container("bare"),  # no recommendation and no resources: upstream's empty entry quirk
        annotations={"team": "web"},
    )
    raw_vpa = vpa_json(rec("app", cpu="300m", memory="300M"), rec("log-shipper", cpu="20m", memory="50M"))
    ops = patch_for(raw_pod, raw_vpa)
    assert ops == [
        {"op": "add", "path": f"{C0}/requests/cpu", "value": "300m"},
        {"op": "add", "path": f"{C0}/requests/memory", "value": "300M"},
        {"op": "add", "path": f"{C0}/limits/memory", "value": "600M"},
        {"op": "add", "path": f"{C1}/requests/cpu", "value": "20m"},
        {"op": "add", "path": f"{C1}/requests/memory", "value": "50M"},
        {"op": "add", "path": "/spec/containers/2/resources", "value": {}},
        {
            "op": "add",
            "path": UPDATES,
            "value": "Pod resources updated by web-vpa: "
            f"container 0: {NO_CPU_LIMIT}, cpu request, memory request, memory limit; "
            "container 1: cpu request, memory request; "
            "container 2: ",
        },
        {"op": "add", "path": OBSERVED, "value": "app, log-shipper, bare"},
    ]
    check_patched_pod(raw_pod, ops)


def test_container_without_resources_gets_initialisers() -> None:
    raw_pod = admission_pod(container("app"), container("other", cpu_request="10m"))
    ops = patch_for(raw_pod, vpa_json(rec("app", cpu="100m", memory="10M")))
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": C0, "value": {}},
        {"op": "add", "path": f"{C0}/requests", "value": {}},
        {"op": "add", "path": f"{C0}/requests/cpu", "value": "100m"},
        {"op": "add", "path": f"{C0}/requests/memory", "value": "10M"},
        {
            "op": "add",
            "path": UPDATES,
            "value": "Pod resources updated by web-vpa: container 0: cpu request, memory request",
        },
        {"op": "add", "path": OBSERVED, "value": "app, other"},
    ]
    check_patched_pod(raw_pod, ops)


def test_limits_initialiser_when_only_requests_present() -> None:
    raw_pod = admission_pod(container(cpu_request="100m"))
    limits = limit_ranges({"type": "Container", "default": {"cpu": "200m"}})
    ops = patch_for(raw_pod, vpa_json(rec(cpu="150m")), limits)
    assert [op["path"] for op in ops] == [
        "/metadata/annotations",
        f"{C0}/requests/cpu",
        f"{C0}/limits",
        f"{C0}/limits/cpu",
        UPDATES,
        OBSERVED,
    ]
    assert by_path(ops)[f"{C0}/limits/cpu"] == "300m"
    check_patched_pod(raw_pod, ops)


def test_no_recommendation_only_observed_containers() -> None:
    raw_pod = admission_pod(container(cpu_request="100m"), annotations={"a": "b"})
    ops = patch_for(raw_pod, make_vpa())
    assert ops == [{"op": "add", "path": OBSERVED, "value": "app"}]
    patched = check_patched_pod(raw_pod, ops)
    assert patched["metadata"]["annotations"] == dict(
        raw_pod["metadata"]["annotations"], vpaObservedContainers="app"
    )


def test_recommendation_for_unknown_container_is_ignored() -> None:
    raw_pod = admission_pod(container(cpu_request="100m"), annotations={"a": "b"})
    ops = patch_for(raw_pod, vpa_json(rec("ghost", cpu="1")))
    assert ops == [{"op": "add", "path": OBSERVED, "value": "app"}]
    assert check_patched_pod(raw_pod, ops)["spec"] == raw_pod["spec"]


def test_container_mode_off_is_untouched() -> None:
    raw_pod = admission_pod(container(cpu_request="100m"), annotations={"a": "b"})
    raw_vpa = vpa_json(rec(cpu="1"), policies=[{"containerName": "app", "mode": "Off"}])
    ops = patch_for(raw_pod, raw_vpa)
    assert ops == [{"op": "add", "path": OBSERVED, "value": "app"}]
    assert check_patched_pod(raw_pod, ops)["spec"] == raw_pod["spec"]


def test_vpa_mode_off_no_patch() -> None:
    raw_pod = admission_pod(container(cpu_request="100m"))
    for options in (DEFAULT_OPTIONS, BOOST):
        ops = patch_for(raw_pod, vpa_json(rec(cpu="1"), mode="Off"), options=options)
        assert ops == []
        assert check_patched_pod(raw_pod, ops) == raw_pod


def test_status_resources_are_current_values() -> None:
    # Spec says 100m/200m but the kubelet reports 200m/800m (ratio 4): the limit follows the status.
    raw_pod = admission_pod(container(cpu_request="100m", cpu_limit="200m"))
    raw_pod["status"] = {
        "containerStatuses": [
            {
                "name": "app",
                "image": "x",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "800m"}},
            }
        ]
    }
    [result] = container_resources_for_pod(
        pod_from_dict(raw_pod), vpa_from_dict(vpa_json(rec(cpu="300m"))), NO_LIMITS
    )
    assert result.limits.cpu_millicores == 1200


# --- startup boost ----------------------------------------------------------------------------------------

FACTOR_2 = {"cpu": {"type": "Factor", "factor": 2}}


def test_startup_boost_factor_requests_and_limits() -> None:
    # Recommended 300m × 2 = 600m; CPU limit keeps 500/250 = 2 → 1200m. Memory as recommended (limit 2×).
    raw_pod = admission_pod(
        container(cpu_request="250m", memory_request="100M", cpu_limit="500m", memory_limit="200M")
    )
    ops = patch_for(raw_pod, vpa_json(rec(cpu="300m", memory="150M"), startup_boost=FACTOR_2), options=BOOST)
    assert ops[:2] == [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {
            "op": "add",
            "path": "/metadata/annotations/vpaCpuStartupBoost~1app",
            "value": (
                '{"requests":{"cpu":"250m","memory":"100000000"},'
                '"limits":{"cpu":"500m","memory":"200000000"}}'
            ),
        },
    ]
    paths = by_path(ops)
    assert (paths[f"{C0}/requests/cpu"], paths[f"{C0}/limits/cpu"]) == ("600m", "1200m")
    assert (paths[f"{C0}/requests/memory"], paths[f"{C0}/limits/memory"]) == ("150M", "300M")
    check_patched_pod(raw_pod, ops)


def test_startup_boost_capped_by_max_allowed() -> None:
    raw_pod = admission_pod(container(cpu_request="250m", cpu_limit="500m"))
    options = AdmissionOptions(gates=BOOST.gates, max_allowed_cpu_boost_millicores=400)
    ops = patch_for(raw_pod, vpa_json(rec(cpu="300m"), startup_boost=FACTOR_2), options=options)
    paths = by_path(ops)
    assert (paths[f"{C0}/requests/cpu"], paths[f"{C0}/limits/cpu"]) == ("400m", "800m")
    check_patched_pod(raw_pod, ops)


def test_startup_boost_requests_only_stays_below_limit() -> None:
    raw_pod = admission_pod(container(cpu_request="250m", cpu_limit="500m"))
    policies = [
        {
            "containerName": "app",
            "controlledValues": "RequestsOnly",
            "startupBoost": {"cpu": {"type": "Quantity", "quantity": "1"}},
        }
    ]
    ops = patch_for(raw_pod, vpa_json(rec(cpu="300m"), policies=policies), options=BOOST)
    assert by_path(ops)[f"{C0}/requests/cpu"] == "499m"
    assert f"{C0}/limits/cpu" not in by_path(ops)
    check_patched_pod(raw_pod, ops)


def test_startup_boost_in_mode_off_boosts_the_original_request() -> None:
    raw_pod = admission_pod(container(cpu_request="250m", memory_request="1G", cpu_limit="500m"))
    ops = patch_for(
        raw_pod, vpa_json(rec(cpu="300m", memory="2G"), mode="Off", startup_boost=FACTOR_2), options=BOOST
    )
    paths = by_path(ops)
    assert (paths[f"{C0}/requests/cpu"], paths[f"{C0}/limits/cpu"]) == ("500m", "1")
    assert f"{C0}/requests/memory" not in paths
    assert paths[UPDATES] == "Pod resources updated by web-vpa: container 0: cpu request, cpu limit"
    check_patched_pod(raw_pod, ops)


def test_startup_boost_skips_containers_with_mode_off() -> None:
    raw_pod = admission_pod(container("app", cpu_request="250m"), container("side"))
    policies = [{"containerName": "side", "mode": "Off"}]
    ops = patch_for(
        raw_pod, vpa_json(rec(cpu="300m"), policies=policies, startup_boost=FACTOR_2), options=BOOST
    )
    assert not any(op["path"].startswith(C1) for op in ops)  # not even the `resources: {}` initialiser
    assert "/metadata/annotations/vpaCpuStartupBoost~1side" not in by_path(ops)
    check_patched_pod(raw_pod, ops)


def test_startup_boost_past_a_limitrange_cap_leaves_the_recommendation() -> None:
    # The LimitRange caps the limit at 250m, so 250m × 2 cannot be requested: no boost, but the container
    # still gets its recommendation (the differential suite's `lr/boost/bare`; upstream boosts past it).
    raw_pod = admission_pod(container())
    lr = limit_ranges({"type": "Container", "max": {"cpu": "250m"}, "default": {"cpu": "250m"},
                       "defaultRequest": {"cpu": "100m"}})
    ops = patch_for(raw_pod, vpa_json(rec(cpu="250m", memory="200Mi"), startup_boost=FACTOR_2), lr,
                    options=BOOST)
    paths = by_path(ops)
    assert not any("vpaCpuStartupBoost" in p for p in paths)
    assert (paths[f"{C0}/requests/cpu"], paths[f"{C0}/requests/memory"]) == ("250m", "200Mi")
    check_patched_pod(raw_pod, ops)


def test_startup_boost_ignored_without_gate() -> None:
    raw_pod = admission_pod(container(cpu_request="250m"))
    ops = patch_for(raw_pod, vpa_json(rec(cpu="300m"), startup_boost=FACTOR_2))
    paths = by_path(ops)
    assert paths[f"{C0}/requests/cpu"] == "300m"
    assert not any("vpaCpuStartupBoost" in p for p in paths)
    check_patched_pod(raw_pod, ops)


# --- arithmetic units --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("cpu", None, 100, 200, None), (None, NO_CPU_LIMIT)),
        (("cpu", 0, 100, 200, 300), (600, "")),  # zero limit → default 300m, ratio 3
        (("memory", 200, 100, 0, None), (None, "memory: limit NOT set since recommendedRequest is nil or 0")),
        (("cpu", 300, None, 50, None), (50, "")),  # limit without request: limit = request
        (("cpu", 300, 300, 50, None), (50, "")),
        (("memory", 3, 2, 5, None), (7, "")),  # 3 × 5 / 2 = 7.5 → 7
    ],
    ids=["no-limit", "default-limit", "zero-recommendation", "no-request", "equal", "floor"],
)
def test_proportional_limit(args: tuple[Any, ...], expected: tuple[int | None, str]) -> None:
    assert proportional_limit(*args) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((100, 200, 300, None), 150),
        ((100, None, 300, 600), 50),
        ((100, None, 300, None), 0),
        ((None, 200, 300, None), 300),
    ],
    ids=["ratio", "default-limit", "no-limit", "no-request"],
)
def test_boundary_request(args: tuple[int | None, ...], expected: int) -> None:
    assert boundary_request(*args) == expected


@pytest.mark.parametrize(
    ("segment", "escaped"),
    [("cpu", "cpu"), ("a/b", "a~1b"), ("x~/y", "x~0~1y")],
    ids=["plain", "slash", "tilde"],
)
def test_escape_pointer(segment: str, escaped: str) -> None:
    assert escape_pointer(segment) == escaped


def test_bounds_are_capped_like_the_target_without_notes() -> None:
    # RequestsOnly with a 500m limit and policy minAllowed 100m: target 300m stays, upper 900m → 500m,
    # lower 50m → 100m; only the target's capping would produce notes (none here).
    raw_pod = admission_pod(container(cpu_request="200m", cpu_limit="500m"))
    raw_vpa = vpa_json(
        make_recommendation(
            "app", target={"cpu": "300m"}, lower_bound={"cpu": "50m"}, upper_bound={"cpu": "900m"}
        ),
        policies=[
            {"containerName": "app", "controlledValues": "RequestsOnly", "minAllowed": {"cpu": "100m"}}
        ],
    )
    [capped] = cap_pod_recommendations(pod_from_dict(raw_pod), vpa_from_dict(raw_vpa), NO_LIMITS)
    assert capped is not None
    assert (
        capped.target.cpu_millicores,
        capped.lower_bound.cpu_millicores,
        capped.upper_bound.cpu_millicores,
    ) == (
        300,
        100,
        500,
    )
    assert capped.notes == ()


# --- absurd own values never lead to an invalid quantity --------------------------------------------------

HOSTILE = ["-1", "0", "1n", "1m", "1", "1e308", "-46116860184273879035", "9223372036854775807", "8Ei",
           "1e18", "1e-9", "-1e308", "250Mi"]


HOSTILE_VPA = vpa_json(rec(cpu="300m", memory="150Mi"), startup_boost=FACTOR_2)


def _emitted_values_are_valid(ops: list[JSON]) -> None:
    emitted: dict[tuple[str, str, str], Quantity] = {}
    for op in ops:
        parts = op["path"].split("/")
        if len(parts) == 7 and parts[4] == "resources":
            amount = Quantity.parse(op["value"])
            assert 0 <= amount.value <= MAX_INT64, op
            emitted[(parts[3], parts[5], parts[6])] = amount
    for (index, kind, resource), amount in emitted.items():
        if kind == "limits" and (index, "requests", resource) in emitted:
            assert amount >= emitted[(index, "requests", resource)], (index, resource)


@pytest.mark.parametrize(
    ("own", "patched"),
    [
        ({"cpu_request": "1e308", "memory_request": "1e308", "cpu_limit": "1n", "memory_limit": "1n"}, False),
        ({"cpu_request": "2", "memory_request": "1Gi", "cpu_limit": "1", "memory_limit": "-5Gi"}, False),
        ({"cpu_request": "-1", "memory_request": "-1", "cpu_limit": "-1", "memory_limit": "-1"}, True),
        ({"cpu_request": "0", "memory_request": "0", "cpu_limit": "0", "memory_limit": "0"}, True),
    ],
    ids=["huge request 1n limit", "limit below request, negative limit", "all -1", "all 0"],
)
@pytest.mark.parametrize("options", [DEFAULT_OPTIONS, BOOST], ids=["plain", "boost"])
def test_absurd_own_values_give_valid_values_or_no_patch(
    own: dict[str, str], patched: bool, options: AdmissionOptions
) -> None:
    raw_pod = admission_pod(container(**own))
    ops = patch_for(raw_pod, HOSTILE_VPA, options=options)
    _emitted_values_are_valid(ops)
    assert any("/resources/" in op["path"] for op in ops) is patched


@pytest.mark.parametrize("cpu_request", HOSTILE)
@pytest.mark.parametrize("cpu_limit", HOSTILE)
@pytest.mark.parametrize("memory_pair", [("1e308", "1n"), ("-1", "250Mi"), ("1", "8Ei"), ("250Mi", "1e18")])
def test_hostile_quantity_grid_never_emits_an_invalid_value(
    cpu_request: str, cpu_limit: str, memory_pair: tuple[str, str]
) -> None:
    raw_pod = admission_pod(
        container(cpu_request=cpu_request, cpu_limit=cpu_limit,
                  memory_request=memory_pair[0], memory_limit=memory_pair[1])
    )
    for options in (DEFAULT_OPTIONS, BOOST):
        ops = patch_for(raw_pod, HOSTILE_VPA, options=options)
        _emitted_values_are_valid(ops)


# --- --cap-to-largest-node: the policy applied again never lifts a node-capped recommendation -------------

NODE_CAPPED = {"type": "CappedToNode", "status": "True", "reason": "CappedToLargestNode",
               "message": "pod total capped to the allocatable of node n1: cpu 100 → 4",
               "lastTransitionTime": "2026-11-25T00:00:00Z"}
HUGE_MIN = {"containerName": "app", "minAllowed": {"cpu": "100"}, "maxAllowed": {"memory": "1G"}}


@pytest.mark.parametrize(
    ("conditions", "published_memory", "expected_cpu", "expected_memory"),
    [
        # What upstream does (and we do without the cap): minAllowed wins, the pod fits no node.
        ([], "512Mi", 100_000, 512 * 2**20),
        ([{**NODE_CAPPED, "status": "False"}], "512Mi", 100_000, 512 * 2**20),
        # Capped: the published (node-sized) target stands; the policy may still lower a value.
        ([NODE_CAPPED], "512Mi", 4000, 512 * 2**20),
        ([NODE_CAPPED], "2Gi", 4000, 10**9),
    ],
    ids=["no-condition", "condition-false", "capped", "capped-max-still-lowers"],
)
def test_node_capped_recommendation_is_not_lifted_by_the_policy(
    conditions: list[JSON], published_memory: str, expected_cpu: int, expected_memory: int
) -> None:
    raw_pod = admission_pod(container(cpu_request="1", memory_request="256Mi"))
    published = make_recommendation(
        "app",
        target={"cpu": "4", "memory": published_memory},
        lower_bound={"cpu": "2", "memory": published_memory},
        upper_bound={"cpu": "4", "memory": published_memory},
    )
    raw_vpa = vpa_json(published, policies=[HUGE_MIN], conditions=conditions)
    pod, vpa = pod_from_dict(raw_pod), vpa_from_dict(raw_vpa)
    [result] = container_resources_for_pod(pod, vpa, NO_LIMITS)
    assert (result.requests.cpu_millicores, result.requests.memory_bytes) == (expected_cpu, expected_memory)
    # The updater's view (bounds included) agrees, so it never evicts a pod for not reaching minAllowed.
    [capped] = cap_pod_recommendations(pod, vpa, NO_LIMITS)
    assert capped is not None
    assert capped.target.cpu_millicores == expected_cpu
    assert capped.lower_bound.cpu_millicores == (2000 if expected_cpu == 4000 else 100_000)
    assert capped.upper_bound.cpu_millicores == expected_cpu
