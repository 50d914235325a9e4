"""`vpa replay`: the recommender's own logic run offline over a usage trace (DESIGN §8).

Owns: reading a trace (CSV, or Parquet through pyarrow, imported only for Parquet files) into columns;
applying its rows in timestamp order (file order on ties) to a `RecommenderCore`, each trace key being
one single-container pod under its own VPA; CPU cores truncated to whole millicores as upstream's
`CPUAmountFromCores` does; `oom` rows recorded as OOM kills whose `memory_bytes` is the request; the
hourly aggregate garbage collection the live loop runs, on trace time; the built-in algorithm chosen by
name (`--recommender`, `--list-recommenders`; `--evaluate` hands over to `vpa.evaluate`); and the
output — JSON (`{"containers": [...], "series": [...]}` with Kubernetes quantity strings) or a readable
table.

Must not: talk to a cluster, read the wall clock, or use anything of the recommender other than
`vpa.logic` — replay answers exactly what the live recommender would for the same samples.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import orjson

from vpa.logic.aggregation import ContainerState, OomRejected
from vpa.logic.cost_aware import BUILTIN_RECOMMENDERS, pod_recommender_for
from vpa.logic.recommender_cluster import ContainerId, PodId
from vpa.logic.recommender_numerics import cpu_amount_from_cores
from vpa.logic.recommending import RecommenderConfig, RecommenderCore
from vpa.model.resources import Resources
from vpa.model.settings import ReplaySettings
from vpa.model.vpa import DEFAULT_RECOMMENDER_NAME, RecommendedContainerResources, VpaView

REPLAY_NAMESPACE: Final = "replay"
KEY_LABEL: Final = "vpa-replay/key"
_TRUE: Final = frozenset({"true", "1", "yes", "t", "y"})
_FALSE: Final = frozenset({"false", "0", "no", "f", "n", ""})


class TraceError(ValueError):
    """A trace that cannot be replayed; the message names the file, row or column."""


@dataclass(slots=True)
class Trace:
    """Column-oriented trace rows, already in replay order."""

    timestamps: list[float]
    containers: list[str]
    cpu_cores: list[float | None]
    memory_bytes: list[int | None]
    oom: list[bool]

    def __len__(self) -> int:
        return len(self.timestamps)


# --- reading --------------------------------------------------------------------------------------------


def _parse_float(text: str, what: str) -> float | None:
    text = text.strip()
    if text == "" or text.lower() in ("nan", "null", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{what}: {text!r} is not a number") from None
    return None if math.isnan(value) else value


def _parse_bool(value: object, what: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value) if not (isinstance(value, float) and math.isnan(value)) else False
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise TraceError(f"{what}: {value!r} is not a boolean (use true/false)")


def _memory(value: float | None, what: str) -> int | None:
    if value is None:
        return None
    if not math.isfinite(value):
        raise TraceError(f"{what}: {value!r} is not a finite byte count")
    return int(value)


def read_csv(path: Path) -> Trace:
    timestamps: list[float] = []
    containers: list[str] = []
    cpu: list[float | None] = []
    memory: list[int | None] = []
    oom: list[bool] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = set(reader.fieldnames or ())
        for required in ("timestamp", "container"):
            if required not in columns:
                raise TraceError(f"{path}: missing column {required!r} (have {sorted(columns)})")
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            ts = _parse_float(row.get("timestamp") or "", f"{where} timestamp")
            if ts is None:
                raise TraceError(f"{where} timestamp: empty")
            key = row.get("container") or ""
            if not key:
                raise TraceError(f"{where} container: empty")
            timestamps.append(ts)
            containers.append(key)
            cpu.append(_parse_float(row.get("cpu_cores") or "", f"{where} cpu_cores"))
            memory.append(_memory(_parse_float(row.get("memory_bytes") or "", f"{where} memory_bytes"),
                                  f"{where} memory_bytes"))
            oom.append(_parse_bool(row.get("oom"), f"{where} oom"))
    return Trace(timestamps, containers, cpu, memory, oom)


def read_parquet(path: Path) -> Trace:
    try:
        import pyarrow.parquet as pq  # only Parquet traces need pyarrow
    except ImportError:
        raise TraceError(f"{path}: reading Parquet needs pyarrow (pip install 'vpa[parquet]')") from None
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several unrelated types for unreadable files
        raise TraceError(f"{path}: cannot read Parquet: {err}") from None
    names = set(table.column_names)
    for required in ("timestamp", "container"):
        if required not in names:
            raise TraceError(f"{path}: missing column {required!r} (have {sorted(names)})")
    count = table.num_rows

    def column(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in names else [None] * count

    raw_ts = column("timestamp")
    timestamps: list[float] = []
    for index, value in enumerate(raw_ts):
        if value is None:
            raise TraceError(f"{path}: row {index} has no timestamp")
        timestamps.append(float(value.timestamp()) if hasattr(value, "timestamp") else float(value))
    containers = [str(value) if value is not None else "" for value in column("container")]
    if any(key == "" for key in containers):
        raise TraceError(f"{path}: a row has an empty container key")
    cpu = [None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
           for value in column("cpu_cores")]
    memory = [_memory(None if value is None or (isinstance(value, float) and math.isnan(value))
                      else float(value), f"{path} memory_bytes")
              for value in column("memory_bytes")]
    oom = [_parse_bool(value, f"{path} oom") for value in column("oom")]
    return Trace(timestamps, containers, cpu, memory, oom)


def read_trace(path: str | Path) -> Trace:
    """Read a CSV or Parquet trace (by extension; `.parquet`/`.pq` are Parquet) in replay order."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    trace = read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else read_csv(path)
    return _in_time_order(trace)


