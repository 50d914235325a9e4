"""Differential fidelity: the same API conversations against `vpa sim` and a real kube-apiserver must agree.

Each case is a short conversation over raw HTTPS (CRUD and conflicts, validation errors, watch, patches of
every content type, the status, scale, eviction and resize subresources, a disruption budget, pod-level
resources) that returns what a client would act on: status codes, reasons, the fields that changed. It runs
once against an in-process `SimCluster` and once against the real control plane (`RealCluster`, the binaries
`make control-plane` builds; that half skips with one line when they are absent), and the two transcripts
must be equal. Where the simulator cannot agree on purpose, the case normalises the difference and
`docs/deviations.md` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from vpa.sim import SimCluster
from vpa.sim.kubernetes.cluster import RealCluster
from vpa.sim.kubernetes.controlplane import ControlPlaneError, find_binaries

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

Reply = tuple[int, dict[str, Any]]


class Api:
    """Raw HTTPS to one cluster: `call(method, path, body, content_type)` → (status, JSON body)."""

    def __init__(self, name: str, url: str, ca_pem: bytes, token: str) -> None:
        self.name = name
        self.url = url
        self._ssl = ssl.create_default_context(cadata=ca_pem.decode())
        self._token = token
        self.session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self.session = aiohttp.ClientSession(
            base_url=self.url,
            connector=aiohttp.TCPConnector(ssl=self._ssl),
            headers={"Authorization": f"Bearer {self._token}"},
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str | None = JSON,
        raw: bytes | None = None,
    ) -> Reply:
        assert self.session is not None
        headers = {"Content-Type": content_type} if content_type else {}
        data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
        async with self.session.request(method, path, data=data, headers=headers) as resp:
            text = await resp.read()
        try:
            doc = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            doc = {"text": text.decode(errors="replace")}
        return resp.status, doc if isinstance(doc, dict) else {"value": doc}

    async def namespace(self, name: str) -> str:
        """Create `name` and wait until pods can be created in it (its default ServiceAccount exists)."""
        await self.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        for _ in range(200):
            status, _ = await self.call("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            if status == 200:
                return name
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.name}: no default ServiceAccount in {name}")

    async def until(self, what: str, probe: Callable[[], Awaitable[Any]], timeout_s: float = 60.0) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            result = await probe()
            if result:
                return result
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name}: timed out waiting for {what}")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sim_api() -> AsyncIterator[Api]:
    # The newest minor the simulated API server emulates, against the real default release (1.37).
    async with SimCluster(nodes=1, time_scale=1.0, kubernetes_version="1.36") as cluster:
        api = Api("vpa sim", cluster.url, cluster.ca_cert_pem, "test")
        await api.open()
        yield api
        await api.close()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def real_api() -> AsyncIterator[Api]:
    try:
        find_binaries()
    except ControlPlaneError as err:
        pytest.skip(f"real control plane not built: {err}")
    cluster = RealCluster(nodes=1)
    await cluster.start()
    try:
        cp = cluster.control_plane
        api = Api("kube-apiserver", cp.url, cp.ca_pem, cp.admin_token)
        await api.open()
        yield api
        await api.close()
    finally:
        await cluster.stop()


def _status(reply: Reply) -> tuple[int, str]:
    code, doc = reply
    return code, str(doc.get("reason", "")) if doc.get("kind") == "Status" else ""


def _causes(reply: Reply) -> list[str]:
    return sorted(str(c.get("field")) for c in (reply[1].get("details") or {}).get("causes") or [])


def _container(reply: Reply, index: int = 0) -> dict[str, Any]:
    containers: list[dict[str, Any]] = reply[1]["spec"]["containers"]
    return containers[index]


POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "fid"}},
    "spec": {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ]
    },
}

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        },
    },
}


# ------------------------------------------------------------------------------------------ the cases


async def case_crud_and_conflicts(api: Api) -> list[Any]:
    ns = await api.namespace("fid-crud")
    base = f"/api/v1/namespaces/{ns}/configmaps"
    out: list[Any] = []
    created = await api.call("POST", base, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    out.append(created[0])
    out.append(_status(await api.call("POST", base, {"metadata": {"name": "cm"}})))
    stale = {**created[1], "data": {"a": "2"}}
    out.append((await api.call("PUT", f"{base}/cm", stale))[0])
    out.append(_status(await api.call("PUT", f"{base}/cm", {**stale, "data": {"a": "3"}})))
    got = await api.call("GET", f"{base}/cm")
    out.append(got[1]["data"])
    missing = await api.call("GET", f"{base}/nope")
    out.append((_status(missing), missing[1].get("message")))
    out.append((await api.call("DELETE", f"{base}/cm"))[0])
    out.append(_status(await api.call("DELETE", f"{base}/cm")))
    return out


async def case_validation_errors(api: Api) -> list[Any]:
    ns = await api.namespace("fid-invalid")
    out: list[Any] = []
    bad_name = await api.call(
        "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "Not_Valid"}}
    )
    out.append((_status(bad_name), _causes(bad_name)))
    no_image = {**POD, "spec": {"containers": [{"name": "c"}]}}
    reply = await api.call("POST", f"/api/v1/namespaces/{ns}/pods", no_image)
    out.append((_status(reply), _causes(reply)))
    vpa = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "v"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "updatePolicy": {"updateMode": "Sometimes"},
        },
    }
    reply = await api.call("POST", f"/apis/autoscaling.k8s.io/v1/namespaces/{ns}/verticalpodautoscalers", vpa)
    out.append((_status(reply), _causes(reply), reply[1].get("message")))
    return out


async def case_watch_sees_every_change(api: Api) -> list[Any]:
    ns = await api.namespace("fid-watch")
    base = f"/api/v1/namespaces/{ns}/configmaps"
    listed = await api.call("GET", base)
    rv = listed[1]["metadata"]["resourceVersion"]
    assert api.session is not None
    events: list[tuple[str, str, Any]] = []
    async with api.session.get(f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=30") as resp:
        await api.call("POST", base, {"metadata": {"name": "w"}, "data": {"k": "1"}})
        await api.call("PATCH", f"{base}/w", {"data": {"k": "2"}}, MERGE)
        await api.call("DELETE", f"{base}/w")
        while len(events) < 3:
            line = await asyncio.wait_for(resp.content.readline(), 10)
            event = orjson.loads(line)
            obj = event["object"]
            events.append((event["type"], obj["metadata"]["name"], (obj.get("data") or {}).get("k")))
    return events


async def case_patches_of_every_content_type(api: Api) -> list[Any]:
    ns = await api.namespace("fid-patch")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    await api.call("POST", base, DEPLOYMENT)
    out: list[Any] = []
    add_sidecar = {"spec": {"template": {"spec": {"containers": [{"name": "s", "image": "busybox"}]}}}}
    reply = await api.call("PATCH", f"{base}/d", add_sidecar, STRATEGIC)
    out.append((reply[0], [c["name"] for c in reply[1]["spec"]["template"]["spec"]["containers"]]))
    reply = await api.call("PATCH", f"{base}/d", add_sidecar, MERGE)
    out.append((reply[0], [c["name"] for c in reply[1]["spec"]["template"]["spec"]["containers"]]))
    two = {"spec": {"template": {"spec": {"containers": [{"name": "t", "image": "busybox"}]}}}}
    await api.call("PATCH", f"{base}/d", two, STRATEGIC)
    # A new item and an existing one, the new one first in the patch: where each lands is apimachinery's rule.
    both = [{"name": "u", "image": "busybox"}, {"name": "t", "image": "busybox:1"}]
    reply = await api.call(
        "PATCH", f"{base}/d", {"spec": {"template": {"spec": {"containers": both}}}}, STRATEGIC
    )
    out.append((reply[0], [c["name"] for c in reply[1]["spec"]["template"]["spec"]["containers"]]))
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 3}]
    reply = await api.call("PATCH", f"{base}/d", ops, JSON_PATCH)
    out.append((reply[0], reply[1]["spec"]["replicas"]))
    failing = [{"op": "test", "path": "/spec/replicas", "value": 7}]
    out.append(_status(await api.call("PATCH", f"{base}/d", failing, JSON_PATCH)))
    applied = (
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 2\n"
        b"  selector:\n    matchLabels:\n      app: d\n"
        b"  template:\n    metadata:\n      labels:\n        app: d\n"
        b"    spec:\n      containers:\n      - name: c\n        image: registry.k8s.io/pause:3.10\n"
    )
    reply = await api.call("PATCH", f"{base}/d?fieldManager=fid&force=true", None, APPLY, raw=applied)
    out.append((reply[0], reply[1]["spec"]["replicas"]))
    out.append(_status(await api.call("PATCH", f"{base}/d", {"spec": {}}, "text/plain")))
    return out


async def case_status_and_scale_subresources(api: Api) -> list[Any]:
    ns = await api.namespace("fid-sub")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    await api.call("POST", base, {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "paused": True}})
    out: list[Any] = []
    # A status write changes only the status; a main-resource write ignores a status.
    reply = await api.call(
        "PATCH", f"{base}/d/status", {"spec": {"replicas": 9}, "status": {"observedGeneration": 42}}, MERGE
    )
    out.append((reply[0], reply[1]["spec"]["replicas"], reply[1]["status"].get("observedGeneration")))
    scale = await api.call("GET", f"{base}/d/scale")
    out.append(
        (scale[0], scale[1]["kind"], scale[1]["apiVersion"], scale[1]["spec"], scale[1]["status"]["selector"])
    )
    reply = await api.call("PATCH", f"{base}/d/scale", {"spec": {"replicas": 4}}, MERGE)
    out.append((reply[0], reply[1]["spec"]["replicas"]))
    out.append((await api.call("GET", f"{base}/d"))[1]["spec"]["replicas"])
    return out


BUDGET_COUNTS = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")


def _budget(**spec: Any) -> dict[str, Any]:
    """A PodDisruptionBudget `pdb` over the `app: fid` pods, with `spec`'s fields beside the selector."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pdb"},
        "spec": {**spec, "selector": {"matchLabels": {"app": "fid"}}},
    }


