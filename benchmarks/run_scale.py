"""Benchmark: `vpa run` (default flags) against `vpa sim`, separate processes, HTTPS, at the scale users run.

`vpa sim --time-scale 1` is its own process (HTTPS API server, controllers, scheduler, node agent,
metrics.k8s.io); this process creates `--vpas` Deployments of `--pods / --vpas` replicas and one VPA
(updateMode Off) per Deployment, waits until every pod runs and the cluster is quiet, then starts `vpa run`
(all three components, the webhook on the same process, default flags but for the loopback addresses and
what `--run-arg` adds) and reports what users feel, each beside its target:

- time from `vpa run` start to every VPA having a recommendation in the API (followed with a watch,
  `control_plane.Tally`, not by polling a LIST, which would take CPU from the processes measured);
- 429 answers `vpa run` received up to then (`rest_client_requests_total{code="429"}`);
- the duration of a steady loop (`vpa_recommender_execution_latency_seconds{step="total"}`, the second one
  after the first) and the API requests it sent, by verb;
- the webhook's latency at concurrency 1 (a real pod of the cluster as a CREATE review over one HTTPS
  keep-alive connection), p50, p99 and the slowest review, while the first recommender loop runs and while a
  forced relist of every cache runs (`/sim/v1/faults/compact` then `drop-watches`: each watch resumes from
  an expired resourceVersion, gets 410 and LISTs everything again); measured by a client in a process of its
  own, warmed against another server first so that its own first use of TLS is not counted;
- `vpa run`'s peak RSS (VmHWM);
- the CPU each process used up to the first loop's end and in the relist: where a miss comes from.

Targets (issue 41): at up to 10,000 VPAs, every VPA recommended within 30 s of start, a steady loop within
20 s, peak RSS within 400 MiB, the webhook's p99 within 25 ms and no review over 250 ms in both windows, 0
answers 429. Beyond 10,000 VPAs (Kubernetes' largest cluster is 150,000 pods on 5,000 nodes): every VPA
recommended within 60 s, a steady loop within the 60 s interval, peak RSS within 1 GiB, the webhook's p99
within 25 ms.

    python -m benchmarks.run_scale [--vpas 10000] [--pods 50000] [--nodes N] [--sim-nice 10]
                                   [--run-arg=--kube-api-qps=200 ...] [--first-only]
                                   [--runs N] [--compare BEFORE_CMD] [--vpa-command CMD]

Nodes default to one per 100 pods (the kubelet's default allows 110). `vpa sim` runs at nice 10 by default
(`--sim-nice`): in a cluster kube-apiserver does not share `vpa run`'s CPUs; on a small machine the
simulator answering the first loop's writes otherwise keeps `vpa run` waiting for a CPU. At 10,000 VPAs on a
2-core machine the cluster loads in about 90 s and a measured run takes about 3 minutes.

Several runs on one loaded cluster: `--runs N` measures N runs of each command; `--compare BEFORE_CMD` adds
a second `vpa run`, alternated with this checkout's (before, after, before, after, ...) so that both meet the
same machine and the same cluster. Between runs, once the last `vpa run` has exited (stopped by PID), the
cluster is put back where a first run starts (`reset`): every VPA's status cleared through the status
subresource, every VerticalPodAutoscalerCheckpoint deleted, and every Lease, MutatingWebhookConfiguration
and Secret that was not there before the first run deleted (the Leases of leader election and the webhook's
status, the webhook's registration, its self-managed certificates); then the benchmark waits until the
cluster is quiet again. Each run first checks that no VPA carries a recommendation, so that "every VPA
recommended" counts its own writes only. Each run's rows are printed as it ends; at the end, one line per
run and, per command, the median and [min–max] of each measure. The before build is a checkout of its own
in a venv of its own (issue 41's before is 9b373e2, round 2's end):

    git worktree add <before-checkout> 9b373e2
    python3 -m venv <before-venv> && <before-venv>/bin/pip install -e <before-checkout>
    python -m benchmarks.run_scale --runs 3 --compare '<before-venv>/bin/vpa run'

Give the venv's `vpa` script, not `<before-venv>/bin/python -m vpa.cli run`: the benchmark starts its
processes in this checkout, where `-m` would import this checkout's code. `--vpa-command` replaces this
checkout's `vpa run` the same way; either command must exec `vpa run` itself (no wrapping shell), so that
its PID is the one measured.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import shlex
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import orjson

from benchmarks import quiet_logs
from benchmarks.control_plane import (
    IDLE_S,
    LOOP_SECONDS,
    LOOPS,
    PODS,
    TOTAL,
    VPAS,
    Kube,
    Tally,
    _deployment,
    _free_port,
    _gather_bounded,
    _metric,
    _settle,
    _spawn,
    _stop,
    _until,
    _vpa,
    cpu_row,
    cpu_seconds,
    is_recommended,
    is_running,
    settle_cluster,
)

SIM_NICE = 10
NAMESPACES = 10
PODS_PER_NODE = 100
STEADY_CPU = 0.05
"""The simulator is quiet once its CPU use over a window changes by less than this much from the window
before: at tens of thousands of pods its node agent and heartbeats keep a steady background of their own."""


Row = tuple[str, str, str]
"""A table row: the measure, its value, a note (its verdict, what it is made of)."""


@dataclasses.dataclass(frozen=True)
class Targets:
    recommended_s: float
    loop_s: float
    rss_mib: float
    p99_ms: float
    max_ms: float | None  # None: not a target at this scale
    throttled: int | None


STANDARD = Targets(recommended_s=30.0, loop_s=20.0, rss_mib=400.0, p99_ms=25.0, max_ms=250.0, throttled=0)
"""Up to 10,000 VPAs and 50,000 pods."""
LARGEST = Targets(recommended_s=60.0, loop_s=60.0, rss_mib=1024.0, p99_ms=25.0, max_ms=None, throttled=None)
"""Beyond: up to Kubernetes' largest cluster."""


