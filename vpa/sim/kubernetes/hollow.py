"""`vpa sim --control-plane=kubernetes --kubelet=hollow`: the nodes run Kubernetes' own kubelet code.

Owns: one `hollow-node` process per node (built by `hack/cluster/build.sh` from the same release as the
control plane: kubemark's hollow kubelet plus a node size from `--node-cpu`/`--node-memory`, pod cgroups in
memory and container memory usage read from a file), each with its own node identity, log file and
`$TMPDIR`; the usage file they read, rewritten every `USAGE_PERIOD_S` from the pods' `sim.vpa.dev/usage`
profiles evaluated on real time (capped at the container's actual memory limit, as the kernel would); the
readings `metrics.k8s.io` serves for those pods and nodes; waiting until every node is Ready; stopping the
processes by PID.

Must not: decide anything a kubelet decides (admission, resize verdicts, status): the hollow nodes do. OOM
kills are not simulated on hollow nodes: the fake runtime never kills a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vpa.sim.cluster.metrics import (
    node_metrics_doc,
    pod_metrics_doc,
    read_node_metrics,
    read_pod_metrics,
    sample_instant,
)
from vpa.sim.cluster.nodeagent import parse_time
from vpa.sim.cluster.pods import container_amounts, is_sidecar
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import JsonObj
from vpa.sim.kubernetes.controlplane import ControlPlaneError
from vpa.sim.kubernetes.remotestore import RemoteStore

USAGE_PERIOD_S = 1.0
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0


@dataclass
class _Node:
    name: str
    proc: asyncio.subprocess.Process
    log: Path


@dataclass
class HollowNodes:
    """Start with `await start()`, stop with `await stop()`."""

    store: RemoteStore
    binary: Path
    kubeconfigs: dict[str, Path]
    workdir: Path
    cpu_millicores: int
    memory_bytes: int
    usage: UsageRegistry
    max_pods: int = 110
    metrics_resolution_s: float = 15.0
    metrics_window_s: float = 30.0
    usage_file: Path = field(default_factory=Path)
    _nodes: list[_Node] = field(default_factory=list)
    _writer: asyncio.Task[None] | None = None
    _last_written: str = ""

    @property
    def names(self) -> list[str]:
        return list(self.kubeconfigs)

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.usage_file = self.workdir / "usage.txt"
        self.write_usage()
        cpu = f"{self.cpu_millicores}m"
        for name, kubeconfig in self.kubeconfigs.items():
            tmp = self.workdir / name
            tmp.mkdir(exist_ok=True)
            log = self.workdir / f"{name}.log"
            with log.open("ab") as out:
                proc = await asyncio.create_subprocess_exec(
                    str(self.binary),
                    f"--name={name}",
                    f"--kubeconfig={kubeconfig}",
                    f"--cpu={cpu}",
                    f"--memory={self.memory_bytes}",
                    f"--max-pods={self.max_pods}",
                    f"--usage-file={self.usage_file}",
                    "--node-labels=node.kubernetes.io/instance-type=sim",
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                    env={**os.environ, "TMPDIR": str(tmp)},
                )
            self._nodes.append(_Node(name, proc, log))
        self._writer = asyncio.create_task(self._write_loop(), name="hollow-usage")
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = set(self.names)
        while waiting:
            self.check_alive()
            for name in sorted(waiting):
                node = self.store.get("nodes", None, name)
                conds = ((node or {}).get("status") or {}).get("conditions") or []
                if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                    waiting.discard(name)
            if not waiting:
                return
            if time.monotonic() > deadline:
                first = sorted(waiting)[0]
                raise ControlPlaneError(
                    f"hollow node {first} not Ready after {READY_TIMEOUT_S:.0f} s; log in "
                    f"{self.workdir / (first + '.log')}"
                )
            await asyncio.sleep(0.1)

    def check_alive(self) -> None:
        for n in self._nodes:
            if n.proc.returncode is not None:
                tail = n.log.read_text(errors="replace").strip().splitlines()[-1:] if n.log.exists() else []
                raise ControlPlaneError(
                    f"hollow node {n.name} exited with status {n.proc.returncode} "
                    f"({tail[0][:300] if tail else 'no output'}); log in {n.log}"
                )

    def failed_processes(self) -> list[str]:
        return [f"hollow node {n.name}" for n in self._nodes if n.proc.returncode is not None]

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        for n in self._nodes:
            if n.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    n.proc.send_signal(signal.SIGTERM)
        for n in self._nodes:
            try:
                await asyncio.wait_for(n.proc.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    n.proc.kill()
                await n.proc.wait()
        self._nodes.clear()

    # --- usage ----------------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            await asyncio.sleep(USAGE_PERIOD_S)
            self.write_usage()

    def write_usage(self) -> None:
        """The usage file: one `namespace/pod/container bytes` line per running container on our nodes."""
        now = time.time()
        lines = []
        for pod in self._pods():
            md = pod.get("metadata") or {}
            for name, _cpu, mem in self.container_usage(pod, now) or ():
                lines.append(f"{md.get('namespace')}/{md.get('name')}/{name} {mem}\n")
        text = "".join(sorted(lines))
        if text == self._last_written and self.usage_file.exists():
            return
        tmp = self.usage_file.with_name(self.usage_file.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.usage_file)  # the hollow nodes never read half a file
        self._last_written = text

    def _pods(self) -> list[JsonObj]:
        names = set(self.kubeconfigs)
        return [p for p in self.store.list("pods") if (p.get("spec") or {}).get("nodeName") in names]

    def container_usage(self, pod: Mapping[str, Any], t: float) -> list[tuple[str, int, int]] | None:
        """(name, CPU millicores, memory bytes) of each running container, from its usage profile.

        The pod's start is `status.startTime`, a container's its `state.running.startedAt`; the amounts
        the default profile scales with are the container's actual ones (`status...resources`).
        """
        status = pod.get("status") or {}
        if status.get("phase") != "Running":
            return None
        pod_start = parse_time(status.get("startTime")) or t
        spec = pod.get("spec") or {}
        specs = {c.get("name"): c for c in (spec.get("containers") or [])}
        specs.update({c.get("name"): c for c in (spec.get("initContainers") or []) if is_sidecar(c)})
        out: list[tuple[str, int, int]] = []
        for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            container = specs.get(cs.get("name"))
            running = (cs.get("state") or {}).get("running")
            if container is None or running is None:
                continue
            actual = {"resources": cs.get("resources") or container.get("resources") or {}}
            req, lim = container_amounts(actual, "requests"), container_amounts(actual, "limits")
            started = min(parse_time(running.get("startedAt")) or pod_start, t)
            cpu = self.usage.cpu_millicores(pod, container, t, pod_start, started, req, lim)
            mem = self.usage.memory_bytes(pod, container, t, pod_start, started, req, lim)
            limit = lim.get("memory")
            if limit is not None:
                mem = min(mem, limit)  # the kernel never lets the working set exceed the limit
            out.append((str(cs.get("name")), cpu, mem))
        return out

    # --- metrics.k8s.io -------------------------------------------------------------------------------

    def _sample_time(self) -> float:
        return sample_instant(time.time(), self.metrics_resolution_s)

    def _pod_metrics(self, pod: Mapping[str, Any], t: float) -> JsonObj | None:
        usage = self.container_usage(pod, t)
        if usage is None:
            return None
        return pod_metrics_doc(pod, usage, t, time.time(), self.metrics_window_s)

    def list_pods(
        self, namespace: str | None, name: str | None, label_selector: str | None = None
    ) -> list[JsonObj]:
        t = self._sample_time()
        pods = sorted(self._pods(), key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        return read_pod_metrics(
            namespace,
            name,
            label_selector,
            lambda ns, n: self.store.get("pods", ns, n),
            pods,
            lambda pod: self._pod_metrics(pod, t),
        )

    def list_nodes(
        self, namespace: str | None, name: str | None, label_selector: str | None = None
    ) -> list[JsonObj]:
        t = self._sample_time()
        names = [name] if name is not None else self.names
        sums = {n: [0, 0] for n in names if n in self.kubeconfigs}
        for pod in self._pods():
            node = (pod.get("spec") or {}).get("nodeName")
            if node not in sums:
                continue
            for _c, cpu, mem in self.container_usage(pod, t) or ():
                sums[node][0] += cpu
                sums[node][1] += mem

        def node_metrics(n: str) -> JsonObj | None:
            if n not in sums:
                return None
            labels = ((self.store.get("nodes", None, n) or {}).get("metadata") or {}).get("labels") or {}
            return node_metrics_doc(n, labels, sums[n][0], sums[n][1], t, time.time(), self.metrics_window_s)

        return read_node_metrics(name, label_selector, names, node_metrics)
