"""Benchmarks: scale and latency measurements, each runnable as `python -m benchmarks.<name>`.

Owns: `quiet_logs`, the one log set-up of a benchmark that runs the project's components (or its informer)
in its own process, so that their info lines do not interleave with the benchmark's tables.

Must not: be imported by the project (`vpa/`): benchmarks measure it from outside.
"""

from __future__ import annotations

import logging

import structlog


def quiet_logs(level: int = logging.WARNING) -> None:
    """structlog at `level` and up only, loggers cached on first use (as `vpa.app.logs.configure` does)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level), cache_logger_on_first_use=True
    )
