"""Reading usage history from Prometheus: the recommender's `--storage=prometheus` bootstrap source.

Owns: `history_queries` (upstream's three PromQL queries built from the flags: CPU as
`rate(<cpu metric>{<selector>}[<resolution>])`, memory as `<memory metric>{<selector>}`, pod labels as
`--metric-for-pod-labels`), `PrometheusHistoryReader` (the HTTP API client: `/api/v1/query_range` over
`[now − history-length, now]` with step = resolution, then `/api/v1/query` at now for the labels; POST
form bodies with a GET fallback on 405, as Prometheus' Go client sends them; bearer-token or basic auth,
optional TLS verification; `--prometheus-query-timeout` per query, retries with exponential backoff on 5xx
and transport errors inside that timeout; each HTTP exchange reported to an `on_request(code, method,
seconds)` observer) and the parse of the API's JSON into `ClusterHistory` (per pod: its last labels, and
per container its `(timestamp_s, cpu_cores)` and `(timestamp_s, memory_bytes)` samples in time order).

Must not: feed any model or convert amounts (the recommender does that, with upstream's truncation),
register or emit metrics, keep state between reads, let raw JSON out of this module, or raise anything
but `PrometheusError` for configuration, transport and API failures. A failed labels query does not fail
the read (upstream ignores it): it is reported in `ClusterHistory.labels_error`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import orjson
import structlog

from vpa.aio.pacing import paced
from vpa.model.durations import format_prometheus_duration_s
from vpa.model.settings import PrometheusSettings

log = structlog.get_logger(__name__)

QUERY_RANGE_PATH: Final = "/api/v1/query_range"
QUERY_PATH: Final = "/api/v1/query"

RequestObserver = Callable[[str, str, float], None]
"""`(code, method, seconds)` for every HTTP response (upstream's promhttp labels: `"200"`, `"post"`)."""


class PrometheusError(Exception):
    """History could not be read. `reason` is one of `config`, `unreachable`, `tls`, `http`,
    `bad_response`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(slots=True)
class ContainerHistory:
    """One container's samples, oldest first. Values are as Prometheus returned them (may be NaN)."""

    cpu_cores: list[tuple[float, float]] = field(default_factory=list)
    memory_bytes: list[tuple[float, float]] = field(default_factory=list)


@dataclass(slots=True)
class PodHistory:
    labels: dict[str, str] = field(default_factory=dict)
    """The pod's labels from the pod-labels metric (prefix stripped); empty when none were found."""
    labels_seen_s: float | None = None
    """Time of the sample the labels came from (the latest one wins)."""
    containers: dict[str, ContainerHistory] = field(default_factory=dict)


@dataclass(slots=True)
class ClusterHistory:
    pods: dict[tuple[str, str], PodHistory] = field(default_factory=dict)
    """Keyed by (namespace, pod name)."""
    series_skipped: int = 0
    """Series without the namespace/pod/container labels that identify them."""
    labels_error: str | None = None
    """Why the pod-labels query failed, when it did (the samples are still usable)."""

    def sample_count(self) -> int:
        return sum(len(c.cpu_cores) + len(c.memory_bytes)
                   for pod in self.pods.values() for c in pod.containers.values())


@dataclass(frozen=True, slots=True)
class HistoryQueries:
    cpu: str
    memory: str
    labels: str


def history_queries(settings: PrometheusSettings, namespace: str = "") -> HistoryQueries:
    """Upstream's queries (spec §3.13). `namespace` is `--vpa-object-namespace` (empty: all)."""
    selector = f'job="{settings.cadvisor_job_name}", ' if settings.cadvisor_job_name else ""
    selector += (f'{settings.container_pod_name_label}=~".+", {settings.container_name_label}!="POD", '
                 f'{settings.container_name_label}!=""')
    if namespace:
        selector += f', {settings.container_namespace_label}="{namespace}"'
    window = format_prometheus_duration_s(settings.history_resolution_s)
    return HistoryQueries(
        cpu=f"rate({settings.history_cpu_metric}{{{selector}}}[{window}])",
        memory=f"{settings.history_memory_metric}{{{selector}}}",
        labels=settings.metric_for_pod_labels,
    )


def format_api_float(value: float) -> str:
    """A time or step the way Prometheus' Go client writes it (`strconv.FormatFloat(v, 'f', -1, 64)`):
    no exponent, no trailing zeros (`1700000000`, `1700000000.5`, `3600`)."""
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _auth_header(settings: PrometheusSettings) -> str | None:
    """Bearer wins over basic auth; the token file (read now, at start-up, and trimmed) over the flag."""
    token = settings.bearer_token
    if settings.bearer_token_file:
        try:
            with open(settings.bearer_token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as err:
            raise PrometheusError("config", f"cannot read the bearer token file: {err}") from None
    if token:
        return f"Bearer {token}"
    if settings.username:
        credentials = f"{settings.username}:{settings.password}".encode()  # UTF-8, as Go's SetBasicAuth
        return "Basic " + base64.b64encode(credentials).decode("ascii")
    return None


def _series(document: object, want: tuple[str, ...], what: str) -> list[Mapping[str, Any]]:
    """The `result` list of a successful API response whose `resultType` is one of `want`."""
    if not isinstance(document, dict) or document.get("status") != "success":
        raise PrometheusError("bad_response", f"{what}: not a successful API response")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") not in want:
        got = data.get("resultType") if isinstance(data, dict) else None
        raise PrometheusError("bad_response", f"{what}: expected a {' or '.join(want)} result, got {got!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("bad_response", f"{what}: result is not a list")
    return [item for item in result if isinstance(item, dict)]


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    if not isinstance(metric, dict):
        return {}
    return {str(k): str(v) for k, v in metric.items()}


def _points(raw: object) -> list[tuple[float, float]]:
    """`[[1700000000, "0.5"], …]` → [(1700000000.0, 0.5), …]; malformed points are dropped."""
    points: list[tuple[float, float]] = []
    if not isinstance(raw, list):
        return points
    for point in raw:
        if not isinstance(point, list) or len(point) != 2:
            continue
        try:
            points.append((float(point[0]), float(point[1])))  # "NaN", "+Inf" parse too
        except (TypeError, ValueError):
            continue
    return points


class PrometheusHistoryReader:
    """`read(now)` returns the cluster's usage history; raises `PrometheusError` when it cannot."""

    def __init__(
        self,
        settings: PrometheusSettings,
        *,
        namespace: str = "",
        max_attempts: int = 5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        chunk_budget_s: float = 0.01,
    ) -> None:
        self.settings = settings
        self.queries = history_queries(settings, namespace)
        self._base = settings.address.rstrip("/")
        self._max_attempts = max(1, max_attempts)
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._chunk_budget_s = chunk_budget_s

    async def read(self, now: float, on_request: RequestObserver | None = None) -> ClusterHistory:
        """CPU and memory history over `[now − history-length, now]`, then the pods' last labels."""
        settings = self.settings
        headers = {"Accept": "application/json"}
        auth = _auth_header(settings)
        if auth is not None:
            headers["Authorization"] = auth
        connector = aiohttp.TCPConnector(ssl=False) if settings.insecure else aiohttp.TCPConnector()
        history = ClusterHistory()
        range_params = {
            "start": format_api_float(now - settings.history_length_s),
            "end": format_api_float(now),
            "step": format_api_float(settings.history_resolution_s),
        }
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            for query, resource in ((self.queries.cpu, "cpu"), (self.queries.memory, "memory")):
                document = await self._call(session, QUERY_RANGE_PATH, {"query": query, **range_params},
                                            on_request)
                await self._add_usage(history, _series(document, ("matrix",), f"{resource} history"),
                                      resource)
            for pod in history.pods.values():
                for container in pod.containers.values():
                    container.cpu_cores.sort(key=lambda point: point[0])
                    container.memory_bytes.sort(key=lambda point: point[0])
            try:
                document = await self._call(
                    session, QUERY_PATH, {"query": self.queries.labels, "time": format_api_float(now)},
                    on_request)
                # Upstream demands a matrix here, which the default instant query never returns (spec
                # §11.4); an instant vector is what the default flag yields, so both are read.
                self._add_labels(history, _series(document, ("matrix", "vector"), "pod labels"))
            except PrometheusError as err:
                history.labels_error = str(err)
        return history

    # ------------------------------------------------------------------------------------- parsing

    async def _add_usage(self, history: ClusterHistory, series: list[Mapping[str, Any]],
                         resource: str) -> None:
        s = self.settings
        async for item in paced(series, self._chunk_budget_s):  # a long history shares the event loop
            labels = _labels(item)
            namespace = labels.get(s.container_namespace_label)
            pod_name = labels.get(s.container_pod_name_label)
            container_name = labels.get(s.container_name_label)
            if namespace is None or pod_name is None or container_name is None:
                history.series_skipped += 1
                continue
            pod = history.pods.setdefault((namespace, pod_name), PodHistory())
            container = pod.containers.setdefault(container_name, ContainerHistory())
            target = container.cpu_cores if resource == "cpu" else container.memory_bytes
            target.extend(_points(item.get("values")))

    def _add_labels(self, history: ClusterHistory, series: list[Mapping[str, Any]]) -> None:
        s = self.settings
        prefix = s.pod_label_prefix
        for item in series:
            labels = _labels(item)
            namespace = labels.get(s.pod_namespace_label)
            pod_name = labels.get(s.pod_name_label)
            if namespace is None or pod_name is None:
                history.series_skipped += 1
                continue
            points = _points(item.get("values")) if "values" in item else _points([item.get("value")])
            if not points:
                continue
            seen = points[-1][0]  # results are in time order: the last point is the latest
            pod = history.pods.setdefault((namespace, pod_name), PodHistory())
            if pod.labels_seen_s is None or seen > pod.labels_seen_s:
                pod.labels_seen_s = seen
                # As upstream's TrimPrefix test: an empty prefix strips nothing, so it selects no label.
                pod.labels = {key[len(prefix):]: value for key, value in labels.items()
                              if prefix and key.startswith(prefix) and key != prefix}

    # ----------------------------------------------------------------------------------------- HTTP

    def _backoff_s(self, attempt: int) -> float:
        return float(min(self._backoff_max_s, self._backoff_base_s * 2.0**attempt))

    async def _call(self, session: aiohttp.ClientSession, path: str, params: dict[str, str],
                    on_request: RequestObserver | None) -> object:
        """One API call within `--prometheus-query-timeout`: POST (GET after a 405), retried on 5xx and
        transport errors while time remains. Returns the decoded JSON document."""
        url = self._base + path
        deadline = time.monotonic() + self.settings.query_timeout_s
        use_get = False
        last_error = "no attempt made"
        for attempt in range(self._max_attempts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            method = "GET" if use_get else "POST"
            started = time.monotonic()
            try:
                async with session.request(
                        method, url, params=params if use_get else None, data=None if use_get else params,
                        timeout=aiohttp.ClientTimeout(total=remaining)) as response:
                    body = await response.read()
                    status = response.status
            except aiohttp.ClientConnectorCertificateError as err:  # retrying won't make it trusted
                raise PrometheusError("tls", f"{method} {path}: {err}") from None
            except (TimeoutError, aiohttp.ClientError, OSError) as err:
                last_error = f"{method} {path}: {type(err).__name__}: {err}".rstrip(": ")
                reason = "unreachable"
            else:
                if on_request is not None:
                    on_request(str(status), method.lower(), time.monotonic() - started)
                if status == 405 and not use_get:
                    use_get = True  # Prometheus' Go client falls back the same way
                    continue
                if status == 200:
                    try:
                        return orjson.loads(body)
                    except orjson.JSONDecodeError:
                        raise PrometheusError("bad_response", f"{method} {path}: body is not JSON") from None
                last_error = f"{method} {path}: HTTP {status}: {_api_error(body)}"
                if status < 500:  # the query itself is wrong: retrying won't help
                    raise PrometheusError("http", last_error)
                reason = "http"
            delay = self._backoff_s(attempt)
            if attempt + 1 >= self._max_attempts or time.monotonic() + delay >= deadline:
                raise PrometheusError(reason, last_error)
            log.info("prometheus_request_retrying", path=path, attempt=attempt + 1, error=last_error,
                     delay_s=round(delay, 3))
            await self._sleep(delay)
        raise PrometheusError("unreachable", f"{path}: --prometheus-query-timeout passed ({last_error})")


def _api_error(body: bytes) -> str:
    """The `error` of a Prometheus error document, else the start of the body."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode("utf-8", "replace") or "(empty body)"
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return f"{document.get('errorType', 'error')}: {document['error']}"
    return body[:200].decode("utf-8", "replace")
