"""CustomResourceDefinitions: the `Crds` mixin of `ObjectStore`.

Owns: validating a CRD (group, names, exactly one storage version), the status kube-apiserver gives an
accepted CRD (accepted names, NamesAccepted and Established), adding its resource type to the registry and
telling `crd_listeners`, and on deletion removing every custom object of it and ending its watches.

Must not: check custom objects against their schemas (that is `core`, on every write) or serve discovery.
"""

from __future__ import annotations

import asyncio
import builtins

from vpa.sim.apiserver.registry import ResourceType, crd_resource_type
from vpa.sim.apiserver.store.common import deep_copy, invalid, rfc3339
from vpa.sim.apiserver.store.core import StoreCore
from vpa.sim.contracts import JsonObj


class Crds(StoreCore):
    """CRD validation, acceptance, registration and removal."""

    def _validate_crd(self, rt: ResourceType, crd: JsonObj) -> None:
        spec = crd.get("spec") or {}
        name = crd["metadata"].get("name", "")
        names = spec.get("names") or {}
        errs: builtins.list[tuple[str, str, str]] = []
        if not spec.get("group"):
            errs.append(("spec.group", "FieldValueRequired", "Required value"))
        if not names.get("plural"):
            errs.append(("spec.names.plural", "FieldValueRequired", "Required value"))
        if not names.get("kind"):
            errs.append(("spec.names.kind", "FieldValueRequired", "Required value"))
        if spec.get("group") and names.get("plural") and name != f"{names['plural']}.{spec['group']}":
            errs.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
        versions = spec.get("versions") or []
        if not versions:
            errs.append(
                (
                    "spec.versions",
                    "FieldValueRequired",
                    "Required value: must have exactly one version marked as storage version",
                )
            )
        elif sum(1 for v in versions if v.get("storage")) != 1:
            errs.append(
                (
                    "spec.versions",
                    "FieldValueInvalid",
                    "Invalid value: must have exactly one version marked as storage version",
                )
            )
        if errs:
            raise invalid(rt, name, errs)

    def _crd_accepted(self, crd: JsonObj) -> None:
        names = dict(crd["spec"]["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        now = rfc3339(self.clock.now())
        crd["status"] = {
            "acceptedNames": names,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
        }

    def _register_crd(self, crd: JsonObj) -> None:
        rt = crd_resource_type(crd)
        self.registry.add(rt)
        for cb in self.crd_listeners:
            res = cb(rt, rt.key)
            if asyncio.iscoroutine(res):
                self._spawn(res)

    async def _unregister_crd(self, crd: JsonObj) -> None:
        spec = crd["spec"]
        key = f"{spec['names']['plural']}.{spec['group']}"
        rt = self.registry.get(key)
        if rt is None:
            return
        bucket = self._objects.get(key, {})
        for inner in list(bucket.values()):
            for name in list(inner):
                e = inner.get(name)
                if e is not None:
                    self._commit(rt, "DELETED", deep_copy(e.obj), e.obj)
        self._objects.pop(key, None)
        self.registry.remove(key)
        for w in list(self.watchers.get(key, ())):
            w.queue.put_nowait(None)
        for cb in self.crd_listeners:
            res = cb(None, key)
            if asyncio.iscoroutine(res):
                self._spawn(res)
