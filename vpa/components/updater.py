"""The updater loop: read the cluster, ask `vpa.logic.updater.plan` for a plan, act on it (spec §4).

Owns: the leader-elected loop (`run(ctx)` → `Updater.run_forever()`, one `run_once()` per
`--updater-interval`, each bounded by the interval as upstream's context timeout), and per loop:
1. the admission-controller status Lease check (`--use-admission-controller-status`): stale or unreadable
   ⇒ the whole loop is skipped;
2. the VPAs the updater acts for (modes that update running pods, with a recommendation);
3. live pods (scheduled, not Succeeded/Failed, not terminating) matched to their controlling VPA: the
   pod's direct controller (the `owner` index) is resolved to its top-most controller through
   `vpa.kube.controllers`, the VPAs targeting it come from the `target` index, and among those whose target
   selector matches the pod the oldest wins (`vpa.logic.matching.controlling_vpa`);
4. forgetting in-place memory (`ResizeAttempt`s and `InfeasibleAttempts`) of pods that are gone;
5. per VPA: configured replicas of each direct controller, the LimitRange-capped recommendation per pod
   (`vpa.logic.capping`, memoised per distinct container-resources shape), `plan_vpa`;
6. acting on each plan's `actions` in order — resizes (`pods/<name>/resize`, then `vpaInPlaceUpdated`)
   through the in-place token bucket, evictions (Eviction API) through the eviction token bucket — with
   bounded concurrency; recording what happened (`ResizeAttempt`, infeasible records, events, metrics).

CPU startup boosts (gate `CPUStartupBoost`) end in a companion loop, `run_unboost_forever()`, started by
`run_forever()`: it looks only at pods carrying a `vpaCpuStartupBoost/…` annotation (a pod-cache index),
asks `vpa.logic.updater.unboost` what ends each boost, resizes in place through the in-place token bucket
and then removes the annotations. It wakes at the earliest boost expiry and at least every `UNBOOST_POLL_S`,
so a boost ends within about a second of expiring, independent of `--updater-interval`. It never evicts; a
failed unboost (reason `UnboostError`) is retried one updater interval later.

Never adds an action of its own: what is evicted is exactly the plan's `Action.EVICT` decisions (so
`InPlace` VPAs are never evicted, on any error path); a failed resize is remembered (`rejected=True`) and
the *next* plan decides whether `InPlaceOrRecreate` falls back to eviction.

Event-loop budget (DESIGN §6): matching, recommendation capping and planning pace themselves with the
loop's shared slices (`vpa.aio.pacing`); a VPA
with more than `plan_in_thread_above` pods is planned in a worker thread (the plan is pure and its inputs
immutable snapshots), so one huge workload cannot stall the loop; actuation is I/O.

Latency metrics are measured with `time.perf_counter` (real elapsed time, not the injected clock, which
in tests and the simulator is virtual and would always read 0).

Must not: import other components, decide which pods to update (that is `vpa.logic`), build raw API
requests (that is `vpa.kube.actuating`), or block the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vpa.aio.cancelling import cancel_and_wait
from vpa.aio.pacing import Slices
from vpa.aio.shards import ShardedSet
from vpa.components.context import ComponentContext
from vpa.components.triggering import Trigger
from vpa.kube.actuating import Actuator, Outcome, Result
from vpa.kube.controllers import KINDS, ControllerCaches
from vpa.kube.eventing import EventRecorder, ObjectRef
from vpa.kube.leasing import API_CALL_MIN_WALL_S, DeadlineExceeded, LeaseFreshness, call_with_deadline
from vpa.kube.ratelimiting import TokenBucket
from vpa.logic.capping import cap_pod_recommendations
from vpa.logic.limitranges import NamespaceLimits, namespace_limits
from vpa.logic.matching import controller_key, controlling_vpa
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import (
    Action,
    PodDecision,
    Reason,
    ResizeAttempt,
    in_place_updated_patch,
    resize_patch,
)
from vpa.logic.updater.plan import PassInputs, VpaPlan, plan_vpa
from vpa.logic.updater.priority import ObservedCache
from vpa.logic.updater.reactive import prompts_in_place, resizes_only
from vpa.logic.updater.restrictions import GroupKey
from vpa.logic.updater.transitions import Transitions
from vpa.logic.updater.unboost import UnboostPlan, blocked, plan_unboost
from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import VPA_API_VERSION, Recommendation, RecommendedContainerResources, UpdateMode, VpaView

log = structlog.get_logger(__name__)

COMPONENT: Final = "updater"
EVENT_SOURCE: Final = "vpa-updater"

# Event reasons and messages (spec §4.11), all type Normal.
EVICTED_BY_VPA: Final = "EvictedByVPA"
EVICTED_BY_VPA_MESSAGE: Final = "Pod was evicted by VPA Updater to apply resource recommendation."
EVICTED_POD: Final = "EvictedPod"
IN_PLACE_RESIZED: Final = "InPlaceResizedByVPA"
IN_PLACE_RESIZED_MESSAGE: Final = "Pod was resized in place by VPA Updater."
IN_PLACE_SKIPPED: Final = "InPlaceResizeSkipped"
IN_PLACE_SKIPPED_MESSAGE: Final = (
    "Previously recorded in-place update was infeasible, current recommendation is not lower than "
    "previous, skipping resize"
)

# Failure reasons of the upstream counters (spec §6.2).
EVICTION_ERROR: Final = "EvictionError"
IN_PLACE_UPDATE_ERROR: Final = "InPlaceUpdateError"
IN_PLACE_UPDATE_INFEASIBLE: Final = "InPlaceUpdateInfeasible"

SKIPPED_ADMISSION_STALE: Final = "AdmissionControllerStatusStale"
IN_PLACE_GATE_OFF: Final = "InPlaceFeatureGateOff"
IN_PLACE_GATE_OFF_MESSAGE: Final = (
    "updateMode InPlace needs the InPlace feature gate of the updater (--feature-gates=InPlace=true); "
    "no pod of this VPA is updated until it is enabled or the mode is changed."
)

UNBOOST_ERROR: Final = "UnboostError"

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

_LATENCY_BUCKETS: Final = (
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
_MAX_SIZE_LOG2: Final = 20
_DEAD_PHASES: Final = frozenset({"Succeeded", "Failed"})


def vpa_size_log2(pods: int) -> int:
    """Upstream's `vpa_size_log2` label: floor(log2(pods)), 0 for 0 or 1 pod, capped at 20."""
    if pods <= 1:
        return 0
    return min(pods.bit_length() - 1, _MAX_SIZE_LOG2)


