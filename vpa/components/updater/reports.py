"""What an updater loop and an unboost pass did (for tests, logs and benchmarks), and one VPA's work in a
loop.

Must not: hold behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vpa.kube.actuating import Outcome
from vpa.logic.updater.inplace import (
    PodDecision,
)
from vpa.logic.updater.plan import VpaPlan
from vpa.model.pod import PodView
from vpa.model.vpa import VpaView


@dataclass(slots=True)
class VpaWork:
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
