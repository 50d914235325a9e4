"""The Grafana dashboard the chart ships: valid dashboard JSON whose every expression names metrics the
process really exports, and the ConfigMap the chart renders for Grafana's sidecar."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.chart.rendering import CHART, needs_helm, render
from vpa.app.runtime import Runtime
from vpa.components.health import LoopLagMonitor, render_metrics
from vpa.components.recommendation_metrics import RecommendationMetrics
from vpa.components.recommender import RecommenderMetrics
from vpa.components.recommender.history import PrometheusClientMetrics
from vpa.components.updater import UpdaterMetrics
from vpa.components.webhook.metrics import AdmissionMetrics
from vpa.flags.commands import parse_run_args
from vpa.kube.targets import Resolution
from vpa.model.pod import PodView
from vpa.model.vpa import TargetRef, VpaView

DASHBOARD = CHART / "dashboards" / "vpa.json"
# Scraped from the kubelet (cAdvisor), not exported by vpa: the usage the recommendations are compared with.
KUBELET_METRICS = frozenset({"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"})
PROMQL_WORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "histogram_quantile", "label_values",
    "topk", "bottomk", "abs", "clamp_min", "delta", "deriv",
})


class _NoVpas:
    def list(self) -> list[VpaView]:
        return []

    def get(self, namespace: str | None, name: str) -> VpaView | None:
        return None


class _NoPods:
    def list(self) -> list[PodView]:
        return []


class _NoResolver:
    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution:
        return Resolution(None, "none")

    def forget_unused(self) -> None:
        pass


def exported_names() -> set[str]:
    """Every sample name the process can expose: each metric family of the runtime and of every
    component, with the suffixes of its type."""
    registry: CollectorRegistry = Runtime(parse_run_args([], {})).registry
    RecommenderMetrics(registry)
    PrometheusClientMetrics(registry)
    UpdaterMetrics(registry)
    AdmissionMetrics(registry)
    LoopLagMonitor(registry)
    RecommendationMetrics(_NoVpas(), _NoPods(), _NoResolver(), registry, max_series=1)
    names: set[str] = set()
    for line in render_metrics(registry).decode().splitlines():
        if not line.startswith("# TYPE "):
            continue
        _, _, name, kind = line.split()
        names.add(name)
        if kind == "counter":
            names.update({f"{name}_total", f"{name}_created"})
        if kind == "histogram":
            names.update({f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"})
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (strings, label matchers, grouping labels, ranges,
    variables, functions and numbers removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        follows = text[match.end():].lstrip()[:1]
        if word in PROMQL_WORDS or follows == "(":
            continue
        names.add(word)
    return names


def _dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def _expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    out = [(panel["title"], target["expr"])
           for panel in dashboard["panels"] for target in panel.get("targets", [])]
    out += [(f"variable {v['name']}", v["query"]["query"]) for v in dashboard["templating"]["list"]
            if isinstance(v.get("query"), dict)]
    return out


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (reason) (increase(vpa_updater_failed_eviction_attempts_total{a="b(c)"}[$__rate_interval]))',
     {"vpa_updater_failed_eviction_attempts_total"}),
    ("a - on (namespace, vpa) b{x=~\"$y\"}", {"a", "b"}),
    ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))", {"h_bucket"}),
    ('label_values(vpa_recommendation_target{namespace=~"$namespace"}, vpa)',
     {"vpa_recommendation_target", "vpa"}),
])
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_expression_names_metrics_the_process_exports() -> None:
    exported = exported_names() | KUBELET_METRICS
    dashboard = _dashboard()
    expressions = _expressions(dashboard)
    assert len(expressions) > 20
    unknown = {}
    for title, expr in expressions:
        names = metric_names(expr)
        if title.startswith("variable "):
            names -= {"namespace", "vpa", "container"}  # label_values' label argument
        assert names, f"{title}: no metric in {expr!r}"
        missing = names - exported
        if missing:
            unknown[title] = sorted(missing)
    assert unknown == {}


def test_the_dashboard_shows_recommendations_actions_and_health() -> None:
    dashboard = _dashboard()
    used = set().union(*(metric_names(expr) for _, expr in _expressions(dashboard)))
    assert {"vpa_recommendation_target", "vpa_recommendation_lower_bound", "vpa_recommendation_upper_bound",
            "vpa_container_requests"} <= used
    assert used >= KUBELET_METRICS  # usage
    assert {"vpa_updater_in_place_updated_pods_total", "vpa_updater_evicted_pods_total",
            "vpa_updater_failed_eviction_attempts_total", "vpa_updater_failed_in_place_update_attempts_total",
            "vpa_updater_in_place_infeasible_skip_pods_total"} <= used  # actions and skips
    assert {"vpa_recommender_execution_latency_seconds_bucket",
            "vpa_updater_execution_latency_seconds_bucket", "vpa_event_loop_lag_seconds_bucket",
            "leader_election_master_status"} <= used  # the loops
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"id", "type", "title", "gridPos"} <= set(panel)
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            refs = [t["refId"] for t in panel["targets"]]
            assert refs == [chr(65 + i) for i in range(len(refs))]
    assert dashboard["uid"]
    assert dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)


def test_no_urls_in_the_dashboard() -> None:
    assert "http" not in DASHBOARD.read_text()


@needs_helm
def test_the_chart_renders_the_dashboard_configmap_only_when_enabled(tmp_path: Path) -> None:
    assert not [o for o in render({}, tmp_path).objects if o["kind"] == "ConfigMap"]
    dashboard_values = {"enabled": True, "annotations": {"grafana_folder": "VPA"}, "namespace": "monitoring"}
    rendered = render({"metrics": {"grafanaDashboard": dashboard_values}}, tmp_path)
    [configmap] = [o for o in rendered.objects if o["kind"] == "ConfigMap"]
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "VPA"}
    assert json.loads(configmap["data"]["vpa.json"]) == _dashboard()
