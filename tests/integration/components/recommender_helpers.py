"""A recommender wired to a behaving `SimCluster`, driven one loop at a time on the virtual clock."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from vpa.components.recommender import LoopReport, Recommender, RecommenderGroup
from vpa.kube import converting
from vpa.kube.client import ClientOptions, KubeClient, api_path
from vpa.kube.watching import WatchCache
from vpa.model.clock import RealClock
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.settings import CommonSettings, RecommenderSettings
from vpa.model.vpa import VpaView
from vpa.sim import SimCluster
from vpa.sim.cluster.profiles import ANNOTATION

VPAS = "verticalpodautoscalers.autoscaling.k8s.io"
CHECKPOINTS = "verticalpodautoscalercheckpoints.autoscaling.k8s.io"
MI = 2**20


@dataclass
class Harness:
    cluster: SimCluster
    client: KubeClient
    pods: WatchCache[PodView]
    vpas: WatchCache[VpaView]
    settings: RecommenderSettings
    common: CommonSettings
    requests: list[tuple[str, int]] = field(default_factory=list)
    recommender: Recommender | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    gates: FeatureGates = field(default_factory=FeatureGates)

    def new_recommender(self) -> Recommender:
        """A fresh recommender (as a new process would be) on the same caches and client."""
        self.registry = CollectorRegistry()
        self.recommender = RecommenderGroup.from_client(
            self.settings, common=self.common, gates=self.gates, client=self.client, pods=self.pods,
            vpas=self.vpas, clock=self.cluster.clock, registry=self.registry,
        ).recommenders[0]
        return self.recommender

    @property
    def rec(self) -> Recommender:
        assert self.recommender is not None
        return self.recommender

    async def caught_up(self) -> None:
        """Wait until the watch caches hold exactly what the store holds."""
        for _ in range(2000):
            if (_rvs(self.cluster, "pods") == self.pods.resource_versions()
                    and _rvs(self.cluster, VPAS) == self.vpas.resource_versions()):
                return
            await asyncio.sleep(0.002)
        raise AssertionError("watch caches did not catch up with the store")

    async def loop(self) -> LoopReport:
        await self.caught_up()
        report = await self.rec.run_once()
        await self.caught_up()
        return report

    async def run_for(self, seconds: float, step_s: float = 300.0) -> list[LoopReport]:
        """Advance the virtual clock by `step_s` and run one loop, until `seconds` have passed."""
        reports = []
        for _ in range(round(seconds / step_s)):
            await self.cluster.advance(step_s)
            reports.append(await self.loop())
        return reports

    def vpa(self, name: str, namespace: str = "default") -> dict[str, Any]:
        obj = self.cluster.store.get(VPAS, namespace, name)
        assert obj is not None
        return obj

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


def _rvs(cluster: SimCluster, resource: str) -> dict[tuple[str, str], str]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for o in cluster.store.list(resource)}


@contextlib.asynccontextmanager
async def harness(
    settings: RecommenderSettings | None = None, common: CommonSettings | None = None,
    gates: FeatureGates | None = None, **sim: Any
) -> AsyncIterator[Harness]:
    async with SimCluster(nodes=sim.pop("nodes", 1), node_cpu="16", node_memory="64Gi", **sim) as cluster:
        requests: list[tuple[str, int]] = []
        client = await KubeClient.from_config(
            RealClock(),
            # Quick retries: a faulted metrics API must not cost seconds of real time per loop.
            ClientOptions(user_agent="vpa-recommender-tests", backoff_base_s=0.001, backoff_max_s=0.005),
            kubeconfig=str(cluster.kubeconfig_path),
            on_request=lambda method, code: requests.append((method, code)),
        )
        pods: WatchCache[PodView] = WatchCache(
            client, cluster.clock, api_path("", "v1", "pods"), converting.pod_from_dict, name="pods")
        vpas: WatchCache[VpaView] = WatchCache(
            client, cluster.clock, api_path("autoscaling.k8s.io", "v1", "verticalpodautoscalers"),
            converting.vpa_from_dict, name="vpas")
        tasks = [asyncio.create_task(pods.run()), asyncio.create_task(vpas.run())]
        try:
            await asyncio.wait_for(asyncio.gather(pods.wait_synced(), vpas.wait_synced()), timeout=10)
            h = Harness(cluster, client, pods, vpas, settings or RecommenderSettings(),
                        common or CommonSettings(), requests, gates=gates or FeatureGates())
            h.new_recommender()
            yield h
            assert cluster.behaviour is not None
            assert cluster.behaviour.runtime.errors == 0
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()


def settings(**overrides: Any) -> RecommenderSettings:
    return dataclasses.replace(RecommenderSettings(), **overrides)


def deployment(name: str, usage: dict[str, Any], replicas: int = 1, memory_limit: str | None = "4Gi",
               namespace: str = "default") -> dict[str, Any]:
    limits = {"cpu": "4"}
    if memory_limit is not None:
        limits["memory"] = memory_limit
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {ANNOTATION: json.dumps(usage)}},
                "spec": {"containers": [
                    {"name": container, "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": limits}}
                    for container in usage
                ]},
            },
        },
    }


def vpa(name: str, kind: str = "Deployment", target: str | None = None, api_version: str = "apps/v1",
        recommenders: list[str] | None = None, namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": api_version, "kind": kind, "name": target or name},
        "updatePolicy": {"updateMode": "Off"},
    }
    if recommenders is not None:
        spec["recommenders"] = [{"name": r} for r in recommenders]
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def create(h: Harness, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    created = await h.cluster.store.create(resource, obj)
    await h.cluster.settle()
    return created


def recommendation(obj: dict[str, Any], container: str = "app") -> dict[str, Any]:
    recs = ((obj.get("status") or {}).get("recommendation") or {}).get("containerRecommendations") or []
    found: dict[str, Any] | None = next((r for r in recs if r["containerName"] == container), None)
    assert found is not None, f"no recommendation for {container}: {obj.get('status')}"
    return found


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)
