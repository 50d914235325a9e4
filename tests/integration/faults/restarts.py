"""kill -9 of `vpa run` mid memory window, then a restart from checkpoints: recommendations must hold.

`kill_restart_scenario` runs `vpa run --clock=sim --components=recommender` as a child process against an
in-process `SimCluster` (loopback HTTPS), with workloads whose memory peaked early in the day. It advances
virtual time one recommender interval at a time until `hours` have passed (every step waits for the loop's
checkpoints), records every VPA's targets, kills the process with SIGKILL, starts a new one, lets one more
interval pass, and returns the targets before and after. A restart must change no target by more than a
normal loop does (1%); before the in-progress memory peaks were kept, memory targets fell by half.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.components.recommender_helpers import VPAS, deployment, vpa
from vpa.logic.recommender.checkpointing import format_time
from vpa.model.quantity import Quantity
from vpa.sim import SimCluster

CHECKPOINTS = "verticalpodautoscalercheckpoints.autoscaling.k8s.io"
# Memory that peaked in the first hours of the day (1000Mi at 02:00) and then fell; CPU steady or cyclic.
WORKLOADS: dict[str, dict[str, Any]] = {
    "early-peak": {
        "app": {
            "cpu": {"type": "constant", "value": "500m"},
            "memory": {"type": "daily", "base": "600Mi", "amplitude": "400Mi", "peak_hour": 2},
        }
    },
    "steady": {
        "app": {
            "cpu": {"type": "constant", "value": "300m"},
            "memory": {"type": "constant", "value": "300Mi"},
        }
    },
    "spiky": {
        "app": {
            "cpu": {
                "type": "spikes",
                "base": "200m",
                "height": "800m",
                "period_s": 7200,
                "duration_s": 3600,
                "offset_s": 0,
            },
            "memory": {
                "type": "spikes",
                "base": "300Mi",
                "height": "500Mi",
                "period_s": 14400,
                "duration_s": 3600,
                "offset_s": 0,
            },
        }
    },
}

Targets = dict[tuple[str, str], tuple[int, int]]  # (vpa, container) → (millicores, bytes)


@dataclass
class RestartResult:
    before: Targets = field(default_factory=dict)
    after: Targets = field(default_factory=dict)

    def worst_change(self) -> dict[str, float]:
        """The largest relative change of any CPU and any memory target."""
        worst = {"cpu": 0.0, "memory": 0.0}
        for key, (cpu, memory) in self.before.items():
            cpu2, memory2 = self.after.get(key, (0, 0))
            worst["cpu"] = max(worst["cpu"], abs(cpu2 - cpu) / cpu)
            worst["memory"] = max(worst["memory"], abs(memory2 - memory) / memory)
        return worst


def _targets(cluster: SimCluster) -> Targets:
    out: Targets = {}
    for obj in cluster.store.list(VPAS):
        recommendation = (obj.get("status") or {}).get("recommendation") or {}
        for container in recommendation.get("containerRecommendations") or ():
            target = container["target"]
            out[(obj["metadata"]["name"], container["containerName"])] = (
                Quantity.parse(target["cpu"]).millis,
                Quantity.parse(target["memory"]).value,
            )
    return out


async def _wait_for_checkpoints(
    cluster: SimCluster, names: list[str], proc: asyncio.subprocess.Process, timeout_s: float = 30.0
) -> None:
    """Until every VPA's checkpoint was written at the cluster's current time."""
    stamp = format_time(cluster.clock.now())
    deadline = time.monotonic() + timeout_s
    while True:
        written = {
            (cluster.store.get(CHECKPOINTS, "default", f"{name}-app") or {})
            .get("status", {})
            .get("lastUpdateTime")
            for name in names
        }
        if written == {stamp}:
            return
        if proc.returncode is not None:
            raise AssertionError(f"vpa run exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"checkpoints not written at {stamp}: {written}")
        await asyncio.sleep(0.05)


def _restores(log_path: Path) -> int:
    """How many times a `vpa run` writing to `log_path` has restored its checkpoints."""
    return log_path.read_bytes().count(b"recommender_restored_checkpoints") if log_path.exists() else 0


async def _start(cluster: SimCluster, interval: str, log_path: Path) -> asyncio.subprocess.Process:
    """Start `vpa run`; return once it has restored its checkpoints (its first loop is an interval later)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    restored = _restores(log_path)
    with open(log_path, "ab") as log:  # noqa: ASYNC230 - opened once, handed to the child
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={cluster.kubeconfig_path}",
            "--address=127.0.0.1:0", "--clock=sim", "--components=recommender",
            f"--recommender-interval={interval}", "--log-format=json",
            stdout=log, stderr=log, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while _restores(log_path) <= restored:
        if proc.returncode is not None or time.monotonic() > deadline:
            raise AssertionError(f"vpa run did not start (exit {proc.returncode}); see {log_path.name}")
        await asyncio.sleep(0.05)
    return proc


async def kill_restart_scenario(
    tmp: Path, *, hours: float, step_s: int = 1800, workloads: dict[str, dict[str, Any]] | None = None
) -> RestartResult:
    workloads = workloads or WORKLOADS
    interval = f"{step_s}s"
    result = RestartResult()
    log_path = tmp / "vpa-run.log"
    async with SimCluster(nodes=1, node_cpu="16", node_memory="64Gi") as cluster:
        for name, usage in workloads.items():
            await cluster.store.create("deployments.apps", deployment(name, usage))
            await cluster.store.create(VPAS, vpa(name))
        await cluster.settle()
        names = list(workloads)
        proc = await _start(cluster, interval, log_path)
        try:
            for _ in range(int(hours * 3600 // step_s)):
                await cluster.advance(step_s)
                await _wait_for_checkpoints(cluster, names, proc)
            result.before = _targets(cluster)
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            proc = await _start(cluster, interval, log_path)
            await cluster.advance(step_s)
            await _wait_for_checkpoints(cluster, names, proc)
            result.after = _targets(cluster)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
    return result
