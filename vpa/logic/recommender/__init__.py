"""The recommender's pure decisions: histograms, aggregation, estimators, post-processing, checkpoints,
OOM events, node caps, conflicts and which status is worth writing.

Must not: do I/O, log, or read the clock (every function takes an explicit `now`)."""