def _in_time_order(trace: Trace) -> Trace:
    ts = trace.timestamps
    if all(ts[i] <= ts[i + 1] for i in range(len(ts) - 1)):
        return trace
    order = sorted(range(len(ts)), key=ts.__getitem__)  # stable: file order on ties
    return Trace([ts[i] for i in order], [trace.containers[i] for i in order],
                 [trace.cpu_cores[i] for i in order], [trace.memory_bytes[i] for i in order],
                 [trace.oom[i] for i in order])


# --- replaying ------------------------------------------------------------------------------------------


class _KeyMatcher:
    """The selector of a replay key's VPA: exactly that key's pod."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def matches(self, labels: Mapping[str, str]) -> bool:
        return labels.get(KEY_LABEL) == self.key

    def index_terms(self) -> tuple[tuple[str, str], ...]:
        return ((KEY_LABEL, self.key),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KeyMatcher) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(slots=True)
class ReplayStats:
    rows: int = 0
    cpu_samples: int = 0
    memory_samples: int = 0
    ooms: int = 0
    discarded: int = 0


class Replayer:
    """Feeds trace rows to a `RecommenderCore` and asks it for recommendations at given times."""

    def __init__(self, config: RecommenderConfig, recommender: str = DEFAULT_RECOMMENDER_NAME) -> None:
        self.core = RecommenderCore(config, pod_recommender_for(recommender, config.estimation))
        self._containers: dict[str, ContainerState] = {}
        self.stats = ReplayStats()

    def _container(self, key: str, timestamp: float) -> ContainerState:
        container = self._containers.get(key)
        if container is None:
            cluster = self.core.cluster
            pod_id = PodId(REPLAY_NAMESPACE, key)
            cluster.add_or_update_vpa(VpaView(namespace=REPLAY_NAMESPACE, name=key), _KeyMatcher(key))
            cluster.add_or_update_pod(pod_id, {KEY_LABEL: key}, "Running", timestamp)
            container_id = ContainerId(pod_id, key)
            cluster.add_or_update_container(container_id, Resources(), timestamp)
            container = cluster.container_state(container_id)
            self._containers[key] = container
        return container

    def apply(self, timestamp: float, key: str, cpu_cores: float | None, memory_bytes: int | None,
              oom: bool) -> None:
        self.core.cluster.maybe_garbage_collect(timestamp)
        container = self._container(key, timestamp)
        stats = self.stats
        stats.rows += 1
        if cpu_cores is not None:
            if container.add_cpu_sample(cpu_amount_from_cores(cpu_cores), timestamp):
                stats.cpu_samples += 1
            else:
                stats.discarded += 1
        if oom:
            try:
                container.record_oom(timestamp, memory_bytes if memory_bytes is not None else 0)
                stats.ooms += 1
            except OomRejected:
                stats.discarded += 1
        elif memory_bytes is not None:
            if container.add_memory_sample(memory_bytes, timestamp):
                stats.memory_samples += 1
            else:
                stats.discarded += 1

    def recommendations(self, now: float) -> list[RecommendedContainerResources]:
        """Recommendations of every key that has one at `now`, sorted by key. The hourly garbage
        collection catches up first, as the live loop would have run it in the meantime."""
        self.core.cluster.maybe_garbage_collect(now)
        result: list[RecommendedContainerResources] = []
        for key in sorted(self._containers):
            result.extend(self.core.recommend(REPLAY_NAMESPACE, key).containers)
        return result


def series_times(first: float, at: float, every_s: float) -> list[float]:
    """`first + every, first + 2·every, …` up to and including `at`."""
    times = []
    step = 1
    while first + step * every_s <= at:
        times.append(first + step * every_s)
        step += 1
    return times


@dataclass(frozen=True, slots=True)
class ReplayResult:
    at: float | None
    containers: list[RecommendedContainerResources]
    series: list[tuple[float, list[RecommendedContainerResources]]] | None
    stats: ReplayStats


def replay(trace: Trace, config: RecommenderConfig, at: float | None = None,
           every_s: float | None = None, recommender: str = DEFAULT_RECOMMENDER_NAME) -> ReplayResult:
    """Apply every row with timestamp ≤ `at` (default: the last row's) and recommend at `at`; with
    `every_s`, also recommend after each step of that length from the first row's time. `recommender`
    names the built-in algorithm (`vpa.logic.cost_aware.BUILTIN_RECOMMENDERS`)."""
    replayer = Replayer(config, recommender)
    if len(trace) == 0:
        return ReplayResult(at, [], [] if every_s is not None else None, replayer.stats)
    if at is None:
        at = trace.timestamps[-1]
    pending = iter(series_times(trace.timestamps[0], at, every_s) if every_s is not None else ())
    next_point = next(pending, None)
    series: list[tuple[float, list[RecommendedContainerResources]]] = []
    ts, keys, cpu, memory, oom = (trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes,
                                  trace.oom)
    for index in range(len(ts)):
        timestamp = ts[index]
        if timestamp > at:
            break
        while next_point is not None and next_point < timestamp:
            series.append((next_point, replayer.recommendations(next_point)))
            next_point = next(pending, None)
        replayer.apply(timestamp, keys[index], cpu[index], memory[index], oom[index])
    while next_point is not None:
        series.append((next_point, replayer.recommendations(next_point)))
        next_point = next(pending, None)
    return ReplayResult(at, replayer.recommendations(at), series if every_s is not None else None,
                        replayer.stats)


# --- output ---------------------------------------------------------------------------------------------


def resource_list(resources: Resources) -> dict[str, str]:
    """Kubernetes quantity strings as upstream writes them: CPU in millicores, memory as BinarySI."""
    return resources.to_resource_list()


def container_json(item: RecommendedContainerResources) -> dict[str, object]:
    return {
        "container": item.container_name,
        "target": resource_list(item.target),
        "lowerBound": resource_list(item.lower_bound),
        "upperBound": resource_list(item.upper_bound),
        "uncappedTarget": resource_list(item.uncapped_target),
    }


def result_json(result: ReplayResult) -> dict[str, object]:
    out: dict[str, object] = {"containers": [container_json(item) for item in result.containers]}
    if result.series is not None:
        out["series"] = [{"time": _json_time(time), "containers": [container_json(item) for item in items]}
                         for time, items in result.series]
    return out


def _json_time(value: float) -> float | int:
    return int(value) if value == int(value) else value


def render_table(result: ReplayResult) -> str:
    header = ("CONTAINER", "TARGET CPU", "TARGET MEMORY", "LOWER CPU", "LOWER MEMORY", "UPPER CPU",
              "UPPER MEMORY", "UNCAPPED CPU", "UNCAPPED MEMORY")
    rows: list[tuple[str, ...]] = [header]
    for item in result.containers:
        cells = [item.container_name]
        for resources in (item.target, item.lower_bound, item.upper_bound, item.uncapped_target):
            listed = resource_list(resources)
            cells.append(listed.get("cpu", "-"))
            cells.append(listed.get("memory", "-"))
        rows.append(tuple(cells))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    stats = result.stats
    lines.append("")
    lines.append(f"at {_json_time(result.at) if result.at is not None else '-'}: {stats.rows} rows, "
                 f"{stats.cpu_samples} CPU samples, {stats.memory_samples} memory samples, "
                 f"{stats.ooms} OOMs, {stats.discarded} discarded")
    return "\n".join(lines) + "\n"


def run(settings: ReplaySettings, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """The `vpa replay` command: 0 on success, 1 when the trace cannot be read."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if settings.list_recommenders:
        out.write("".join(f"{name}\n" for name in BUILTIN_RECOMMENDERS))
        return 0
    try:
        trace = read_trace(settings.trace_path)
    except (TraceError, OSError, UnicodeDecodeError) as error:
        err.write(f"vpa replay: {error}\n")
        return 1
    config = RecommenderConfig.from_settings(settings.recommender,
                                             per_vpa_config=settings.feature_gates.per_vpa_config)
    if settings.evaluate:
        from vpa import evaluate  # only evaluations load the scorer and the report renderers

        return evaluate.run(trace, settings, config, out)
    result = replay(trace, config, at=settings.at, every_s=settings.every_s,
                    recommender=settings.algorithm or DEFAULT_RECOMMENDER_NAME)
    if settings.output == "table":
        out.write(render_table(result))
    else:
        out.write(orjson.dumps(result_json(result), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def iter_rows(trace: Trace) -> Iterator[tuple[float, str, float | None, int | None, bool]]:
    """Rows as tuples (for tools and tests)."""
    return zip(trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes, trace.oom,
               strict=True)


