"""Benchmark: the real control plane, and vpa run against it beside the same run against `vpa sim`.

Part 1 (always): the control plane's own costs — the warm rebuild of the binaries (`hack/cluster/build.sh`
with its stamp removed, Go's build cache warm; `--cold` builds into empty module and build caches instead,
downloads included), start to ready of `RealCluster` (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, CRDs Established, nodes registered, metrics.k8s.io Available), and the CPU kube-apiserver
and etcd spend per VPA status write with nothing else running (`--writes`, 2,000 by default).

Part 2 (per backend, `--backend kubernetes|sim|both`): `vpa sim` as a process with N nodes (real time on both
backends), D Deployments of R replicas and one VPA each (`updateMode: Off`, so nothing is evicted), created
over HTTPS; once every pod runs, every Deployment is available and the cluster is quiet (the processes
measured use under 0.3 of a CPU over 5 s), `vpa run --components=recommender,updater` as a process with
default flags. Reported: the time until every pod runs and until the cluster is quiet; the CPU time each
process used in 20 s before `vpa run` starts (the cluster's own background); time from `vpa run` start to
every VPA having a recommendation, the API requests up to then and how many were answered 429; the
recommender loop's time (`vpa_recommender_execution_latency_seconds{step="total"}`) and the API requests of
one loop (`rest_client_requests_total` between two loops); the CPU time each process used in those two
windows (`vpa run`, `vpa sim` and, on the real control plane, etcd, kube-apiserver, the controller manager
and the scheduler: they share the machine's CPUs; and the benchmark's own); `vpa run` RSS. The benchmark
follows pods, Deployments and VPAs with a watch each (`Tally`), not by polling LISTs, which took CPU from
the processes measured. Everything goes over real HTTPS through the production client; the admission
webhook is left out (no Service maps to it here). `--run-flag` (repeated) passes a flag to `vpa run`.

    python -m benchmarks.control_plane [--backend both] [--nodes 500] [--deployments 1000] [--replicas 5]
                                       [--skip-scale] [--cold] [--writes 2000]
                                       [--run-flag=--update-worker-count=20]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
import orjson
import yaml

from benchmarks import quiet_logs
from vpa.kube.client import ClientOptions, KubeClient
from vpa.kube.watching import WatchCache
from vpa.model.clock import RealClock

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "hack" / "cluster" / "build.sh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[str, list[str]] | None:
    """`/proc/PID/stat` as the command name and the fields after it (field 3 on), or None once the process
    is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    name, _, rest = text[text.index("(") + 1:].rpartition(")")
    return name, rest.split()


def _descendants(root: int) -> dict[int, str]:
    """`root` and every process below it, by PID, with their command names."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        stat = _stat(int(entry)) if entry.isdigit() else None
        if stat is not None:
            names[int(entry)], parents[int(entry)] = stat[0], int(stat[1][1])
    found = {root: names.get(root, "?")}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found[pid] = names[pid]
                grew = True
    return found


def cpu_seconds(pids: dict[int, str]) -> dict[str, float]:
    """CPU time (user + system) used so far by each process of `pids`, summed by command name."""
    used: dict[str, float] = {}
    for pid, name in pids.items():
        stat = _stat(pid)
        if stat is not None:
            fields = stat[1]
            used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * _TICK_S
    return used


def cpu_row(before: dict[str, float], after: dict[str, float], wall_s: float) -> str:
    """CPU seconds each process used between two readings, largest first, with the machine's total."""
    spent = sorted(((after[name] - before.get(name, 0.0), name) for name in after), reverse=True)
    parts = [f"{name} {seconds:.0f} s" for seconds, name in spent if seconds >= 0.5]
    capacity = wall_s * (os.cpu_count() or 1)
    return f"{'; '.join(parts) or 'each under 0.5 s'} (of {capacity:.0f} CPU-seconds in {wall_s:.0f} s)"


