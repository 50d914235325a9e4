"""Benchmark: upstream VPA (three processes) beside `vpa run` (one process), both at once on one `vpa sim`.

    python -m benchmarks.side_by_side --vpas 2000 [--pods N] [--nodes N] [--equal-qps Q] [--equal-burst B]
                                      [--no-equal]

The cluster: `vpa sim --time-scale 1 --start-time now` loaded as `run_scale.load_cluster` loads it (`--vpas`
Deployments of `--pods / --vpas` replicas, twice `--vpas` pods by default), with **two VPAs per Deployment**,
`<name>-up` naming the recommender `upstream` and `<name>-py` naming `ours` (`spec.recommenders`). Each
side's recommender serves its own VPAs over the same pods and the same metrics at the same time, so both
meet the same cluster, the same machine load and each other's API traffic (run one after the other, the
second would meet a cluster already warmed by the first, and a shared machine's load changes between
runs). Every VPA is `updateMode: Off`, so neither updater evicts or resizes: the updaters and webhooks run
and do their periodic work, nothing changes pods.

The sides: upstream's `recommender --recommender-name=upstream`, `updater` and `admission-controller` (its
webhook certificates made as the differential suite makes them, `NAMESPACE=kube-system`, its status Lease
and self-registration as by default), each at its default flags otherwise (metrics on :8942, :8943, :8944,
webhook on :8000, all interfaces); ours: one `vpa run --recommender-name=ours` with every component, its
metrics and webhook moved to free loopback ports (upstream holds the default ones). Upstream's servers bind
every interface, so the benchmark re-runs itself in a private network namespace with only loopback
(`unshare -n`, or `-rn`), as the differential harness does; everything, the simulator included, runs there.

Measured per side, in two phases on the one loaded cluster (default flags; then, after `run_scale.reset`
cleared every status, checkpoint and the Leases, webhook registrations and Secrets a run left, with
`--kube-api-qps=Q --kube-api-burst=B` on every process of both sides, and `--kube-api-server-pacing=false`
on ours, whose pacing otherwise lifts its client-side limit when the API server exempts it from API
Priority and Fairness, as `vpa sim` does):

- start to every VPA of the side recommended (the processes of both sides are started together; a watch,
  `control_plane.Tally`, follows each side's VPAs);
- CPU-seconds per steady loop: the sum of utime + stime (`/proc/<pid>/stat`) of the side's processes over
  one loop interval (1 min, both sides' default) from the end of its recommender's second loop
  (`vpa_recommender_execution_latency_seconds_count{step="total"}`, which upstream exposes too), with the
  number of loops that ended in that window;
- API requests in that window: counted by `vpa sim` by user agent (counting-only faults, no error and no
  latency, matching `recommender/`, `updater/`, `admission-controller/` — client-go's default user agents
  of upstream's binaries — and `vpa/`, ours), so that both sides are counted the same way; ours's own
  `rest_client_requests_total` is shown beside its count as a check;
- peak RSS: VmHWM of every process, and their sum per side;
- webhook latency, p50 and p99, at concurrency 1 and 32: the same CREATE AdmissionReview of a real pod of
  the cluster sent to each webhook over HTTPS keep-alive connections by a client in a process of its own,
  after the CPU windows (so it does not count in them), each side in turn, a warm-up first per connection.

Ratios are upstream / ours. The machine's load average (`/proc/loadavg`) is printed at the start and the end
of each phase. Every process started is stopped by PID at the end of its phase (the simulator at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import aiohttp

from benchmarks import quiet_logs
from benchmarks.control_plane import (
    LOOPS,
    TOTAL,
    VPAS,
    Tally,
    _free_port,
    _metric,
    _settle,
    _spawn,
    _stop,
    cpu_seconds,
    is_recommended,
)
from benchmarks.run_scale import (
    PODS_PER_NODE,
    SIM_NICE,
    STEADY_CPU,
    Cluster,
    _percentiles,
    _probe_context,
    _proc_status_mib,
    cluster_objects,
    keep_logs,
    load_cluster,
    reset,
    tear_down,
)
from tests.differential.harness import missing_binaries, upstream_bin, webhook_certs

IN_NETNS: Final = "VPA_SIDE_BY_SIDE_NETNS"
UPSTREAM: Final = "upstream"
OURS: Final = "ours"
SUFFIX: Final = {UPSTREAM: "-up", OURS: "-py"}
UPSTREAM_METRICS: Final = {"recommender": 8942, "updater": 8943, "admission-controller": 8944}
"""Upstream's default `--address` ports (":<port>", every interface)."""
UPSTREAM_WEBHOOK_PORT: Final = 8000
USER_AGENTS: Final = {
    "recommender/": UPSTREAM,
    "updater/": UPSTREAM,
    "admission-controller/": UPSTREAM,
    "vpa/": OURS,
}
"""Substrings of the user agents of each side's processes (client-go's default is `<binary>/<version> ...`;
ours is `vpa/<version>`): `vpa sim` counts the requests matching each."""
WARMUP_PER_CONNECTION: Final = 20
REVIEWS_C1: Final = 1000
REVIEWS_PER_CONNECTION_C32: Final = 100
INTERVAL_S: Final = 60.0
"""Both recommenders' default `--recommender-interval` (1 min)."""


