"""`vpa replay`'s input: a usage trace (the format is `TRACE_FORMAT`) read from CSV, or from Parquet
through pyarrow (imported only for Parquet files), into columns in timestamp order (file order on ties):
`read_trace`, which the replay and the evaluator both read with.

Must not: replay anything or render output (`vpa.replay.replaying` does), talk to a cluster, or read the
wall clock.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from vpa.model.quantity import Quantity, QuantityError
from vpa.model.resources import Resources
from vpa.model.settings import REPLAY_TRACE_FORMAT

TRACE_FORMAT: Final = REPLAY_TRACE_FORMAT
"""The trace format, as `vpa replay --help` and the README state it."""

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
    cpu_request_millicores: list[int | None] = field(default_factory=list)
    """Per row, when the trace has a `cpu_request` column (else empty)."""
    memory_request_bytes: list[int | None] = field(default_factory=list)
    """Per row, when the trace has a `memory_request` column (else empty)."""

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def has_requests(self) -> bool:
        return bool(self.cpu_request_millicores or self.memory_request_bytes)

    def requests_at(self, at: float) -> dict[str, Resources]:
        """Each key's last requests given at or before `at` (keys without any are left out)."""
        out: dict[str, Resources] = {}
        cpu_column, memory_column = self.cpu_request_millicores, self.memory_request_bytes
        for index, timestamp in enumerate(self.timestamps):
            if timestamp > at:
                break
            cpu = cpu_column[index] if cpu_column else None
            memory = memory_column[index] if memory_column else None
            if cpu is None and memory is None:
                continue
            key = self.containers[index]
            previous = out.get(key, Resources())
            out[key] = Resources(cpu if cpu is not None else previous.cpu_millicores,
                                 memory if memory is not None else previous.memory_bytes)
        return out


# --- reading --------------------------------------------------------------------------------------------

_EMPTY: Final = frozenset({"", "nan", "null", "none"})
USAGE_COLUMNS: Final = ("cpu_cores", "memory_bytes")
REQUEST_COLUMNS: Final = ("cpu_request", "memory_request")


def _is_empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and value.strip().lower() in _EMPTY


