"""The simulated API server's HTTP surface (aiohttp): Kubernetes REST paths plus the `/sim/v1` control API.

Owns: routing `/api`, `/apis`, `/api/v1/...`, `/apis/<group>/<version>/...` (and the legacy `/watch/`
prefix) onto the store; discovery documents (legacy, and aggregated apidiscovery.k8s.io/v2 when asked);
`/version`, `/healthz`, `/readyz`, `/livez`; a minimal `/openapi/v3` (PATCH operations advertising
`fieldValidation` for kubectl's probe, custom resources' schemas for `kubectl explain`; no requestBody, so
kubectl's client-side apply computes strategic merge patches from its compiled-in types; `/openapi/v2`
answers 404); LIST with `limit`/`continue`; chunked WATCH streams with bookmarks, `timeoutSeconds`,
`sendInitialEvents` and 410 `Expired`; `Table` output; `status`/`scale` subresources; hook-served
subresources and aggregated APIs; the events.k8s.io view of Events; JSON, YAML and (for kubectl's typed
clients) protobuf request bodies; gzip for bodies over 128 KiB (`compression`); `Status` errors; faults
(resource requests only: discovery, `/version` and `/sim/v1` are never paused or failed).

Server-side apply (`application/apply-patch+yaml`) is approximated: the applied configuration is merged
like a strategic merge patch (built-ins) or a merge patch (custom resources), creating the object when it
is missing; field ownership and conflicts are not tracked.

Control API (JSON):
  GET  /sim/v1/clock                 -> {"now": <unix seconds float>, "timeScale": x}
  POST /sim/v1/clock/advance         {"seconds": n}  -> advance virtual time, then settle; answers the clock
  POST /sim/v1/faults/drop-watches   -> {"dropped": n}
  POST /sim/v1/faults/compact        -> {"compactedResourceVersion": "n"}
  POST /sim/v1/faults/bookmark       -> send a BOOKMARK on every watch that allows them
  POST /sim/v1/faults/inject         {"verb","resource","code","latencySeconds","count","userAgent",
                                      "subresource"} -> {"id": n, ...}
  GET  /sim/v1/faults                -> the injected faults with their hit counts
  POST /sim/v1/faults/clear | /pause | /resume

Audit: with `audit` set to a list, every write (any method but GET, HEAD, OPTIONS) on a resource path is
appended as an `AuditRecord` (wall-clock time, method, path, status, the bearer token that made it), as
kube-apiserver's audit log records the user: tests attribute writes to the client that made them.

`ApiServer` is one class put together from a base and mixins, one module each: `core` (state, the route
table, the error / audit / warning middleware, body decoding and object and `Table` responses), `control`
(`/version`, health, `/sim/v1`), `discovery` (discovery documents and OpenAPI), `resources` (resource
paths, get / create / update / patch / delete / deletecollection, the events.k8s.io view), `listwatch`
(LIST and WATCH streams) and `subresources` (hook-served, `status` and `scale` subresources, aggregated
APIs); `common` holds the media types, small request and response helpers and `AuditRecord`.

Must not: implement object semantics (the store does) or kind behaviour (hooks do).
"""

from vpa.sim.apiserver.server.common import (
    EXEMPT_FLOW_SCHEMA_UID,
    EXEMPT_PRIORITY_LEVEL_UID,
    JSON,
    PF_FLOW_SCHEMA_UID_HEADER,
    PF_PRIORITY_LEVEL_UID_HEADER,
    AuditRecord,
    SubresourceVerb,
)
from vpa.sim.apiserver.server.control import Control
from vpa.sim.apiserver.server.discovery import Discovery
from vpa.sim.apiserver.server.listwatch import ListWatch
from vpa.sim.apiserver.server.resources import Resources
from vpa.sim.apiserver.server.subresources import Subresources


class ApiServer(Control, Discovery, Resources, ListWatch, Subresources):
    """Builds the aiohttp application over an `ObjectStore`."""


__all__ = [
    "EXEMPT_FLOW_SCHEMA_UID",
    "EXEMPT_PRIORITY_LEVEL_UID",
    "JSON",
    "PF_FLOW_SCHEMA_UID_HEADER",
    "PF_PRIORITY_LEVEL_UID_HEADER",
    "ApiServer",
    "AuditRecord",
    "SubresourceVerb",
]
