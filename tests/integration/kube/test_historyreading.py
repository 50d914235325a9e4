"""`PrometheusHistoryReader` against a fake Prometheus HTTP API on 127.0.0.1: the exact queries and
parameters, auth, label mapping, time order, retries and failures."""

from __future__ import annotations

import base64
import dataclasses
import time
from typing import Any

import pytest

from tests.integration.prometheus_fake import FakePrometheus, Series, serve
from vpa.kube.certificates import SelfManagedPolicy, make_bundle, server_context
from vpa.kube.historyreading import (
    ContainerHistory,
    PrometheusError,
    PrometheusHistoryReader,
    format_api_float,
    history_queries,
)
from vpa.model.settings import PrometheusSettings

NOW = 1_700_000_000.0
CPU_QUERY = ('rate(container_cpu_usage_seconds_total{job="kubernetes-cadvisor", pod_name=~".+", '
             'name!="POD", name!=""}[1h])')
MEMORY_QUERY = ('container_memory_working_set_bytes{job="kubernetes-cadvisor", pod_name=~".+", name!="POD", '
                'name!=""}')
LABELS_QUERY = 'up{job="kubernetes-pods"}'


def ctr(namespace: str, pod: str, name: str, **extra: str) -> dict[str, str]:
    return {"namespace": namespace, "pod_name": pod, "name": name, "job": "kubernetes-cadvisor", **extra}


def pod_labels(namespace: str, pod: str, **labels: str) -> dict[str, str]:
    return {"kubernetes_namespace": namespace, "kubernetes_pod_name": pod, "job": "kubernetes-pods",
            **{f"pod_label_{k}": v for k, v in labels.items()}}


def fake_with(cpu: list[Series], memory: list[Series], labels: list[Series]) -> FakePrometheus:
    return FakePrometheus(range_series={CPU_QUERY: cpu, MEMORY_QUERY: memory},
                          instant_series={LABELS_QUERY: labels})


def reader(fake: FakePrometheus, **overrides: Any) -> PrometheusHistoryReader:
    options = {k: overrides.pop(k) for k in ("namespace", "max_attempts") if k in overrides}
    settings = dataclasses.replace(PrometheusSettings(address=fake.url), **overrides)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    r = PrometheusHistoryReader(settings, sleep=sleep, **options)
    r.sleeps = sleeps  # type: ignore[attr-defined]
    return r


def test_queries_follow_upstream_and_the_flags() -> None:
    queries = history_queries(PrometheusSettings())
    assert (queries.cpu, queries.memory, queries.labels) == (CPU_QUERY, MEMORY_QUERY, LABELS_QUERY)
    custom = PrometheusSettings(
        cadvisor_job_name="", history_resolution_s=300.0, history_cpu_metric="cpu_total",
        history_memory_metric="mem_ws", container_namespace_label="ns", container_pod_name_label="pod",
        container_name_label="container", metric_for_pod_labels="kube_pod_labels[1d]")
    queries = history_queries(custom, namespace="team-a")
    selector = 'pod=~".+", container!="POD", container!="", ns="team-a"'
    assert queries.cpu == f"rate(cpu_total{{{selector}}}[5m])"
    assert queries.memory == f"mem_ws{{{selector}}}"
    assert queries.labels == "kube_pod_labels[1d]"


@pytest.mark.parametrize(("value", "text"), [(NOW, "1700000000"), (NOW + 0.25, "1700000000.25"),
                                             (3600.0, "3600"), (0.0, "0")], ids=["whole", "fraction",
                                                                                 "step", "zero"])
def test_times_are_written_as_the_go_client_writes_them(value: float, text: str) -> None:
    assert format_api_float(value) == text


async def test_history_is_read_with_exact_parameters_and_mapped_by_labels() -> None:
    fake = fake_with(
        cpu=[Series(ctr("default", "web-1", "app"), lambda t: 0.5),
             Series(ctr("default", "web-1", "sidecar"), lambda t: 0.01),
             Series({"pod_name": "nameless", "name": "app"}, lambda t: 1.0)],  # no namespace label: skipped
        memory=[Series(ctr("default", "web-1", "app"), lambda t: 2.0**30)],
        labels=[Series(pod_labels("default", "web-1", app="web", tier="front"), lambda t: 1.0),
                Series(pod_labels("other", "gone", app="old"), lambda t: 1.0)])
    async with serve(fake):
        history = await reader(fake, history_length_s=6 * 3600.0, bearer_token="s3cret").read(NOW)

    range_requests = [r for r in fake.requests if r.path == "/api/v1/query_range"]
    assert [(r.method, r.params) for r in range_requests] == [
        ("POST", {"query": CPU_QUERY, "start": "1699978400", "end": "1700000000", "step": "3600"}),
        ("POST", {"query": MEMORY_QUERY, "start": "1699978400", "end": "1700000000", "step": "3600"}),
    ]
    [labels_request] = [r for r in fake.requests if r.path == "/api/v1/query"]
    assert (labels_request.method, labels_request.params) == ("POST", {"query": LABELS_QUERY,
                                                                       "time": "1700000000"})
    assert {r.authorization for r in fake.requests} == {"Bearer s3cret"}

    assert set(history.pods) == {("default", "web-1"), ("other", "gone")}
    assert history.series_skipped == 1
    assert history.labels_error is None
    web = history.pods[("default", "web-1")]
    assert web.labels == {"app": "web", "tier": "front"}
    assert web.labels_seen_s == NOW
    times = [NOW - 6 * 3600 + i * 3600 for i in range(7)]
    assert web.containers["app"] == ContainerHistory(cpu_cores=[(t, 0.5) for t in times],
                                                     memory_bytes=[(t, 2.0**30) for t in times])
    assert web.containers["sidecar"].memory_bytes == []
    assert history.pods[("other", "gone")].labels == {"app": "old"}
    assert history.pods[("other", "gone")].containers == {}
    assert history.sample_count() == 3 * 7


