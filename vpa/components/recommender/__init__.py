"""The live recommender: cluster in, VPA status and checkpoints out (upstream's `RunOnce`).

`recommender` is one recommender and its loop steps, `loop` runs the hosted recommenders together on a
ticker, `checkpoints` writes and collects checkpoints, `history` restores history from Prometheus, `metrics`
holds the collectors, `conditions` and `ooms` the pure helpers, `ports` the I/O seams.

Must not: import other components (the updater, the webhook).
"""

from vpa.components.recommender.conditions import next_conditions, with_own_conditions
from vpa.components.recommender.group import RecommenderGroup
from vpa.components.recommender.loop import run_loop
from vpa.components.recommender.metrics import RecommenderMetrics
from vpa.components.recommender.ooms import ooms_from_pod_update
from vpa.components.recommender.recommender import Recommender
from vpa.components.recommender.reports import LoopReport, RestoreReport

__all__ = [
    "LoopReport",
    "Recommender",
    "RecommenderGroup",
    "RecommenderMetrics",
    "RestoreReport",
    "next_conditions",
    "ooms_from_pod_update",
    "run_loop",
    "with_own_conditions",
]