def _vpa(i: int, side: str) -> dict[str, Any]:
    name = f"app-{i:04d}"
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name + SUFFIX[side]},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": "Off"},
            "recommenders": [{"name": side}],
        },
    }


def _both_vpas(i: int) -> list[dict[str, Any]]:
    return [_vpa(i, UPSTREAM), _vpa(i, OURS)]


def _recommended_by(side: str) -> Any:
    suffix = SUFFIX[side]
    return lambda vpa: vpa["metadata"]["name"].endswith(suffix) and is_recommended(vpa)


def _load() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


# --- the webhook client, in a process of its own ---------------------------------------------------------


def _burst_process(port: int, body: bytes, concurrency: int, per_connection: int, conn: Any) -> None:
    """`concurrency` keep-alive HTTPS connections, each sending `WARMUP_PER_CONNECTION` reviews unrecorded,
    then `per_connection` recorded ones back to back; sends back the latencies and the failures."""

    async def main() -> tuple[list[float], int]:
        samples: list[float] = []
        failures = 0
        connector = aiohttp.TCPConnector(ssl=_probe_context(), limit=concurrency)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            url = f"https://127.0.0.1:{port}/"

            async def one(record: bool) -> None:
                nonlocal failures
                started = time.monotonic()
                try:
                    async with session.post(url, data=body) as resp:
                        raw = await resp.read()
                        ok = resp.status == 200 and b'"allowed":true' in raw.replace(b" ", b"")
                except aiohttp.ClientError:
                    ok = False
                if not record:
                    return
                if ok:
                    samples.append(time.monotonic() - started)
                else:
                    failures += 1

            async def connection() -> None:
                for _ in range(WARMUP_PER_CONNECTION):
                    await one(False)

            await asyncio.gather(*(connection() for _ in range(concurrency)))

            async def recorded() -> None:
                for _ in range(per_connection):
                    await one(True)

            await asyncio.gather(*(recorded() for _ in range(concurrency)))
        return samples, failures

    conn.send(asyncio.run(main()))


async def webhook_latency(port: int, body: bytes, concurrency: int, per_connection: int) -> dict[str, float]:
    """p50, p99, max (ms), n and failures of `concurrency` × `per_connection` reviews to 127.0.0.1:`port`."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(
        target=_burst_process, args=(port, body, concurrency, per_connection, child), daemon=True
    )
    proc.start()
    try:
        samples, failures = await asyncio.wait_for(asyncio.to_thread(parent.recv), 600)
    finally:
        await asyncio.to_thread(proc.join, 10)
        if proc.is_alive():
            proc.terminate()
    return {**_percentiles(list(samples)), "failures": float(failures)}


# --- one phase: both sides started together on the loaded cluster ----------------------------------------


@dataclasses.dataclass
class Side:
    name: str
    procs: dict[str, asyncio.subprocess.Process] = dataclasses.field(default_factory=dict)
    metrics_url: str = ""
    """The recommender's /metrics."""
    webhook_port: int = 0
    recommended_s: float | None = None
    loop_cpu_s: float | None = None
    loop_cpu_by_process: dict[str, float] = dataclasses.field(default_factory=dict)
    loop_wall_s: float | None = None
    loops_in_window: float | None = None
    loop_requests: int | None = None
    loop_requests_own: float | None = None
    """Ours only: its `rest_client_requests_total` over the same window."""
    rss_mib: dict[str, float] = dataclasses.field(default_factory=dict)
    webhook: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    def pids(self) -> dict[int, str]:
        return {p.pid: name for name, p in self.procs.items()}

    def exited(self) -> str:
        return ", ".join(name for name, p in self.procs.items() if p.returncode is not None)


