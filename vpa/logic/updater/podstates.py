"""The states a plan leaves a pod in that the updater tells with an event on the pod: once, when the pod
enters one, not on every pass it stays in it (`transitions.Transitions` over these keys).

Owns: `PodState` (pod uid, the plan's reason, and what of the verdict matters beyond the reason) and
`pod_states(plan)`, the plan's pods in such a state:
- `InPlaceResizeWouldNotFit` (gate `InPlaceCapacityAware`), per kubelet answer and resource: a pod whose
  resize goes from Deferred to Infeasible, or from memory to CPU, is told again; the amounts in the message,
  which move with every neighbour's requests, are not part of the state;
- `InfeasibleCached` (`InPlace`: the recorded infeasible attempt is not beaten by the recommendation);
- `PodLevelResizeUnsupported` in `InPlace` mode (`InPlaceOrRecreate` evicts such a pod instead).
A pod that leaves a state (resized, recommendation lowered, node freed, gone) and comes back to it is told
again.

Must not: record events or know their wording (the updater's `events` does); count metrics (upstream counts
its infeasible skips on every loop, and so does the updater).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from vpa.logic.updater.inplace import PodDecision, Reason
from vpa.logic.updater.plan import VpaPlan

_TOLD: Final = frozenset(
    {Reason.WOULD_NOT_FIT, Reason.INFEASIBLE_CACHED, Reason.POD_LEVEL_RESIZE_UNSUPPORTED}
)


class PodState(NamedTuple):
    uid: str
    reason: Reason
    state: str = ""
    """`PodDecision.state`: what of the verdict matters beyond the reason ("" when the reason says it all)."""


def pod_states(plan: VpaPlan) -> dict[PodState, PodDecision]:
    """The plan's pods in a state told by an event, each with the decision that put it there."""
    if plan.skip_reason is not None:
        return {}
    out: dict[PodState, PodDecision] = {}
    for decision in plan.decisions:
        reason = decision.reason
        if reason not in _TOLD:
            continue
        if reason is Reason.POD_LEVEL_RESIZE_UNSUPPORTED and plan.mode.evicts:
            continue  # evicted (Recreate rules permitting) and admitted again: nothing to tell the pod
        if reason is Reason.INFEASIBLE_CACHED and decision.acts:
            continue
        out[PodState(decision.pod.uid, reason, decision.state)] = decision
    return out
