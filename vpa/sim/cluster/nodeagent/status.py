"""A pod's status as the kubelet of the configured version writes it: the `Status` mixin of `NodeAgent`.

Owns: phase, conditions (transition times kept per condition, `observedGeneration` from 1.34, other
writers' conditions carried over), container and init-container statuses (states, `allocatedResources`,
`resources`, image and container IDs), IPs, start time and QoS class; the resize's report
(`PodResizePending` / `PodResizeInProgress` from 1.33, `status.resize` before); the pod-level
`allocatedResources` and `resources` from 1.36; and writing the status when it changed.

Must not: decide anything about the pod (the other mixins do; this reports their records) or change a run
record beyond its condition times and the resourceVersion of its own write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from vpa.model.quantity import format_cpu_millicores, format_memory_bytes
from vpa.sim.cluster.nodeagent.common import resources_of, rfc3339, same_amounts
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import PodRun
from vpa.sim.cluster.pods import CPU, MEMORY, container_amounts, effective_requests, is_sidecar
from vpa.sim.contracts import JsonObj


def _fmt_amount(resource: str, value: int) -> str:
    return format_cpu_millicores(value) if resource == CPU else format_memory_bytes(value)


class Status(AgentCore):
    """Builds and writes pod status."""

    def _cond(self, run: PodRun, ctype: str, status: str, now: float) -> str:
        prior = run.cond_times.get(ctype)
        if prior is not None and prior[0] == status:
            return prior[1]
        stamp = rfc3339(now)
        run.cond_times[ctype] = (status, stamp)
        return stamp

    def _status(self, pod: Mapping[str, Any], run: PodRun) -> JsonObj:
        now = self.clock.now()
        old = pod.get("status") or {}
        spec = pod.get("spec") or {}
        generation = (pod.get("metadata") or {}).get("generation")
        node = self.nodes.get(run.node)
        running = run.phase == "Running"
        statuses: list[JsonObj] = []
        all_ready = running
        for container in spec.get("containers") or []:
            c = run.containers.get(container.get("name"))
            if c is None:
                continue
            state: JsonObj
            ready = False
            if c.terminated is not None:
                state = {"terminated": dict(c.terminated)}
            elif not running:
                state = {"waiting": {"reason": "ContainerCreating"}}
            elif c.waiting_until is not None and c.waiting_until > now:
                state = {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off restarting failed "
                        f"container {c.name} in pod {run.key[1]}_{run.key[0]}({run.uid})",
                    }
                }
            else:
                state = {"running": {"startedAt": rfc3339(c.started_at)}}
                ready = True
            all_ready = all_ready and ready
            image = c.image
            digest = hashlib.sha256(image.encode()).hexdigest()
            entry: JsonObj = {
                "name": c.name,
                "state": state,
                "lastState": {"terminated": dict(c.last_terminated)} if c.last_terminated else {},
                "ready": ready,
                "restartCount": c.restart_count,
                "image": image,
                "imageID": f"{image.split(':')[0]}@sha256:{digest}",
                "started": "running" in state,
                "allocatedResources": dict(c.allocated.get("requests") or {}),
                "resources": {k: dict(v) for k, v in c.actual.items() if v},
            }
            if "running" in state or "terminated" in state:
                entry["containerID"] = c.container_id(run.uid)
            statuses.append(entry)
        conds: list[JsonObj] = []
        init_done = run.phase != "Pending"
        completed = run.phase in ("Succeeded", "Failed")
        ready_status = "True" if all_ready and not completed else "False"
        cond_specs: list[tuple[str, str, str | None]] = [
            ("PodReadyToStartContainers", "True" if not completed else "False", None),
            ("Initialized", "True" if init_done else "False", None),
            (
                "Ready",
                ready_status,
                "PodCompleted" if completed else (None if all_ready else "ContainersNotReady"),
            ),
            (
                "ContainersReady",
                ready_status,
                "PodCompleted" if completed else (None if all_ready else "ContainersNotReady"),
            ),
            ("PodScheduled", "True", None),
        ]
        for ctype, cstatus, reason in cond_specs:
            cond: JsonObj = {
                "type": ctype,
                "status": cstatus,
                "lastProbeTime": None,
                "lastTransitionTime": self._cond(run, ctype, cstatus, now),
            }
            if reason:
                cond["reason"] = reason
            if self.version >= (1, 34) and generation is not None:
                cond["observedGeneration"] = generation
            conds.append(cond)
        # Carry over conditions other writers own (DisruptionTarget from the eviction API, readiness gates).
        mine = {c[0] for c in cond_specs} | {"PodResizePending", "PodResizeInProgress"}
        for cond in old.get("conditions") or []:
            if cond.get("type") not in mine:
                conds.append(dict(cond))
        status: JsonObj = {
            "phase": run.phase,
            "conditions": conds,
            "hostIP": node.ip if node else "",
            "hostIPs": [{"ip": node.ip}] if node else [],
            "podIP": run.pod_ip,
            "podIPs": [{"ip": run.pod_ip}],
            "startTime": rfc3339(run.bound_at),
            "containerStatuses": statuses,
            **self._init_statuses(spec, run, running),
            "qosClass": old.get("qosClass"),
        }
        if self.version >= (1, 33):
            if run.pending is not None:
                reason, message, since, gen = run.pending
                cond = {
                    "type": "PodResizePending",
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": rfc3339(now),
                    "lastTransitionTime": rfc3339(since),
                }
                if self.version >= (1, 34):
                    cond["observedGeneration"] = gen
                conds.append(cond)
            if run.in_progress is not None:
                reason, message, since, gen = run.in_progress
                cond = {
                    "type": "PodResizeInProgress",
                    "status": "True",
                    "lastProbeTime": rfc3339(now),
                    "lastTransitionTime": rfc3339(since),
                }
                if reason:
                    cond["reason"] = reason
                    cond["message"] = message
                if self.version >= (1, 34):
                    cond["observedGeneration"] = gen
                conds.append(cond)
        else:
            resize: str | None = None
            if run.pending is not None:
                resize = run.pending[0]
            elif run.in_progress is not None:
                resize = "InProgress"
            elif old.get("resize") == "Proposed" and self._proposed_pending(pod, run):
                resize = "Proposed"
            if resize is not None:
                status["resize"] = resize
        if self.version >= (1, 34) and generation is not None:
            status["observedGeneration"] = generation
        if self.version >= (1, 36):
            status.update(self._pod_level_status(spec, run, old, self.version))
        if status["qosClass"] is None:
            status.pop("qosClass")
        return status

    @staticmethod
    def _pod_level_status(
        spec: Mapping[str, Any], run: PodRun, old: Mapping[str, Any], version: tuple[int, int]
    ) -> JsonObj:
        """`status.allocatedResources` and `status.resources` of the pod (1.36+, where the kubelet's
        `InPlacePodLevelResourcesVerticalScaling` is on by default), for every pod.

        As the kubelet reports them: the allocated aggregate of the requests (`PodRequests`); and what the
        pod cgroup holds: CPU request and both limits as actuated, the memory request as allocated (it is
        not written to a cgroup). A limit appears only when every container has one. Pod-level
        `spec.resources` stand for the containers' aggregate, as allocated and as actuated. A 1.36
        kubelet keeps the memory request it first reported (it carries the old status's value over).
        """
        names = [c.get("name") for c in spec.get("containers") or []]
        runs = [run.containers.get(n) for n in names]
        if any(c is None for c in runs):
            return {}
        allocated = [c.allocated_amounts() for c in runs if c is not None]
        actual = [c.actual_amounts() for c in runs if c is not None]
        alloc_cpu, alloc_mem = effective_requests(
            AgentCore._tracked_spec(spec, run, actual=False), containers_override=[r for r, _ in allocated]
        )
        actual_spec = AgentCore._tracked_spec(spec, run, actual=True)
        actual_cpu, _ = effective_requests(actual_spec, containers_override=[r for r, _ in actual])
        limits: dict[str, str] = {}
        sidecar_limits = [
            container_amounts(c, "limits") for c in actual_spec.get("initContainers") or [] if is_sidecar(c)
        ]
        for resource in (CPU, MEMORY):
            values = [lim.get(resource) for _, lim in actual] + [lim.get(resource) for lim in sidecar_limits]
            if values and all(v is not None for v in values):
                limits[resource] = _fmt_amount(resource, sum(v for v in values if v is not None))
        pod_spec = (
            container_amounts(actual_spec, "limits") if isinstance(spec.get("resources"), Mapping) else {}
        )
        for resource, value in pod_spec.items():
            limits[resource] = _fmt_amount(resource, value)
        requests = {CPU: _fmt_amount(CPU, actual_cpu), MEMORY: _fmt_amount(MEMORY, alloc_mem)}
        kept = ((old.get("resources") or {}).get("requests") or {}).get(MEMORY)
        if version == (1, 36) and kept is not None:
            requests[MEMORY] = kept
        out: JsonObj = {
            "allocatedResources": {CPU: _fmt_amount(CPU, alloc_cpu), MEMORY: _fmt_amount(MEMORY, alloc_mem)},
            "resources": {"requests": requests, **({"limits": limits} if limits else {})},
        }
        return out

    @staticmethod
    def _init_statuses(spec: Mapping[str, Any], run: PodRun, running: bool) -> JsonObj:
        """Init containers ran to completion before the pod started; native sidecars keep running.

        Simplification: plain init containers take no time. Every init container reports the resources
        its run record holds as allocated and as actuated (`resize` resizes them), and its restarts."""
        inits = spec.get("initContainers") or []
        if not inits:
            return {}
        out: list[JsonObj] = []
        started = rfc3339(run.start_at)
        for c in inits:
            rec = run.inits.get(c.get("name"))
            allocated = rec.allocated if rec is not None else resources_of(c)
            actual = rec.actual if rec is not None else allocated
            sidecar = is_sidecar(c)
            restarts = rec.restart_count if rec is not None and sidecar else 0
            digest = hashlib.sha256(f"{run.uid}/{c.get('name')}/{restarts}".encode()).hexdigest()
            state: JsonObj
            if not running:
                state = {"waiting": {"reason": "PodInitializing"}}
            elif sidecar:
                since = rfc3339(rec.started_at) if rec is not None and restarts else started
                state = {"running": {"startedAt": since}}
            else:
                state = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": started,
                        "containerID": f"containerd://{digest}",
                    }
                }
            image = str(c.get("image") or "")
            last = rec.last_terminated if rec is not None and sidecar else None
            out.append(
                {
                    "name": c.get("name"),
                    "state": state,
                    "lastState": {"terminated": dict(last)} if last else {},
                    "ready": running and sidecar,
                    "restartCount": restarts,
                    "image": image,
                    "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
                    "started": sidecar and running,
                    "containerID": f"containerd://{digest}",
                    "allocatedResources": dict(allocated.get("requests") or {}),
                    "resources": {k: dict(v) for k, v in actual.items() if v},
                }
            )
        return {"initContainerStatuses": out}

    @staticmethod
    def _proposed_pending(pod: Mapping[str, Any], run: PodRun) -> bool:
        for c in (pod.get("spec") or {}).get("containers") or []:
            cr = run.containers.get(c.get("name"))
            if cr is not None and not same_amounts(resources_of(c), cr.allocated):
                return True
        return False

    async def _write_status(self, pod: JsonObj, run: PodRun) -> None:
        status = self._status(pod, run)
        if status == (pod.get("status") or {}):
            return
        new = dict(pod)
        new["status"] = status
        try:
            result = await self.store.update("pods", new, subresource="status")
        except BaseException:
            # Not written (the API server down, say): the next sync must write it, though the pod's
            # resourceVersion is still the one of our last write, which otherwise reads as its echo.
            run.dirty = True
            raise
        run.last_rv = (result.get("metadata") or {}).get("resourceVersion")
        self.rt.observe("pods", result)
