"""Process-wide log configuration: structlog over stdlib logging, JSON or console, klog-style verbosity.

Owns: turning `--v`, `--log-format` and `--log-file` into one structlog configuration for the whole
process, done once at start-up by the composition root. Components only call `structlog.get_logger()`.

Verbosity follows klog's spirit: `--v` below 5 logs info and above; `--v=5` and up adds the debug lines
that describe each individual decision (one per pod admission, eviction or resize). Upstream logs those at
V(4), its default; we keep them one step quieter by default because at thousands of admissions per second
they would dominate the process's CPU (a deliberate deviation, see docs/deviations.md).

Must not: be imported by model or logic code, or configure anything at import time.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import orjson
import structlog

LogFormat = Literal["json", "console", "auto"]

DEBUG_VERBOSITY = 5


def level_for_verbosity(v: int) -> int:
    return logging.DEBUG if v >= DEBUG_VERBOSITY else logging.INFO


def _orjson_dumps(obj: object, **_: object) -> str:
    return orjson.dumps(obj, default=str).decode()


def configure(*, v: int = 4, log_format: LogFormat = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog (and stdlib logging for libraries) for the process."""
    out = stream if stream is not None else sys.stderr
    level = level_for_verbosity(v)
    use_json = log_format == "json" or (log_format == "auto" and not out.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    renderer: structlog.types.Processor
    if use_json:
        renderer = structlog.processors.JSONRenderer(serializer=_orjson_dumps)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    # Libraries (aiohttp, kubernetes_asyncio) log through stdlib logging: warnings and up, same stream.
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING if level > logging.DEBUG else logging.INFO)
