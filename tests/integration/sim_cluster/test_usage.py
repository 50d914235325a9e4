"""Usage profiles over virtual hours: OOM kills from a memory leak and what metrics.k8s.io reports."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.integration.sim_cluster.helpers import container, create_pod, cstatus, deployment, pod, sim
from vpa.sim.cluster.profiles import ANNOTATION

MI = 2**20


async def pod_metrics(http: aiohttp.ClientSession, name: str) -> tuple[int, dict[str, Any]]:
    async with http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{name}") as resp:
        return resp.status, await resp.json(content_type=None)


def usage(body: dict[str, Any], name: str = "app") -> dict[str, str]:
    return next(c["usage"] for c in body["containers"] if c["name"] == name)


async def test_memory_leak_is_oom_killed_and_restarts_over_virtual_hours() -> None:
    async with sim("1.35") as (cluster, http):
        leak = {"app": {"memory": {"type": "leak", "start": "100Mi", "per_hour": "100Mi"}}}
        await create_pod(cluster, pod("leaky", annotations={ANNOTATION: json.dumps(leak)}))
        code, body = await pod_metrics(http, "leaky")
        assert code == 200
        assert usage(body)["memory"] == f"{100 * 1024}Ki"
        # Limit 512Mi: the leak crosses it after 4.12 h, and again 4.12 h after each restart.
        await cluster.advance(4 * 3600)
        assert cstatus(cluster.store.get("pods", "default", "leaky"))["restartCount"] == 0  # type: ignore[arg-type]
        await cluster.advance(6 * 3600)
        status = cstatus(cluster.store.get("pods", "default", "leaky"))  # type: ignore[arg-type]
        assert status["restartCount"] == 2
        terminated = status["lastState"]["terminated"]
        assert terminated["reason"] == "OOMKilled"
        assert terminated["exitCode"] == 137
        # Kills one second after usage == limit (4.12 h = 14832 s): 14833 s and 29666 s = 08:14:26.
        assert terminated["finishedAt"] == "2026-01-01T08:14:26Z"
        assert status["state"]["running"]["startedAt"] == terminated["finishedAt"]
        assert status["ready"] is True
        # The leak restarted with the container: 10 h − 8.24 h ≈ 1.76 h of leaking since.
        code, body = await pod_metrics(http, "leaky")
        used = int(usage(body)["memory"].removesuffix("Ki")) * 1024
        assert 270 * MI < used < 280 * MI


async def test_metrics_follow_daily_cycle_trend_and_cpu_limit() -> None:
    async with sim("1.35") as (cluster, http):
        profile = {
            "app": {
                "cpu": {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14},
                "memory": {"type": "trend", "start": "100Mi", "per_hour": "10Mi"},
            },
            "capped": {"cpu": {"type": "constant", "value": "3"}},
        }
        dep = deployment(
            "web",
            1,
            container(memory_limit=None),
            container("capped"),
            annotations={ANNOTATION: json.dumps(profile)},
        )
        await cluster.store.create("deployments.apps", dep)
        await cluster.settle()
        name = cluster.store.list("pods", "default")[0]["metadata"]["name"]
        await cluster.advance(14 * 3600)
        code, body = await pod_metrics(http, name)
        assert code == 200
        assert body["timestamp"] == "2026-01-01T14:00:00Z"
        assert body["window"] == "30s"
        assert usage(body)["cpu"] == "800m"  # peak at 14:00
        assert usage(body)["memory"] == f"{(100 + 140) * 1024}Ki"  # 14 h × 10Mi
        assert usage(body, "capped")["cpu"] == "1"  # 3 cores wanted, limit 1
        await cluster.advance(12 * 3600)
        code, body = await pod_metrics(http, name)
        assert usage(body)["cpu"] == "200m"  # trough at 02:00
        assert usage(body)["memory"] == f"{(100 + 260) * 1024}Ki"
        async with http.get("/apis/metrics.k8s.io/v1beta1/nodes/node-1") as resp:
            node = await resp.json()
        assert node["usage"]["cpu"] == "1200m"  # 200m + 1 (capped)
        async with http.get(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb"
        ) as resp:
            listed = await resp.json()
        assert [i["metadata"]["name"] for i in listed["items"]] == [name]


async def test_pending_pods_have_no_metrics_and_defaults_cover_the_rest() -> None:
    async with sim("1.35", cpu="1") as (cluster, http):
        await create_pod(cluster, pod("fits", container(cpu="400m", memory="200Mi")))
        await create_pod(cluster, pod("waits", container(cpu="2", cpu_limit="2")))
        code, body = await pod_metrics(http, "fits")
        assert code == 200
        # No profile: half of the requests.
        assert usage(body) == {"cpu": "200m", "memory": f"{100 * 1024}Ki"}
        code, _ = await pod_metrics(http, "waits")
        assert code == 404


async def test_repeated_oom_kills_back_off_like_crash_loop() -> None:
    async with sim("1.35") as (cluster, http):
        # 500Mi + 1Mi per second against a 512Mi limit: killed 13 s after every start.
        fast = {"app": {"memory": {"type": "leak", "start": "500Mi", "per_hour": "3600Mi"}}}
        await create_pod(cluster, pod("crashy", annotations={ANNOTATION: json.dumps(fast)}))
        await cluster.advance(30)
        status = cstatus(cluster.store.get("pods", "default", "crashy"))  # type: ignore[arg-type]
        # Kill at 13 s restarts at once; kill at 26 s waits 10 s.
        assert status["restartCount"] == 2
        assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert status["ready"] is False
        assert status["lastState"]["terminated"]["finishedAt"] == "2026-01-01T00:00:26Z"
        code, body = await pod_metrics(http, "crashy")
        assert code == 200
        assert body["containers"] == []
        await cluster.advance(
            100
        )  # restart at 36 s, kill at 49 s, back-off 20 s, restart 69 s, kill 82 s, 40 s
        status = cstatus(cluster.store.get("pods", "default", "crashy"))  # type: ignore[arg-type]
        assert status["restartCount"] == 4
        assert status["lastState"]["terminated"]["finishedAt"] == "2026-01-01T00:01:22Z"
        assert status["state"]["running"]["startedAt"] == "2026-01-01T00:02:02Z"


async def test_a_container_whose_kill_is_due_is_not_reported() -> None:
    # The node agent kills on a timer; a metrics read at an instant past that timer's due time, before the
    # timer has run, must not report the container (the kernel has killed it by then).
    async with sim("1.35") as (cluster, _):
        fast = {"app": {"memory": {"type": "leak", "start": "500Mi", "per_hour": "3600Mi"}}}
        await create_pod(cluster, pod("crashy", annotations={ANNOTATION: json.dumps(fast)}))
        assert cluster.behaviour is not None
        metrics = cluster.behaviour.metrics
        stored = cluster.store.get("pods", "default", "crashy")
        assert stored is not None
        kill = metrics.agent.runs[("default", "crashy")].oom_timers["app"]
        # Half a second before the kill: above the 512Mi limit, reported at the limit.
        before = metrics._usage(stored, kill.due - 0.5)
        assert before is not None
        assert [(name, mem) for name, _, mem in before] == [("app", 512 * MI)]
        assert metrics._usage(stored, kill.due + 0.5) == []  # the kill was due by then


async def test_usage_is_fixed_at_its_first_read_within_a_resolution_interval() -> None:
    # Like metrics-server serving its last scrape: a second client reading the same interval after the
    # container was OOM-killed again (and now waits out its restart backoff) sees what the first saw, so two
    # recommenders reading at different moments agree on every sample.
    async with sim("1.35") as (cluster, http):
        fast = {"app": {"memory": {"type": "leak", "start": "500Mi", "per_hour": "3600Mi"}}}
        await create_pod(cluster, pod("crashy", annotations={ANNOTATION: json.dumps(fast)}))
        await cluster.advance(15)  # killed once at 512Mi and restarted; the interval [15 s, 30 s) begins
        code, first = await pod_metrics(http, "crashy")
        assert code == 200
        assert [c["name"] for c in first["containers"]] == ["app"]
        await cluster.advance(12)  # killed again: waiting out its backoff, still inside the interval
        status = cstatus(cluster.store.get("pods", "default", "crashy"))  # type: ignore[arg-type]
        assert "waiting" in status["state"]
        code, again = await pod_metrics(http, "crashy")
        assert code == 200
        assert (again["containers"], again["timestamp"]) == (first["containers"], first["timestamp"])
        await cluster.advance(4)  # the next interval is read anew
        code, later = await pod_metrics(http, "crashy")
        assert later["timestamp"] != first["timestamp"]
        assert later["containers"] != first["containers"]


async def test_annotating_a_running_pods_usage_above_its_limit_oom_kills_it_from_then_on() -> None:
    # `kubectl annotate` on a running pod: the new profile is judged from the change on, so the kill comes
    # just after it (not at once with a time in the past, and not never).
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("grows", annotations={ANNOTATION: json.dumps(
            {"app": {"memory": {"type": "constant", "value": "100Mi"}}})}))  # fmt: skip
        await cluster.advance(600)
        changed_at = "2026-01-01T00:10:00Z"
        above = json.dumps({"app": {"memory": {"type": "constant", "value": "600Mi"}}})
        patch = {"metadata": {"annotations": {ANNOTATION: above}}}
        async with http.patch(
            "/api/v1/namespaces/default/pods/grows",
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:
            assert resp.status == 200
        await cluster.advance(10)
        status = cstatus(cluster.store.get("pods", "default", "grows"))  # type: ignore[arg-type]
        assert status["restartCount"] >= 1
        terminated = status["lastState"]["terminated"]
        assert terminated["reason"] == "OOMKilled"
        assert changed_at < terminated["finishedAt"] <= "2026-01-01T00:10:10Z"


async def test_a_growing_profile_is_killed_in_the_first_whole_second_above_its_limit() -> None:
    # 500Mi growing 1Mi a second crosses the 512Mi limit at 12 s: the kernel kills in the 13th second, not
    # at the next step of the kill search.
    async with sim("1.35") as (cluster, _):
        grows = {"app": {"memory": {"type": "trend", "start": "500Mi", "per_hour": "3600Mi"}}}
        await create_pod(cluster, pod("grows", annotations={ANNOTATION: json.dumps(grows)}))
        await cluster.advance(14)
        status = cstatus(cluster.store.get("pods", "default", "grows"))  # type: ignore[arg-type]
        assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
        assert status["lastState"]["terminated"]["finishedAt"] == "2026-01-01T00:00:13Z"