def targets_for(vpas: int) -> Targets:
    return STANDARD if vpas <= 10_000 else LARGEST


def _proc_status_mib(pid: int, field: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _percentiles(samples: list[float]) -> dict[str, float]:
    """n, p50, p99 and max in ms (the first review, which also opens the connection, included)."""
    if not samples:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50": ordered[len(ordered) // 2] * 1000,
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "max": ordered[-1] * 1000,
    }


def _review(pod: dict[str, Any]) -> bytes:
    pod = {k: v for k, v in pod.items() if k != "status"}
    metadata = dict(pod["metadata"])
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "nodeName"):
        metadata.pop(key, None)
    pod["metadata"] = metadata
    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": metadata.get("namespace", ""),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    })  # fmt: skip


def _probe_context() -> ssl.SSLContext:
    """No verification: the webhook's serving certificate is self-signed, on loopback."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _warm_client(ctx: ssl.SSLContext, url: str, body: bytes) -> None:
    """One HTTPS POST to `vpa sim`'s API server (which refuses it), so that a fresh process's first use of
    OpenSSL and `http.client` is not timed as the webhook's. Best effort."""
    import http.client

    parts = urlsplit(url)
    connection = http.client.HTTPSConnection(parts.hostname or "127.0.0.1", parts.port or 443, context=ctx,
                                             timeout=10)
    try:
        connection.request("POST", "/version", body=body, headers={"Content-Type": "application/json"})
        connection.getresponse().read()
    except (OSError, http.client.HTTPException):
        pass
    finally:
        connection.close()


def _probe_process(port: int, body: bytes, stop: Any, conn: Any, warm_url: str) -> None:
    """In its own process: POST the review back to back at concurrency 1 over one keep-alive HTTPS
    connection until `stop` is set; send back the latencies, the errors and the CPU time it used."""
    import http.client

    ctx = _probe_context()
    _warm_client(ctx, warm_url, body)
    cpu_started = time.process_time()
    samples: list[float] = []
    errors = 0
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    while not stop.is_set():
        started = time.monotonic()
        try:
            connection.request("POST", "/", body=body, headers={"Content-Type": "application/json"})
            resp = connection.getresponse()
            raw = resp.read()
            ok = resp.status == 200 and b'"allowed":true' in raw.replace(b" ", b"")
        except (OSError, http.client.HTTPException):
            ok = False
            connection.close()
            connection = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        if ok:
            samples.append(time.monotonic() - started)
        else:
            errors += 1
            time.sleep(0.05)
        time.sleep(0.002)  # a steady trickle, not a load test
    conn.send((samples, errors, time.process_time() - cpu_started))


class WebhookProbe:
    """Starts and stops the probe process, one per window; keeps the error count."""

    def __init__(self, port: int, body: bytes, warm_url: str) -> None:
        self._port = port
        self._body = body
        self._warm_url = warm_url
        self._ctx = multiprocessing.get_context("spawn")
        self.errors = 0
        self._stop: Any = None
        self._proc: Any = None
        self._conn: Any = None

    def start(self) -> None:
        self._stop = self._ctx.Event()
        self._conn, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(
            target=_probe_process, args=(self._port, self._body, self._stop, child, self._warm_url),
            daemon=True)
        self._proc.start()

    async def finish(self) -> dict[str, float]:
        """Stop the probe: its percentiles (`_percentiles`) and `cpu`, the CPU-seconds it used."""
        self._stop.set()
        samples, errors, cpu_s = await asyncio.to_thread(self._conn.recv)
        await asyncio.to_thread(self._proc.join, 10)
        self.errors += errors
        return {**_percentiles(list(samples)), "cpu": cpu_s}

    async def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()