def build_times(cold: bool) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if shutil.which("go") is None:
        return [("build", "skipped: go not found")]
    env = dict(os.environ)
    tmp: str | None = None
    if cold:
        tmp = tempfile.mkdtemp(prefix="vpa-cold-build-")
        env.update(GOMODCACHE=f"{tmp}/mod", GOCACHE=f"{tmp}/cache", VPA_CLUSTER_DIR=f"{tmp}/cluster")
    else:
        from vpa.sim.kubernetes.releases import DEFAULT_RELEASE, cache_dir

        for stamp in (cache_dir() / DEFAULT_RELEASE / "bin").glob(".stamp-*"):
            stamp.unlink()
    start = time.monotonic()
    subprocess.run(["bash", str(BUILD)], check=True, env=env, capture_output=True)
    rows.append(("build, " + ("cold caches (downloads included)" if cold else "warm Go cache"),
                 f"{time.monotonic() - start:.0f} s"))  # fmt: skip
    start = time.monotonic()
    subprocess.run(["bash", str(BUILD)], check=True, env=env, capture_output=True)
    rows.append(("build, already built (stamp)", f"{time.monotonic() - start:.2f} s"))
    if tmp is not None:
        subprocess.run(["chmod", "-R", "u+w", tmp], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


async def start_to_ready() -> list[tuple[str, str]]:
    from vpa.sim.kubernetes.cluster import RealCluster

    cluster = RealCluster(nodes=3)
    start = time.monotonic()
    await cluster.start()
    took = time.monotonic() - start
    await cluster.stop()
    return [("control plane start to ready (3 nodes, CRDs, metrics API)", f"{took:.1f} s")]


def _status(i: int, change: int) -> dict[str, Any]:
    """The body of the recommender's status write for a one-container VPA, built as `VpaStatusWriter` builds
    it; `change` moves its target and bounds."""
    from vpa.kube.converting import vpa_status_to_dict
    from vpa.model.resources import Resources
    from vpa.model.vpa import (
        Condition,
        ConditionType,
        Recommendation,
        RecommendedContainerResources,
        VpaStatus,
    )

    target = Resources(25 + change, 262144000 + change * 1000 + i)
    rec = RecommendedContainerResources("app", target, lower_bound=Resources(25, 262144000),
                                        upper_bound=Resources(1000 + change, 900000000 + i),
                                        uncapped_target=target)  # fmt: skip
    status = VpaStatus(Recommendation((rec,)),
                       (Condition(ConditionType.RECOMMENDATION_PROVIDED, "True", 1_767_225_600.0),))
    return {"status": vpa_status_to_dict(status)}


async def status_write_cost(writes: int) -> list[tuple[str, str]]:
    """The control plane's CPU per VPA status write with nothing else running: `writes` VPAs, then a merge
    patch of each one's status (the recommender's write, 16 at a time), twice: the first recommendation,
    then a changed one. No watcher of VPAs but the controller manager's."""
    from vpa.sim.kubernetes.cluster import RealCluster

    cluster = RealCluster(nodes=1)
    await cluster.start()
    kube: Kube | None = None
    rows: list[tuple[str, str]] = []
    try:
        kube = k = Kube(cluster.kubeconfig_path)
        await k.call("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        path = "/apis/autoscaling.k8s.io/v1/namespaces/bench/verticalpodautoscalers"
        await _gather_bounded([k.call("POST", path, _vpa(i)) for i in range(writes)])
        pids = {pid: name for pid, name in _descendants(os.getpid()).items() if pid != os.getpid()}

        async def write(i: int, change: int) -> None:
            async with k.session.patch(f"{path}/app-{i:04d}/status", data=orjson.dumps(_status(i, change)),
                                       headers={"Content-Type": "application/merge-patch+json"}) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"status write: {resp.status} {body[:300]!r}")

        for change, what in ((1, "the first recommendation"), (2, "a changed one")):
            before, started = cpu_seconds(pids), time.monotonic()
            await _gather_bounded([write(i, change) for i in range(writes)])
            took = time.monotonic() - started
            after = cpu_seconds(pids)
            per = {name: (after[name] - before.get(name, 0.0)) * 1000 / writes for name in after}
            apiserver, etcd = per.get("kube-apiserver", 0.0), per.get("etcd", 0.0)
            rows.append((f"CPU per VPA status write, {what}",
                         f"kube-apiserver {apiserver:.1f} ms, etcd {etcd:.1f} ms "
                         f"({writes} merge patches in {took:.1f} s)"))
    finally:
        if kube is not None:
            await kube.close()
        await cluster.stop()
    return rows


class Kube:
    """A tiny HTTPS client from a kubeconfig with a bearer token (what `vpa sim` writes)."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        self.url = cluster["server"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)
        self.token = doc["users"][0]["user"]["token"]
        self.session = aiohttp.ClientSession(
            base_url=self.url,
            connector=aiohttp.TCPConnector(ssl=self.ssl, limit=16),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        for attempt in range(20):
            async with self.session.request(
                method, path, data=orjson.dumps(body) if body is not None else None
            ) as resp:
                raw = await resp.read()
                if resp.status == 429 or resp.status >= 500:
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                return resp.status, orjson.loads(raw) if raw else None
        return resp.status, None

    async def close(self) -> None:
        await self.session.close()


def _deployment(i: int, replicas: int) -> dict[str, Any]:
    name = f"app-{i:04d}"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }


def _vpa(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": f"app-{i:04d}"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"app-{i:04d}"},
            "updatePolicy": {"updateMode": "Off"},
        },
    }


async def _gather_bounded(coros: list[Any], limit: int = 16) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(coro: Any) -> None:
        async with sem:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


def is_running(pod: dict[str, Any]) -> bool:
    return bool((pod.get("status") or {}).get("phase") == "Running")


def is_available(deployment: dict[str, Any]) -> bool:
    """Every replica available, as of the Deployment's current generation."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    generation = (deployment.get("metadata") or {}).get("generation", 0)
    return bool(status.get("observedGeneration", 0) >= generation
                and status.get("availableReplicas", 0) >= spec.get("replicas", 1))


def is_recommended(vpa: dict[str, Any]) -> bool:
    return bool(((vpa.get("status") or {}).get("recommendation") or {}).get("containerRecommendations"))


class Tally:
    """How many objects of one collection meet a predicate, kept by the project's own informer (`WatchCache`:
    a paged LIST, then a WATCH, listed again after a 410) over the production client: the benchmark's own
    view of the cluster, at the cost of one more watcher.

    Why not poll: a paged LIST of 10,000 VPAs with recommendations costs kube-apiserver about 0.6
    CPU-seconds (0.7 s here from request to parsed), and polling one a second while `vpa run` worked took
    CPU from the processes measured on this 2-CPU machine: at 10,000 VPAs on the real control plane,
    kube-apiserver used 70 CPU-seconds up to every VPA recommended with polling and 58 with the watch, the
    same day. Polling 10,000 pods for Running, likewise, while the Deployments came up. A watch costs one
    event per change.
    """

    def __init__(self, kubeconfig: Path, path: str, meets: Callable[[dict[str, Any]], bool]) -> None:
        self._kubeconfig = kubeconfig
        self._path = path
        self._meets = meets
        self._client: KubeClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._want: int | None = None
        self.count = 0
        """Objects in the cache that meet the predicate."""
        self.reached: float | None = None
        """When (`time.monotonic()`) the count first reached what `until()` or `expect()` asked for."""

    def _move(self, by: int) -> None:
        if by:
            self.count += by
            if self._want is not None and self.reached is None and self.count >= self._want:
                self.reached = time.monotonic()
            self._changed.set()

    def expect(self, want: int) -> None:
        """Note when the count first reaches `want` (`reached`), from the event that made it so."""
        self._want, self.reached = want, None
        if self.count >= want:
            self.reached = time.monotonic()

    async def start(self) -> None:
        """Build the client and the cache, and return once the cache holds its first LIST."""
        clock = RealClock()
        self._client = await KubeClient.from_config(
            clock, ClientOptions(qps=0, user_agent="vpa-benchmark"), kubeconfig=str(self._kubeconfig))
        cache: WatchCache[bool] = WatchCache(self._client, clock, self._path, self._meets, name="tally")
        cache.on_add(lambda met: self._move(int(met)))
        cache.on_update(lambda was, met: self._move(int(met) - int(was)))
        cache.on_delete(lambda met: self._move(-int(met)))
        self._task = asyncio.ensure_future(cache.run())
        await cache.wait_synced()

    async def until(self, want: int, what: str, proc: asyncio.subprocess.Process, log: Path,
                    limit_s: float) -> None:
        """Wait until at least `want` objects meet the predicate; fail if `proc` exits or `limit_s`
        passes."""
        deadline = time.monotonic() + limit_s
        self.expect(want)
        while self.count < want:
            if proc.returncode is not None:
                tail = await asyncio.to_thread(log.read_text)
                raise RuntimeError(f"waiting for {what}, the process exited: {tail[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {limit_s:.0f} s waiting for {what}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 1.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._client is not None:
            await self._client.close()
            self._client = None


def is_quiet(used_cpu: float, previous_cpu: float | None, steady_cpu: float | None = None) -> bool:
    """A window in which the processes used `used_cpu` CPUs on average is quiet when that is under
    `QUIET_CPU`; with `steady_cpu`, also when it differs from the window before by less than that (a
    background that no longer falls: `vpa sim`'s node agent and heartbeats for 50,000 pods)."""
    if used_cpu < QUIET_CPU:
        return True
    return steady_cpu is not None and previous_cpu is not None and abs(used_cpu - previous_cpu) < steady_cpu


async def _settle(processes: dict[int, str], proc: asyncio.subprocess.Process, log: Path,
                  steady_cpu: float | None = None) -> float:
    """Wait until `processes` together use under `QUIET_CPU` of a CPU over `QUIET_WINDOW_S` (on the real
    control plane, the controller manager went on writing Deployments' statuses and events for about a
    minute after every pod ran at 10,000 Deployments: what `vpa run` would otherwise compete with), or with
    `steady_cpu` until their use stops changing by that much (`is_quiet`); the last window's CPUs used."""
    windows: list[float] = []

    async def quiet() -> bool:
        before, started = cpu_seconds(processes), time.monotonic()
        await asyncio.sleep(QUIET_WINDOW_S)
        used = (sum(cpu_seconds(processes).values()) - sum(before.values())) / (time.monotonic() - started)
        previous = windows[-1] if windows else None
        windows.append(used)
        return is_quiet(used, previous, steady_cpu)

    await _until("the cluster to be quiet", quiet, proc, log, 900)
    return windows[-1]


async def settle_cluster(
    kubeconfig: Path, deployments: int, sim: asyncio.subprocess.Process, log: Path, tallies: list[Tally],
    steady_cpu: float | None = None,
) -> tuple[dict[int, str], float]:
    """Wait until every Deployment is available (a `Tally`, added to `tallies` so that a failure closes it)
    and the simulator, the processes below it (the real control plane's) and this benchmark are quiet
    (`_settle`); those processes by PID with their names, and the CPUs they used in the last window."""
    available = Tally(kubeconfig, DEPLOYMENTS, is_available)
    tallies.append(available)
    await available.start()
    await available.until(deployments, "every Deployment available", sim, log, 1800)
    await available.close()
    processes = {**_descendants(sim.pid), os.getpid(): "benchmark"}
    processes[sim.pid] = "vpa sim"
    return processes, await _settle(processes, sim, log, steady_cpu)


QUIET_CPU: Final = 0.3
QUIET_WINDOW_S: Final = 5.0
IDLE_S: Final = 20.0
"""The window in which the cluster's own CPU use is measured before `vpa run` starts."""
PODS: Final = "/api/v1/pods"
DEPLOYMENTS: Final = "/apis/apps/v1/deployments"
VPAS: Final = "/apis/autoscaling.k8s.io/v1/verticalpodautoscalers"


def _metric(text: str, name: str, labels: str = "") -> float:
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.e+-]+)$", re.MULTILINE)
    for match in pattern.finditer(text):
        if labels in (match.group(1) or ""):
            total += float(match.group(2))
    return total


