"""The resize guard (gate `ResizeGuard`, per VPA `vpa.dev/resize-guard: "true"`): an in-place resize, or an
eviction made to apply a recommendation, that hurts its pod is undone, and that container's decreases are held
back for a while.

Owns:
- `GuardedResize`: what the loop remembers of one resize it made — when, the guard window's end, and per
  changed container the requests and limits before the change and its restart count then, plus whether the
  pod was Ready;
- `EvictedFor` and `replacement`: an eviction for a guarded VPA waits (for one window) for the next pod of the
  same controller, created after it with the values the webhook gave it; that pod is then guarded as a
  resize from the evicted pod's values to its own (restart counts from 0, readiness from when it is first
  Ready);
- `hurt`: whether a guarded pod was hurt since the resize, and how (`Cause`): a container OOM-killed after it
  (`OOMKilled`), a restart count that rose (`Restarted`), or a pod that was Ready and is not any more
  (`NotReady`), checked in that order;
- `reverted_resources` and `revert_changes`: the resize back, of only what can have hurt — memory of the
  containers OOM-killed for `OOMKilled`; for `Restarted` (the restarted containers) and `NotReady` (every
  changed container), each resource the resize lowered — to its value before the change, or the
  recommendation's upper bound when that is higher (the limit then kept in proportion, as admission would),
  the upper bound capped at the node's allocatable when known; every other value stays what the pod has,
  and nothing is put below the pod's current value;
- `Backoff`: per controller and container, the time until which decreases are held after a revert —
  the base (`--resize-guard-backoff`, 1 h by default), doubled by each further revert, at most 24 h;
- `ResizeGuard`: the loop's state (guarded resizes by pod uid, evictions awaiting their replacement,
  backoffs, reverts to try again), with `watch` (after a resize was sent), `watch_eviction` (after an
  eviction), `check` (each pass: replacements adopted, reverts due, records past their window, whose pod
  is gone or whose VPA no longer asks for the guard forgotten), `retry` (after a revert failed
  transiently) and `held` (the decreases a plan must not make now);
- `evicting_would_decrease`: the held containers an eviction would lower (the webhook applies the whole
  recommendation to the new pod, so such an eviction waits for the backoff);
- `with_reverted_condition`: the VPA's conditions with `ResizeReverted` naming pod, cause and values.

Reverts are not guarded themselves, so a revert never triggers another; the backoff keeps VPA and workload
from oscillating. A recreated pod is reverted in place too; when the API refuses that resize, the backoff
still holds and the loop says so in the same event and condition. A revert that failed transiently
(`ResizeGuard.retry`) is due again on the next passes, for one more window, while its pod is still hurt.

Size: just over 600 lines because every step above (record, hurt, revert, backoff, hold) works on
`GuardedResize` and `ResizeGuard`'s state; split up, each part would import the others'.

Must not: call the API, read the clock (callers pass `now`), emit events or metrics, or read feature gates.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, NamedTuple

from vpa.logic.updater.inplace import (
    Action,
    Change,
    ContainerChange,
    PodDecision,
    Reason,
    by_container,
    proportional_limit,
)
from vpa.logic.updater.restrictions import GroupKey, group_key
from vpa.model import annotations as ann
from vpa.model.durations import DurationError, parse_go_duration_s
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import RESIZE_REVERTED_CONDITION, Condition, Recommendation

DEFAULT_WINDOW_S: Final = 600.0
BACKOFF_BASE_S: Final = 3600.0
BACKOFF_MAX_S: Final = 24 * 3600.0
OOM_KILLED_REASON: Final = "OOMKilled"
_RESOURCES: Final = (CPU, MEMORY)


class Cause(enum.StrEnum):
    """Why a guarded pod counts as hurt (the `cause` label of the revert metric)."""

    OOM_KILLED = "OOMKilled"
    RESTARTED = "Restarted"
    NOT_READY = "NotReady"


class Before(NamedTuple):
    """One changed container before the resize."""

    requests: Resources
    limits: Resources
    restart_count: int


@dataclass(frozen=True, slots=True)
class GuardedResize:
    uid: str
    namespace: str
    pod_name: str
    vpa_key: str
    at: float
    until: float
    ready: bool
    containers: Mapping[str, Before]
    after: Mapping[str, tuple[Resources, Resources]]
    """Per changed container, the requests and limits the resize set (only the values it changed)."""
    evicted: str = ""
    """For a pod recreated after our eviction: the evicted pod's name ("" for an in-place resize)."""
    follow_ready: bool = False
    """Not Ready when adopted (a new pod starting): `ready` turns True once it is, so a later loss counts."""