def _verdict(value: float, limit: float | None, unit: str = "") -> str:
    if limit is None:
        return "(not a target at this scale)"
    return f"target ≤ {limit:g}{unit}: {'ok' if value <= limit else 'MISS'}"


def _webhook_rows(window: str, row: dict[str, float], targets: Targets) -> list[Row]:
    return [
        (f"webhook p99, {window} (c=1)", f"{row['p99']:.1f} ms",
         f"{_verdict(row['p99'], targets.p99_ms, ' ms')}; p50 {row['p50']:.1f} ms, {row['n']:.0f} reviews"),
        (f"webhook slowest review, {window}", f"{row['max']:.1f} ms",
         _verdict(row["max"], targets.max_ms, " ms")),
    ]


def _webhook_ok(row: dict[str, float], targets: Targets) -> bool:
    return row["n"] > 0 and row["p99"] <= targets.p99_ms and (
        targets.max_ms is None or row["max"] <= targets.max_ms)


@dataclasses.dataclass(frozen=True)
class VpaCommand:
    """A `vpa run` to measure: `argv` up to and including `run` (the benchmark appends its own flags)."""

    label: str
    argv: tuple[str, ...]


THIS_CHECKOUT: Final = (sys.executable, "-m", "vpa.cli", "run")
"""This checkout's `vpa run` (the benchmark's processes start in this checkout, so `-m` imports its code)."""
THIS_ONE: Final = VpaCommand("vpa run", THIS_CHECKOUT)


@dataclasses.dataclass
class Measures:
    """One measured `vpa run`: what the table and the summary show (None: not measured in that run)."""

    command: str
    ready_s: float
    first_loop_s: float | None
    recommended_s: float | None
    throttled: float
    p99_first: float
    max_first: float
    loop_s: float | None = None
    loop_requests: float | None = None
    p99_relist: float | None = None
    max_relist: float | None = None
    rss_mib: float = 0.0
    failed_reviews: int = 0
    ok: bool = False


COLUMNS: Final = (
    ("recommended s", "recommended_s", ".1f"),
    ("first loop s", "first_loop_s", ".1f"),
    ("ready s", "ready_s", ".1f"),
    ("429", "throttled", ".0f"),
    ("steady loop s", "loop_s", ".1f"),
    ("requests/loop", "loop_requests", ".0f"),
    ("p99 1st ms", "p99_first", ".1f"),
    ("max 1st ms", "max_first", ".1f"),
    ("p99 relist ms", "p99_relist", ".1f"),
    ("max relist ms", "max_relist", ".1f"),
    ("peak RSS MiB", "rss_mib", ".0f"),
)
"""The table's measures: header, `Measures` field, format."""


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def runs_table(results: list[Measures]) -> list[str]:
    """One line per run, in the order run: its command and each measure of `COLUMNS`."""
    label_width = max(len("command"), *(len(m.command) for m in results))
    headers = "  ".join(header for header, _, _ in COLUMNS)
    header = f"  {'run':>3}  {'command':<{label_width}}  {headers}"
    lines = [header + "  verdict"]
    for n, m in enumerate(results, 1):
        cells = "  ".join(f"{_cell(getattr(m, field), fmt):>{len(h)}}" for h, field, fmt in COLUMNS)
        lines.append(f"  {n:>3}  {m.command:<{label_width}}  {cells}  {'ok' if m.ok else 'MISS'}")
    return lines


def summary(results: list[Measures]) -> list[str]:
    """One line per measure, one column per command (in the order of its first run): the median and
    [min–max] over that command's runs."""
    commands = list(dict.fromkeys(m.command for m in results))
    by_command = {c: [m for m in results if m.command == c] for c in commands}
    cells: list[list[str]] = [
        [f"{c} ({len(runs)} run{'s' if len(runs) > 1 else ''}, {sum(m.ok for m in runs)} ok)"
         for c, runs in by_command.items()]
    ]
    names = ["measure: median [min–max]"]
    for header, field, fmt in COLUMNS:
        row = []
        for runs in by_command.values():
            values = [v for m in runs if (v := getattr(m, field)) is not None]
            missing = f" ({len(values)} of {len(runs)} runs)" if len(values) < len(runs) else ""
            row.append("-" if not values else f"{format(statistics.median(values), fmt)} "
                       f"[{format(min(values), fmt)}–{format(max(values), fmt)}]{missing}")
        if any(cell != "-" for cell in row):
            names.append(header)
            cells.append(row)
    widths = [max(len(line[i]) for line in cells) for i in range(len(commands))]
    name_width = max(len(n) for n in names)
    lines = []
    for name, line in zip(names, cells, strict=True):
        padded = "  ".join(f"{cell:>{width}}" for cell, width in zip(line, widths, strict=True))
        lines.append(f"  {name:<{name_width}}  {padded}")
    return lines


