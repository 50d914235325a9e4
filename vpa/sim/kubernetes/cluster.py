"""`RealCluster`: `vpa sim`'s nodes, kubelets and metrics on a real control plane, on real time.

Owns: starting the control plane (`ControlPlane`), installing the project's VPA CRDs (and `--crd` files) and
waiting until they are Established, then the same node agent `vpa sim` runs (`vpa.sim.cluster.nodeagent`,
with scheduling left to kube-scheduler and a Lease heartbeat per node) driven through `RemoteStore`, the
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
from vpa.sim.contracts import ApiError, JsonObj
from vpa.sim.kubernetes.controlplane import ControlPlane, ControlPlaneError
from vpa.sim.kubernetes.forwarding import Forwarder, map_services
from vpa.sim.kubernetes.metricsapi import GROUP, VERSION, MetricsApi
from vpa.sim.kubernetes.remotestore import RemoteStore

NODE_LEASE_RENEW_S = 20.0
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
    ) -> None:
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
        self.control_plane = ControlPlane(bin_dir=bin_dir, workdir=workdir)
        self.store: RemoteStore | None = None
        self.runtime: Runtime | None = None
        self.agent: NodeAgent | None = None
        self.metrics_api: MetricsApi | None = None
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
        if self.version not in SUPPORTED_VERSIONS:
            raise ControlPlaneError(f"kube-apiserver v{self.version[0]}.{self.version[1]} is not supported")
        options = ClusterOptions(
            nodes=self.nodes,
            node_cpu_millicores=self.node_cpu_millicores,
            node_memory_bytes=self.node_memory_bytes,
            kubernetes_version=self.version,
            trace_dir=self.trace_dir,
            metrics_resolution_s=self.metrics_resolution_s,
            schedule=False,
            node_lease_renew_s=NODE_LEASE_RENEW_S,
        )
        clock = VirtualClock(start=time.time(), time_scale=1.0)  # real time, with the simulator's timers
        self.runtime = Runtime(store, clock)
        usage = UsageRegistry(
            options.default_usage_fraction, Path(self.trace_dir) if self.trace_dir else None
        )
        self.agent = NodeAgent(self.runtime, store, clock, options, usage)
        metrics = Metrics(self.agent, usage, clock, options)
        self.agent.register()
        await self.agent.create_nodes()
        await self.runtime.start()
        self.metrics_api = MetricsApi(metrics.list_pods, metrics.list_nodes)
        await self.metrics_api.start()
        await self.metrics_api.register(store.call)
        await self._wait_available(store, f"{VERSION}.{GROUP}")

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

    @staticmethod
    async def _wait_available(store: RemoteStore, name: str) -> None:
        await _wait_condition(
            store, f"/apis/apiregistration.k8s.io/v1/apiservices/{name}", "Available", f"APIService {name}"
        )

    async def stop(self) -> None:
        for fwd in self.forwarders:
            await fwd.stop()
        self.forwarders = []
        if self.runtime is not None:
            await self.runtime.stop()
            self.runtime = None
        if self.metrics_api is not None:
            await self.metrics_api.stop()
            self.metrics_api = None
        if self.store is not None:
            await self.store.close()
            self.store = None
        await self.control_plane.stop()
        if self.kubeconfig_out is not None:
            self.kubeconfig_out.unlink(missing_ok=True)


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
