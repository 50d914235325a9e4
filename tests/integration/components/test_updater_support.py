"""The updater test harness against `SimCluster(behaviour=True)`, and tests of the pieces it wires up.

`updater_env(...)` starts a simulated cluster, the shared pod/VPA watch caches (indexed as the runtime
indexes them), the updater's own controller/LimitRange caches, an event recorder and an `Updater` on the
cluster's virtual clock. `env.sync()` waits (real time, bounded) until every cache holds exactly what the
store holds, so a `run_once()` sees the cluster as it is. `admission_webhook(...)` registers a TLS
mutating webhook that applies the controlling VPA's recommendation with the admission logic
(`vpa.logic.admission.patches.pod_patch`), standing in for the admission controller built on another branch.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry

from vpa.app.runtime import pod_owner_keys, vpa_target_keys
from vpa.components.context import ComponentContext
from vpa.components.health import HealthState
from vpa.components.updater import Updater
from vpa.kube import converting
from vpa.kube.client import ClientOptions, KubeClient, api_path
from vpa.kube.controllers import KINDS, ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.neighbourwatching import node_cache
from vpa.kube.watching import WatchCache
from vpa.logic.admission.patches import AdmissionOptions, pod_patch, pod_shape
from vpa.logic.limitranges import NO_LIMITS
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.settings import RunSettings, UpdaterSettings
from vpa.model.vpa import VpaView
from vpa.sim import SimCluster
from vpa.sim.apiserver.tls import generate_certs

VPAS = "verticalpodautoscalers.autoscaling.k8s.io"
DEPLOYMENTS = "deployments.apps"
PDBS = "poddisruptionbudgets.policy"
MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
_STORE_KEYS = {
    "Deployment": "deployments.apps",
    "ReplicaSet": "replicasets.apps",
    "StatefulSet": "statefulsets.apps",
    "DaemonSet": "daemonsets.apps",
    "ReplicationController": "replicationcontrollers",
    "Job": "jobs.batch",
    "CronJob": "cronjobs.batch",
}


# ----------------------------------------------------------------------------------------- objects


def container(
    name: str = "app",
    cpu: str | None = "500m",
    memory: str | None = "256Mi",
    cpu_limit: str | None = "1",
    memory_limit: str | None = "512Mi",
    restart_memory: bool = False,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    out: dict[str, Any] = {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": requests, "limits": limits},
    }
    if restart_memory:
        out["resizePolicy"] = [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        ]
    return out


def deployment(
    name: str, replicas: int, *containers: dict[str, Any], namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": list(containers) or [container()]},
            },
        },
    }


def rec(
    name: str = "app",
    *,
    cpu: str,
    memory: str,
    lower: tuple[str, str] | None = None,
    upper: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """One containerRecommendations entry; bounds default to a wide range around the target."""
    target = {"cpu": cpu, "memory": memory}
    low = {"cpu": lower[0], "memory": lower[1]} if lower else {"cpu": "10m", "memory": "10Mi"}
    high = {"cpu": upper[0], "memory": upper[1]} if upper else {"cpu": "64", "memory": "64Gi"}
    return {
        "containerName": name,
        "target": target,
        "lowerBound": low,
        "upperBound": high,
        "uncappedTarget": target,
    }


def vpa(
    name: str,
    target: str,
    mode: str,
    *,
    namespace: str = "default",
    container_policies: list[dict[str, Any]] | None = None,
    min_replicas: int | None = None,
) -> dict[str, Any]:
    policy: dict[str, Any] = {"updateMode": mode}
    if min_replicas is not None:
        policy["minReplicas"] = min_replicas
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "updatePolicy": policy,
    }
    if container_policies is not None:
        spec["resourcePolicy"] = {"containerPolicies": container_policies}
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


# ----------------------------------------------------------------------------------------- harness


@dataclass
class UpdaterEnv:
    cluster: SimCluster
    client: KubeClient
    ctx: ComponentContext
    controllers: ControllerCaches
    events: EventRecorder
    updater: Updater
    registry: CollectorRegistry
    caches: list[tuple[str, WatchCache[Any]]] = field(default_factory=list)

    @property
    def store(self) -> Any:
        return self.cluster.store

    async def sync(self, timeout_s: float = 5.0) -> None:
        """Settle the cluster, then wait until every cache holds exactly the store's objects."""
        await self.cluster.settle()
        deadline = time.monotonic() + timeout_s
        while True:
            if all(self._in_sync(resource, cache) for resource, cache in self.caches):
                return
            if time.monotonic() > deadline:
                lagging = [r for r, c in self.caches if not self._in_sync(r, c)]
                raise AssertionError(f"caches did not catch up with the store: {lagging}")
            await asyncio.sleep(0.002)

    def _in_sync(self, resource: str, cache: WatchCache[Any]) -> bool:
        want = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for o in self.store.list(resource)
        }
        return cache.resource_versions() == want

    async def run_once(self) -> Any:
        await self.sync()
        report = await self.updater.run_once()
        await self.sync()
        return report

    async def advance(self, seconds: float) -> None:
        await self.cluster.advance(seconds)
        await self.sync()

    # ---- cluster objects

    async def create_deployment(
        self, name: str, replicas: int, *containers: dict[str, Any]
    ) -> list[dict[str, Any]]:
        await self.store.create(DEPLOYMENTS, deployment(name, replicas, *containers))
        await self.sync()
        return self.pods(name)

    async def create_vpa(self, body: dict[str, Any], *recommendations: dict[str, Any]) -> None:
        await self.store.create(VPAS, body)
        if recommendations:
            await self.set_recommendation(body["metadata"]["name"], *recommendations)
        await self.sync()

    async def set_recommendation(
        self, name: str, *recommendations: dict[str, Any], namespace: str = "default"
    ) -> None:
        await self.store.patch(
            VPAS,
            namespace,
            name,
            "merge",
            {"status": {"recommendation": {"containerRecommendations": list(recommendations)}}},
            subresource="status",
        )
        await self.sync()

    def pods(self, app: str, namespace: str = "default") -> list[dict[str, Any]]:
        return sorted(
            (
                p
                for p in self.store.list("pods", namespace, label_selector=f"app={app}")
                if not p["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: p["metadata"]["name"],
        )

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.store.get("pods", namespace, name)
        return found

    async def event_reasons(self, namespace: str = "default") -> list[tuple[str, str, str]]:
        """(involved kind/name, reason, message) of every Event written so far."""
        await asyncio.wait_for(self.events.flush(), timeout=5.0)
        return sorted(
            (
                f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}",
                e["reason"],
                e["message"],
            )
            for e in self.store.list("events", namespace)
        )

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


def settings(**updater: Any) -> UpdaterSettings:
    """Updater settings for tests: no admission-controller lease check unless asked."""
    updater.setdefault("use_admission_controller_status", False)
    return UpdaterSettings(**updater)


@contextlib.asynccontextmanager
async def updater_env(
    version: str = "1.35",
    *,
    nodes: int = 1,
    cpu: str = "4",
    memory: str = "16Gi",
    gates: str = "",
    updater_settings: UpdaterSettings | None = None,
    resize_actuation_s: float = 0.0,
    watch_nodes: bool = False,
    **updater_kwargs: Any,
) -> AsyncIterator[UpdaterEnv]:
    cluster = SimCluster(nodes=nodes, node_cpu=cpu, node_memory=memory, kubernetes_version=version)
    await cluster.start()
    clock = cluster.clock
    if resize_actuation_s:
        agent = cluster.behaviour.agent
        agent.options = dataclasses.replace(agent.options, resize_actuation_s=resize_actuation_s)
    client = await KubeClient.from_config(
        clock, ClientOptions(qps=0, user_agent="vpa-updater-tests"), kubeconfig=str(cluster.kubeconfig_path)
    )
    tasks: list[asyncio.Task[None]] = []
    try:
        pods: WatchCache[PodView] = WatchCache(
            client, clock, api_path("", "v1", "pods"), converting.pod_from_dict, name="pods"
        )
        pods.add_index("owner", pod_owner_keys)
        vpas: WatchCache[VpaView] = WatchCache(
            client,
            clock,
            api_path("autoscaling.k8s.io", "v1", "verticalpodautoscalers"),
            converting.vpa_from_dict,
            name="vpas",
        )
        vpas.add_index("target", vpa_target_keys)
        controllers = ControllerCaches(client, clock)
        events = EventRecorder(client, clock, component="vpa-updater")
        registry = CollectorRegistry()
        run_settings = RunSettings(
            updater=updater_settings if updater_settings is not None else settings(),
            feature_gates=FeatureGates.parse(gates),
        )
        ctx = ComponentContext(
            settings=run_settings,
            client=client,
            clock=clock,
            registry=registry,
            health=HealthState(clock),
            events=events,
            pods=pods,
            vpas=vpas,
        )
        for coro in (pods.run(), vpas.run(), controllers.run(), events.run()):
            tasks.append(asyncio.ensure_future(coro))
        await asyncio.wait_for(
            asyncio.gather(pods.wait_synced(), vpas.wait_synced(), controllers.wait_synced()), 10
        )
        if watch_nodes:  # the Nodes the updater reads for gates InPlaceCapacityAware and DaemonSetScope
            node_watch = node_cache(client, clock)
            tasks.append(asyncio.ensure_future(node_watch.run()))
            await asyncio.wait_for(node_watch.wait_synced(), 10)
            updater_kwargs.setdefault("nodes", node_watch)
        caches: list[tuple[str, WatchCache[Any]]] = [
            ("pods", pods),
            (VPAS, vpas),
            ("limitranges", controllers.limitranges),
        ]
        caches += [(_STORE_KEYS[kind], controllers.controllers[kind]) for kind in KINDS]
        updater = Updater(ctx, controllers, events=events, **updater_kwargs)
        env = UpdaterEnv(cluster, client, ctx, controllers, events, updater, registry, caches)
        yield env
        assert cluster.behaviour.runtime.errors == 0
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await client.close()
        await cluster.stop()


@contextlib.asynccontextmanager
async def admission_webhook(
    cluster: SimCluster, options: AdmissionOptions | None = None
) -> AsyncIterator[list[str]]:
    """A TLS mutating webhook that applies the VPA targeting `Deployment/<app label>` to every new pod
    (the admission logic's own `pod_patch`, no LimitRanges); yields the names of the pods it patched."""
    certs = generate_certs("webhook", ("127.0.0.1",))
    patched: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        raw = review["request"]["object"]
        namespace = review["request"].get("namespace") or "default"
        raw = {**raw, "metadata": {**raw["metadata"], "namespace": namespace}}
        app = (raw["metadata"].get("labels") or {}).get("app")
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
        for obj in cluster.store.list(VPAS, namespace):
            view = converting.vpa_from_dict(obj)
            if (
                view.target_ref is not None
                and view.target_ref.name == app
                and view.recommendation is not None
            ):
                ops = pod_patch(
                    converting.pod_from_dict(raw), pod_shape(raw), view, NO_LIMITS,
                    options if options is not None else AdmissionOptions(),
                )
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
                patched.append(raw["metadata"].get("name") or raw["metadata"].get("generateName", ""))
                break
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app = web.Application()
    app.router.add_post("/mutate", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_context())
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await cluster.store.create(
        MUTATING,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "vpa-webhook-config"},
            "webhooks": [
                {
                    "name": "vpa.k8s.io",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate",
                        "caBundle": base64.b64encode(certs.ca_cert_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "failurePolicy": "Fail",
                }
            ],
        },
    )
    try:
        yield patched
    finally:
        await runner.cleanup()


