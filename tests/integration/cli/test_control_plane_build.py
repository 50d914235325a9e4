"""`make control-plane` says what it is doing: a line per binary with its time, a line while one compiles, and
one line when the release is already built (issue 45, item 5). Run against a stand-in `go` on PATH, so the
script's own output is what is checked, in seconds and without a Go toolchain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "cluster" / "build.sh"

FAKE_GO = """#!/usr/bin/env bash
# A stand-in for `go`: `go env GOVERSION` and a `go build -o OUT PKG` that takes a while.
if [[ "$1" == env ]]; then echo go1.26.8; exit 0; fi
out=""
while [[ $# -gt 0 ]]; do
  if [[ "$1" == -o ]]; then out="$2"; shift; fi
  shift
done
sleep 2.5
printf '#!/bin/sh\\n' > "$out"
chmod +x "$out"
"""


def _build(tmp_path: Path) -> str:
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir(exist_ok=True)
    go = bin_dir / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VPA_CLUSTER_DIR": str(tmp_path / "cluster"),
        "VPA_BUILD_TICK_S": "1",
    }
    done = subprocess.run(
        ["bash", str(BUILD), "v1.37.2"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_build_names_each_binary_with_its_time_and_says_it_is_still_compiling(tmp_path: Path) -> None:
    out = _build(tmp_path)
    names = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "hollow-node", "etcd"]
    assert "Kubernetes v1.37.2: building 5 binaries" in out
    for i, name in enumerate(names, start=1):
        assert f"[{i}/5] {name} ..." in out
        assert f"[{i}/5] {name} done in " in out
    assert "still compiling kube-apiserver" in out
    assert "Kubernetes v1.37.2 built in " in out
    assert _build(tmp_path).strip().startswith("Kubernetes v1.37.2 already built in ")
