"""Events: `event_from_dict`, an `EventView` with the eviction annotations.

Must not: do I/O, log or decide anything; a malformed object raises ConversionError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from vpa.kube.converting.readers import (
    _lenient_time,
    _map,
    _required_str,
    _str,
    _string_map,
    _time,
)
from vpa.model.event import EventView

# --- events -----------------------------------------------------------------------------------------------

# The annotations the recommender reads of eviction events; the rest are not kept.
_EVENT_ANNOTATIONS: Final = frozenset(
    {"offending_containers", "offending_containers_usage", "starved_resource"}
)


def event_from_dict(obj: Mapping[str, Any]) -> EventView:
    """A core/v1 Event → `EventView` with the eviction annotations only."""
    metadata = _map(obj.get("metadata"), "metadata")
    involved = _map(obj.get("involvedObject"), "involvedObject")
    annotations = _string_map(metadata.get("annotations"), "metadata.annotations", None,
                              keep=_EVENT_ANNOTATIONS.__contains__)
    return EventView(
        namespace=_str(metadata.get("namespace"), "metadata.namespace"),
        name=_required_str(metadata.get("name"), "metadata.name"),
        uid=_str(metadata.get("uid"), "metadata.uid"),
        resource_version=_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        reason=_str(obj.get("reason"), "reason"),
        involved_kind=_str(involved.get("kind"), "involvedObject.kind"),
        involved_namespace=_str(involved.get("namespace"), "involvedObject.namespace"),
        involved_name=_str(involved.get("name"), "involvedObject.name"),
        creation_timestamp=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        annotations=tuple(sorted(annotations.items())),
        message=obj["message"] if isinstance(obj.get("message"), str) else "",
        event_type=obj["type"] if isinstance(obj.get("type"), str) else "",
        last_timestamp=_lenient_time(obj.get("lastTimestamp")) or _lenient_time(obj.get("eventTime")),
    )