async def _stop(proc: asyncio.subprocess.Process | None) -> None:
    if proc is None or proc.returncode is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def _spawn(args: list[str], log: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(*args, stdout=out, stderr=out, cwd=REPO, env=env)


async def _until(what: str, probe: Any, proc: asyncio.subprocess.Process, log: Path, limit_s: float) -> None:
    """Poll `probe()` until it is true; fail if `proc` exits or `limit_s` passes."""
    deadline = time.monotonic() + limit_s
    while True:
        if await probe():
            return
        if proc.returncode is not None:
            tail = await asyncio.to_thread(log.read_text)
            raise RuntimeError(f"waiting for {what}, the process exited: {tail[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit_s:.0f} s waiting for {what}")
        await asyncio.sleep(1)


LOOPS = "vpa_recommender_execution_latency_seconds_count"
LOOP_SECONDS = "vpa_recommender_execution_latency_seconds_sum"
TOTAL = 'step="total"'


async def scale_run(backend: str, nodes: int, deployments: int, replicas: int,
                    run_flags: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    work = Path(tempfile.mkdtemp(prefix=f"vpa-bench-{backend}-"))
    kubeconfig = work / "kubeconfig"
    args = [sys.executable, "-m", "vpa.cli", "sim", "--kubeconfig-out", str(kubeconfig),
            "--nodes", str(nodes), "--node-cpu", "32", "--node-memory", "128Gi"]  # fmt: skip
    args += ["--control-plane=kubernetes"] if backend == "kubernetes" else ["--time-scale", "1"]
    sim = await _spawn(args, work / "sim.log")
    run: asyncio.subprocess.Process | None = None
    rows: list[tuple[str, str]] = []
    kube: Kube | None = None
    tallies: list[Tally] = []

    async def exists() -> bool:
        return kubeconfig.exists()

    try:
        await _until("vpa sim to start", exists, sim, work / "sim.log", 300)
        kube = Kube(kubeconfig)
        start = time.monotonic()
        for ns in sorted({f"bench-{i % 10}" for i in range(deployments)}):
            await kube.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        await asyncio.sleep(2)  # each namespace's default ServiceAccount
        k = kube
        running = Tally(kubeconfig, PODS, is_running)
        tallies.append(running)
        await running.start()
        await _gather_bounded([
            k.call("POST", f"/apis/apps/v1/namespaces/bench-{i % 10}/deployments", _deployment(i, replicas))
            for i in range(deployments)
        ])  # fmt: skip
        vpas = "/apis/autoscaling.k8s.io/v1/namespaces/bench-{}/verticalpodautoscalers"
        await _gather_bounded([k.call("POST", vpas.format(i % 10), _vpa(i)) for i in range(deployments)])
        want = deployments * replicas
        await running.until(want, f"{want} running pods", sim, work / "sim.log", 1800)
        rows.append((f"{backend}: {want} pods on {nodes} nodes running", f"{time.monotonic() - start:.0f} s"))
        await running.close()
        processes, _ = await settle_cluster(kubeconfig, deployments, sim, work / "sim.log", tallies)
        rows.append((f"{backend}: ... every Deployment available and the cluster quiet",
                     f"{time.monotonic() - start:.0f} s"))
        recommended = Tally(kubeconfig, VPAS, is_recommended)
        tallies.append(recommended)
        await recommended.start()
        # The cluster's own background (nodes' heartbeats, controllers) before vpa run adds to it.
        idle, idle_started = cpu_seconds(processes), time.monotonic()
        await asyncio.sleep(IDLE_S)
        rows.append((f"{backend}: CPU used in {IDLE_S:.0f} s before vpa run starts, by process",
                     cpu_row(idle, cpu_seconds(processes), time.monotonic() - idle_started)))

        port = _free_port()
        run = await _spawn(
            [sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={kubeconfig}",
             f"--address=127.0.0.1:{port}", "--components=recommender,updater", "--log-format=json",
             *run_flags],
            work / "vpa-run.log",
        )  # fmt: skip
        started = time.monotonic()
        processes[run.pid] = "vpa run"
        cpu_before = cpu_seconds(processes)
        await recommended.until(deployments, "every VPA recommended", run, work / "vpa-run.log", 1800)
        recommended_s = (recommended.reached or time.monotonic()) - started
        await recommended.close()
        rows.append((f"{backend}: vpa run start to every VPA recommended", f"{recommended_s:.0f} s"))
        rows.append((f"{backend}: CPU used meanwhile, by process",
                     cpu_row(cpu_before, cpu_seconds(processes), recommended_s)))

        async with aiohttp.ClientSession() as plain:
            seen: dict[str, str] = {}

            async with plain.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
            requests_then = _metric(text, "rest_client_requests_total")
            throttled = _metric(text, "rest_client_requests_total", 'code="429"')
            rows.append((f"{backend}: API requests up to then; answered 429",
                         f"{requests_then:.0f}; {throttled:.0f}"))

            async def loops_at_least(n: float) -> bool:
                async with plain.get(f"http://127.0.0.1:{port}/metrics") as resp:
                    seen["text"] = await resp.text()
                return _metric(seen["text"], LOOPS, TOTAL) >= n

            await loops_at_least(0)
            loops = _metric(seen["text"], LOOPS, TOTAL)
            await _until("a loop", lambda: loops_at_least(loops + 1), run, work / "vpa-run.log", 600)
            requests_before = _metric(seen["text"], "rest_client_requests_total")
            seconds_before = _metric(seen["text"], LOOP_SECONDS, TOTAL)
            cpu_loop, loop_started = cpu_seconds(processes), time.monotonic()
            await _until("another loop", lambda: loops_at_least(loops + 2), run, work / "vpa-run.log", 600)
            cpu_loop_row = cpu_row(cpu_loop, cpu_seconds(processes), time.monotonic() - loop_started)
            loop_s = _metric(seen["text"], LOOP_SECONDS, TOTAL) - seconds_before
            requests = _metric(seen["text"], "rest_client_requests_total") - requests_before
        rows.append((f"{backend}: steady recommender loop", f"{loop_s:.1f} s"))
        rows.append((f"{backend}: API requests per loop (recommender and updater)", f"{requests:.0f}"))
        rows.append((f"{backend}: CPU used in that loop, by process", cpu_loop_row))
        rows.append((f"{backend}: vpa run RSS", f"{_rss_mib(run.pid):.0f} MiB"))
    finally:
        for tally in tallies:
            await tally.close()
        if kube is not None:
            await kube.close()
        await _stop(run)
        await _stop(sim)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.control_plane")
    parser.add_argument("--backend", choices=("kubernetes", "sim", "both"), default="both")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--skip-scale", action="store_true", help="only part 1 (build, start-up, write cost)")
    parser.add_argument("--writes", type=int, default=2000, metavar="N",
                        help="VPA status writes timed alone on the control plane (0: none)")
    parser.add_argument("--skip-build", action="store_true", help="do not rebuild the binaries")
    parser.add_argument("--cold", action="store_true", help="build into empty Go caches (downloads included)")
    parser.add_argument("--run-flag", action="append", default=[], metavar="FLAG",
                        help="a flag for vpa run (repeat for more), e.g. --run-flag=--update-worker-count=20")
    args = parser.parse_args(argv)
    quiet_logs()
    rows: list[tuple[str, str]] = []
    if not args.skip_build:
        rows += build_times(args.cold)
    from vpa.sim.kubernetes.controlplane import ControlPlaneError, find_binaries

    try:
        find_binaries()
    except ControlPlaneError as err:
        print(f"control_plane: skipped: {err}")
        return 0
    rows += asyncio.run(start_to_ready())
    if args.writes:
        rows += asyncio.run(status_write_cost(args.writes))
    if not args.skip_scale:
        backends = ("sim", "kubernetes") if args.backend == "both" else (args.backend,)
        for backend in backends:
            rows += asyncio.run(scale_run(backend, args.nodes, args.deployments, args.replicas,
                                          tuple(args.run_flag)))
    width = max(len(name) for name, _ in rows)
    print(f"\ncontrol_plane ({os.cpu_count()} CPUs)")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
