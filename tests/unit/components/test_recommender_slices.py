"""The recommender loop sliced to the extreme (a yield at every pacer check, `chunk_budget_s=0`) does what
the unsliced loop does: the same pods tracked, statuses written, checkpoints kept and aggregates collected,
including the hourly aggregate collection that spares a finished pod whose controller still exists."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vpa.components.recommender import LoopReport, Recommender
from vpa.kube.client import JsonObj
from vpa.kube.metricsreading import MetricsRead
from vpa.kube.targets import Resolution
from vpa.model.clock import VirtualClock
from vpa.model.pod import ContainerView, OwnerRef, PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import TargetRef, VpaStatus, VpaView

MI = 2**20
T0 = 1_767_225_600.0


class Listing:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def list(self) -> list[Any]:
        return list(self.items)

    def on_update(self, handler: Callable[[Any, Any], None]) -> None:
        pass


class NoMetrics:
    client_name = "test"

    async def read(self) -> MetricsRead:
        return MetricsRead([])


class Resolver:
    def __init__(self, selectors: Mapping[str, Selector]) -> None:
        self.selectors = selectors

    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution:
        assert target is not None
        return Resolution(self.selectors[target.name])

    def forget_unused(self) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str]] = []
        self.checkpoints: list[tuple[str, str]] = []

    async def write(self, *args: Any) -> None:
        if len(args) == 3:
            self.statuses.append((args[0], args[1]))
        else:
            self.checkpoints.append((args[0], args[1]))

    async def list(self) -> list[JsonObj]:
        return []

    async def delete(self, namespace: str, name: str) -> None:
        pass


def _pod(name: str, app: str, phase: str) -> PodView:
    containers = (ContainerView("app", Resources(100, 128 * MI), Resources(1000, 512 * MI)),)
    return PodView("default", name, uid=name, labels={"app": app},
                   owner=OwnerRef("apps/v1", "ReplicaSet", f"{app}-rs", "u", True), phase=phase,
                   containers=containers)


def _vpa(name: str) -> VpaView:
    return VpaView("default", name, generation=1, target_ref=TargetRef("apps/v1", "Deployment", name),
                   creation_timestamp=T0 - 3600, status=VpaStatus())


async def _two_loops(chunk_budget_s: float) -> tuple[list[LoopReport], Recommender, Sink]:
    clock = VirtualClock(start=T0)
    # 40 VPAs with a running pod each; "done" finished under a VPA (its controller lives on); "job"
    # finished and no VPA matches it (its aggregate goes at the hourly collection).
    pods = [_pod(f"app-{i}-pod", f"app-{i}", "Running") for i in range(40)]
    pods += [_pod("done-pod", "app-0", "Succeeded"), _pod("job-pod", "job", "Failed")]
    views = [_vpa(f"app-{i}") for i in range(40)]
    selectors = {f"app-{i}": Selector.from_match_labels({"app": f"app-{i}"}) for i in range(40)}
    sink = Sink()
    rec = Recommender(RecommenderSettings(), pods=Listing(pods), vpas=Listing(views), clock=clock,
                      metrics_source=NoMetrics(), resolver=Resolver(selectors), status_writer=sink,
                      checkpoints=sink, chunk_budget_s=chunk_budget_s)
    first = await rec.run_once()
    clock.advance(3600)
    return [first, await rec.run_once()], rec, sink


async def test_a_loop_sliced_at_every_check_does_what_the_unsliced_loop_does() -> None:
    sliced, sliced_rec, sliced_sink = await _two_loops(0.0)
    whole, whole_rec, whole_sink = await _two_loops(3600.0)
    for report in (*sliced, *whole):
        assert report.vpas == 40
        assert report.pods == 42
    # The hourly collection drops the unmatched finished pod's aggregate only.
    assert [r.aggregates_collected for r in sliced] == [r.aggregates_collected for r in whole] == [0, 1]
    assert sorted(dict(key.labels)["app"] for key in sliced_rec.core.cluster.aggregates) == sorted(
        dict(key.labels)["app"] for key in whole_rec.core.cluster.aggregates)
    assert "job" not in {dict(key.labels)["app"] for key in sliced_rec.core.cluster.aggregates}
    assert sliced_sink.statuses == whole_sink.statuses
    assert sliced_sink.checkpoints == whole_sink.checkpoints
    assert [r.status_writes for r in sliced] == [r.status_writes for r in whole]