@dataclasses.dataclass
class Cluster:
    """The loaded cluster every measured run shares."""

    kube: Kube
    kubeconfig: Path
    sim: asyncio.subprocess.Process
    work: Path
    vpas: int
    processes: dict[int, str]
    """The processes whose CPU is counted (the simulator's, the benchmark's; a run adds its `vpa run`)."""
    review: bytes
    tallies: list[Tally]
    """Every `Tally` started, closed on the way out whatever happens."""

    @property
    def sim_log(self) -> Path:
        return self.work / "sim.log"


VPA_API: Final = "/apis/autoscaling.k8s.io/v1"
LEFT_BY_A_RUN: Final = (
    ("/apis/coordination.k8s.io/v1", "leases"),  # the leader-election and the webhook's status Leases
    ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"),  # the webhook's registration
    ("/api/v1", "secrets"),  # the self-managed webhook certificates: a first start generates them
)
"""Objects `vpa run` creates that a later start would find, and start differently: every one not in the
cluster before the first run is deleted between runs."""


def _path(prefix: str, plural: str, namespace: str = "", name: str = "") -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{prefix}{scope}/{plural}" + (f"/{name}" if name else "")


async def _items(k: Kube, prefix: str, plural: str) -> list[dict[str, Any]]:
    status, body = await k.call("GET", _path(prefix, plural))
    if status != 200 or body is None:
        raise RuntimeError(f"LIST {plural}: HTTP {status}")
    items: list[dict[str, Any]] = body["items"]
    return items


def _key(item: dict[str, Any]) -> tuple[str, str]:
    return item["metadata"].get("namespace", ""), item["metadata"]["name"]


async def cluster_objects(k: Kube) -> dict[str, set[tuple[str, str]]]:
    """Every object of `LEFT_BY_A_RUN`, by plural: (namespace, name)."""
    return {plural: {_key(i) for i in await _items(k, prefix, plural)} for prefix, plural in LEFT_BY_A_RUN}


async def reset(k: Kube, baseline: dict[str, set[tuple[str, str]]]) -> str:
    """Put back the state a first `vpa run` starts from, once the last one has exited: no VPA status (so
    every recommendation the next run is timed to is its own), no VerticalPodAutoscalerCheckpoints (which a
    recommender starts from), and none of `LEFT_BY_A_RUN` that `baseline` did not hold. What was done."""

    async def delete(path: str) -> None:
        status, _ = await k.call("DELETE", path)
        if status not in (200, 202, 404):
            raise RuntimeError(f"reset: DELETE {path}: HTTP {status}")

    async def clear_status(item: dict[str, Any]) -> None:
        # The status subresource: in vpa sim faster than deleting and re-creating the VPAs, and the objects
        # keep their uid and creationTimestamp, as the first run saw them.
        path = _path(VPA_API, "verticalpodautoscalers", *_key(item)) + "/status"
        for attempt in range(20):
            async with k.session.patch(path, data=b'{"status":null}',
                                       headers={"Content-Type": "application/merge-patch+json"}) as resp:
                await resp.read()
                if resp.status == 200:
                    return
                if resp.status != 429 and resp.status < 500:
                    raise RuntimeError(f"reset: PATCH {path}: HTTP {resp.status}")
            await asyncio.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"reset: PATCH {path}: still refused after 20 attempts")

    with_status = [v for v in await _items(k, VPA_API, "verticalpodautoscalers") if v.get("status")]
    await _gather_bounded([clear_status(v) for v in with_status])
    checkpoints = await _items(k, VPA_API, "verticalpodautoscalercheckpoints")
    for namespace in sorted({_key(c)[0] for c in checkpoints}):
        await delete(_path(VPA_API, "verticalpodautoscalercheckpoints", namespace))
    deleted: list[str] = []
    for (prefix, plural), now in zip(LEFT_BY_A_RUN, (await cluster_objects(k)).values(), strict=True):
        for namespace, name in sorted(now - baseline[plural]):
            await delete(_path(prefix, plural, namespace, name))
            deleted.append(f"{plural[:-1]} {namespace + '/' if namespace else ''}{name}")
    left = await _items(k, VPA_API, "verticalpodautoscalercheckpoints")
    stayed = {plural: now - baseline[plural] for plural, now in (await cluster_objects(k)).items()}
    if left or any(stayed.values()):
        raise RuntimeError(f"reset: {len(left)} checkpoints and {stayed} remain after deleting them")
    return (f"{len(with_status):,} VPA statuses cleared, {len(checkpoints):,} checkpoints deleted"
            + (f", deleted {', '.join(deleted)}" if deleted else ""))


