"""Create, update and patch with kube-apiserver semantics: the `Writing` mixin of `ObjectStore`.

Owns: request checks (verbs, body and URL agreement, namespace, name or generateName), generateName,
resetting status on create, optimistic concurrency (resourceVersion preconditions, retries when an
object changed while admission was awaited), the status and scale subresource rules, immutable metadata,
generation bumps on spec changes, defaulters, validators and admission webhooks in kube's order, dry runs,
and the JSON / merge / strategic / apply patch types (apply creates a missing object).

Must not: remove objects (a write that finishes a deletion hands over to `deleting`) or register CRDs
(that is `crds`).
"""

from __future__ import annotations

import builtins
from typing import Any

from vpa.sim.apiserver import patching
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.store.common import (
    REQUEST_USER,
    add_warnings,
    conflict,
    deep_copy,
    invalid,
    not_found,
    same_object,
    spec_changed,
)
from vpa.sim.apiserver.store.core import StoreCore
from vpa.sim.contracts import ApiError, JsonObj

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's generateName alphabet


class Writing(StoreCore):
    """`create`, `update` and `patch`."""

    # ------------------------------------------------------------------ create

    async def create(
        self,
        resource: str,
        obj: JsonObj,
        *,
        admit: bool = True,
        dry_run: bool = False,
        user: JsonObj | None = None,
        version: str | None = None,
        namespace: str | None = None,
        options: JsonObj | None = None,
    ) -> JsonObj:
        rt = self.resource_type(resource)
        if "create" not in rt.verbs:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        obj = deep_copy(obj)
        self._prepare_common(rt, obj, version)
        md = obj["metadata"]
        if namespace is not None and rt.namespaced:
            body_ns = md.get("namespace")
            if body_ns and body_ns != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            md["namespace"] = namespace
        ns = md.get("namespace") or ("default" if rt.namespaced and namespace is None else "")
        if rt.namespaced:
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        for k in (
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ):
            md.pop(k, None)
        if not md.get("name") and not md.get("generateName"):
            raise invalid(
                rt,
                "",
                [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
            )
        self._check_namespace(rt, ns, "CREATE")
        if rt.reset_status_on_create:
            obj.pop("status", None)
            if rt.key == "pods":
                obj["status"] = {"phase": "Pending"}
        if rt.crd and rt.status_subresource:
            obj.pop("status", None)
        name_for_msgs = md.get("name") or md.get("generateName", "")
        self.hooks.run_defaulters(rt.key, "CREATE", None, obj, None)
        self._schema_check(rt, obj, version)
        user = user or REQUEST_USER.get()
        warnings: builtins.list[str] = []
        if admit and self.admission is not None and self.admission.active():
            obj, warnings = await self.admission.mutate(
                rt,
                "CREATE",
                obj,
                None,
                None,
                namespace=ns or None,
                name=md.get("name", ""),
                dry_run=dry_run,
                user=user,
                options=options,
            )
            md = obj.setdefault("metadata", {})
            if rt.namespaced:
                md["namespace"] = ns
            self.hooks.run_defaulters(rt.key, "CREATE", None, obj, None)
            self._schema_check(rt, obj, version)
        if not md.get("name"):
            md["name"] = self._generate_name(rt, ns, md.get("generateName", ""))
        self._validate_name(rt, md["name"])
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._validate_crd(rt, obj)
        self.hooks.run_validators(rt.key, "CREATE", None, obj, None)
        if admit and self.admission is not None and self.admission.active():
            warnings += await self.admission.validate(
                rt,
                "CREATE",
                obj,
                None,
                None,
                namespace=ns or None,
                name=md["name"],
                dry_run=dry_run,
                user=user,
                options=options,
            )
            self._check_namespace(rt, ns, "CREATE")
        del name_for_msgs
        add_warnings(warnings)
        return self._create_sync(rt, obj, dry_run=dry_run)

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        prefix = prefix[: 63 - 5] if len(prefix) > 58 else prefix
        for _ in range(16):
            name = prefix + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if self.entry(rt.key, ns, name) is None:
                return name
        raise ApiError(409, "AlreadyExists", f"could not generate a unique name for prefix {prefix!r}")

    # ------------------------------------------------------------------ update

    async def update(
        self,
        resource: str,
        obj: JsonObj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        version: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        options: JsonObj | None = None,
    ) -> JsonObj:
        rt = self.resource_type(resource)
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        md_in = obj.get("metadata") or {}
        name = name if name is not None else md_in.get("name", "")
        if md_in.get("name") and md_in["name"] != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({md_in['name']}) does not match the name on the URL ({name})",
            )
        ns = (namespace if namespace is not None else md_in.get("namespace", "")) if rt.namespaced else ""
        if rt.namespaced and not ns:
            ns = "default"
        if rt.namespaced and md_in.get("namespace") and md_in["namespace"] != ns:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        want_rv = md_in.get("resourceVersion") or None
        for _attempt in range(8):
            entry = self.entry(rt.key, ns, name)
            if entry is None:
                raise not_found(rt, name)
            old = entry.obj
            if want_rv is not None and want_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if want_rv is None and not rt.unconditional_update and subresource != "scale":
                raise invalid(
                    rt,
                    name,
                    [
                        (
                            "metadata.resourceVersion",
                            "FieldValueInvalid",
                            "Invalid value: 0x0: must be specified for an update",
                        )
                    ],
                )
            new = deep_copy(obj)
            result = await self._update_with(
                rt,
                old,
                new,
                subresource,
                dry_run=dry_run,
                user=user,
                admit=admit,
                version=version,
                options=options,
            )
            if result is not None:
                return result
            if want_rv is not None:
                raise conflict(rt, name)
        raise conflict(rt, name)

    async def _update_with(
        self,
        rt: ResourceType,
        old: JsonObj,
        new: JsonObj,
        subresource: str | None,
        *,
        dry_run: bool,
        user: JsonObj | None,
        admit: bool,
        version: str | None,
        options: JsonObj | None,
    ) -> JsonObj | None:
        """Apply `new` over `old`; None when `old` changed while admission was awaited (caller retries)."""
        old_md = old["metadata"]
        old_rv = old_md["resourceVersion"]
        name = old_md["name"]
        ns = old_md.get("namespace", "")
        if subresource == "status" and rt.has_status:
            status = new.get("status")
            new = deep_copy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        else:
            if subresource is None and rt.status_subresource:
                if "status" in old:
                    new["status"] = deep_copy(old["status"])
                else:
                    new.pop("status", None)
            self._prepare_common(rt, new, version)
            md = new["metadata"]
            if md.get("uid") and md["uid"] != old_md["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {md['uid']}, UID in object meta: "
                    f"{old_md['uid']}",
                )
            for k in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
            ):
                if k in old_md:
                    md[k] = old_md[k]
                else:
                    md.pop(k, None)
            if rt.namespaced:
                md["namespace"] = ns
            else:
                md.pop("namespace", None)
        new["apiVersion"] = rt.api_version(version or old.get("apiVersion", "").rpartition("/")[2] or None)
        new["kind"] = rt.kind
        new["metadata"]["resourceVersion"] = old_rv
        user = user or REQUEST_USER.get()
        self.hooks.run_defaulters(rt.key, "UPDATE", old, new, subresource)
        if subresource is None or (subresource == "status" and rt.crd):
            self._schema_check(rt, new, version)
        warnings: builtins.list[str] = []
        active = admit and self.admission is not None and self.admission.active()
        if active:
            assert self.admission is not None
            new, warnings = await self.admission.mutate(
                rt,
                "UPDATE",
                new,
                old,
                subresource,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user,
                options=options,
            )
            new.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "name", "resourceVersion"):
                if k in old_md:
                    new["metadata"][k] = old_md[k]
            if rt.namespaced:
                new["metadata"]["namespace"] = ns
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io" and subresource is None:
            self._validate_crd(rt, new)
        self.hooks.run_validators(rt.key, "UPDATE", old, new, subresource)
        if active:
            assert self.admission is not None
            warnings += await self.admission.validate(
                rt,
                "UPDATE",
                new,
                old,
                subresource,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user,
                options=options,
            )
            cur = self.entry(rt.key, ns, name)
            if cur is None:
                raise not_found(rt, name)
            if cur.obj["metadata"]["resourceVersion"] != old_rv:
                return None
        # A binding sets spec.nodeName outside the pod update strategy: kube-apiserver does not bump
        # generation for it (the scheduler's bind is not a spec change the kubelet must observe).
        if rt.generation and subresource != "binding" and spec_changed(rt, old, new):
            new["metadata"]["generation"] = int(old_md.get("generation") or 0) + 1
        add_warnings(warnings)
        if same_object(old, new):
            return old
        if dry_run:
            return new
        md = new["metadata"]
        if (
            md.get("deletionTimestamp")
            and not md.get("finalizers")
            and not md.get("deletionGracePeriodSeconds")
        ):
            new = self._commit(rt, "MODIFIED", new, old).obj
            await self._remove(rt, new)
            return new
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._crd_accepted(new)
        new = self._commit(rt, "MODIFIED", new, old).obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._register_crd(new)
        if rt.key == "namespaces" and md.get("deletionTimestamp"):
            await self._maybe_finish_namespace(md["name"])
        return new

    # ------------------------------------------------------------------ patch

    async def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        version: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        options: JsonObj | None = None,
    ) -> JsonObj:
        """PATCH with `json`, `merge`, `strategic` or `apply` semantics; retried on internal conflicts."""
        rt = self.resource_type(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        if patch_type == "strategic" and not rt.strategic_merge:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        if patch_type == "apply" and not field_manager:
            raise ApiError(400, "BadRequest", "PATCH /apply requires fieldManager")
        for _attempt in range(8):
            entry = self.entry(rt.key, ns, name)
            if entry is None:
                if patch_type == "apply" and subresource is None:
                    if not isinstance(body, dict):
                        raise ApiError(400, "BadRequest", "apply patch body must be an object")
                    obj = deep_copy(body)
                    obj.setdefault("metadata", {})["name"] = name
                    return await self.create(
                        resource,
                        obj,
                        admit=admit,
                        dry_run=dry_run,
                        user=user,
                        version=version,
                        namespace=ns or None,
                        options=options,
                    )
                raise not_found(rt, name)
            old = entry.obj
            new = patching.apply_patch(patch_type, old, body, rt)
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patch produced a non-object document")
            md = new.get("metadata") or {}
            patch_rv = md.get("resourceVersion")
            if patch_rv and patch_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if md.get("name", name) != name:
                raise invalid(
                    rt,
                    name,
                    [
                        (
                            "metadata.name",
                            "FieldValueInvalid",
                            f'Invalid value: "{md.get("name")}": field is immutable',
                        )
                    ],
                )
            result = await self._update_with(
                rt,
                old,
                new,
                subresource,
                dry_run=dry_run,
                user=user,
                admit=admit,
                version=version,
                options=options,
            )
            if result is not None:
                return result
        raise conflict(rt, name)
