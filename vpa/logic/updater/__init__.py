"""The updater's pure decisions: update priority, eviction and in-place restrictions, the in-place
decision and its resize-status reading, infeasible attempts, startup-boost removal and the pass plan.

Must not: do I/O, log, or read the clock (every function takes an explicit `now`)."""
