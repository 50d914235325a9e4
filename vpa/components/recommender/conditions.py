"""The VPA conditions the recommender sets after a loop (upstream's, the proposals' `ConfigInvalid` and
`InitialDelayActive`, and our own `CappedToNode`, `ConflictingVPA`, `ConflictingHPA`), and which hosted
recommender owns a VPA.

Must not: do I/O, log, or read the clock (`now` is passed in).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from vpa.logic.initialdelay import initial_delay_condition
from vpa.model.vpa import (
    CAPPED_TO_NODE_CONDITION,
    CONFIG_INVALID_CONDITION,
    DEFAULT_RECOMMENDER_NAME,
    INITIAL_DELAY_ACTIVE_CONDITION,
    Condition,
    ConditionType,
    VpaView,
)

NO_PODS_MATCHED_REASON: Final = "NoPodsMatched"
NO_PODS_MATCHED_MESSAGE: Final = "No pods match this VPA object"
# Conditions and event reasons of our own (upstream has none for these): each condition is True while the
# situation lasts and removed when it ends; its Warning event is sent when it appears or its message changes.
CAPPED_TO_NODE: Final = CAPPED_TO_NODE_CONDITION
CAPPED_TO_NODE_REASON: Final = "CappedToLargestNode"
CONFLICTING_VPA: Final = "ConflictingVPA"
CONFLICTING_VPA_REASON: Final = "ConflictingVPA"
CONFLICTING_HPA: Final = "ConflictingHPA"
CONFLICTING_HPA_REASON: Final = "ConflictingHPA"
# AEP-9970 (gate PerVPAConfig): a per-container target percentile outside this recommender's bounds.
CONFIG_INVALID: Final = CONFIG_INVALID_CONDITION
CONFIG_INVALID_REASON: Final = "TargetPercentileOutOfBounds"
VPA_API_VERSION: Final = "autoscaling.k8s.io/v1"
# ------------------------------------------------------------------------------------ pure helpers


def _set_condition(conditions: dict[str, Condition], condition_type: str, status: bool, reason: str,
                   message: str, now: float) -> None:
    """Upstream `Conditions.Set`: the transition time is kept while the status value stays the same."""
    value = "True" if status else "False"
    old = conditions.get(condition_type)
    since = old.last_transition_time if old is not None and old.status == value else float(math.floor(now))
    conditions[condition_type] = Condition(condition_type, value, since, reason, message)


def next_conditions(previous: Iterable[Condition], *, unsupported: str | None, pods_matched: bool,
                    has_recommendation: bool, now: float) -> tuple[Condition, ...]:
    """The VPA conditions after a loop (spec §1.6, §3.3), sorted by type.

    ConfigDeprecated is always removed; ConfigUnsupported is set (with the message) or removed;
    NoPodsMatched is set when no pod matches and removed otherwise; RecommendationProvided is True with an
    empty reason when a recommendation exists, else False (with the NoPodsMatched reason when no pod
    matches). Conditions this code does not manage are kept as they are.
    """
    conditions = {c.type: c for c in previous}
    conditions.pop(ConditionType.CONFIG_DEPRECATED, None)
    if unsupported is None:
        conditions.pop(ConditionType.CONFIG_UNSUPPORTED, None)
    else:
        _set_condition(conditions, ConditionType.CONFIG_UNSUPPORTED, True, "", unsupported, now)
    reason = message = ""
    if pods_matched:
        conditions.pop(ConditionType.NO_PODS_MATCHED, None)
    else:
        reason, message = NO_PODS_MATCHED_REASON, NO_PODS_MATCHED_MESSAGE
        _set_condition(conditions, ConditionType.NO_PODS_MATCHED, True, reason, message, now)
    if has_recommendation:
        _set_condition(conditions, ConditionType.RECOMMENDATION_PROVIDED, True, "", "", now)
    else:
        _set_condition(conditions, ConditionType.RECOMMENDATION_PROVIDED, False, reason, message, now)
    return tuple(conditions[key] for key in sorted(conditions))


def with_own_conditions(conditions: Iterable[Condition], wanted: Mapping[str, tuple[str, str] | None],
                        now: float) -> tuple[tuple[Condition, ...], list[str]]:
    """Our own conditions (`CappedToNode`, `ConflictingVPA`, `ConflictingHPA`) set from `wanted` (type →
    (reason, message), or None to remove it), sorted by type, and the types whose event is due: those that
    were not True before or whose message changed."""
    current = {c.type: c for c in conditions}
    raised = []
    for condition_type, value in wanted.items():
        old = current.get(condition_type)
        if value is None:
            current.pop(condition_type, None)
            continue
        reason, message = value
        if old is None or not old.is_true or old.message != message:
            raised.append(condition_type)
        _set_condition(current, condition_type, True, reason, message, now)
    return tuple(current[key] for key in sorted(current)), raised


def owner_name(vpa: VpaView, hosted: Sequence[str]) -> str | None:
    """Which of the recommenders `hosted` in this process handles `vpa` (spec §3.4 per name): the first
    name in its `spec.recommenders` that is hosted, `default` for a VPA naming none; None if no hosted
    recommender is selected (that VPA is left alone)."""
    for name in vpa.recommenders or (DEFAULT_RECOMMENDER_NAME,):
        if name in hosted:
            return name
    return None


def with_initial_delay(conditions: Iterable[Condition], view: VpaView, now: float,
                       enabled: bool) -> tuple[Condition, ...]:
    """AEP-9936 (gate `VPAInitialDelay`): `InitialDelayActive` True while the VPA's `initialDelaySeconds`
    window lasts, False after; removed when the VPA sets no window or the gate is off. Sorted by type."""
    current = {c.type: c for c in conditions}
    window = initial_delay_condition(view, now) if enabled else None
    if window is None:
        current.pop(INITIAL_DELAY_ACTIVE_CONDITION, None)
    else:
        _set_condition(current, INITIAL_DELAY_ACTIVE_CONDITION, window.active, window.reason, window.message,
                       now)
    return tuple(current[key] for key in sorted(current))