async def load_cluster(vpas: int, pods: int, nodes: int, sim_nice: int, work: Path,
                       tallies: list[Tally], sim_flags: tuple[str, ...] = (),
                       vpas_of: Callable[[int], list[dict[str, Any]]] = lambda i: [_vpa(i)],
                       ) -> tuple[Cluster, Row]:
    """Start `vpa sim` (with `sim_flags` added), create the Deployments and the VPAs (`vpas_of(i)` for
    Deployment i: one by default), wait until every pod runs, every Deployment is available and the cluster
    is quiet, and one metrics window more; the cluster and its table row."""
    replicas = pods // vpas
    kubeconfig = work / "kubeconfig"
    niced = ["nice", "-n", str(sim_nice)] if sim_nice else []
    sim = await _spawn(
        [*niced, sys.executable, "-m", "vpa.cli", "sim", "--kubeconfig-out", str(kubeconfig),
         "--nodes", str(nodes), "--node-cpu", "32", "--node-memory", "128Gi", "--time-scale", "1",
         *sim_flags],
        work / "sim.log",
    )  # fmt: skip

    async def exists() -> bool:
        return kubeconfig.exists()

    try:
        await _until("vpa sim to start", exists, sim, work / "sim.log", 300)
    except BaseException:
        await _stop(sim)
        raise
    k = Kube(kubeconfig)
    cluster = Cluster(k, kubeconfig, sim, work, vpas, {}, b"", tallies)
    start = time.monotonic()
    for ns in range(min(NAMESPACES, vpas)):
        await k.call("POST", "/api/v1/namespaces", {"metadata": {"name": f"bench-{ns}"}})
    await asyncio.sleep(2)  # each namespace's default ServiceAccount
    running = Tally(kubeconfig, PODS, is_running)
    tallies.append(running)
    await running.start()
    await _gather_bounded([
        k.call("POST", f"/apis/apps/v1/namespaces/bench-{i % NAMESPACES}/deployments",
               _deployment(i, replicas))
        for i in range(vpas)
    ])  # fmt: skip
    vpa_path = VPA_API + "/namespaces/bench-{}/verticalpodautoscalers"
    await _gather_bounded([k.call("POST", vpa_path.format(i % NAMESPACES), body)
                           for i in range(vpas) for body in vpas_of(i)])
    want_pods = vpas * replicas
    await running.until(want_pods, f"{want_pods} running pods", sim, cluster.sim_log, 3600)
    await running.close()
    row = ("cluster", f"{want_pods:,} pods", f"{vpas:,} Deployments × {replicas}, {vpas:,} VPAs, "
           f"{nodes:,} nodes; all Running {time.monotonic() - start:.0f} s after the first create")
    cluster.processes, _ = await settle_cluster(kubeconfig, vpas, sim, cluster.sim_log, tallies,
                                                steady_cpu=STEADY_CPU)
    await asyncio.sleep(IDLE_S)  # at least one metrics.k8s.io window for every pod
    _, sample_pods = await k.call("GET", "/api/v1/namespaces/bench-1/pods?limit=1")
    cluster.review = _review(sample_pods["items"][0])
    return cluster, row