async def case_eviction_and_disruption_budget(api: Api) -> list[Any]:
    ns = await api.namespace("fid-evict")
    pods = f"/api/v1/namespaces/{ns}/pods"
    out: list[Any] = []
    # Bare pods: no controller, so a maxUnavailable budget is taken of no scale at all (expects 0 pods) while
    # both still count as healthy, and kube-controller-manager warns about them instead of failing the sync.
    for name in ("a", "b"):
        await api.call("POST", pods, {**POD, "metadata": {**POD["metadata"], "name": name}})
    pdb = _budget(maxUnavailable=0)
    await api.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)

    async def computed() -> Any:
        # The budget observed and both pods Running: a pod still Pending is evicted whatever the budget says
        # (kube-apiserver ignores budgets for Pending pods, as vpa sim does), so with a slow node agent the
        # eviction below was allowed by one server and refused by the other.
        _, doc = await api.call("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb")
        st = doc.get("status") or {}
        if st.get("observedGeneration") != doc["metadata"]["generation"]:
            return None
        for name in ("a", "b"):
            _, pod = await api.call("GET", f"{pods}/{name}")
            if (pod.get("status") or {}).get("phase") != "Running":
                return None
        return st

    async def counted() -> Any:
        st = await computed()
        return st if st is not None and st.get("currentHealthy") == 2 else None

    status = await api.until("the disruption budget's status and both pods running", computed)
    # Ready follows Running, and the controller counts a pod a moment after it is Ready. A server that never
    # counts them is not waited for: its status goes into the transcript as it is, to differ there.
    with contextlib.suppress(AssertionError):
        status = await api.until("the budget counting both pods healthy", counted, timeout_s=20)
    out.append(
        {k: status.get(k) for k in BUDGET_COUNTS}
    )
    cond: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    out.append((cond.get("status"), cond.get("reason"), cond.get("message")))

    async def warned() -> Any:
        _, doc = await api.call("GET", f"/api/v1/namespaces/{ns}/events")
        return [
            (e.get("type"), about.get("kind"), about.get("name"), e.get("message"))
            for e in doc.get("items") or []
            if e.get("reason") == "UnmanagedPods" and (about := e.get("involvedObject") or {})
        ][:1]

    warning: Any = []
    with contextlib.suppress(AssertionError):
        warning = await api.until("the UnmanagedPods warning", warned, timeout_s=20)
    out.append(warning)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": ns}}
    blocked = await api.call("POST", f"{pods}/a/eviction", eviction)
    causes = (blocked[1].get("details") or {}).get("causes") or []
    causes = [(c.get("reason"), c.get("message")) for c in causes]
    out.append((_status(blocked), blocked[1].get("message"), causes))
    await api.call("DELETE", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb")
    # kubectl create --raw sends no Content-Type: the API server reads JSON.
    raw = orjson.dumps(eviction)
    allowed = await api.call("POST", f"{pods}/a/eviction", None, None, raw=raw)
    out.append((allowed[0], allowed[1].get("kind"), allowed[1].get("status")))
    out.append(
        _status(await api.call("POST", f"{pods}/zz/eviction", {**eviction, "metadata": {"name": "zz"}}))
    )
    return out


async def case_disruption_budget_without_min_or_max(api: Api) -> list[Any]:
    ns = await api.namespace("fid-pdb-bare")
    pods = f"/api/v1/namespaces/{ns}/pods"
    for name in ("a", "b"):
        await api.call("POST", pods, {**POD, "metadata": {**POD["metadata"], "name": name}})
    pdb = _budget()
    out: list[Any] = [
        (await api.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb))[0]
    ]

    async def counted() -> Any:
        _, doc = await api.call("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb")
        st = doc.get("status") or {}
        observed = st.get("observedGeneration") == doc["metadata"]["generation"]
        return st if observed and st.get("currentHealthy") == 2 else None

    status: dict[str, Any] = {}
    with contextlib.suppress(AssertionError):
        status = await api.until("the budget counting both pods healthy", counted, timeout_s=30)
    out.append(
        {k: status.get(k) for k in BUDGET_COUNTS}
    )
    return out


