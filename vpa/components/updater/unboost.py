"""Ending CPU startup boosts (gate `CPUStartupBoost`) as they expire, in the updater's companion loop.

Must not: evict, or decide which boosts end (that is `vpa.logic.updater.unboost`).
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog

from vpa.components.context import ComponentContext
from vpa.components.updater.events import IN_PLACE_RESIZED, IN_PLACE_RESIZED_MESSAGE, UNBOOST_ERROR, pod_ref
from vpa.components.updater.failures import log_pass_failure
from vpa.components.updater.inputs import is_live, processed_recommendation, target_selector
from vpa.components.updater.metrics import UpdaterMetrics, vpa_size_log2
from vpa.components.updater.reports import UnboostReport
from vpa.kube.actuating import Actuator, Outcome
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.ratelimiting import TokenBucket
from vpa.logic.limitranges import NamespaceLimits, namespace_limits
from vpa.logic.matching import controller_key, controlling_vpa
from vpa.logic.updater.inplace import (
    ResizeAttempt,
    resize_patch,
)
from vpa.logic.updater.unboost import UnboostPlan, blocked, plan_unboost
from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.vpa import VpaView

log = structlog.get_logger(__name__)
UNBOOST_POLL_S: Final = 1.0
"""The unboost loop looks at boosted pods at least this often (clock seconds): a pod turning Ready is seen
within a second, and a boost ends within about a second of expiring."""
_UNBOOST_MIN_WALL_S: Final = 0.05
"""Real time between two unboost passes, so a fast virtual clock cannot spin the loop."""
BOOSTED_INDEX: Final = "cpuStartupBoosted"
_BOOSTED: Final = "boosted"


def boosted_index_keys(pod: PodView) -> list[str]:
    """The pod-cache index of pods carrying any `vpaCpuStartupBoost/<container>` annotation."""
    prefix = ann.CPU_STARTUP_BOOST_PREFIX
    return [_BOOSTED] if any(key.startswith(prefix) for key in pod.annotations) else []

class Unbooster:
    """Ends CPU startup boosts (gate `CPUStartupBoost`, spec §4.9) as they expire: it looks only at pods
    carrying a `vpaCpuStartupBoost/…` annotation (a pod-cache index), asks `vpa.logic.updater.unboost` what
    ends each boost, resizes in place through the updater's in-place token bucket and then removes the
    annotations. It wakes at the earliest boost expiry and at least every `UNBOOST_POLL_S`; it never evicts;
    up to `--concurrent-cpu-startup-boost-syncs` pods are unboosted at once; a failed unboost is retried one
    updater interval later."""

    def __init__(self, ctx: ComponentContext, controllers: ControllerCaches, limiter: TokenBucket,
                 actuator: Actuator, events: EventRecorder, metrics: UpdaterMetrics,
                 attempts: dict[str, ResizeAttempt]) -> None:
        self.ctx = ctx
        self.controllers = controllers
        self.clock = ctx.clock
        self.settings = ctx.settings.updater
        self.in_place_limiter = limiter
        self.actuator = actuator
        self.events = events
        self.metrics = metrics
        self.attempts = attempts  # the updater's: its next plan sees the unboost's resize
        self._retry_at: dict[str, float] = {}

    async def run_forever(self) -> None:
        """End CPU startup boosts as they expire (gate `CPUStartupBoost`) until cancelled."""
        while True:
            wake: float | None = None
            try:
                wake = (await self.run_once()).next_expiry
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log_pass_failure("unboost_pass_failed", err)
            delay = UNBOOST_POLL_S
            if wake is not None:
                delay = min(delay, max(0.0, wake - self.clock.now()))
            await asyncio.sleep(_UNBOOST_MIN_WALL_S)
            await self.clock.sleep(delay)

    async def run_once(self) -> UnboostReport:
        """One pass over the boosted pods: end every expired boost (spec §4.9)."""
        report = UnboostReport()
        pods = self.ctx.pods
        if not pods.has_index(BOOSTED_INDEX):
            pods.add_index(BOOSTED_INDEX, boosted_index_keys)
        boosted = [pod for pod in pods.by_index(BOOSTED_INDEX, _BOOSTED) if is_live(pod)]
        uids = {pod.uid for pod in boosted}
        for uid in [uid for uid in self._retry_at if uid not in uids]:
            del self._retry_at[uid]
        now = self.clock.now()
        limits_by_namespace: dict[str, NamespaceLimits] = {}
        due: list[tuple[PodView, VpaView | None, UnboostPlan]] = []
        for pod in boosted:
            if now < self._retry_at.get(pod.uid, now) or blocked(pod) is not None:
                continue
            vpa = self._controlling_vpa(pod)
            recommendation = None
            if vpa is not None and vpa.recommendation is not None and not vpa.recommendation.is_empty():
                limits = limits_by_namespace.get(pod.namespace)
                if limits is None:
                    limits = limits_by_namespace[pod.namespace] = namespace_limits(
                        self.controllers.limit_ranges(pod.namespace)
                    )
                recommendation = processed_recommendation(pod, vpa, limits)
            plan = plan_unboost(pod, vpa, recommendation, now)
            if plan.next_expiry is not None and (
                report.next_expiry is None or plan.next_expiry < report.next_expiry
            ):
                report.next_expiry = plan.next_expiry
            if plan.expired:
                due.append((pod, vpa, plan))
        await self._unboost_all(due, report)
        return report

    async def _unboost_all(self, due: list[tuple[PodView, VpaView | None, UnboostPlan]],
                           report: UnboostReport) -> None:
        """End the boosts of `due`, at most `--concurrent-cpu-startup-boost-syncs` pods at a time (upstream's
        unboost workers). Every pod is tried even when one raises; the first error is raised afterwards."""
        if not due:
            return
        slots = asyncio.Semaphore(self.settings.concurrent_cpu_startup_boost_syncs)

        async def one(pod: PodView, vpa: VpaView | None, plan: UnboostPlan) -> None:
            async with slots:
                await self._unboost(pod, vpa, plan, report)

        results = await asyncio.gather(*(one(*item) for item in due), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def _controlling_vpa(self, pod: PodView) -> VpaView | None:
        """The VPA controlling a boosted pod, in any update mode (boosts are applied even in mode `Off`)."""
        owner = pod.owner
        if owner is None:
            return None
        top = self.controllers.top_most(pod.namespace, owner.kind, owner.name)
        if top is None:
            return None
        key = controller_key(pod.namespace, top[0], top[1])
        candidates = [
            (vpa, target_selector(self.controllers, pod.namespace, top[0], top[1]))
            for vpa in self.ctx.vpas.by_index("target", key)
            if vpa.deletion_timestamp is None
        ]
        return controlling_vpa(pod.namespace, pod.labels, key, candidates)

    async def _unboost(
        self, pod: PodView, vpa: VpaView | None, plan: UnboostPlan, report: UnboostReport
    ) -> None:
        vpa_name, vpa_namespace = (vpa.name, vpa.namespace) if vpa is not None else ("", pod.namespace)
        size = str(vpa_size_log2(1))
        retry_at = self.clock.now() + self.settings.updater_interval_s
        if plan.malformed:
            log.warning("boost_annotation_unreadable", pod=pod.key, containers=list(plan.malformed))
        if plan.changes:
            await self.in_place_limiter.acquire()
            patched_at = self.clock.now()
            result = await self.actuator.resize(pod.namespace, pod.name, resize_patch(pod, plan.changes))
            if not result.ok:
                report.failed.append((pod.key, result.outcome, result.message))
                if result.outcome is Outcome.GONE:
                    return
                self._retry_at[pod.uid] = retry_at
                self.metrics.failed_in_place.labels(
                    vpa_size_log2=size, reason=UNBOOST_ERROR, vpa_name=vpa_name, vpa_namespace=vpa_namespace
                ).inc()
                log.warning("pod_unboost_failed", pod=pod.key, containers=list(plan.expired),
                            outcome=result.outcome.value, status=result.status, error=result.message)
                return
            self.attempts[pod.uid] = ResizeAttempt(
                patched_at,
                disruptive=any(c.disruptive for c in plan.changes),
                resource_version=pod.resource_version,
            )
            self.events.normal(pod_ref(pod), IN_PLACE_RESIZED, IN_PLACE_RESIZED_MESSAGE)
            self.metrics.in_place_updated.labels(
                vpa_size_log2=size, vpa_name=vpa_name, vpa_namespace=vpa_namespace
            ).inc()
        marked = await self.actuator.mark_in_place_updated(pod.namespace, pod.name, plan.annotation_patch())
        if not marked.ok:
            report.failed.append((pod.key, marked.outcome, marked.message))
            if marked.outcome is not Outcome.GONE:
                self._retry_at[pod.uid] = retry_at
                log.warning("boost_annotation_removal_failed", pod=pod.key, error=marked.message)
            return
        report.unboosted.append(pod.key)
        log.info("pod_unboosted", pod=pod.key, containers=list(plan.expired), resized=bool(plan.changes))
