"""`vpa demo`: the newcomer's first ten minutes, on one machine, in about one.

Owns: starting a simulated cluster (`vpa sim`) and `vpa run` (all three components) as two separate
processes, the second following the first's virtual clock; deploying sample workloads whose usage differs
from their requests, each under a VPA in a different update mode; and showing, as a live table on the
terminal, recommendations converging and pods being resized in place (requests change, restart counts do
not), until every in-place workload has been resized or the virtual time budget runs out. Then it stops
both processes (by PID) and exits: 0 when the in-place workloads were resized, 1 otherwise.

Must not: bind anything but 127.0.0.1, leave a process running, or need anything beyond this package
(no kubectl, no Docker).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from vpa.kube.client import ApiError, KubeClient, api_path
from vpa.model.clock import RealClock
from vpa.model.quantity import Quantity

NAMESPACE = "demo"
VPA_GROUP, VPA_VERSION, VPA_PLURAL = "autoscaling.k8s.io", "v1", "verticalpodautoscalers"


@dataclass(frozen=True)
class Workload:
    name: str
    mode: str
    replicas: int
    request_cpu: str
    request_memory: str
    usage_cpu: str
    usage_memory: str
    note: str


WORKLOADS = (
    Workload(
        "web", "InPlaceOrRecreate", 2, "100m", "128Mi", "450m", "300Mi", "under-provisioned: grows in place"
    ),
    Workload("batch", "InPlace", 1, "1", "1Gi", "150m", "200Mi", "over-provisioned: shrinks, never evicted"),
    Workload("api", "Off", 2, "200m", "256Mi", "300m", "350Mi", "recommendations only"),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _deployment(w: Workload) -> dict[str, Any]:
    usage = {"app": {"cpu": {"type": "constant", "value": w.usage_cpu, "noise": 0.05, "seed": 1},
                     "memory": {"type": "constant", "value": w.usage_memory}}}  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": NAMESPACE},
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": {"app": w.name}},
            "template": {
                "metadata": {
                    "labels": {"app": w.name},
                    "annotations": {"sim.vpa.dev/usage": orjson.dumps(usage).decode()},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": f"example.com/{w.name}:1.0",
                            "resources": {
                                "requests": {"cpu": w.request_cpu, "memory": w.request_memory},
                                "limits": {"memory": str(Quantity.parse(w.request_memory).value * 4)},
                            },
                        }
                    ]
                },
            },
        },
    }


def _vpa(w: Workload) -> dict[str, Any]:
    return {
        "apiVersion": f"{VPA_GROUP}/{VPA_VERSION}",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": w.name, "namespace": NAMESPACE},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": w.name},
            "updatePolicy": {"updateMode": w.mode, "minReplicas": 1},
        },
    }


@dataclass
class Row:
    workload: Workload
    target_cpu: str = "-"
    target_memory: str = "-"
    pods: int = 0
    requests: str = "-"
    restarts: int = 0
    resized: int = 0


def _mem(text: str) -> str:
    """Memory for people: `380258472` → `363Mi`."""
    try:
        return f"{Quantity.parse(text).value / 2**20:.0f}Mi"
    except ValueError:
        return text


def _pod_requests(pod: dict[str, Any]) -> tuple[str, str]:
    """Requests the container runs with: status resources when the kubelet reported them, else spec."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if statuses and (statuses[0].get("resources") or {}).get("requests"):
        req = statuses[0]["resources"]["requests"]
    else:
        req = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return str(req.get("cpu", "-")), _mem(str(req.get("memory", "-")))


async def _snapshot(client: KubeClient) -> list[Row]:
    vpas = await client.get(api_path(VPA_GROUP, VPA_VERSION, VPA_PLURAL, namespace=NAMESPACE))
    pods = await client.get(api_path("", "v1", "pods", namespace=NAMESPACE))
    by_name = {v["metadata"]["name"]: v for v in vpas.get("items", [])}
    rows = []
    for w in WORKLOADS:
        row = Row(w)
        recs = ((by_name.get(w.name) or {}).get("status") or {}).get("recommendation") or {}
        for rec in recs.get("containerRecommendations") or []:
            row.target_cpu = str(rec["target"].get("cpu", "-"))
            row.target_memory = _mem(str(rec["target"].get("memory", "-")))
        mine = [p for p in pods.get("items", []) if (p["metadata"].get("labels") or {}).get("app") == w.name]
        live = [p for p in mine if not p["metadata"].get("deletionTimestamp")]
        row.pods = len(live)
        shapes = sorted({"/".join(_pod_requests(p)) for p in live})
        row.requests = ", ".join(shapes) or "-"
        for pod in live:
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                row.restarts += int(status.get("restartCount", 0))
            if (pod["metadata"].get("annotations") or {}).get("vpaInPlaceUpdated") == "true":
                row.resized += 1
        rows.append(row)
    return rows


def _render(rows: Sequence[Row], virtual_elapsed_s: float) -> str:
    header = ("WORKLOAD", "MODE", "TARGET CPU", "TARGET MEM", "PODS", "RUNNING WITH (cpu/mem)", "RESIZED",
              "RESTARTS")  # fmt: skip
    table = [header] + [
        (r.workload.name, r.workload.mode, r.target_cpu, r.target_memory, str(r.pods), r.requests,
         str(r.resized), str(r.restarts))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"vpa demo — virtual time +{virtual_elapsed_s / 3600:.1f} h"]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) for line in table]
    lines += [""] + [f"  {r.workload.name}: {r.workload.note}" for r in rows]
    return "\n".join(lines)