async def case_disruption_budget_over_finished_pods(api: Api) -> list[Any]:
    ns = await api.namespace("fid-pdb-done")
    pods = f"/api/v1/namespaces/{ns}/pods"
    # "b" runs for a second and succeeds (the node agent both clusters run reads the annotation).
    done = {
        **POD,
        "metadata": {**POD["metadata"], "name": "b", "annotations": {"sim.vpa.dev/run-seconds": "1"}},
        "spec": {**POD["spec"], "restartPolicy": "Never"},
    }
    await api.call("POST", pods, {**POD, "metadata": {**POD["metadata"], "name": "a"}})
    await api.call("POST", pods, done)

    async def settled() -> bool:
        _, a = await api.call("GET", f"{pods}/a")
        _, b = await api.call("GET", f"{pods}/b")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (a.get("status") or {}).get("conditions") or []
        )
        return ready and (b.get("status") or {}).get("phase") == "Succeeded"

    await api.until("pod a ready and pod b succeeded", settled)
    # Created only now, so its first status already sees the finished pod.
    pdb = _budget(minAvailable=1)
    await api.call("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)

    async def counted() -> Any:
        _, doc = await api.call("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb")
        st = doc.get("status") or {}
        observed = st.get("observedGeneration") == doc["metadata"]["generation"]
        return st if observed and st.get("currentHealthy") == 1 else None

    status: dict[str, Any] = {}
    with contextlib.suppress(AssertionError):
        status = await api.until("the budget counting pod a healthy", counted, timeout_s=30)
    return [
        {k: status.get(k) for k in BUDGET_COUNTS}
    ]


async def case_disruption_budget_sync_failed(api: Api) -> list[Any]:
    ns = await api.namespace("fid-pdb-fail")
    pods = f"/api/v1/namespaces/{ns}/pods"
    budgets = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    # A pod controlled by a (suspended) CronJob: an owner that exists, so nothing collects or adopts the pod,
    # but has no scale, so a maxUnavailable budget over it cannot be computed and its sync fails.
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "owner"},
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": {"spec": {**POD["spec"], "restartPolicy": "Never"}}}},
        },
    }
    _, owner = await api.call("POST", f"/apis/batch/v1/namespaces/{ns}/cronjobs", cronjob)
    ref = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": "owner",
        "uid": (owner.get("metadata") or {}).get("uid"),
        "controller": True,
    }
    owned = {**POD, "metadata": {**POD["metadata"], "name": "a", "ownerReferences": [ref]}}
    await api.call("POST", pods, owned)

    async def running() -> bool:
        _, pod = await api.call("GET", f"{pods}/a")
        return (pod.get("status") or {}).get("phase") == "Running"

    await api.until("pod a running", running)
    pdb = _budget(maxUnavailable=1)
    await api.call("POST", budgets, pdb)

    async def failed() -> Any:
        _, doc = await api.call("GET", f"{budgets}/pdb")
        conds = (doc.get("status") or {}).get("conditions") or []
        return doc if any(c.get("reason") == "SyncFailed" for c in conds) else None

    doc = await api.until("the budget's failed sync", failed, timeout_s=30)
    status = doc["status"]
    cond = next(c for c in status["conditions"] if c.get("type") == "DisruptionAllowed")
    counts = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")
    out: list[Any] = [
        {k: status.get(k) for k in counts},
        # Never synced: the failed sync leaves the budget unobserved.
        ("observedGeneration" in status, cond.get("status"), cond.get("observedGeneration")),
        cond.get("message"),
    ]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": ns}}
    blocked = await api.call("POST", f"{pods}/a/eviction", eviction)
    causes = (blocked[1].get("details") or {}).get("causes") or []
    out.append((_status(blocked), [(c.get("reason"), c.get("message")) for c in causes]))

    async def event(reason: str, involved: str, more_than: int = 0) -> Any:
        _, events = await api.call("GET", f"/api/v1/namespaces/{ns}/events")
        return next(
            (
                e
                for e in events.get("items") or []
                if e.get("reason") == reason
                and (e.get("involvedObject") or {}).get("name") == involved
                and int(e.get("count") or 1) > more_than
            ),
            None,
        )

    failing = "CalculateExpectedPodCountFailed"
    warned = await api.until("the failed sync's warning", lambda: event(failing, "pdb"))
    about = warned.get("involvedObject") or {}
    out.append((warned.get("type"), about.get("kind"), warned.get("message")))
    # Failing again changes nothing: once a second has passed (lastTransitionTime is kept to the second),
    # touch the pod so the budget syncs again, and wait for that sync's warning.
    await asyncio.sleep(1.1)
    _, warned = await api.call("GET", f"/api/v1/namespaces/{ns}/events/{warned['metadata']['name']}")
    labels = {"app": "fid", "touched": "yes"}
    await api.call("PATCH", f"{pods}/a", {"metadata": {"labels": labels}}, MERGE)
    count = int(warned.get("count") or 1)
    await api.until("the warning of another failed sync", lambda: event(failing, "pdb", count))
    _, again = await api.call("GET", f"{budgets}/pdb")
    out.append(
        (
            again["metadata"]["resourceVersion"] == doc["metadata"]["resourceVersion"],
            again.get("status") == status,
        )
    )
    # A budget that selects no pod says so.
    nothing = {"minAvailable": 1, "selector": {"matchLabels": {"app": "nobody"}}}
    none = {**pdb, "metadata": {"name": "none"}, "spec": nothing}
    await api.call("POST", budgets, none)
    noted = await api.until("the NoPods notice", lambda: event("NoPods", "none"))
    out.append((noted.get("type"), noted.get("message")))
    return out


