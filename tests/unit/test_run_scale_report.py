"""`benchmarks.run_scale` reads the longest main-loop stall from a `/debug/stalls` report, not the webhook's
loop's, gives the hypervisor's steal of each window, counts a window's lag samples over 20 ms, and tells the
webhook probe's first review (and its connection) apart from the rest, and warms the probe's client against
another server than the webhook, at best effort, and sets each window's span without a CPU (the witness's)
beside its lags, and each window's slowest reviews beside what the witness saw of both threads meanwhile, and
takes the initial LIST's longest lag from `vpa run`'s `caches_synced` line."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from pathlib import Path

import pytest

from benchmarks.run_scale import (
    _caches_synced,
    _cpu_window,
    _lag_window,
    _lags_detail,
    _lags_over,
    _longest_stall,
    _percentiles,
    _review_rows,
    _slowest,
    _stalls_over,
    _steal_rows,
    _timed_rows,
    _webhook_detail,
    _witness_rows,
    probe_context,
    warm_client,
)
from benchmarks.witness import MAIN, Sample
from vpa.components.webhook import SERVING_THREAD
from vpa.sim.apiserver.tls import generate_certs

REPORT = """stalls over 5 ms: 12; GC total 0.010 s

--- 26.1 ms, 1 samples, from 1234.5000 s on the monotonic clock, \
the loop thread on a CPU 4.2 ms of the 28.1 ms between its heartbeats, GC 0.0 ms \
(longest 0.0 ms (generation -1, thread -))
  stack seen 1x:
    vpa/kube/watching.py:411 _parse_page

--- 19.0 ms, 1 samples, from 1240.0000 s on the monotonic clock, \
waiting for a CPU 0.0 ms, GC 0.0 ms (longest 0.0 ms (generation -1, thread -))

=== the admission webhook's event loop
stalls over 5 ms: 1; GC total 0.010 s, longest collection 2.0 ms (generation 0, thread MainThread)

