"""The kubelet's pod lifecycle: the `Kubelet` mixin of `NodeAgent`.

Owns: `sync_pod`, one pass of the kubelet over one pod: the run record a pod gets on its node, the
admission check for a pod someone else bound (`OutOfcpu` / `OutOfmemory` / `OutOfpods`), start after the
configured delay, handing resizes and ended crash back-offs on, writing the status; Job pods (and pods with
`RUN_SECONDS_ANNOTATION`) completing after their virtual run time; releasing a terminal pod's resources;
and graceful deletion (containers stop, the terminal phase is reported, then the pod is removed with grace
period 0).

Must not: decide resizes (`resize`), restart or OOM-kill containers (`restarts`) or build the status
document (`status`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.nodeagent.common import parse_time, resources_of, rfc3339
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import ContainerRun, NodeRun, PodLevelRun, PodRun
from vpa.sim.cluster.pods import effective_requests
from vpa.sim.cluster.profiles import ANNOTATION as USAGE_ANNOTATION
from vpa.sim.cluster.runtime import Key
from vpa.sim.contracts import ApiError, JsonObj

RUN_SECONDS_ANNOTATION = "sim.vpa.dev/run-seconds"


class Kubelet(AgentCore):
    """Pod sync, admission, start, completion and graceful deletion."""

    async def sync_pod(self, k: Key) -> None:
        pod = self.store.get("pods", k[0], k[1])
        run = self.runs.get(k)
        if pod is None:
            if run is not None:
                self._forget(run)
            return
        md = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        if run is not None and run.uid != md.get("uid"):
            self._forget(run)
            run = None
        if run is not None and not run.dirty and md.get("resourceVersion") == run.last_rv:
            return  # the echo of our own write
        if run is not None:
            run.dirty = False
        node = self.nodes.get(spec.get("nodeName") or "")
        if node is None:
            return
        now = self.clock.now()
        if run is None:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            # Bound by someone else (or before we started): the kubelet's admission check first.
            rejection = self._admission_failure(pod, node)
            if rejection is not None:
                await self._reject(pod, *rejection)
                return
            run = self._new_run(k, pod, node, now)
            self.runs[k] = run
            node.pods.add(k)
            self._account(run, self._sched_view(pod, run), self._kube_view(pod, run))
            self._after_start(pod, run)
        if md.get("deletionTimestamp"):
            await self._terminate(pod, run, now)
            return
        if run.phase in ("Succeeded", "Failed"):
            await self._write_status(pod, run)
            return
        if run.phase == "Pending" and run.start_at <= now:
            run.phase = "Running"
            for c in run.containers.values():
                c.started_at = max(c.started_at, run.start_at)
            self._after_start(pod, run)
        if run.phase == "Running":
            self._handle_resize(pod, run, node, now)
            # Usage changed on a running pod (`kubectl annotate`): its kills are searched again from now,
            # since the usage before now was the old profile's.
            usage = (md.get("annotations") or {}).get(USAGE_ANNOTATION)
            changed, run.usage = usage != run.usage, usage
            for c in run.containers.values():
                if c.waiting_until is not None and c.waiting_until <= now:
                    c.waiting_until = None  # started_at already is the end of the back-off
                    self._arm_oom(pod, run, c)
                elif changed:
                    self._arm_oom(pod, run, c, since=now)
        await self._write_status(pod, run)

    def _new_run(self, k: Key, pod: JsonObj, node: NodeRun, now: float) -> PodRun:
        node.ip_counter += 1
        n = node.ip_counter
        ip = f"10.{64 + node.index // 256}.{node.index % 256}.{n % 253 + 1}"
        start_at = now + self.options.pod_start_delay_s
        md = pod.get("metadata") or {}
        run = PodRun(k, md.get("uid") or "", node.name, ip, now, start_at)
        run.usage = (md.get("annotations") or {}).get(USAGE_ANNOTATION)
        spec = pod.get("spec") or {}
        for kind, into in (("containers", run.containers), ("initContainers", run.inits)):
            for c in spec.get(kind) or []:
                res = resources_of(c)
                into[c["name"]] = ContainerRun(
                    c["name"], str(c.get("image") or ""), start_at, copy.deepcopy(res), copy.deepcopy(res)
                )
        if isinstance(spec.get("resources"), Mapping):
            res = resources_of(spec)
            run.pod_level = PodLevelRun(copy.deepcopy(res), copy.deepcopy(res))
        run.phase = "Running" if start_at <= now else "Pending"
        return run

    def _admission_failure(self, pod: Mapping[str, Any], node: NodeRun) -> tuple[str, str] | None:
        """The kubelet's resource check for a pod someone else bound (`OutOfcpu` / `OutOfmemory`)."""
        cpu, mem = effective_requests(pod.get("spec") or {})
        for resource, requested, used, capacity in (
            ("cpu", cpu, node.kube_cpu, node.cpu),
            ("memory", mem, node.kube_mem, node.memory),
        ):
            if requested and used + requested > capacity:
                return (
                    f"OutOf{resource}",
                    f"Pod was rejected: Node didn't have enough resource: {resource}, "
                    f"requested: {requested}, used: {used}, capacity: {capacity}",
                )
        if len(node.pods) >= node.max_pods:
            return "OutOfpods", "Pod was rejected: Node didn't have enough resource: pods"
        return None

    async def _reject(self, pod: JsonObj, reason: str, message: str) -> None:
        status = dict(pod.get("status") or {})
        if status.get("phase") == "Failed" and status.get("reason") == reason:
            return
        status.update(
            {"phase": "Failed", "reason": reason, "message": message, "startTime": rfc3339(self.clock.now())}
        )
        result = await self.store.update("pods", {**pod, "status": status}, subresource="status")
        self.rt.observe("pods", result)

    def _after_start(self, pod: Mapping[str, Any], run: PodRun) -> None:
        if run.phase == "Pending":
            run.timers.append(self.rt.at(run.start_at, self._enqueue_sync(run.key)))
            return
        if run.phase != "Running":
            return
        for c in run.containers.values():
            self._arm_oom(pod, run, c)
        if run.complete_at is None:
            duration = self._run_seconds(pod)
            if duration is not None:
                run.complete_at = run.start_at + duration
                run.timers.append(self.rt.at(run.complete_at, self._complete_cb(run.key, run.uid)))

    def _run_seconds(self, pod: Mapping[str, Any]) -> float | None:
        md = pod.get("metadata") or {}
        raw = (md.get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
        if raw is not None:
            try:
                return max(0.0, float(raw))
            except ValueError:
                return None
        if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
            return None
        for ref in md.get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                return self.options.job_run_s
        return None

    def _complete_cb(self, k: Key, uid: str) -> Any:
        async def fire(due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if run is None or run.uid != uid or pod is None or run.phase != "Running":
                return
            for c in run.containers.values():
                c.terminated = {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": rfc3339(c.started_at),
                    "finishedAt": rfc3339(due),
                    "containerID": c.container_id(uid),
                }
            run.phase = "Succeeded"
            self._release(pod, run)
            await self._write_status(pod, run)

        return fire

    def _release(self, pod: Mapping[str, Any], run: PodRun) -> None:
        """A terminal pod no longer holds node resources."""
        for timer in run.oom_timers.values():
            self.rt.cancel(timer)
        run.oom_timers.clear()
        if run.counted:
            run.counted = False
            node = self.nodes.get(run.node)
            if node is not None:
                node.deferred.discard(run.key)
            self._account(run, (0, 0), (0, 0))

    async def _terminate(self, pod: JsonObj, run: PodRun, now: float) -> None:
        if run.stop_at is None:
            deadline = parse_time((pod.get("metadata") or {}).get("deletionTimestamp")) or now
            run.stop_at = min(deadline, now + self.options.pod_termination_s)
            if run.stop_at > now:
                run.timers.append(self.rt.at(run.stop_at, self._enqueue_sync(run.key)))
                return
        elif run.stop_at > now:
            return
        if run.phase == "Running":
            # SIGTERM honoured: every container exits 0 and the kubelet reports the terminal phase before it
            # removes the pod (pods being deleted reach Succeeded/Failed first, as since Kubernetes 1.27).
            for c in run.containers.values():
                if c.terminated is None:
                    c.terminated = {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": rfc3339(c.started_at),
                        "finishedAt": rfc3339(now),
                        "containerID": c.container_id(run.uid),
                    }
            run.phase = "Succeeded"
            self._release(pod, run)
            try:
                await self._write_status(pod, run)
            except ApiError as err:
                if err.code != 404:
                    raise
                self._forget(run)
                return
        try:
            result = await self.store.delete("pods", run.key[0], run.key[1], grace_period_s=0)
        except ApiError as err:
            if err.code != 404:
                raise
            result = None
        if result is not None:
            self.rt.observe("pods", result, deleted=True)
        self._forget(run)
