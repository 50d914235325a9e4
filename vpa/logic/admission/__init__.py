"""The admission webhook's pure decisions: pod patches and VPA validation.

Must not: do I/O, log, or read the clock."""
