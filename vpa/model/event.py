"""A trimmed view of a core/v1 Event, as much of it as the recommender's eviction-OOM input and
`vpa report` read.

Owns: `EventView` (identity, reason, message, type, the involved object, creation and last-seen time,
annotations).

Must not: parse raw API JSON (that is `vpa.kube.converting`), interpret the annotations (that is
`vpa.logic.recommender.evictions`), or import anything outside the standard library and `vpa.model`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EventView:
    """A core/v1 Event. Times are Unix seconds."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    reason: str
    involved_kind: str
    involved_namespace: str
    involved_name: str
    creation_timestamp: float
    annotations: tuple[tuple[str, str], ...] = ()
    message: str = ""
    event_type: str = ""
    """`Normal` or `Warning`."""
    last_timestamp: float | None = None
    """`lastTimestamp` (or `eventTime`) when set: the newest occurrence of a repeated event."""

    def annotation(self, key: str) -> str | None:
        for name, value in self.annotations:
            if name == key:
                return value
        return None
