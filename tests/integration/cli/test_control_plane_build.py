"""`make control-plane` says what it is doing: a line per binary with its time, a line while one compiles, and
one line when the release is already built (issue 45, item 5); and it picks the Go toolchain per release from
the go line of its go.mod (issue 42): the machine's own Go (GOTOOLCHAIN=local, whatever the shell exported)
where that is new enough, the approved go1.27.3 only where the go line needs it, saying so in one line. Run
against a stand-in `go` on PATH, so the script's own output and choices are what is checked, in seconds and
without a Go toolchain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "cluster" / "build.sh"
TOOLCHAIN = ROOT / "hack" / "cluster" / "go-toolchain.sh"

# $FAKE_GO_LOCAL is the machine's own Go; every `go build` is logged with the GOTOOLCHAIN it ran under.
FAKE_GO = """#!/usr/bin/env bash
# A stand-in for `go`: `go env GOVERSION` as the GOTOOLCHAIN asks, and a `go build -o OUT PKG` that takes
# a while.
if [[ "$1" == env ]]; then
  case "${GOTOOLCHAIN:-local}" in local) echo "go$FAKE_GO_LOCAL" ;; *) echo "$GOTOOLCHAIN" ;; esac
  exit 0
fi
out=""
while [[ $# -gt 0 ]]; do
  if [[ "$1" == -o ]]; then out="$2"; shift; fi
  shift
done
echo "${GOTOOLCHAIN:-unset} $(basename "${out%.new}")" >> "$FAKE_GO_LOG"
sleep "$FAKE_GO_SLEEP"
printf '#!/bin/sh\\n' > "$out"
chmod +x "$out"
"""


def _env(
    tmp_path: Path, local: str = "1.26.8", sleep: float = 2.5, toolchain: str | None = None
) -> dict[str, str]:
    """A build's environment with the stand-in `go`; `toolchain` is the shell's GOTOOLCHAIN (None: unset)."""
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir(exist_ok=True)
    go = bin_dir / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "GOTOOLCHAIN"}
    if toolchain is not None:
        env["GOTOOLCHAIN"] = toolchain
    return {
        **env,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "VPA_CLUSTER_DIR": str(tmp_path / "cluster"),
        "VPA_BUILD_TICK_S": "1",
        "FAKE_GO_LOCAL": local,
        "FAKE_GO_LOG": str(tmp_path / "go-builds.log"),
        "FAKE_GO_SLEEP": str(sleep),
    }


def _build(tmp_path: Path, release: str = "v1.37.2", local: str = "1.26.8", sleep: float = 2.5) -> str:
    done = subprocess.run(
        ["bash", str(BUILD), release],
        env=_env(tmp_path, local=local, sleep=sleep),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _toolchains(tmp_path: Path) -> dict[str, str]:
    """binary -> the GOTOOLCHAIN its `go build` ran under."""
    lines = (tmp_path / "go-builds.log").read_text().splitlines()
    return {name: toolchain for toolchain, name in (line.split() for line in lines)}


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


BINARIES = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "hollow-node", "etcd"}


@pytest.mark.parametrize(
    ("release", "local", "shell", "want"),
    [
        # the machine's Go builds 1.37, even where the shell exported the newer toolchain (its cache stays
        # warm)
        ("v1.37.2", "1.26.8", None, "local"),
        ("v1.37.2", "1.26.8", "go1.27.3", "local"),
        ("v1.36.3", "1.26.8", "go1.27.3", "local"),
        # v1.38's go.mod says go 1.27.0: the approved newer toolchain, with or without the shell's export
        ("v1.38.0-beta.0", "1.26.8", None, "go1.27.3"),
        ("v1.38.0-beta.0", "1.26.8", "go1.27.3", "go1.27.3"),
        ("v1.38.0-beta.0", "1.26.8", "local", "go1.27.3"),
        # a machine whose own Go is new enough builds it with that
        ("v1.38.0-beta.0", "1.27.5", None, "local"),
    ],
)
def test_the_go_line_of_the_release_picks_the_toolchain(
    tmp_path: Path, release: str, local: str, shell: str | None, want: str
) -> None:
    done = subprocess.run(
        ["bash", str(BUILD), release],
        env=_env(tmp_path, local=local, sleep=0, toolchain=shell),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _toolchains(tmp_path) == dict.fromkeys(BINARIES, want)
    said = [line for line in done.stdout.splitlines() if "GOTOOLCHAIN" in line]
    if want == "local":
        assert said == []
    else:
        assert said == [
            f"Kubernetes {release}: go.mod says go 1.27.0, newer than this machine's go {local}: "
            f"building with GOTOOLCHAIN={want} (fetched once from the Go module proxy)"
        ]
    assert f"Kubernetes {release} built in " in done.stdout


def test_a_release_built_with_the_newer_toolchain_is_then_already_built(tmp_path: Path) -> None:
    _build(tmp_path, "v1.38.0-beta.0", sleep=0)
    again = _build(tmp_path, "v1.38.0-beta.0", sleep=0).splitlines()
    assert len(again) == 2, again
    assert "GOTOOLCHAIN=go1.27.3" in again[0]
    assert again[1].startswith("Kubernetes v1.38.0-beta.0 already built in ")
    # the stamp holds the Go version: the same release built by a machine Go of 1.27.5 is built again
    assert "building 5 binaries" in _build(tmp_path, "v1.38.0-beta.0", local="1.27.5", sleep=0)


@pytest.mark.parametrize(
    ("goline", "local", "want"),
    [
        ("1.26.0", "1.26.8", "local"),
        ("1.26.8", "1.26.8", "local"),
        ("1.27", "1.26.8", "go1.27.3"),
        ("1.27.0", "1.26.8", "go1.27.3"),
        ("1.27.3", "1.26.8", "go1.27.3"),
        ("1.27.0", "1.27.0", "local"),
        ("1.27.4", "1.26.8", None),
        ("1.28", "1.26.8", None),
        ("1.28.1", "1.29.0", "local"),
    ],
)
def test_go_toolchain_for_a_go_line(tmp_path: Path, goline: str, local: str, want: str | None) -> None:
    done = subprocess.run(
        ["bash", "-c", f'source "{TOOLCHAIN}" && go_toolchain_for "$1"', "-", goline],
        env=_env(tmp_path, local=local, toolchain="go1.27.3"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if want is None:
        assert done.returncode == 1
        assert done.stdout == ""
        assert done.stderr.strip() == (
            f"go {goline} is newer than this machine's go {local} and the approved go1.27.3"
        )
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == want