async def measure(c: Cluster, command: VpaCommand, log: Path, run_args: tuple[str, ...], targets: Targets,
                  first_only: bool) -> tuple[Measures, list[Row]]:
    """Start `command`, measure it, stop it (by PID); its measures and its rows."""
    k = c.kube
    recommended = Tally(c.kubeconfig, VPAS, is_recommended)
    c.tallies.append(recommended)
    await recommended.start()
    if recommended.count:
        raise RuntimeError(f"{recommended.count} VPAs carry a recommendation before vpa run starts: the time "
                           "to every VPA recommended would count recommendations this run did not write")
    recommended.expect(c.vpas)

    port, webhook_port = _free_port(), _free_port()
    run_proc = await _spawn(
        [*command.argv, f"--kubeconfig={c.kubeconfig}", f"--address=127.0.0.1:{port}",
         f"--port={webhook_port}", "--log-format=json", *run_args],
        log,
    )  # fmt: skip
    started = time.monotonic()
    c.processes[run_proc.pid] = "vpa run"
    cpu_start = cpu_seconds(c.processes)
    plain = aiohttp.ClientSession()
    probe: WebhookProbe | None = None

    async def scrape() -> str:
        async with plain.get(f"http://127.0.0.1:{port}/metrics") as resp:
            return await resp.text()

    async def ready() -> bool:
        try:
            async with plain.get(f"http://127.0.0.1:{port}/readyz") as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    async def loops_at_least(n: float) -> bool:
        return _metric(await scrape(), LOOPS, TOTAL) >= n

    try:
        await _until("vpa run ready", ready, run_proc, log, 600)
        ready_s = time.monotonic() - started
        probe = WebhookProbe(webhook_port, c.review, k.url)
        probe.start()
        first_loop_s: float | None = None
        recommended_s: float | None = None
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline and (first_loop_s is None or recommended_s is None):
            if run_proc.returncode is not None:
                tail = await asyncio.to_thread(log.read_text)
                raise RuntimeError("vpa run exited: " + tail[-2000:])
            if first_loop_s is None and await loops_at_least(1):
                first_loop_s = time.monotonic() - started
            if recommended_s is None and recommended.reached is not None:
                recommended_s = recommended.reached - started
                await recommended.close()
            await asyncio.sleep(1)
        await recommended.close()
        during_first = await probe.finish()
        first_text = await scrape()
        cpu_first = cpu_row(cpu_start, cpu_seconds(c.processes), time.monotonic() - started)
        throttled = _metric(first_text, "rest_client_requests_total", 'code="429"')
        requests_first = _metric(first_text, "rest_client_requests_total")
        rec_ok = recommended_s is not None and recommended_s <= targets.recommended_s
        throttled_ok = targets.throttled is None or throttled <= targets.throttled
        m = Measures(command.label, ready_s, first_loop_s, recommended_s, throttled, during_first["p99"],
                     during_first["max"])
        rows = [
            ("vpa run start to ready (caches synced)", f"{ready_s:.1f} s", ""),
            ("vpa run start to the first loop's end",
             "not within 30 min" if first_loop_s is None else f"{first_loop_s:.1f} s", ""),
            ("vpa run start to every VPA recommended",
             "not within 30 min" if recommended_s is None else f"{recommended_s:.1f} s",
             _verdict(recommended_s or float("inf"), targets.recommended_s, " s")),
            ("answers 429 up to then", f"{throttled:.0f}",
             f"{_verdict(throttled, targets.throttled)}; of {requests_first:.0f} requests"),
            *_webhook_rows("first loop", during_first, targets),
            ("CPU used from start to the first loop's end", "by process",
             f"{cpu_first}; the webhook's client {during_first['cpu']:.1f} s"),
        ]  # fmt: skip
        ok = rec_ok and throttled_ok and _webhook_ok(during_first, targets)

        if not first_only:
            # A steady loop: the second after the first (the first steady one may still carry catch-up).
            loops = _metric(await scrape(), LOOPS, TOTAL)
            await _until("a loop", lambda: loops_at_least(loops + 1), run_proc, log, 900)
            before = await scrape()
            await _until("another loop", lambda: loops_at_least(loops + 2), run_proc, log, 900)
            after = await scrape()
            loop_s = _metric(after, LOOP_SECONDS, TOTAL) - _metric(before, LOOP_SECONDS, TOTAL)
            per_verb = {
                verb: _metric(after, "rest_client_requests_total", f'method="{verb}"')
                - _metric(before, "rest_client_requests_total", f'method="{verb}"')
                for verb in ("GET", "PATCH", "POST", "PUT", "DELETE", "WATCH")
            }
            m.loop_s, m.loop_requests = loop_s, sum(per_verb.values())
            rows += [
                ("steady loop", f"{loop_s:.1f} s",
                 _verdict(loop_s, targets.loop_s, " s") + "; interval 60 s"),
                ("API requests per steady loop", f"{sum(per_verb.values()):.0f}",
                 ", ".join(f"{v} {n:.0f}" for v, n in per_verb.items() if n)),
            ]
            ok = ok and loop_s <= targets.loop_s

            # A forced relist of every cache, with the webhook probed meanwhile.
            relists_of = {c: f'cache="{c}",what="relists"' for c in ("pods", "verticalpodautoscalers")}
            before_relist = await scrape()
            lists_before = {c: _metric(before_relist, "vpa_watch_cache_events_total", labels)
                            for c, labels in relists_of.items()}
            probe.start()

            async def force_relist() -> None:
                # A write first, so that the compaction point is newer than every watch's position: a watch a
                # bookmark brought up to the newest resourceVersion would otherwise resume without a 410 and
                # not relist at all.
                await k.call("POST", "/api/v1/namespaces/bench-0/configmaps",
                             {"metadata": {"generateName": "relist-"}, "data": {}})
                await k.call("POST", "/sim/v1/faults/compact", {})
                await k.call("POST", "/sim/v1/faults/drop-watches", {})

            async def relisted() -> bool:
                now = await scrape()
                return all(_metric(now, "vpa_watch_cache_events_total", labels) > lists_before[c]
                           for c, labels in relists_of.items())

            cpu_relist_start = cpu_seconds(c.processes)
            await force_relist()
            relist_started = time.monotonic()
            forced = 1
            while True:  # a watch can still resume without a 410: forced again, at most three times more
                try:
                    await _until("the relist", relisted, run_proc, log, 60)
                    break
                except RuntimeError:
                    if run_proc.returncode is not None or forced > 3:
                        raise
                    forced += 1
                    await force_relist()
            await asyncio.sleep(3)
            relist_s = time.monotonic() - relist_started
            during_relist = await probe.finish()
            cpu_relist = cpu_row(cpu_relist_start, cpu_seconds(c.processes), relist_s)
            m.p99_relist, m.max_relist = during_relist["p99"], during_relist["max"]
            rows += [
                ("forced relist of every cache", f"{relist_s:.1f} s",
                 f"forced {forced} times" if forced > 1 else ""),
                *_webhook_rows("forced relist", during_relist, targets),
                ("CPU used during the relist", "by process",
                 f"{cpu_relist}; the webhook's client {during_relist['cpu']:.1f} s"),
            ]
            ok = ok and _webhook_ok(during_relist, targets)
        m.rss_mib = _proc_status_mib(run_proc.pid, "VmHWM")
        rows.append(("vpa run peak RSS", f"{m.rss_mib:.0f} MiB",
                     _verdict(m.rss_mib, targets.rss_mib, " MiB")))
        ok = ok and m.rss_mib <= targets.rss_mib
        m.failed_reviews = probe.errors
        if probe.errors:
            rows.append(("webhook reviews that failed", f"{probe.errors}", "a target miss"))
            ok = False
        m.ok = ok
        return m, rows
    finally:
        await plain.close()
        if probe is not None:
            await probe.close()
        await recommended.close()
        await _stop(run_proc)
        c.processes.pop(run_proc.pid, None)


