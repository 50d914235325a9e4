"""In-place resize as the kubelet of the configured version does it: the `Resize` mixin of `NodeAgent`.

Owns: allocating and actuating, through one allocate-then-actuate state (`_records`), each regular
container, native sidecar, plain init container (actuated without a `PodResizeInProgress`, as the kubelet
does) and the pod-level `spec.resources`; the allocation check (Infeasible above allocatable, not
re-evaluated until the spec changes again; Deferred above free room, retried by `core` when room frees;
otherwise allocated, actuated after the configured delay) and actuation (`RestartContainer` restarts the
container; a no-restart memory-limit decrease below usage is refused with `Error`: per container before
1.35, for the pod and each container from 1.35, published one sync late as that kubelet does; retried
after the kubelet's retry interval).

Must not: write the status (`status` reports `PodResizePending` / `PodResizeInProgress`, or `status.resize`
on 1.32, from what this records) or kill containers for memory (`restarts`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.nodeagent.common import amounts_of, resources_of, rfc3339, same_amounts
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import ContainerRun, NodeRun, PodLevelRun, PodRun
from vpa.sim.cluster.pods import (
    CPU,
    MEMORY,
    RESTART_CONTAINER,
    effective_requests,
    is_sidecar,
    restart_policy_for,
)
from vpa.sim.contracts import JsonObj


def _add_limit(total: int | None, limit: int | None) -> int | None:
    """A pod's memory limit is the sum of its containers'; one container without a limit leaves it unset."""
    return None if total is None or limit is None else total + limit


class Resize(AgentCore):
    """Allocation and actuation of in-place resizes."""

    def _handle_resize(self, pod: JsonObj, run: PodRun, node: NodeRun, now: float) -> None:
        spec = pod.get("spec") or {}
        generation = int((pod.get("metadata") or {}).get("generation") or 0)
        records = self._records(spec, run)
        desired = {key: resources_of(obj) for key, (obj, _rec) in records.items()}
        changed = any(not same_amounts(desired[k], rec.allocated) for k, (_obj, rec) in records.items())
        if changed:
            desired_key = {k: amounts_of(r) for k, r in desired.items()}
            if run.pending is not None and run.pending[0] == "Infeasible" and run.pending_for == desired_key:
                pass  # never re-evaluated until the spec changes again
            else:
                verdict, message = self._admit_resize(spec, run, node)
                if verdict == "":
                    for k, (_obj, rec) in records.items():
                        rec.allocated = copy.deepcopy(desired[k])
                    run.pending = None
                    run.pending_for = None
                    node.deferred.discard(run.key)
                    # A plain init container's resize is actuated like the others, but the kubelet reports
                    # no PodResizeInProgress for it.
                    shown = any(
                        not same_amounts(rec.allocated, rec.actual)
                        for (kind, _name), (obj, rec) in records.items()
                        if kind != "init" or is_sidecar(obj)
                    )
                    if shown and (run.in_progress is None or run.in_progress[0] == "Error"):
                        run.in_progress = ("", "", now, generation)
                    run.actuate_at = now + self.options.resize_actuation_s
                    run.timers.append(self.rt.at(run.actuate_at, self._enqueue_sync(run.key)))
                    self.resize_events.append((run.key, "Accepted"))
                else:
                    since = run.pending[2] if run.pending is not None and run.pending[0] == verdict else now
                    run.pending = (verdict, message, since, generation)
                    run.pending_for = desired_key
                    if verdict == "Deferred":
                        node.deferred.add(run.key)
                    else:
                        node.deferred.discard(run.key)
                    self.resize_events.append((run.key, verdict))
        elif run.pending is not None:
            # The spec went back to what is allocated: nothing is pending any more.
            run.pending = None
            run.pending_for = None
            node.deferred.discard(run.key)
        if run.actuate_at is not None and run.actuate_at <= now:
            self._actuate(pod, run, now)
        self._account(run, self._sched_view(pod, run), self._kube_view(pod, run))

    @staticmethod
    def _records(
        spec: Mapping[str, Any], run: PodRun
    ) -> dict[tuple[str, str], tuple[Mapping[str, Any], ContainerRun | PodLevelRun]]:
        """What the kubelet allocates and actuates, keyed by (kind, name): each regular container, each
        init container (native sidecar or plain) and the pod-level `spec.resources` ("pod", ""), each with
        the spec object it is read from and its run record."""
        out: dict[tuple[str, str], tuple[Mapping[str, Any], ContainerRun | PodLevelRun]] = {}
        for kind, key, recs in (
            ("container", "containers", run.containers),
            ("init", "initContainers", run.inits),
        ):
            for c in spec.get(key) or []:
                rec = recs.get(c.get("name"))
                if rec is not None:
                    out[(kind, rec.name)] = (c, rec)
        if run.pod_level is not None and isinstance(spec.get("resources"), Mapping):
            out[("pod", "")] = (spec, run.pod_level)
        return out

    def _admit_resize(self, spec: Mapping[str, Any], run: PodRun, node: NodeRun) -> tuple[str, str]:
        cpu, mem = effective_requests(spec)
        if mem > node.memory:
            return (
                "Infeasible",
                f"Node didn't have enough capacity: memory, requested: {mem}, capacity: {node.memory}",
            )
        if cpu > node.cpu:
            return (
                "Infeasible",
                f"Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {node.cpu}",
            )
        used_cpu = node.kube_cpu - run.kube[0]
        used_mem = node.kube_mem - run.kube[1]
        if used_cpu + cpu > node.cpu:
            return "Deferred", (
                f"Node didn't have enough resource: cpu, requested: {cpu}, used: {used_cpu}, "
                f"capacity: {node.cpu}"
            )
        if used_mem + mem > node.memory:
            return "Deferred", (
                f"Node didn't have enough resource: memory, requested: {mem}, used: {used_mem}, "
                f"capacity: {node.memory}"
            )
        return "", ""

    def _actuate(self, pod: JsonObj, run: PodRun, now: float) -> None:
        spec = pod.get("spec") or {}
        specs = {c.get("name"): c for c in spec.get("containers") or []}
        # From 1.35 the kubelet checks every decreasing memory limit, the pod's and each container's, before
        # it changes anything (one refusal holds the whole in-place part of the resize back).
        refusal = self._memory_decrease_refusal(pod, run, specs, now) if self.version >= (1, 35) else ""
        errors: list[str] = [refusal] if refusal else []
        for name, c in run.containers.items():
            if same_amounts(c.allocated, c.actual):
                continue
            container = specs.get(name) or {}
            (_new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            if self._restart_needed(container, c):
                self._restart_container(pod, run, c, now, {"exitCode": 137, "reason": "Error"}, resize=True)
                c.actual = copy.deepcopy(c.allocated)
                continue
            if refusal:
                continue
            new_mem_lim, old_mem_lim = new_lim.get(MEMORY), old_lim.get(MEMORY)
            if (
                self.version < (1, 35)
                and new_mem_lim is not None
                and (old_mem_lim is None or new_mem_lim < old_mem_lim)
            ):
                usage = self.usage.memory_bytes(
                    pod, container, now, run.start_at, c.started_at, old_req, old_lim
                )
                if usage > new_mem_lim:
                    if self.version >= (1, 34):
                        errors.append(
                            f"attempting to set container {name!r} memory limit ({new_mem_lim}) below "
                            f"current usage ({usage})"
                        )
                    else:
                        errors.append(
                            f"attempting to set pod memory limit ({new_mem_lim}) below current usage "
                            f"({usage})"
                        )
                    continue
            if new_mem_lim is not None and old_mem_lim is not None and new_mem_lim < old_mem_lim:
                c.mem_limit_lowered_at = now
            c.actual = copy.deepcopy(c.allocated)
            self._arm_oom(pod, run, c, since=now)
        init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
        for name, c in run.inits.items():
            if same_amounts(c.allocated, c.actual):
                continue
            container = init_specs.get(name) or {}
            if is_sidecar(container) and self._restart_needed(container, c):
                # The sidecar restarts with its new resources (it is never OOM-killed: no usage watch).
                c.last_terminated = {
                    "exitCode": 137,
                    "reason": "Error",
                    "startedAt": rfc3339(c.started_at),
                    "finishedAt": rfc3339(now),
                    "containerID": c.container_id(run.uid),
                }
                c.restart_count += 1
                c.started_at = now
                c.actual = copy.deepcopy(c.allocated)
                continue
            if refusal:
                continue
            c.actual = copy.deepcopy(c.allocated)
        pod_level = run.pod_level
        if pod_level is not None and not refusal and not same_amounts(pod_level.allocated, pod_level.actual):
            pod_level.actual = copy.deepcopy(pod_level.allocated)
        if errors:
            since = run.in_progress[2] if run.in_progress is not None else now
            gen = run.in_progress[3] if run.in_progress is not None else 0
            message = "; ".join(errors)
            if self.version >= (1, 35):
                # The kubelet sets the Error condition after that sync's status was written: it reaches the
                # API with the next sync, carrying the message of the attempt before.
                shown, run.resize_error = run.resize_error, message
                if shown is not None:
                    run.in_progress = ("Error", shown, since, gen)
            else:
                run.in_progress = ("Error", message, since, gen)
            run.actuate_at = now + self.options.kubelet_retry_s
            run.timers.append(self.rt.at(run.actuate_at, self._enqueue_sync(run.key)))
        else:
            run.in_progress = None
            run.actuate_at = None
            run.resize_error = None

    @staticmethod
    def _restart_needed(container: Mapping[str, Any], c: ContainerRun) -> bool:
        """Whether a resource changing from actual to allocated has a `RestartContainer` policy."""
        (new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
        return any(
            restart_policy_for(container, r) == RESTART_CONTAINER
            for r in (CPU, MEMORY)
            if new_req.get(r) != old_req.get(r) or new_lim.get(r) != old_lim.get(r)
        )

    def _memory_decrease_refusal(
        self, pod: Mapping[str, Any], run: PodRun, specs: Mapping[Any, Mapping[str, Any]], now: float
    ) -> str:
        """The kubelet's refusal of a memory-limit decrease at or above current usage, or "".

        As `validateMemoryResizeAction` (1.35+): the pod's limit (the sum of its containers', when every
        one has a limit) is checked first against the pod's usage, then each container resized in place
        (not restarted) whose limit goes down against its own usage; a refusal is `usage >= new limit`. The
        container's part quotes the name Go-style and, as the kubelet's does, reports the pod's usage.
        """
        spec = pod.get("spec") or {}
        # The running containers: regular ones and native sidecars, each with its spec and run record.
        running: list[tuple[str, Mapping[str, Any], ContainerRun]] = [
            (name, specs.get(name) or {"name": name}, c) for name, c in run.containers.items()
        ]
        for side in spec.get("initContainers") or []:
            rec = run.inits.get(side.get("name"))
            if rec is not None and is_sidecar(side):
                running.append((rec.name, side, rec))
        usage: dict[str, int] = {}
        old_pod_limit: int | None = 0
        new_pod_limit: int | None = 0
        for name, container, c in running:
            (_new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            usage[name] = self.usage.memory_bytes(
                pod, container, now, run.start_at, c.started_at, old_req, old_lim
            )
            old_pod_limit = _add_limit(old_pod_limit, old_lim.get(MEMORY))
            new_pod_limit = _add_limit(new_pod_limit, new_lim.get(MEMORY))
        pod_usage = sum(usage.values())
        if run.pod_level is not None:
            # A pod-level memory limit is the pod cgroup's, whatever the containers' add up to.
            old_pod_limit = run.pod_level.actual_amounts()[1].get(MEMORY, old_pod_limit)
            new_pod_limit = run.pod_level.allocated_amounts()[1].get(MEMORY, new_pod_limit)
        parts: list[str] = []
        pod_decrease = new_pod_limit is not None and (old_pod_limit is None or new_pod_limit < old_pod_limit)
        if pod_decrease and new_pod_limit is not None and pod_usage >= new_pod_limit:
            parts.append(
                f"attempting to set pod memory limit ({new_pod_limit}) below current usage ({pod_usage})"
            )
        for name, container, c in running:
            if self._restart_needed(container, c):
                continue
            new_mem, old_mem = c.allocated_amounts()[1].get(MEMORY), c.actual_amounts()[1].get(MEMORY)
            if new_mem is None or (old_mem is not None and new_mem >= old_mem):
                continue
            if usage[name] >= new_mem:
                parts.append(
                    f'attempting to set container "{name}" memory limit ({new_mem}) below current usage '
                    f"({pod_usage})"
                )
        return f"cannot decrease memory limits: [{', '.join(parts)}]" if parts else ""