async def case_resize_subresource(api: Api) -> list[Any]:
    ns = await api.namespace("fid-resize")
    pods = f"/api/v1/namespaces/{ns}/pods"
    limited = {
        **POD,
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "100m", "memory": "64Mi"},
                    },
                }
            ]
        },
    }
    created = await api.call("POST", pods, limited)
    out: list[Any] = [created[1]["status"].get("qosClass"), created[1]["metadata"].get("generation")]
    both = {"requests": {"cpu": "200m"}, "limits": {"cpu": "200m"}}
    reply = await api.call(
        "PATCH", f"{pods}/p/resize", {"spec": {"containers": [{"name": "c", "resources": both}]}}, STRATEGIC
    )
    out.append((reply[0], _container(reply)["resources"], reply[1]["metadata"].get("generation")))
    # Guaranteed → Burstable is a QoS change: refused.
    qos = {"requests": {"cpu": "150m"}}
    reply = await api.call(
        "PATCH", f"{pods}/p/resize", {"spec": {"containers": [{"name": "c", "resources": qos}]}}, STRATEGIC
    )
    out.append(_status(reply))
    # Anything but resources through /resize is refused.
    image = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    out.append(_status(await api.call("PATCH", f"{pods}/p/resize", image, STRATEGIC)))
    # ...and resources through the main resource are refused too.
    main = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"}}}]}}
    out.append(_status(await api.call("PATCH", f"{pods}/p", main, STRATEGIC)))
    return out


