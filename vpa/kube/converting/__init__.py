"""Raw API JSON → model views, and model status → JSON for writers: the edge where dicts stop.

Owns: `pod_from_dict` (a trimmed `PodView` that keeps only what vpa reads), `vpa_from_dict` (a full
`VpaView`), `event_from_dict` (an `EventView` with the eviction annotations), the selectors of
workloads and scale subresources, `vpa_status_to_dict` /
`recommendation_to_dict` for the status writer, `ConversionError` (names the offending field, e.g.
`spec.resourcePolicy.containerPolicies[1].minAllowed.cpu`), and `Interner`, the content-keyed cache that
makes identical pieces of different pods one object (label maps, owners, container specs, `Resources`,
parsed quantities), which is what keeps a cached pod under 2 KiB.

Timestamps become Unix seconds (float). Quantities become exact integers through `Resources`.

One module per kind, all re-exported here: `pods`, `vpas` (both ways), `events`, `selectors` (of target
workloads), over `readers` (the typed readers and `ConversionError`) and `interning` (`Interner`).

Must not: do I/O, log, decide anything, or import `vpa.logic`. A malformed object raises ConversionError;
whether to skip it is the caller's decision (caches skip it and count it, they never crash on it).
"""

from vpa.kube.converting.events import event_from_dict
from vpa.kube.converting.interning import DEFAULT_INTERNER, Interner
from vpa.kube.converting.pods import pod_from_dict
from vpa.kube.converting.readers import ConversionError, format_time, parse_time
from vpa.kube.converting.selectors import selector_from_scale, selector_from_workload
from vpa.kube.converting.vpas import (
    LAST_APPLIED_CONFIGURATION,
    condition_to_dict,
    recommendation_to_dict,
    vpa_from_dict,
    vpa_status_from_dict,
    vpa_status_to_dict,
)

__all__ = [
    "DEFAULT_INTERNER",
    "LAST_APPLIED_CONFIGURATION",
    "ConversionError",
    "Interner",
    "condition_to_dict",
    "event_from_dict",
    "format_time",
    "parse_time",
    "pod_from_dict",
    "recommendation_to_dict",
    "selector_from_scale",
    "selector_from_workload",
    "vpa_from_dict",
    "vpa_status_from_dict",
    "vpa_status_to_dict",
]