def guard_window_s(vpa_annotations: Mapping[str, str]) -> float:
    """`vpa.dev/resize-guard-window` as a Go duration (`15m`), else 10 minutes; a bad or non-positive value
    is the default (the webhook rejects it)."""
    raw = vpa_annotations.get(ann.RESIZE_GUARD_WINDOW)
    if raw is None:
        return DEFAULT_WINDOW_S
    try:
        value = parse_go_duration_s(raw)
    except DurationError:
        return DEFAULT_WINDOW_S
    return value if value > 0 else DEFAULT_WINDOW_S


def _ready(pod: PodView) -> bool:
    condition = pod.condition(ann.POD_READY)
    return condition is not None and condition.is_true


def guard(pod: PodView, decision: PodDecision, vpa_key: str, now: float, window_s: float) -> GuardedResize:
    """The record of a resize of `pod` (as `decision` sent it) made at `now`."""
    before: dict[str, Before] = {}
    after: dict[str, tuple[Resources, Resources]] = {}
    for change in decision.changes:
        container = pod.containers[change.index]
        status = pod.container_status(container.name)
        before[container.name] = Before(
            container.requests, container.limits, status.restart_count if status is not None else 0
        )
        after[container.name] = (change.requests, change.limits)
    return GuardedResize(
        pod.uid, pod.namespace, pod.name, vpa_key, now, now + window_s, _ready(pod), before, after
    )


def _oom_killed(record: GuardedResize, pod: PodView, name: str) -> bool:
    """Container `name` is OOM-killed now, or its last termination was an OOM kill since the resize."""
    status = pod.container_status(name)
    if status is None:
        return False
    killed_now = status.state == "terminated" and status.state_reason == OOM_KILLED_REASON
    killed_before = (
        status.last_terminated_reason == OOM_KILLED_REASON
        and status.last_terminated_at is not None
        and status.last_terminated_at >= record.at
    )
    return killed_now or killed_before


def _restarted(record: GuardedResize, pod: PodView, name: str) -> bool:
    status = pod.container_status(name)
    return status is not None and status.restart_count > record.containers[name].restart_count


def hurt(record: GuardedResize, pod: PodView) -> tuple[Cause, str] | None:
    """(cause, which container) when the pod was hurt since the resize, else None."""
    for name in record.containers:
        if _oom_killed(record, pod, name):
            return Cause.OOM_KILLED, name
    for name in record.containers:
        if _restarted(record, pod, name):
            return Cause.RESTARTED, name
    if record.ready and not _ready(pod):
        return Cause.NOT_READY, ""
    return None


def _lowered(record: GuardedResize, name: str) -> frozenset[str]:
    """The resources whose request or limit the resize set below the value before it."""
    before = record.containers[name]
    set_requests, set_limits = record.after[name]
    out = set()
    for resource in _RESOURCES:
        for old, new in ((before.requests.get(resource), set_requests.get(resource)),
                         (before.limits.get(resource), set_limits.get(resource))):
            if old is not None and new is not None and new < old:
                out.add(resource)
    return frozenset(out)


def reverted_resources(record: GuardedResize, pod: PodView, cause: Cause) -> dict[str, frozenset[str]]:
    """Per container, what a revert for `cause` puts back: only what can have hurt.

    - `OOMKilled`: memory, where the resize lowered it, of the containers OOM-killed since the resize (an
      OOM kill says nothing about CPU; putting CPU back up too, to an upper bound that little history makes
      as large as the node, takes from the node what nothing asked for);
    - `Restarted` (not an OOM kill: a failed liveness probe, a crash): the restarted containers' resources
      the resize lowered; `NotReady`: every changed container's. Neither says which resource hurt (CPU
      starvation shows as slow or failed probes, memory pressure too), so each lowered one goes back.

    A resource the resize raised is never put back down: lowering it cannot help a hurt pod."""
    if cause is Cause.OOM_KILLED:
        return {name: _lowered(record, name) & {MEMORY}
                for name in record.containers if _oom_killed(record, pod, name)}
    names = (
        [name for name in record.containers if _restarted(record, pod, name)]
        if cause is Cause.RESTARTED
        else list(record.containers)
    )
    return {name: _lowered(record, name) for name in names}