async def case_plain_init_container_resize(api: Api) -> list[Any]:
    """1.36+ (`InPlacePodVerticalScalingInitContainers`): a non-sidecar init container's cpu and memory go
    through `/resize` like a container's (the updater resizes them on such servers)."""
    ns = await api.namespace("fid-init-resize")
    pods = f"/api/v1/namespaces/{ns}/pods"
    image = "registry.k8s.io/pause:3.10"
    pod = {
        **POD,
        "spec": {
            "initContainers": [{"name": "setup", "image": image, "resources": {
                "requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "2"}}}],
            "containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "100m"}}}],
        },
    }  # fmt: skip
    created = await api.call("POST", pods, pod)
    out: list[Any] = [created[0]]
    patch = [{"op": "add", "path": "/spec/initContainers/0/resources/requests/cpu", "value": "100m"}]
    reply = await api.call("PATCH", f"{pods}/p/resize", patch, JSON_PATCH)
    out.append((_status(reply), reply[1].get("spec", {}).get("initContainers", [{}])[0].get("resources")))
    # Removing a request is refused, as for a container.
    removal = [{"op": "remove", "path": "/spec/initContainers/0/resources/requests/memory"}]
    reply = await api.call("PATCH", f"{pods}/p/resize", removal, JSON_PATCH)
    out.append((_status(reply), _causes(reply)))
    return out


async def case_pod_level_resources(api: Api) -> list[Any]:
    ns = await api.namespace("fid-podlevel")
    pods = f"/api/v1/namespaces/{ns}/pods"
    pod = {
        **POD,
        "spec": {
            "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}},
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "300m"}},
                }
            ],
        },
    }
    out: list[Any] = []
    reply = await api.call("POST", pods, pod)
    out.append((_status(reply), _causes(reply), reply[1].get("message")))
    over_limit = {
        **POD,
        "metadata": {"name": "q"},
        "spec": {
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "2Gi"}},
                },
            ],
        },
    }
    reply = await api.call("POST", pods, over_limit)
    out.append((_status(reply), _causes(reply), reply[1].get("message")))
    fits = {**over_limit, "metadata": {"name": "r"}}
    small = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    container = {**over_limit["spec"]["containers"][0], "resources": small}
    fits["spec"] = {**over_limit["spec"], "containers": [container]}
    reply = await api.call("POST", pods, fits)
    out.append((reply[0], reply[1].get("spec", {}).get("resources")))
    return out


