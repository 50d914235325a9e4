"""What a recommender loop and a restore did (for tests, logs, the gauges and the benchmarks), and the VPAs a
recommender tracks between loops.

Must not: hold behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from vpa.kube.targets import Resolution
from vpa.model.vpa import VpaView

TARGET_CHANGE_LINES: Final = 20
"""`vpa_target_changed` lines per recommender loop at most; the loop summary counts the rest."""


@dataclass(slots=True)
class TrackedVpa:
    view: VpaView
    resolution: Resolution


@dataclass(slots=True)
class LoopReport:
    """What one `run_once` did (for tests, logs and the benchmark)."""

    vpas: int = 0
    pods: int = 0
    samples: int = 0
    samples_skipped: int = 0
    ooms: int = 0
    metrics_error: str | None = None
    status_writes: int = 0
    status_writes_skipped: int = 0
    """Statuses that changed only in bounds within `--bounds-write-tolerance`, so were not written."""
    status_write_errors: int = 0
    checkpoints_written: int = 0
    target_changes: int = 0
    """VPAs whose target changed this loop (bounds move every loop; a target change is news)."""
    checkpoint_errors: int = 0
    checkpoints_collected: int = 0
    aggregates_collected: int = 0
    step_seconds: dict[str, float] = field(default_factory=dict)
    vpa_object_counts: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    """(update mode, has recommendation, matches pods, unsupported config) → VPAs, for the gauge."""
    capped_to_node: int = 0
    vpa_conflicts: int = 0
    hpa_conflicts: int = 0


@dataclass(slots=True)
class RestoreReport:
    loaded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
