"""The updater loop: read the cluster, ask `vpa.logic.updater.plan` for a plan, act on it (spec §4).

Owns: `Updater`, the leader-elected loop (one `run_once()` per `--updater-interval`, each bounded by the
interval as upstream's context timeout), and per loop:
1. the admission-controller status Lease check (`--use-admission-controller-status`): stale or unreadable
   => the whole loop is skipped;
2. the VPAs the updater acts for (modes that update running pods, with a recommendation);
3. live pods matched to their controlling VPA: the pod's direct controller (the `owner` index) is resolved
   to its top-most controller through `vpa.kube.controllers`, the VPAs targeting it come from the `target`
   index, and among those whose target selector matches the pod the oldest wins
   (`vpa.logic.matching.controlling_vpa`);
4. forgetting in-place memory (`ResizeAttempt`s and `InfeasibleAttempts`) of pods that are gone;
5. per VPA: configured replicas of each direct controller, the LimitRange-capped recommendation per pod
   (memoised per distinct container-resources shape), `plan_vpa`;
6. acting on each plan's actions in order: resizes (`pods/<name>/resize`, then `vpaInPlaceUpdated`) through
   the in-place token bucket, evictions through the eviction token bucket, with bounded concurrency;
   recording what happened (`ResizeAttempt`, infeasible records, events, metrics).
With `--in-place-on-recommendation`, a prompt pass (`run_prompt`) executes only the in-place resizes of
the VPAs whose recommendation changed. Startup boosts end in `Unbooster`'s companion loop.

Never adds an action of its own: what is evicted is exactly the plan's `Action.EVICT` decisions (so
`InPlace` VPAs are never evicted, on any error path); a failed resize is remembered (`rejected=True`) and
the next plan decides whether `InPlaceOrRecreate` falls back to eviction. Matching and planning go
through `vpa.aio.pacing.paced`; a VPA with more than `plan_in_thread_above` pods is planned in a worker
thread. Latency metrics use `time.perf_counter` (real time: the injected clock may be virtual).

Size: over 600 lines because the loop's steps above are methods of `Updater` that share its state (the
pod and VPA caches, both token buckets, the in-place memory, the metrics); each step is a few dozen lines.

Must not: import other components, decide which pods to update (that is `vpa.logic`), or build raw API
requests (that is `vpa.kube.actuating`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Protocol

import structlog

from vpa.aio.cancelling import cancel_and_wait
from vpa.aio.pacing import paced
from vpa.components.context import ComponentContext
from vpa.components.triggering import Trigger
from vpa.components.updater.events import (
    EVICTED_BY_VPA,
    EVICTED_BY_VPA_MESSAGE,
    EVICTED_POD,
    EVICTION_ERROR,
    IN_PLACE_GATE_OFF,
    IN_PLACE_GATE_OFF_MESSAGE,
    IN_PLACE_RESIZED,
    IN_PLACE_RESIZED_MESSAGE,
    IN_PLACE_RESIZED_POD,
    IN_PLACE_SKIPPED,
    IN_PLACE_SKIPPED_MESSAGE,
    IN_PLACE_UPDATE_ERROR,
    IN_PLACE_UPDATE_INFEASIBLE,
    IN_PLACE_WOULD_NOT_FIT,
    POD_LEVEL_RESIZE_UNSUPPORTED,
    POD_LEVEL_RESIZE_UNSUPPORTED_MESSAGE,
    RESIZE_REVERTED,
    SKIPPED_ADMISSION_STALE,
    pod_ref,
    vpa_ref,
)
from vpa.components.updater.failures import log_pass_failure
from vpa.components.updater.inputs import (
    acts_for,
    is_live,
    processed_recommendation,
    recommendation_lookup,
    shape_key,
    target_selector,
)
from vpa.components.updater.metrics import UpdaterMetrics, vpa_size_log2
from vpa.components.updater.reports import LoopReport, UnboostReport, VpaWork
from vpa.components.updater.unboost import Unbooster
from vpa.kube.actuating import Actuator, Outcome, Result
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.leasing import API_CALL_MIN_WALL_S, DeadlineExceeded, LeaseFreshness, call_with_deadline
from vpa.kube.ratelimiting import TokenBucket
from vpa.kube.serverversion import read_git_version
from vpa.logic.initialdelay import in_initial_delay
from vpa.logic.limitranges import NamespaceLimits, namespace_limits
from vpa.logic.matching import controller_key, controlling_vpa
from vpa.logic.scope import is_scoped, scope_value, scoped_view
from vpa.logic.updater.capacity import NodeRooms
from vpa.logic.updater.guard import ResizeGuard, Revert, guard_window_s, with_reverted_condition
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import (
    Action,
    PodDecision,
    Reason,
    ResizeAttempt,
    in_place_updated_patch,
    resize_patch,
)
from vpa.logic.updater.plan import PassInputs, VpaPlan, guard_asked, guard_enabled, plan_vpa
from vpa.logic.updater.podstates import PodState, pod_states
from vpa.logic.updater.priority import ObservedCache
from vpa.logic.updater.reactive import resizes_only
from vpa.logic.updater.restrictions import GroupKey
from vpa.logic.updater.serverfeatures import (
    ResizeFeatures,
    features_for_version,
    parse_git_version,
    refused_feature,
    with_override,
    without,
)
from vpa.logic.updater.transitions import Transitions
from vpa.model.node import NodeView
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import RESIZE_REVERTED_CONDITION, Condition, Recommendation, UpdateMode, VpaView

log = structlog.get_logger(__name__)

COMPONENT: Final = "updater"
# A pod state's event reason and message ("": the decision's own detail, after "In-place resize not sent: ").
_POD_STATE_EVENTS: Final[Mapping[Reason, tuple[str, str]]] = MappingProxyType({
    Reason.WOULD_NOT_FIT: (IN_PLACE_WOULD_NOT_FIT, ""),
    Reason.INFEASIBLE_CACHED: (IN_PLACE_SKIPPED, IN_PLACE_SKIPPED_MESSAGE),
    Reason.POD_LEVEL_RESIZE_UNSUPPORTED: (POD_LEVEL_RESIZE_UNSUPPORTED, POD_LEVEL_RESIZE_UNSUPPORTED_MESSAGE),
})


def _worth_retrying(result: Result) -> bool:
    """A failed write worth sending again next pass: `Outcome.FAILED` (no answer, 5xx, 429 after the
    client's retries, the authorizer's 403 after a kube-apiserver restart) or a 409 conflict."""
    return result.outcome is Outcome.FAILED or result.status == 409


class NodeListing(Protocol):
    def list(self) -> list[NodeView]: ...


class ConditionSink(Protocol):
    async def write(self, namespace: str, name: str, conditions: Sequence[Condition]) -> None: ...
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
        nodes: NodeListing | None = None,
        conditions: ConditionSink | None = None,
    ) -> None:
        self.ctx = ctx
        # Gates InPlaceCapacityAware and DaemonSetScope read Nodes; ResizeGuard writes its VPA condition.
        self.nodes = nodes
        self.conditions = conditions
        self.guard = ResizeGuard(backoff_base_s=ctx.settings.updater.resize_guard_backoff_s)
        # VPA key -> its last revert and message: the condition is kept written while the backoff lasts.
        self._reverted: dict[str, tuple[Revert, str]] = {}
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
        # Per VPA key, its pods in a state an event on the pod tells once (`logic.updater.podstates`); per VPA
        # so that a prompt pass, which plans a few VPAs, leaves the others' pods as they were.
        self.pod_states: dict[str, Transitions[PodState]] = {}
        # What the API server resizes in place besides containers (issue 42): read from `/version` at the
        # first pass, narrowed for the rest of the process by what it refuses (`_learn_refusal`).
        self.resize_features: ResizeFeatures | None = None
        self.unbooster = Unbooster(ctx, controllers, self.in_place_limiter, self.actuator, self.events,
                                   self.metrics, self.attempts)

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
            except Exception as err:
                log_pass_failure("updater_loop_failed", err)
            self.ctx.health.record_activity(COMPONENT)
            await self._until_next_tick(started + interval)

    async def _until_next_tick(self, deadline: float) -> None:
        """Sleep until `deadline` (monotonic); with a trigger, run a prompt pass whenever it fires."""
        while (remaining := deadline - self.clock.monotonic()) > 0:
            if self.trigger is None:
                await self.clock.sleep(remaining)
                return
            keys = await self.trigger.wait(remaining)
            if keys:
                await self._prompt(keys)

    async def _prompt(self, keys: Iterable[str]) -> None:
        """A prompt pass, cut off after one interval as a loop is; a failure is logged (one warning line
        for an API outage, `failures.log_pass_failure`) and the next trigger or tick tries again."""
        try:
            await call_with_deadline(self.clock, self.settings.updater_interval_s, self.run_prompt(keys),
                                     min_wall_s=API_CALL_MIN_WALL_S)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log_pass_failure("updater_prompt_pass_failed", err)

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
            # A recommendation that changed because of an OOM kill: the guard's revert comes first. It sees
            # every matched pod, not only the wanted VPAs': a guarded pod it does not see counts as gone.
            reverted = await self._revert_hurt(work, active)
            work = {key: entry for key, entry in work.items() if key in wanted}
            await self._plan(work, report)
            self._report_pod_states(report.plans, every_vpa=False)
            for entry in work.values():
                if entry.plan is not None:
                    entry.plan = resizes_only(entry.plan)
                    if reverted:
                        kept = tuple(d for d in entry.plan.actions if d.pod.uid not in reverted)
                        entry.plan = dataclasses.replace(entry.plan, actions=kept)
            await self._execute(work, report)
            # A line per pass that changed something; a pass that resized nothing is a debug line (`--v=5`).
            changed = report.resized or report.failed
            (log.info if changed else log.debug)("updater_prompt_pass_done", vpas=sorted(wanted),
                                                 resized=len(report.resized), failed=len(report.failed))
            return report

    async def _run_once(self) -> LoopReport:
        report = LoopReport()
        loop_started = time.perf_counter()
        self.metrics.reset_gauges()
        if self.lease is not None:
            lease = f"{self.lease.namespace}/{self.lease.name}"
            problem = await self.lease.problem()
            stale = problem is not None
            if problem is not None:
                self.metrics.status_invalid.labels(reason=problem).inc()
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
            self.pod_states.clear()
            self.infeasible = InfeasibleAttempts()
            self._observe("total", loop_started)
            return report

        step = time.perf_counter()
        work, live_uids = await self._match(active)
        self._forget_missing(live_uids)
        self._observe("ListPods", step)

        reverted = await self._revert_hurt(work, active)

        step = time.perf_counter()
        await self._plan(work, report)
        self._observe("FilterPods", step)
        self._report_gate_off(report)
        self._report_pod_states(report.plans, every_vpa=True)
        if reverted:
            # A pod resized back this pass is not resized again in the same pass.
            for entry in work.values():
                if entry.plan is not None:
                    kept = tuple(d for d in entry.plan.actions if d.pod.uid not in reverted)
                    entry.plan = dataclasses.replace(entry.plan, actions=kept)

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

    async def _resize_features(self) -> ResizeFeatures:
        """What the API server resizes in place: its `/version` read once (an unreadable one counts as a
        supported release, 1.36+), `--in-place-pod-level-resources` applied, then narrowed by refusals."""
        if self.resize_features is None:
            text, problem = await read_git_version(self.ctx.client)
            version = parse_git_version(text) if text is not None else None
            detected = features_for_version(version)
            self.resize_features = with_override(detected, self.settings.in_place_pod_level_resources)
            log.info("updater_server_resize_features", git_version=text, problem=problem or None,
                     override=self.settings.in_place_pod_level_resources,
                     features=self.resize_features.describe())
        return self.resize_features

    def _learn_refusal(self, pod: PodView, status: int, message: str) -> bool:
        """A 422 saying the server does not resize pod-level resources or plain init containers turns that
        off for the rest of the process, however the flag or the version read; True when it did. The next
        plan then evicts (InPlaceOrRecreate) or skips (InPlace) a pod with pod-level resources, and resizes
        a pod's containers without its init containers, instead of sending what the server refuses."""
        refused = refused_feature(status, message)
        if refused is None or self.resize_features is None:
            return False
        before = self.resize_features
        after = without(before, refused)
        if after == before:
            return False
        self.resize_features = after
        log.warning("updater_server_refused_resize_feature", pod=pod.key, refused=refused.value,
                    error=message, features=after.describe())
        return True

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
            self.events.warning(vpa_ref(skipped[key]), IN_PLACE_GATE_OFF, IN_PLACE_GATE_OFF_MESSAGE)
        for key, loops in changes.left:
            log.info("vpa_no_longer_skipped_in_place_gate_off", vpa=key, skipped_loops=loops)

    def _report_pod_states(self, plans: Sequence[VpaPlan], *, every_vpa: bool) -> None:
        """An event on the pod when it enters a state of `podstates` (would not fit its node, cached
        infeasible, pod-level resize unsupported), not on every pass that leaves it there: each would be one
        more API write for the recorder's count. A pod that leaves the state and comes back is told again.
        `every_vpa` (a loop): the VPAs without a plan this time are forgotten (gone, no recommendation)."""
        planned: set[str] = set()
        for plan in plans:
            key = plan.vpa.key
            planned.add(key)
            states = pod_states(plan)
            transitions = self.pod_states.get(key)
            if transitions is None:
                if not states:
                    continue
                transitions = self.pod_states[key] = Transitions()
            for state in transitions.update(states).entered:
                decision = states[state]
                reason, message = _POD_STATE_EVENTS[state.reason]
                self.events.normal(pod_ref(decision.pod), reason, message or
                                   f"In-place resize not sent: {decision.detail}")
            if not transitions:
                del self.pod_states[key]
        if every_vpa:
            for key in [key for key in self.pod_states if key not in planned]:
                del self.pod_states[key]

    def _observe(self, step: str, started: float) -> None:
        self.metrics.latency.labels(step=step).observe(time.perf_counter() - started)

    # ------------------------------------------------------------------------------- unboosting

    async def run_unboost_forever(self) -> None:
        """End CPU startup boosts as they expire (gate `CPUStartupBoost`) until cancelled."""
        await self.unbooster.run_forever()

    async def unboost_once(self) -> UnboostReport:
        """One pass over the boosted pods (`Unbooster.run_once`)."""
        return await self.unbooster.run_once()

    # ----------------------------------------------------------------------------------- matching

    async def _match(self, active: Mapping[str, VpaView]) -> tuple[dict[str, VpaWork], set[str]]:
        """VPA key → its live pods; and the uids of every live pod in the cache."""
        pods_cache = self.ctx.pods
        live_uids: set[str] = set()
        work: dict[str, VpaWork] = {}
        async for owner in paced(pods_cache.index_values("owner")):
            members = pods_cache.by_index("owner", owner)
            namespace, kind, name = owner.split("/", 2)
            top = self.controllers.top_most(namespace, kind, name)
            candidates: list[tuple[VpaView, Selector | None]] = []
            key = None
            if top is not None:
                key = controller_key(namespace, top[0], top[1])
                selector = target_selector(self.controllers, namespace, top[0], top[1])
                for vpa in self.ctx.vpas.by_index("target", key):
                    if vpa.key in active:
                        candidates.append((active[vpa.key], selector))
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
                        entry = work[chosen.key] = VpaWork(chosen)
                    # Gate NativeSidecar: sidecars are weighed, capped and resized like containers.
                    entry.pods.append(pod.with_native_sidecars() if self.gates.native_sidecar else pod)
        return work, live_uids

    def _forget_missing(self, live_uids: set[str]) -> None:
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
        self, vpa: VpaView, pods: list[PodView], limits: NamespaceLimits
    ) -> dict[str, Recommendation | None]:
        memo: dict[tuple[object, ...], Recommendation | None] = {}
        out: dict[str, Recommendation | None] = {}
        # Gate DaemonSetScope (AEP-10031): each pod gets its node group's recommendation.
        scoped = is_scoped(vpa, self.gates.daemonset_scope)
        labels = {n.name: n.labels for n in self.nodes.list()} if scoped and self.nodes is not None else {}
        # A server that resizes plain init containers (1.36+): the ones the recommendation names are capped
        # like containers, so that the plan can add them to an in-place resize.
        features, rec = self.resize_features, vpa.recommendation
        inits = (frozenset(c.container_name for c in rec.containers)
                 if features is not None and features.init_containers and rec is not None
                 and vpa.effective_mode.resizes_in_place else frozenset())
        async for pod in paced(pods):
            group = scope_value(vpa.scope, pod.node_name, labels.get(pod.node_name)) if scoped else None
            seen = pod.with_plain_init_containers(inits) if inits else pod
            shape = (group, *shape_key(seen))
            if shape not in memo:
                view = scoped_view(vpa, group) if scoped else vpa
                memo[shape] = (None if view.recommendation is None
                               else processed_recommendation(seen, view, limits))
            out[pod.uid] = memo[shape]
        return out

    # ----------------------------------------------------------------------------------- resize guard

    async def _revert_hurt(self, work: dict[str, VpaWork], active: Mapping[str, VpaView]) -> set[str]:
        """Gate ResizeGuard: resize back the pods hurt after one of our resizes or evictions (within one
        pass), with a Warning event on the VPA and the pod, the `ResizeReverted` condition and the revert
        metric; the uids reverted. Records of pods gone or past their window are forgotten."""
        if not self.gates.resize_guard:
            return set()
        now = self.clock.now()
        self.guard.forget_before(now)
        if self._reverted:
            await self._keep_reverted_conditions(active, now)
        if not self.guard.records and not self.guard.evictions and not self.guard.retries:
            return set()
        pods = {pod.uid: pod for entry in work.values() for pod in entry.pods}
        owners = {pod.uid: entry for entry in work.values() for pod in entry.pods}

        def recommendation_for(record: object) -> Recommendation | None:
            vpa = active.get(getattr(record, "vpa_key", ""))
            return vpa.recommendation if vpa is not None else None

        allocatable = {n.name: Resources(n.cpu_millicores, n.memory_bytes)
                       for n in (self.nodes.list() if self.nodes is not None else ())}

        def ceiling_for(pod: PodView) -> Resources | None:
            return allocatable.get(pod.node_name)

        reverted: set[str] = set()
        # A VPA that dropped the guard after the resize gets no revert, the first one as little as a retry.
        asked = guard_asked(self.gates, active)
        for revert in self.guard.check(pods, recommendation_for, now, ceiling_for, asked):
            entry = owners.get(revert.record.uid)
            if entry is None:
                continue
            await self._revert(entry, revert)
            reverted.add(revert.record.uid)
        return reverted

    async def _revert(self, entry: VpaWork, revert: Revert) -> None:
        pod, vpa = revert.decision.pod, entry.vpa
        message = revert.message()
        try:
            operations = resize_patch(pod, revert.decision.changes)
        except ValueError:
            return
        result = await self.actuator.resize(pod.namespace, pod.name, operations)
        if not result.ok:
            again = _worth_retrying(result)
            log.warning("pod_resize_revert_failed", pod=pod.key, cause=revert.cause.value,
                        outcome=result.outcome.value, status=result.status, error=result.message,
                        attempt=revert.failed + 1, retried_next_pass=again, held_until=revert.held_until)
            if result.outcome is Outcome.GONE:
                return
            refused = f"{result.outcome.value}: {result.message}"
            if again:
                # Transient: sent again on the next passes while the pod is still hurt. The VPA hears of
                # the first failure only; a later success says "resized back".
                self.guard.retry(revert, self.clock.now(), guard_window_s(vpa.annotations))
                if revert.failed:
                    return
                refused += " (tried again on the next passes)"
            # Refused (say, a recreated pod the cluster cannot resize in place): the backoff still holds
            # its decreases, and the VPA says so.
            message = revert.message(refused=refused)
        else:
            self.attempts[pod.uid] = ResizeAttempt(self.clock.now(), resource_version=pod.resource_version)
            self.metrics.resize_reverts.labels(cause=revert.cause.value, vpa_name=vpa.name,
                                               vpa_namespace=vpa.namespace).inc()
            log.warning("pod_resize_reverted", pod=pod.key, cause=revert.cause.value, values=revert.values,
                        held_until=revert.held_until)
        self.events.warning(vpa_ref(vpa), RESIZE_REVERTED, message)
        self.events.warning(pod_ref(pod), RESIZE_REVERTED, message)
        self._reverted[vpa.key] = (revert, message)
        await self._write_reverted_condition(vpa, revert, message)

    async def _write_reverted_condition(self, vpa: VpaView, revert: Revert, message: str) -> None:
        if self.conditions is None:
            return
        current = self.ctx.vpas.get(vpa.namespace, vpa.name)  # the freshest conditions the cache has
        conditions = (current or vpa).status.conditions
        try:
            await self.conditions.write(vpa.namespace, vpa.name, with_reverted_condition(
                conditions, revert, self.clock.now(), message))
        except Exception as err:  # the revert is done; the condition is best effort
            log.warning("resize_reverted_condition_write_failed", vpa=vpa.key, error=str(err))

    async def _keep_reverted_conditions(self, active: Mapping[str, VpaView], now: float) -> None:
        """While a revert's backoff lasts, its `ResizeReverted` condition is written again if the VPA lost it:
        the recommender writes the whole condition list from its own cached copy, which may predate ours."""
        for key, (revert, message) in list(self._reverted.items()):
            vpa = active.get(key)
            if vpa is None or now >= revert.held_until:
                del self._reverted[key]
                continue
            condition = vpa.status.condition(RESIZE_REVERTED_CONDITION)
            if condition is None or not condition.is_true or condition.message != message:
                await self._write_reverted_condition(vpa, revert, message)

    async def _plan(self, work: dict[str, VpaWork], report: LoopReport) -> None:
        rooms = None
        if self.gates.in_place_capacity_aware and self.nodes is not None:
            # AEP-9726: every bound pod's requests against its node's allocatable, charged as resizes plan.
            rooms = NodeRooms.build(self.nodes.list(), (p for p in self.ctx.pods.list() if p.node_name))
        inputs_base = PassInputs(
            now=self.clock.now(),
            settings=self.settings,
            gates=self.gates,
            attempts=MappingProxyType(dict(self.attempts)),
            infeasible=self.infeasible,
            node_rooms=rooms,
            guard=self.guard if self.gates.resize_guard else None,
            resize_features=await self._resize_features(),
        )
        limits_by_namespace: dict[str, NamespaceLimits] = {}
        observed: ObservedCache = {}
        async for entry in paced(list(work.values())):
            vpa = entry.vpa
            if self.gates.vpa_initial_delay and vpa.update_policy.initial_delay_s is not None:
                gauge = self.metrics.initial_delay_active.labels(namespace=vpa.namespace, name=vpa.name)
                gauge.set(int(in_initial_delay(vpa, inputs_base.now)))
            entry.size = str(vpa_size_log2(len(entry.pods)))
            report.vpas += 1
            report.pods += len(entry.pods)
            scoped = is_scoped(vpa, self.gates.daemonset_scope)
            if (vpa.recommendation is None or vpa.recommendation.is_empty()) and not (
                scoped and vpa.status.groups
            ):
                continue
            limits = limits_by_namespace.get(vpa.namespace)
            if limits is None:
                limits = limits_by_namespace[vpa.namespace] = namespace_limits(
                    self.controllers.limit_ranges(vpa.namespace)
                )
            recs = await self._recommendations(vpa, entry.pods, limits)
            inputs = PassInputs(
                now=inputs_base.now,
                settings=inputs_base.settings,
                gates=inputs_base.gates,
                replicas=MappingProxyType(self._replicas(entry.pods)),
                attempts=inputs_base.attempts,
                infeasible=inputs_base.infeasible,
                node_rooms=inputs_base.node_rooms,
                guard=inputs_base.guard,
                resize_features=inputs_base.resize_features,
            )
            recommendation_for = recommendation_lookup(recs)
            if len(entry.pods) > self._plan_in_thread_above:
                plan = await asyncio.to_thread(
                    plan_vpa, vpa, entry.pods, inputs, recommendation_for=recommendation_for
                )
            else:
                plan = plan_vpa(
                    vpa, entry.pods, inputs, recommendation_for=recommendation_for, observed_cache=observed
                )
            entry.plan = plan
            report.plans.append(plan)
            if plan.skip_reason is Reason.IN_PLACE_GATE_OFF:
                continue  # reported once per VPA by `_report_gate_off`
            for uid, attempt in plan.record_infeasible:
                self.infeasible = self.infeasible.record(uid, attempt)
            # Their events are recorded by `_report_pod_states`, once per state; the counter, as upstream's,
            # counts every pass.
            for decision in plan.skipped:
                if decision.reason is Reason.INFEASIBLE_CACHED:
                    self.metrics.infeasible_skips.labels(
                        vpa_size_log2=entry.size, vpa_name=vpa.name, vpa_namespace=vpa.namespace
                    ).inc()

    # ---------------------------------------------------------------------------------- actuation

    async def _execute(self, work: dict[str, VpaWork], report: LoopReport) -> None:
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

    def _init_counters(self, entry: VpaWork, plan: VpaPlan) -> None:
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

    async def _resize(self, entry: VpaWork, decision: PodDecision, report: LoopReport) -> None:
        pod, vpa, mode = decision.pod, entry.vpa, entry.vpa.effective_mode
        try:
            operations = resize_patch(pod, decision.changes, decision.pod_level)
        except ValueError as err:  # nothing to change: the plan never asks for this
            log.warning("resize_without_changes", pod=pod.key, error=str(err))
            return
        patched_at = self.clock.now()
        result = await self.actuator.resize(pod.namespace, pod.name, operations)
        if result.ok:
            self.attempts[pod.uid] = ResizeAttempt(
                patched_at, disruptive=decision.disruptive, resource_version=pod.resource_version
            )
            self.infeasible = self.infeasible.clear(pod.uid)
            if guard_enabled(self.gates, vpa):
                self.guard.watch(pod, decision, vpa.key, patched_at, guard_window_s(vpa.annotations))
            marked = await self.actuator.mark_in_place_updated(
                pod.namespace, pod.name, in_place_updated_patch()
            )
            if not marked.ok:
                log.warning("annotate_in_place_updated_failed", pod=pod.key, error=marked.message)
            self.events.normal(pod_ref(pod), IN_PLACE_RESIZED, IN_PLACE_RESIZED_MESSAGE)
            self.events.normal(
                vpa_ref(vpa),
                IN_PLACE_RESIZED_POD,
                f"VPA Updater resized Pod {pod.name} in place to apply resource recommendation.",
            )
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
        # A refusal that teaches what the server cannot resize is not held against the pod: the next plan
        # leaves that part out (or evicts / skips a pod with pod-level resources).
        learned = result.outcome is Outcome.REJECTED and self._learn_refusal(pod, result.status,
                                                                             result.message)
        if result.outcome in (Outcome.INFEASIBLE, Outcome.REJECTED) and not learned:
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

    async def _evict(self, entry: VpaWork, decision: PodDecision, report: LoopReport) -> None:
        pod, vpa = decision.pod, entry.vpa
        evicted_at = self.clock.now()
        result: Result = await self.actuator.evict(pod.namespace, pod.name, pod.uid)
        if result.ok:
            if guard_enabled(self.gates, vpa):
                # The controller's next pod, admitted with the recommendation, is watched as a resize is.
                self.guard.watch_eviction(pod, vpa.key, evicted_at, guard_window_s(vpa.annotations))
            self.events.normal(pod_ref(pod), EVICTED_BY_VPA, EVICTED_BY_VPA_MESSAGE)
            self.events.normal(
                vpa_ref(vpa),
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

    def _publish_gauges(self, work: dict[str, VpaWork]) -> None:
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
