"""Running the `vpa` command as a user does: a separate process, its exit status and its output."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]


def vpa(args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 60.0,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`vpa ARGS` in a child process with a hermetic environment (no $KUBECONFIG unless given)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NAMESPACE")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "vpa.cli", *args], capture_output=True, text=True, timeout=timeout,
        env=environment, cwd=cwd or REPO, check=False,
    )


class SimProcess:
    """`vpa sim` in a child process on a free port, its kubeconfig in `folder`; stopped with SIGTERM."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.kubeconfig = folder / "sim.kubeconfig"
        self.log = folder / "sim.log"
        self._log_file = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vpa.cli", "sim", "--kubeconfig-out", str(self.kubeconfig), *args],
            stdout=self._log_file, stderr=subprocess.STDOUT, cwd=REPO,
        )
        deadline = time.monotonic() + 60
        while not (self.kubeconfig.exists() and "API server:" in self.log.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vpa sim did not start: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_get(kubeconfig: Path, path: str) -> tuple[int, dict[str, Any]]:
    """GET `path` from the API server of a simulator kubeconfig (its CA and token): (status, JSON body)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    token = config["users"][0]["user"]["token"]
    request = urllib.request.Request(cluster["server"] + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
