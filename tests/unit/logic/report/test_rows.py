"""`vpa report`'s computation: container rows, the savings, the last action, the per-namespace sums, and
the four output formats."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vpa.logic.report import formatting as report_formatting
from vpa.logic.report import output as report_output
from vpa.logic.report.rows import (
    ContainerRow,
    PodIndex,
    container_rows,
    last_action,
    namespace_totals,
    vpa_report,
)
from vpa.model.event import EventView
from vpa.model.pod import ContainerStatusView, ContainerView, PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import (
    Condition,
    Recommendation,
    RecommendedContainerResources,
    TargetRef,
    UpdateMode,
    UpdatePolicy,
    VpaStatus,
    VpaView,
)

MI = 2**20


def pod(name: str, *containers: tuple[str, int | None, int | None], terminating: bool = False,
        actual: tuple[int, int] | None = None) -> PodView:
    """A pod whose containers request (cpu millicores, memory bytes) and have a 2-core / 1Gi limit;
    `actual` sets the first container's status requests (an in-place resize the kubelet applied)."""
    specs = tuple(ContainerView(n, requests=Resources(c, m), limits=Resources(2000, 1024 * MI))
                  for n, c, m in containers)
    statuses: tuple[ContainerStatusView, ...] = ()
    if actual is not None:
        statuses = (ContainerStatusView(containers[0][0], actual_requests=Resources(*actual)),)
    return PodView("ns", name, uid=name, labels={"app": "web"}, containers=specs, container_statuses=statuses,
                   deletion_timestamp=1.0 if terminating else None)


