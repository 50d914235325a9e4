"""The recommender's checkpoints: restoring histories from them, writing them, collecting orphans
(spec §3.11).

Owns: `load_checkpoints` (every checkpoint of a tracked VPA into its initial state; a malformed one is
skipped, counted and logged), `write_checkpoints` (oldest-written VPAs first, until the deadline but at
least one VPA per worker, and beyond `SPREAD_MIN` VPAs at most `1/SPREAD_LOOPS` of them per loop; the
content is computed paced in one task and written by `workers` writers), and `collect_orphans`
(checkpoints whose VPA is gone; any recommender's VPAs count as existing).

Must not: decide when collection runs (the recommender's interval does) or raise for API errors.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

import structlog

from vpa.aio.pacing import paced
from vpa.aio.workers import produce_and_write
from vpa.components.recommender.metrics import RecommenderMetrics
from vpa.components.recommender.ports import CheckpointSink
from vpa.components.recommender.reports import LoopReport, RestoreReport, TrackedVpa
from vpa.kube.client import JsonObj
from vpa.logic.recommender.checkpointing import (
    IN_PROGRESS_PEAKS_ANNOTATION,
    CheckpointError,
    InProgressPeak,
    checkpoint_name,
    checkpoint_status,
    format_in_progress_peaks,
    parse_in_progress_peaks,
)
from vpa.logic.recommender.cluster import ClusterState
from vpa.model.clock import Clock
from vpa.model.vpa import ConditionType, VpaView

log = structlog.get_logger(__name__)

SPREAD_MIN: Final = 1000
"""Up to this many VPAs' checkpoints are written every loop, as upstream does..."""
SPREAD_LOOPS: Final = 10
"""...beyond it, each loop writes the oldest 1/this of them, so each is refreshed every this many loops."""

Key = tuple[str, str]


def load_checkpoints(items: Iterable[JsonObj], tracked: Mapping[Key, TrackedVpa], cluster: ClusterState,
                     metrics: RecommenderMetrics, now: float) -> RestoreReport:
    """Every checkpoint of a `tracked` VPA into `cluster`; others (another recommender's, an ignored
    namespace's, an orphan) are left alone."""
    report = RestoreReport()
    for item in items:
        metadata = item.get("metadata") or {}
        spec = item.get("spec") or {}
        namespace = str(metadata.get("namespace") or "")
        name = str(metadata.get("name") or "")
        vpa_name, container = spec.get("vpaObjectName"), spec.get("containerName")
        if (namespace, vpa_name) not in tracked:
            continue
        try:
            if not isinstance(vpa_name, str) or not isinstance(container, str) or not container:
                raise CheckpointError("spec.vpaObjectName and spec.containerName must be strings")
            cluster.load_checkpoint(namespace, vpa_name, container, item.get("status"), now,
                                    _restored_peaks(namespace, name, metadata, metrics))
        except (CheckpointError, KeyError) as err:
            report.skipped += 1
            report.errors.append(f"{namespace}/{name}: {err}")
            metrics.skipped.labels(what="malformed_checkpoint").inc()
            log.warning("recommender_checkpoint_skipped", checkpoint=f"{namespace}/{name}", error=str(err))
            continue
        report.loaded += 1
    log.info("recommender_restored_checkpoints", loaded=report.loaded, skipped=report.skipped)
    return report


def _restored_peaks(namespace: str, name: str, metadata: Mapping[str, Any],
                    metrics: RecommenderMetrics) -> list[InProgressPeak]:
    """The in-progress memory peaks kept in a checkpoint's annotation (none in upstream's checkpoints);
    a malformed annotation costs only the peaks, not the checkpoint."""
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping):
        return []
    try:
        return parse_in_progress_peaks(annotations.get(IN_PROGRESS_PEAKS_ANNOTATION))
    except CheckpointError as err:
        metrics.skipped.labels(what="malformed_checkpoint_peaks").inc()
        log.warning("recommender_checkpoint_peaks_skipped", checkpoint=f"{namespace}/{name}", error=str(err))
        return []


def fetching_history(view: VpaView) -> bool:
    """Whether the VPA's history is still being fetched (its checkpoints would be empty: not written)."""
    condition = view.status.condition(ConditionType.FETCHING_HISTORY)
    return condition is not None and condition.is_true


Job = tuple[Key, list[tuple[str, dict[str, object], dict[str, str]]]]


async def write_checkpoints(cluster: ClusterState, tracked: Mapping[Key, TrackedVpa], sink: CheckpointSink,
                            report: LoopReport, metrics: RecommenderMetrics, *, now: float, deadline: float,
                            clock: Clock, workers: int, slice_s: float) -> None:
    """One loop's checkpoint writes (see the module docstring); `deadline` is on the clock's monotonic
    time."""
    candidates: list[tuple[float, Key]] = []
    async for key, vpa in paced(list(tracked.items()), slice_s):
        if not fetching_history(vpa.view):
            candidates.append((cluster.checkpoint_written(*key) or -math.inf, key))
    candidates.sort()
    budget = max(workers, SPREAD_MIN, math.ceil(len(candidates) / SPREAD_LOOPS))

    async def produce(put: Callable[[Job], Awaitable[None]]) -> None:
        async for produced, (_, key) in paced(enumerate(candidates), slice_s):
            if produced >= budget:
                return
            if produced >= workers and clock.monotonic() >= deadline:
                return
            try:
                contents = cluster.checkpoint_contents(*key, now)
                payload = [(container, checkpoint_status(state, now),
                            {IN_PROGRESS_PEAKS_ANNOTATION: format_in_progress_peaks(peaks)})
                           for container, (state, peaks) in sorted(contents.items())]
            except Exception:
                log.exception("recommender_checkpoint_failed", vpa=f"{key[0]}/{key[1]}")
                continue
            await put((key, payload))

    async def write(job: Job) -> None:
        key, payload = job
        try:
            for container, status, annotations in payload:
                await sink.write(key[0], checkpoint_name(key[1], container), key[1], container, status,
                                 annotations)
                report.checkpoints_written += 1
            cluster.mark_checkpoint_written(*key, now)
        except Exception as err:
            report.checkpoint_errors += 1
            metrics.write_errors.labels(what="checkpoint").inc()
            log.warning("recommender_checkpoint_write_failed", vpa=f"{key[0]}/{key[1]}", error=str(err))

    await produce_and_write(produce, write, workers)


async def collect_orphans(vpas: Iterable[VpaView], sink: CheckpointSink, metrics: RecommenderMetrics,
                          keeps_namespace: Callable[[str], bool], slice_s: float) -> int:
    """Delete the checkpoints, in the namespaces this process keeps, whose VPA is not among `vpas`."""
    existing: set[Key] = set()
    async for vpa in paced(vpas, slice_s):
        existing.add((vpa.namespace, vpa.name))
    deleted = 0
    items = await sink.list()
    async for item in paced(items, slice_s):
        metadata = item.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "")
        if not keeps_namespace(namespace):
            continue
        if (namespace, (item.get("spec") or {}).get("vpaObjectName")) in existing:
            continue
        try:
            await sink.delete(namespace, str(metadata.get("name") or ""))
            deleted += 1
        except Exception as err:
            metrics.write_errors.labels(what="checkpoint_gc").inc()
            log.warning("recommender_checkpoint_gc_failed", checkpoint=f"{namespace}/{metadata.get('name')}",
                        error=str(err))
    (log.info if deleted else log.debug)("recommender_checkpoints_collected", deleted=deleted)
    return deleted
