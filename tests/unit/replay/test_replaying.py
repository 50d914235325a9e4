"""`vpa replay` on synthetic traces whose answers are derived by hand in the comments.

Shared facts (spec §3.6-§3.8, defaults): bucket n of a histogram starts at first × (1.05^n − 1)/0.05
(first = 0.01 core or 1e7 bytes); a percentile is the upper edge (start of the next bucket) of the
bucket where the running weight reaches p × total; the estimate is trunc(edge) plus trunc(15%); the
upper bound is × (1 + 1/confidence), the lower × (1 + 0.001/confidence)^-2, where confidence is the
smaller of days between first and last CPU sample and CPU samples/1440; the per-pod minimum is 25 m
and 250 MiB (262144000 bytes). Every trace here starts at 2026-01-01T00:00Z and has one sample a minute
through exactly 8 days (11521 samples), so confidence = min(8, 11521/1440) = 8: upper ×1.125, lower
×0.99975004687 (= 1/1.000125²).

Useful bucket edges: CPU start(9) = 0.110266 core, start(26) = 0.511135, start(37) = 1.016281;
memory start(15) = 215785635.88, start(22) = 385052143.98, start(38) = 1077095457.98 bytes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.settings import RecommenderSettings, ReplaySettings
from vpa.replay.replaying import replay, result_json, run
from vpa.replay.traces import TraceError, read_trace

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 86_400
MIB = 1024 * 1024
GIB = 1024 * MIB
MINUTES = 8 * 1440  # sample k at T0 + 60k, k = 0..MINUTES


Row = tuple[int, str, float | None, int | None, bool]


def _write_csv(path: Path, rows: list[Row]) -> Path:
    lines = ["timestamp,container,cpu_cores,memory_bytes,oom"]
    for ts, key, cpu, memory, oom in rows:
        lines.append(f"{ts},{key},{'' if cpu is None else cpu},{'' if memory is None else memory},"
                     f"{'true' if oom else ''}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_parquet(path: Path, rows: list[Row]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*rows, strict=True))
    table = pa.table({
        "timestamp": pa.array(columns[0], pa.int64()),
        "container": pa.array(columns[1], pa.string()),
        "cpu_cores": pa.array(columns[2], pa.float64()),
        "memory_bytes": pa.array(columns[3], pa.int64()),
        "oom": pa.array(columns[4], pa.bool_()),
    })
    pq.write_table(table, path)
    return path


def _trace(cpu: Callable[[int], float], memory: Callable[[int], int], key: str = "app") -> list[Row]:
    return [(T0 + 60 * k, key, cpu(k), memory(k), False) for k in range(MINUTES + 1)]


def _replay_json(path: Path, **kwargs: object) -> dict[str, object]:
    out = io.StringIO()
    settings = ReplaySettings(trace_path=str(path), **kwargs)  # type: ignore[arg-type]
    assert run(settings, stdout=out, stderr=io.StringIO()) == 0
    parsed: dict[str, object] = json.loads(out.getvalue())
    return parsed


CONSTANT = {
    "container": "app",
    # CPU 0.5 core is in bucket 25 → every percentile is start(26) = 0.511135 → 511 m + 76 = 587 m.
    # Memory 200 MiB (bucket 14) → start(15) → 215785635 + 32367845 = 248153480, under the 250 MiB minimum.
    "target": {"cpu": "587m", "memory": "250Mi"},
    # lower: trunc(587 × 0.99975) = 586 m; 248153480 × 0.99975 is still under the minimum → 250Mi
    "lowerBound": {"cpu": "586m", "memory": "250Mi"},
    # upper: trunc(587 × 1.125) = 660 m; trunc(248153480 × 1.125) = 279172665 (not a multiple of 1 Ki)
    "upperBound": {"cpu": "660m", "memory": "279172665"},
    "uncappedTarget": {"cpu": "587m", "memory": "250Mi"},
}


@pytest.mark.parametrize("writer", [_write_csv, _write_parquet], ids=["csv", "parquet"])
def test_constant_half_core_and_200_mib_for_eight_days(tmp_path: Path,
                                                       writer: Callable[[Path, list[Row]], Path]) -> None:
    suffix = ".csv" if writer is _write_csv else ".parquet"
    path = writer(tmp_path / f"constant{suffix}", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    assert _replay_json(path) == {"containers": [CONSTANT]}


def test_step_change(tmp_path: Path) -> None:
    # CPU: 0.1 core for 7.5 days (k < 10800), then 1 core. With a 24 h half-life sample k weighs
    # 0.1 × 2^(k/1440), so the old level holds (2^7.5 − 1)/(2^(11521/1440) − 1) = 70.6% of the weight:
    #   P50 stays low:  0.1 core (bucket 8) → start(9) = 0.110266 → 110 m + 16 = 126 m → ×0.99975 → 125 m
    #   P90, P95 high:  1 core (bucket 36) → start(37) = 1.016281 → 1016 m + 152 = 1168 m;
    #                   upper ×1.125 → 1314 m
    # Memory: 200 MiB before day 6, 1 GiB from day 6. Peaks are stamped at window ends T0+1d … T0+9d (the
    # sample at exactly 8 d opens a 9th window); with the reference at T0+1d their weights are 1, 2, …, 256.
    # Low windows 1-6 weigh 63 of 511 (12%), so P50/P90/P95 are all at 1 GiB (bucket 37):
    #   start(38) = 1077095457 → + 161564318 = 1238659775; lower ×0.99975 → 1238350168;
    #   upper ×1.125 → 1393492246
    rows = _trace(lambda k: 0.1 if k < 10_800 else 1.0, lambda k: 200 * MIB if k < 6 * 1440 else GIB)
    result = _replay_json(_write_csv(tmp_path / "step.csv", rows))
    assert result == {"containers": [{
        "container": "app",
        "target": {"cpu": "1168m", "memory": "1238659775"},
        "lowerBound": {"cpu": "125m", "memory": "1238350168"},
        "upperBound": {"cpu": "1314m", "memory": "1393492246"},
        "uncappedTarget": {"cpu": "1168m", "memory": "1238659775"},
    }]}


def test_one_oom(tmp_path: Path) -> None:
    # Constant 0.5 core / 200 MiB, plus one OOM kill at T0 + 6.5 d with a 256 MiB request:
    #   used = max(256 MiB, 200 MiB peak) = 268435456; bump = max(used + 100 MiB = 373293056,
    #   trunc(used × 1.2) = 322122547) = 373293056 (bucket 21), replacing the 7th window's peak (weight 64).
    # Memory weights: 447 at 200 MiB, 64 at the OOM peak (of 511):
    #   P50 (255.5) stays at 200 MiB → 248153480 → lower bound under the minimum → 250Mi
    #   P90 (459.9) and P95 reach the OOM bucket → start(22) = 385052143 → + 57757821 = 442809964;
    #   upper ×1.125 → trunc(498161209.5) = 498161209. CPU is as in the constant trace.
    rows = _trace(lambda k: 0.5, lambda k: 200 * MIB)
    rows.append((T0 + 6 * DAY + DAY // 2 + 30, "app", None, 256 * MIB, True))
    rows.sort(key=lambda row: row[0])
    result = _replay_json(_write_csv(tmp_path / "oom.csv", rows))
    assert result == {"containers": [{
        "container": "app",
        "target": {"cpu": "587m", "memory": "442809964"},
        "lowerBound": {"cpu": "586m", "memory": "250Mi"},
        "upperBound": {"cpu": "660m", "memory": "498161209"},
        "uncappedTarget": {"cpu": "587m", "memory": "442809964"},
    }]}


def test_series_and_at(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "constant.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    result = _replay_json(path, at=float(T0 + DAY), every_s=12 * 3600.0)
    series = result["series"]
    assert isinstance(series, list)
    assert [point["time"] for point in series] == [T0 + 12 * 3600, T0 + DAY]
    # After 12 h (721 samples, confidence 0.5) the upper bound is ×3: trunc(587 × 3) = 1761 m.
    assert series[0]["containers"][0]["upperBound"]["cpu"] == "1761m"
    # After 1 day (confidence 1) ×2 = 1174 m; the top-level answer is at --at = 1 day too.
    assert series[1]["containers"][0]["upperBound"]["cpu"] == "1174m"
    assert result["containers"] == series[1]["containers"]


def test_rows_are_applied_in_time_order_and_keys_are_separate(tmp_path: Path) -> None:
    rows = _trace(lambda k: 0.5, lambda k: 200 * MIB, key="b")[::-1] + _trace(
        lambda k: 0.5, lambda k: 200 * MIB, key="a")
    result = _replay_json(_write_csv(tmp_path / "shuffled.csv", rows))
    assert result == {"containers": [{**CONSTANT, "container": "a"}, {**CONSTANT, "container": "b"}]}


def test_flags_change_the_answer(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "constant.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    flags = RecommenderSettings(recommendation_margin_fraction=0.0, pod_recommendation_min_memory_mib=0,
                                round_cpu_millicores=100)
    result = _replay_json(path, recommender=flags)
    target = result["containers"][0]["target"]  # type: ignore[index]
    assert target == {"cpu": "600m", "memory": "215785635"}  # 511 m rounded up to 600 m; bare start(15)


def test_container_without_cpu_samples_gets_a_memory_only_recommendation(tmp_path: Path) -> None:
    # Upstream recommends nothing without a CPU sample; we recommend memory (what a container OOM-killed
    # before its first metrics read needs), and no CPU, about which nothing is known.
    rows: list[Row] = [(T0 + 60 * k, "mem-only", None, 200 * MIB, False) for k in range(100)]
    containers = _replay_json(_write_csv(tmp_path / "mem.csv", rows))["containers"]
    assert isinstance(containers, list)
    (container,) = containers
    assert container["container"] == "mem-only"
    assert set(container["target"]) == {"memory"}


def test_table_output(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "constant.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    out = io.StringIO()
    assert run(ReplaySettings(trace_path=str(path), output="table"), stdout=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "at 2026-01-09T00:00:00Z:"  # ISO-8601, not Unix seconds
    assert lines[1].split()[:3] == ["CONTAINER", "TARGET", "CPU"]
    # Memory for a reader: 279172665 bytes is 266Mi (three significant digits), not raw bytes.
    assert lines[2].split() == ["app", "587m", "250Mi", "586m", "250Mi", "660m", "266Mi"]
    assert "11521 rows" in lines[-1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("time,container\n1,a\n", "missing column 'timestamp'"),
        ("timestamp,container,cpu_cores\nabc,a,1\n",
         "timestamp: 'abc' is neither Unix seconds nor an ISO-8601"),
        ("timestamp,container,cpu_cores\n1,,1\n", "container: empty"),
        ("timestamp,container,cpu_cores,oom\n1,a,1,maybe\n", "oom: 'maybe' is not a boolean"),
        ("timestamp,container,memory_bytes\n1,a,inf\n", "memory_bytes"),
        ("timestamp,container,oom\n1,a,true\n", "no usage column: need cpu_cores and/or memory_bytes"),
        ("timestamp,container,cpu_cores,memory_bytes\n1,a,,\n2,a,,\n", "no usage sample"),
        ("timestamp,container,cpu_cores\n", "no rows after the header"),
        ("timestamp,container,cpu_cores\n1,a,-0.5\n", "bad.csv:2 cpu_cores: '-0.5' is negative"),
        ("timestamp,container,memory_bytes\n1,a,-1Mi\n", "bad.csv:2 memory_bytes: '-1Mi' is negative"),
        ("timestamp,container,cpu_cores\n1,a,1 core\n", "cpu_cores: '1 core' is not a number or a quantity"),
        ("timestamp,container,cpu_cores,memory_request\n1,a,1,lots\n", "memory_request: 'lots' is not"),
        ("timestamp,container,cpu_cores,cpu_request\n1,a,1,-1\n", "cpu_request: '-1' is negative"),
    ],
    ids=["no-timestamp", "bad-timestamp", "empty-key", "bad-oom", "infinite-memory", "no-usage-column",
         "no-usage-sample", "no-rows", "negative-cpu", "negative-memory", "bad-quantity", "bad-request",
         "negative-request"],
)
def test_malformed_traces_are_reported(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TraceError, match=message):
        read_trace(path)
    err = io.StringIO()
    assert run(ReplaySettings(trace_path=str(path)), stdout=io.StringIO(), stderr=err) == 2
    assert message.split(":")[0] in err.getvalue()


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    err = io.StringIO()
    assert run(ReplaySettings(trace_path=str(tmp_path / "nope.csv")), stderr=err) == 2
    assert "no such trace file" in err.getvalue()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(TraceError, match="cannot read Parquet"):
        read_trace(broken)


def test_empty_trace() -> None:
    from vpa.replay.traces import Trace

    result = replay(Trace([], [], [], [], []), RecommenderConfig(), every_s=60.0)
    assert result_json(result) == {"containers": [], "series": []}


def test_a_key_silent_for_a_whole_memory_window_is_collected(tmp_path: Path) -> None:
    # "old" reports for one day, then only "new" reports for 9 more days: 8 days after its last CPU
    # sample the hourly garbage collection drops "old"'s aggregate, so it has no recommendation any more.
    rows: list[Row] = [(T0 + 60 * k, "old", 0.5, 200 * MIB, False) for k in range(1441)]
    rows += [(T0 + 60 * k, "new", 0.5, 200 * MIB, False) for k in range(10 * 1440 + 1)]
    rows.sort(key=lambda row: row[0])
    result = _replay_json(_write_csv(tmp_path / "gc.csv", rows), every_s=float(DAY))
    series = result["series"]
    assert isinstance(series, list)
    keys_by_day = [[item["container"] for item in point["containers"]] for point in series]
    assert keys_by_day[7] == ["new", "old"]  # day 8: 7 days after old's last sample
    assert keys_by_day[9] == ["new"]  # day 10: more than 8 days after it
    final = result["containers"]
    assert isinstance(final, list)
    assert [item["container"] for item in final] == ["new"]


def _run(path: Path, **settings: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(ReplaySettings(trace_path=str(path), **settings), stdout=out, stderr=err)  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def test_iso_timestamps_and_quantities_read_as_numbers(tmp_path: Path) -> None:
    numeric = _write_csv(tmp_path / "numeric.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    lines = ["timestamp,container,cpu_cores,memory_bytes"]
    for k in range(MINUTES + 1):
        moment = datetime.fromtimestamp(T0 + 60 * k, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{moment},app,500m,200Mi")
    textual = tmp_path / "textual.csv"
    textual.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _replay_json(textual) == _replay_json(numeric) == {"containers": [CONSTANT]}


def test_naive_iso_time_is_utc(tmp_path: Path) -> None:
    path = tmp_path / "naive.csv"
    path.write_text("timestamp,container,cpu_cores\n2026-01-01T00:00:00,a,1\n2026-01-01T00:01:00+00:00,a,1\n")
    assert read_trace(path).timestamps == [float(T0), float(T0 + 60)]


def test_at_before_the_first_sample_is_an_error(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "constant.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB)[:10])
    status, out, err = _run(path, at=float(T0 - 1))
    assert (status, out) == (2, "")
    assert err == ("vpa replay: --at 2025-12-31T23:59:59Z is before the trace's first sample "
                   "(2026-01-01T00:00:00Z)\n")


def _with_requests(tmp_path: Path) -> Path:
    rows = ["timestamp,container,cpu_cores,memory_bytes,cpu_request,memory_request"]
    for k in range(MINUTES + 1):
        # Requests given on the first row only (carried forward), then changed on day 4.
        request = ("1", "512Mi") if k == 0 else ("250m", "128Mi") if k == 4 * 1440 else ("", "")
        rows.append(f"{T0 + 60 * k},app,0.5,{200 * MIB},{request[0]},{request[1]}")
    path = tmp_path / "requests.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_requests_are_compared_with_the_target(tmp_path: Path) -> None:
    path = _with_requests(tmp_path)
    result = _replay_json(path, every_s=2.0 * DAY)
    final = result["containers"][0]  # type: ignore[index]
    assert final["requests"] == {"cpu": "250m", "memory": "128Mi"}
    # target 587m / 250Mi (the constant trace) minus 250m / 128Mi
    assert final["targetMinusRequests"] == {"cpu": "337m", "memory": "122Mi"}
    series = result["series"]
    assert isinstance(series, list)
    assert [point["containers"][0]["requests"] for point in series] == [
        {"cpu": "1", "memory": "512Mi"}, {"cpu": "250m", "memory": "128Mi"},
        {"cpu": "250m", "memory": "128Mi"}, {"cpu": "250m", "memory": "128Mi"},
    ]
    assert series[0]["containers"][0]["targetMinusRequests"]["cpu"].startswith("-")
    status, out, _ = _run(path, output="table")
    assert status == 0
    header, row = out.splitlines()[1:3]
    assert "REQUEST CPU" in header
    assert "TARGET-REQUEST MEMORY" in header
    assert row.split() == ["app", "250m", "128Mi", "587m", "250Mi", "586m", "250Mi", "660m", "266Mi",
                           "+337m", "+122Mi"]


def test_every_is_in_every_output(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "constant.csv", _trace(lambda k: 0.5, lambda k: 200 * MIB))
    _, table_out, _ = _run(path, output="table", every_s=float(4 * DAY))
    series_lines = table_out.split("\n\n")[0].splitlines()
    assert series_lines[0].split()[:2] == ["TIME", "CONTAINER"]
    assert [line.split()[0] for line in series_lines[1:]] == ["2026-01-05T00:00:00Z", "2026-01-09T00:00:00Z"]
    _, csv_out, _ = _run(path, output="csv", every_s=float(4 * DAY))
    rows = list(csv.DictReader(io.StringIO(csv_out)))
    assert [(row["time"], row["container"]) for row in rows] == [
        ("2026-01-05T00:00:00Z", "app"), ("2026-01-09T00:00:00Z", "app")
    ]
    assert (rows[1]["target_cpu_cores"], rows[1]["target_memory_bytes"]) == ("0.587", str(250 * MIB))
    assert rows[1]["request_cpu_cores"] == ""
    _, yaml_out, _ = _run(path, output="yaml", every_s=float(4 * DAY))
    assert yaml.safe_load(yaml_out) == _replay_json(path, every_s=float(4 * DAY))