def vpa(*recommended: tuple[str, int, int], name: str = "web", namespace: str = "ns",
        mode: UpdateMode | None = UpdateMode.IN_PLACE_OR_RECREATE) -> VpaView:
    recommendation = None
    if recommended:
        recommendation = Recommendation(tuple(
            RecommendedContainerResources(n, Resources(c, m), Resources(c // 2, m // 2),
                                          Resources(c * 2, m * 2), Resources(c, m))
            for n, c, m in recommended))
    return VpaView(namespace, name, uid=f"uid-{name}", target_ref=TargetRef("apps/v1", "Deployment", name),
                   update_policy=UpdatePolicy(update_mode=mode),
                   status=VpaStatus(recommendation, (Condition("RecommendationProvided", "True"),)))


ROW_CASES = [
    # (case, vpa, pods, expected [(container, pods, requests, cpu diff, memory diff)])
    ("two equal pods over the target: the difference is summed over them",
     vpa(("app", 200, 128 * MI)), [pod("a", ("app", 500, 256 * MI)), pod("b", ("app", 500, 256 * MI))],
     [("app", 2, Resources(500, 256 * MI), 600, 256 * MI)]),
    ("a pod below the target gives a negative difference",
     vpa(("app", 800, 512 * MI)), [pod("a", ("app", 500, 256 * MI))],
     [("app", 1, Resources(500, 256 * MI), -300, -256 * MI)]),
    ("pods that differ: the value most run wins, the difference uses each pod's own request",
     vpa(("app", 100, MI)),
     [pod("a", ("app", 300, MI)), pod("b", ("app", 300, MI)), pod("c", ("app", 900, 2 * MI))],
     [("app", 3, Resources(300, MI), 200 + 200 + 800, MI)]),
    ("a tie goes to the larger request",
     vpa(("app", 100, MI)), [pod("a", ("app", 300, MI)), pod("b", ("app", 700, MI))],
     [("app", 2, Resources(700, MI), 800, 0)]),
    ("the kubelet's actual requests (after an in-place resize) count, not the spec",
     vpa(("app", 100, MI)), [pod("a", ("app", 500, 4 * MI), actual=(150, 2 * MI))],
     [("app", 1, Resources(150, 2 * MI), 50, MI)]),
    ("no recommendation yet: requests shown, no difference",
     vpa(), [pod("a", ("app", 500, MI))], [("app", 1, Resources(500, MI), None, None)]),
    ("a container without a CPU request has no CPU difference",
     vpa(("app", 100, MI)), [pod("a", ("app", None, 2 * MI))],
     [("app", 1, Resources(None, 2 * MI), None, MI)]),
    ("recommended containers first in their order, then containers only the pods run; terminating pods out",
     vpa(("b", 100, MI), ("a", 100, MI)),
     [pod("p", ("a", 100, MI), ("side", 50, MI)), pod("gone", ("a", 900, MI), terminating=True)],
     [("b", 0, Resources(), None, None), ("a", 1, Resources(100, MI), 0, 0),
      ("side", 1, Resources(50, MI), None, None)]),
]


@pytest.mark.parametrize(("case", "the_vpa", "pods", "expected"), ROW_CASES, ids=[c[0] for c in ROW_CASES])
def test_container_rows(case: str, the_vpa: VpaView, pods: list[PodView],
                        expected: list[tuple[str, int, Resources, int | None, int | None]]) -> None:
    rows = container_rows(the_vpa, pods)
    got = [(r.container, r.pods, r.requests, r.cpu_diff_millicores, r.memory_diff_bytes) for r in rows]
    assert got == expected


def test_row_carries_bounds_and_limits() -> None:
    [row] = container_rows(vpa(("app", 200, 128 * MI)), [pod("a", ("app", 500, 256 * MI))])
    assert row.limits == Resources(2000, 1024 * MI)
    assert (row.target, row.lower_bound, row.upper_bound, row.uncapped_target) == (
        Resources(200, 128 * MI), Resources(100, 64 * MI), Resources(400, 256 * MI), Resources(200, 128 * MI))


def event(reason: str, kind: str, name: str, at: float, namespace: str = "ns") -> EventView:
    return EventView(namespace, f"e-{reason}-{at}", "u", "1", reason, kind, namespace, name, at - 100,
                     message=f"{reason} message", last_timestamp=at)


ACTION_CASES = [
    ("nothing happened", [], None),
    ("an eviction recorded on the VPA", [event("EvictedPod", "VerticalPodAutoscaler", "web", 10)],
     ("EvictedPod", "VerticalPodAutoscaler", "web", 10.0)),
    ("the newest of a resize on a pod and an older eviction",
     [event("EvictedPod", "VerticalPodAutoscaler", "web", 10), event("InPlaceResizedByVPA", "Pod", "a", 20)],
     ("InPlaceResizedByVPA", "Pod", "a", 20.0)),
    ("events about other pods, other VPAs, other namespaces and other reasons do not count",
     [event("EvictedByVPA", "Pod", "not-mine", 30), event("EvictedPod", "VerticalPodAutoscaler", "api", 30),
      event("EvictedPod", "VerticalPodAutoscaler", "web", 30, namespace="other"),
      event("Scheduled", "Pod", "a", 30), event("InPlaceResizeSkipped", "Pod", "a", 5)],
     ("InPlaceResizeSkipped", "Pod", "a", 5.0)),
]


@pytest.mark.parametrize(("case", "events", "expected"), ACTION_CASES, ids=[c[0] for c in ACTION_CASES])
def test_last_action(
    case: str, events: list[EventView], expected: tuple[str, str, str, float] | None
) -> None:
    action = last_action(vpa(), [pod("a", ("app", 1, 1))], events)
    got = None if action is None else (
        action.reason, action.object_kind, action.object_name, action.timestamp)
    assert got == expected
    if action is not None:
        assert action.message == f"{expected[0] if expected else ''} message"


def test_an_event_without_last_timestamp_uses_its_creation_time() -> None:
    old = EventView("ns", "e", "u", "1", "EvictedPod", "VerticalPodAutoscaler", "ns", "web", 50.0)
    action = last_action(vpa(), [], [old, event("EvictedPod", "VerticalPodAutoscaler", "web", 40)])
    assert action is not None
    assert action.timestamp == 50.0


def test_namespace_totals_add_up_rows() -> None:
    reports = [
        vpa_report(vpa(("app", 200, 128 * MI), name="web"),
                   [pod("a", ("app", 500, 256 * MI)), pod("b", ("app", 500, 256 * MI))], []),
        vpa_report(vpa(("app", 800, 256 * MI), name="api"), [pod("c", ("app", 500, 256 * MI))], []),
        vpa_report(vpa(("app", 100, MI), name="other", namespace="b"), [], []),
    ]
    [b, ns] = namespace_totals(reports)  # sorted by namespace
    assert (ns.namespace, ns.vpas, ns.pods) == ("ns", 2, 3)
    assert (ns.cpu_requests_millicores, ns.cpu_target_millicores, ns.cpu_diff_millicores) == (1500, 1200, 300)
    assert (ns.memory_requests_bytes, ns.memory_target_bytes, ns.memory_diff_bytes) == (
        768 * MI, 512 * MI, 256 * MI)
    assert (b.namespace, b.vpas, b.pods, b.cpu_diff_millicores) == ("b", 1, 0, 0)


# --- output ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("millicores", "text"), [(250, "0.25"), (2000, "2"), (-1500, "-1.5"), (1, "0.001"),
                                                  (0, "0"), (None, "")])
def test_cores(millicores: int | None, text: str) -> None:
    assert report_formatting.cores(millicores) == text


@pytest.mark.parametrize(("millicores", "text"), [(25, "25m"), (250, "250m"), (2000, "2"), (1500, "1500m"),
                                                  (-250, "-250m"), (0, "0"), (None, "")])
def test_cpu_as_kubectl_prints_it(millicores: int | None, text: str) -> None:
    assert report_formatting.cpu(millicores) == text


