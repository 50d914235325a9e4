"""Deletion with kube-apiserver semantics: the `Deleting` mixin of `ObjectStore`.

Owns: `delete` (preconditions, validators and admission, dry runs, pods' graceful deletion, finalizers),
garbage collection of dependents by ownerReference with Background, Orphan and Foreground propagation
(the `foregroundDeletion` finalizer), and namespace termination (Terminating, deleting the content,
removing the namespace once it is empty).

Must not: create or update objects other than through `_commit` on the object being deleted or its
dependents' ownerReferences and finalizers.
"""

from __future__ import annotations

import builtins
import contextlib

from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.store.common import REQUEST_USER, deep_copy, not_found, rfc3339, same_object
from vpa.sim.apiserver.store.core import StoreCore
from vpa.sim.contracts import ApiError, JsonObj


class Deleting(StoreCore):
    """`delete`, garbage collection and namespace termination."""

    async def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_s: int | None = None,
        propagation: str | None = None,
        preconditions: JsonObj | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        options: JsonObj | None = None,
    ) -> JsonObj | None:
        rt = self.resource_type(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        entry = self.entry(rt.key, ns, name)
        if entry is None:
            raise not_found(rt, name)
        obj = entry.obj
        md = obj["metadata"]
        if preconditions:
            if preconditions.get("uid") and preconditions["uid"] != md["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                    f"UID in object meta: {md['uid']}",
                )
            if (
                preconditions.get("resourceVersion")
                and preconditions["resourceVersion"] != md["resourceVersion"]
            ):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                    f"{md['resourceVersion']}",
                )
        self.hooks.run_validators(rt.key, "DELETE", obj, obj, None)
        if admit and self.admission is not None and self.admission.active():
            await self.admission.validate(
                rt,
                "DELETE",
                None,
                obj,
                None,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user or REQUEST_USER.get(),
                options=options,
            )
            cur = self.entry(rt.key, ns, name)
            if cur is None:
                raise not_found(rt, name)
            obj = cur.obj
            md = obj["metadata"]
        if dry_run:
            return obj
        if propagation == "Orphan":
            await self._orphan(md["uid"])
        if propagation == "Foreground" and rt.key != "namespaces" and self._live_dependents(md["uid"]):
            return await self._delete_foreground(rt, obj)
        grace = self._grace(rt, obj, grace_period_s)
        if rt.key == "namespaces":
            return await self._delete_namespace(obj)
        if grace > 0 or md.get("finalizers"):
            if md.get("deletionTimestamp"):
                cur_grace = int(md.get("deletionGracePeriodSeconds") or 0)
                if grace > 0 and grace >= cur_grace:
                    return obj
                if grace == 0 and md.get("finalizers"):
                    return obj
            new = deep_copy(obj)
            nmd = new["metadata"]
            if grace > 0:
                nmd["deletionTimestamp"] = rfc3339(self.clock.now() + grace)
                nmd["deletionGracePeriodSeconds"] = grace
            else:
                nmd.setdefault("deletionTimestamp", rfc3339(self.clock.now()))
                nmd["deletionGracePeriodSeconds"] = 0
            if rt.generation:
                nmd["generation"] = int(nmd.get("generation") or 0) + 1
            new = self._commit(rt, "MODIFIED", new, obj).obj
            if grace == 0 and not nmd.get("finalizers"):
                await self._remove(rt, new)
            return new
        return await self._remove(rt, obj)

    def _live_dependents(self, uid: str) -> builtins.list[tuple[str, str, str]]:
        return [d for d in self.dependents(uid) if self.entry(*d) is not None]

    async def _delete_foreground(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        """Foreground cascade: the owner stays (finalizer `foregroundDeletion`) until no dependent is left."""
        md = obj["metadata"]
        new = deep_copy(obj)
        nmd = new["metadata"]
        finalizers = list(nmd.get("finalizers") or [])
        if "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        nmd["finalizers"] = finalizers
        if not md.get("deletionTimestamp"):
            nmd["deletionTimestamp"] = rfc3339(self.clock.now())
            nmd["deletionGracePeriodSeconds"] = 0
            if rt.generation:
                nmd["generation"] = int(nmd.get("generation") or 0) + 1
        if not same_object(obj, new):
            new = self._commit(rt, "MODIFIED", new, obj).obj
        for key, ns, name in self._live_dependents(md["uid"]):
            e = self.entry(key, ns, name)
            if e is None or e.obj["metadata"].get("deletionTimestamp"):
                continue
            with contextlib.suppress(ApiError):
                await self.delete(key, ns or None, name, propagation="Foreground", admit=False)
        await self._finish_foreground(rt, md.get("namespace", ""), md["name"])
        cur = self.entry(rt.key, md.get("namespace", ""), md["name"])
        return cur.obj if cur is not None else new

    async def _finish_foreground(self, rt: ResourceType, ns: str, name: str) -> None:
        """Drop `foregroundDeletion` once no dependent is left; remove the owner if nothing else holds it."""
        e = self.entry(rt.key, ns, name)
        if e is None:
            return
        md = e.obj["metadata"]
        if "foregroundDeletion" not in (md.get("finalizers") or []) or self._live_dependents(md["uid"]):
            return
        new = deep_copy(e.obj)
        rest = [f for f in new["metadata"]["finalizers"] if f != "foregroundDeletion"]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        new = self._commit(rt, "MODIFIED", new, e.obj).obj
        if not rest:
            await self._remove(rt, new)

    async def _release_foreground_owners(self, obj: JsonObj) -> None:
        md = obj["metadata"]
        for ref in md.get("ownerReferences") or []:
            owner_rt = self.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            if owner_rt is None:
                continue
            ns = md.get("namespace", "") if owner_rt.namespaced else ""
            owner = self.entry(owner_rt.key, ns, ref.get("name", ""))
            if owner is not None and owner.obj["metadata"].get("uid") == ref.get("uid"):
                await self._finish_foreground(owner_rt, ns, ref.get("name", ""))

    def _grace(self, rt: ResourceType, obj: JsonObj, requested: int | None) -> int:
        if rt.key != "pods":
            return 0
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            return 0
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is None:
            requested = spec.get("terminationGracePeriodSeconds", 30)
            if requested is None:
                requested = 30
        return max(0, int(requested))

    async def _remove(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        """Remove the object for good, then collect its dependents (background propagation)."""
        md = obj["metadata"]
        ns = md.get("namespace", "")
        cur = self.entry(rt.key, ns, md["name"])
        if cur is None:
            return obj
        final = self._commit(rt, "DELETED", deep_copy(cur.obj), cur.obj).obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            await self._unregister_crd(final)
        await self._collect(md["uid"])
        await self._release_foreground_owners(final)
        if ns and rt.namespaced:
            nsobj = self.get("namespaces", None, ns)
            if nsobj is not None and nsobj["metadata"].get("deletionTimestamp"):
                await self._maybe_finish_namespace(ns)
        return final

    async def _collect(self, owner_uid: str) -> None:
        for key, ns, name in self.dependents(owner_uid):
            e = self.entry(key, ns, name)
            if e is None:
                continue
            refs = e.obj["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if r.get("uid") != owner_uid and self._uid_alive(r)]
            if alive:
                new = deep_copy(e.obj)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
                self._commit(self.resource_type(key), "MODIFIED", new, e.obj)
                continue
            if e.obj["metadata"].get("deletionTimestamp"):
                continue
            try:
                await self.delete(key, ns or None, name, admit=False)
            except ApiError:
                continue

    def _uid_alive(self, ref: JsonObj) -> bool:
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            return False
        bucket = self._objects.get(rt.key, {})
        for inner in bucket.values():
            e = inner.get(ref.get("name", ""))
            if e is not None and e.obj["metadata"]["uid"] == ref.get("uid"):
                return True
        return False

    async def _orphan(self, owner_uid: str) -> None:
        for key, ns, name in self.dependents(owner_uid):
            e = self.entry(key, ns, name)
            if e is None:
                continue
            new = deep_copy(e.obj)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit(self.resource_type(key), "MODIFIED", new, e.obj)

    async def _delete_namespace(self, obj: JsonObj) -> JsonObj:
        name = obj["metadata"]["name"]
        rt = self.resource_type("namespaces")
        if not obj["metadata"].get("deletionTimestamp"):
            new = deep_copy(obj)
            new["metadata"]["deletionTimestamp"] = rfc3339(self.clock.now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["status"] = {"phase": "Terminating"}
            self._commit(rt, "MODIFIED", new, obj)
            obj = new
        for key, bucket in list(self._objects.items()):
            krt = self.registry.get(key)
            if krt is None or not krt.namespaced:
                continue
            for n in list(bucket.get(name, {})):
                try:
                    await self.delete(key, name, n, admit=False)
                except ApiError:
                    continue
        await self._maybe_finish_namespace(name)
        return self.get("namespaces", None, name) or obj

    async def _maybe_finish_namespace(self, name: str) -> None:
        for key, bucket in self._objects.items():
            if key != "namespaces" and bucket.get(name):
                return
        ns = self.entry("namespaces", None, name)
        if ns is not None and ns.obj["metadata"].get("deletionTimestamp"):
            await self._remove(self.resource_type("namespaces"), ns.obj)