# ----------------------------------------------------------------------------------------- status helpers


def cstatus(pod: dict[str, Any], name: str = "app") -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["status"]["containerStatuses"] if c["name"] == name)
    return found


def spec_resources(pod: dict[str, Any], name: str = "app") -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == name)["resources"]
    return found


def condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c.get("type") == ctype), None)


def amounts(resources: dict[str, Any]) -> Resources:
    """A ResourceList as exact amounts, so `300Mi` and `314572800` compare equal."""
    return Resources.from_resource_list(resources)


def res(cpu: str | None = None, memory: str | None = None) -> Resources:
    return Resources.from_resource_list(
        {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    )


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def uids(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


async def eventually(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.002)


# ----------------------------------------------------------------------------------------- tests


async def test_controller_caches_resolve_top_most_controller_replicas_and_selector() -> None:
    async with updater_env() as env:
        pods = await env.create_deployment("web", 2)
        owner = pods[0]["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet"
        caches = env.controllers
        assert caches.top_most("default", "ReplicaSet", owner["name"]) == ("Deployment", "web")
        assert caches.configured_replicas("default", "ReplicaSet", owner["name"]) == 2
        selector = caches.selector("default", "Deployment", "web")
        assert selector is not None
        assert selector.matches({"app": "web"})
        assert not selector.matches({"app": "other"})
        # An owner of a kind that is not cached (a custom scalable resource) ends the walk; Node: unmanaged.
        assert caches.top_most("default", "Rollout", "canary") == ("Rollout", "canary")
        assert caches.top_most("default", "Node", "node-1") is None


async def test_pods_are_matched_to_the_oldest_vpa_whose_selector_matches() -> None:
    async with updater_env() as env:
        await env.create_deployment("web", 2)
        await env.create_vpa(vpa("old", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        await env.advance(1)
        await env.create_vpa(vpa("new", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        # A VPA in mode Initial never controls running pods, even when it is the oldest.
        await env.store.create(
            VPAS,
            {**vpa("initial", "web", "Initial"), "metadata": {"name": "a-initial", "namespace": "default"}},
        )
        report = await env.run_once()
        assert [plan.vpa.name for plan in report.plans] == ["old"]
        assert sorted(report.resized) == sorted(f"default/{n}" for n in names(env.pods("web")))
        assert (
            env.metric(
                "vpa_updater_controlled_pods_total", vpa_size_log2="1", update_mode="InPlaceOrRecreate"
            )
            == 2
        )


async def test_large_vpas_are_planned_in_a_worker_thread_with_the_same_result() -> None:
    async with updater_env(plan_in_thread_above=0) as env:
        before = await env.create_deployment("web", 3, container("app", restart_memory=True))
        await env.create_vpa(
            vpa("web", "web", "InPlaceOrRecreate"),
            rec(cpu="500m", memory="400Mi", lower=("100m", "300Mi"), upper=("2", "1Gi")),
        )
        report = await env.run_once()
        # Same decisions as inline planning: one disruptive resize (tolerance 50 % of 3), two budget skips.
        reasons = sorted(d.reason.value for d in report.decisions().values())
        assert reasons == ["DisruptionBudget", "DisruptionBudget", "OutsideRecommendedRange"]
        assert len(report.resized) == 1
        assert uids(env.pods("web")) == uids(before)