async def case_pod_level_defaults_limits_and_resize(api: Api) -> list[Any]:
    """What a VPA on a pod with pod-level resources has to know: a pod-level limit without a request gets the
    containers' aggregate request (the limit only when no container requests that resource); a sidecar's
    or init container's limit may be above the pod-level limit (only `spec.containers` are held to it);
    and without `InPlacePodLevelResourcesVerticalScaling` (alpha, off in 1.35) every resize of such a pod
    is refused, of a container too."""
    ns = await api.namespace("fid-podlevel-more")
    pods = f"/api/v1/namespaces/{ns}/pods"
    image = "registry.k8s.io/pause:3.10"
    pod = {
        **POD,
        "spec": {
            "resources": {"limits": {"cpu": "1", "memory": "200Mi"}},
            "initContainers": [
                {"name": "side", "image": image, "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1500m"}}},
                {"name": "setup", "image": image, "resources": {"requests": {"cpu": "50m"},
                                                                "limits": {"cpu": "2"}}},
            ],
            "containers": [
                {"name": "c", "image": image, "resources": {"requests": {"memory": "150Mi"}}},
                {"name": "d", "image": image},
            ],
        },
    }  # fmt: skip
    created = await api.call("POST", pods, pod)
    out: list[Any] = [created[0], created[1].get("spec", {}).get("resources")]
    resize = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "160Mi"}}}]}}
    reply = await api.call("PATCH", f"{pods}/p/resize", resize, STRATEGIC)
    out.append((_status(reply), _causes(reply), reply[1].get("message")))
    return out


CASES = {
    "crud-and-conflicts": case_crud_and_conflicts,
    "validation-errors": case_validation_errors,
    "watch": case_watch_sees_every_change,
    "patch-content-types": case_patches_of_every_content_type,
    "status-and-scale": case_status_and_scale_subresources,
    "eviction-and-pdb": case_eviction_and_disruption_budget,
    "pdb-without-min-or-max": case_disruption_budget_without_min_or_max,
    "pdb-over-finished-pods": case_disruption_budget_over_finished_pods,
    "pdb-sync-failed": case_disruption_budget_sync_failed,
    "resize": case_resize_subresource,
    "plain-init-container-resize": case_plain_init_container_resize,
    "pod-level-resources": case_pod_level_resources,
    "pod-level-defaults-limits-and-resize": case_pod_level_defaults_limits_and_resize,
}


@pytest.mark.parametrize("case", list(CASES))
async def test_sim_and_kube_apiserver_agree(case: str, sim_api: Api, real_api: Api) -> None:
    run = CASES[case]
    real = await run(real_api)
    sim = await run(sim_api)
    assert sim == real, f"{case}: vpa sim answered\n  {sim}\nkube-apiserver answered\n  {real}"