def parse_timestamp(value: object, what: str) -> float:
    """Unix seconds (a number or numeric text) or an ISO-8601 time (text or a datetime; naive means UTC)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, bool):
        raise TraceError(f"{what}: {value!r} is not a time")
    elif isinstance(value, int | float):
        if not math.isfinite(value):
            raise TraceError(f"{what}: {value!r} is not a time")
        return float(value)
    else:
        text = str(value).strip()
        if not text:
            raise TraceError(f"{what}: empty")
        try:
            number = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text)
            except ValueError:
                raise TraceError(f"{what}: {text!r} is neither Unix seconds nor an ISO-8601 time "
                                 "(2026-01-01T00:00:00Z)") from None
        else:
            if not math.isfinite(number):
                raise TraceError(f"{what}: {text!r} is not a time")
            return number
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _amount(value: object, what: str, *, cpu: bool) -> float | None:
    """A non-negative amount: a plain number (cores or bytes) or a Kubernetes quantity (`250m`, `100Mi`)."""
    if _is_empty(value):
        return None
    if isinstance(value, bool):
        raise TraceError(f"{what}: {value!r} is not a number")
    if isinstance(value, int | float):
        number = float(value)
    else:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            try:
                number = float(Quantity.parse(text).as_fraction())
            except QuantityError:
                example = "0.25 or 250m" if cpu else "104857600 or 100Mi"
                raise TraceError(f"{what}: {text!r} is not a number or a quantity (e.g. {example})") from None
    if not math.isfinite(number):
        raise TraceError(f"{what}: {value!r} is not a finite number")
    if number < 0:
        raise TraceError(f"{what}: {value!r} is negative")
    return number


def _bytes(value: object, what: str) -> int | None:
    amount = _amount(value, what, cpu=False)
    return None if amount is None else int(amount)


def _millicores(value: object, what: str) -> int | None:
    """Requests as whole millicores, rounded up as `Quantity.MilliValue` does."""
    amount = _amount(value, what, cpu=True)
    return None if amount is None else math.ceil(round(amount * 1000, 6))


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


def _check_columns(source: str, columns: Collection[str]) -> None:
    for required in ("timestamp", "container"):
        if required not in columns:
            raise TraceError(f"{source}: missing column {required!r} (have {sorted(columns)})")
    if not any(column in columns for column in USAGE_COLUMNS):
        raise TraceError(f"{source}: no usage column: need cpu_cores and/or memory_bytes "
                         f"(have {sorted(columns)})")


class _Columns:
    """Builds a `Trace` row by row from any source of cells (CSV text or Parquet values)."""

    def __init__(self, columns: Collection[str]) -> None:
        self.trace = Trace([], [], [], [], [])
        self.with_cpu_request = "cpu_request" in columns
        self.with_memory_request = "memory_request" in columns

    def add(self, where: str, row: Mapping[str, object]) -> None:
        trace = self.trace
        key = row.get("container")
        key_text = "" if _is_empty(key) else str(key).strip()
        if not key_text:
            raise TraceError(f"{where} container: empty")
        timestamp = row.get("timestamp")
        if _is_empty(timestamp):
            raise TraceError(f"{where} timestamp: empty")
        trace.timestamps.append(parse_timestamp(timestamp, f"{where} timestamp"))
        trace.containers.append(key_text)
        trace.cpu_cores.append(_amount(row.get("cpu_cores"), f"{where} cpu_cores", cpu=True))
        trace.memory_bytes.append(_bytes(row.get("memory_bytes"), f"{where} memory_bytes"))
        trace.oom.append(_parse_bool(row.get("oom"), f"{where} oom"))
        if self.with_cpu_request:
            trace.cpu_request_millicores.append(_millicores(row.get("cpu_request"), f"{where} cpu_request"))
        if self.with_memory_request:
            trace.memory_request_bytes.append(_bytes(row.get("memory_request"), f"{where} memory_request"))


def read_csv(path: Path) -> Trace:
    line = 1
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = [name.strip() for name in reader.fieldnames or ()]
            reader.fieldnames = columns
            _check_columns(str(path), columns)
            builder = _Columns(columns)
            for line, row in enumerate(reader, start=2):
                builder.add(f"{path}:{line}", row)
    except UnicodeDecodeError as err:
        # The decoder reads ahead, so the row is the one after the last good one, as far as it is known.
        raise TraceError(f"{path}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x}): a trace is "
                         "CSV with a header row, or Parquet (.parquet)") from None
    except csv.Error as err:
        raise TraceError(f"{path}:{line}: not CSV ({err}): a trace is CSV with a header row, or Parquet "
                         "(.parquet)") from None
    return builder.trace


def read_parquet(path: Path) -> Trace:
    try:
        import pyarrow.parquet as pq  # only Parquet traces need pyarrow
    except ImportError:
        raise TraceError(f"{path}: reading Parquet needs pyarrow (pip install 'vpa[parquet]')") from None
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several unrelated types for unreadable files
        raise TraceError(f"{path}: cannot read Parquet: {err}") from None
    names = list(table.column_names)
    _check_columns(str(path), names)
    columns = {name: table.column(name).to_pylist() for name in names}
    builder = _Columns(names)
    for index in range(table.num_rows):
        builder.add(f"{path} row {index}", {name: values[index] for name, values in columns.items()})
    return builder.trace


def read_trace(path: str | Path) -> Trace:
    """Read a CSV or Parquet trace (by extension; `.parquet`/`.pq` are Parquet) in replay order.

    The format is `TRACE_FORMAT`; any violation raises `TraceError` naming the file, the row and the
    column. An empty trace, or one without a single usage sample, is an error too.
    """
    path = Path(path)
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    trace = read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else read_csv(path)
    if len(trace) == 0:
        raise TraceError(f"{path}: no rows after the header")
    if all(cpu is None for cpu in trace.cpu_cores) and all(m is None for m in trace.memory_bytes):
        raise TraceError(f"{path}: no usage sample: every cpu_cores and memory_bytes cell is empty")
    return _in_time_order(trace)


def _in_time_order(trace: Trace) -> Trace:
    ts = trace.timestamps
    if all(ts[i] <= ts[i + 1] for i in range(len(ts) - 1)):
        return trace
    order = sorted(range(len(ts)), key=ts.__getitem__)  # stable: file order on ties

    def pick(column: list[Any]) -> list[Any]:
        return [column[i] for i in order] if column else []

    return Trace(pick(ts), pick(trace.containers), pick(trace.cpu_cores), pick(trace.memory_bytes),
                 pick(trace.oom), pick(trace.cpu_request_millicores), pick(trace.memory_request_bytes))


def iter_rows(trace: Trace) -> Iterator[tuple[float, str, float | None, int | None, bool]]:
    """Rows as tuples (for tools and tests)."""
    return zip(trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes, trace.oom,
               strict=True)