@dataclass(frozen=True, slots=True)
class EvictedFor:
    """An eviction for a guarded VPA: the evicted pod's values, awaiting its controller's next pod."""

    group: GroupKey
    uid: str
    pod_name: str
    vpa_key: str
    at: float
    window_s: float
    containers: Mapping[str, tuple[Resources, Resources]]
    """Per container of the evicted pod, its requests and limits."""


def evicted_for(pod: PodView, vpa_key: str, now: float, window_s: float) -> EvictedFor | None:
    """The record of evicting `pod` at `now` (None for a pod without a controller: nothing replaces it)."""
    group = group_key(pod)
    if group is None:
        return None
    values = {c.name: (c.requests, c.limits) for c in pod.containers}
    return EvictedFor(group, pod.uid, pod.name, vpa_key, now, window_s, values)


def _changed(old: Resources, new: Resources) -> Resources:
    """The values of `new` that differ from `old` (None where equal)."""
    cpu = new.cpu_millicores if new.cpu_millicores != old.cpu_millicores else None
    memory = new.memory_bytes if new.memory_bytes != old.memory_bytes else None
    return Resources(cpu, memory)


def replacement(eviction: EvictedFor, pod: PodView, now: float) -> GuardedResize | None:
    """`pod` guarded as the replacement of the evicted pod, when it is one: same controller, created at or
    after the eviction (creation times are whole seconds), and admitted with values other than the evicted
    pod's. Its containers are compared with the evicted pod's; the window starts now."""
    if pod.uid == eviction.uid or group_key(pod) != eviction.group:
        return None
    if pod.creation_timestamp < int(eviction.at) or pod.deletion_timestamp is not None:
        return None
    before: dict[str, Before] = {}
    after: dict[str, tuple[Resources, Resources]] = {}
    for container in pod.containers:
        old = eviction.containers.get(container.name)
        if old is None:
            continue
        requests = _changed(old[0], container.requests)
        limits = _changed(old[1], container.limits)
        if requests == Resources(None, None) and limits == Resources(None, None):
            continue
        before[container.name] = Before(old[0], old[1], 0)  # a new pod's restart counts start at 0
        after[container.name] = (requests, limits)
    if not before:
        return None  # admitted with the old values: the eviction changed nothing to guard
    ready = _ready(pod)
    return GuardedResize(
        pod.uid, pod.namespace, pod.name, eviction.vpa_key, eviction.at, now + eviction.window_s, ready,
        before, after, evicted=eviction.pod_name, follow_ready=not ready,
    )  # fmt: skip


def _with(values: Resources, resource: str, value: int | None) -> Resources:
    if value is None:
        return values
    return (
        Resources(value, values.memory_bytes) if resource == CPU else Resources(values.cpu_millicores, value)
    )


def revert_changes(
    record: GuardedResize,
    pod: PodView,
    recommendation: Recommendation | None,
    ceiling: Resources | None = None,
    scope: Mapping[str, Collection[str]] | None = None,
) -> list[Change]:
    """The changes that undo the resize where it hurt: back to the values before it, or up to the
    recommendation's upper bound where that is higher (the limit kept in proportion). Only the resources of
    `scope` (container → resources, `reverted_resources`; None: every resource the resize lowered) are
    touched; every other value stays what the pod has now. A revert never lowers a value below the pod's.

    `ceiling` (the node's allocatable, when known) caps the upper bound: with little history the upper
    bound can be many times the node, and a revert the kubelet answers Infeasible undoes nothing."""
    changes: list[Change] = []
    for index, container in enumerate(pod.containers):
        before = record.containers.get(container.name)
        if before is None:
            continue
        resources = scope.get(container.name, ()) if scope is not None else _lowered(record, container.name)
        rec = recommendation.for_container(container.name) if recommendation is not None else None
        for resource in _RESOURCES:
            if resource not in resources:
                continue
            old_request, old_limit = before.requests.get(resource), before.limits.get(resource)
            request = old_request
            limit = old_limit
            upper = rec.upper_bound.get(resource) if rec is not None else None
            cap = ceiling.get(resource) if ceiling is not None else None
            if upper is not None and cap is not None:
                upper = min(upper, cap)
            if upper is not None and old_request is not None and upper > old_request:
                request = upper
                scaled = proportional_limit(old_limit, old_request, upper)
                limit = scaled if scaled is not None else old_limit
            new_request = _raised(request, container.requests.get(resource))
            new_limit = _raised(limit, container.limits.get(resource))
            if new_request is None and new_limit is None:
                continue
            changes.append(
                Change(
                    index,
                    container.name,
                    resource,
                    new_request,
                    new_limit,
                    container.restarts_on_resize(resource),
                )
            )
    return changes


