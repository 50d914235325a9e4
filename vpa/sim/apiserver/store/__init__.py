"""The simulated cluster's object store: every object, the resourceVersion counter, history and watchers.

Owns: create / update / patch / delete with kube-apiserver semantics (uid, generateName, generation,
timestamps from the virtual clock, optimistic concurrency, status-subresource rules, graceful pod deletion,
finalizers, ownerReference garbage collection with Background / Orphan / Foreground propagation, namespace
termination, dry runs, CRD registration and schema checks), the cached serialized bytes of each object
(LIST concatenates them), the bounded event history (bytes only) that makes old resourceVersions expire
(410), and fan-out of changes to HTTP watchers (cut off when they fall too far behind) and in-process
subscribers. Implements `vpa.sim.contracts.Store`; admission webhooks run on `create(admit=True)` and on
every update/patch/delete unless `admit=False`.

`ObjectStore` is one class put together from a base and mixins, one module each: `core` (state, lookups,
the commit machinery, checks shared by the writes), `writing` (create, update, patch), `deleting`
(deletion, garbage collection, namespace termination), `crds` (CRD registration), `watching` (watches,
compaction, continue tokens); `events` holds the entry, event, history and watcher types, and `common`
the errors, the request context and the admission protocol.

Must not: speak HTTP or know about specific kinds beyond what the generic API machinery knows (pods'
graceful deletion, namespaces, CRD registration). Kind semantics come through `Hooks`.
"""

from vpa.sim.apiserver.store.common import (
    CONTROLLER_USER,
    DEFAULT_USER,
    FIELD_VALIDATION,
    REQUEST_USER,
    WARNINGS,
    Admission,
    conflict,
    deep_copy,
    invalid,
    not_found,
    rfc3339,
)
from vpa.sim.apiserver.store.crds import Crds
from vpa.sim.apiserver.store.deleting import Deleting
from vpa.sim.apiserver.store.events import Entry, Event, HistoryRecord, Watcher
from vpa.sim.apiserver.store.watching import Subscription, Watching
from vpa.sim.apiserver.store.writing import Writing


class ObjectStore(Writing, Deleting, Crds, Watching):
    """Implements `vpa.sim.contracts.Store` and the generic API machinery behind the HTTP handlers."""


__all__ = [
    "CONTROLLER_USER",
    "DEFAULT_USER",
    "FIELD_VALIDATION",
    "REQUEST_USER",
    "WARNINGS",
    "Admission",
    "Entry",
    "Event",
    "HistoryRecord",
    "ObjectStore",
    "Subscription",
    "Watcher",
    "conflict",
    "deep_copy",
    "invalid",
    "not_found",
    "rfc3339",
]
