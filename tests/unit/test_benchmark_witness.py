"""`benchmarks.witness`: a watched thread's time told apart into CPU, waits for a CPU and time without one,
from samples that carry the kernel's own late bookkeeping (CPU time added at 4 ms ticks, a wait added when
it ends), and the threads of a process found by their kernel names."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from benchmarks.witness import MAIN, Sample, ThreadWitness, Window, _tids_named, around, windows
from vpa.components.loop_thread import name_os_thread

TICK = 0.004
PERIOD = 0.002


def _running(start: float, seconds: float, cpu: float, wait: float = 0.0, switches: int = 0) -> list[Sample]:
    """A thread on a CPU throughout, sampled every 2 ms, its CPU time seen only at each 4 ms tick."""
    out, t = [], 0.0
    while t < seconds:
        ticks = int((t + 1e-9) / TICK)
        out.append(Sample(start + t, "R", cpu + ticks * TICK, wait, switches))
        t += PERIOD
    return out


def _stretch(samples: list[Sample], start: float, seconds: float, state: str = "R") -> list[Sample]:
    """Samples every 2 ms for `seconds` after the last one, its counters frozen (no CPU, no wait added)."""
    last = samples[-1]
    return [Sample(start + i * PERIOD, state, last.cpu_s, last.wait_s, last.switches)
            for i in range(1, int(seconds / PERIOD) + 1)]


def _after(samples: list[Sample], seconds: float, wait_added: float = 0.0, switched: int = 0) -> list[Sample]:
    """The thread on a CPU again; `switched`: how often it was switched off and back on meanwhile."""
    last = samples[-1]
    return _running(last.at + PERIOD, seconds, last.cpu_s + TICK, last.wait_s + wait_added,
                    last.switches + switched)


def _one(samples: list[Sample]) -> Window:
    return windows(samples, {"w": (samples[0].at, samples[-1].at)})["w"]


def test_a_thread_always_on_a_cpu_has_no_span_without_one_beyond_the_kernels_tick() -> None:
    window = _one(_running(100.0, 2.0, cpu=5.0))
    assert window.longest_stolen_s < TICK
    assert window.stolen_s < TICK
    assert window.cpu_s == pytest.approx(window.wall_s, abs=TICK)
    assert window.longest_wait_s == 0.0


def test_a_vcpu_taken_away_for_20_ms_is_one_span_of_20_ms() -> None:
    before = _running(100.0, 0.2, cpu=5.0)
    stolen = _stretch(before, before[-1].at, 0.020)
    samples = before + stolen + _after(stolen, 0.2)
    window = _one(samples)
    assert window.longest_stolen_s == pytest.approx(0.020, abs=TICK)
    assert window.stolen_s == pytest.approx(0.020, abs=TICK)
    assert window.longest_wait_s == 0.0


def test_a_wait_for_a_cpu_is_a_wait_and_no_span_without_one() -> None:
    before = _running(100.0, 0.2, cpu=5.0)
    waiting = _stretch(before, before[-1].at, 0.010)  # runnable, its wait added once it ends
    samples = before + waiting + _after(waiting, 0.2, wait_added=0.010 + PERIOD, switched=1)
    window = _one(samples)
    assert window.longest_stolen_s < TICK
    assert window.longest_wait_s == pytest.approx(0.012)


def test_blocks_too_short_to_be_sampled_are_no_span_without_a_cpu() -> None:
    """Waits for the GIL, or the main thread giving way to the webhook: state `R` at every sample, no CPU
    time meanwhile, but the thread was switched off its CPU and back, which a stolen vCPU never is."""
    before = _running(100.0, 0.2, cpu=5.0)
    blocked = _stretch(before, before[-1].at, 0.020)
    window = _one(before + blocked + _after(blocked, 0.2, switched=6))
    assert window.longest_stolen_s < TICK
    assert window.stolen_s < TICK


def test_time_asleep_is_neither_a_wait_nor_a_span_without_a_cpu() -> None:
    before = _running(100.0, 0.2, cpu=5.0)
    asleep = _stretch(before, before[-1].at, 0.5, state="S")
    window = _one(before + asleep + _after(asleep, 0.2))
    assert window.longest_stolen_s < TICK
    assert window.stolen_s < TICK
    assert window.cpu_s < window.wall_s - 0.4


def test_a_window_reads_only_the_samples_inside_it() -> None:
    before = _running(100.0, 0.2, cpu=5.0)
    stolen = _stretch(before, before[-1].at, 0.030)
    samples = before + stolen + _after(stolen, 0.2)
    found = windows(samples, {"before": (100.0, 100.19), "all": (100.0, 101.0), "later": (200.0, 201.0)})
    assert found["before"].longest_stolen_s < TICK
    assert found["all"].longest_stolen_s == pytest.approx(0.030, abs=TICK)
    assert found["later"] == Window()
    assert found["later"].describe() == "no samples"


def test_a_window_describes_its_spans_and_its_share_on_a_cpu() -> None:
    window = Window(wall_s=10.0, cpu_s=9.0, wait_s=0.25, stolen_s=0.5, longest_stolen_s=0.0156,
                    longest_wait_s=0.003, longest_gap_s=0.0241, long_gaps=1)
    assert window.describe() == ("longest span without a CPU at least 15.6 ms (in all 0.50 s); longest wait "
                                 "for a CPU 3.0 ms (in all 0.25 s); on a CPU 90% of 10.0 s; the witness's "
                                 "own samples at most 24.1 ms apart (1 gaps over 20 ms)")


def test_the_witness_own_longest_gap_between_samples_is_its_stall() -> None:
    """The sampler asks for a sample every 2 ms; when it is itself held (the machine gave neither process
    a CPU), two samples lie far apart, whatever the watched thread's counters say."""
    before = _running(100.0, 0.2, cpu=5.0)
    late = [s._replace(at=s.at + 0.025) for s in _after(before, 0.2)]  # the next sample 27 ms on
    window = _one(before + late)
    assert window.longest_gap_s == pytest.approx(0.027)
    assert window.long_gaps == 1
    assert _one(before).longest_gap_s == pytest.approx(PERIOD)
    assert _one(before).long_gaps == 0