async def run(vpas: int, pods: int, nodes: int, first_only: bool = False, run_args: tuple[str, ...] = (),
              sim_nice: int = SIM_NICE, commands: tuple[VpaCommand, ...] = (THIS_ONE,),
              runs: int = 1) -> tuple[list[Row], list[tuple[Measures, list[Row]]]]:
    """Load one cluster, then `runs` rounds of `commands` in turn (A, B, A, B, ...), the cluster reset and
    quiet again before each run but the first: the cluster's rows, and each run's measures and rows."""
    targets = targets_for(vpas)
    work = Path(tempfile.mkdtemp(prefix="vpa-bench-run-scale-"))
    tallies: list[Tally] = []
    cluster: Cluster | None = None
    results: list[tuple[Measures, list[Row]]] = []
    many = runs * len(commands) > 1
    try:
        cluster, loaded = await load_cluster(vpas, pods, nodes, sim_nice, work, tallies)
        baseline = await cluster_objects(cluster.kube)
        for n, command in enumerate((c for _ in range(runs) for c in commands), 1):
            reset_rows: list[Row] = []
            if n > 1:
                started = time.monotonic()
                done = await reset(cluster.kube, baseline)
                reset_s = time.monotonic() - started
                await _settle(cluster.processes, cluster.sim, cluster.sim_log, STEADY_CPU)
                reset_rows.append(("reset before this run", f"{reset_s:.1f} s",
                                   f"{done}; quiet again {time.monotonic() - started - reset_s:.0f} s later"))
            label = "".join(ch if ch.isalnum() else "-" for ch in command.label)
            m, rows = await measure(cluster, command, work / f"vpa-run-{n}-{label}.log", run_args, targets,
                                    first_only)
            results.append((m, reset_rows + rows))
            if many:
                _print_rows(f"run {n}: {command.label} ({'ok' if m.ok else 'MISS'})", reset_rows + rows)
    except BaseException:
        kept = await asyncio.to_thread(keep_logs, work, "run-scale")
        print(f"run_scale failed; the logs of vpa run and vpa sim are kept in {kept}", file=sys.stderr)
        raise
    finally:
        await tear_down(cluster, tallies, work)
    return [loaded], results