def is_live(pod: PodView) -> bool:
    """Upstream's pod lister filter: scheduled, not finished, not being deleted."""
    return bool(pod.node_name) and pod.phase not in _DEAD_PHASES and pod.deletion_timestamp is None


def acts_for(vpa: VpaView) -> bool:
    """VPAs the updater considers when choosing a pod's controlling VPA: modes that update running pods.

    `InPlace` VPAs stay in even with the gate off (the plan then skips them), so a newer `Recreate` VPA on
    the same target can never take their pods over and evict them.
    """
    return vpa.deletion_timestamp is None and vpa.effective_mode.updates_running_pods


class UpdaterMetrics:
    """The `vpa_updater_*` series of spec §6.2 on the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        size_mode = ["vpa_size_log2", "update_mode"]
        per_vpa = ["vpa_name", "vpa_namespace"]
        self.controlled = Gauge(
            "vpa_updater_controlled_pods_total",
            "Pods controlled by VPAs the updater acts for.",
            size_mode,
            registry=registry,
        )
        self.evictable = Gauge(
            "vpa_updater_evictable_pods_total",
            "Pods the last loop planned to evict.",
            size_mode,
            registry=registry,
        )
        self.vpas_with_evictable = Gauge(
            "vpa_updater_vpas_with_evictable_pods_total",
            "VPAs with at least one pod planned for eviction.",
            size_mode,
            registry=registry,
        )
        self.vpas_with_evicted = Gauge(
            "vpa_updater_vpas_with_evicted_pods_total",
            "VPAs with at least one pod evicted in the last loop.",
            size_mode,
            registry=registry,
        )
        self.evicted = Counter(
            "vpa_updater_evicted_pods_total", "Pods evicted.", [*size_mode, *per_vpa], registry=registry
        )
        self.failed_evictions = Counter(
            "vpa_updater_failed_eviction_attempts_total",
            "Eviction attempts that failed.",
            [*size_mode, "reason", *per_vpa],
            registry=registry,
        )
        self.in_place_updatable = Gauge(
            "vpa_updater_in_place_updatable_pods_total",
            "Pods the last loop planned to resize in place.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.vpas_with_in_place_updatable = Gauge(
            "vpa_updater_vpas_with_in_place_updatable_pods_total",
            "VPAs with at least one pod planned for an in-place resize.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.vpas_with_in_place_updated = Gauge(
            "vpa_updater_vpas_with_in_place_updated_pods_total",
            "VPAs with at least one pod resized in place in the last loop.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.in_place_updated = Counter(
            "vpa_updater_in_place_updated_pods_total",
            "Pods resized in place.",
            ["vpa_size_log2", *per_vpa],
            registry=registry,
        )
        self.failed_in_place = Counter(
            "vpa_updater_failed_in_place_update_attempts_total",
            "In-place resize attempts that failed.",
            ["vpa_size_log2", "reason", *per_vpa],
            registry=registry,
        )
        self.infeasible_skips = Counter(
            "vpa_updater_in_place_infeasible_skip_pods_total",
            "Pods skipped because a recorded infeasible resize is not lower than the recommendation.",
            ["vpa_size_log2", *per_vpa],
            registry=registry,
        )
        self.latency = Histogram(
            "vpa_updater_execution_latency_seconds",
            "Time spent in the steps of one updater loop.",
            ["step"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )

    def reset_gauges(self) -> None:
        for gauge in (
            self.controlled,
            self.evictable,
            self.vpas_with_evictable,
            self.vpas_with_evicted,
            self.in_place_updatable,
            self.vpas_with_in_place_updatable,
            self.vpas_with_in_place_updated,
        ):
            gauge.clear()


@dataclass(slots=True)
class _Work:
    """One VPA of this loop: its pods, size label, plan and what was done."""

    vpa: VpaView
    pods: list[PodView] = field(default_factory=list)
    size: str = "0"
    plan: VpaPlan | None = None
    resized: int = 0
    evicted: int = 0


@dataclass
class LoopReport:
    """What one `run_once()` did (for tests, logs and the benchmark)."""

    skipped: str | None = None
    vpas: int = 0
    pods: int = 0
    plans: list[VpaPlan] = field(default_factory=list)
    resized: list[str] = field(default_factory=list)
    """`namespace/name` of pods resized in place (full or partial) this loop."""
    evicted: list[str] = field(default_factory=list)
    failed: list[tuple[str, Outcome, str]] = field(default_factory=list)
    """(pod, outcome, message) of every action that did not succeed."""

    def decisions(self) -> dict[str, PodDecision]:
        return {d.pod.key: d for plan in self.plans for d in plan.decisions}


@dataclass
class UnboostReport:
    """What one `unboost_once()` did."""

    unboosted: list[str] = field(default_factory=list)
    """`namespace/name` of pods whose expired boosts were ended (resized and annotation removed)."""
    failed: list[tuple[str, Outcome, str]] = field(default_factory=list)
    next_expiry: float | None = None
    """The earliest expiry of a boost still running (None: none known)."""


def _shape_key(pod: PodView) -> tuple[object, ...]:
    """What the capped recommendation of a pod depends on besides the VPA and namespace limits."""
    return tuple((c.name, pod.current_requests(c.name), pod.current_limits(c.name)) for c in pod.containers)


def processed_recommendation(pod: PodView, vpa: VpaView, limits: NamespaceLimits) -> Recommendation | None:
    """The VPA's recommendation for `pod` after LimitRange and policy capping (spec §4.4 step 1)."""
    capped = cap_pod_recommendations(pod, vpa, limits)
    raw = vpa.recommendation
    out: list[RecommendedContainerResources] = []
    for container, rec in zip(pod.containers, capped, strict=True):
        if rec is None:
            continue
        original = raw.for_container(container.name) if raw is not None else None
        out.append(
            RecommendedContainerResources(
                container.name,
                rec.target,
                rec.lower_bound,
                rec.upper_bound,
                original.uncapped_target if original is not None else Resources(),
            )
        )
    return Recommendation(tuple(out)) if out else None


