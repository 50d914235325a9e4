"""In-place resize as the kubelet of the configured version does it: the `Resize` mixin of `NodeAgent`.

Owns: the allocation check (Infeasible above allocatable, not re-evaluated until the spec changes again;
Deferred above free room, retried by `core` when room frees; otherwise allocated, actuated after the
configured delay) and actuation (`RestartContainer` restarts the container; a no-restart memory-limit
decrease below usage is refused with `Error`: per container before 1.35, for the pod and each container
from 1.35, published one sync late as that kubelet does; retried after the kubelet's retry interval).

Must not: write the status (`status` reports `PodResizePending` / `PodResizeInProgress`, or `status.resize`
on 1.32, from what this records) or kill containers for memory (`restarts`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.nodeagent.common import amounts_of, resources_of, same_amounts
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import NodeRun, PodRun
from vpa.sim.cluster.pods import (
    CPU,
    MEMORY,
    RESTART_CONTAINER,
    container_amounts,
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
        desired = {
            c["name"]: resources_of(c)
            for c in spec.get("containers") or []
            if c.get("name") in run.containers
        }
        changed = any(not same_amounts(desired[n], run.containers[n].allocated) for n in desired)
        if changed:
            desired_key = {n: amounts_of(r) for n, r in desired.items()}
            if run.pending is not None and run.pending[0] == "Infeasible" and run.pending_for == desired_key:
                pass  # never re-evaluated until the spec changes again
            else:
                verdict, message = self._admit_resize(spec, run, node)
                if verdict == "":
                    for n, res in desired.items():
                        run.containers[n].allocated = copy.deepcopy(res)
                    run.pending = None
                    run.pending_for = None
                    node.deferred.discard(run.key)
                    if run.in_progress is None or run.in_progress[0] == "Error":
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
            (new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            changed = {
                r
                for r in (CPU, MEMORY)
                if new_req.get(r) != old_req.get(r) or new_lim.get(r) != old_lim.get(r)
            }
            restart = any(restart_policy_for(container, r) == RESTART_CONTAINER for r in changed)
            if restart:
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

    def _memory_decrease_refusal(
        self, pod: Mapping[str, Any], run: PodRun, specs: Mapping[Any, Mapping[str, Any]], now: float
    ) -> str:
        """The kubelet's refusal of a memory-limit decrease at or above current usage, or "".

        As `validateMemoryResizeAction` (1.35+): the pod's limit (the sum of its containers', when every
        one has a limit) is checked first against the pod's usage, then each container resized in place
        (not restarted) whose limit goes down against its own usage; a refusal is `usage >= new limit`. The
        container's part quotes the name Go-style and, as the kubelet's does, reports the pod's usage.
        """
        sidecars = [c for c in (pod.get("spec") or {}).get("initContainers") or [] if is_sidecar(c)]
        usage: dict[str, int] = {}
        old_pod_limit: int | None = 0
        new_pod_limit: int | None = 0
        for name, c in run.containers.items():
            (_new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            container = specs.get(name) or {"name": name}
            usage[name] = self.usage.memory_bytes(
                pod, container, now, run.start_at, c.started_at, old_req, old_lim
            )
            old_pod_limit = _add_limit(old_pod_limit, old_lim.get(MEMORY))
            new_pod_limit = _add_limit(new_pod_limit, new_lim.get(MEMORY))
        pod_usage = sum(usage.values())
        for side in sidecars:
            req, lim = container_amounts(side, "requests"), container_amounts(side, "limits")
            pod_usage += self.usage.memory_bytes(pod, side, now, run.start_at, run.start_at, req, lim)
            old_pod_limit = _add_limit(old_pod_limit, lim.get(MEMORY))
            new_pod_limit = _add_limit(new_pod_limit, lim.get(MEMORY))
        parts: list[str] = []
        pod_decrease = new_pod_limit is not None and (old_pod_limit is None or new_pod_limit < old_pod_limit)
        if pod_decrease and new_pod_limit is not None and pod_usage >= new_pod_limit:
            parts.append(
                f"attempting to set pod memory limit ({new_pod_limit}) below current usage ({pod_usage})"
            )
        for name, c in run.containers.items():
            (new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            container = specs.get(name) or {}
            changed = {
                r
                for r in (CPU, MEMORY)
                if new_req.get(r) != old_req.get(r) or new_lim.get(r) != old_lim.get(r)
            }
            if any(restart_policy_for(container, r) == RESTART_CONTAINER for r in changed):
                continue
            new_mem, old_mem = new_lim.get(MEMORY), old_lim.get(MEMORY)
            if new_mem is None or (old_mem is not None and new_mem >= old_mem):
                continue
            if usage[name] >= new_mem:
                parts.append(
                    f'attempting to set container "{name}" memory limit ({new_mem}) below current usage '
                    f"({pod_usage})"
                )
        return f"cannot decrease memory limits: [{', '.join(parts)}]" if parts else ""
