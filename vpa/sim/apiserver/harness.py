"""`SimCluster`: the simulated cluster as tests and `vpa sim` start it.

Owns: wiring a virtual clock, the object store, hooks, admission webhooks, faults and the HTTPS server
together; writing the kubeconfig; installing CRDs (the project's VPA CRDs by default); starting and stopping
the cluster behaviour (`vpa.sim.cluster`, imported lazily so a bare API server never needs it) with its
timing knobs; `advance()`, `settle()` and `set_usage()` (usage-profile control, delegated to the behaviour).

Must not: implement API semantics (store/server do) or cluster behaviour (vpa.sim.cluster does).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import tempfile
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from vpa.model.clock import VirtualClock
from vpa.model.quantity import cpu_millicores, memory_bytes
from vpa.sim.apiserver.admission import WebhookAdmission
from vpa.sim.apiserver.faults import Faults
from vpa.sim.apiserver.hooks import Hooks
from vpa.sim.apiserver.server import ApiServer
from vpa.sim.apiserver.store import ObjectStore
from vpa.sim.apiserver.tls import ServingCerts, generate_certs, write_kubeconfig

SUPPORTED_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36", "1.37")


def parse_version(text: str) -> tuple[int, int]:
    text = text.lstrip("v")
    parts = text.split(".")
    if len(parts) < 2 or f"{parts[0]}.{parts[1]}" not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"unsupported Kubernetes version {text!r}; choose one of {', '.join(SUPPORTED_VERSIONS)}"
        )
    return int(parts[0]), int(parts[1])


def vpa_crd_documents() -> list[dict[str, Any]]:
    """The project's own VPA CRDs (`vpa/crds/vpa-v1.yaml`)."""
    text = resources.files("vpa").joinpath("crds/vpa-v1.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


class SimCluster:
    """An in-process simulated Kubernetes cluster served over HTTPS on 127.0.0.1."""

    def __init__(
        self,
        nodes: int = 3,
        node_cpu: str = "4",
        node_memory: str = "16Gi",
        time_scale: float = 0.0,
        kubernetes_version: str = "1.37",
        vpa_crds: bool = True,
        behaviour: bool = True,
        webhook_services: dict[tuple[str, str], tuple[str, int]] | None = None,
        *,
        port: int = 0,
        kubeconfig_out: str | Path | None = None,
        crd_files: list[str | Path] | None = None,
        history_size: int = 50_000,
        bookmark_interval_s: float = 5.0,
        clock: VirtualClock | None = None,
        pod_start_delay_s: float = 0.0,
        resize_actuation_s: float = 0.0,
        job_run_s: float = 60.0,
        trace_dir: str | Path | None = None,
        metrics_resolution_s: float = 15.0,
        pod_level_resize: bool = False,
    ) -> None:
        self.nodes = nodes
        self.node_cpu_millicores = cpu_millicores(node_cpu)
        self.node_memory_bytes = memory_bytes(node_memory)
        self.version = parse_version(kubernetes_version)
        self.clock = clock or VirtualClock(time_scale=time_scale)
        self.hooks = Hooks()
        self.store = ObjectStore(self.clock, self.hooks, history_size=history_size)
        self.admission = WebhookAdmission(self.store, webhook_services or {})
        self.store.admission = self.admission
        self.faults = Faults(self.store)
        self.server = ApiServer(
            self.store,
            self.faults,
            kubernetes_version=self.version,
            bookmark_interval_s=bookmark_interval_s,
            advance=self.advance,
        )
        self._want_behaviour = behaviour
        # Behaviour knobs passed through to `ClusterOptions` (see vpa/sim/cluster/options.py).
        self._behaviour_options: dict[str, Any] = {
            "pod_start_delay_s": pod_start_delay_s,
            "resize_actuation_s": resize_actuation_s,
            "job_run_s": job_run_s,
            "trace_dir": str(trace_dir) if trace_dir is not None else None,
            "metrics_resolution_s": metrics_resolution_s,
            "pod_level_resize": pod_level_resize,
        }
        self._vpa_crds = vpa_crds
        self._crd_files = [Path(p) for p in crd_files or []]
        self._port = port
        self._kubeconfig_out = Path(kubeconfig_out) if kubeconfig_out else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._runner: web.AppRunner | None = None
        self.behaviour: Any = None
        self.certs: ServingCerts | None = None
        self.url = ""
        self.kubeconfig_path = Path()
        self.port = 0

    @property
    def ca_cert_pem(self) -> bytes:
        assert self.certs is not None, "cluster not started"
        return self.certs.ca_cert_pem

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def install_crd(self, doc: dict[str, Any]) -> None:
        await self.store.create("customresourcedefinitions.apiextensions.k8s.io", doc, admit=False)

    async def start(self) -> None:
        if self._vpa_crds:
            for doc in vpa_crd_documents():
                await self.install_crd(doc)
        for path in self._crd_files:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    await self.install_crd(doc)
        self.certs = generate_certs()
        self._runner = web.AppRunner(
            self.server.app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, "127.0.0.1", self._port, ssl_context=self.certs.server_context(), backlog=1024
        )
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        if self._kubeconfig_out is not None:
            self.kubeconfig_path = self._kubeconfig_out
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="vpa-sim-")
            self.kubeconfig_path = Path(self._tmp.name) / "kubeconfig"
        write_kubeconfig(self.kubeconfig_path, self.url, self.certs.ca_cert_pem)
        if self._want_behaviour:
            # Imported lazily (and by name) so the bare API server never depends on the cluster behaviour.
            cluster_mod = importlib.import_module("vpa.sim.cluster")
            options = cluster_mod.ClusterOptions(
                nodes=self.nodes,
                node_cpu_millicores=self.node_cpu_millicores,
                node_memory_bytes=self.node_memory_bytes,
                kubernetes_version=self.version,
                **self._behaviour_options,
            )
            self.behaviour = cluster_mod.ClusterBehaviour(
                store=self.store, hooks=self.hooks, clock=self.clock, options=options
            )
            self.behaviour.register()
            await self.behaviour.start()
            await self.settle()

    async def stop(self) -> None:
        if self.behaviour is not None:
            with contextlib.suppress(Exception):
                await self.behaviour.stop()
            self.behaviour = None
        self.faults.resume()
        await self.server.close_streams()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.admission.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def settle(self) -> None:
        """Let pending store work (CRD callbacks) and controller/node-agent work finish."""
        for _ in range(100):
            await self.store.settle()
            if self.behaviour is not None:
                await self.behaviour.settle()
            await asyncio.sleep(0)
            if not self.store._pending:
                return

    def set_usage(self, namespace: str, pod: str, container: str, profile: Any) -> None:
        """Give a container a usage profile (overrides its pod's `sim.vpa.dev/usage` annotation).

        `profile` is a `vpa.sim.cluster.UsageProfile`, or its JSON form as the annotation takes it per
        container (`{"cpu": {"type": "constant", "value": "250m"}, "memory": ...}`).
        """
        if self.behaviour is None:
            raise RuntimeError(
                "usage profiles need the cluster behaviour (SimCluster(behaviour=True), started)"
            )
        if isinstance(profile, dict):
            cluster_mod = importlib.import_module("vpa.sim.cluster")
            key = f"{namespace}/{pod}/{container}"
            profile = cluster_mod.UsageProfile.from_json(profile, key, self.behaviour.usage.traces, key)
        self.behaviour.set_usage(namespace, pod, container, profile)

    async def advance(self, seconds: float) -> None:
        """Advance the virtual clock by `seconds`, then settle."""
        self.clock.advance(seconds)
        await asyncio.sleep(0)
        await self.settle()
