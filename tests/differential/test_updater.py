"""Upstream's updater and ours on copies of the same scenarios, judged by what each did to the pods.

Namespace `up` is acted on by upstream's updater (`--vpa-object-namespace=up`), namespace `py` by ours
(`vpa run --components=updater --vpa-object-namespace=py`). Both get the same input: the test writes the VPA
status recommendation (no recommender); the pods start alike (each pod of a ranked scenario resized to a CPU
request of its own, its rank, so the order of priority shows); one admission controller, upstream's, serves
both namespaces: it keeps fresh the status Lease both updaters require, boosts the startup-boost scenarios'
pods at creation, and patches the pods the ReplicaSets recreate after an eviction. Both updaters run with the
same flags (loop period, eviction tolerance, rate limit and burst, `--in-place-skip-disruption-budget`,
feature gates).

Compared per scenario after LOOPS loop periods, when both have done all they will: which original pods were
evicted and, in a ranked scenario, in which order; the survivors' resources (spec and status, limits,
annotations, restarts); the replacement pods. Which loop did what is timing and is not compared (upstream
ends a loop when its rate limiter's next wait would pass the loop's deadline, and visits VPAs in Go map
order: docs/deviations.md). A difference listed in KNOWN (each in docs/deviations.md) is expected; any other
fails, and so does a listed one that no longer happens.

Scenarios (one Deployment and VPA each, target cpu 500m / memory 256Mi unless said):
- `rec`: Recreate, 6 replicas ranked by CPU (two inside the recommended range), eviction tolerance 0.5;
- `pdb`: Recreate, 4 replicas ranked by CPU, a PodDisruptionBudget with minAvailable 3;
- `ipr` / `iprbig`: InPlaceOrRecreate, resized in place; `iprbig` asks for more CPU than a node has, so the
  resize is refused and the pod falls back to an eviction;
- `inplace` / `inplacebig`: InPlace (gate InPlace), the same two; never evicted;
- `boost` / `boostoff`: CPU startup boost (gate CPUStartupBoost) in InPlaceOrRecreate and in Off, admitted
  boosted, unboosted in place when the boost expires.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.differential.harness import (
    REPO,
    Cluster,
    eventually,
    needs_upstream,
    run_isolated,
    sim,
    webhook_certs,
)
from vpa.model.quantity import parse_quantity

pytestmark = [pytest.mark.differential, needs_upstream, pytest.mark.timeout(400)]

# As in test_recommender.py: a folder with kube-apiserver, kube-controller-manager, kube-scheduler and etcd
# runs the same case on a real control plane.
REAL_BIN = os.environ.get("VPA_DIFFERENTIAL_CONTROL_PLANE_BIN", "")
SIDES = {"up": "upstream", "py": "ours"}
GATES = "--feature-gates=InPlace=true,CPUStartupBoost=true"
INTERVAL_S = 10
LOOPS = 6  # the comparison is made after this many loop periods, when both have done all they will do
# The same for both updaters. The rate limit spaces a loop's evictions a second apart, so their order can be
# seen; the loops then outrun the interval (upstream cuts such a loop short: docs/deviations.md).
COMMON = [
    f"--updater-interval={INTERVAL_S}s",
    "--eviction-tolerance=0.5",
    "--eviction-rate-limit=1",
    "--eviction-rate-burst=1",
    "--min-replicas=2",
    "--in-place-skip-disruption-budget=false",
    GATES,
]
NODE_CPU = 48
REPORT = REPO / ".run" / "differential" / "updater.txt"

TARGET = {"cpu": "500m", "memory": "256Mi"}
BOUNDS = ({"cpu": "400m", "memory": "200Mi"}, {"cpu": "800m", "memory": "512Mi"})
# More CPU than any node has: the API server refuses the resize.
BIG = ({"cpu": "60", "memory": "128Mi"}, {"cpu": "50", "memory": "100Mi"}, {"cpu": "90", "memory": "256Mi"})
# name: (updateMode, replicas, CPU request per pod (its rank) or one for all, recommendation, extra VPA spec)
SCENARIOS: dict[str, tuple[str, int, list[str], tuple[dict[str, str], ...], dict[str, Any]]] = {
    "rec": ("Recreate", 6, ["100m", "300m", "450m", "600m", "1000m", "2000m"], (TARGET, *BOUNDS), {}),
    "pdb": ("Recreate", 4, ["100m", "200m", "1500m", "3000m"], (TARGET, *BOUNDS), {}),
    "ipr": ("InPlaceOrRecreate", 2, ["100m"], (TARGET, *BOUNDS), {}),
    "iprbig": ("InPlaceOrRecreate", 2, ["100m"], BIG, {}),
    "inplace": ("InPlace", 2, ["100m"], (TARGET, *BOUNDS), {}),
    "inplacebig": ("InPlace", 2, ["100m"], BIG, {}),
    "boost": (
        "InPlaceOrRecreate",
        2,
        ["100m"],
        (TARGET, *BOUNDS),
        {"startupBoost": {"cpu": {"type": "Factor", "factor": 2, "durationSeconds": 10}}},
    ),
    "boostoff": (
        "Off",
        2,
        ["100m"],
        (TARGET, *BOUNDS),
        {"startupBoost": {"cpu": {"type": "Factor", "factor": 3, "durationSeconds": 10}}},
    ),
}
BOOSTED = {"boost", "boostoff"}  # created once the webhook knows their VPA, so they are admitted boosted

# Differences found and documented in docs/deviations.md ("Beside upstream 1.8.1's own binaries", Updater), as
# (scenario pattern, field pattern) in fnmatch syntax. Each pattern must still match at least one difference.
KNOWN: list[tuple[str, str]] = []


def _ranked(name: str) -> bool:
    return len(set(SCENARIOS[name][2])) > 1


def _deployment(ns: str, name: str, replicas: int, cpu: str) -> dict[str, Any]:
    # A ranked scenario's memory is already at its target, so CPU alone decides its pods' priority.
    memory = TARGET["memory"] if _ranked(name) else "128Mi"
    app = {
        "name": "app",
        "image": "app",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": "1Gi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [app]}},
        },
    }


def _vpa(ns: str, name: str) -> dict[str, Any]:
    mode, *_, extra = SCENARIOS[name]
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "updatePolicy": {"updateMode": mode},
        **extra,
    }
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _status(name: str) -> dict[str, Any]:
    target, lower, upper = SCENARIOS[name][3]
    rec = {"containerName": "app", "target": target, "lowerBound": lower, "upperBound": upper}
    rec["uncappedTarget"] = target
    return {"status": {"recommendation": {"containerRecommendations": [rec]}}}


async def _pods(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await cluster.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
    return items


async def _patch(cluster: Cluster, path: str, ops: list[dict[str, Any]]) -> None:
    headers = {"Content-Type": "application/json-patch+json"}
    async with cluster.session.patch(cluster.url + path, data=json.dumps(ops), headers=headers) as r:
        assert r.status < 300, f"PATCH {path}: {r.status} {await r.text()}"


async def _create_workloads(cluster: Cluster, names: list[str]) -> None:
    """The Deployments at zero replicas, then scaled up once their ReplicaSets exist: upstream's webhook finds
    a pod's VPA through the ReplicaSet in its informer cache, and admits a pod unpatched when the ReplicaSet
    is not there yet (the first pods of a brand-new Deployment)."""
    for ns in SIDES:
        for name in names:
            _, _, cpus, *_ = SCENARIOS[name]
            body = _deployment(ns, name, 0, cpus[0])
            await cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    await asyncio.sleep(2)
    for ns in SIDES:
        for name in names:
            scale = {"spec": {"replicas": SCENARIOS[name][1]}}
            await cluster.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", scale)

    async def running() -> bool:
        for ns in SIDES:
            pods = [p for p in await _pods(cluster, ns) if p["metadata"]["labels"]["app"] in names]
            want = sum(SCENARIOS[n][1] for n in names)
            if sum(1 for p in pods if p.get("status", {}).get("phase") == "Running") < want:
                return False
        return True

    await eventually(running, 90, f"the pods of {names} running", cluster)


async def _rank(cluster: Cluster) -> None:
    """Give each pod of a ranked scenario its own CPU request (resized in place, so it keeps running) and a
    `rank` label naming that request, in both namespaces alike."""
    for ns in SIDES:
        pods = sorted(await _pods(cluster, ns), key=lambda p: p["metadata"]["name"])
        for name, (_, _, cpus, *_) in SCENARIOS.items():
            mine = [p for p in pods if p["metadata"]["labels"]["app"] == name]
            ranks = cpus if len(cpus) == len(mine) else [cpus[0]] * len(mine)
            for i, (pod, cpu) in enumerate(zip(mine, ranks, strict=True)):
                path = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}"
                rank = cpu if _ranked(name) else f"{cpu}-{i}"
                await _patch(cluster, path, [{"op": "add", "path": "/metadata/labels/rank", "value": rank}])
                if cpu != cpus[0]:
                    op = {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": cpu}
                    await _patch(cluster, path + "/resize", [op])

    async def resized() -> bool:
        for ns in SIDES:
            for pod in await _pods(cluster, ns):
                st = pod.get("status", {}).get("containerStatuses", [{}])[0].get("resources", {})
                want = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                got = st.get("requests", {}).get("cpu")
                if got is None or parse_quantity(got) != parse_quantity(want):
                    waiting[0] = f"{ns}/{pod['metadata']['name']}: spec {want}, status {pod.get('status')}"
                    return False
        return True

    waiting = [""]
    try:
        await eventually(resized, 60, "every ranked pod resized to its rank", cluster)
    except AssertionError as e:
        raise AssertionError(f"{waiting[0]}\n{e}") from None


def _resources(pod: dict[str, Any]) -> dict[str, Any]:
    c = pod["spec"]["containers"][0]
    st = pod.get("status", {}).get("containerStatuses", [{}])[0]
    annotations = pod["metadata"].get("annotations", {})
    return {
        "spec": c.get("resources", {}),
        "status": st.get("resources", {}),
        "restarts": st.get("restartCount", 0),
        "annotations": sorted(k for k in annotations if k.startswith(("vpa", "autoscaling"))),
    }


class Watch:
    """Every few hundred milliseconds, what became of the original pods of both namespaces: when each was
    evicted (deleted), and its latest resources while it lives."""

    def __init__(self, originals: dict[str, dict[str, dict[str, Any]]]) -> None:
        self.originals = originals  # ns -> uid -> pod
        self.gone: dict[str, dict[str, float]] = {ns: {} for ns in SIDES}
        self.latest: dict[str, dict[str, dict[str, Any]]] = {ns: {} for ns in SIDES}

    async def poll(self, cluster: Cluster) -> list[dict[str, Any]]:
        everything = []
        for ns in SIDES:
            pods = await _pods(cluster, ns)
            everything += pods
            now = time.monotonic()
            by_uid = {p["metadata"]["uid"]: p for p in pods}
            for uid in self.originals[ns]:
                pod = by_uid.get(uid)
                if pod is None or pod["metadata"].get("deletionTimestamp"):
                    self.gone[ns].setdefault(uid, now)
                else:
                    self.latest[ns][uid] = pod
        return everything

    async def run(self, cluster: Cluster, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.poll(cluster)
            await asyncio.sleep(0.25)


def _summary(watch: Watch, ns: str, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scenario: the evicted pods, the survivors' resources, the replacements. Pods of a ranked scenario
    are named by rank and their evictions kept in the order seen; the pods of other scenarios are alike, so
    only how many were evicted counts and the survivors are a sorted list."""
    out: dict[str, dict[str, Any]] = {}
    originals = watch.originals[ns]
    for name in SCENARIOS:
        mine = {uid: p for uid, p in originals.items() if p["metadata"]["labels"]["app"] == name}
        gone = sorted(
            (watch.gone[ns][uid], p["metadata"]["labels"]["rank"])
            for uid, p in mine.items()
            if uid in watch.gone[ns]
        )
        alive = {
            p["metadata"]["labels"]["rank"]: _resources(watch.latest[ns][uid])
            for uid, p in mine.items()
            if uid not in watch.gone[ns]
        }
        new = [
            p
            for p in pods
            if p["metadata"]["namespace"] == ns
            and p["metadata"]["labels"].get("app") == name
            and p["metadata"]["uid"] not in originals
            and not p["metadata"].get("deletionTimestamp")
        ]
        replacements = sorted(
            json.dumps({"phase": p.get("status", {}).get("phase"), **_resources(p)}, sort_keys=True)
            for p in new
        )
        if _ranked(name):
            out[name] = {
                "evicted": sorted(rank for _, rank in gone),
                "eviction order": [rank for _, rank in gone],
                "survivors": alive,
            }
        else:
            survivors = sorted(json.dumps(r, sort_keys=True) for r in alive.values())
            out[name] = {"evicted": len(gone), "survivors": survivors}
        out[name]["replacements"] = replacements
    return out


