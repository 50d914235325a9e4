"""An API server that does not answer gets a diagnosis (issue 45, item 8): `vpa run` names the server once,
in one warning, instead of a dozen anonymous `TransportError` warnings every few seconds; and says which
server it started against. (`vpa report`'s side: tests/integration/cli/test_kubeconfig.py.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.integration.cli.helpers import REPO, closed_port


def test_run_names_an_unreachable_server_once(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }))
    process = subprocess.Popen(
        [sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={kubeconfig}", "--address=127.0.0.1:0",
         "--port=0", "--log-format=json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(15)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    started = [r for r in records if r.get("event") == "vpa started"]
    assert started
    assert started[0]["server"] == server
    warnings = [r for r in records if r.get("level") in ("warning", "error")]
    unreachable = [r for r in warnings if r.get("event") == "api_server_unreachable"]
    assert len(unreachable) == 1, warnings
    assert unreachable[0]["server"] == server
    assert len(warnings) <= 2, warnings
    assert not any("TransportError" in json.dumps(r) for r in warnings if r is not unreachable[0])
