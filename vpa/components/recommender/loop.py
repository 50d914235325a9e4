"""The recommenders of one process run together: one loop step by step over every hosted recommender on one
shared metrics read (`run_loop`), and the `--recommender-interval` ticker (`tick_forever`).

Must not: compute recommendations itself or let one step's failure stop the loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

import structlog

from vpa.components.health import HealthState
from vpa.components.recommender.metrics import RecommenderMetrics
from vpa.components.recommender.ports import MetricsSource
from vpa.components.recommender.reports import TARGET_CHANGE_LINES, LoopReport
from vpa.kube.metricsreading import MetricsRead
from vpa.model.clock import Clock

if TYPE_CHECKING:
    from vpa.components.recommender.recommender import Recommender

log = structlog.get_logger(__name__)
COMPONENT: Final = "recommender"
STEPS: Final = ("LoadVPAs", "LoadPods", "LoadMetrics", "DeleteRemovedPods", "UpdateVPAs",
                "MaintainCheckpoints", "GarbageCollect", "total")
_NEXT_LOOP_MARGIN_S: Final = 5.0  # checkpoint writing ends this long before the next tick (at most)...
_NEXT_LOOP_MARGIN_FRACTION: Final = 0.1  # ...or this fraction of the interval, if smaller
# ---------------------------------------------------------------------------- loops over recommenders


async def _fetch_metrics(source: MetricsSource, metrics: RecommenderMetrics,
                         reports: Sequence[LoopReport]) -> MetricsRead:
    """The loop's one PodMetrics read, counted once however many recommenders use it."""
    name = source.client_name
    try:
        read = await source.read()
    except Exception as err:
        # Keep what we know; the next loop asks again.
        for report in reports:
            report.metrics_error = str(err)
        metrics.metric_server_responses.labels(is_error="true", client_name=name).inc()
        log.error("recommender_metrics_unavailable", error=str(err))
        return MetricsRead([])
    metrics.metric_server_responses.labels(is_error="false", client_name=name).inc()
    if read.malformed:
        metrics.skipped.labels(what="malformed_pod_metrics").inc(read.malformed)
    return read


async def run_loop(recommenders: Sequence[Recommender],
                   next_loop_at: float | None = None) -> list[LoopReport]:
    """One loop of every recommender hosted together, step by step (each step for all of them before the
    next), so that the shared inputs are read once: one PodMetrics LIST feeds every recommender, and each
    step is timed once in `vpa_recommender_execution_latency_seconds`. The first recommender's clock,
    metrics source and collectors serve the whole set (a group builds them shared).

    Checkpoint writing stops at `--checkpoints-timeout` after the loop's start (upstream) or, if sooner, a
    little before `next_loop_at`, so that checkpoint writes never push the next loop's metrics read and
    status writes back a tick: checkpoints not written this loop go first in the next (oldest first)."""
    first = recommenders[0]
    metrics = first.metrics
    reports = [LoopReport() for _ in recommenders]
    started = time.perf_counter()
    now = first._clock.now()
    deadline = first._clock.monotonic() + first.settings.checkpoints_timeout_s
    if next_loop_at is not None:
        interval = first.settings.recommender_interval_s
        margin = min(_NEXT_LOOP_MARGIN_S, _NEXT_LOOP_MARGIN_FRACTION * interval)
        deadline = min(deadline, next_loop_at - margin)
    parts = [rec._steps(report, now, deadline, set())
             for rec, report in zip(recommenders, reports, strict=True)]
    read: list[MetricsRead] = []

    async def load_metrics(rec: Recommender, report: LoopReport) -> None:
        if not read:
            read.append(await _fetch_metrics(first._metrics_source, metrics, reports))
        await rec._apply_metrics(report, read[0])

    for step in STEPS[:-1]:
        if step == "MaintainCheckpoints" and first.settings.storage == "prometheus":
            continue  # upstream keeps no checkpoints with Prometheus history (spec §3.13)
        step_started = time.perf_counter()
        for rec, report, part in zip(recommenders, reports, parts, strict=True):
            # A step starts on a fresh slice: the previous one's last slice plus this one's first would
            # hold the loop up to twice the budget.
            await asyncio.sleep(0)
            try:
                if step == "LoadMetrics":
                    await load_metrics(rec, report)
                else:
                    await part[step]()
            except Exception:
                log.exception("recommender_step_failed", step=step, recommender=rec.settings.recommender_name)
        if step == "LoadMetrics" and read:
            read.clear()
        elapsed = time.perf_counter() - step_started
        for report in reports:
            report.step_seconds[step] = elapsed
        metrics.execution_latency.labels(step=step).observe(elapsed)
    total = time.perf_counter() - started
    metrics.execution_latency.labels(step="total").observe(total)
    counts: dict[tuple[str, str, str, str], int] = {}
    for report in reports:
        report.step_seconds["total"] = total
        for label, n in report.vpa_object_counts.items():
            counts[label] = counts.get(label, 0) + n
    metrics.vpa_objects.clear()
    for (mode_label, has_rec, matches, unsupported), n in counts.items():
        metrics.vpa_objects.labels(update_mode=mode_label, has_recommendation=has_rec, api="v1",
                                   matches_pods=matches, unsupported_config=unsupported).set(n)
    metrics.aggregate_states.set(sum(len(rec.core.cluster.aggregates) for rec in recommenders))
    metrics.capped_to_node.set(sum(report.capped_to_node for report in reports))
    metrics.vpa_conflicts.set(sum(report.vpa_conflicts for report in reports))
    metrics.hpa_conflicts.set(sum(report.hpa_conflicts for report in reports))
    for rec, report in zip(recommenders, reports, strict=True):
        rec.loops += 1
        rec.last_report = report
        # Each changed target has its own line (`vpa_target_changed`); the loop's summary is a debug line
        # unless it stands for target changes beyond those lines, so a steady cluster keeps a quiet log.
        emit = log.info if report.target_changes > TARGET_CHANGE_LINES else log.debug
        emit("recommender_loop_done", recommender=rec.settings.recommender_name, vpas=report.vpas,
             pods=report.pods, samples=report.samples, status_writes=report.status_writes,
             status_writes_skipped=report.status_writes_skipped, target_changes=report.target_changes,
             checkpoints=report.checkpoints_written,
             seconds=round(total, 3))
    return reports


async def tick_forever(clock: Clock, interval: float, health: HealthState | None, reset: Callable[[], None],
                        restore: Callable[[], Awaitable[object]],
                        run_once: Callable[[float], Awaitable[object]]) -> None:
    """Reset, restore, then `run_once(next_tick)` at once and on every tick of `interval` after that (overrun
    ticks are dropped), with health activity. Upstream's ticker runs the first loop an interval after start;
    the caches are synced and the checkpoints restored before we get here, so waiting would only delay
    every VPA's first recommendation by an interval (docs/deviations.md)."""
    reset()
    if health is not None:
        health.add_activity(COMPONENT, 5 * interval)
    try:
        await restore()
        next_tick = clock.monotonic()
        while True:
            await clock.sleep(max(0.0, next_tick - clock.monotonic()))
            try:
                await run_once(next_tick + interval)
            except Exception:
                log.exception("recommender_loop_failed")
            else:
                if health is not None:
                    health.record_activity(COMPONENT)
            now = clock.monotonic()
            next_tick += interval
            if next_tick <= now:
                next_tick += math.ceil((now - next_tick) / interval) * interval
    finally:
        if health is not None:
            # Not leading any more: no activity expected until the next term starts.
            health.add_activity(COMPONENT, 5 * interval)