def keep_logs(work: Path, benchmark: str) -> Path:
    """The processes' logs copied out of `work` (removed after every run) into a folder of their own."""
    kept = Path(tempfile.mkdtemp(prefix=f"vpa-bench-{benchmark}-failed-"))
    for log in work.glob("*.log"):
        shutil.copy(log, kept / log.name)
    return kept


async def tear_down(cluster: Cluster | None, tallies: list[Tally], work: Path) -> None:
    """The watches closed, the client closed, `vpa sim` stopped by PID, and `work` removed."""
    for tally in tallies:
        await tally.close()
    if cluster is not None:
        await cluster.kube.close()
        await _stop(cluster.sim)
    shutil.rmtree(work, ignore_errors=True)


def _print_rows(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    sys.stdout.flush()


def _positive(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return n


def _command(flag: str, value: str) -> tuple[str, ...]:
    """A command line as words; its program must exist (else the one-line error names `flag`)."""
    argv = tuple(shlex.split(value))
    if not argv:
        raise ValueError(f"{flag}: empty command")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"{flag} {value!r}: {argv[0]} is not an executable file")
    return argv


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run_scale", description=__doc__.splitlines()[0])
    p.add_argument("--vpas", type=_positive, default=10_000, help="Deployments, one VPA each")
    p.add_argument("--pods", type=_positive, default=50_000, help="pods in all (a multiple of --vpas)")
    p.add_argument("--nodes", type=_positive, default=None,
                   help=f"nodes (default: one per {PODS_PER_NODE} pods)")
    p.add_argument("--first-only", action="store_true",
                   help="stop once every VPA is recommended (no steady loop, no relist)")
    p.add_argument("--sim-nice", type=int, default=SIM_NICE, metavar="N",
                   help="run vpa sim at this nice value (default %(default)s; 0: as vpa run)")
    p.add_argument("--run-arg", action="append", default=[], metavar="FLAG",
                   help="a flag for vpa run (repeatable), e.g. --run-arg=--kube-api-qps=200")
    p.add_argument("--runs", type=_positive, default=1, metavar="N",
                   help="measured runs of each command on the one loaded cluster (default %(default)s)")
    p.add_argument("--vpa-command", default=None, metavar="CMD",
                   help="the vpa run to measure, up to `run` (default: this checkout's)")
    p.add_argument("--compare", default=None, metavar="BEFORE_CMD",
                   help="another vpa run, e.g. '<before-venv>/bin/vpa run', measured before --vpa-command "
                        "in each round (before, after, before, after, ...)")
    args = p.parse_args(argv)
    if args.pods % args.vpas:
        p.error(f"--pods {args.pods} must be a multiple of --vpas {args.vpas} (each VPA's Deployment gets "
                "--pods / --vpas replicas)")
    try:
        this = _command("--vpa-command", args.vpa_command) if args.vpa_command else THIS_CHECKOUT
        commands = (VpaCommand(THIS_ONE.label, this),) if args.compare is None else (
            VpaCommand("before", _command("--compare", args.compare)), VpaCommand("after", this))
    except ValueError as err:
        p.error(str(err))
    nodes = args.nodes or -(-args.pods // PODS_PER_NODE)
    quiet_logs()
    with open("/proc/loadavg") as loadavg:
        load_before = loadavg.read().split()[:3]
    started = time.monotonic()
    cluster_rows, results = asyncio.run(run(args.vpas, args.pods, nodes, args.first_only, tuple(args.run_arg),
                                            args.sim_nice, commands, args.runs))
    with open("/proc/loadavg") as loadavg:
        load_after = loadavg.read().split()[:3]
    ok = all(m.ok for m, _ in results)
    title = (f"run_scale: vpa run against vpa sim, separate processes, HTTPS ({'PASS' if ok else 'MISS'}); "
             f"vpa run flags: {' '.join(args.run_arg) or 'defaults'}; vpa sim at nice {args.sim_nice}; "
             f"load average {' '.join(load_before)} before, {' '.join(load_after)} after")
    if len(results) == 1:
        _print_rows(title, cluster_rows + results[0][1])
        return 0 if ok else 1
    _print_rows(title + f"; {len(results)} runs in {(time.monotonic() - started) / 60:.0f} min", cluster_rows)
    for command in commands:
        print(f"  {command.label}: {shlex.join(command.argv)}")
    print("\nruns, in the order run")
    print("\n".join(runs_table([m for m, _ in results])))
    print("\nper command")
    print("\n".join(summary([m for m, _ in results])))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