--- 54.7 ms, 1 samples, from 1250.0000 s on the monotonic clock, \
GC 0.0 ms (longest 0.0 ms (generation -1, thread -))
"""


def test_the_main_loops_stalls_over_the_target_are_listed_with_their_start() -> None:
    # The 19.0 ms one is under 20 ms, the 54.7 ms one is the webhook loop's: only the first is listed.
    assert _stalls_over(REPORT, 20.0) == [(1234.5, 0.0261)]
    assert _stalls_over(REPORT.replace("from 1234.5000 s on the monotonic clock, ", ""), 20.0) == []


def test_a_stall_over_the_target_is_set_beside_the_witness_samples_meanwhile() -> None:
    seen = {MAIN: _steady(10.0, 1.0, 1.0)}
    rows = _review_rows(seen, {"the relist": [(10.5, 0.025)]}, what="a stall over 20 ms")
    assert [(label, value) for label, value, _ in rows] == [("a stall over 20 ms, the relist", "25.0 ms")]
    assert rows[0][2].startswith("loop thread: on a CPU 26.0,")
    assert rows[0][2].endswith("(samples at most 2.0 ms apart)")


def test_the_main_loops_first_entry_is_its_longest_stall() -> None:
    assert _longest_stall(REPORT) == (26.1, 4.2)
    older = REPORT.replace("the loop thread on a CPU 4.2 ms of the 28.1 ms between its heartbeats, ", "")
    assert _longest_stall(older) == (26.1, None)  # a report from before it said


def test_a_report_without_main_loop_stalls_has_none() -> None:
    webhook_only = "stalls over 5 ms: 0\n\n=== the admission webhook's event loop\n--- 54.7 ms, 1 samples\n"
    assert _longest_stall(webhook_only) is None


def test_the_timed_row_names_each_window_and_the_worst() -> None:
    assert _timed_rows({}) == []
    ((name, value, detail),) = _timed_rows({"ready": (26.1, None), "first": None, "relist": (32.1, 4.2)})
    assert name == "longest stall timed by --profiling"
    assert value == "32.1 ms"
    assert detail == ("up to ready 26.1 ms; ready to the first loop's end none; the relist 32.1 ms "
                      "(on a CPU 4.2 ms of it)")


def test_the_steal_rows_give_each_windows_share_of_the_machines_cpu_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("benchmarks.run_scale.os.cpu_count", lambda: 2)
    steal = {"start": 10.0, "first": 10.6, "relist": 11.0, "relist end": 11.1}
    first, relist = _steal_rows(steal, 30.0, 10.0)
    assert first == ("hypervisor steal: start to the first loop's end", "0.60 s",
                     "of 2 CPUs' 60 s (1.0%), /proc/stat")
    assert relist[1] == "0.10 s"
    assert relist[2].startswith("of 2 CPUs' 20 s (0.5%)")
    assert _steal_rows(steal, 30.0, None) == [first]  # --first-only: no relist
    assert _steal_rows({"start": None, "first": None}, 30.0, None) == []  # no steal reported
    with_ready = _steal_rows({**steal, "ready": 10.2}, 30.0, 10.0, 5.0)
    assert with_ready[0] == ("hypervisor steal: start to ready (the initial LISTs)", "0.20 s",
                             "of 2 CPUs' 10 s (2.0%), /proc/stat")
    assert with_ready[1:] == [first, relist]


def test_the_witness_rows_give_each_windows_longest_span_without_a_cpu() -> None:
    # On a CPU 10-11 s (CPU time at 4 ms ticks), a vCPU taken away for 30 ms at 20.0 s, asleep from 20.1 s.
    samples = [Sample(10 + i * 0.002, "R", (i * 0.002 // 0.004) * 0.004, 0.0) for i in range(500)]
    samples += [Sample(20 + i * 0.002, "R", 1.0, 0.0) for i in range(16)]
    samples += [Sample(20.032 + i * 0.002, "R", 1.004 + (i * 0.002 // 0.004) * 0.004, 0.0) for i in range(30)]
    samples += [Sample(20.1 + i * 0.01, "S", 1.06, 0.0) for i in range(10)]
    rows = _witness_rows(samples, {"start": 10.0, "ready": 11.0, "first": 21.0})
    assert [row[0] for row in rows] == ["vpa run's loop thread, start to ready (the initial LISTs)",
                                        "vpa run's loop thread, ready to the first loop's end"]
    ready, first = rows
    assert float(ready[1].removeprefix("≥ ").split(" ms")[0]) < 4.0
    assert float(first[1].removeprefix("≥ ").split(" ms")[0]) == pytest.approx(30.0, abs=4.0)
    assert first[2].endswith("(sampled every 2 ms from another process)")
    assert _witness_rows([], {"start": 10.0, "ready": 11.0}) == []  # a sampler that never answered


def test_the_slowest_reviews_leave_out_the_first_and_come_slowest_first() -> None:
    starts = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    seconds = [0.050, 0.002, 0.021, 0.003, 0.009, 0.025]  # the first opened the connection
    assert _slowest(starts, seconds) == [(6.0, 0.025), (3.0, 0.021), (5.0, 0.009)]
    assert _slowest(starts[:2], seconds[:2]) == [(2.0, 0.002)]
    assert _slowest([], []) == []


def _steady(start: float, seconds: float, cpu_share: float, state: str = "R") -> list[Sample]:
    """Every 2 ms for `seconds`: `cpu_share` of the time on a CPU, the rest off one (no wait, no steal)."""
    n = int(seconds / 0.002)
    return [Sample(start + i * 0.002, state, i * 0.002 * cpu_share, 0.0, i) for i in range(n)]


def test_a_slow_review_is_set_beside_both_threads_time_while_it_lasted() -> None:
    # The webhook's thread off a CPU (blocked) nine tenths of the time, the loop thread on one throughout.
    seen = {SERVING_THREAD: _steady(10.0, 1.0, cpu_share=0.1, state="S"), MAIN: _steady(10.0, 1.0, 1.0)}
    rows = _review_rows(seen, {"the first loop": [(10.5, 0.020)], "the relist": []})
    assert len(rows) == 1
    label, value, detail = rows[0]
    assert (label, value) == ("a slowest review, the first loop", "20.0 ms")
    webhook, loop = detail.split("; ")
    assert webhook.startswith(
        "webhook thread: on a CPU 2.0, waiting for one 0.0, without one ≥ 0.0, off a CPU 18.0")
    assert loop.startswith("loop thread: on a CPU 20.0,")
    assert webhook.endswith("of 20.0 ms sampled (samples at most 2.0 ms apart)")


def test_a_review_the_witness_did_not_see_says_so() -> None:
    rows = _review_rows({MAIN: []}, {"the relist": [(10.5, 0.020)]})
    assert rows == [("a slowest review, the relist", "20.0 ms", "the witness saw neither thread")]


def _lags(counts: dict[str, int]) -> str:
    """A scrape's `vpa_event_loop_lag_seconds` buckets (cumulative, as exposed)."""
    return "".join(f'vpa_event_loop_lag_seconds_bucket{{le="{le}"}} {n}.0\n' for le, n in counts.items())


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({"0.02": 10, "0.025": 10, "+Inf": 10}, {"0.02": 500, "0.025": 500, "+Inf": 500}, (0, "≤ 20 ms")),
        ({"0.02": 10, "0.025": 12, "+Inf": 12}, {"0.02": 500, "0.025": 505, "+Inf": 505}, (3, "≤ 25 ms")),
        ({"0.02": 0, "5.0": 0, "+Inf": 0}, {"0.02": 5, "5.0": 5, "+Inf": 6}, (1, "> 5 s")),
        ({}, {"0.001": 7, "0.02": 7, "+Inf": 7}, (0, "≤ 1 ms")),
        ({}, {}, (0, "no samples")),
    ],
    ids=["none-over", "three-over-worst-25ms", "beyond-the-last-bucket", "no-scrape-before", "no-buckets"],
)
def test_a_windows_lags_over_20_ms_come_from_the_difference_of_two_scrapes(
    before: dict[str, int], after: dict[str, int], expected: tuple[int, str]
) -> None:
    assert _lag_window(_lags(before), _lags(after)) == expected