class Updater:
    """One updater. `run_once()` is one loop; `run_forever()` repeats it every `--updater-interval`."""

    def __init__(
        self,
        ctx: ComponentContext,
        controllers: ControllerCaches,
        *,
        events: EventRecorder | None = None,
        lease: LeaseFreshness | None = None,
        concurrency: int = 16,
        plan_in_thread_above: int = 1000,
        metrics: UpdaterMetrics | None = None,
        trigger: Trigger | None = None,
    ) -> None:
        self.ctx = ctx
        # Fired by `watch_recommendations` (registered once per process); None: tick-driven only.
        self.trigger = trigger
        self._passes = asyncio.Lock()  # a prompt pass never overlaps a loop
        self.settings: UpdaterSettings = ctx.settings.updater
        self.gates = ctx.settings.feature_gates
        self.controllers = controllers
        self.events = events if events is not None else ctx.events
        self.clock = ctx.clock
        s = self.settings
        if lease is None and s.use_admission_controller_status:
            lease = LeaseFreshness(
                ctx.client,
                ctx.clock,
                namespace=s.admission_controller_status_lease_namespace,
                name=s.admission_controller_status_lease_name,
                timeout_s=s.admission_controller_status_lease_timeout_s,
            )
        self.lease = lease if s.use_admission_controller_status else None
        # Two independent buckets from the same flags, as upstream (≤ 0 disables both).
        self.eviction_limiter = TokenBucket(s.eviction_rate_limit, s.eviction_rate_burst, ctx.clock)
        self.in_place_limiter = TokenBucket(s.eviction_rate_limit, s.eviction_rate_burst, ctx.clock)
        self.actuator = Actuator(ctx.client)
        self.metrics = metrics if metrics is not None else UpdaterMetrics(ctx.registry)
        self.attempts: dict[str, ResizeAttempt] = {}
        self.infeasible = InfeasibleAttempts()
        self._concurrency = max(1, concurrency)
        self._plan_in_thread_above = plan_in_thread_above
        # Conditions that hold loop after loop are logged (and recorded as Events) when they change only.
        self._loops = 0
        self.gate_off: Transitions[str] = Transitions()
        self.admission_stale: Transitions[str] = Transitions()
        self._unboost_retry_at: dict[str, float] = {}

    # ------------------------------------------------------------------------------------ the loop

    async def run_forever(self) -> None:
        """Loop every `--updater-interval` until cancelled; each loop is cut off after one interval."""
        interval = self.settings.updater_interval_s
        self.ctx.health.add_activity(COMPONENT, 5 * interval)
        unboosting = None
        if self.gates.cpu_startup_boost:
            unboosting = asyncio.ensure_future(self.run_unboost_forever())
        try:
            await self._loop_forever(interval)
        finally:
            if unboosting is not None:
                await cancel_and_wait((unboosting,))

    async def _loop_forever(self, interval: float) -> None:
        while True:
            started = self.clock.monotonic()
            if self.trigger is not None:
                self.trigger.clear()  # this loop reads every VPA as it is now
            try:
                # At least API_CALL_MIN_WALL_S of real time: on a fast virtual clock (`--clock=sim`) one
                # interval is milliseconds, less than the loop's API calls take.
                await call_with_deadline(self.clock, interval, self.run_once(),
                                         min_wall_s=API_CALL_MIN_WALL_S)
            except asyncio.CancelledError:
                raise
            except DeadlineExceeded:
                log.warning("updater_loop_timed_out", interval_s=interval)
            except Exception:
                log.exception("updater_loop_failed")
            self.ctx.health.record_activity(COMPONENT)
            await self._until_next_tick(started + interval)

    async def _until_next_tick(self, deadline: float) -> None:
        """Sleep until `deadline` (monotonic); with a trigger, run a prompt pass whenever it fires."""
        while (remaining := deadline - self.clock.monotonic()) > 0:
            if self.trigger is None:
                await self.clock.sleep(remaining)
                return
            keys = await self.trigger.wait(remaining)
            if not keys:
                continue
            try:
                await call_with_deadline(self.clock, self.settings.updater_interval_s, self.run_prompt(keys),
                                         min_wall_s=API_CALL_MIN_WALL_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("updater_prompt_pass_failed")

    async def run_once(self) -> LoopReport:
        async with self._passes:
            try:
                return await self._run_once()
            finally:
                self._loops += 1

    async def run_prompt(self, keys: Iterable[str]) -> LoopReport:
        """A prompt pass for the VPAs `keys` (`namespace/name`) whose recommendation changed: the same
        matching, capping and plan as a loop, but only their in-place resizes are executed
        (`vpa.logic.updater.reactive.resizes_only`); evictions, gauges and the forgetting of gone pods stay
        with the loop."""
        async with self._passes:
            report = LoopReport()
            if self.lease is not None and not await self.lease.is_fresh():
                report.skipped = SKIPPED_ADMISSION_STALE
                return report
            # Every active VPA takes part in matching, so a pod still goes to its controlling VPA.
            active = {vpa.key: vpa for vpa in self.ctx.vpas.list() if acts_for(vpa)}
            wanted = {key for key in keys if key in active and active[key].effective_mode.resizes_in_place}
            if not wanted:
                return report
            work, _ = await self._match(active)
            work = {key: entry for key, entry in work.items() if key in wanted}
            await self._plan(work, report)
            for entry in work.values():
                if entry.plan is not None:
                    entry.plan = resizes_only(entry.plan)
            await self._execute(work, report)
            log.info("updater_prompt_pass_done", vpas=sorted(wanted), resized=len(report.resized),
                     failed=len(report.failed))
            return report

    async def _run_once(self) -> LoopReport:
        report = LoopReport()
        loop_started = time.perf_counter()
        self.metrics.reset_gauges()
        if self.lease is not None:
            lease = f"{self.lease.namespace}/{self.lease.name}"
            stale = not await self.lease.is_fresh()
            changes = self.admission_stale.update([lease] if stale else [])
            if changes.entered:
                # At start the admission controller (often this very process) has not renewed it yet.
                emit = log.info if self._loops == 0 else log.warning
                emit("updater_loop_skipped_admission_controller_status_stale", lease=lease,
                     note="evictions and resizes wait until the admission controller renews it")
            for _, loops in changes.left:
                log.info("updater_admission_controller_status_fresh_again", lease=lease, skipped_loops=loops)
            if stale:
                report.skipped = SKIPPED_ADMISSION_STALE
                return report

        step = time.perf_counter()
        active = {vpa.key: vpa for vpa in self.ctx.vpas.list() if acts_for(vpa)}
        self._observe("ListVPAs", step)
        if not active:
            self.attempts.clear()
            self.infeasible = InfeasibleAttempts()
            self._observe("total", loop_started)
            return report

        step = time.perf_counter()
        work, live_uids = await self._match(active)
        self._forget_missing(live_uids)
        self._observe("ListPods", step)

        step = time.perf_counter()
        await self._plan(work, report)
        self._observe("FilterPods", step)
        self._report_gate_off(report)

        step = time.perf_counter()
        await self._execute(work, report)
        self._observe("EvictPods", step)

        self._publish_gauges(work)
        self._observe("total", loop_started)
        changed = report.resized or report.evicted or report.failed
        (log.info if changed else log.debug)(
            "updater_loop_done",
            vpas=report.vpas,
            pods=report.pods,
            resized=len(report.resized),
            evicted=len(report.evicted),
            failed=len(report.failed),
            infeasible_records=len(self.infeasible),
        )
        return report

    def _report_gate_off(self, report: LoopReport) -> None:
        """VPAs in `InPlace` mode skipped because the gate is off: a warning and a Warning Event on the
        VPA when one starts being skipped, an info line when it stops (mode changed, gate on, deleted);
        nothing in between, however many loops it lasts."""
        gate_off = Reason.IN_PLACE_GATE_OFF
        skipped = {plan.vpa.key: plan.vpa for plan in report.plans if plan.skip_reason is gate_off}
        changes = self.gate_off.update(skipped)
        for key in changes.entered:
            log.warning("vpa_skipped_in_place_gate_off", vpa=key,
                        fix="start vpa run with --feature-gates=InPlace=true, or use InPlaceOrRecreate")
            self.events.warning(_vpa_ref(skipped[key]), IN_PLACE_GATE_OFF, IN_PLACE_GATE_OFF_MESSAGE)
        for key, loops in changes.left:
            log.info("vpa_no_longer_skipped_in_place_gate_off", vpa=key, skipped_loops=loops)

    def _observe(self, step: str, started: float) -> None:
        self.metrics.latency.labels(step=step).observe(time.perf_counter() - started)

    # ------------------------------------------------------------------------------- unboosting

    async def run_unboost_forever(self) -> None:
        """End CPU startup boosts as they expire (gate `CPUStartupBoost`) until cancelled."""
        while True:
            wake: float | None = None
            try:
                wake = (await self.unboost_once()).next_expiry
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("unboost_pass_failed")
            delay = UNBOOST_POLL_S
            if wake is not None:
                delay = min(delay, max(0.0, wake - self.clock.now()))
            await asyncio.sleep(_UNBOOST_MIN_WALL_S)
            await self.clock.sleep(delay)

    async def unboost_once(self) -> UnboostReport:
        """One pass over the boosted pods: end every expired boost (spec §4.9)."""
        report = UnboostReport()
        pods = self.ctx.pods
        if not pods.has_index(BOOSTED_INDEX):
            pods.add_index(BOOSTED_INDEX, boosted_index_keys)
        boosted = [pod for pod in pods.by_index(BOOSTED_INDEX, _BOOSTED) if is_live(pod)]
        uids = {pod.uid for pod in boosted}
        for uid in [uid for uid in self._unboost_retry_at if uid not in uids]:
            del self._unboost_retry_at[uid]
        now = self.clock.now()
        limits_by_namespace: dict[str, NamespaceLimits] = {}
        for pod in boosted:
            if now < self._unboost_retry_at.get(pod.uid, now) or blocked(pod) is not None:
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
                await self._unboost(pod, vpa, plan, report)
        return report

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
            (vpa, self._selector(pod.namespace, top[0], top[1]))
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
                self._unboost_retry_at[pod.uid] = retry_at
                self.metrics.failed_in_place.labels(
                    vpa_size_log2=size, reason=UNBOOST_ERROR, vpa_name=vpa_name, vpa_namespace=vpa_namespace
                ).inc()
                log.warning("pod_unboost_failed", pod=pod.key, containers=list(plan.expired),
                            outcome=result.outcome.value, status=result.status, error=result.message)
                return
            self.attempts[pod.uid] = ResizeAttempt(
                patched_at, rejected=False, disruptive=any(c.disruptive for c in plan.changes)
            )
            self.events.normal(_pod_ref(pod), IN_PLACE_RESIZED, IN_PLACE_RESIZED_MESSAGE)
            self.metrics.in_place_updated.labels(
                vpa_size_log2=size, vpa_name=vpa_name, vpa_namespace=vpa_namespace
            ).inc()
        marked = await self.actuator.mark_in_place_updated(pod.namespace, pod.name, plan.annotation_patch())
        if not marked.ok:
            report.failed.append((pod.key, marked.outcome, marked.message))
            if marked.outcome is not Outcome.GONE:
                self._unboost_retry_at[pod.uid] = retry_at
                log.warning("boost_annotation_removal_failed", pod=pod.key, error=marked.message)
            return
        report.unboosted.append(pod.key)
        log.info("pod_unboosted", pod=pod.key, containers=list(plan.expired), resized=bool(plan.changes))

    # ----------------------------------------------------------------------------------- matching

    def _selector(self, namespace: str, kind: str, name: str) -> Selector | None:
        if kind not in KINDS:
            # A custom scalable controller: its pods are matched by ownership alone (upstream reads the
            # selector from its scale subresource).
            return Selector.everything()
        return self.controllers.selector(namespace, kind, name)

    async def _match(self, active: Mapping[str, VpaView]) -> tuple[dict[str, _Work], ShardedSet[str]]:
        """VPA key → its live pods; and the uids of every live pod in the cache (sharded, `vpa.aio.shards`: a
        set of 50,000 grows in one long step)."""
        pods_cache = self.ctx.pods
        live_uids: ShardedSet[str] = ShardedSet()
        work: dict[str, _Work] = {}
        slices = Slices()
        for owner in pods_cache.index_values("owner"):
            members = pods_cache.by_index("owner", owner)
            namespace, kind, name = owner.split("/", 2)
            top = self.controllers.top_most(namespace, kind, name)
            candidates: list[tuple[VpaView, Selector | None]] = []
            key = None
            if top is not None:
                key = controller_key(namespace, top[0], top[1])
                for vpa in self.ctx.vpas.by_index("target", key):
                    if vpa.key in active:
                        candidates.append((active[vpa.key], self._selector(namespace, top[0], top[1])))
            for pod in members:
                if not is_live(pod):
                    continue
                live_uids.add(pod.uid)
                if not candidates:
                    continue
                chosen = controlling_vpa(namespace, pod.labels, key, candidates)
                if chosen is not None:
                    entry = work.get(chosen.key)
                    if entry is None:
                        entry = work[chosen.key] = _Work(chosen)
                    # Gate NativeSidecar: sidecars are weighed, capped and resized like containers.
                    entry.pods.append(pod.with_native_sidecars() if self.gates.native_sidecar else pod)
            if slices.due():
                await slices.pause()
        return work, live_uids

    def _forget_missing(self, live_uids: ShardedSet[str]) -> None:
        self.infeasible = self.infeasible.forget_missing(live_uids)
        for uid in [uid for uid in self.attempts if uid not in live_uids]:
            del self.attempts[uid]

    # ----------------------------------------------------------------------------------- planning

    def _replicas(self, pods: Iterable[PodView]) -> dict[GroupKey, int]:
        out: dict[GroupKey, int] = {}
        for pod in pods:
            owner = pod.owner
            if owner is None:
                continue
            key = GroupKey(pod.namespace, owner.kind, owner.name)
            if key in out:
                continue
            replicas = self.controllers.configured_replicas(pod.namespace, owner.kind, owner.name)
            if replicas is not None:
                out[key] = replicas
        return out

    async def _recommendations(
        self, vpa: VpaView, pods: list[PodView], limits: NamespaceLimits, slices: Slices
    ) -> dict[str, Recommendation | None]:
        memo: dict[tuple[object, ...], Recommendation | None] = {}
        out: dict[str, Recommendation | None] = {}
        for pod in pods:
            shape = _shape_key(pod)
            if shape not in memo:
                memo[shape] = processed_recommendation(pod, vpa, limits)
            out[pod.uid] = memo[shape]
            if slices.due():
                await slices.pause()
        return out

    async def _plan(self, work: dict[str, _Work], report: LoopReport) -> None:
        inputs_base = PassInputs(
            now=self.clock.now(),
            settings=self.settings,
            gates=self.gates,
            attempts=MappingProxyType(dict(self.attempts)),
            infeasible=self.infeasible,
        )
        limits_by_namespace: dict[str, NamespaceLimits] = {}
        observed: ObservedCache = {}
        slices = Slices()
        for entry in work.values():
            vpa = entry.vpa
            entry.size = str(vpa_size_log2(len(entry.pods)))
            report.vpas += 1
            report.pods += len(entry.pods)
            if vpa.recommendation is None or vpa.recommendation.is_empty():
                continue
            limits = limits_by_namespace.get(vpa.namespace)
            if limits is None:
                limits = limits_by_namespace[vpa.namespace] = namespace_limits(
                    self.controllers.limit_ranges(vpa.namespace)
                )
            recs = await self._recommendations(vpa, entry.pods, limits, slices)
            inputs = PassInputs(
                now=inputs_base.now,
                settings=inputs_base.settings,
                gates=inputs_base.gates,
                replicas=MappingProxyType(self._replicas(entry.pods)),
                attempts=inputs_base.attempts,
                infeasible=inputs_base.infeasible,
            )
            recommendation_for = _lookup(recs)
            if len(entry.pods) > self._plan_in_thread_above:
                plan = await asyncio.to_thread(
                    plan_vpa, vpa, entry.pods, inputs, recommendation_for=recommendation_for
                )
                slices.restart()
            else:
                plan = plan_vpa(
                    vpa, entry.pods, inputs, recommendation_for=recommendation_for, observed_cache=observed
                )
                if slices.due():
                    await slices.pause()
            entry.plan = plan
            report.plans.append(plan)
            if plan.skip_reason is Reason.IN_PLACE_GATE_OFF:
                continue  # reported once per VPA by `_report_gate_off`
            for uid, attempt in plan.record_infeasible:
                self.infeasible = self.infeasible.record(uid, attempt)
            for decision in plan.skipped:
                if decision.reason is Reason.INFEASIBLE_CACHED:
                    self.events.normal(_pod_ref(decision.pod), IN_PLACE_SKIPPED, IN_PLACE_SKIPPED_MESSAGE)
                    self.metrics.infeasible_skips.labels(
                        vpa_size_log2=entry.size, vpa_name=vpa.name, vpa_namespace=vpa.namespace
                    ).inc()

    # ---------------------------------------------------------------------------------- actuation

    async def _execute(self, work: dict[str, _Work], report: LoopReport) -> None:
        """Act on every plan's actions in order: each waits for its bucket's token, then runs with at most
        `concurrency` API calls in flight (the plans already charged the disruption budgets)."""
        slots = asyncio.Semaphore(self._concurrency)
        tasks: set[asyncio.Task[None]] = set()

        async def guarded(action: Coroutine[Any, Any, None]) -> None:
            try:
                await action
            finally:
                slots.release()

        try:
            for entry in work.values():
                plan = entry.plan
                if plan is None or plan.skip_reason is not None:
                    continue
                self._init_counters(entry, plan)
                for decision in plan.actions:
                    if decision.action is Action.EVICT and not plan.mode.evicts:
                        continue  # the plan guarantees this never happens; a pod is not worth the risk
                    await slots.acquire()
                    try:
                        if decision.action is Action.EVICT:
                            await self.eviction_limiter.acquire()
                            action = self._evict(entry, decision, report)
                        else:
                            await self.in_place_limiter.acquire()
                            action = self._resize(entry, decision, report)
                    except BaseException:
                        slots.release()
                        raise
                    task = asyncio.ensure_future(guarded(action))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    def _init_counters(self, entry: _Work, plan: VpaPlan) -> None:
        """Per-VPA counters start at 0, as upstream initialises them every loop."""
        vpa = entry.vpa
        if plan.mode.resizes_in_place:
            self.metrics.in_place_updated.labels(
                vpa_size_log2=entry.size, vpa_name=vpa.name, vpa_namespace=vpa.namespace
            )
        if plan.mode.evicts:
            self.metrics.evicted.labels(
                vpa_size_log2=entry.size,
                update_mode=plan.mode.value,
                vpa_name=vpa.name,
                vpa_namespace=vpa.namespace,
            )

    async def _resize(self, entry: _Work, decision: PodDecision, report: LoopReport) -> None:
        pod, vpa, mode = decision.pod, entry.vpa, entry.vpa.effective_mode
        try:
            operations = resize_patch(pod, decision.changes, decision.pod_level)
        except ValueError as err:  # nothing to change: the plan never asks for this
            log.warning("resize_without_changes", pod=pod.key, error=str(err))
            return
        patched_at = self.clock.now()
        result = await self.actuator.resize(pod.namespace, pod.name, operations)
        if result.ok:
            self.attempts[pod.uid] = ResizeAttempt(patched_at, rejected=False, disruptive=decision.disruptive)
            self.infeasible = self.infeasible.clear(pod.uid)
            marked = await self.actuator.mark_in_place_updated(
                pod.namespace, pod.name, in_place_updated_patch()
            )
            if not marked.ok:
                log.warning("annotate_in_place_updated_failed", pod=pod.key, error=marked.message)
            self.events.normal(_pod_ref(pod), IN_PLACE_RESIZED, IN_PLACE_RESIZED_MESSAGE)
            self.metrics.in_place_updated.labels(
                vpa_size_log2=entry.size, vpa_name=vpa.name, vpa_namespace=vpa.namespace
            ).inc()
            entry.resized += 1
            report.resized.append(pod.key)
            log.info("pod_resized_in_place", decision=decision.explain())
            return
        report.failed.append((pod.key, result.outcome, result.message))
        if result.outcome is Outcome.GONE:
            return
        reason = IN_PLACE_UPDATE_ERROR
        if result.outcome is Outcome.INFEASIBLE:
            self.infeasible = self.infeasible.record(pod.uid, decision.attempted())
            if mode is UpdateMode.IN_PLACE:
                reason = IN_PLACE_UPDATE_INFEASIBLE
        if result.outcome in (Outcome.INFEASIBLE, Outcome.REJECTED):
            # The next plan sees the refusal: InPlaceOrRecreate may then evict (Recreate rules permitting).
            self.attempts[pod.uid] = ResizeAttempt(patched_at, rejected=True, disruptive=decision.disruptive)
        self.metrics.failed_in_place.labels(
            vpa_size_log2=entry.size, reason=reason, vpa_name=vpa.name, vpa_namespace=vpa.namespace
        ).inc()
        log.warning(
            "pod_resize_failed",
            decision=decision.explain(),
            outcome=result.outcome.value,
            status=result.status,
            error=result.message,
        )

    async def _evict(self, entry: _Work, decision: PodDecision, report: LoopReport) -> None:
        pod, vpa = decision.pod, entry.vpa
        result: Result = await self.actuator.evict(pod.namespace, pod.name, pod.uid)
        if result.ok:
            self.events.normal(_pod_ref(pod), EVICTED_BY_VPA, EVICTED_BY_VPA_MESSAGE)
            self.events.normal(
                _vpa_ref(vpa),
                EVICTED_POD,
                f"VPA Updater evicted Pod {pod.name} to apply resource recommendation.",
            )
            self.metrics.evicted.labels(
                vpa_size_log2=entry.size,
                update_mode=entry.vpa.effective_mode.value,
                vpa_name=vpa.name,
                vpa_namespace=vpa.namespace,
            ).inc()
            entry.evicted += 1
            report.evicted.append(pod.key)
            log.info("pod_evicted", decision=decision.explain())
            return
        report.failed.append((pod.key, result.outcome, result.message))
        if result.outcome is Outcome.GONE:
            return
        self.metrics.failed_evictions.labels(
            vpa_size_log2=entry.size,
            update_mode=entry.vpa.effective_mode.value,
            reason=EVICTION_ERROR,
            vpa_name=vpa.name,
            vpa_namespace=vpa.namespace,
        ).inc()
        log.info(
            "pod_eviction_failed",
            decision=decision.explain(),
            outcome=result.outcome.value,
            status=result.status,
            error=result.message,
        )

    # ------------------------------------------------------------------------------------ gauges

    def _publish_gauges(self, work: dict[str, _Work]) -> None:
        m = self.metrics
        for entry in work.values():
            mode = entry.vpa.effective_mode.value
            size = entry.size
            m.controlled.labels(vpa_size_log2=size, update_mode=mode).inc(len(entry.pods))
            plan = entry.plan
            if plan is None or plan.skip_reason is not None:
                continue
            evictable = sum(1 for d in plan.actions if d.action is Action.EVICT)
            updatable = len(plan.actions) - evictable
            m.evictable.labels(vpa_size_log2=size, update_mode=mode).inc(evictable)
            if evictable:
                m.vpas_with_evictable.labels(vpa_size_log2=size, update_mode=mode).inc()
            if entry.evicted:
                m.vpas_with_evicted.labels(vpa_size_log2=size, update_mode=mode).inc()
            if plan.mode.resizes_in_place:
                m.in_place_updatable.labels(vpa_size_log2=size).inc(updatable)
                if updatable:
                    m.vpas_with_in_place_updatable.labels(vpa_size_log2=size).inc()
                if entry.resized:
                    m.vpas_with_in_place_updated.labels(vpa_size_log2=size).inc()


def _lookup(recs: Mapping[str, Recommendation | None]) -> Callable[[PodView], Recommendation | None]:
    def recommendation_for(pod: PodView) -> Recommendation | None:
        return recs.get(pod.uid)

    return recommendation_for


def _pod_ref(pod: PodView) -> ObjectRef:
    return ObjectRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)


