"""Silence: pods created in namespaces with VPAs while no AdmissionReview reaches the webhook.

Owns: `ReviewSilence` (the bookkeeping) and `watch_silence` (the loop): when pods are created in namespaces
with VPAs while no review at all reaches the server for a check interval (60 s of wall time by default),
the API server is not calling us (a wrong Service, endpoints that do not reach this process, a
NetworkPolicy, a failure policy of `Ignore` hiding it): one warning `admission_webhook_not_called` and
`vpa_admission_controller_webhook_silent` 1, until a review arrives.

Must not: write to the API; count anything but what the pod cache shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container

import structlog
from prometheus_client import Gauge

from vpa.kube.watching import WatchCache
from vpa.model.clock import RealClock
from vpa.model.pod import PodView

log = structlog.get_logger(__name__)


@dataclasses.dataclass
class ReviewSilence:
    """Pods that appeared in namespaces holding a VPA since the last AdmissionReview (bookkeeping only).

    The API server sends every pod CREATE to the webhook before it stores the pod, so a pod that reaches
    the watch cache after the last review, in a namespace the webhook cares about, was never shown to us.
    Counting what the cache sees (not comparing creation times) keeps this independent of clock skew.
    """

    namespaces: Container[str]
    pods: int = 0
    example: str = ""
    where: set[str] = dataclasses.field(default_factory=set)

    def pod_added(self, pod: PodView) -> None:
        if pod.namespace in self.namespaces:
            self.pods += 1
            self.example = self.example or f"{pod.namespace}/{pod.name}"
            if len(self.where) < 5:
                self.where.add(pod.namespace)

    def reset(self) -> None:
        self.pods, self.example = 0, ""
        self.where.clear()

    def warning(self, service: str, silent_for_s: float) -> dict[str, object]:
        """The fields of the one `admission_webhook_not_called` warning."""
        return {
            "pods_created": self.pods,
            "namespaces": sorted(self.where),
            "example_pod": self.example,
            "silent_for_s": round(silent_for_s),
            "check": f"the Service {service} and its endpoints reach this process on --port, no "
            "NetworkPolicy blocks the API server, and the MutatingWebhookConfiguration points at that "
            "Service",
        }


async def watch_silence(pods: WatchCache[PodView], namespaces: Container[str], requests: Callable[[], int],
                        silent: Gauge, service: str, check_s: float) -> None:
    """Warn once when pods appeared in VPA namespaces but no review arrived (`requests()` unchanged) for a
    whole check interval; say so again (info) when reviews resume. The interval is wall time whatever clock
    the process follows: a network fault is measured in real seconds."""
    wall = RealClock()
    silence = ReviewSilence(namespaces)
    # A moment for the API server to pick up the configuration just registered.
    await wall.sleep(min(5.0, check_s))
    pods.on_add(silence.pod_added)
    quiet_since, seen, warned = wall.now(), requests(), False
    while True:
        await wall.sleep(check_s)
        if requests() != seen:
            if warned:
                log.info("admission_webhook_called_again", service=service)
                silent.set(0)
            silence.reset()
            quiet_since, seen, warned = wall.now(), requests(), False
        elif silence.pods and not warned:
            fields = silence.warning(service, wall.now() - quiet_since)
            log.warning("admission_webhook_not_called", **fields)
            silent.set(1)
            warned = True
