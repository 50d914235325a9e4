"""Conflicts a VPA cannot see by itself: other VPAs on the same pods, and HPAs scaling on what it sizes.

Owns:
- `vpa_conflicts`: among the VPAs that act on pods (`is_active_for_admission`: not `Off`, or `Off` with a
  startup boost) and point at the same target (`namespace/kind/name`, the key the admission controller and
  the updater match on), the winner is the one `controlling_vpa` picks for their pods — the earliest
  `creationTimestamp`, then the smaller name — and every other one is a loser, mapped to its winner. VPAs
  in mode `Off` without a boost never act, so they neither win nor lose. `VpaConflicts` is the same, one
  VPA at a time.
- `hpa_conflicts`: the autoscaling/v2 HPAs of the VPA's namespace that scale the VPA's target on a
  resource the VPA controls: a `Resource` metric on cpu or memory that at least one of the VPA's containers
  has under control, or a `ContainerResource` metric on a container that has it under control. A VPA in
  mode `Off` controls nothing.

Must not: do I/O, log, or read the clock; which conditions and events follow is the recommender's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vpa.logic.matching import is_active_for_admission, target_key
from vpa.model.node import HpaMetric, HpaView
from vpa.model.resources import CPU, MEMORY
from vpa.model.vpa import DEFAULT_CONTAINER_POLICY_NAME, UpdateMode, VpaView

_SIZED = (CPU, MEMORY)


class VpaConflicts:
    """`vpa_conflicts` one VPA at a time (`add`), so that a caller with thousands of them can pause between
    VPAs; `losers()` at the end."""

    __slots__ = ("_crowded", "_groups", "_winners")

    def __init__(self) -> None:
        self._winners: dict[str, VpaView] = {}
        self._groups: dict[str, list[VpaView]] = {}
        self._crowded: set[str] = set()  # targets with more than one acting VPA

    def add(self, vpa: VpaView) -> None:
        key = target_key(vpa)
        if key is None or vpa.deletion_timestamp is not None or not is_active_for_admission(vpa):
            return
        group = self._groups.get(key)
        if group is None:
            self._groups[key] = [vpa]
            self._winners[key] = vpa
            return
        group.append(vpa)
        self._crowded.add(key)
        if vpa.is_stronger_than(self._winners[key]):
            self._winners[key] = vpa

    def losers(self) -> dict[tuple[str, str], VpaView]:
        """(namespace, name) of every losing VPA added so far → the VPA that controls the pods instead."""
        losers: dict[tuple[str, str], VpaView] = {}
        for key in self._crowded:
            winner = self._winners[key]
            for vpa in self._groups[key]:
                if vpa is not winner:
                    losers[(vpa.namespace, vpa.name)] = winner
        return losers


def vpa_conflicts(vpas: Iterable[VpaView]) -> Mapping[tuple[str, str], VpaView]:
    """(namespace, name) of every losing VPA → the VPA that controls the pods instead."""
    tally = VpaConflicts()
    for vpa in vpas:
        tally.add(vpa)
    return tally.losers()


@dataclass(frozen=True, slots=True)
class HpaConflict:
    """An HPA that scales the VPA's target on a resource the VPA sizes."""

    hpa: str
    metric: HpaMetric

    def describe(self) -> str:
        on = (f"{self.metric.resource} of container {self.metric.container}" if self.metric.container
              else self.metric.resource)
        return f"HPA {self.hpa} scales on {on}"


def _controls(vpa: VpaView, container: str, resource: str) -> bool:
    policy = vpa.container_policy(container)
    return policy is None or (not policy.is_off and policy.controls(resource))


def hpa_conflicts(vpa: VpaView, hpas: Iterable[HpaView],
                  containers: Iterable[str] = ()) -> tuple[HpaConflict, ...]:
    """The HPAs fighting `vpa`, sorted by HPA name then metric. `containers` are the names the VPA
    recommends for; when none are known yet, the policy's names and the `*` entry stand for them."""
    ref = vpa.target_ref
    if ref is None or vpa.effective_mode is UpdateMode.OFF:
        return ()
    names = set(containers)
    if not names:
        names = {DEFAULT_CONTAINER_POLICY_NAME}
        names.update(p.container_name for p in vpa.resource_policy.container_policies)
    found = []
    for hpa in hpas:
        if hpa.namespace != vpa.namespace or hpa.target_kind != ref.kind or hpa.target_name != ref.name:
            continue
        for metric in hpa.resource_metrics:
            if metric.resource not in _SIZED:
                continue
            scope = (metric.container,) if metric.container else tuple(names)
            if any(_controls(vpa, name, metric.resource) for name in scope):
                found.append(HpaConflict(hpa.name, metric))
    found.sort(key=lambda c: (c.hpa, c.metric.resource, c.metric.container or ""))
    return tuple(found)