def _done(rows: Sequence[Row]) -> bool:
    """Every in-place workload resized (all its pods) and every workload has a recommendation."""
    for row in rows:
        if row.target_cpu == "-":
            return False
        if row.workload.mode.startswith("InPlace") and row.resized < row.workload.replicas:
            return False
    return True


def summary(rows: Sequence[Row]) -> list[str]:
    """What converged and what is still moving, one line per workload, for the end of the demo."""
    lines = []
    for row in rows:
        w = row.workload
        target = f"{row.target_cpu}/{row.target_memory}"
        if w.mode == "Off":
            lines.append(f"  {w.name} ({w.mode}): recommends {target}; its pods keep {row.requests} "
                         "(Off mode never changes pods)")
        elif row.requests == target:
            lines.append(f"  {w.name} ({w.mode}): converged: {row.resized}/{w.replicas} pods resized in "
                         f"place to the target {target}, {row.restarts} restarts")
        else:
            lines.append(f"  {w.name} ({w.mode}): {row.resized}/{w.replicas} pods resized in place "
                         f"({row.restarts} restarts), running {row.requests} while the target is now "
                         f"{target}: "
                         "still moving (the target follows the growing usage history; the updater resizes "
                         "again once the requests leave the recommended bounds)")
    return lines


def _non_empty(path: Path) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


async def _wait_for_file(path: Path, proc: asyncio.subprocess.Process, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _non_empty(path):
        if proc.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError("vpa sim did not start")
        await asyncio.sleep(0.1)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def run_demo(*, time_scale: float, max_virtual_s: float, out: TextIO, live: bool, workdir: Path) -> int:
    kubeconfig = workdir / "kubeconfig"
    webhook_port, health_port = _free_port(), _free_port()
    python = sys.executable
    sim_log = (workdir / "sim.log").open("wb")
    run_log = (workdir / "vpa-run.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    sim = await asyncio.create_subprocess_exec(
        python, "-m", "vpa.cli", "sim", "--kubeconfig-out", str(kubeconfig), "--nodes", "3",
        "--time-scale", str(time_scale),
        "--webhook-service", f"kube-system/vpa-webhook=127.0.0.1:{webhook_port}",
        stdout=sim_log, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    run: asyncio.subprocess.Process | None = None
    client: KubeClient | None = None
    try:
        await _wait_for_file(kubeconfig, sim, 30)
        run = await asyncio.create_subprocess_exec(
            python, "-m", "vpa.cli", "run", f"--kubeconfig={kubeconfig}", "--clock=sim",
            f"--address=127.0.0.1:{health_port}", f"--port={webhook_port}", "--feature-gates=InPlace=true",
            "--recommender-interval=1m", "--updater-interval=1m", "--log-format=json",
            # At 600x the default 60 s status-lease timeout is 0.1 s of real time: one busy moment of the
            # process and the updater would skip its loop as if the admission controller were down.
            "--status-lease-update-interval=5m", "--admission-controller-status-lease-timeout=30m",
            stdout=run_log, stderr=asyncio.subprocess.STDOUT, env={**env, "NAMESPACE": "kube-system"},
        )  # fmt: skip
        client = await KubeClient.from_config(RealClock(), kubeconfig=str(kubeconfig))
        clock_start = float((await client.get("/sim/v1/clock"))["now"])
        await client.create(api_path("", "v1", "namespaces"), {"metadata": {"name": NAMESPACE}})
        for w in WORKLOADS:
            await client.create(api_path(VPA_GROUP, VPA_VERSION, VPA_PLURAL, namespace=NAMESPACE), _vpa(w))
            await client.create(api_path("apps", "v1", "deployments", namespace=NAMESPACE), _deployment(w))
        rows: list[Row] = []
        elapsed = 0.0
        while elapsed < max_virtual_s:
            await asyncio.sleep(1.0)
            if run.returncode is not None or sim.returncode is not None:
                print("a process exited early; see the logs in", workdir, file=out)
                return 1
            elapsed = float((await client.get("/sim/v1/clock"))["now"]) - clock_start
            try:
                rows = await _snapshot(client)
            except ApiError:
                continue
            screen = _render(rows, elapsed)
            out.write(("\x1b[H\x1b[2J" + screen + "\n") if live else (screen + "\n\n"))
            out.flush()
            if _done(rows):
                break
        ok = _done(rows)
        hours = max_virtual_s / 3600
        done = "In-place workloads resized without restarts; done:"
        missed = f"Not every in-place workload was resized within {hours:.0f} virtual hours:"
        print("\n" + (done if ok else missed), file=out)
        print("\n".join(summary(rows)), file=out)
        return 0 if ok else 1
    finally:
        if client is not None:
            await client.close()
        if run is not None:
            await _stop(run)
        await _stop(sim)
        sim_log.close()
        run_log.close()


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vpa demo", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="virtual seconds per real second (default: 120 on a terminal, so you can watch; 600 otherwise)",
    )
    parser.add_argument(
        "--max-virtual-hours", type=float, default=12.0, help="give up after this much virtual time"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (printed path)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    stream = out if out is not None else sys.stdout
    live = stream.isatty()
    time_scale = args.time_scale if args.time_scale is not None else (120.0 if live else 600.0)
    workdir = Path(tempfile.mkdtemp(prefix="vpa-demo-"))
    try:
        return asyncio.run(
            run_demo(
                time_scale=time_scale,
                max_virtual_s=args.max_virtual_hours * 3600,
                out=stream,
                live=live,
                workdir=workdir,
            )
        )
    finally:
        if args.keep_logs:
            print(f"logs: {workdir}", file=stream)
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(workdir)
