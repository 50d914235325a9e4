"""Shared builders for the updater-logic tests: real API JSON (tests/builders.py) through the real converter,
so every test input is a pod or VPA as the caches would hold it. The few tests here check the builders."""

from __future__ import annotations

from typing import Any

from tests.builders import (
    BASE_TIME,
    make_condition,
    make_container,
    make_container_status,
    make_pod,
    make_vpa,
)
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.updater.restrictions import GroupKey
from vpa.model.pod import PodView
from vpa.model.vpa import VpaView

DAY = 86_400.0
NOW = BASE_TIME + 10 * DAY
RS = "web-7d9f8b6c4"
KEY = GroupKey("default", "ReplicaSet", RS)

JSON = dict[str, Any]


def ctr(
    name: str = "app",
    cpu: str | None = "500m",
    mem: str | None = "512Mi",
    *,
    cpu_limit: str | None = None,
    mem_limit: str | None = None,
    restart: tuple[str, ...] = (),
) -> JSON:
    """A container; `restart` lists resources with `resizePolicy: RestartContainer`."""
    policy = dict.fromkeys(restart, "RestartContainer") or None
    return make_container(
        name,
        cpu_request=cpu,
        memory_request=mem,
        cpu_limit=cpu_limit,
        memory_limit=mem_limit,
        resize_policy=policy,
        probes=False,
    )


def pod(
    name: str = "web-1",
    containers: list[JSON] | None = None,
    *,
    age_s: float = DAY,
    phase: str = "Running",
    pending_reason: str | None = None,
    in_progress_reason: str | None = None,
    condition_at: float | None = None,
    legacy: str | None = None,
    oom: tuple[str, float] | None = None,
    owner: str | None = RS,
    owner_kind: str = "ReplicaSet",
    observed: str | None = None,
    annotations: dict[str, str] | None = None,
    actual: dict[str, JSON] | None = None,
    terminating: bool = False,
    init_containers: list[JSON] | None = None,
) -> PodView:
    """A running pod started `age_s` before NOW. `oom=(container, seconds it ran)` sets an OOM kill as the
    last termination; `init_containers` are added as `make_pod` adds them; `actual` overrides
    `status.containerStatuses[].resources` per container."""
    containers = containers if containers is not None else [ctr()]
    start = NOW - age_s
    statuses = []
    for c in containers:
        last = None
        if oom is not None and oom[0] == c["name"]:
            last = {
                "reason": "OOMKilled",
                "exitCode": 137,
                "startedAt": _t(start),
                "finishedAt": _t(start + oom[1]),
            }
        statuses.append(
            make_container_status(
                c,
                started_at=start,
                last_terminated=last,
                actual_resources=(actual or {}).get(c["name"]),
            )
        )
    extra = []
    at = condition_at if condition_at is not None else NOW - 60
    if pending_reason is not None:
        extra.append(make_condition("PodResizePending", at=at, reason=pending_reason))
    if in_progress_reason is not None:
        extra.append(make_condition("PodResizeInProgress", at=at, reason=in_progress_reason))
    all_annotations = dict(annotations or {})
    if observed is not None:
        all_annotations["vpaObservedContainers"] = observed
    raw = make_pod(
        name,
        containers=containers,
        phase=phase,
        created_at=start - 2,
        started_at=start,
        extra_conditions=extra,
        container_statuses=statuses,
        resize_status=legacy,
        owner_kind=owner_kind if owner is not None else None,
        owner_name=owner,
        annotations=all_annotations,
        deletion_timestamp=NOW - 1 if terminating else None,
        init_containers=init_containers,
    )
    return pod_from_dict(raw)


def _t(timestamp: float) -> str:
    from tests.builders import rfc3339

    return rfc3339(timestamp)


def rec(
    name: str = "app",
    cpu: str = "500m",
    mem: str = "512Mi",
    *,
    lower: tuple[str, str] | None = None,
    upper: tuple[str, str] | None = None,
) -> JSON:
    """A container recommendation; bounds default to a wide range around the target."""
    lo = lower if lower is not None else ("1m", "1Mi")
    hi = upper if upper is not None else ("100", "100Gi")
    return {
        "containerName": name,
        "target": {"cpu": cpu, "memory": mem},
        "lowerBound": {"cpu": lo[0], "memory": lo[1]},
        "upperBound": {"cpu": hi[0], "memory": hi[1]},
        "uncappedTarget": {"cpu": cpu, "memory": mem},
    }


def vpa(
    mode: str | None = "Recreate",
    recs: list[JSON] | None = None,
    *,
    min_replicas: int | None = None,
    policies: list[JSON] | None = None,
    eviction_requirements: list[JSON] | None = None,
    evict_after_oom_s: int | None = None,
) -> VpaView:
    raw = make_vpa(
        update_mode=mode,
        min_replicas=min_replicas,
        container_policies=policies,
        recommendation=recs if recs is not None else [rec()],
    )
    policy = raw["spec"].setdefault("updatePolicy", {})
    if eviction_requirements is not None:
        policy["evictionRequirements"] = eviction_requirements
    if evict_after_oom_s is not None:
        policy["evictAfterOOMSeconds"] = evict_after_oom_s
    return vpa_from_dict(raw)


def test_pod_builder_reads_back() -> None:
    p = pod(oom=("app", 30.0), pending_reason="Deferred", actual={"app": {"requests": {"cpu": "300m"}}})
    assert p.start_time == NOW - DAY
    status = p.container_status("app")
    assert status is not None
    assert status.last_terminated_reason == "OOMKilled"
    assert status.last_terminated_at is not None
    assert status.last_terminated_started_at is not None
    assert status.last_terminated_at - status.last_terminated_started_at == 30.0
    assert p.current_requests("app").cpu_millicores == 300
    assert p.resize_pending is not None
    assert p.resize_pending.reason == "Deferred"
    assert p.owner is not None
    assert p.owner.name == RS


def test_vpa_builder_reads_back() -> None:
    v = vpa(
        "InPlace",
        eviction_requirements=[{"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}],
        evict_after_oom_s=30,
        min_replicas=1,
    )
    assert v.update_policy.evict_after_oom_s == 30
    assert v.update_policy.min_replicas == 1
    assert v.update_policy.eviction_requirements[0].resources == ("cpu",)
    assert v.recommendation is not None
    assert v.recommendation.containers[0].target.cpu_millicores == 500
