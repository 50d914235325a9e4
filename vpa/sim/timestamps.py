"""Timestamps as Kubernetes writes them in object fields: RFC 3339 in whole seconds, UTC (`...Z`).

Owns: `rfc3339` (seconds since the epoch to text, memoised: the simulator stamps many objects with the same
second) and `parse_time` (that text back, `None` for anything else).

Must not: know about objects or clocks; callers pass the time.
"""

from __future__ import annotations

import datetime as dt
import functools

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def rfc3339(t: float) -> str:
    return _rfc3339(int(t))


@functools.lru_cache(maxsize=4096)
def _rfc3339(t: int) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime(_FORMAT)


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, _FORMAT).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None
