"""Reactive in-place updates: which changes deserve a prompt pass, and what a prompt pass may do.

Owns:
- `prompts_in_place(old, new)`: a VPA update calls for a prompt updater pass when the new object resizes
  in place (`InPlaceOrRecreate`, or `InPlace`), has a recommendation, and that recommendation differs from
  the old one (a new VPA with a recommendation counts too; status-only noise such as conditions does not).
- `resizes_only(plan)`: a prompt pass executes only the plan's in-place resizes (whole or partial).
  Evictions (including the fall-back of `InPlaceOrRecreate` after an infeasible or stuck resize) wait
  for the regular tick, so a prompt pass never disrupts more than a resize does; every other rule (rate
  limits, `minReplicas`, disruption budgets, infeasible records, update thresholds) is the plan's.

Must not: do I/O, read the clock, or decide when the pass runs (the updater's trigger does).
"""

from __future__ import annotations

from dataclasses import replace

from vpa.logic.updater.inplace import Action
from vpa.logic.updater.plan import VpaPlan
from vpa.model.vpa import VpaView


def prompts_in_place(old: VpaView | None, new: VpaView) -> bool:
    """True when `new` resizes pods in place and carries a recommendation `old` did not have."""
    if not new.effective_mode.resizes_in_place:
        return False
    recommendation = new.recommendation
    if recommendation is None or recommendation.is_empty():
        return False
    return old is None or old.recommendation != recommendation


def resizes_only(plan: VpaPlan) -> VpaPlan:
    """The plan with its evictions dropped (they stay for the next regular pass)."""
    kept = tuple(d for d in plan.actions if d.action is not Action.EVICT)
    if len(kept) == len(plan.actions):
        return plan
    return replace(plan, actions=kept)