def test_a_span_shorter_than_the_samples_is_read_from_the_samples_on_either_side() -> None:
    samples = _running(100.0, 0.2, cpu=5.0)
    stolen = _stretch(samples, samples[-1].at, 0.020)
    samples += stolen + _after(stolen, 0.2)
    inside = around(samples, stolen[2].at + 0.0005, stolen[6].at + 0.0005)  # between samples, both ends
    assert inside.wall_s == pytest.approx(5 * PERIOD)  # from stolen[2] to stolen[7]
    assert inside.cpu_s == 0.0
    assert around(samples, 50.0, 50.1).wall_s == 0.0  # before any sample: the first alone
    assert around([], 1.0, 2.0) == Window()


def test_time_off_a_cpu_is_what_is_left_of_the_window() -> None:
    assert Window(wall_s=0.020, cpu_s=0.004, wait_s=0.003, stolen_s=0.001).off_cpu_s == pytest.approx(0.012)
    assert Window(wall_s=0.010, cpu_s=0.011).off_cpu_s == 0.0  # the kernel's late tick, not negative


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the kernel's thread names")
def test_the_witness_samples_a_thread_found_by_its_kernel_name_once_it_appears() -> None:
    witness = ThreadWitness(os.getpid(), named=("witnessed-thread-long-name", "never-started"))
    witness.start()
    stop = threading.Event()

    def spin() -> None:
        name_os_thread("witnessed-thread-long-name")
        while not stop.is_set():
            sum(range(1000))

    time.sleep(0.2)  # the sampler runs before the thread exists
    thread = threading.Thread(target=spin)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not _tids_named(os.getpid(), ["witnessed-thread-long-name"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join()
    seen = witness.finish()
    assert set(seen) == {MAIN, "witnessed-thread-long-name"}
    spun = seen["witnessed-thread-long-name"]
    assert len(spun) > 10
    assert spun[-1].cpu_s > spun[0].cpu_s  # its own CPU time, not the main thread's
    assert seen[MAIN][0].at < spun[0].at
