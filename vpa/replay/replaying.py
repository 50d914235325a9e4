"""`vpa replay`: the recommender's own logic run offline over a usage trace (DESIGN §8).

Owns: applying a trace's rows (read by `vpa.replay.traces.read_trace`, also the evaluator's reader) in
timestamp order (file order on ties) to a `RecommenderCore`, each trace key being one single-container pod
under its own VPA; CPU cores truncated to whole millicores as upstream's `CPUAmountFromCores` does; `oom` rows
recorded as OOM kills whose `memory_bytes` is the request; the hourly aggregate garbage collection the live
loop runs, on trace time; the built-in algorithm chosen by name (`--recommender`, `--list-recommenders`;
`--evaluate` hands over to `vpa.replay.evaluating`); and the output — JSON or YAML (`{"containers": [...],
"series": [...]}` with Kubernetes quantity strings as the VPA status has them), CSV (one row per time and
container, plain cores and bytes) or a readable table (ISO-8601 times, memory in Ki/Mi/Gi), each with the
current requests and the difference when the trace carries requests.

Must not: talk to a cluster, read the wall clock, or use anything of the recommender other than
`vpa.logic` — replay answers exactly what the live recommender would for the same samples.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, TextIO

import orjson
import yaml

from vpa.logic.recommender.aggregation import ContainerState, OomRejected
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.cost_aware import BUILTIN_RECOMMENDERS, pod_recommender_for
from vpa.logic.recommender.estimation import PodRecommender
from vpa.logic.recommender.numerics import cpu_amount_from_cores
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.model.resources import Resources
from vpa.model.settings import ReplaySettings
from vpa.model.vpa import DEFAULT_RECOMMENDER_NAME, RecommendedContainerResources, VpaView
from vpa.replay.traces import Trace, TraceError, read_trace

REPLAY_NAMESPACE: Final = "replay"
KEY_LABEL: Final = "vpa-replay/key"


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

    def __init__(self, config: RecommenderConfig, recommender: str = DEFAULT_RECOMMENDER_NAME,
                 algorithm: PodRecommender | None = None) -> None:
        """`algorithm`, when given, replaces the built-in one `recommender` names (parameter studies)."""
        self.core = RecommenderCore(config, algorithm if algorithm is not None
                                    else pod_recommender_for(recommender, config.estimation))
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
    requests: dict[str, Resources] = field(default_factory=dict)
    """Each key's current requests at `at`, when the trace carries them."""
    series_requests: list[dict[str, Resources]] = field(default_factory=list)
    """The same at each series point (parallel to `series`)."""


def replay(trace: Trace, config: RecommenderConfig, at: float | None = None,
           every_s: float | None = None, recommender: str = DEFAULT_RECOMMENDER_NAME) -> ReplayResult:
    """Apply every row with timestamp ≤ `at` (default: the last row's) and recommend at `at`; with
    `every_s`, also recommend after each step of that length from the first row's time. `recommender`
    names the built-in algorithm (`vpa.logic.recommender.cost_aware.BUILTIN_RECOMMENDERS`)."""
    replayer = Replayer(config, recommender)
    if len(trace) == 0:
        return ReplayResult(at, [], [] if every_s is not None else None, replayer.stats)
    if at is None:
        at = trace.timestamps[-1]
    pending = iter(series_times(trace.timestamps[0], at, every_s) if every_s is not None else ())
    next_point = next(pending, None)
    series: list[tuple[float, list[RecommendedContainerResources]]] = []
    series_requests: list[dict[str, Resources]] = []
    requests: dict[str, Resources] = {}
    ts, keys, cpu, memory, oom = (trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes,
                                  trace.oom)
    cpu_requests, memory_requests = trace.cpu_request_millicores, trace.memory_request_bytes
    for index in range(len(ts)):
        timestamp = ts[index]
        if timestamp > at:
            break
        while next_point is not None and next_point < timestamp:
            series.append((next_point, replayer.recommendations(next_point)))
            series_requests.append(dict(requests))
            next_point = next(pending, None)
        replayer.apply(timestamp, keys[index], cpu[index], memory[index], oom[index])
        cpu_request = cpu_requests[index] if cpu_requests else None
        memory_request = memory_requests[index] if memory_requests else None
        if cpu_request is not None or memory_request is not None:
            previous = requests.get(keys[index], Resources())
            requests[keys[index]] = Resources(
                cpu_request if cpu_request is not None else previous.cpu_millicores,
                memory_request if memory_request is not None else previous.memory_bytes,
            )
    while next_point is not None:
        series.append((next_point, replayer.recommendations(next_point)))
        series_requests.append(dict(requests))
        next_point = next(pending, None)
    return ReplayResult(at, replayer.recommendations(at), series if every_s is not None else None,
                        replayer.stats, requests, series_requests)


