"""Usage profiles: what a simulated container uses (CPU millicores, memory bytes) at a given virtual time.

Owns: the profile kinds, their JSON form, the pod annotation that carries them, and replay of CSV/Parquet
usage traces. Every profile is a pure, deterministic function of (time, pod start, container start); the
optional `noise` is derived from a hash of (seed, time bucket), never from a global random state.

Annotation `sim.vpa.dev/usage` on a pod (or on a workload's pod template, which copies it to its pods):

    {"<container name>": {"cpu": PROFILE, "memory": PROFILE}}      # either key may be omitted
    {"<container name>": {"trace": {"path": ..., "key": ...}}}       # both resources from one trace key

PROFILE is one of (amounts are Kubernetes quantities, as strings, or plain numbers in cores / bytes; a bare
amount, `"cpu": "500m"`, is the constant profile):

    {"type": "constant", "value": "250m"}
    {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14}     # sinusoid over 24 h (UTC)
    {"type": "spikes", "base": "100m", "height": "900m", "period_s": 600, "duration_s": 60, "offset_s": 0}
    {"type": "trend", "start": "100Mi", "per_hour": "10Mi", "min": "0", "max": "4Gi"}  # from pod start
    {"type": "leak", "start": "100Mi", "per_hour": "50Mi"}          # from container start: resets on restart
    {"type": "trace", "path": "usage.parquet", "key": "vm-17", "mode": "relative", "loop": true}
        # or "keys": ["vm-1", "vm-3"] / "key": "*": each pod picks one key by a hash of its name

Any PROFILE may add `"noise": 0.1, "seed": 7` (± 10 % deterministic jitter per 15 s bucket). A trace file has
the columns of DESIGN §8: `timestamp` (Unix seconds), `container` (key), `cpu_cores`, `memory_bytes`; rows
of one key are replayed as a step function, relative to the pod's start (`mode: relative`, the default) or
at their absolute timestamps (`absolute`), looping at the end (`loop`, default true).

Containers without a profile use `default_profile`: a constant fraction of their requests (or limits).

Must not: read the clock, the store or the environment; the only I/O is reading a trace file, once per path.
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from vpa.model.quantity import Quantity, QuantityError

ANNOTATION: Final = "sim.vpa.dev/usage"
CPU: Final = "cpu"
MEMORY: Final = "memory"
HOUR: Final = 3600.0
DAY: Final = 86400.0


class ProfileError(ValueError):
    """A profile spec that cannot be used; the message names the container, resource and field."""


class Profile(Protocol):
    """Usage of one resource of one container: millicores for CPU, bytes for memory (never negative)."""

    def value(self, t: float, pod_start: float, container_start: float) -> float: ...

    def upper_bound(self) -> float:
        """An upper bound of `value` over all time (inf when unbounded)."""
        ...


def _amount(resource: str, raw: object, what: str) -> float:
    """Parse an amount: CPU in millicores, memory in bytes; numbers are cores / bytes."""
    if isinstance(raw, bool) or raw is None:
        raise ProfileError(f"{what}: expected a quantity, got {raw!r}")
    try:
        if isinstance(raw, int | float):
            return float(raw) * (1000.0 if resource == CPU else 1.0)
        q = Quantity.parse(str(raw))
    except QuantityError as err:
        raise ProfileError(f"{what}: {err}") from err
    frac = q.as_fraction() * (1000 if resource == CPU else 1)
    return float(frac)


@dataclass(frozen=True, slots=True)
class Constant:
    amount: float

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        return self.amount

    def upper_bound(self) -> float:
        return self.amount


@dataclass(frozen=True, slots=True)
class DailyCycle:
    """base + amplitude·cos(2π(hour − peak_hour)/24): peak at `peak_hour` UTC, trough 12 h later."""

    base: float
    amplitude: float
    peak_hour: float

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        hours = (t % DAY) / HOUR
        return max(0.0, self.base + self.amplitude * math.cos(2 * math.pi * (hours - self.peak_hour) / 24.0))

    def upper_bound(self) -> float:
        return self.base + abs(self.amplitude)


@dataclass(frozen=True, slots=True)
class Spikes:
    """`base`, plus `height` during the first `duration_s` of every `period_s` (phase `offset_s`)."""

    base: float
    height: float
    period_s: float
    duration_s: float
    offset_s: float = 0.0

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        phase = (t - self.offset_s) % self.period_s
        return max(0.0, self.base + (self.height if phase < self.duration_s else 0.0))

    def upper_bound(self) -> float:
        return self.base + max(0.0, self.height)


@dataclass(frozen=True, slots=True)
class Trend:
    """start + per_hour·hours since the pod started, clamped to [min, max]."""

    start: float
    per_hour: float
    minimum: float = 0.0
    maximum: float = math.inf

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        raw = self.start + self.per_hour * max(0.0, t - pod_start) / HOUR
        return min(self.maximum, max(self.minimum, raw))

    def upper_bound(self) -> float:
        return self.maximum if self.per_hour > 0 else max(self.start, self.minimum)


@dataclass(frozen=True, slots=True)
class Leak:
    """start + per_hour·hours since the container (re)started: a restart frees the leaked memory."""

    start: float
    per_hour: float

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        return max(0.0, self.start + self.per_hour * max(0.0, t - container_start) / HOUR)

    def upper_bound(self) -> float:
        return math.inf if self.per_hour > 0 else self.start

    def crossing(self, threshold: float, container_start: float) -> float | None:
        """First time the usage exceeds `threshold` (closed form), or None if never."""
        if self.start > threshold:
            return container_start
        if self.per_hour <= 0:
            return None
        return container_start + (threshold - self.start) / self.per_hour * HOUR


@dataclass(frozen=True, slots=True)
class Noisy:
    """Deterministic multiplicative jitter: value·(1 + noise·u), u ∈ [-1, 1) from hash(seed, 15 s bucket)."""

    inner: Profile
    noise: float
    seed: int

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        bucket = int(t // 15)
        digest = hashlib.blake2b(f"{self.seed}:{bucket}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**63 - 1.0
        return max(0.0, self.inner.value(t, pod_start, container_start) * (1.0 + self.noise * u))

    def upper_bound(self) -> float:
        return self.inner.upper_bound() * (1.0 + abs(self.noise))


@dataclass(frozen=True, slots=True)
class TraceSeries:
    """One key's samples of one resource, sorted by time (step function)."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    step_s: float


