"""Running the `vpa` command as a user does: a separate process, its exit status and its output."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

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
