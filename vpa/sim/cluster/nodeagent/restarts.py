"""Container restarts and OOM kills: the `Restarts` mixin of `NodeAgent`.

Owns: restarting a container (last state, restart count, the kubelet's crash back-off, none for a restart
a resize asked for); arming each running container's OOM kill at the first time its usage profile exceeds
its memory limit (a leak's exact crossing, else a scan up to a horizon, re-armed beyond it; never looking
back past an in-place limit decrease); the kill (exit 137, `OOMKilled`, a restart, or with `restartPolicy:
Never` a terminated container and a failed pod once all have exited); re-arming when usage changes.

Must not: decide resizes (`resize`) or remove pods (`kubelet`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.nodeagent.common import rfc3339
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import ContainerRun, PodRun
from vpa.sim.cluster.pods import MEMORY
from vpa.sim.cluster.profiles import Leak
from vpa.sim.cluster.runtime import Key
from vpa.sim.contracts import JsonObj

_OOM_SCAN_STEP_S = 5.0
_OOM_HORIZON_S = 6 * 3600.0
_BACKOFF_RESET_S = 600.0


def _seconds(after: float, until: float) -> list[float]:
    """The instants one second apart from just after `after` up to before `until`."""
    out, s = [], after + 1.0
    while s < until:
        out.append(s)
        s += 1.0
    return out


class Restarts(AgentCore):
    """Container restarts, crash back-off and OOM kills."""

    def _restart_container(
        self,
        pod: Mapping[str, Any],
        run: PodRun,
        c: ContainerRun,
        at: float,
        terminated: JsonObj,
        resize: bool = False,
    ) -> None:
        c.last_terminated = {
            **terminated,
            "startedAt": rfc3339(c.started_at),
            "finishedAt": rfc3339(at),
            "containerID": c.container_id(run.uid),
        }
        c.restart_count += 1
        # Kubelet crash back-off: the first crash restarts at once, then base·2^(n−2) capped at 5 min; a
        # container that ran 10 minutes starts over. Restarts the kubelet itself asked for have no back-off.
        if resize:
            backoff = 0.0
        else:
            c.crashes = 1 if at - c.started_at >= _BACKOFF_RESET_S else c.crashes + 1
            base = self.options.crash_backoff_s
            backoff = 0.0 if c.crashes <= 1 or base <= 0 else min(300.0, base * 2 ** min(c.crashes - 2, 10))
        c.started_at = at + backoff
        if backoff > 0:
            c.waiting_until = at + backoff
            run.timers.append(self.rt.at(c.waiting_until, self._enqueue_sync(run.key)))
        else:
            c.waiting_until = None
        self._arm_oom(pod, run, c)

    def _arm_oom(
        self, pod: Mapping[str, Any], run: PodRun, c: ContainerRun, since: float | None = None
    ) -> None:
        """Arm the OOM kill of `c` at its usage's first crossing of its memory limit, searched from the
        container's (re)start, or from `since` (a resize: the usage before it met the older limit)."""
        self.rt.cancel(run.oom_timers.pop(c.name, None))
        if not run.counted or run.phase != "Running" or c.terminated is not None:
            return
        req, lim = c.actual_amounts()
        limit = lim.get(MEMORY)
        if limit is None:
            return
        container: Mapping[str, Any] = next(
            (x for x in (pod.get("spec") or {}).get("containers") or [] if x.get("name") == c.name), {}
        )
        profile = self.usage.profile(pod, container, MEMORY, req, lim)
        if profile.upper_bound() <= limit:
            return
        now = self.clock.now()
        # Timers carry their due time: after a long advance(), kills replay at the right instants, so the
        # search starts at the container's (re)start unless that is beyond the scan horizon, and never before
        # an in-place decrease of the limit: the kernel judges only usage after it against the new limit.
        start = c.started_at if now - c.started_at <= _OOM_HORIZON_S else now
        if since is not None:
            start = max(start, since)
        # ... and on every later arming too (a restart, a re-scan, changed usage), not just the resize's.
        start = max(start, c.mem_limit_lowered_at)
        crossing: float | None
        if isinstance(profile, Leak):
            crossing = profile.crossing(limit, c.started_at)
            if crossing is not None:
                # Strictly above the limit, to the whole second the kernel would notice it in.
                crossing = max(start, math.floor(crossing) + 1.0)
        else:
            crossing = None
            t = start
            while t <= start + _OOM_HORIZON_S:
                if profile.value(t, run.start_at, c.started_at) > limit:
                    # Found within a step: the first whole second above it, as the kernel would kill.
                    crossing = next(
                        (s for s in _seconds(max(start, t - _OOM_SCAN_STEP_S), t)
                         if profile.value(s, run.start_at, c.started_at) > limit),
                        t,
                    )  # fmt: skip
                    break
                t += _OOM_SCAN_STEP_S
            if crossing is None:
                run.oom_timers[c.name] = self.rt.at(
                    start + _OOM_HORIZON_S, self._rearm_cb(run.key, run.uid, c.name)
                )
                return
        if crossing is None:
            return
        run.oom_timers[c.name] = self.rt.at(crossing, self._oom_cb(run.key, run.uid, c.name, c.started_at))

    def _rearm_cb(self, k: Key, uid: str, name: str) -> Any:
        def fire(_due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if run is None or run.uid != uid or pod is None or name not in run.containers:
                return
            self._arm_oom(pod, run, run.containers[name])

        return fire

    def _oom_cb(self, k: Key, uid: str, name: str, started_at: float) -> Any:
        async def fire(due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if (
                run is None
                or run.uid != uid
                or pod is None
                or name not in run.containers
                or run.phase != "Running"
            ):
                return
            c = run.containers[name]
            if c.started_at != started_at or (pod.get("metadata") or {}).get("deletionTimestamp"):
                return
            self.oom_kills += 1
            policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
            terminated = {"exitCode": 137, "reason": "OOMKilled"}
            if policy == "Never":
                c.terminated = {
                    **terminated,
                    "startedAt": rfc3339(c.started_at),
                    "finishedAt": rfc3339(due),
                    "containerID": c.container_id(uid),
                }
                if all(x.terminated is not None for x in run.containers.values()):
                    run.phase = "Failed"
                    self._release(pod, run)
            else:
                self._restart_container(pod, run, c, due, terminated)
            await self._write_status(pod, run)

        return fire

    def usage_changed(self, namespace: str, name: str) -> None:
        run = self.runs.get((namespace, name))
        pod = self.store.get("pods", namespace, name)
        if run is None or pod is None:
            return
        now = self.clock.now()
        for c in run.containers.values():
            self._arm_oom(pod, run, c, since=now)  # the usage before now was the old profile's
