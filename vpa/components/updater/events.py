"""The updater's Kubernetes Event reasons and messages (spec §4.11, and our own), failure reasons of its
counters (spec §6.2), and the object references its events name.

Must not: record events (the updater does, through its `EventRecorder`).
"""

from __future__ import annotations

from typing import Final

from vpa.kube.eventing import ObjectRef
from vpa.model.pod import PodView
from vpa.model.vpa import VPA_API_VERSION, VpaView

EVENT_SOURCE: Final = "vpa-updater"

# Event reasons and messages (spec §4.11), all type Normal.
EVICTED_BY_VPA: Final = "EvictedByVPA"
EVICTED_BY_VPA_MESSAGE: Final = "Pod was evicted by VPA Updater to apply resource recommendation."
EVICTED_POD: Final = "EvictedPod"
IN_PLACE_RESIZED: Final = "InPlaceResizedByVPA"
IN_PLACE_RESIZED_MESSAGE: Final = "Pod was resized in place by VPA Updater."
# Ours, on the VPA (as upstream's EvictedPod is for evictions): `kubectl describe vpa` shows in-place resizes.
IN_PLACE_RESIZED_POD: Final = "InPlaceResizedPod"
IN_PLACE_SKIPPED: Final = "InPlaceResizeSkipped"
IN_PLACE_SKIPPED_MESSAGE: Final = (
    "Previously recorded in-place update was infeasible, current recommendation is not lower than "
    "previous, skipping resize"
)

# Failure reasons of the upstream counters (spec §6.2).
EVICTION_ERROR: Final = "EvictionError"
IN_PLACE_UPDATE_ERROR: Final = "InPlaceUpdateError"
IN_PLACE_UPDATE_INFEASIBLE: Final = "InPlaceUpdateInfeasible"

SKIPPED_ADMISSION_STALE: Final = "AdmissionControllerStatusStale"
IN_PLACE_GATE_OFF: Final = "InPlaceFeatureGateOff"
IN_PLACE_GATE_OFF_MESSAGE: Final = (
    "updateMode InPlace needs the InPlace feature gate of the updater (--feature-gates=InPlace=true); "
    "no pod of this VPA is updated until it is enabled or the mode is changed."
)

UNBOOST_ERROR: Final = "UnboostError"

# Ours: gate InPlaceCapacityAware (AEP-9726), Normal, on the pod; gate ResizeGuard, Warning, on the VPA and
# the pod (the message says "revert").
IN_PLACE_WOULD_NOT_FIT: Final = "InPlaceResizeWouldNotFit"
RESIZE_REVERTED: Final = "ResizeReverted"
# Ours, Normal, on the pod: an InPlace pod with pod-level resources on a server that does not resize them.
POD_LEVEL_RESIZE_UNSUPPORTED: Final = "PodLevelResizeUnsupported"
POD_LEVEL_RESIZE_UNSUPPORTED_MESSAGE: Final = (
    "In-place resize not sent: the API server does not resize pods with pod-level resources in place "
    "(InPlacePodLevelResourcesVerticalScaling is off, or it is older than 1.36); updateMode InPlace never "
    "evicts."
)

def pod_ref(pod: PodView) -> ObjectRef:
    return ObjectRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)


def vpa_ref(vpa: VpaView) -> ObjectRef:
    return ObjectRef(
        kind="VerticalPodAutoscaler",
        namespace=vpa.namespace,
        name=vpa.name,
        uid=vpa.uid,
        api_version=VPA_API_VERSION,
    )