async def _counting_faults(c: Cluster) -> None:
    """One counting-only fault per user agent of `USER_AGENTS` (the simulator counts `hits`)."""
    for agent in USER_AGENTS:
        status, _ = await c.kube.call("POST", "/sim/v1/faults/inject", {"code": None, "userAgent": agent})
        if status != 201:
            raise RuntimeError(f"vpa sim refused a counting fault for {agent!r}: HTTP {status}")


async def _requests_by_side(c: Cluster) -> dict[str, int]:
    status, body = await c.kube.call("GET", "/sim/v1/faults")
    if status != 200 or body is None:
        raise RuntimeError(f"GET /sim/v1/faults: HTTP {status}")
    counts = {UPSTREAM: 0, OURS: 0}
    for fault in body["faults"]:
        side = USER_AGENTS.get(fault.get("userAgent") or "")
        if side is not None:
            counts[side] += int(fault["hits"])
    return counts


async def _start_sides(
    c: Cluster, work: Path, label: str, extra: tuple[str, ...], ours_extra: tuple[str, ...], certs: Any
) -> dict[str, Side]:
    up, ours = Side(UPSTREAM), Side(OURS)
    kc = f"--kubeconfig={c.kubeconfig}"
    # NAMESPACE as upstream's Deployments set it (the admission controller's Service, Lease and Secret).
    os.environ["NAMESPACE"] = "kube-system"
    try:
        binaries = upstream_bin()
        up.procs["recommender"] = await _spawn(
            [str(binaries / "recommender"), kc, f"--recommender-name={UPSTREAM}", *extra],
            work / f"{label}-upstream-recommender.log",
        )
        up.procs["updater"] = await _spawn(
            [str(binaries / "updater"), kc, *extra], work / f"{label}-upstream-updater.log"
        )
        up.procs["admission-controller"] = await _spawn(
            [
                str(binaries / "admission-controller"),
                kc,
                f"--client-ca-file={certs.ca}",
                f"--tls-cert-file={certs.cert}",
                f"--tls-private-key={certs.key}",
                *extra,
            ],
            work / f"{label}-upstream-admission-controller.log",
        )
    finally:
        del os.environ["NAMESPACE"]
    up.metrics_url = f"http://127.0.0.1:{UPSTREAM_METRICS['recommender']}/metrics"
    up.webhook_port = UPSTREAM_WEBHOOK_PORT
    address, ours.webhook_port = _free_port(), _free_port()
    ours.procs["vpa run"] = await _spawn(
        [
            sys.executable,
            "-m",
            "vpa.cli",
            "run",
            kc,
            f"--recommender-name={OURS}",
            f"--address=127.0.0.1:{address}",
            f"--port={ours.webhook_port}",
            "--log-format=json",
            *extra,
            *ours_extra,
        ],
        work / f"{label}-ours-vpa-run.log",
    )
    ours.metrics_url = f"http://127.0.0.1:{address}/metrics"
    return {UPSTREAM: up, OURS: ours}


async def _scrape(session: aiohttp.ClientSession, url: str) -> str:
    try:
        async with session.get(url) as resp:
            return await resp.text() if resp.status == 200 else ""
    except aiohttp.ClientError:
        return ""


async def _loops(session: aiohttp.ClientSession, side: Side) -> float:
    return _metric(await _scrape(session, side.metrics_url), LOOPS, TOTAL)


