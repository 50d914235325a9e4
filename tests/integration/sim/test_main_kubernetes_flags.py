"""`vpa sim` refuses bad release and kubelet flags with one line on stderr and exit 2, before starting
anything (the process is run as users run it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "VPA_CONTROL_PLANE_BIN"}
    environ["VPA_CLUSTER_DIR"] = str(tmp_path / "empty-cache")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "vpa.sim.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=environ,
    )


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (
            ["--control-plane=kubernetes", "--kubernetes-version=v1.37.2"],
            "vpa sim: Kubernetes v1.37.2 is not built (",
        ),
        (
            ["--control-plane=kubernetes", "--kubernetes-version=1.36"],
            "run `make control-plane KUBERNETES_VERSION=v1.36.3`",
        ),
        (
            ["--control-plane=kubernetes"],
            "run `make control-plane KUBERNETES_VERSION=v1.37.2`",
        ),
        (
            ["--control-plane=kubernetes", "--kubelet=hollow", "--kubernetes-version=v1.36.3"],
            "run `make control-plane KUBERNETES_VERSION=v1.36.3`",
        ),
        (
            ["--control-plane=kubernetes", "--kubernetes-version=1.35"],
            "vpa sim: --kubernetes-version=1.35: not a release this project builds "
            "(v1.37.2, v1.36.3, v1.38.0-beta.0)",
        ),
        (
            ["--control-plane=kubernetes", "--kubelet=hollow", "--kubernetes-version=v1.38.0-beta.0"],
            "vpa sim: Kubernetes v1.38.0-beta.0 is not built (etcd missing in ",
        ),
        (
            ["--control-plane=kubernetes", "--kubelet=hollow", "--kubernetes-version=1.38"],
            "run `make control-plane KUBERNETES_VERSION=v1.38.0-beta.0`",
        ),
        (
            ["--kubernetes-version=v1.38.0-beta.0"],
            "vpa sim: --kubernetes-version=v1.38.0-beta.0: the simulated API server emulates",
        ),
        (["--kubelet=hollow"], "vpa sim: --kubelet=hollow: needs --control-plane=kubernetes"),
        (["--fault-control"], "vpa sim: --fault-control: needs --control-plane=kubernetes"),
        (
            ["--kubernetes-version=1.20"],
            "vpa sim: --kubernetes-version=1.20: the simulated API server emulates",
        ),
        (["--kubernetes-version=v1.37.2"], "(releases run with --control-plane=kubernetes)"),
    ],
)
def test_one_line_and_exit_2(tmp_path: Path, args: list[str], want: str) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert want in lines[0]
    assert done.stdout == ""


def test_hollow_needs_the_hollow_kubelet_of_the_folder_given(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        (folder / name).write_text("#!/bin/sh\nexit 1\n")
        (folder / name).chmod(0o755)
    done = _run(
        tmp_path, "--control-plane=kubernetes", "--kubelet=hollow", env={"VPA_CONTROL_PLANE_BIN": str(folder)}
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"hollow-node not found in {folder}" in lines[0]
