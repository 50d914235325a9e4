"""`benchmarks.control_plane` finds every process below the simulator (the control plane's binaries are its
children), reads the CPU time each used from the kernel, summed by command name, and reports what each
spent between two readings against what the machine's CPUs could give."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks.control_plane import _descendants, cpu_row, cpu_seconds


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
