"""`benchmarks.control_plane` finds every process below the simulator (the control plane's binaries are its
children), reads the CPU time each used from the kernel, summed by command name, and reports what each
spent between two readings against what the machine's CPUs could give; and the predicates its watches
count objects by."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from benchmarks.control_plane import (
    _descendants,
    cpu_row,
    cpu_seconds,
    is_available,
    is_quiet,
    is_recommended,
    is_running,
)


def test_a_process_and_its_children_are_found_with_their_names() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = _descendants(os.getpid())
        assert found[child.pid].startswith("python")
        assert os.getpid() in found
        assert os.getppid() not in found  # only below the root
    finally:
        child.kill()
        child.wait()


def test_cpu_time_is_read_per_process_and_summed_by_name() -> None:
    start = time.process_time()
    while time.process_time() - start < 0.2:
        pass
    used = cpu_seconds({os.getpid(): "me", 2**22 + 7: "gone"})
    assert set(used) == {"me"}  # a process that has gone is left out
    assert used["me"] >= 0.2 - 0.02  # the kernel counts in clock ticks
    twice = cpu_seconds({os.getpid(): "me", os.getppid(): "me"})
    assert twice["me"] >= used["me"]


def test_the_row_gives_each_process_its_share_largest_first_and_the_machines_capacity() -> None:
    before = {"kube-apiserver": 10.0, "vpa run": 5.0, "etcd": 1.0}
    after = {"kube-apiserver": 112.0, "vpa run": 29.0, "etcd": 1.2, "kube-scheduler": 3.0}
    row = cpu_row(before, after, 86.0)
    capacity = 86 * (os.cpu_count() or 1)
    assert row == (f"kube-apiserver 102 s; vpa run 24 s; kube-scheduler 3 s "
                   f"(of {capacity} CPU-seconds in 86 s)")


def test_a_quiet_window_says_so() -> None:
    row = cpu_row({"etcd": 1.0}, {"etcd": 1.2, "vpa sim": 0.1}, 20.0)
    assert row.startswith("each under 0.5 s (of ")


@pytest.mark.parametrize(("deployment", "available"), [
    ({"metadata": {"generation": 1}, "spec": {"replicas": 5},
      "status": {"observedGeneration": 1, "availableReplicas": 5}}, True),
    ({"metadata": {"generation": 1}, "spec": {"replicas": 5},
      "status": {"observedGeneration": 1, "availableReplicas": 4}}, False),
    ({"metadata": {"generation": 2}, "spec": {"replicas": 5},
      "status": {"observedGeneration": 1, "availableReplicas": 5}}, False),  # the status is of an older spec
    ({"metadata": {"generation": 1}, "spec": {}, "status": {"observedGeneration": 1, "availableReplicas": 1}},
     True),  # replicas defaults to 1
    ({"metadata": {"generation": 1}, "spec": {"replicas": 1}}, False),  # no status yet
])  # fmt: skip
def test_a_deployment_is_available_when_every_replica_of_its_current_spec_is(
        deployment: dict[str, Any], available: bool) -> None:
    assert is_available(deployment) is available


def test_running_pods_and_recommended_vpas() -> None:
    assert is_running({"status": {"phase": "Running"}})
    assert not is_running({"status": {"phase": "Pending"}})
    assert not is_running({})
    rec = {"containerName": "app", "target": {"cpu": "25m"}}
    assert is_recommended({"status": {"recommendation": {"containerRecommendations": [rec]}}})
    assert not is_recommended({"status": {"recommendation": {"containerRecommendations": []}}})
    assert not is_recommended({"status": {"conditions": []}})
    assert not is_recommended({})


@pytest.mark.parametrize(("used", "previous", "steady", "quiet"), [
    (0.29, None, None, True),  # under QUIET_CPU: quiet, whatever came before
    (0.31, None, None, False),
    (0.31, 0.31, None, False),  # without a steadiness bound only the floor counts
    (0.90, None, 0.05, False),  # the first window has nothing to compare with
    (0.90, 0.93, 0.05, True),  # a background that stopped changing
    (0.90, 1.40, 0.05, False),  # still falling: a backlog draining
    (0.90, 0.60, 0.05, False),  # rising
], ids=["under-floor", "over-floor", "floor-only", "first-window", "steady", "falling",
        "rising"])  # fmt: skip
def test_a_window_is_quiet_under_the_floor_or_once_its_cpu_stops_changing(
        used: float, previous: float | None, steady: float | None, quiet: bool) -> None:
    assert is_quiet(used, previous, steady) is quiet