async def _steady_loop(c: Cluster, session: aiohttp.ClientSession, side: Side, limit_s: float) -> None:
    """CPU and requests over one loop interval (`INTERVAL_S`) from the end of the side's second recommender
    loop. A fixed interval, not end of loop to end of loop: the loop after the first can be stretched by the
    other side's first loop on a shared machine, and a loop that overruns its interval would be counted
    whole."""
    deadline = time.monotonic() + limit_s
    while await _loops(session, side) < 2:
        if side.exited():
            raise RuntimeError(f"{side.name}: {side.exited()} exited")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.name}: no second loop within {limit_s:.0f} s")
        await asyncio.sleep(0.5)
    before = await _scrape(session, side.metrics_url)
    cpu_before, wall_before = cpu_seconds(side.pids()), time.monotonic()
    requests_before = (await _requests_by_side(c))[side.name]
    await asyncio.sleep(INTERVAL_S)
    cpu_after, side.loop_wall_s = cpu_seconds(side.pids()), time.monotonic() - wall_before
    side.loop_requests = (await _requests_by_side(c))[side.name] - requests_before
    after = await _scrape(session, side.metrics_url)
    if side.exited():
        raise RuntimeError(f"{side.name}: {side.exited()} exited")
    side.loops_in_window = _metric(after, LOOPS, TOTAL) - _metric(before, LOOPS, TOTAL)
    if side.name == OURS:
        side.loop_requests_own = _metric(after, "rest_client_requests_total") - _metric(
            before, "rest_client_requests_total"
        )
    side.loop_cpu_by_process = {
        name: cpu_after.get(name, 0.0) - cpu_before.get(name, 0.0) for name in cpu_after
    }
    side.loop_cpu_s = sum(side.loop_cpu_by_process.values())


async def phase(
    c: Cluster,
    work: Path,
    label: str,
    extra: tuple[str, ...],
    ours_extra: tuple[str, ...],
    certs: Any,
    tallies: list[Tally],
) -> tuple[dict[str, Side], str, str]:
    """Both sides started together with `extra` flags on every process (and `ours_extra` on ours); their
    measures, and the load average at the start and at the end."""
    load_start = _load()
    watches = {name: Tally(c.kubeconfig, VPAS, _recommended_by(name)) for name in (UPSTREAM, OURS)}
    for tally in watches.values():
        tallies.append(tally)
        await tally.start()
        if tally.count:
            raise RuntimeError(f"{label}: {tally.count} VPAs already carry a recommendation before the start")
        tally.expect(c.vpas)
    sides = await _start_sides(c, work, label, extra, ours_extra, certs)
    started = time.monotonic()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            deadline = started + 1800
            while any(t.reached is None for t in watches.values()):
                dead = [f"{s.name}: {s.exited()}" for s in sides.values() if s.exited()]
                if dead:
                    raise RuntimeError(
                        f"{label}: exited before every VPA was recommended: {dead}; logs in {work}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{label}: not every VPA recommended within 30 min")
                await asyncio.sleep(0.5)
            for name, tally in watches.items():
                assert tally.reached is not None
                sides[name].recommended_s = tally.reached - started
                await tally.close()
            await asyncio.gather(*(_steady_loop(c, session, s, 900) for s in sides.values()))
            for side in sides.values():
                for concurrency, per_connection in ((1, REVIEWS_C1), (32, REVIEWS_PER_CONNECTION_C32)):
                    side.webhook[f"c{concurrency}"] = await webhook_latency(
                        side.webhook_port, c.review, concurrency, per_connection
                    )
            for side in sides.values():
                side.rss_mib = {name: _proc_status_mib(p.pid, "VmHWM") for name, p in side.procs.items()}
    finally:
        for tally in watches.values():
            await tally.close()
        for side in sides.values():
            for p in reversed(list(side.procs.values())):
                await _stop(p)
    return sides, load_start, _load()


# --- the report -------------------------------------------------------------------------------------------


def _ratio(up: float | None, ours: float | None) -> str:
    if up is None or ours is None or ours == 0:
        return "-"
    return f"{up / ours:.2f}×"


