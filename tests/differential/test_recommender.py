"""Upstream's recommender and ours at once on one `vpa sim` cluster, judged equal value by value.

Every workload has two VPAs over the same pods: `<name>-up` served by upstream's recommender
(`--recommender-name=upstream`) and `<name>-py` by ours (`--recommender-name=pyrec`). The sim's clock stands
still and moves one metrics window at a time; after each step the test waits until both recommenders
finished a loop that began after it, so both read exactly the same samples. Then every target,
lowerBound, upperBound and uncappedTarget must be identical, the checkpoints too; then both restart from
their checkpoints and the comparison is repeated.

Cases, cycled over the workloads: several containers, OOM kills (a leaking container over its limit),
minAllowed/maxAllowed, controlledValues with controlledResources, a container with mode Off, a `*` policy,
spiky CPU; VPAs naming a third recommender stay untouched by both.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.differential.harness import REPO, Cluster, Proc, eventually, needs_upstream, run_isolated, sim

pytestmark = [pytest.mark.differential, needs_upstream, pytest.mark.timeout(900)]

WORKLOADS = int(os.environ.get("VPA_DIFFERENTIAL_WORKLOADS", "500"))
# With VPA_DIFFERENTIAL_CONTROL_PLANE_BIN (a folder with kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd) the cluster is `vpa sim --control-plane=kubernetes`: real time, so rather than move
# the clock each step waits for the next metrics window; both recommenders loop every few seconds and so
# read every window.
REAL_BIN = os.environ.get("VPA_DIFFERENTIAL_CONTROL_PLANE_BIN", "")
WINDOW_S = 60 if REAL_BIN else 30  # --metrics-resolution; one step is one window
NS = "default"
VPAS = f"/apis/autoscaling.k8s.io/v1/namespaces/{NS}/verticalpodautoscalers"
CHECKPOINTS = f"/apis/autoscaling.k8s.io/v1/namespaces/{NS}/verticalpodautoscalercheckpoints"
ADDRESSES = {"upstream": "127.0.0.1:18942", "pyrec": "127.0.0.1:18943"}
# The same loop period and API rate for both, so neither waits on a client-side rate limit.
REPORT = REPO / ".run" / "differential" / "recommender.txt"
COMMON = ["--recommender-interval=5s", "--kube-api-qps=500", "--kube-api-burst=1000"]


def _usage(variant: int, i: int) -> dict[str, Any]:
    noise = {"noise": 0.2, "seed": i}
    app: dict[str, Any] = {
        "cpu": {"type": "constant", "value": f"{100 + 37 * (i % 11)}m", **noise},
        "memory": {"type": "constant", "value": f"{80 + 13 * (i % 7)}Mi", **noise},
    }
    if variant == 2:  # leaks past its 160Mi limit within a couple of windows: OOM kill, restart, again
        app["memory"] = {"type": "leak", "start": "100Mi", "per_hour": "4000Mi"}
    if variant == 7:
        app["cpu"] = {"type": "spikes", "base": "100m", "height": "900m", "period_s": 90, "duration_s": 30}
    usage = {
        "app": app,
        "sidecar": {
            "cpu": {"type": "constant", "value": "20m"},
            "memory": {"type": "constant", "value": "30Mi"},
        },
    }
    if variant == 1:
        usage["logger"] = {"cpu": {"type": "daily", "base": "50m", "amplitude": "30m", "peak_hour": 3}}
    return usage


def _deployment(name: str, variant: int, i: int) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [
        {"name": "app", "image": "app", "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}},
        {"name": "sidecar", "image": "side", "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}},
    ]
    if variant == 1:
        containers.append({"name": "logger", "image": "log", "resources": {"requests": {"cpu": "50m"}}})
    if variant == 2:
        containers[0]["resources"]["limits"] = {"memory": "160Mi"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sim.vpa.dev/usage": json.dumps(_usage(variant, i))},
                },
                "spec": {"containers": containers},
            },
        },
    }


def _policy(variant: int) -> dict[str, Any] | None:
    if variant == 3:
        return {
            "containerPolicies": [
                {"containerName": "app", "minAllowed": {"cpu": "500m"}, "maxAllowed": {"memory": "64Mi"}}
            ]
        }
    if variant == 4:
        return {
            "containerPolicies": [
                {"containerName": "*", "controlledValues": "RequestsOnly", "controlledResources": ["cpu"]}
            ]
        }
    if variant == 5:
        return {"containerPolicies": [{"containerName": "sidecar", "mode": "Off"}]}
    if variant == 6:
        return {"containerPolicies": [{"containerName": "*", "minAllowed": {"memory": "300Mi"}}]}
    return None


def _vpa(name: str, workload: str, recommender: str, variant: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
        "updatePolicy": {"updateMode": "Off"},
        "recommenders": [{"name": recommender}],
    }
    policy = _policy(variant)
    if policy:
        spec["resourcePolicy"] = policy
    meta = {"name": name, "namespace": NS}
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": meta,
        "spec": spec,
    }


async def _create(cluster: Cluster, n: int) -> None:
    sem = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        name, variant = f"w{i:04d}", i % 8
        async with sem:
            await cluster.request(
                "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", _deployment(name, variant, i)
            )
            await cluster.request("POST", VPAS, _vpa(f"{name}-up", name, "upstream", variant))
            await cluster.request("POST", VPAS, _vpa(f"{name}-py", name, "pyrec", variant))
            if i % 50 == 0:  # served by neither
                await cluster.request("POST", VPAS, _vpa(f"{name}-other", name, "someone-else", variant))

    await asyncio.gather(*(one(i) for i in range(n)))


_TOTAL = re.compile(r'^vpa_recommender_execution_latency_seconds_count\{step="total"\} (\S+)$', re.M)


async def _loops(session: aiohttp.ClientSession, who: str) -> int:
    try:
        async with session.get(f"http://{ADDRESSES[who]}/metrics") as r:
            m = _TOTAL.search(await r.text())
    except aiohttp.ClientError:
        return -1
    return int(float(m.group(1))) if m else 0


async def _both_looped(cluster: Cluster, session: aiohttp.ClientSession) -> None:
    """Wait until each recommender finished a whole loop that began after this call."""
    start = {who: await _loops(session, who) for who in ADDRESSES}

    async def done() -> bool:
        counts = {who: await _loops(session, who) for who in ADDRESSES}
        return all(counts[who] >= start[who] + 2 for who in ADDRESSES)

    await eventually(done, 240, "a loop of each recommender", cluster)


async def _start_recommenders(cluster: Cluster) -> list[Proc]:
    up = await cluster.upstream(
        "recommender", "--recommender-name=upstream", f"--address={ADDRESSES['upstream']}", *COMMON
    )
    ours = await cluster.ours(
        "--components=recommender", "--recommender-name=pyrec", f"--address={ADDRESSES['pyrec']}", *COMMON
    )
    return [up, ours]


def _recommendations(items: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    out = {}
    for v in items:
        name = v["metadata"]["name"]
        if name.endswith(suffix):
            recs = v.get("status", {}).get("recommendation", {}).get("containerRecommendations")
            out[name.removesuffix(suffix)] = sorted(recs or [], key=lambda c: c["containerName"])
    return out


def _differences(up: dict[str, Any], py: dict[str, Any]) -> list[tuple[int, str, str, str]]:
    """(variant, container, field, resource) of every value that differs, one entry per workload."""
    out = []
    for w in sorted(up):
        a = {c["containerName"]: c for c in up[w]}
        b = {c["containerName"]: c for c in py[w]}
        for container in sorted(a.keys() | b.keys()):
            ca, cb = a.get(container, {}), b.get(container, {})
            for key in ("target", "lowerBound", "upperBound", "uncappedTarget"):
                for res in sorted(set(ca.get(key, {})) | set(cb.get(key, {}))):
                    if ca.get(key, {}).get(res) != cb.get(key, {}).get(res):
                        out.append((int(w[1:]) % 8, container, key, res))
    return out


async def _compare(cluster: Cluster, label: str) -> tuple[dict[str, int], list[tuple[int, str, str, str]]]:
    """Counts, and the values that differ (the detail of the first few goes to stdout)."""
    items = (await cluster.request("GET", VPAS))["items"]
    up, py = _recommendations(items, "-up"), _recommendations(items, "-py")
    others = _recommendations(items, "-other")
    assert not any(others.values()), f"{label}: a VPA naming another recommender got a recommendation"
    assert up.keys() == py.keys()
    for w in [w for w in sorted(up) if up[w] != py[w]][:5]:
        print(f"{label}: {w}: upstream {up[w]}\n    ours {py[w]}")
    served = sum(1 for w in up if up[w])
    values = sum(len(c[k]) for recs in up.values() for c in recs for k in c if k != "containerName")
    return {"workloads": len(up), "recommended": served, "values": values}, _differences(up, py)


def _strip_checkpoint(c: dict[str, Any]) -> dict[str, Any]:
    status = dict(c.get("status", {}))
    status.pop("lastUpdateTime", None)
    return {"container": c["spec"]["containerName"], "status": status}


async def _compare_checkpoints(cluster: Cluster) -> int:
    items = (await cluster.request("GET", CHECKPOINTS))["items"]
    by_vpa: dict[str, dict[str, Any]] = {}
    for c in items:
        by_vpa.setdefault(c["spec"]["vpaObjectName"], {})[c["spec"]["containerName"]] = _strip_checkpoint(c)
    pairs = 0
    diffs = []
    for name, containers in by_vpa.items():
        if name.endswith("-up"):
            ours = by_vpa.get(name.removesuffix("-up") + "-py", {})
            for container, cp in containers.items():
                pairs += 1
                if ours.get(container) != cp:
                    diffs.append(f"{name}/{container}: upstream {cp} ours {ours.get(container)}")
    assert not diffs, f"{len(diffs)} of {pairs} checkpoints differ:\n" + "\n".join(diffs[:10])
    return pairs


async def _window(cluster: Cluster) -> str:
    """The current metrics window: the timestamp of the first PodMetrics."""
    path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"
    items = (await cluster.request("GET", path))["items"]
    return str(min(i["timestamp"] for i in items)) if items else ""


async def _step(cluster: Cluster, session: aiohttp.ClientSession, steps: int) -> None:
    for _ in range(steps):
        if REAL_BIN:
            before = await _window(cluster)

            async def moved(before: str = before) -> bool:
                return await _window(cluster) != before

            await eventually(moved, WINDOW_S * 2, "the next metrics window", cluster)
        else:
            await cluster.request("POST", "/sim/v1/clock/advance", {"seconds": WINDOW_S})
        await _both_looped(cluster, session)


async def test_recommendations_equal_upstream_including_after_a_restart_from_checkpoints(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if not run_isolated(request):
        return
    nodes = str(max(3, WORKLOADS // 100 + 1))
    flags = ["--nodes", nodes, "--node-cpu", "128", "--node-memory", "512Gi"]
    flags += ["--metrics-resolution", str(WINDOW_S)]
    if REAL_BIN:
        flags += ["--control-plane=kubernetes", f"--control-plane-bin={REAL_BIN}"]
    else:
        flags += ["--time-scale", "0"]  # the clock moves only when the test moves it
    started = time.monotonic()
    async with sim(tmp_path / "run", *flags) as cluster, aiohttp.ClientSession() as session:
        await _create(cluster, WORKLOADS)

        async def running() -> bool:
            pods = (await cluster.request("GET", f"/api/v1/namespaces/{NS}/pods"))["items"]
            return sum(1 for p in pods if p.get("status", {}).get("phase") == "Running") >= WORKLOADS

        await eventually(running, 120, "every pod running", cluster)
        procs = await _start_recommenders(cluster)
        await _both_looped(cluster, session)
        await _step(cluster, session, 2 if REAL_BIN else 5)
        first, diffs = await _compare(cluster, "before the restart")
        if diffs and REAL_BIN:  # on real time a window may have begun between the last loops and the read
            await _both_looped(cluster, session)
            first, diffs = await _compare(cluster, "before the restart, again")
        assert not diffs, f"before the restart, {len(diffs)} values differ: {sorted(set(diffs))}"
        assert first["recommended"] == WORKLOADS, first
        oom = await cluster.request("GET", f"/api/v1/namespaces/{NS}/pods")
        restarts = sum(
            s.get("restartCount", 0)
            for p in oom["items"]
            for s in p.get("status", {}).get("containerStatuses", [])
        )
        assert restarts > 0, "no OOM kill happened: the OOM case was not exercised"

        # Both write their checkpoints while the clock stands; then both restart from them.
        await _both_looped(cluster, session)
        checkpoints = await _compare_checkpoints(cluster)
        for p in procs:
            await p.stop()
            cluster.procs.remove(p)
        procs = await _start_recommenders(cluster)
        await _both_looped(cluster, session)
        await _step(cluster, session, 1 if REAL_BIN else 3)
        second, after = await _compare(cluster, "after the restart from checkpoints")
        kinds = collections.Counter(after)
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(
            f"before the restart: {first}, all equal; checkpoints: {checkpoints} pairs equal\n"
            f"after the restart: {second}; values that differ by (variant, container, field, resource):\n"
            + "\n".join(f"  {k}: {n}" for k, n in sorted(kinds.items()))
            + "\n"
        )
        # docs/deviations.md ("In-progress memory peaks across restarts"): ours keeps the memory peak of the
        # interval in progress across a restart, upstream's checkpoint leaves it out; so after the restart
        # only memory values differ, CPU stays identical. A new kind of difference fails, and so does the
        # listed one disappearing (then the entry is out of date).
        assert all(res == "memory" for *_, res in after), (
            f"after the restart, not only memory differs: {kinds}"
        )
        assert after, "after the restart every value is equal: remove the deviation from docs/deviations.md"
        print(
            f"recommender differential: {first} before, {second} after a restart; "
            f"{checkpoints} checkpoint pairs equal; OOM restarts {restarts}; "
            f"{time.monotonic() - started:.0f} s"
        )
