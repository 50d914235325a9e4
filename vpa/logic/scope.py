"""AEP-10031 DaemonSet-scoped recommendations (`spec.scope`, `status.groups`, gate `DaemonSetScope`).

Owns, shared by the recommender, the admission controller and the updater:
- `is_scoped`: gate on, `spec.scope` set, target a DaemonSet;
- `scope_value`: the group a node belongs to — its value of the scope label, `__absent__` without it, the
  node's name for `kubernetes.io/hostname`;
- `scope_label` / `with_scope_label`: the synthetic pod label (`__vpa_scope_<fnv32 of the key>`) the
  recommender adds to a scoped pod's labels, so that its containers aggregate per group (the AEP's
  mechanism: one in-memory VPA, aggregates that differ by that label);
- `node_of_daemonset_pod`: the node a DaemonSet pod is meant for, read at admission from the node affinity
  the DaemonSet controller writes (`matchFields` on `metadata.name`) — the pod is not bound yet;
- `group_recommendation`: the `status.groups` entry of a value, as a `Recommendation`; None when there is
  none yet (the AEP applies nothing then: no recommendation invented from other groups); `scoped_view`:
  the VPA as a pod of that group sees it.

Must not: read feature gates (callers pass `enabled`), do I/O, or compute recommendations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from vpa.model.vpa import Recommendation, VpaView

ABSENT: Final = "__absent__"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
SCOPE_LABEL_PREFIX: Final = "__vpa_scope_"
DAEMONSET: Final = "DaemonSet"


def is_scoped(vpa: VpaView, enabled: bool) -> bool:
    """True when the VPA's recommendations are kept per node group."""
    return enabled and bool(vpa.scope) and vpa.target_ref is not None and vpa.target_ref.kind == DAEMONSET


def scope_value(scope: str, node_name: str, node_labels: Mapping[str, str] | None) -> str | None:
    """The group of a node: its value of label `scope` (`__absent__` without it); the node's name for
    `kubernetes.io/hostname`. None when the node is unknown (no labels to read)."""
    if scope == HOSTNAME_LABEL and node_name:
        return node_name
    if node_labels is None:
        return None
    return node_labels.get(scope, ABSENT)


def _fnv32(text: str) -> int:
    """FNV-1 32-bit, as the AEP names the synthetic label after the hash of the key."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = (value * 0x01000193) & 0xFFFFFFFF
        value ^= byte
    return value


def scope_label(scope: str) -> str:
    """`__vpa_scope_<hex fnv32(scope)>`: never a valid Kubernetes label key, so it cannot collide."""
    return f"{SCOPE_LABEL_PREFIX}{_fnv32(scope):08x}"


def with_scope_label(labels: Mapping[str, str], scope: str, value: str) -> dict[str, str]:
    """The pod's labels plus the synthetic scope label (what the recommender aggregates by)."""
    return {**labels, scope_label(scope): value}


def node_of_daemonset_pod(raw_pod: Mapping[str, Any]) -> str:
    """The node a pod is bound to (`spec.nodeName`) or, for a DaemonSet pod at admission, the node its
    required node affinity names through `matchFields` `metadata.name In [<node>]`; "" when neither."""
    spec = raw_pod.get("spec")
    if not isinstance(spec, Mapping):
        return ""
    bound = spec.get("nodeName")
    if isinstance(bound, str) and bound:
        return bound
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        return ""
    for term in terms:
        fields = term.get("matchFields") if isinstance(term, Mapping) else None
        for requirement in fields if isinstance(fields, list) else ():
            if (
                isinstance(requirement, Mapping)
                and requirement.get("key") == "metadata.name"
                and requirement.get("operator") == "In"
                and isinstance(requirement.get("values"), list)
                and len(requirement["values"]) == 1
                and isinstance(requirement["values"][0], str)
            ):
                return str(requirement["values"][0])
    return ""


def group_recommendation(vpa: VpaView, value: str | None) -> Recommendation | None:
    """The recommendation of group `value` from `status.groups`, or None (unknown node, no such group)."""
    if value is None:
        return None
    for group in vpa.status.groups:
        if group.scope_value == value:
            return Recommendation(group.containers)
    return None


def scoped_view(vpa: VpaView, value: str | None) -> VpaView:
    """`vpa` as one pod of group `value` sees it: its group's recommendation in `status.recommendation`
    (None when the group has none yet), so capping, admission patches and the updater's plan work as
    for any VPA."""
    recommendation = group_recommendation(vpa, value)
    return dataclasses.replace(vpa, status=dataclasses.replace(vpa.status, recommendation=recommendation))
