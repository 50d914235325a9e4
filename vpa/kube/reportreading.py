"""What `vpa report` reads from a cluster: VPAs, their pods, and the updater's events, in one pass.

Owns: `read_report_inputs` — paged LISTs of VerticalPodAutoscalers, pods and the Events whose reason the
caller names (the updater's actions; one LIST per reason, `fieldSelector=reason=...`), in one namespace
or all; each VPA's target resolved to a pod selector with the recommender's own `TargetResolver` (so the
report and the recommender agree on which pods a VPA controls). Objects that do not convert are skipped
and counted.

Must not: match pods to selectors or compute the report (that is `vpa.logic.report.rows`), write anything,
or format output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from vpa.kube import converting
from vpa.kube.client import KubeClient, api_path
from vpa.kube.paging import PagedList
from vpa.kube.targets import TargetResolver
from vpa.model.clock import Clock
from vpa.model.event import EventView
from vpa.model.pod import PodView
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

T = TypeVar("T")
PAGE_SIZE: Final = 500


@dataclass(frozen=True, slots=True)
class VpaInputs:
    """One VPA, the selector of its target, and why there is none (`target_problem`, else "")."""

    vpa: VpaView
    selector: Selector | None
    target_problem: str = ""


@dataclass(frozen=True, slots=True)
class ReportInputs:
    vpas: tuple[VpaInputs, ...]
    pods: tuple[PodView, ...]
    events: tuple[EventView, ...]
    skipped: int
    """Objects that did not convert (malformed VPAs, pods or events)."""


async def _list(client: KubeClient, path: str, query: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return await PagedList(client, path, query, page_size=PAGE_SIZE).dicts()


def _convert(objs: Iterable[dict[str, Any]], convert: Callable[[dict[str, Any]], T]) -> tuple[list[T], int]:
    out: list[T] = []
    skipped = 0
    for obj in objs:
        try:
            out.append(convert(obj))
        except converting.ConversionError:
            skipped += 1
    return out, skipped


async def read_report_inputs(
    client: KubeClient, clock: Clock, event_reasons: Iterable[str], namespace: str | None = None
) -> ReportInputs:
    """Everything the report needs, read now: the Events of `event_reasons` only; `namespace` None means
    every namespace."""
    vpa_path = api_path("autoscaling.k8s.io", "v1", "verticalpodautoscalers", namespace=namespace)
    vpas, bad_vpas = _convert(await _list(client, vpa_path), converting.vpa_from_dict)
    pods, bad_pods = _convert(
        await _list(client, api_path("", "v1", "pods", namespace=namespace)), converting.pod_from_dict
    )
    raw_events: list[dict[str, Any]] = []
    for reason in sorted(event_reasons):
        raw_events += await _list(
            client, api_path("", "v1", "events", namespace=namespace), {"fieldSelector": f"reason={reason}"}
        )
    events, bad_events = _convert(raw_events, converting.event_from_dict)
    resolver = TargetResolver(client, clock, namespace=namespace)
    out = []
    for vpa in sorted(vpas, key=lambda v: (v.namespace, v.name)):
        resolution = await resolver.resolve(vpa.namespace, vpa.target_ref)
        problem = resolution.unsupported or ("" if resolution.selector else "the target has no selector")
        out.append(VpaInputs(vpa, resolution.selector, problem))
    return ReportInputs(tuple(out), tuple(pods), tuple(events), bad_vpas + bad_pods + bad_events)
