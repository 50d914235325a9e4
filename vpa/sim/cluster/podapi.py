"""The pod-specific API: defaulting and validation hooks; the `resize`, `eviction`, `binding` subresources.

Owns: pod defaulting at CREATE plus the LimitRanger admission plugin (defaults, then min/max/ratio → 403),
create validation (422), the update rule for plain pod writes (only image, activeDeadlineSeconds, tolerations
additions...; container resources are immutable there → 422), `pods/resize` (GET/PATCH/PUT; JSON, merge and
strategic merge patches; `ValidatePodResize` of the configured version; on 1.36 the `PodResizeValidator`
admission plugin's 403 with a `NodeCapacity` cause; on 1.32 `status.resize: Proposed`), `pods/eviction`
(policy/v1 and v1beta1 Eviction; PodDisruptionBudget check → 429, disruption accounting in the budget status,
`DisruptionTarget` pod condition, graceful delete → 201 Status Success) and `pods/binding` (what the scheduler
posts; also used in-process with `store.update(..., subresource="binding")`).

Must not: schedule, run or account pods (the node agent does) or compute budgets' status (the controllers do).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.sim import timestamps
from vpa.sim.cluster import disruption, pods
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.patching import apply_patch
from vpa.sim.cluster.runtime import Runtime
from vpa.sim.contracts import ApiError, HookRegistry, JsonObj, Operation, Store, SubresourceRequest

PDBS = "poddisruptionbudgets.policy"
_SUCCESS: JsonObj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _not_found(name: str) -> ApiError:
    return ApiError(404, "NotFound", f'pods "{name}" not found', kind="pods", name=name)


class PodApi:
    def __init__(
        self,
        runtime: Runtime,
        store: Store,
        clock: VirtualClock,
        options: ClusterOptions,
        node_allocatable: Any,
    ) -> None:
        self.rt = runtime
        self.store = store
        self.clock = clock
        self.version = options.kubernetes_version
        # KEP-5419: pods with pod-level `spec.resources` resizable through /resize from 1.36 (beta, on), on
        # 1.35 only with the alpha gate (`ClusterOptions.pod_level_resize`); otherwise any resize of such a
        # pod is refused.
        self.pod_level_resize = self.version >= (1, 36) or (
            options.pod_level_resize and self.version >= (1, 35)
        )
        # Callable[[str], tuple[int, int] | None]: a node's allocatable (cpu millicores, memory bytes).
        self.node_allocatable = node_allocatable

    def register(self, hooks: HookRegistry) -> None:
        hooks.add_defaulter("pods", self.default)
        hooks.add_validator("pods", self.validate)
        hooks.add_subresource("pods", "resize", self.resize)
        hooks.add_subresource("pods", "eviction", self.evict)
        hooks.add_subresource("pods", "binding", self.bind)

    # --- defaulting and validation --------------------------------------------------------------------------

    def _limit_ranges(self, namespace: str) -> list[JsonObj]:
        try:
            return self.store.list("limitranges", namespace)
        except ApiError:
            return []

    def default(self, op: Operation, old: JsonObj | None, new: JsonObj, subresource: str | None) -> None:
        if op != "CREATE" or subresource is not None:
            return
        self._priority(new)
        pods.default_pod(new, self.version)
        namespace = (new.get("metadata") or {}).get("namespace") or "default"
        pods.limit_range_defaults(new, self._limit_ranges(namespace))
        # LimitRanger may have added requests: the QoS class follows the final resources.
        new["status"]["qosClass"] = pods.qos_class(new)

    def _priority(self, pod: JsonObj) -> None:
        """The Priority admission plugin: `spec.priority` from the PriorityClass (or the default one)."""
        spec = pod.setdefault("spec", {})
        name = spec.get("priorityClassName")
        try:
            classes = self.store.list("priorityclasses.scheduling.k8s.io")
        except ApiError:
            return
        chosen = None
        if name:
            chosen = next((c for c in classes if (c.get("metadata") or {}).get("name") == name), None)
            if chosen is None and name not in ("system-cluster-critical", "system-node-critical"):
                md = pod.get("metadata") or {}
                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{md.get("name") or md.get("generateName") or ""}" is '
                    f"forbidden: no PriorityClass with name {name} was found",
                    kind="pods",
                )
            value = (
                int(chosen.get("value", 0))
                if chosen is not None
                else (2000000000 if name == "system-cluster-critical" else 2000001000)
            )
        else:
            chosen = next((c for c in classes if c.get("globalDefault")), None)
            value = int(chosen.get("value", 0)) if chosen is not None else 0
            if chosen is not None:
                spec["priorityClassName"] = chosen["metadata"]["name"]
        spec.setdefault("priority", value)
        if chosen is not None and chosen.get("preemptionPolicy"):
            spec.setdefault("preemptionPolicy", chosen["preemptionPolicy"])

    def validate(self, op: Operation, old: JsonObj | None, new: JsonObj, subresource: str | None) -> None:
        md = new.get("metadata") or {}
        name = md.get("name") or md.get("generateName") or ""
        namespace = md.get("namespace") or "default"
        if op == "CREATE":
            errs = pods.validate_pod_spec(new.get("spec") or {})
            if errs:
                raise pods.invalid("Pod", name, errs)
            violations = pods.limit_range_violations(new, self._limit_ranges(namespace))
            if violations:
                raise pods.forbidden("pods", name, violations)
            return
        if op != "UPDATE" or old is None:
            return
        if subresource is None:
            errs = pods.validate_pod_update(old, new)
            if errs:
                raise pods.invalid("Pod", name, errs)
        elif subresource == "binding":
            old_node = (old.get("spec") or {}).get("nodeName")
            new_node = (new.get("spec") or {}).get("nodeName")
            if old_node and old_node != new_node:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                    f'{name} is already assigned to node "{old_node}"',
                    kind="pods/binding",
                    name=name,
                )
            old_spec = dict(old.get("spec") or {})
            new_spec = dict(new.get("spec") or {})
            old_spec.pop("nodeName", None)
            new_spec.pop("nodeName", None)
            if old_spec != new_spec:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec: Forbidden: binding may only set spec.nodeName',
                    kind="Pod",
                    name=name,
                )
        elif subresource == "resize":
            errs = pods.validate_resize(old, new, self.version, pod_level=self.pod_level_resize)
            if errs:
                raise pods.invalid("Pod", name, errs)
            violations = pods.limit_range_violations(new, self._limit_ranges(namespace))
            if violations:
                raise pods.forbidden("pods", name, violations)
            if self.version >= (1, 36) and pods.resources_changed(old, new):
                self._check_node_capacity(new, name)

    def _check_node_capacity(self, pod: JsonObj, name: str) -> None:
        """The 1.36 `PodResizeValidator` admission plugin."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        allocatable = self.node_allocatable(node)
        if allocatable is None:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: node "{node}" not found',
                kind="pods",
                name=name,
            )
        cpu, mem = pods.effective_requests(pod.get("spec") or {})
        parts = []
        if cpu > allocatable[0]:
            parts.append(f"cpu, requested: {cpu}, allocatable: {allocatable[0]}")
        if mem > allocatable[1]:
            parts.append(f"memory, requested: {mem}, allocatable: {allocatable[1]}")
        if parts:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: Node didn\'t have enough allocatable '
                f"resources: {'; '.join(parts)}",
                kind="pods",
                name=name,
                causes=[{"reason": "NodeCapacity"}],
            )

    # --- pods/resize ----------------------------------------------------------------------------------------

    async def resize(self, req: SubresourceRequest) -> tuple[int, JsonObj]:
        current = self.store.get("pods", req.namespace, req.name)
        if current is None:
            raise _not_found(req.name)
        if req.verb == "GET":
            return 200, current
        if req.verb == "PATCH":
            patched = apply_patch(current, req.body, req.content_type)
        elif req.verb == "PUT":
            if not isinstance(req.body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a Pod")
            patched = req.body
            rv = (patched.get("metadata") or {}).get("resourceVersion")
            if rv and rv != (current.get("metadata") or {}).get("resourceVersion"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods "{req.name}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                    kind="pods",
                    name=req.name,
                )
        else:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        new, unknown = pods.resize_merge(current, patched, pod_level=self.pod_level_resize)
        if unknown:
            raise pods.invalid(
                "Pod",
                req.name,
                [pods.FieldError("spec.containers", "Forbidden", "containers may not be added or removed")],
            )
        if self.version < (1, 33) and pods.resources_changed(current, new):
            new.setdefault("status", {})["resize"] = "Proposed"
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if req.query.get("dryRun"):
            self.validate("UPDATE", current, new, "resize")
            return 200, new
        result = await self.store.update("pods", new, subresource="resize")
        self.rt.observe("pods", result)
        return 200, result

    # --- pods/binding ---------------------------------------------------------------------------------------

    async def bind(self, req: SubresourceRequest) -> tuple[int, JsonObj]:
        if req.verb != "POST" or not isinstance(req.body, dict):
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        target = (req.body.get("target") or {}).get("name")
        if not target:
            raise ApiError(422, "Invalid", f'Binding "{req.name}" is invalid: target.name: Required value')
        current = self.store.get("pods", req.namespace, req.name)
        if current is None:
            raise _not_found(req.name)
        new = copy.deepcopy(current)
        new["spec"]["nodeName"] = target
        conds = [
            c for c in (new.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"
        ]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": timestamps.rfc3339(self.clock.now()),
            }
        )
        new.setdefault("status", {})["conditions"] = conds
        result = await self.store.update("pods", new, subresource="binding")
        self.rt.observe("pods", result)
        return 201, dict(_SUCCESS)

    # --- pods/eviction --------------------------------------------------------------------------------------

    def _budgets_for(self, pod: Mapping[str, Any], namespace: str) -> list[JsonObj]:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return [
            pdb
            for pdb in self.store.list(PDBS, namespace)
            if pods.selector_matches((pdb.get("spec") or {}).get("selector"), labels)
        ]

    async def evict(self, req: SubresourceRequest) -> tuple[int, JsonObj]:
        if req.verb != "POST":
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        body = req.body if isinstance(req.body, dict) else {}
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != req.name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        namespace = req.namespace or "default"
        options = body.get("deleteOptions") or {}
        dry_run = bool(options.get("dryRun")) or bool(req.query.get("dryRun"))
        for _attempt in range(5):
            pod = self.store.get("pods", namespace, req.name)
            if pod is None:
                raise _not_found(req.name)
            md = pod.get("metadata") or {}
            uid_pre = (options.get("preconditions") or {}).get("uid")
            if uid_pre and uid_pre != md.get("uid"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {uid_pre}, UID in object "
                    f"meta: {md.get('uid')}",
                    kind="pods",
                    name=req.name,
                )
            phase = (pod.get("status") or {}).get("phase")
            if md.get("deletionTimestamp") or phase in ("Succeeded", "Failed", "Pending"):
                return await self._delete(pod, options, dry_run, condition=False)
            budgets = self._budgets_for(pod, namespace)
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the "
                    "eviction subresource does not support.",
                )
            if not budgets:
                return await self._delete(pod, options, dry_run, condition=True)
            verdict = disruption.eviction_verdict(budgets[0], pod)
            if verdict.consume and not dry_run:
                updated = disruption.consume(budgets[0], req.name, self.clock.now())
                try:
                    result = await self.store.update(PDBS, updated, subresource="status")
                except ApiError as err:
                    if err.code == 409:
                        continue  # someone else changed the budget: look again
                    raise
                self.rt.observe(PDBS, result)
            return await self._delete(pod, options, dry_run, condition=True)
        raise ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            retry_after_s=1,
        )

    async def _delete(
        self, pod: JsonObj, options: Mapping[str, Any], dry_run: bool, condition: bool
    ) -> tuple[int, JsonObj]:
        md = pod.get("metadata") or {}
        if dry_run:
            return 201, dict(_SUCCESS)
        if condition:
            # PodDisruptionConditions: the eviction API marks the pod before deleting it.
            new = copy.deepcopy(pod)
            conds = [
                c
                for c in (new.get("status") or {}).get("conditions") or []
                if c.get("type") != "DisruptionTarget"
            ]
            conds.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                    "lastProbeTime": None,
                    "lastTransitionTime": timestamps.rfc3339(self.clock.now()),
                }
            )
            new.setdefault("status", {})["conditions"] = conds
            try:
                updated = await self.store.update("pods", new, subresource="status")
                self.rt.observe("pods", updated)
            except ApiError as err:
                if err.code != 409:
                    raise
        grace = options.get("gracePeriodSeconds")
        try:
            result = await self.store.delete(
                "pods",
                md.get("namespace"),
                md.get("name") or "",
                grace_period_s=int(grace) if grace is not None else None,
            )
        except ApiError as err:
            if err.code == 404:
                raise _not_found(md.get("name") or "") from err
            raise
        if result is not None:
            gone = (
                not (result.get("metadata") or {}).get("deletionTimestamp")
                or (result.get("metadata") or {}).get("deletionGracePeriodSeconds") == 0
            )
            self.rt.observe("pods", result, deleted=gone)
        return 201, dict(_SUCCESS)