@pytest.mark.parametrize(("value", "text"), [
    (256 * MI, "256Mi"), (1536 * MI, "1536Mi"), (2 * 1024 * MI, "2Gi"), (-128 * MI, "-128Mi"), (1000, "1000"),
    (64 * 1024, "64Ki"), (MI + MI // 2, "1.5Mi"), (272061154, "259.5Mi"), (None, ""),
])
def test_memory_as_kubectl_prints_it(value: int | None, text: str) -> None:
    assert report_formatting.memory(value) == text


def _sample() -> tuple[list, tuple]:  # type: ignore[type-arg]
    the_vpa = vpa(("app", 200, 128 * MI), name="web<script>")
    reports = [vpa_report(the_vpa, [pod("a", ("app", 500, 256 * MI))],
                          [event("EvictedPod", "VerticalPodAutoscaler", "web<script>", 1_767_225_600.0)])]
    return reports, namespace_totals(reports)


def test_json_output() -> None:
    reports, totals = _sample()
    document = json.loads(report_output.render("json", reports, totals, 1_767_225_600.0))
    assert document["generatedAt"] == "2026-01-01T00:00:00Z"
    [entry] = document["vpas"]
    assert entry["mode"] == "InPlaceOrRecreate"
    assert entry["containers"][0]["target"] == {"cpuMillicores": 200, "memoryBytes": 128 * MI,
                                                "quantities": {"cpu": "200m", "memory": "128Mi"}}
    assert entry["containers"][0]["cpuDiffMillicores"] == 300
    assert entry["lastAction"]["time"] == "2026-01-01T00:00:00Z"
    assert document["namespaces"][0]["memoryDiffBytes"] == 128 * MI


def test_csv_output_has_one_line_per_container_and_numbers_for_spreadsheets() -> None:
    reports, totals = _sample()
    rows = list(csv.DictReader(io.StringIO(report_output.render("csv", reports, totals, 0.0))))
    assert len(rows) == 1
    assert list(rows[0]) == list(report_output.CSV_COLUMNS)
    assert (rows[0]["cpu_request_cores"], rows[0]["memory_request_bytes"], rows[0]["cpu_upper_bound_cores"],
            rows[0]["cpu_diff_cores"], rows[0]["conditions"]) == (
        "0.5", str(256 * MI), "0.4", "0.3", "RecommendationProvided=True")


def test_table_output() -> None:
    reports, totals = _sample()
    text = report_output.render("table", reports, totals, 0.0)
    assert "500m/2" in text
    assert "200m [100m-400m]" in text
    assert "+300m" in text
    assert "+128Mi" in text
    assert "0.2" not in text  # no CPU in cores where kubectl shows millicores
    assert "last action: EvictedPod VerticalPodAutoscaler/web<script> at 2026-01-01T00:00:00Z" in text
    assert "No VerticalPodAutoscalers found." in report_output.render("table", [], (), 0.0)


def test_html_output_is_escaped_and_self_contained() -> None:
    reports, totals = _sample()
    page = report_output.render("html", reports, totals, 0.0)
    assert "web<script>" not in page.replace("<script>{", "")  # only escaped in markup and JSON
    assert "web&lt;script&gt;" in page
    assert "web\\u003cscript>" in page
    assert "http://" not in page
    assert "https://" not in page
    assert page.count('<svg class="timeline"') == 2  # the workload's CPU and memory over time
    assert page.count("<svg") == 4
    assert "500m" in page
    assert "0.5<" not in page


def test_unknown_output() -> None:
    with pytest.raises(ValueError, match="unknown output 'xml'"):
        report_output.render("xml", [], (), 0.0)


def test_rows_are_plain_values() -> None:
    row = ContainerRow("c", 0, Resources(), Resources(), None, None, None, None, None, None, None, None)
    assert (row.cpu_diff_millicores, row.memory_diff_bytes) == (None, None)


def _labelled(name: str, namespace: str = "ns", **labels: str) -> PodView:
    return PodView(namespace, name, labels=labels)


INDEX_PODS = [
    _labelled("web-1", app="web", tier="front"), _labelled("web-2", app="web"), _labelled("api-1", app="api"),
    _labelled("db-1", app="db", tier="back"), _labelled("other-ns", namespace="b", app="web"),
    _labelled("bare"),
]

INDEX_CASES = [
    ("app=web", ["web-1", "web-2"]),
    ("app in (web,api)", ["web-1", "web-2", "api-1"]),  # pod order, not term order
    ("app=web,tier=front", ["web-1"]),
    ("tier", ["web-1", "db-1"]),  # no pinned value: every pod of the namespace is a candidate
    ("app!=web", ["api-1", "db-1", "bare"]),
    ("app=nothing", []),
]


@pytest.mark.parametrize(("selector", "names"), INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_pod_index_matches_as_the_selector_does(selector: str, names: list[str]) -> None:
    parsed = Selector.parse(selector)
    got = [p.name for p in PodIndex(INDEX_PODS).matching("ns", parsed)]
    assert got == names
    assert got == [p.name for p in INDEX_PODS if p.namespace == "ns" and parsed.matches(p.labels)]