def _raised(value: int | None, current: int | None) -> int | None:
    """`value` when it is above `current` (or the pod has none), else None: a revert only puts values back
    up (a pod already at or above them, resized since, is left as it is)."""
    if value is None or (current is not None and value <= current):
        return None
    return value


def describe(changes: Sequence[ContainerChange]) -> str:
    """`app: requests cpu=500m memory=536870912, limits memory=1073741824` for messages."""
    parts = []
    for change in changes:
        pieces = []
        for label, values in (("requests", change.requests), ("limits", change.limits)):
            items = [
                f"{r}={values.get(r)}m" if r == CPU else f"{r}={values.get(r)}"
                for r in _RESOURCES
                if values.get(r) is not None
            ]
            if items:
                pieces.append(f"{label} {' '.join(items)}")
        parts.append(f"{change.name}: {', '.join(pieces)}")
    return "; ".join(parts)


def _stamp(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BackoffKey(NamedTuple):
    group: GroupKey
    container: str


@dataclass(slots=True)
class Backoff:
    reverts: int = 0
    until: float = 0.0

    def note(self, now: float, base_s: float = BACKOFF_BASE_S) -> float:
        """One more revert at `now`: decreases held for base · 2^(reverts − 1), at most 24 h."""
        self.reverts += 1
        self.until = now + min(BACKOFF_MAX_S, base_s * 2 ** min(self.reverts - 1, 16))
        return self.until


@dataclass(frozen=True, slots=True)
class Revert:
    """A revert due this pass: the decision that resizes the pod back, with its cause and the values."""

    record: GuardedResize
    decision: PodDecision
    cause: Cause
    container: str
    values: str
    held_until: float
    failed: int = 0
    """How many times sending this revert failed transiently before (0: its first attempt)."""

    def message(self, refused: str = "") -> str:
        """The Warning event's and the `ResizeReverted` condition's message (it says "revert"). `refused`: why
        the API refused the resize back (say, the cluster cannot resize that pod in place); nothing was
        reverted then, but the backoff holds all the same."""
        hurt_how = {
            Cause.OOM_KILLED: f"container {self.container} was OOM-killed",
            Cause.RESTARTED: f"container {self.container} restarted",
            Cause.NOT_READY: "the pod stopped being Ready",
        }[self.cause]
        pod = f"{self.record.namespace}/{self.record.pod_name}"
        what = (
            f"the in-place resize of pod {pod}"
            if not self.record.evicted
            else f"the values pod {pod} got when it replaced evicted pod {self.record.evicted}"
        )
        back = f"resized back to {self.values}"
        if refused:
            back = f"could not resize back to {self.values}: {refused}"
        held = _stamp(self.held_until)
        return f"revert of {what}: {hurt_how} after it; {back}; decreases held until {held}"


@dataclass(slots=True)
class ResizeGuard:
    """The loop's guard state: guarded resizes by pod uid, and decrease backoffs by controller + container."""

    records: dict[str, GuardedResize] = field(default_factory=dict)
    backoffs: dict[BackoffKey, Backoff] = field(default_factory=dict)
    evictions: list[EvictedFor] = field(default_factory=list)
    """Evictions for guarded VPAs whose replacement pod has not been seen yet (one window at most)."""
    backoff_base_s: float = BACKOFF_BASE_S
    """The first revert's backoff (`--resize-guard-backoff`); each further revert doubles it."""
    retries: dict[str, tuple[Revert, float]] = field(default_factory=dict)
    """Pod uid → a revert whose resize failed transiently, and until when it is tried again."""

    def watch(self, pod: PodView, decision: PodDecision, vpa_key: str, now: float, window_s: float) -> None:
        """Guard a resize that was just sent (not a revert: reverts are never guarded). A pod resized again
        while still guarded keeps the first resize's start, readiness and values before it: a hurt seen
        after either resize undoes both (the VPA's own reaction to an OOM is often the second one)."""
        if decision.reason is Reason.RESIZE_REVERTED or not decision.changes:
            return
        record = guard(pod, decision, vpa_key, now, window_s)
        earlier = self.records.get(pod.uid)
        if earlier is not None and now < earlier.until:
            before = {**record.containers, **earlier.containers}
            after = {**earlier.after, **record.after}
            record = dataclasses.replace(
                record, at=earlier.at, ready=earlier.ready, containers=before, after=after
            )
        self.records[pod.uid] = record

    def watch_eviction(self, pod: PodView, vpa_key: str, now: float, window_s: float) -> None:
        """Guard an eviction that was just made: the controller's next pod admitted with other values will
        be watched for `window_s` from when it is seen."""
        record = evicted_for(pod, vpa_key, now, window_s)
        if record is not None:
            self.evictions.append(record)

    def _adopt(self, pods: Mapping[str, PodView], now: float) -> None:
        """Replacement pods of pending evictions become guarded records (each pod adopted once); evictions
        whose replacement did not come within their window are forgotten."""
        waiting: list[EvictedFor] = []
        for eviction in self.evictions:
            adopted = None
            for pod in pods.values():
                if pod.uid in self.records:
                    continue
                adopted = replacement(eviction, pod, now)
                if adopted is not None:
                    self.records[pod.uid] = adopted
                    break
            if adopted is None and now < eviction.at + eviction.window_s:
                waiting.append(eviction)
        self.evictions = waiting

    def check(
        self,
        pods: Mapping[str, PodView],
        recommendation_for: Callable[[GuardedResize], Recommendation | None],
        now: float,
        ceiling_for: Callable[[PodView], Resources | None] | None = None,
        guarded: Callable[[str], bool] | None = None,
    ) -> list[Revert]:
        """Reverts due now. Replacement pods of guarded evictions are adopted first. Reverts to try again
        (`retry`) come back while their pod lives and is still hurt. Records whose pod is gone or whose
        window ended are forgotten; a hurt pod's record is replaced by its revert, and each changed
        container's backoff grows.

        `guarded(vpa_key)`: whether that VPA still asks for the guard (None: every VPA does). A VPA that
        dropped it since the resize opted out of its reverts: its records and retries are forgotten, no
        revert is made for them, first or again, and no backoff grows."""
        if self.evictions:
            self._adopt(pods, now)
        reverts: list[Revert] = []
        for uid, (failed, until) in list(self.retries.items()):
            del self.retries[uid]
            pod = pods.get(uid)
            if pod is None or pod.deletion_timestamp is not None or now >= until:
                continue
            if guarded is not None and not guarded(failed.record.vpa_key):
                continue
            found = hurt(failed.record, pod)
            if found is None:
                continue  # no longer hurt (Ready again): nothing to undo, the backoff still holds
            again = _revert(failed.record, pod, found, recommendation_for, ceiling_for, failed.held_until)
            if again is not None:
                reverts.append(dataclasses.replace(again, failed=failed.failed + 1))
        retried = {revert.record.uid for revert in reverts}
        for uid, record in list(self.records.items()):
            if uid in retried:
                continue  # resized since the failed revert; the retry comes first
            pod = pods.get(uid)
            if pod is None or pod.deletion_timestamp is not None:
                del self.records[uid]
                continue
            if guarded is not None and not guarded(record.vpa_key):
                del self.records[uid]  # the VPA opted out since: nothing of this resize is undone
                continue
            if record.follow_ready and not record.ready and _ready(pod):
                record = self.records[uid] = dataclasses.replace(record, ready=True, follow_ready=False)
            found = hurt(record, pod)
            if found is None:
                if now >= record.until:
                    del self.records[uid]
                continue
            del self.records[uid]
            group = group_key(pod)
            held_until = now
            if group is not None:
                for name in record.containers:
                    backoff = self.backoffs.setdefault(BackoffKey(group, name), Backoff())
                    held_until = max(held_until, backoff.note(now, self.backoff_base_s))
            revert = _revert(record, pod, found, recommendation_for, ceiling_for, held_until)
            if revert is not None:  # None: already back (someone restored it); the backoff still holds
                reverts.append(revert)
        return reverts

    def retry(self, revert: Revert, now: float, window_s: float) -> None:
        """`revert`'s resize failed transiently (no answer, 5xx, 429, a conflict, the authorizer's 403 for a
        few seconds after a kube-apiserver restart): `check` returns it again on each pass for `window_s`
        from now, recomputed from the pod as it is then, while the pod lives and is still hurt. Its backoff
        was counted when it first came due and is not counted again."""
        self.retries[revert.record.uid] = (revert, now + window_s)

    def held(self, pod: PodView, now: float) -> dict[str, float]:
        """Container → until when the pod's decreases are held back by a revert's backoff."""
        group = group_key(pod)
        if group is None:
            return {}
        out: dict[str, float] = {}
        for container in pod.containers:
            backoff = self.backoffs.get(BackoffKey(group, container.name))
            if backoff is not None and backoff.until > now:
                out[container.name] = backoff.until
        return out

    def forget_before(self, now: float) -> None:
        """Drop backoffs that ended a day ago or more (the doubling starts over after a quiet day)."""
        for key in [k for k, b in self.backoffs.items() if b.until + BACKOFF_MAX_S <= now]:
            del self.backoffs[key]


def _revert(
    record: GuardedResize,
    pod: PodView,
    found: tuple[Cause, str],
    recommendation_for: Callable[[GuardedResize], Recommendation | None],
    ceiling_for: Callable[[PodView], Resources | None] | None,
    held_until: float,
) -> Revert | None:
    """The revert of `record` for the hurt `found`, or None when the pod already has its values."""
    cause, container = found
    ceiling = ceiling_for(pod) if ceiling_for is not None else None
    scope = reverted_resources(record, pod, cause)
    changes = revert_changes(record, pod, recommendation_for(record), ceiling, scope)
    if not changes:
        return None
    grouped = by_container(changes)
    decision = PodDecision(pod, Action.RESIZE, Reason.RESIZE_REVERTED, changes=grouped, detail=cause.value)
    return Revert(record, decision, cause, container, describe(grouped), held_until)


def hold_backed_off_decreases(
    pod: PodView, changes: Sequence[Change], held: Mapping[str, float]
) -> tuple[list[Change], tuple[str, ...]]:
    """`changes` without the decreases of containers in a revert's backoff (a `Hold` for the plan)."""
    if not held:
        return list(changes), ()
    kept: list[Change] = []
    notes: dict[str, str] = {}
    for change in changes:
        if change.container not in held:
            kept.append(change)
            continue
        container = pod.containers[change.container_index]
        request, limit = change.request, change.limit
        current_request = container.requests.get(change.resource)
        current_limit = container.limits.get(change.resource)
        if request is not None and current_request is not None and request < current_request:
            request = None
        if limit is not None and current_limit is not None and limit < current_limit:
            limit = None
        if (request, limit) != (change.request, change.limit):
            notes[change.container] = f"{change.container}: decreases held after a revert"
        if request is not None or limit is not None:
            kept.append(change._replace(request=request, limit=limit))
    return kept, tuple(notes.values())


def evicting_would_decrease(
    pod: PodView, targets: Sequence[tuple[str, Resources]], held: Mapping[str, float]
) -> tuple[str, ...]:
    """Notes for the containers in a revert's backoff whose target (name, target) is below the pod's current
    requests: evicting the pod would lower them, since the webhook gives the new pod the whole
    recommendation. Empty: the eviction may go."""
    if not held:
        return ()
    notes = []
    for name, target in targets:
        if name not in held:
            continue
        container = next((c for c in pod.containers if c.name == name), None)
        if container is None:
            continue
        for resource in _RESOURCES:
            wanted, current = target.get(resource), container.requests.get(resource)
            if wanted is not None and current is not None and wanted < current:
                notes.append(f"{name}: decreases held after a revert")
                break
    return tuple(notes)


def with_reverted_condition(
    conditions: Sequence[Condition], revert: Revert, now: float, message: str | None = None
) -> tuple[Condition, ...]:
    """The VPA's conditions with `ResizeReverted` set True for `revert` (reason: the cause; message: pod,
    cause and values), sorted by type; the others unchanged. The transition time is kept when it was
    True already, as upstream's `Conditions.Set` keeps it. `message` replaces the revert's own (a refused
    resize back)."""
    current = {c.type: c for c in conditions}
    old = current.get(RESIZE_REVERTED_CONDITION)
    since = old.last_transition_time if old is not None and old.is_true else float(int(now))
    current[RESIZE_REVERTED_CONDITION] = Condition(
        RESIZE_REVERTED_CONDITION, "True", since, revert.cause.value, message or revert.message()
    )
    return tuple(current[key] for key in sorted(current))