async def test_basic_auth_and_a_matrix_labels_result() -> None:
    fake = fake_with(cpu=[], memory=[], labels=[Series(pod_labels("default", "p", app="x"), lambda t: 1.0)])
    fake.instant_as_matrix = True
    async with serve(fake):
        history = await reader(fake, username="alice", password="pw").read(NOW)
    expected = "Basic " + base64.b64encode(b"alice:pw").decode()
    assert {r.authorization for r in fake.requests} == {expected}
    assert history.pods[("default", "p")].labels == {"app": "x"}
    assert history.pods[("default", "p")].labels_seen_s == NOW  # the matrix's last point


async def test_the_token_file_wins_over_the_token_flag(tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  from-file\n")
    fake = fake_with(cpu=[], memory=[], labels=[])
    async with serve(fake):
        await reader(fake, bearer_token="from-flag", bearer_token_file=str(token_file)).read(NOW)
    assert {r.authorization for r in fake.requests} == {"Bearer from-file"}


async def test_server_errors_are_retried_with_backoff_then_succeed() -> None:
    fake = fake_with(cpu=[Series(ctr("default", "p", "app"), lambda t: 0.5)], memory=[], labels=[])
    fake.failures["/api/v1/query_range"] = [503, 500]
    observed: list[tuple[str, str]] = []
    async with serve(fake):
        r = reader(fake)
        history = await r.read(NOW, on_request=lambda code, method, seconds: observed.append((code, method)))
    assert r.sleeps == [1.0, 2.0]  # type: ignore[attr-defined]
    assert observed == [("503", "post"), ("500", "post"), ("200", "post"), ("200", "post"), ("200", "post")]
    assert len(history.pods[("default", "p")].containers["app"].cpu_cores) == 8 * 24 + 1


async def test_a_405_falls_back_to_get() -> None:
    fake = fake_with(cpu=[Series(ctr("default", "p", "app"), lambda t: 0.5)], memory=[], labels=[])
    fake.refuse_post = True
    async with serve(fake):
        history = await reader(fake).read(NOW)
    assert [r.method for r in fake.requests] == ["POST", "GET", "POST", "GET", "POST", "GET"]
    assert fake.requests[1].params["query"] == CPU_QUERY
    assert ("default", "p") in history.pods


async def test_a_bad_query_fails_at_once() -> None:
    fake = FakePrometheus()  # knows no query: 400 bad_data
    async with serve(fake):
        r = reader(fake)
        with pytest.raises(PrometheusError) as caught:
            await r.read(NOW)
    assert caught.value.reason == "http"
    assert "HTTP 400" in str(caught.value)
    assert "bad_data" in str(caught.value)
    assert len(fake.requests) == 1
    assert r.sleeps == []  # type: ignore[attr-defined]


async def test_a_failed_labels_query_keeps_the_samples() -> None:
    fake = FakePrometheus(range_series={CPU_QUERY: [Series(ctr("default", "p", "app"), lambda t: 0.5)],
                                        MEMORY_QUERY: []})
    async with serve(fake):
        history = await reader(fake).read(NOW)
    assert history.labels_error is not None
    assert "unexpected instant query" in history.labels_error
    assert history.pods[("default", "p")].labels == {}
    assert len(history.pods[("default", "p")].containers["app"].cpu_cores) == 193


async def test_unreachable_prometheus_raises_after_the_retries() -> None:
    fake = FakePrometheus()
    async with serve(fake):
        address = fake.url  # the port is closed once the server stops
    r = reader(fake, address=address, max_attempts=3)
    with pytest.raises(PrometheusError) as caught:
        await r.read(NOW)
    assert caught.value.reason == "unreachable"
    assert r.sleeps == [1.0, 2.0]  # type: ignore[attr-defined]


async def test_an_unreadable_token_file_is_a_config_error(tmp_path: Any) -> None:
    r = PrometheusHistoryReader(PrometheusSettings(address="http://127.0.0.1:1",
                                                   bearer_token_file=str(tmp_path / "missing")))
    with pytest.raises(PrometheusError) as caught:
        await r.read(NOW)
    assert caught.value.reason == "config"


async def test_https_with_an_untrusted_certificate_needs_prometheus_insecure() -> None:
    bundle = make_bundle(["prometheus.monitoring.svc"], time.time(), SelfManagedPolicy())  # valid, untrusted
    fake = fake_with(cpu=[Series(ctr("default", "p", "app"), lambda t: 0.5)], memory=[], labels=[])
    async with serve(fake, server_context(bundle.cert_pem, bundle.key_pem)):
        assert fake.url.startswith("https://")
        verifying = reader(fake)
        with pytest.raises(PrometheusError) as caught:
            await verifying.read(NOW)
        assert caught.value.reason == "tls"
        assert verifying.sleeps == []  # type: ignore[attr-defined]
        assert fake.requests == []
        history = await reader(fake, insecure=True).read(NOW)
    assert ("default", "p") in history.pods