async def _setup(cluster: Cluster) -> None:
    for ns in SIDES:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        await cluster.request("POST", "/api/v1/namespaces", namespace)
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": ns},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "pdb"}}},
        }
        await cluster.request("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)
    # Created before their VPAs exist, so the webhook leaves them as they are.
    await _create_workloads(cluster, [n for n in SCENARIOS if n not in BOOSTED])
    await _rank(cluster)
    for ns in SIDES:
        vpas = f"/apis/autoscaling.k8s.io/v1/namespaces/{ns}/verticalpodautoscalers"
        for name in SCENARIOS:
            await cluster.request("POST", vpas, _vpa(ns, name))
            await cluster.request("PATCH", f"{vpas}/{name}/status", _status(name))


async def _boosted(cluster: Cluster) -> bool:
    for ns in SIDES:
        pods = [p for p in await _pods(cluster, ns) if p["metadata"]["labels"]["app"] in BOOSTED]
        if len(pods) < sum(SCENARIOS[n][1] for n in BOOSTED):
            return False
        for p in pods:
            annotations = p["metadata"].get("annotations", {})
            if not any(k.startswith("vpaCpuStartupBoost/") for k in annotations):
                raise AssertionError(f"{ns}/{p['metadata']['name']} admitted without a boost: {annotations}")
    return True


def _exercised(up: dict[str, dict[str, Any]]) -> None:
    """Every scenario did what it is there for (upstream's side; ours is compared to it), so equality is not
    that of two updaters doing nothing."""

    def cpus(name: str) -> list[str]:
        survivors = up[name]["survivors"]
        items = survivors.values() if isinstance(survivors, dict) else [json.loads(x) for x in survivors]
        return sorted(str(r["status"].get("requests", {}).get("cpu")) for r in items)

    assert up["rec"]["evicted"] == ["1000m", "100m", "2000m", "300m"], up["rec"]  # not the two in range
    assert up["rec"]["eviction order"] == ["100m", "300m", "2000m", "1000m"], up["rec"]  # scale-up first
    assert up["pdb"]["eviction order"] == ["100m", "200m", "3000m", "1500m"], up["pdb"]
    assert cpus("ipr") == cpus("inplace") == ["500m", "500m"], (up["ipr"], up["inplace"])
    assert up["iprbig"]["evicted"] == 1, up["iprbig"]  # the other pod cannot go while its replacement pends
    assert up["inplacebig"]["evicted"] == 0, up["inplacebig"]
    assert cpus("boost") == ["500m", "500m"], up["boost"]  # boosted to 1 CPU, back to the target
    assert cpus("boostoff") == ["100m", "100m"], up["boostoff"]  # boosted to 300m, back to the original


async def test_updater_decisions_equal_upstream(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not run_isolated(request):
        return
    flags = ["--nodes", "3", "--node-cpu", str(NODE_CPU), "--node-memory", "64Gi"]
    if REAL_BIN:
        flags += ["--control-plane=kubernetes", f"--control-plane-bin={REAL_BIN}"]
    else:
        flags += ["--time-scale", "1"]
    started = time.monotonic()
    async with sim(tmp_path / "run", *flags) as cluster:
        certs = webhook_certs(cluster.folder)
        await cluster.upstream(
            "admission-controller",
            f"--client-ca-file={certs.ca}",
            f"--tls-cert-file={certs.cert}",
            f"--tls-private-key={certs.key}",
            "--address=127.0.0.1:18945",
            GATES,
        )

        async def registered() -> bool:
            path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vpa-webhook-config"
            mwc = await cluster.request("GET", path, ok=(404,))
            return bool(mwc.get("kind") == "MutatingWebhookConfiguration")

        await eventually(registered, 60, "upstream's webhook configuration", cluster)
        await _setup(cluster)
        await asyncio.sleep(2)  # the webhook's VPA cache holds the boosted scenarios' VPAs
        await _create_workloads(cluster, sorted(BOOSTED))
        await eventually(lambda: _boosted(cluster), 30, "the boosted pods", cluster)

        originals = {ns: {p["metadata"]["uid"]: p for p in await _pods(cluster, ns)} for ns in SIDES}
        for ns in SIDES:
            for i, pod in enumerate(originals[ns].values()):
                pod["metadata"]["labels"].setdefault("rank", f"boosted-{i}")
        watch = Watch(originals)
        await cluster.upstream(
            "updater",
            "--vpa-object-namespace=up",
            "--address=127.0.0.1:18948",
            *COMMON,
            name="upstream-updater",
        )
        await cluster.ours(
            "--components=updater",
            "--vpa-object-namespace=py",
            "--address=127.0.0.1:18947",
            *COMMON,
            name="ours-updater",
        )
        await watch.run(cluster, INTERVAL_S * LOOPS + 2)
        pods = await watch.poll(cluster)
        summaries = {ns: _summary(watch, ns, pods) for ns in SIDES}

    differences: dict[tuple[str, str], str] = {}
    for name in SCENARIOS:
        up, ours = summaries["up"][name], summaries["py"][name]
        for key in up:
            if up[key] != ours[key]:
                differences[(name, key)] = f"upstream {up[key]}\n    ours {ours[key]}"
    lines = [f"{name}: {json.dumps(summaries['up'][name], sort_keys=True)}" for name in SCENARIOS]
    report = "\n".join(f"{case} [{key}]: {text}" for (case, key), text in sorted(differences.items()))
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("upstream's decisions:\n" + "\n".join(lines) + "\ndifferences:\n" + report + "\n")
    print(
        f"updater differential: {len(SCENARIOS)} scenarios, {len(differences)} differences, "
        f"{time.monotonic() - started:.0f} s"
    )

    _exercised(summaries["up"])

    def known(case: str, key: str) -> bool:
        return any(fnmatch.fnmatch(case, c) and fnmatch.fnmatch(key, k) for c, k in KNOWN)

    unexpected = sorted(d for d in differences if not known(*d))
    gone = [
        (c, k)
        for c, k in KNOWN
        if not any(fnmatch.fnmatch(d[0], c) and fnmatch.fnmatch(d[1], k) for d in differences)
    ]
    assert not unexpected, "differences not in docs/deviations.md:\n" + "\n".join(
        f"{case} [{key}]: {differences[(case, key)]}" for case, key in unexpected
    )
    assert not gone, f"listed differences that no longer happen (update docs/deviations.md and KNOWN): {gone}"