# --- output ---------------------------------------------------------------------------------------------


def resource_list(resources: Resources) -> dict[str, str]:
    """Kubernetes quantity strings as upstream writes them: CPU in millicores, memory as BinarySI."""
    return resources.to_resource_list()


def _difference(target: Resources, request: Resources) -> Resources:
    """Target minus request per resource known on both sides (negative: the request is larger)."""
    cpu = (target.cpu_millicores - request.cpu_millicores
           if target.cpu_millicores is not None and request.cpu_millicores is not None else None)
    memory = (target.memory_bytes - request.memory_bytes
              if target.memory_bytes is not None and request.memory_bytes is not None else None)
    return Resources(cpu, memory)


def _signed_list(resources: Resources) -> dict[str, str]:
    """`resource_list` for a difference, which may be negative: `-150m`, `-64Mi`."""
    out: dict[str, str] = {}
    for name, value in (("cpu", resources.cpu_millicores), ("memory", resources.memory_bytes)):
        if value is None:
            continue
        magnitude = Resources(abs(value), None) if name == "cpu" else Resources(None, abs(value))
        text = magnitude.to_resource_list()[name]
        out[name] = f"-{text}" if value < 0 else text
    return out


def container_json(item: RecommendedContainerResources,
                   request: Resources | None = None) -> dict[str, object]:
    out: dict[str, object] = {
        "container": item.container_name,
        "target": resource_list(item.target),
        "lowerBound": resource_list(item.lower_bound),
        "upperBound": resource_list(item.upper_bound),
        "uncappedTarget": resource_list(item.uncapped_target),
    }
    if request is not None:
        out["requests"] = resource_list(request)
        out["targetMinusRequests"] = _signed_list(_difference(item.target, request))
    return out


def _containers_json(items: list[RecommendedContainerResources],
                     requests: Mapping[str, Resources]) -> list[dict[str, object]]:
    return [container_json(item, requests.get(item.container_name)) for item in items]


def result_json(result: ReplayResult) -> dict[str, object]:
    out: dict[str, object] = {"containers": _containers_json(result.containers, result.requests)}
    if result.series is not None:
        per_point = result.series_requests or [{}] * len(result.series)
        out["series"] = [{"time": _json_time(time), "containers": _containers_json(items, requests)}
                         for (time, items), requests in zip(result.series, per_point, strict=True)]
    return out


def _json_time(value: float) -> float | int:
    return int(value) if value == int(value) else value


def iso_time(value: float) -> str:
    """`2026-01-01T00:00:00Z` (fractions of a second only when there are any)."""
    moment = datetime.fromtimestamp(value, tz=UTC)
    text = moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")


_BINARY_UNITS: Final = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
                        ("Ki", 1 << 10))


def human_memory(value: int | None) -> str:
    """Bytes for a reader: `250Mi`, `1.15Gi`, `-64Mi`, `512` (three significant digits at most)."""
    if value is None:
        return "-"
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    for suffix, size in _BINARY_UNITS:
        if magnitude >= size:
            amount = magnitude / size
            digits = 0 if amount >= 100 else 1 if amount >= 10 else 2
            text = f"{amount:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{amount:.0f}"
            return f"{sign}{text}{suffix}"
    return f"{sign}{magnitude}"


def human_cpu(millicores: int | None) -> str:
    """Millicores as kubectl prints them: `250m`, `1500m`, whole cores as `2`, `-150m`."""
    if millicores is None:
        return "-"
    if millicores != 0 and millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m" if millicores else "0"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def _table_rows(items: list[RecommendedContainerResources], requests: Mapping[str, Resources],
                with_requests: bool, time: str | None) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for item in items:
        cells = [time] if time is not None else []
        cells.append(item.container_name)
        if with_requests:
            request = requests.get(item.container_name, Resources())
            difference = _difference(item.target, request)
            cells += [human_cpu(request.cpu_millicores), human_memory(request.memory_bytes)]
        for resources in (item.target, item.lower_bound, item.upper_bound):
            cells += [human_cpu(resources.cpu_millicores), human_memory(resources.memory_bytes)]
        if with_requests:
            cells += [_plus(human_cpu(difference.cpu_millicores)),
                      _plus(human_memory(difference.memory_bytes))]
        rows.append(tuple(cells))
    return rows


def _plus(text: str) -> str:
    return text if text.startswith("-") or text == "-" or text in ("0", "0m") else f"+{text}"


