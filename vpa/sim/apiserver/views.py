"""Resources that are another API's view of stored objects: `events.k8s.io/v1` Events over `core/v1` Events.

Owns: the field mapping between the two Event representations (kube-apiserver stores one object and serves
both): `regarding`↔`involvedObject`, `note`↔`message`, `reportingController`↔`reportingComponent`,
`deprecatedSource`/`deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/`deprecatedCount`↔`source`/
`firstTimestamp`/`lastTimestamp`/`count`; the rest (reason, type, action, eventTime, series, related,
reportingInstance) is shared.

Must not: touch the store; the HTTP layer converts on the way in and out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JsonObj = dict[str, Any]

# core/v1 field -> events.k8s.io/v1 field
_EVENT_FIELDS = {
    "involvedObject": "regarding",
    "message": "note",
    "reportingComponent": "reportingController",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
}
_EVENT_BACK = {v: k for k, v in _EVENT_FIELDS.items()}


def core_event_to_v1(obj: JsonObj) -> JsonObj:
    out: JsonObj = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": obj.get("metadata", {})}
    for k, v in obj.items():
        if k in ("kind", "apiVersion", "metadata"):
            continue
        out[_EVENT_FIELDS.get(k, k)] = v
    return out


def v1_event_to_core(obj: JsonObj) -> JsonObj:
    out: JsonObj = {"kind": "Event", "apiVersion": "v1", "metadata": obj.get("metadata", {})}
    for k, v in obj.items():
        if k in ("kind", "apiVersion", "metadata"):
            continue
        out[_EVENT_BACK.get(k, k)] = v
    return out


# View resource key -> (stored resource key, to_view, from_view)
VIEWS: dict[str, tuple[str, Callable[[JsonObj], JsonObj], Callable[[JsonObj], JsonObj]]] = {
    "events.events.k8s.io": ("events", core_event_to_v1, v1_event_to_core),
}