def _vpa_ref(vpa: VpaView) -> ObjectRef:
    return ObjectRef(
        kind="VerticalPodAutoscaler",
        namespace=vpa.namespace,
        name=vpa.name,
        uid=vpa.uid,
        api_version=VPA_API_VERSION,
    )


def watch_recommendations(ctx: ComponentContext) -> Trigger | None:
    """With `--in-place-on-recommendation`, a trigger fired (with the VPA's key) by every VPA add or update
    that `vpa.logic.updater.reactive.prompts_in_place` says deserves a prompt pass; registered on the shared
    VPA cache, so call it once per process."""
    settings = ctx.settings.updater
    if not settings.in_place_on_recommendation:
        return None
    trigger = Trigger(ctx.clock, settings.in_place_reaction_delay_s)

    def on_update(old: VpaView, new: VpaView) -> None:
        if prompts_in_place(old, new):
            trigger.fire(new.key)

    def on_add(new: VpaView) -> None:
        if prompts_in_place(None, new):
            trigger.fire(new.key)

    ctx.vpas.on_update(on_update)
    ctx.vpas.on_add(on_add)
    return trigger


def build(ctx: ComponentContext) -> Callable[[], Awaitable[None]]:
    """`ComponentSpec.build` for the updater: metrics and the recommendation trigger set up once, a fresh
    updater per leadership term."""
    metrics = UpdaterMetrics(ctx.registry)
    trigger = watch_recommendations(ctx)

    async def term() -> None:
        if trigger is not None:
            trigger.clear()  # changes seen while not leading are covered by the term's first loop
        await run(ctx, metrics=metrics, trigger=trigger)

    return term


async def run(ctx: ComponentContext, *, metrics: UpdaterMetrics | None = None,
              trigger: Trigger | None = None) -> None:
    """The updater's elected work: its event recorder, then the loop. The controller/LimitRange caches are
    the process's shared ones (synced before this starts); a context without them gets caches of its own."""
    events = EventRecorder(ctx.client, ctx.clock, component=EVENT_SOURCE)
    background = [asyncio.ensure_future(events.run())]
    controllers = ctx.controllers
    if controllers is None:
        namespace = ctx.settings.common.vpa_object_namespace or None
        controllers = ControllerCaches(ctx.client, ctx.clock, namespace=namespace)
        background.append(asyncio.ensure_future(controllers.run()))
    try:
        await controllers.wait_synced()
        await Updater(ctx, controllers, events=events, metrics=metrics, trigger=trigger).run_forever()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(events.flush(), timeout=1.0)
        await cancel_and_wait(background)
