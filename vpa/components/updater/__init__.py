"""The updater: evictions and in-place resizes that apply recommendations (spec §4).

`updater` is the loop, `unboost` ends startup boosts, `inputs` reads pods and VPAs, `failures` logs a failed
pass, `running` wires it into the process; `events`, `metrics` and `reports` hold its names, collectors and
reports.

Must not: import other components.
"""

from vpa.components.updater.events import SKIPPED_ADMISSION_STALE
from vpa.components.updater.metrics import UpdaterMetrics
from vpa.components.updater.reports import LoopReport, UnboostReport
from vpa.components.updater.running import build, run, watch_recommendations
from vpa.components.updater.updater import Updater

__all__ = [
    "SKIPPED_ADMISSION_STALE",
    "LoopReport",
    "UnboostReport",
    "Updater",
    "UpdaterMetrics",
    "build",
    "run",
    "watch_recommendations",
]
