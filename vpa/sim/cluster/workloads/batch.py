"""The Job and CronJob controllers: `Jobs` and `CronJobs`.

Owns: a Job's pods (parallelism, completions, backoff limit, suspend) and its status with the
SuccessCriteriaMet / Complete or FailureTarget / Failed conditions; a CronJob's Jobs at the schedule's
virtual times (only the most recent missed time is started, the starting deadline, Allow / Forbid /
Replace), its history limits, its status, and a wake-up at the next scheduled time.

Must not: run the Jobs' pods (the node agent runs and finishes them), or call the network.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim import timestamps
from vpa.sim.cluster import cron
from vpa.sim.cluster.pods import controller_of, is_ready
from vpa.sim.cluster.runtime import Key, key_of
from vpa.sim.cluster.workloads.base import (
    CRONJOBS,
    JOBS,
    ControllerBase,
    is_active,
    owner_ref,
)
from vpa.sim.contracts import ApiError, JsonObj


class Jobs(ControllerBase):
    """Job: its pods and its status."""

    async def sync_job(self, k: Key) -> None:
        job = self._get(JOBS, k)
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = job.get("metadata") or {}
        spec = job.get("spec") or {}
        old = job.get("status") or {}
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in old.get("conditions") or []
        ):
            return
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        backoff_limit = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
        pods = self._owned_pods(job)
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        active = [p for p in pods if is_active(p)]
        now = timestamps.rfc3339(self.clock.now())
        done = (succeeded >= int(completions)) if completions is not None else (succeeded > 0 and not active)
        failed_out = failed > backoff_limit
        if not done and not failed_out and not spec.get("suspend"):
            remaining = (int(completions) - succeeded) if completions is not None else parallelism
            want_active = (
                min(parallelism, remaining)
                if completions is not None
                else (parallelism if succeeded == 0 else 0)
            )
            template = copy.deepcopy(spec.get("template") or {})
            labels = {
                "batch.kubernetes.io/controller-uid": md.get("uid") or "",
                "batch.kubernetes.io/job-name": md.get("name") or "",
                "controller-uid": md.get("uid") or "",
                "job-name": md.get("name") or "",
            }
            for _ in range(max(0, want_active - len(active))):
                await self._create_pod(job, template, extra_labels=labels)
        pods = self._owned_pods(job)
        active = [p for p in pods if is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status: JsonObj = {
            "startTime": old.get("startTime") or now,
            "active": len(active),
            "ready": ready,
            "succeeded": succeeded,
            "failed": failed,
            "terminating": sum(1 for p in pods if (p.get("metadata") or {}).get("deletionTimestamp")),
            "uncountedTerminatedPods": {},
        }
        if done:
            status["completionTime"] = now
            status["conditions"] = [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
            ]
        elif failed_out:
            status["conditions"] = [
                {
                    "type": "FailureTarget",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
            ]
        for key in ("active", "ready", "succeeded", "failed", "terminating"):
            if status.get(key) == 0 and key not in ("ready", "terminating"):
                status.pop(key)
        await self._write_status(JOBS, job, status)


class CronJobs(ControllerBase):
    """CronJob: Jobs on the schedule, history limits and status."""

    async def sync_cronjob(self, k: Key) -> None:
        cj = self._get(CRONJOBS, k)
        if cj is None or (cj.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = cj.get("metadata") or {}
        spec = cj.get("spec") or {}
        status = copy.deepcopy(cj.get("status") or {})
        try:
            schedule = cron.parse(str(spec.get("schedule") or ""))
        except cron.CronError as err:
            await self._event(cj, "Warning", "UnparseableSchedule", f"unparseable schedule: {err}")
            return
        now = self.clock.now()
        jobs = [
            j
            for j in self.rt.cache(JOBS).owned_by(md.get("uid") or "")
            if (controller_of(j) or {}).get("uid") == md.get("uid")
        ]
        # Forget finished jobs from `active`; enforce history limits.
        active = [j for j in jobs if not _job_finished(j)]
        status["active"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": j["metadata"]["name"],
                "namespace": j["metadata"].get("namespace"),
                "uid": j["metadata"].get("uid"),
            }
            for j in sorted(active, key=lambda j: j["metadata"]["name"])
        ]
        if not status["active"]:
            status.pop("active")
        for finished_type, limit_key, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(limit_key, default)
            done = sorted(
                (j for j in jobs if _job_finished(j) == finished_type),
                key=lambda j: (j.get("status") or {}).get("startTime") or "",
            )
            for job in done[: max(0, len(done) - int(limit))]:
                try:
                    await self.store.delete(JOBS, job["metadata"].get("namespace"), job["metadata"]["name"])
                except ApiError as err:
                    if err.code != 404:
                        raise
        last = (
            timestamps.parse_time(status.get("lastScheduleTime"))
            or timestamps.parse_time(md.get("creationTimestamp"))
            or now
        )
        # Find the most recent missed time (<= now) after `last`.
        scheduled: float | None = None
        t = schedule.next_after(last)
        missed = 0
        while t <= now:
            scheduled = t
            missed += 1
            if missed > 100:
                # Too many missed start times: kube gives up on the backlog and starts the latest one.
                t_latest = t
                while True:
                    nxt = schedule.next_after(t_latest)
                    if nxt > now:
                        break
                    t_latest = nxt
                scheduled = t_latest
                break
            t = schedule.next_after(t)
        deadline = spec.get("startingDeadlineSeconds")
        if (
            scheduled is not None
            and not spec.get("suspend")
            and (deadline is None or scheduled + float(deadline) >= now)
        ):
            policy = spec.get("concurrencyPolicy") or "Allow"
            if policy == "Forbid" and active:
                scheduled = None  # skipped; retried on the next schedule
            else:
                if policy == "Replace":
                    for job in active:
                        await self.store.delete(
                            JOBS, job["metadata"].get("namespace"), job["metadata"]["name"]
                        )
                job_name = f"{md.get('name')}-{int(scheduled // 60)}"
                template = spec.get("jobTemplate") or {}
                tmd = template.get("metadata") or {}
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": job_name,
                        "namespace": md.get("namespace"),
                        "labels": dict(tmd.get("labels") or {}),
                        "annotations": {
                            **(tmd.get("annotations") or {}),
                            "batch.kubernetes.io/cronjob-scheduled-timestamp": timestamps.rfc3339(scheduled),
                        },
                        "ownerReferences": [owner_ref(cj)],
                    },
                    "spec": copy.deepcopy(template.get("spec") or {}),
                }
                try:
                    created = await self.store.create(JOBS, job, admit=True)
                    self.rt.observe(JOBS, created)
                    await self._event(cj, "Normal", "SuccessfulCreate", f"Created job {job_name}")
                    status.setdefault("active", []).append(
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job_name,
                            "namespace": md.get("namespace"),
                            "uid": created["metadata"].get("uid"),
                        }
                    )
                except ApiError as err:
                    if err.code != 409:
                        raise
        if scheduled is not None:
            status["lastScheduleTime"] = timestamps.rfc3339(scheduled)
        successful = [j for j in jobs if _job_finished(j) == "Complete"]
        if successful:
            status["lastSuccessfulTime"] = max(
                (j.get("status") or {}).get("completionTime") or "" for j in successful
            )
        await self._write_status(CRONJOBS, cj, status)
        nxt = schedule.next_after(max(now, timestamps.parse_time(status.get("lastScheduleTime")) or now))
        self._wake_at(CRONJOBS, key_of(cj), nxt)


def _job_finished(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None