def render_table(result: ReplayResult) -> str:
    """The recommendation at `at` (and the series before it with `--every`), for a terminal."""
    with_requests = bool(result.requests) or any(result.series_requests)
    header: tuple[str, ...] = ("CONTAINER",)
    if with_requests:
        header += ("REQUEST CPU", "REQUEST MEMORY")
    header += ("TARGET CPU", "TARGET MEMORY", "LOWER CPU", "LOWER MEMORY", "UPPER CPU", "UPPER MEMORY")
    if with_requests:
        header += ("TARGET-REQUEST CPU", "TARGET-REQUEST MEMORY")
    lines: list[str] = []
    if result.series is not None:
        per_point = result.series_requests or [{}] * len(result.series)
        rows = [row for (time, items), requests in zip(result.series, per_point, strict=True)
                for row in _table_rows(items, requests, with_requests, iso_time(time))]
        lines += _table(("TIME", *header), rows) if rows else ["(no recommendation at any series time)"]
        lines.append("")
    at = iso_time(result.at) if result.at is not None else "-"
    lines.append(f"at {at}:")
    rows = _table_rows(result.containers, result.requests, with_requests, None)
    lines += _table(header, rows) if rows else ["(no recommendation: no container has a CPU sample)"]
    stats = result.stats
    lines.append("")
    lines.append(f"{stats.rows} rows, {stats.cpu_samples} CPU samples, {stats.memory_samples} memory "
                 f"samples, {stats.ooms} OOMs, {stats.discarded} discarded")
    return "\n".join(lines) + "\n"


CSV_COLUMNS: Final = ("time", "container", "target_cpu_cores", "target_memory_bytes", "lower_cpu_cores",
                      "lower_memory_bytes", "upper_cpu_cores", "upper_memory_bytes", "uncapped_cpu_cores",
                      "uncapped_memory_bytes", "request_cpu_cores", "request_memory_bytes")


def _cores(millicores: int | None) -> str:
    return "" if millicores is None else f"{millicores / 1000:g}"


def _count(value: int | None) -> str:
    return "" if value is None else str(value)


def render_csv(result: ReplayResult) -> str:
    """One row per (time, container): the series points, then `at`; plain cores and bytes; ISO times."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    points: list[tuple[float, list[RecommendedContainerResources], Mapping[str, Resources]]] = []
    if result.series is not None:
        per_point = result.series_requests or [{}] * len(result.series)
        points += [(time, items, requests)
                   for (time, items), requests in zip(result.series, per_point, strict=True)]
    if result.at is not None and not (points and points[-1][0] == result.at):
        points.append((result.at, result.containers, result.requests))
    for time, items, requests in points:
        for item in items:
            request = requests.get(item.container_name, Resources())
            cells = [iso_time(time), item.container_name]
            for resources in (item.target, item.lower_bound, item.upper_bound, item.uncapped_target, request):
                cells += [_cores(resources.cpu_millicores), _count(resources.memory_bytes)]
            writer.writerow(cells)
    return out.getvalue()


def render(result: ReplayResult, output: str) -> str:
    if output == "table":
        return render_table(result)
    if output == "csv":
        return render_csv(result)
    if output == "yaml":
        return yaml.safe_dump(result_json(result), sort_keys=False)
    return orjson.dumps(result_json(result), option=orjson.OPT_INDENT_2).decode() + "\n"


def run(settings: ReplaySettings, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """The `vpa replay` command: 0 on success, 2 for a trace that is missing or malformed (bad input, as a
    bad flag) or `--at` before it, 1 when the file exists but cannot be read (permissions, I/O)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if settings.list_recommenders:
        out.write("".join(f"{name}\n" for name in BUILTIN_RECOMMENDERS))
        return 0
    try:
        trace = read_trace(settings.trace_path)
    except TraceError as error:
        err.write(f"vpa replay: {error}\n")
        return 2
    except OSError as error:
        err.write(f"vpa replay: {settings.trace_path}: cannot read: {error.strerror or error}\n")
        return 1
    first = trace.timestamps[0]
    if settings.at is not None and settings.at < first:
        err.write(f"vpa replay: --at {iso_time(settings.at)} is before the trace's first sample "
                  f"({iso_time(first)})\n")
        return 2
    config = RecommenderConfig.from_settings(settings.recommender,
                                             per_vpa_config=settings.feature_gates.per_vpa_config)
    if settings.evaluate:
        from vpa.replay import evaluating  # only evaluations load the scorer and the report renderers

        return evaluating.run(trace, settings, config, out)
    result = replay(trace, config, at=settings.at, every_s=settings.every_s,
                    recommender=settings.algorithm or DEFAULT_RECOMMENDER_NAME)
    out.write(render(result, settings.output))
    return 0
