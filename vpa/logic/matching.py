"""Choosing the VPA that controls a pod being admitted (spec §5.3, §4.2).

Owns: `target_key` / `controller_key` (the `namespace/kind/name` key of the targetRef index, built the same
way on both sides), and `controlling_vpa`: among the candidate VPAs (those the index returned for the pod's
top-most controller), skip VPAs in mode `Off` unless they configure a CPU startup boost, skip VPAs whose
target selector is unknown or does not match the pod's labels, and pick the "stronger" one: the earliest
`creationTimestamp`, ties broken by the smaller name. `Off` VPAs are skipped *before* choosing, so an older
`Off` VPA never hides a newer active one.

Resolving the top-most controller from owner references and fetching selectors are I/O and belong to the
caller (`vpa.kube`/`vpa.components`). Must not: log, read the clock, or do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vpa.model.selector import Selector
from vpa.model.vpa import UpdateMode, VpaView


def controller_key(namespace: str, kind: str, name: str) -> str:
    """The targetRef index key of a controller: `namespace/kind/name` (apiVersion is not compared)."""
    return f"{namespace}/{kind}/{name}"


def target_key(vpa: VpaView) -> str | None:
    """The targetRef index key of a VPA, or None when it has no targetRef."""
    if vpa.target_ref is None:
        return None
    return controller_key(vpa.namespace, vpa.target_ref.kind, vpa.target_ref.name)


def is_active_for_admission(vpa: VpaView) -> bool:
    """False for VPAs the admission controller ignores: mode `Off` without any startup boost."""
    return vpa.effective_mode is not UpdateMode.OFF or vpa.has_startup_boost()


def controlling_vpa(
    pod_namespace: str,
    pod_labels: Mapping[str, str],
    controller: str | None,
    candidates: Iterable[tuple[VpaView, Selector | None]],
) -> VpaView | None:
    """The VPA controlling the pod, or None.

    `controller` is the pod's top-most controller key (`controller_key(...)`), None when the pod has no
    controller (then no VPA controls it). `candidates` pairs each VPA with its target's selector (None when
    it could not be fetched: the VPA is skipped, as upstream does).
    """
    if controller is None:
        return None
    best: VpaView | None = None
    for vpa, selector in candidates:
        if selector is None or vpa.namespace != pod_namespace or target_key(vpa) != controller:
            continue
        if not is_active_for_admission(vpa) or not selector.matches(pod_labels):
            continue
        if best is None or vpa.is_stronger_than(best):
            best = vpa
    return best