def test_lags_below_the_target_are_counted_by_bucket_bound() -> None:
    before = _lags({"0.005": 90, "0.01": 95, "0.015": 98, "0.02": 100, "+Inf": 100})
    after = _lags({"0.005": 190, "0.01": 199, "0.015": 205, "0.02": 208, "+Inf": 209})
    # 109 samples in the window: 100 up to 5 ms, 4 more up to 10, 3 up to 15, 1 up to 20, 1 beyond
    assert [_lags_over(before, after, ms) for ms in (5, 10, 15, 20)] == [9, 5, 2, 1]
    assert _lags_detail(before, after, "> 0.02 s") == "worst > 0.02 s; over 15 ms 2, over 10 ms 5"
    assert _lags_over("", "", 10) == 0


def test_the_first_review_and_its_connection_are_told_apart_from_the_rest() -> None:
    row = _percentiles([0.0125, 0.001, 0.002, 0.0015], connect_s=0.0084)
    assert row["n"] == 4
    assert row["first"] == pytest.approx(12.5)
    assert row["connect"] == pytest.approx(8.4)
    assert row["rest_max"] == pytest.approx(2.0)
    assert row["max"] == pytest.approx(12.5)
    assert _webhook_detail(row) == (
        "p50 2.0, max 12.5 ms (first review 12.5, 8.4 of it connecting and the TLS handshake; "
        "then at most 2.0), 4 reviews")
    assert _percentiles([])["connect"] == 0.0


def test_the_probe_is_warmed_by_one_request_to_the_other_server() -> None:
    seen: list[tuple[str, str, bytes]] = []

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append((self.command, self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refusing)
    server.socket = generate_certs().server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    try:
        status = warm_client(probe_context(), f"https://127.0.0.1:{server.server_port}", b'{"kind":"x"}')
    finally:
        thread.join(10)
        server.server_close()
    assert status == 405
    assert seen == [("POST", "/version", b'{"kind":"x"}')]


def test_a_warm_up_without_a_server_is_skipped() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert warm_client(probe_context(), f"https://127.0.0.1:{port}", b"{}") == 0


def test_a_windows_cpu_row_adds_the_probes_own_count() -> None:
    row = _cpu_window({"vpa run": 1.0, "vpa sim": 2.0}, {"vpa run": 25.0, "vpa sim": 9.5, "benchmark": 1.2},
                      30.0, {"p99": 3.0, "cpu": 4.25})
    assert row.startswith("vpa run 24 s; vpa sim 8 s; benchmark 1 s (of ")
    assert row.endswith("; the webhook probe 4.2 s")


def test_the_initial_lists_lag_comes_from_the_caches_synced_line(tmp_path: Path) -> None:
    log = tmp_path / "vpa-run.log"
    log.write_text(
        'Traceback (most recent call last): not JSON\n'
        '{"event": "watch_cache_synced", "cache": "pods", "objects": 3}\n'
        '{"event": "a line naming caches_synced in its text", "detail": "\\"caches_synced\\""}\n'
        '{"event": "caches_synced", "seconds": 5.384, "event_loop_lag_max_ms": 15.4}\n'
    )
    entry = asyncio.run(_caches_synced(log))
    assert (entry["seconds"], entry["event_loop_lag_max_ms"]) == (5.384, 15.4)


def test_no_caches_synced_line_is_an_error_naming_the_log(tmp_path: Path) -> None:
    log = tmp_path / "vpa-run.log"
    log.write_text('{"event": "vpa started"}\n')
    with pytest.raises(RuntimeError, match=r"no caches_synced line in .*vpa-run\.log"):
        asyncio.run(_caches_synced(log, limit_s=0.2))
