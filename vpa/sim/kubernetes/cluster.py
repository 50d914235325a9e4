"""`RealCluster`: `vpa sim`'s nodes, kubelets and metrics on a real control plane, on real time.

Owns: choosing the release's binaries (`vpa.sim.kubernetes.releases`), starting the control plane
(`ControlPlane`), installing the project's VPA CRDs (and `--crd` files) and waiting until they are
Established, then the nodes: either (`kubelet="sim"`, the default) the same node agent `vpa sim` runs
(`vpa.sim.cluster.nodeagent`, with scheduling left to kube-scheduler and a Lease heartbeat per node) driven
through `RemoteStore`, or (`kubelet="hollow"`) one hollow kubelet process per node (`HollowNodes`); the
usage profiles (`sim.vpa.dev/usage` annotations), `metrics.k8s.io` served to the aggregation layer, and
loopback forwarders for `--webhook-service`; writing the admin kubeconfig where asked; stopping it all.

Must not: implement kubelet behaviour or metrics (those are `vpa.sim.cluster`'s, shared with `vpa sim`), or
run controllers: the real kube-controller-manager does.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from vpa.model.clock import VirtualClock
from vpa.model.quantity import cpu_millicores, memory_bytes
from vpa.sim.apiserver.harness import vpa_crd_documents
from vpa.sim.cluster.metrics import Metrics
from vpa.sim.cluster.nodeagent import NodeAgent
from vpa.sim.cluster.options import SUPPORTED_VERSIONS, ClusterOptions
from vpa.sim.cluster.runtime import Runtime
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import AggregatedLister, ApiError, JsonObj
from vpa.sim.kubernetes.controlplane import ControlPlane, ControlPlaneError
from vpa.sim.kubernetes.forwarding import Forwarder, map_services
from vpa.sim.kubernetes.hollow import HollowNodes
from vpa.sim.kubernetes.metricsapi import GROUP, VERSION, MetricsApi
from vpa.sim.kubernetes.releases import HOLLOW_NODE, ReleaseError, locate
from vpa.sim.kubernetes.remotestore import RemoteStore

KUBELETS = ("sim", "hollow")

NODE_LEASE_RENEW_S = 20.0
# On real time the stand-in keeps a kubelet's pace, as a hollow node's kubelet does: a resize is actuated a
# moment after it is allocated, and a failed one retried at the next pod sync (kubemark's sync period).
KUBELET_ACTUATION_S = 1.0
KUBELET_SYNC_S = 10.0
READY_TIMEOUT_S = 120.0


class RealCluster:
    def __init__(
        self,
        nodes: int = 3,
        node_cpu: str = "4",
        node_memory: str = "16Gi",
        vpa_crds: bool = True,
        behaviour: bool = True,
        webhook_services: dict[tuple[str, str], tuple[str, int]] | None = None,
        *,
        kubeconfig_out: str | Path | None = None,
        crd_files: list[str | Path] | None = None,
        bin_dir: Path | None = None,
        workdir: Path | None = None,
        trace_dir: str | Path | None = None,
        metrics_resolution_s: float = 15.0,
        kubernetes_version: str | None = None,
        kubelet: str = "sim",
    ) -> None:
        if kubelet not in KUBELETS:
            raise ValueError(f"kubelet must be one of {KUBELETS}, not {kubelet!r}")
        self.nodes = nodes
        self.node_cpu_millicores = cpu_millicores(node_cpu)
        self.node_memory_bytes = memory_bytes(node_memory)
        self.vpa_crds = vpa_crds
        self.behaviour = behaviour
        self.webhook_services = dict(webhook_services or {})
        self.kubeconfig_out = Path(kubeconfig_out) if kubeconfig_out else None
        self.crd_files = [Path(p) for p in crd_files or []]
        self.trace_dir = str(trace_dir) if trace_dir else None
        self.metrics_resolution_s = metrics_resolution_s
        self.kubelet = kubelet
        self.requested_version = kubernetes_version
        self.bin_dir = bin_dir
        self.release = ""
        node_names = tuple(f"{ClusterOptions.node_name_prefix}{i}" for i in range(1, nodes + 1))
        self.control_plane = ControlPlane(
            bin_dir=bin_dir, workdir=workdir, node_names=node_names if kubelet == "hollow" else ()
        )
        self.store: RemoteStore | None = None
        self.stand_in: KubeletStandIn | None = None
        self.hollow: HollowNodes | None = None
        self.hollow_metrics: MetricsApi | None = None
        self.nodes_ready_s = 0.0  # from the nodes' start to all of them Ready (hollow nodes)
        self.forwarders: list[Forwarder] = []
        self.url = ""
        self.version: tuple[int, int] = (0, 0)
        self.kubeconfig_path = Path()

    async def __aenter__(self) -> RealCluster:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        cp = self.control_plane
        try:
            self.release, cp.bin_dir = locate(
                self.requested_version, self.bin_dir, hollow=self.kubelet == "hollow"
            )
        except ReleaseError as err:
            raise ControlPlaneError(str(err)) from None
        await cp.start()
        self.url = cp.url
        store = self.store = RemoteStore(cp.url, cp.ca_pem, cp.admin_token)
        resources = ["pods", "nodes", "leases.coordination.k8s.io"] if self.behaviour else []
        await store.start(resources)
        info = await store.call("GET", "/version")
        self.version = (int(info["major"]), int(str(info["minor"]).rstrip("+")))
        docs: list[JsonObj] = vpa_crd_documents() if self.vpa_crds else []
        for path in self.crd_files:
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
        await self._install_crds(store, docs)
        if self.behaviour:
            await self._start_behaviour(store)
        self.forwarders = await map_services(store.call, self.webhook_services)
        self.kubeconfig_path = cp.kubeconfig
        if self.kubeconfig_out is not None:
            self.kubeconfig_out.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.kubeconfig_out.with_name(self.kubeconfig_out.name + ".tmp")
            shutil.copyfile(cp.kubeconfig, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.kubeconfig_out)
            self.kubeconfig_path = self.kubeconfig_out

    async def _start_behaviour(self, store: RemoteStore) -> None:
        if self.kubelet == "hollow":
            await self._start_hollow(store)
            return
        options = stand_in_options(
            self.version,
            nodes=self.nodes,
            node_cpu_millicores=self.node_cpu_millicores,
            node_memory_bytes=self.node_memory_bytes,
            trace_dir=self.trace_dir,
            metrics_resolution_s=self.metrics_resolution_s,
        )
        self.stand_in = KubeletStandIn(store, options)
        await self.stand_in.start()

    async def _start_hollow(self, store: RemoteStore) -> None:
        cp = self.control_plane
        assert cp.bin_dir is not None
        assert cp.workdir is not None
        defaults = ClusterOptions()
        trace_dir = Path(self.trace_dir) if self.trace_dir else None
        self.hollow = HollowNodes(
            store=store,
            binary=cp.bin_dir / HOLLOW_NODE,
            kubeconfigs=dict(cp.node_kubeconfigs),
            workdir=cp.workdir / "hollow",
            cpu_millicores=self.node_cpu_millicores,
            memory_bytes=self.node_memory_bytes,
            usage=UsageRegistry(defaults.default_usage_fraction, trace_dir),
            max_pods=defaults.max_pods_per_node,
            metrics_resolution_s=self.metrics_resolution_s,
            metrics_window_s=defaults.metrics_window_s,
        )
        started = time.monotonic()
        await self.hollow.start()
        self.nodes_ready_s = time.monotonic() - started
        self.hollow_metrics = await serve_metrics(store, self.hollow.list_pods, self.hollow.list_nodes)

    def failed_processes(self) -> list[str]:
        """Names of processes of this cluster that have exited (none while healthy)."""
        hollow = self.hollow.failed_processes() if self.hollow is not None else []
        return [*self.control_plane.failed_processes(), *hollow]

    @staticmethod
    async def _install_crds(store: RemoteStore, docs: list[JsonObj]) -> None:
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for doc in docs:
            try:
                await store.call("POST", path, doc)
            except ApiError as err:
                if err.code != 409:
                    raise ControlPlaneError(
                        f"CRD {doc.get('metadata', {}).get('name')} refused by kube-apiserver: {err.message}"
                    ) from err
        for doc in docs:
            name = doc["metadata"]["name"]
            await _wait_condition(store, f"{path}/{name}", "Established", f"CRD {name}")

    async def stop(self) -> None:
        for fwd in self.forwarders:
            await fwd.stop()
        self.forwarders = []
        if self.stand_in is not None:
            await self.stand_in.stop()
            self.stand_in = None
        if self.hollow_metrics is not None:
            await self.hollow_metrics.stop()
            self.hollow_metrics = None
        if self.hollow is not None:
            await self.hollow.stop()
            self.hollow = None
        if self.store is not None:
            await self.store.close()
            self.store = None
        await self.control_plane.stop()
        if self.kubeconfig_out is not None:
            self.kubeconfig_out.unlink(missing_ok=True)


async def serve_metrics(
    store: RemoteStore, list_pods: AggregatedLister, list_nodes: AggregatedLister
) -> MetricsApi:
    """`metrics.k8s.io` on loopback, registered with the aggregation layer and Available."""
    api = MetricsApi(list_pods, list_nodes)
    await api.start()
    await api.register(store.call)
    name = f"{VERSION}.{GROUP}"
    await _wait_condition(
        store, f"/apis/apiregistration.k8s.io/v1/apiservices/{name}", "Available", f"APIService {name}"
    )
    return api


async def _wait_condition(store: RemoteStore, path: str, ctype: str, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    last: Any = None
    while time.monotonic() < deadline:
        obj = await store.call("GET", path)
        conds = (obj.get("status") or {}).get("conditions") or []
        last = next((c for c in conds if c.get("type") == ctype), None)
        if last is not None and last.get("status") == "True":
            return
        await asyncio.sleep(0.2)
    message = (last or {}).get("message") or "no condition yet"
    raise ControlPlaneError(f"{what} not {ctype} after {READY_TIMEOUT_S:.0f} s: {message}")


def stand_in_options(version: tuple[int, int], **knobs: Any) -> ClusterOptions:
    """The node agent's options on a real API server: its scheduler binds pods, nodes renew Leases."""
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_VERSIONS)
        raise ControlPlaneError(f"kube-apiserver v{version[0]}.{version[1]} is not supported ({supported})")
    return ClusterOptions(
        kubernetes_version=version,
        schedule=False,
        node_lease_renew_s=NODE_LEASE_RENEW_S,
        resize_actuation_s=KUBELET_ACTUATION_S,
        kubelet_retry_s=KUBELET_SYNC_S,
        **knobs,
    )


class KubeletStandIn:
    """The simulator's nodes, kubelets, usage profiles and metrics.k8s.io on the API server of `store`."""

    def __init__(self, store: RemoteStore, options: ClusterOptions) -> None:
        self.store = store
        self.options = options
        clock = VirtualClock(start=time.time(), time_scale=1.0)  # real time, with the simulator's timers
        self.runtime = Runtime(store, clock)
        trace_dir = Path(options.trace_dir) if options.trace_dir else None
        self.usage = UsageRegistry(options.default_usage_fraction, trace_dir)
        self.agent = NodeAgent(self.runtime, store, clock, options, self.usage)
        self.metrics = Metrics(self.agent, self.usage, clock, options)
        self.metrics_api: MetricsApi | None = None

    async def start(self) -> None:
        self.agent.register()
        await self.agent.create_nodes()
        await self.runtime.start()
        self.metrics_api = await serve_metrics(self.store, self.metrics.list_pods, self.metrics.list_nodes)

    async def stop(self) -> None:
        await self.runtime.stop()
        if self.metrics_api is not None:
            await self.metrics_api.stop()
