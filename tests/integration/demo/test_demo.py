"""The newcomer's demo runs to completion as a real command, prints its table, and stops its processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def _demo_processes() -> list[int]:
    """Processes still carrying a demo work directory on their command line (`vpa sim`, `vpa run`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if b"vpa-demo-" in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


# The command's own 3-minute budget (communicate below) is the check; the global 120 s pytest timeout
# would otherwise fire first.
@pytest.mark.timeout(240)
def test_demo_resizes_in_place_and_exits_cleanly() -> None:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vpa.cli", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = proc.communicate(timeout=180)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, output[-3000:]
    assert elapsed < 180
    # The table, with every workload and mode, as the README promises.
    assert "WORKLOAD" in output
    assert "RUNNING WITH" in output
    for name, mode in (("web", "InPlaceOrRecreate"), ("batch", "InPlace"), ("api", "Off")):
        assert any(line.split()[:2] == [name, mode] for line in output.splitlines()), name
    assert "In-place workloads resized without restarts; done:" in output
    # The end says, per workload, what converged and what is still moving.
    ending = output.split("done:", 1)[1].splitlines()
    assert [line.split()[0] for line in ending if line.strip()][:3] == ["web", "batch", "api"]
    assert "(Off mode never changes pods)" in output
    # The last table: both in-place workloads fully resized, nothing restarted, Off untouched.
    last = output[output.rindex("WORKLOAD") :].splitlines()
    rows = {line.split()[0]: line.split() for line in last[1:4]}
    assert rows["web"][-2:] == ["2", "0"]
    assert rows["batch"][-2:] == ["1", "0"]
    assert rows["api"][-2] == "0"
    assert "200m/256Mi" in " ".join(rows["api"])
    assert _demo_processes() == []