def phase_rows(sides: dict[str, Side]) -> list[tuple[str, str, str, str]]:
    """(measure, upstream, ours, upstream / ours) per measure."""
    up, ours = sides[UPSTREAM], sides[OURS]

    def fmt(value: float | None, spec: str, unit: str) -> str:
        return "-" if value is None else f"{value:{spec}}{unit}"

    rows = [
        (
            "start to every VPA recommended",
            fmt(up.recommended_s, ".1f", " s"),
            fmt(ours.recommended_s, ".1f", " s"),
            _ratio(up.recommended_s, ours.recommended_s),
        ),
        (
            "CPU-seconds per steady loop",
            fmt(up.loop_cpu_s, ".2f", " s"),
            fmt(ours.loop_cpu_s, ".2f", " s"),
            _ratio(up.loop_cpu_s, ours.loop_cpu_s),
        ),
        (
            "… by process",
            ", ".join(f"{n} {v:.2f}" for n, v in up.loop_cpu_by_process.items()),
            ", ".join(f"{n} {v:.2f}" for n, v in ours.loop_cpu_by_process.items()),
            "",
        ),
        (
            "… the window (wall), recommender loops that ended in it",
            f"{fmt(up.loop_wall_s, '.1f', ' s')}, {fmt(up.loops_in_window, '.0f', '')}",
            f"{fmt(ours.loop_wall_s, '.1f', ' s')}, {fmt(ours.loops_in_window, '.0f', '')}",
            "",
        ),
        (
            "peak RSS (VmHWM, sum)",
            f"{sum(up.rss_mib.values()):.0f} MiB",
            f"{sum(ours.rss_mib.values()):.0f} MiB",
            _ratio(sum(up.rss_mib.values()), sum(ours.rss_mib.values())),
        ),
        (
            "… by process",
            ", ".join(f"{n} {v:.0f}" for n, v in up.rss_mib.items()),
            ", ".join(f"{n} {v:.0f}" for n, v in ours.rss_mib.items()),
            "",
        ),
        (
            "API requests per steady loop (counted by vpa sim)",
            fmt(up.loop_requests, ".0f", ""),
            fmt(ours.loop_requests, ".0f", "")
            + f" (its own counter: {fmt(ours.loop_requests_own, '.0f', '')})",
            _ratio(up.loop_requests, ours.loop_requests),
        ),
    ]
    for window in ("c1", "c32"):
        for stat in ("p50", "p99"):
            a, b = up.webhook[window][stat], ours.webhook[window][stat]
            rows.append(
                (f"webhook {stat} at concurrency {window[1:]}", f"{a:.2f} ms", f"{b:.2f} ms", _ratio(a, b))
            )
        rows.append(
            (
                f"… reviews, failed (concurrency {window[1:]})",
                f"{up.webhook[window]['n']:.0f}, {up.webhook[window]['failures']:.0f}",
                f"{ours.webhook[window]['n']:.0f}, {ours.webhook[window]['failures']:.0f}",
                "",
            )
        )
    return rows