@dataclass(frozen=True, slots=True)
class Trace:
    series: TraceSeries
    relative: bool = True
    loop: bool = True

    def value(self, t: float, pod_start: float, container_start: float) -> float:
        times, values = self.series.times, self.series.values
        if not times:
            return 0.0
        first = times[0]
        span = times[-1] - first + self.series.step_s
        at = first + (t - pod_start) if self.relative else t
        if self.loop and span > 0:
            at = first + (at - first) % span
        if at < first:
            return values[0]
        index = bisect.bisect_right(times, at) - 1
        return values[max(0, min(index, len(values) - 1))]

    def upper_bound(self) -> float:
        return max(self.series.values, default=0.0)


@dataclass
class TraceCache:
    """Trace files read once per path: {path: {key: {resource: TraceSeries}}}."""

    base_dir: Path | None = None
    _files: dict[str, dict[str, dict[str, TraceSeries]]] = field(default_factory=dict)

    def _load(self, path: str) -> dict[str, dict[str, TraceSeries]]:
        full = Path(path)
        if not full.is_absolute() and self.base_dir is not None:
            full = self.base_dir / full
        loaded = self._files.get(str(full))
        if loaded is None:
            loaded = _load_trace(full)
            self._files[str(full)] = loaded
        return loaded

    def keys(self, path: str) -> list[str]:
        return sorted(self._load(path))

    def series(self, path: str, key: str, resource: str) -> TraceSeries:
        loaded = self._load(path)
        by_resource = loaded.get(key)
        if by_resource is None:
            raise ProfileError(f"trace {path}: no rows for container key {key!r}")
        return by_resource.get(resource) or TraceSeries((), (), 0.0)


def _load_trace(path: Path) -> dict[str, dict[str, TraceSeries]]:
    rows: list[tuple[float, str, float | None, float | None]] = []
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as err:  # pragma: no cover - pyarrow is a dev/parquet extra
            raise ProfileError(f"trace {path}: reading Parquet needs pyarrow") from err
        table = pq.read_table(str(path), columns=["timestamp", "container", "cpu_cores", "memory_bytes"])
        data = table.to_pydict()
        for ts, key, cpu, mem in zip(
            data["timestamp"], data["container"], data["cpu_cores"], data["memory_bytes"], strict=True
        ):
            rows.append(
                (
                    float(ts),
                    str(key),
                    None if cpu is None else float(cpu),
                    None if mem is None else float(mem),
                )
            )
    else:
        try:
            with path.open(newline="") as handle:
                for rec in csv.DictReader(handle):
                    cpu = rec.get("cpu_cores") or ""
                    mem = rec.get("memory_bytes") or ""
                    rows.append(
                        (
                            float(rec["timestamp"]),
                            str(rec["container"]),
                            float(cpu) if cpu.strip() else None,
                            float(mem) if mem.strip() else None,
                        )
                    )
        except (OSError, KeyError, ValueError) as err:
            raise ProfileError(f"trace {path}: {err}") from err
    grouped: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for ts, key, cpu, mem in sorted(rows, key=lambda r: r[0]):
        per = grouped.setdefault(key, {CPU: [], MEMORY: []})
        if cpu is not None:
            per[CPU].append((ts, cpu * 1000.0))
        if mem is not None:
            per[MEMORY].append((ts, mem))
    out: dict[str, dict[str, TraceSeries]] = {}
    for key, per in grouped.items():
        out[key] = {}
        for resource, samples in per.items():
            times = tuple(s[0] for s in samples)
            diffs = [b - a for a, b in itertools.pairwise(times) if b > a]
            step = min(diffs) if diffs else 0.0
            out[key][resource] = TraceSeries(times, tuple(s[1] for s in samples), step)
    return out


