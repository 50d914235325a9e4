"""`vpa report` against a simulated cluster over HTTPS: workloads, VPAs with statuses, updater events.

The command runs as a user runs it (`vpa report --kubeconfig=...`), in a thread, while the simulated
cluster serves from the test's event loop. The HTML page is also rendered in headless Chromium and the
DOM it builds is checked (skipped, with one line, when Chromium is not installed).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.components.recommender_helpers import VPAS, deployment, vpa
from tests.integration.components.test_recommender import STEADY
from vpa import cli
from vpa.kube.converting import format_time
from vpa.sim import SimCluster

MI = 2**20


def _recommendation(cpu: str, memory: str) -> dict[str, Any]:
    return {"containerName": "app", "target": {"cpu": cpu, "memory": memory},
            "lowerBound": {"cpu": "100m", "memory": "64Mi"}, "upperBound": {"cpu": "2", "memory": "1Gi"},
            "uncappedTarget": {"cpu": cpu, "memory": memory}}


def _event(namespace: str, name: str, kind: str, involved: str, reason: str, message: str,
           at: float) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": kind, "name": involved, "namespace": namespace},
            "reason": reason, "message": message, "type": "Normal",
            "firstTimestamp": format_time(at), "lastTimestamp": format_time(at)}


async def _cluster_with_vpas(cluster: SimCluster) -> None:
    """shop/web: 2 replicas requesting 500m/256Mi, target 200m/128Mi, an eviction event on the VPA and a
    later in-place resize on one pod; default/api: 1 replica, target above the requests (300m under)."""
    store = cluster.store
    await store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    await store.create("deployments.apps", deployment("web", STEADY, replicas=2, namespace="shop"))
    await store.create("deployments.apps", deployment("api", STEADY))
    for namespace, name in (("shop", "web"), ("default", "api")):
        await store.create(VPAS, vpa(name, namespace=namespace))
    await cluster.settle()
    statuses = {
        ("shop", "web"): _recommendation("200m", "128Mi"),
        ("default", "api"): _recommendation("800m", "256Mi"),
    }
    for (namespace, name), recommendation in statuses.items():
        await store.patch(VPAS, namespace, name, "merge", {"status": {
            "recommendation": {"containerRecommendations": [recommendation]},
            "conditions": [{"type": "RecommendationProvided", "status": "True",
                            "lastTransitionTime": format_time(cluster.clock.now())}],
        }}, subresource="status")
    web_pod = next(p for p in store.list("pods") if p["metadata"]["namespace"] == "shop")
    now = cluster.clock.now()
    await store.create("events", _event("shop", "e1", "VerticalPodAutoscaler", "web", "EvictedPod",
                                        "VPA Updater evicted Pod web-old to apply resource recommendation.",
                                        now - 600))
    await store.create("events", _event("shop", "e2", "Pod", web_pod["metadata"]["name"],
                                        "InPlaceResizedByVPA", "Pod was resized in place by VPA Updater.",
                                        now - 60))
    await store.create("events", _event("default", "e3", "Pod", "somebody-else", "EvictedByVPA",
                                        "not about a pod of the api VPA", now))


async def _report(cluster: SimCluster, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(
        cli.main, ["report", f"--kubeconfig={cluster.kubeconfig_path}", *args], {}, stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


async def test_report_json_csv_and_table_from_a_simulated_cluster() -> None:
    async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        await _cluster_with_vpas(cluster)

        code, out, err = await _report(cluster, "--output=json")
        assert (code, err) == (0, "")
        document = json.loads(out)
        by_name = {v["name"]: v for v in document["vpas"]}
        web = by_name["web"]
        assert (web["namespace"], web["workload"], web["mode"]) == ("shop", "Deployment/web", "Off")
        [row] = web["containers"]
        assert row["pods"] == 2
        assert row["requests"]["quantities"] == {"cpu": "500m", "memory": "256Mi"}
        assert row["limits"]["quantities"] == {"cpu": "4", "memory": "4Gi"}
        assert row["target"]["quantities"] == {"cpu": "200m", "memory": "128Mi"}
        assert row["upperBound"]["quantities"] == {"cpu": "2", "memory": "1Gi"}
        assert row["cpuDiffMillicores"] == 2 * 300
        assert row["memoryDiffBytes"] == 2 * 128 * MI
        assert [c["type"] for c in web["conditions"]] == ["RecommendationProvided"]
        assert web["lastAction"]["reason"] == "InPlaceResizedByVPA"  # newer than the eviction
        assert web["lastAction"]["message"] == "Pod was resized in place by VPA Updater."
        api = by_name["api"]
        assert api["containers"][0]["cpuDiffMillicores"] == -300
        assert api["lastAction"] is None  # the event is about a pod that is not the VPA's
        totals = {t["namespace"]: t for t in document["namespaces"]}
        assert totals["shop"]["cpuDiffMillicores"] == 600
        assert totals["shop"]["memoryRequestsBytes"] == 512 * MI
        assert totals["default"]["cpuDiffMillicores"] == -300

        code, out, err = await _report(cluster, "--output=csv", "--namespace=shop")
        assert (code, err) == (0, "")
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [(r["namespace"], r["vpa"], r["container"]) for r in rows] == [("shop", "web", "app")]
        assert (rows[0]["cpu_request_cores"], rows[0]["cpu_target_cores"], rows[0]["cpu_diff_cores"]) == (
            "0.5", "0.2", "0.6")
        assert rows[0]["memory_diff_bytes"] == str(256 * MI)
        assert rows[0]["last_action"] == "InPlaceResizedByVPA"

        code, out, err = await _report(cluster)
        assert (code, err) == (0, "")
        assert "Deployment/web" in out
        assert "+600m" in out
        assert "+256Mi" in out
        assert "Savings per namespace" in out
        assert "last action: InPlaceResizedByVPA Pod/web-" in out

        # A VPA whose target does not exist: listed, without pods, with the recommender's reason.
        await cluster.store.create(VPAS, vpa("ghost", namespace="shop"))
        code, out, err = await _report(cluster, "--output=json", "--namespace=shop")
        assert (code, err) == (0, "")
        ghost = next(v for v in json.loads(out)["vpas"] if v["name"] == "ghost")
        assert ghost["containers"] == []
        assert ghost["targetProblem"].startswith("Cannot read targetRef")


async def test_report_usage_and_configuration_errors_are_one_line(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["report", "--output=xml"], {}, stdout=out, stderr=err) == 2
    assert err.getvalue().startswith("vpa report: invalid value \"xml\" for flag --output")
    assert err.getvalue().count("\n") == 1
    err = io.StringIO()
    missing = tmp_path / "nope.yaml"
    assert cli.main(["report", f"--kubeconfig={missing}"], {}, stdout=out, stderr=err) == 2
    assert err.getvalue() == f"vpa report: kubeconfig {missing} (--kubeconfig): no such file\n"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


async def test_report_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    page = tmp_path / "report.html"
    async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        await _cluster_with_vpas(cluster)
        code, out, err = await _report(cluster, "--output=html", f"--output-file={page}")
        assert (code, out, err) == (0, "", "")
    html = page.read_text()
    assert "http://" not in html
    assert "https://" not in html
    assert "src=" not in html
    result = await asyncio.to_thread(
        subprocess.run,
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    from html.parser import HTMLParser

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.elements: list[tuple[str, dict[str, str]]] = []
            self.text: dict[str, str] = {}
            self._open: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            values = {k: v or "" for k, v in attrs}
            self.elements.append((tag, values))
            self._open = values.get("id")

        def handle_data(self, data: str) -> None:
            if self._open:
                self.text[self._open] = self.text.get(self._open, "") + data

    parsed = Collect()
    parsed.feed(dom)
    # The page's script ran in the browser and filled the summary from the embedded data.
    assert parsed.text.get("summary") == "2 VPAs, 2 containers, 2 namespaces"
    rows = [a for tag, a in parsed.elements if tag == "tr" and "vpa-row" in a.get("class", "")]
    assert {(r["data-namespace"], r["data-vpa"], r["data-container"]) for r in rows} == {
        ("shop", "web", "app"), ("default", "api", "app")}
    namespaces = [a["data-namespace"] for tag, a in parsed.elements
                  if tag == "tr" and "namespace-row" in a.get("class", "")]
    assert namespaces == ["default", "shop"]
    bars = {(a["data-chart"], a["data-label"], a["class"]): int(a["data-value"])
            for tag, a in parsed.elements if tag == "rect" and "bar" in a.get("class", "")}
    assert bars == {
        ("chart-cpu", "shop", "bar requested"): 1000, ("chart-cpu", "shop", "bar recommended"): 400,
        ("chart-cpu", "default", "bar requested"): 500, ("chart-cpu", "default", "bar recommended"): 800,
        ("chart-memory", "shop", "bar requested"): 512 * MI,
        ("chart-memory", "shop", "bar recommended"): 256 * MI,
        ("chart-memory", "default", "bar requested"): 256 * MI,
        ("chart-memory", "default", "bar recommended"): 256 * MI,
    }
    widths = {(a["data-chart"], a["data-label"], a["class"]): int(a["width"])
              for tag, a in parsed.elements if tag == "rect" and "bar" in a.get("class", "")}
    assert widths[("chart-cpu", "shop", "bar requested")] > widths[("chart-cpu", "default", "bar requested")]


def test_report_outside_a_cluster_without_kubeconfig_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["report"], {}, stdout=out, stderr=err) == 2
    assert err.getvalue().startswith(
        "vpa report: no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, and the in-cluster")
    assert err.getvalue().count("\n") == 1