def _print_phase(title: str, rows: list[tuple[str, str, str, str]]) -> None:
    print(f"\n{title}")
    widths = [
        max(len(r[i]) for r in [("measure", "upstream 1.8.1", "vpa run", "upstream / ours"), *rows])
        for i in range(4)
    ]
    for row in [("measure", "upstream 1.8.1", "vpa run", "upstream / ours"), *rows]:
        print("  " + "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


async def run(vpas: int, pods: int, nodes: int, equal: tuple[float, float] | None, sim_nice: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="vpa-bench-side-by-side-"))
    tallies: list[Tally] = []
    cluster: Cluster | None = None
    certs = webhook_certs(work)
    sim_flags = (
        "--start-time",
        "now",
        "--webhook-service",
        f"kube-system/vpa-webhook=127.0.0.1:{UPSTREAM_WEBHOOK_PORT}",
    )
    phases: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [("default flags", (), ())]
    if equal is not None:
        qps, burst = equal
        phases.append(
            (
                f"equal API QPS: --kube-api-qps={qps:g} --kube-api-burst={burst:g} on every process",
                (f"--kube-api-qps={qps:g}", f"--kube-api-burst={burst:g}"),
                ("--kube-api-server-pacing=false",),
            )
        )
    try:
        started = time.monotonic()
        cluster, loaded = await load_cluster(
            vpas, pods, nodes, sim_nice, work, tallies, sim_flags, _both_vpas
        )
        # load_cluster's row counts Deployments as VPAs: here each Deployment has one VPA per side.
        print(
            f"cluster: {loaded[1]}; {vpas:,} Deployments, {2 * vpas:,} VPAs ({vpas:,} per side), "
            f"{nodes:,} nodes; loaded in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        await _counting_faults(cluster)
        baseline = await cluster_objects(cluster.kube)
        for n, (title, extra, ours_extra) in enumerate(phases):
            if n:
                done = await reset(cluster.kube, baseline)
                await _settle(cluster.processes, cluster.sim, cluster.sim_log, STEADY_CPU)
                print(f"reset: {done}", flush=True)
            label = "default" if not extra else "equal-qps"
            phase_started = time.monotonic()
            sides, load_start, load_end = await phase(cluster, work, label, extra, ours_extra, certs, tallies)
            _print_phase(
                f"{title}: {vpas:,} VPAs per side; load average {load_start} at the start, {load_end} "
                f"at the end; {time.monotonic() - phase_started:.0f} s",
                phase_rows(sides),
            )
    except BaseException:
        kept = await asyncio.to_thread(keep_logs, work, "side-by-side")
        print(f"side_by_side failed; the logs are kept in {kept}", file=sys.stderr)
        raise
    finally:
        await tear_down(cluster, tallies, work)
    return 0


def _isolated() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def _in_netns(argv: list[str]) -> int:
    """Re-run this benchmark in a private network namespace with only loopback up; its exit status."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        print(
            "side_by_side: needs unshare and ip (util-linux, iproute2) for a private network namespace",
            file=sys.stderr,
        )
        return 2
    for flags in (["-n"], ["-rn"]):
        if subprocess.run([unshare, *flags, "true"], capture_output=True, check=False).returncode == 0:
            break
    else:
        print(
            "side_by_side: cannot make a network namespace here (unshare -n and -rn both refused)",
            file=sys.stderr,
        )
        return 2
    inner = f'{ip} link set lo up && exec "$@"'
    env = dict(os.environ, **{IN_NETNS: "1"})
    command = [sys.executable, "-m", "benchmarks.side_by_side", *argv]
    return subprocess.run(
        [unshare, *flags, "sh", "-c", inner, "sh", *command], env=env, check=False
    ).returncode


def _positive(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return n


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m benchmarks.side_by_side", description=__doc__.splitlines()[0])
    p.add_argument("--vpas", type=_positive, default=2_000, help="Deployments; each has one VPA per side")
    p.add_argument("--pods", type=_positive, default=None, help="pods in all (default 2 × --vpas)")
    p.add_argument(
        "--nodes", type=_positive, default=None, help=f"nodes (default one per {PODS_PER_NODE} pods)"
    )
    p.add_argument(
        "--equal-qps",
        type=float,
        default=1000.0,
        metavar="Q",
        help="the second phase's --kube-api-qps on every process (default %(default)g)",
    )
    p.add_argument(
        "--equal-burst",
        type=float,
        default=None,
        metavar="B",
        help="the second phase's --kube-api-burst (default 2 × --equal-qps)",
    )
    p.add_argument("--no-equal", action="store_true", help="default flags only")
    p.add_argument(
        "--sim-nice",
        type=int,
        default=SIM_NICE,
        metavar="N",
        help="run vpa sim at this nice value (default %(default)s)",
    )
    args = p.parse_args(argv)
    pods = args.pods or 2 * args.vpas
    if pods % args.vpas:
        p.error(f"--pods {pods} must be a multiple of --vpas {args.vpas}")
    if args.equal_qps <= 0:
        p.error(f"--equal-qps must be positive, got {args.equal_qps:g}")
    if missing_binaries():
        p.error(missing_binaries())
    if not _isolated():
        if os.environ.get(IN_NETNS):
            p.error("unshare gave a network namespace with more than loopback")
        return _in_netns(argv)
    quiet_logs()
    equal = None if args.no_equal else (args.equal_qps, args.equal_burst or 2 * args.equal_qps)
    nodes = args.nodes or -(-pods // PODS_PER_NODE)
    return asyncio.run(run(args.vpas, pods, nodes, equal, args.sim_nice))


if __name__ == "__main__":
    raise SystemExit(main())
