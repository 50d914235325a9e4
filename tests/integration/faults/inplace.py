"""`InPlace` VPAs under infeasible and deferred resizes and churn: the updater must never evict.

`inplace_scenario` runs the updater (the harness of the updater's integration tests, on a `SimCluster` with
Kubernetes 1.35 and gate `InPlace`) over `loops` loops on a 4-CPU node mostly taken by another workload:
recommendations move between sizes that fit, sizes the node could hold only if others left (the kubelet
defers them) and sizes larger than the node (infeasible), while deployments scale up and down. Evictions
and resize PATCHes are counted where the API server receives them (two or more replicas each, so that
`--min-replicas` would allow evictions: with `mode="Recreate"` the same run evicts).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tests.integration.components.test_updater_support import container, rec, updater_env, vpa

CPU_CHOICES = ("300m", "600m", "1500m", "5", "8")  # fits, fits, deferred (node busy), infeasible, infeasible
MEMORY_CHOICES = ("200Mi", "300Mi", "512Mi")


@dataclass
class InPlaceResult:
    loops: int = 0
    evictions_seen_by_server: int = 0
    evictions_reported: int = 0
    resizes_seen_by_server: int = 0
    pending_reasons: set[str] = field(default_factory=set)


async def inplace_scenario(
    *, loops: int, apps: int = 3, seed: int = 5, mode: str = "InPlace"
) -> InPlaceResult:
    rng = random.Random(seed)
    result = InPlaceResult()
    async with updater_env("1.35", cpu="4", gates="InPlace=true") as env:
        evictions = env.cluster.faults.inject("create", "pods", code=None, subresource="eviction")
        resizes = env.cluster.faults.inject("patch", "pods", code=None, subresource="resize")
        await env.create_deployment("hog", 1, container("app", cpu="2", cpu_limit="2"))
        names = [f"web-{i}" for i in range(apps)]
        for name in names:
            await env.create_deployment(name, 2, container("app", cpu="250m", cpu_limit="8"))
            await env.create_vpa(vpa(name, name, mode), rec(cpu="300m", memory="256Mi"))
        for loop in range(loops):
            for name in names:
                if rng.random() < 0.6:
                    cpu, memory = rng.choice(CPU_CHOICES), rng.choice(MEMORY_CHOICES)
                    # Bounds at the target: every pod not at it is outside the recommended range.
                    await env.set_recommendation(
                        name, rec(cpu=cpu, memory=memory, lower=(cpu, memory), upper=(cpu, memory))
                    )
            if rng.random() < 0.2:  # churn: scale one deployment between 2 and 3 replicas
                name = rng.choice(names)
                deployment = env.store.get("deployments.apps", "default", name)
                assert deployment is not None
                deployment["spec"]["replicas"] = 2 + (deployment["spec"]["replicas"] - 1) % 2
                await env.store.update("deployments.apps", deployment)
            await env.advance(60)
            report = await env.run_once()
            result.evictions_reported += len(report.evicted)
            for name in names:
                for pod in env.pods(name):
                    for cond in (pod.get("status") or {}).get("conditions") or ():
                        if cond.get("type") == "PodResizePending":
                            result.pending_reasons.add(str(cond.get("reason")))
            result.loops = loop + 1
        result.evictions_seen_by_server = evictions.hits
        result.resizes_seen_by_server = resizes.hits
    return result
