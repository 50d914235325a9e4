"""What the updater reads: which pods are live, which VPAs it acts for, a target's selector, and each pod's
LimitRange-capped recommendation.

Must not: do I/O beyond the caches it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from vpa.kube.controllers import KINDS, ControllerCaches
from vpa.logic.capping import cap_pod_recommendations
from vpa.logic.limitranges import NamespaceLimits
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import Recommendation, RecommendedContainerResources, VpaView

_DEAD_PHASES: Final = frozenset({"Succeeded", "Failed"})

def is_live(pod: PodView) -> bool:
    """Upstream's pod lister filter: scheduled, not finished, not being deleted."""
    return bool(pod.node_name) and pod.phase not in _DEAD_PHASES and pod.deletion_timestamp is None


def acts_for(vpa: VpaView) -> bool:
    """VPAs the updater considers when choosing a pod's controlling VPA: modes that update running pods.

    `InPlace` VPAs stay in even with the gate off (the plan then skips them), so a newer `Recreate` VPA on
    the same target can never take their pods over and evict them.
    """
    return vpa.deletion_timestamp is None and vpa.effective_mode.updates_running_pods


def shape_key(pod: PodView) -> tuple[object, ...]:
    """What the capped recommendation of a pod depends on besides the VPA and namespace limits."""
    return tuple((c.name, pod.current_requests(c.name), pod.current_limits(c.name)) for c in pod.containers)


def processed_recommendation(pod: PodView, vpa: VpaView, limits: NamespaceLimits) -> Recommendation | None:
    """The VPA's recommendation for `pod` after LimitRange and policy capping (spec §4.4 step 1)."""
    capped = cap_pod_recommendations(pod, vpa, limits)
    raw = vpa.recommendation
    out: list[RecommendedContainerResources] = []
    for container, rec in zip(pod.containers, capped, strict=True):
        if rec is None:
            continue
        original = raw.for_container(container.name) if raw is not None else None
        out.append(
            RecommendedContainerResources(
                container.name,
                rec.target,
                rec.lower_bound,
                rec.upper_bound,
                original.uncapped_target if original is not None else Resources(),
            )
        )
    return Recommendation(tuple(out)) if out else None


def target_selector(controllers: ControllerCaches, namespace: str, kind: str, name: str) -> Selector | None:
    """The selector of a VPA target, for matching its pods."""
    if kind not in KINDS:
        # A custom scalable controller: its pods are matched by ownership alone (upstream reads the
        # selector from its scale subresource).
        return Selector.everything()
    return controllers.selector(namespace, kind, name)


def recommendation_lookup(
    recs: Mapping[str, Recommendation | None],
) -> Callable[[PodView], Recommendation | None]:
    """Each pod's recommendation by its uid, as `plan_vpa` asks for it."""
    def recommendation_for(pod: PodView) -> Recommendation | None:
        return recs.get(pod.uid)

    return recommendation_for