def pick_key(choices: list[str], seed: str) -> str:
    """A deterministic choice among trace keys for one container (`seed`: namespace/pod/container)."""
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    return choices[int.from_bytes(digest, "big") % len(choices)]


def parse_profile(
    resource: str, spec: Mapping[str, Any] | str | float, what: str, traces: TraceCache | None = None,
    seed: str = "",
) -> Profile:
    """Build a profile from its JSON form; raises ProfileError naming `what` (container/resource).

    A trace profile names its key (`"key": "vm-17"`), a list to pick from (`"keys": [...]`) or every key in
    the file (`"key": "*"`); a pick is a hash of `seed`, so each pod of a Deployment replays its own key."""
    if isinstance(spec, str | int | float) and not isinstance(spec, bool):
        return Constant(_amount(resource, spec, what))  # the short form: `"cpu": "500m"` is a constant
    if not isinstance(spec, Mapping):
        raise ProfileError(f"{what}: profile must be an object or a quantity")
    kind = spec.get("type", "constant")

    def amt(name: str, default: object = None) -> float:
        raw = spec.get(name, default)
        if raw is None:
            raise ProfileError(f"{what}: {kind} profile needs {name!r}")
        return _amount(resource, raw, f"{what}.{name}")

    profile: Profile
    if kind == "constant":
        profile = Constant(amt("value"))
    elif kind == "daily":
        profile = DailyCycle(amt("base"), amt("amplitude"), float(spec.get("peak_hour", 12)))
    elif kind == "spikes":
        period = float(spec.get("period_s", 600))
        if period <= 0:
            raise ProfileError(f"{what}.period_s: must be > 0")
        profile = Spikes(
            amt("base"),
            amt("height"),
            period,
            float(spec.get("duration_s", 60)),
            float(spec.get("offset_s", 0)),
        )
    elif kind == "trend":
        profile = Trend(
            amt("start"), amt("per_hour"), amt("min", 0), amt("max") if "max" in spec else math.inf
        )
    elif kind == "leak":
        profile = Leak(amt("start"), amt("per_hour"))
    elif kind == "trace":
        if traces is None:
            traces = TraceCache()
        path, key, keys = spec.get("path"), spec.get("key"), spec.get("keys")
        if isinstance(path, str) and key == "*":
            keys = traces.keys(path)
        if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            key = pick_key(list(keys), seed)
        if not isinstance(path, str) or not isinstance(key, str):
            raise ProfileError(f"{what}: trace profile needs string 'path' and 'key' (or 'keys')")
        mode = spec.get("mode", "relative")
        if mode not in ("relative", "absolute"):
            raise ProfileError(f"{what}.mode: must be 'relative' or 'absolute'")
        profile = Trace(
            traces.series(path, key, resource), relative=mode == "relative", loop=bool(spec.get("loop", True))
        )
    else:
        raise ProfileError(
            f"{what}: unknown profile type {kind!r} (constant, daily, spikes, trend, leak, trace)"
        )
    noise = spec.get("noise")
    if noise:
        profile = Noisy(profile, float(noise), int(spec.get("seed", 0)))
    return profile


@dataclass(frozen=True, slots=True)
class UsageProfile:
    """What `ClusterBehaviour.set_usage` takes: profiles for a container's CPU and memory (None = default)."""

    cpu: Profile | None = None
    memory: Profile | None = None

    @classmethod
    def from_json(
        cls, spec: Mapping[str, Any], what: str = "usage", traces: TraceCache | None = None, seed: str = ""
    ) -> UsageProfile:
        trace = spec.get("trace")
        if isinstance(trace, Mapping):
            t = dict(trace, type="trace")
            return cls(
                parse_profile(CPU, t, f"{what}.cpu", traces, seed),
                parse_profile(MEMORY, t, f"{what}.memory", traces, seed),
            )
        cpu = spec.get(CPU)
        mem = spec.get(MEMORY)
        return cls(
            parse_profile(CPU, cpu, f"{what}.cpu", traces, seed) if cpu is not None else None,
            parse_profile(MEMORY, mem, f"{what}.memory", traces, seed) if mem is not None else None,
        )


def parse_annotation(text: str, traces: TraceCache | None = None, pod: str = "") -> dict[str, UsageProfile]:
    """Parse the `sim.vpa.dev/usage` annotation: container name → UsageProfile."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ProfileError(f"{ANNOTATION}: not JSON: {err}") from err
    if not isinstance(data, dict):
        raise ProfileError(f"{ANNOTATION}: must be a JSON object keyed by container name")
    return {
        str(name): UsageProfile.from_json(spec, f"{ANNOTATION}[{name}]", traces, f"{pod}/{name}")
        for name, spec in data.items()
        if isinstance(spec, Mapping)
    }


def default_profile(resource: str, request: int | None, limit: int | None, fraction: float) -> Constant:
    """Usage for a container without a profile: `fraction` of its request, else of its limit, else a floor
    (10m CPU, 32Mi memory) so that every running container has metrics."""
    base = request if request else limit
    if base:
        return Constant(base * fraction)
    return Constant(10.0 if resource == CPU else 32.0 * 2**20)
