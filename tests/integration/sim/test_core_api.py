"""The simulated API server against kubernetes-asyncio and raw HTTPS: CRUD, concurrency, LIST, WATCH, errors.

Each test starts a bare cluster (no controllers) and checks one piece of kube-apiserver behaviour a client
relies on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.integration.sim.helpers import read_events
from vpa.sim import SimCluster
from vpa.sim.contracts import ApiError

VPA_GROUP, VPA_VERSION, VPA_PLURAL = "autoscaling.k8s.io", "v1", "verticalpodautoscalers"


def _status(exc: ApiException) -> dict[str, Any]:
    body = exc.body
    assert body is not None
    result: dict[str, Any] = orjson.loads(body)
    return result


def _any(body: dict[str, Any]) -> Any:
    """kubernetes-asyncio accepts plain dict bodies; its stubs only name the models."""
    return body


def _vpa(name: str, mode: str = "Auto") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "updatePolicy": {"updateMode": mode},
        },
    }


async def test_configmap_crud_and_stale_update_conflict(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={"a": "1"})
    )
    assert created.metadata.uid
    assert created.metadata.creation_timestamp.year == 2026
    rv1 = created.metadata.resource_version
    created.data = {"a": "2"}
    updated = await core.replace_namespaced_config_map("cfg", "default", created)
    assert int(updated.metadata.resource_version) > int(rv1)
    assert updated.metadata.uid == created.metadata.uid
    # Replaying the first write with its now stale resourceVersion must be refused.
    created.data = {"a": "3"}
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_config_map("cfg", "default", created)
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "Conflict"
    # A no-op update keeps the resourceVersion (no event, no bump).
    same = await core.replace_namespaced_config_map("cfg", "default", updated)
    assert same.metadata.resource_version == updated.metadata.resource_version
    await core.delete_namespaced_config_map("cfg", "default")
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("cfg", "default")
    assert err.value.status == 404
    status = _status(err.value)
    assert status["reason"] == "NotFound"
    assert status["details"] == {"name": "cfg", "kind": "configmaps"}


async def test_create_errors(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dup"))
    await core.create_namespaced_config_map("default", cm)
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", cm)
    assert err.value.status == 409
    assert _status(err.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("missing-ns", cm)
    assert err.value.status == 404
    assert _status(err.value)["message"] == 'namespaces "missing-ns" not found'
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))
        )
    assert err.value.status == 422
    assert _status(err.value)["details"]["causes"][0]["field"] == "metadata.name"


async def test_generate_name_and_deployment_generation(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "metadata": {"generateName": "web-"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
        "status": {"replicas": 99},
    }
    d = await apps.create_namespaced_deployment("default", _any(body))
    name = d.metadata.name
    assert name.startswith("web-")
    assert len(name) == len("web-") + 5
    assert d.metadata.generation == 1
    assert not (d.to_dict().get("status") or {}).get("replicas")  # client-sent status is dropped on create
    d2 = await apps.patch_namespaced_deployment(name, "default", {"metadata": {"labels": {"x": "y"}}})
    assert d2.metadata.generation == 1  # metadata changes do not bump generation
    d3 = await apps.patch_namespaced_deployment(name, "default", {"spec": {"replicas": 3}})
    assert d3.metadata.generation == 2
    scale = await apps.read_namespaced_deployment_scale(name, "default")
    assert scale.spec.replicas == 3
    assert scale.status.selector == "app=web"
    await apps.patch_namespaced_deployment_scale(name, "default", {"spec": {"replicas": 5}})
    d4 = await apps.read_namespaced_deployment(name, "default")
    assert d4.spec.replicas == 5
    assert d4.metadata.generation == 3


async def test_list_pagination_sees_every_object_once(cluster: SimCluster, api: client.ApiClient) -> None:
    for i in range(250):
        ns = "default" if i % 2 else "kube-public"
        await cluster.store.create("configmaps", {"metadata": {"name": f"cm-{i:03d}", "namespace": ns}})
    core = client.CoreV1Api(api)
    seen: list[str] = []
    token: Any = None
    pages = 0
    while True:
        page = await core.list_config_map_for_all_namespaces(limit=40, _continue=token)
        pages += 1
        seen += [f"{o.metadata.namespace}/{o.metadata.name}" for o in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 250 - len(seen)
    assert pages == 7
    assert len(seen) == 250
    assert len(set(seen)) == 250
    # Per namespace, too.
    seen_ns: list[str] = []
    token = None
    while True:
        page = await core.list_namespaced_config_map("default", limit=30, _continue=token)
        seen_ns += [o.metadata.name for o in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert len(seen_ns) == 125
    assert len(set(seen_ns)) == 125


async def test_expired_continue_token_is_410(cluster: SimCluster, api: client.ApiClient) -> None:
    for i in range(5):
        await cluster.store.create("configmaps", {"metadata": {"name": f"cm-{i}", "namespace": "default"}})
    core = client.CoreV1Api(api)
    page = await core.list_namespaced_config_map("default", limit=2)
    await cluster.store.create("configmaps", {"metadata": {"name": "later", "namespace": "default"}})
    cluster.faults.compact()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default", limit=2, _continue=page.metadata._continue)
    assert err.value.status == 410
    assert _status(err.value)["reason"] == "Expired"


async def test_continue_token_outlives_the_watch_history(cluster: SimCluster, api: client.ApiClient) -> None:
    """A continue token stays valid until compaction, as kube-apiserver's, however many changes push the
    resource's watch history past the token's resourceVersion."""
    for i in range(5):
        await cluster.store.create("configmaps", {"metadata": {"name": f"cm-{i}", "namespace": "default"}})
    core = client.CoreV1Api(api)
    page = await core.list_namespaced_config_map("default", limit=2)
    for i in range(cluster.store.history_size + 5):
        await cluster.store.patch("configmaps", "default", "cm-4", "merge", {"data": {"n": str(i)}})
    rest = await core.list_namespaced_config_map("default", limit=10, _continue=page.metadata._continue)
    assert [o.metadata.name for o in rest.items] == ["cm-2", "cm-3", "cm-4"]


async def test_label_and_field_selectors(cluster: SimCluster, api: client.ApiClient) -> None:
    store = cluster.store
    for name, labels, node, phase in [
        ("a", {"app": "web", "tier": "fe"}, "n1", "Running"),
        ("b", {"app": "web"}, "n2", "Pending"),
        ("c", {"app": "db", "tier": "be"}, "n1", "Running"),
        ("d", {}, "", "Pending"),
    ]:
        pod = {
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": node},
        }
        created = await store.create("pods", pod)
        await store.update("pods", dict(created, status={"phase": phase}), subresource="status")
    core = client.CoreV1Api(api)

    async def names(**kw: Any) -> list[str]:
        res = await core.list_namespaced_pod("default", **kw)
        return sorted(p.metadata.name for p in res.items)

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app==web,tier") == ["a"]
    assert await names(label_selector="app!=web") == ["c", "d"]
    assert await names(label_selector="tier in (fe,be)") == ["a", "c"]
    assert await names(label_selector="tier notin (fe)") == ["b", "c", "d"]
    assert await names(label_selector="!tier") == ["b", "d"]
    assert await names(field_selector="spec.nodeName=n1") == ["a", "c"]
    assert await names(field_selector="status.phase!=Running") == ["b", "d"]
    assert await names(field_selector="metadata.name==b") == ["b"]
    assert await names(field_selector="spec.nodeName=n1,status.phase=Running", label_selector="app=db") == [
        "c"
    ]
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert err.value.status == 400


async def test_watch_events_bookmarks_and_410_after_compaction(
    cluster: SimCluster, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    listed = await core.list_namespaced_config_map("default")
    rv = listed.metadata.resource_version
    await core.create_namespaced_config_map("default", _any({"metadata": {"name": "w1"}}))
    await core.patch_namespaced_config_map("w1", "default", {"data": {"k": "v"}})
    seen: list[tuple[str, str]] = []
    bookmarks = 0
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        )
        async for ev in stream:
            if ev["type"] == "BOOKMARK":
                bookmarks += 1
                assert int(ev["raw_object"]["metadata"]["resourceVersion"]) >= int(rv)
                if len(seen) >= 3:
                    break
                continue
            seen.append((ev["type"], ev["object"].metadata.name))
            if len(seen) == 2:
                await core.delete_namespaced_config_map("w1", "default")
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    assert bookmarks >= 1
    cluster.faults.compact()
    with pytest.raises(ApiException) as err:
        await _drain_watch(core, rv)
    assert err.value.status == 410
    # kubernetes-asyncio turns the ERROR event's Status into "<reason>: <message>".
    assert str(err.value.reason).startswith("Expired: ")


async def _drain_watch(core: client.CoreV1Api, rv: str) -> None:
    async with watch.Watch() as w:
        async for _ in w.stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=2
        ):
            pass


async def test_raw_watch_initial_events_selector_transitions_and_drop(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    store = cluster.store
    await store.create(
        "configmaps", {"metadata": {"name": "pre", "namespace": "default", "labels": {"w": "1"}}}
    )
    async with http.get(
        "/api/v1/namespaces/default/configmaps", params={"watch": "1", "labelSelector": "w=1"}
    ) as resp:
        assert resp.status == 200
        first = await read_events(resp, 1)
        assert first[0]["type"] == "ADDED"  # no resourceVersion: synthetic ADDED for existing objects
        assert first[0]["object"]["metadata"]["name"] == "pre"
        obj = store.get("configmaps", "default", "pre")
        assert obj is not None
        relabelled = orjson.loads(orjson.dumps(obj))
        relabelled["metadata"]["labels"] = {"w": "2"}
        await store.update("configmaps", relabelled)  # leaves the selector: DELETED for this watcher
        ev = await read_events(resp, 1)
        assert ev[0]["type"] == "DELETED"
        assert cluster.faults.drop_watches() == 1
        assert await asyncio.wait_for(resp.content.read(), 5) == b""


async def test_watch_send_initial_events_ends_with_annotated_bookmark(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    await cluster.store.create("configmaps", {"metadata": {"name": "x", "namespace": "default"}})
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": "3",
    }
    async with http.get("/api/v1/namespaces/default/configmaps", params=params) as resp:
        events = await read_events(resp, 2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_custom_objects_crud_with_status_merge_patch(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    created = await co.create_namespaced_custom_object(
        VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, _vpa("v1")
    )
    assert created["metadata"]["generation"] == 1
    status = {
        "status": {
            "recommendation": {
                "containerRecommendations": [
                    {"containerName": "c", "target": {"cpu": "250m", "memory": "256Mi"}}
                ]
            }
        }
    }
    patched = await co.patch_namespaced_custom_object_status(  # type: ignore[call-arg]
        VPA_GROUP,
        VPA_VERSION,
        "default",
        VPA_PLURAL,
        "v1",
        status,
        _content_type="application/merge-patch+json",
    )
    assert patched["status"]["recommendation"]["containerRecommendations"][0]["target"]["cpu"] == "250m"
    assert patched["metadata"]["generation"] == 1  # status writes never bump generation
    # A main-resource write ignores status and bumps generation on a spec change.
    spec_patch = {"spec": {"updatePolicy": {"updateMode": "Off"}}, "status": {"recommendation": None}}
    after = await co.patch_namespaced_custom_object(  # type: ignore[call-arg]
        VPA_GROUP,
        VPA_VERSION,
        "default",
        VPA_PLURAL,
        "v1",
        spec_patch,
        _content_type="application/merge-patch+json",
    )
    assert after["metadata"]["generation"] == 2
    assert after["status"]["recommendation"]["containerRecommendations"][0]["containerName"] == "c"
    # A /status write ignores spec changes.
    back = dict(after, spec=dict(after["spec"], updatePolicy={"updateMode": "Initial"}))
    replaced = await co.replace_namespaced_custom_object_status(
        VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, "v1", back
    )
    assert replaced["spec"]["updatePolicy"]["updateMode"] == "Off"
    listed = await co.list_namespaced_custom_object(VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["v1"]
    await co.delete_namespaced_custom_object(VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, "v1")
    listed = await co.list_namespaced_custom_object(VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL)
    assert listed["items"] == []


async def test_custom_object_schema_validation_and_pruning(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as err:
        await co.create_namespaced_custom_object(
            VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, _vpa("bad", mode="Sometimes")
        )
    assert err.value.status == 422
    body = _status(err.value)
    assert body["reason"] == "Invalid"
    assert "spec.updatePolicy.updateMode" in body["message"]
    assert body["details"]["causes"][0]["reason"] == "FieldValueNotSupported"
    missing = _vpa("nore")
    del missing["spec"]["targetRef"]["kind"]
    with pytest.raises(ApiException) as err:
        await co.create_namespaced_custom_object(VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, missing)
    assert "spec.targetRef.kind: Required value" in _status(err.value)["message"]
    extra = _vpa("extra")
    extra["spec"]["bogusField"] = 1
    created = await co.create_namespaced_custom_object(VPA_GROUP, VPA_VERSION, "default", VPA_PLURAL, extra)
    assert "bogusField" not in created["spec"]  # pruned
    # Custom resources do not accept strategic merge patches.
    with pytest.raises(ApiException) as err:
        await co.patch_namespaced_custom_object(  # type: ignore[call-arg]
            VPA_GROUP,
            VPA_VERSION,
            "default",
            VPA_PLURAL,
            "extra",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


async def test_pod_graceful_deletion_finalizers_and_gc(cluster: SimCluster) -> None:
    store = cluster.store
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
    }
    await store.create("pods", pod)
    gone = await store.delete("pods", "default", "p", grace_period_s=30)
    assert gone is not None
    kept = store.get("pods", "default", "p")
    assert kept is not None
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 30
    assert kept["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    await store.delete("pods", "default", "p", grace_period_s=0)
    assert store.get("pods", "default", "p") is None
    # Finalizers hold an object until removed.
    await store.create(
        "configmaps", {"metadata": {"name": "f", "namespace": "default", "finalizers": ["x/y"]}}
    )
    await store.delete("configmaps", "default", "f")
    held = store.get("configmaps", "default", "f")
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]
    released = orjson.loads(orjson.dumps(held))
    released["metadata"]["finalizers"] = []
    await store.update("configmaps", released)
    assert store.get("configmaps", "default", "f") is None
    # Owner references: background cascade, and orphaning.
    owner = await store.create("configmaps", {"metadata": {"name": "owner", "namespace": "default"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    for i in range(3):
        await store.create(
            "secrets", {"metadata": {"name": f"dep{i}", "namespace": "default", "ownerReferences": [ref]}}
        )
    await store.delete("configmaps", "default", "owner")
    assert store.list("secrets", "default") == []
    owner = await store.create("configmaps", {"metadata": {"name": "owner2", "namespace": "default"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": owner["metadata"]["uid"]}
    await store.create(
        "secrets", {"metadata": {"name": "orphan", "namespace": "default", "ownerReferences": [ref]}}
    )
    await store.delete("configmaps", "default", "owner2", propagation="Orphan")
    orphan = store.get("secrets", "default", "orphan")
    assert orphan is not None
    assert "ownerReferences" not in orphan["metadata"]


async def test_namespace_deletion_removes_contents(cluster: SimCluster, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespace(_any({"metadata": {"name": "team"}}))
    await core.create_namespaced_config_map("team", _any({"metadata": {"name": "a"}}))
    await core.delete_namespace("team")
    assert cluster.store.get("namespaces", None, "team") is None
    assert cluster.store.list("configmaps", "team") == []


async def test_faults_inject_pause_and_clock_endpoints(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    handle = cluster.faults.inject(verb="list", resource="pods", code=500, count=1)
    async with http.get("/api/v1/pods") as r:
        assert r.status == 500
        assert (await r.json())["reason"] == "InternalError"
    async with http.get("/api/v1/pods") as r:
        assert r.status == 200
    assert handle.hits == 1
    cluster.faults.inject(verb="get", resource="leases.coordination.k8s.io", code=429, user_agent="picky")
    async with http.get(
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/x", headers={"User-Agent": "picky/1.0"}
    ) as r:
        assert r.status == 429
        assert r.headers["Retry-After"] == "1"
    async with http.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/x") as r:
        assert r.status == 404  # other user agents are unaffected
    cluster.faults.clear()
    cluster.faults.pause()
    task = asyncio.ensure_future(http.get("/api/v1/namespaces"))
    await asyncio.sleep(0.2)
    assert not task.done()
    cluster.faults.resume()
    resp = await asyncio.wait_for(task, 5)
    assert resp.status == 200
    resp.release()
    async with http.post(
        "/sim/v1/faults/inject", json={"verb": "create", "resource": "configmaps", "code": 409}
    ) as r:
        assert r.status == 201
    async with http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "z"}}) as r:
        assert r.status == 409
    async with http.post("/sim/v1/faults/clear") as r:
        assert r.status == 200
    async with http.get("/sim/v1/clock") as r:
        clock = await r.json()
    assert clock == {"now": cluster.clock.now(), "timeScale": 0.0}
    async with http.post("/sim/v1/clock/advance", json={"seconds": 90}) as r:
        assert (await r.json())["now"] == clock["now"] + 90


async def test_field_validation_modes_for_custom_resources(http: aiohttp.ClientSession) -> None:
    path = "/apis/autoscaling.k8s.io/v1/namespaces/default/verticalpodautoscalers"
    body = _vpa("fv")
    body["spec"]["surprise"] = True
    async with http.post(path, json=body) as r:  # default: Warn
        assert r.status == 201
        assert r.headers.getall("Warning") == [r'299 - "unknown field \"spec.surprise\""']
        assert "surprise" not in (await r.json())["spec"]
    async with http.post(
        path, params={"fieldValidation": "Strict"}, json=dict(body, metadata={"name": "fv2"})
    ) as r:
        assert r.status == 400
        assert 'strict decoding error: unknown field "spec.surprise"' in (await r.json())["message"]
    async with http.post(
        path, params={"fieldValidation": "Ignore"}, json=dict(body, metadata={"name": "fv3"})
    ) as r:
        assert r.status == 201
        assert "Warning" not in r.headers


async def test_discovery_and_misc_errors(http: aiohttp.ClientSession) -> None:
    aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    async with http.get("/apis", headers={"Accept": aggregated}) as r:
        assert r.headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
        groups = {g["metadata"]["name"]: g for g in (await r.json())["items"]}
    apps = {res["resource"]: res for res in groups["apps"]["versions"][0]["resources"]}
    assert apps["deployments"]["scope"] == "Namespaced"
    assert {s["subresource"]: s["responseKind"]["kind"] for s in apps["deployments"]["subresources"]} == {
        "status": "Deployment",
        "scale": "Scale",
    }
    async with http.get("/api", headers={"Accept": aggregated}) as r:
        (core,) = (await r.json())["items"]
    assert core["metadata"]["name"] == ""
    assert "pods" in {res["resource"] for res in core["versions"][0]["resources"]}
    async with http.get("/apis/apps/v1") as r:
        doc = await r.json()
    by_name = {res["name"]: res for res in doc["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert by_name["deployments/scale"]["kind"] == "Scale"
    assert by_name["deployments/status"]["verbs"] == ["get", "patch", "update"]
    async with http.get("/apis/autoscaling.k8s.io/v1") as r:
        vpa = {res["name"]: res for res in (await r.json())["resources"]}
    assert vpa["verticalpodautoscalers"]["shortNames"] == ["vpa"]
    assert "verticalpodautoscalers/status" in vpa
    async with http.get("/apis/autoscaling.k8s.io/v1beta2") as r:
        assert r.status == 404  # not served
    async with http.get("/version") as r:
        assert (await r.json())["gitVersion"] == "v1.37.0"  # the newest supported release by default
    for path in ("/healthz", "/readyz", "/livez"):
        async with http.get(path) as r:
            assert r.status == 200
    async with http.patch(
        "/api/v1/namespaces/default/configmaps/x", data=b"{}", headers={"Content-Type": "text/plain"}
    ) as r:
        assert r.status == 415
    # A body without a Content-Type (`kubectl create --raw -f -`) is read as JSON, as kube-apiserver does.
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"raw"}}'
    async with http.post("/api/v1/namespaces/default/configmaps", data=body,
                         skip_auto_headers=["Content-Type"]) as r:
        assert r.status == 201, await r.text()
        assert (await r.json())["metadata"]["name"] == "raw"
    async with http.request("OPTIONS", "/api/v1/namespaces/default/configmaps/x") as r:
        assert r.status == 405
        assert (await r.json())["reason"] == "MethodNotAllowed"


async def test_in_process_subscription_registers_at_call_time(cluster: SimCluster) -> None:
    store = cluster.store
    sub = store.subscribe("configmaps")
    await store.create("configmaps", {"metadata": {"name": "s1", "namespace": "default"}})
    await store.patch("configmaps", "default", "s1", "merge", {"data": {"a": "1"}})
    await store.delete("configmaps", "default", "s1")
    events = [await asyncio.wait_for(sub.__anext__(), 2) for _ in range(3)]
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "s1"),
        ("MODIFIED", "s1"),
        ("DELETED", "s1"),
    ]
    assert events[1].object["data"] == {"a": "1"}
    assert len(store.watchers["configmaps"]) == 1
    await sub.aclose()  # type: ignore[attr-defined]
    assert len(store.watchers["configmaps"]) == 0


async def test_delete_response_shapes(cluster: SimCluster, http: aiohttp.ClientSession) -> None:
    cm = await cluster.store.create("configmaps", {"metadata": {"name": "gone", "namespace": "default"}})
    async with http.delete("/api/v1/namespaces/default/configmaps/gone") as r:
        assert r.status == 200
        body = await r.json()
    assert body["kind"] == "Status"
    assert body["status"] == "Success"
    assert body["details"] == {"name": "gone", "kind": "configmaps", "uid": cm["metadata"]["uid"]}
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
    }
    await cluster.store.create("pods", pod)
    async with http.delete("/api/v1/namespaces/default/pods/p", json={"gracePeriodSeconds": 10}) as r:
        assert r.status == 200  # graceful: the object, still present, with its deletion timestamp
        body = await r.json()
    assert body["kind"] == "Pod"
    assert body["metadata"]["deletionGracePeriodSeconds"] == 10
    async with http.delete("/api/v1/namespaces/default/pods/p", params={"gracePeriodSeconds": "0"}) as r:
        assert r.status == 200
        assert (await r.json())["kind"] == "Pod"  # pods return the deleted object
    assert cluster.store.get("pods", "default", "p") is None
    async with http.delete("/api/v1/namespaces/default/pods/p") as r:
        assert r.status == 404


async def test_malformed_bodies_are_client_errors(http: aiohttp.ClientSession) -> None:
    cases = [
        (b'{"metadata": {"name": 5}}', 400),
        (b'{"metadata": {"name": "x", "labels": {"a": 1}}}', 400),
        (b"[1, 2]", 400),
        (b"{not json", 400),
        (b'{"metadata": {}}', 422),
    ]
    for body, code in cases:
        async with http.post(
            "/api/v1/namespaces/default/configmaps", data=body, headers={"Content-Type": "application/json"}
        ) as r:
            assert r.status == code, (body, await r.text())
            assert (await r.json())["kind"] == "Status"


async def test_watch_replays_to_the_same_state_as_list_under_concurrent_writes(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    """A watcher that applies every event from a LIST's resourceVersion ends with exactly what LIST shows."""
    import random

    rng = random.Random(7)
    store = cluster.store
    for i in range(20):
        await store.create(
            "configmaps", {"metadata": {"name": f"c{i}", "namespace": "default"}, "data": {"v": "0"}}
        )
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        listed = await r.json()
    state = {o["metadata"]["name"]: o for o in listed["items"]}
    start_rv = listed["metadata"]["resourceVersion"]

    async def call(method: str, url: str, **kw: Any) -> None:
        async with http.request(method, url, **kw) as r:
            await r.read()

    async def writer(w: int) -> None:
        base = "/api/v1/namespaces/default/configmaps"
        for step in range(40):
            name = f"c{rng.randrange(30)}"
            op = rng.choice(["create", "patch", "patch", "delete"])
            if op == "create":
                await call("POST", base, json={"metadata": {"name": name}, "data": {"v": f"{w}-{step}"}})
            elif op == "patch":
                await call(
                    "PATCH",
                    f"{base}/{name}",
                    json={"data": {"v": f"{w}-{step}"}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
            else:
                await call("DELETE", f"{base}/{name}")

    await asyncio.gather(*(writer(w) for w in range(4)))
    final_rv = str(store.rv)
    async with http.get(
        "/api/v1/namespaces/default/configmaps",
        params={"watch": "1", "resourceVersion": start_rv, "allowWatchBookmarks": "true"},
    ) as resp:
        last = int(start_rv)
        while True:
            ev = orjson.loads(await asyncio.wait_for(resp.content.readline(), 5))
            rv = ev["object"]["metadata"]["resourceVersion"]
            if ev["type"] == "BOOKMARK":
                if rv == final_rv:
                    break
                continue
            assert int(rv) > last  # strictly increasing resourceVersions
            last = int(rv)
            name = ev["object"]["metadata"]["name"]
            if ev["type"] == "DELETED":
                del state[name]
            else:
                state[name] = ev["object"]
            if rv == final_rv:
                break
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        now = {o["metadata"]["name"]: o for o in (await r.json())["items"]}
    assert state == now


async def test_events_k8s_io_is_a_view_of_core_events(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
    body = {
        "metadata": {"name": "e1"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "resized in place",
        "reason": "InPlaceResizedByVPA",
        "type": "Normal",
        "reportingController": "vpa-updater",
        "reportingInstance": "vpa-updater-1",
        "action": "Resize",
        "eventTime": "2026-01-01T00:00:00.000000Z",
    }
    async with http.post(v1, json=body) as r:
        assert r.status == 201
        created = await r.json()
    assert created["apiVersion"] == "events.k8s.io/v1"
    assert created["note"] == "resized in place"
    core = cluster.store.get("events", "default", "e1")
    assert core is not None
    assert core["message"] == "resized in place"
    assert core["involvedObject"]["name"] == "p"
    assert core["reportingComponent"] == "vpa-updater"
    # A core/v1 Event shows up through events.k8s.io/v1, on LIST and on WATCH.
    async with http.get(
        v1, params={"watch": "1", "resourceVersion": created["metadata"]["resourceVersion"]}
    ) as w:
        await cluster.store.create(
            "events",
            {
                "metadata": {"name": "e2", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": "q", "namespace": "default"},
                "message": "evicted",
                "reason": "EvictedByVPA",
                "count": 3,
                "type": "Normal",
            },
        )
        ev = orjson.loads(await asyncio.wait_for(w.content.readline(), 5))
    assert ev["type"] == "ADDED"
    assert ev["object"]["apiVersion"] == "events.k8s.io/v1"
    assert ev["object"]["regarding"]["name"] == "q"
    assert ev["object"]["deprecatedCount"] == 3
    async with http.get(v1) as r:
        listed = await r.json()
    assert sorted(e["metadata"]["name"] for e in listed["items"]) == ["e1", "e2"]
    async with http.patch(
        f"{v1}/e2", json={"note": "evicted again"}, headers={"Content-Type": "application/merge-patch+json"}
    ) as r:
        assert (await r.json())["note"] == "evicted again"
    stored = cluster.store.get("events", "default", "e2")
    assert stored is not None
    assert stored["message"] == "evicted again"
    async with http.delete(f"{v1}/e1") as r:
        assert r.status == 200
    assert cluster.store.get("events", "default", "e1") is None


async def test_aggregated_resources_are_routed_and_discoverable(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    calls: list[tuple[str | None, str | None, str | None]] = []

    def lister(namespace: str | None, name: str | None, selector: str | None) -> list[dict[str, Any]]:
        calls.append((namespace, name, selector))
        items: list[dict[str, Any]] = [
            {
                "kind": "PodMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": n, "namespace": "default"},
                "containers": [],
            }
            for n in ("a", "b")
        ]
        return [i for i in items if name is None or i["metadata"]["name"] == name]

    cluster.hooks.add_aggregated_resource(
        group="metrics.k8s.io",
        version="v1beta1",
        plural="pods",
        kind="PodMetrics",
        namespaced=True,
        lister=lister,
    )
    async with http.get("/apis/metrics.k8s.io/v1beta1") as r:
        resources = (await r.json())["resources"]
    assert resources == [
        {
            "name": "pods",
            "singularName": "",
            "namespaced": True,
            "kind": "PodMetrics",
            "verbs": ["get", "list"],
        }
    ]
    async with http.get(
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", params={"labelSelector": "a=b"}
    ) as r:
        listed = await r.json()
    assert listed["kind"] == "PodMetricsList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b"]
    async with http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/b") as r:
        assert (await r.json())["metadata"]["name"] == "b"
    async with http.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/zzz") as r:
        assert r.status == 404
    async with http.get("/apis/metrics.k8s.io/v1beta1/pods") as r:
        assert r.status == 200
    async with http.post("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", json={}) as r:
        assert r.status == 405
    assert calls[:3] == [("default", None, "a=b"), ("default", "b", None), ("default", "zzz", None)]
    assert calls[3] == (None, None, None)


async def test_slow_watchers_are_disconnected(cluster: SimCluster, http: aiohttp.ClientSession) -> None:
    store = cluster.store
    store.max_watch_backlog = 5
    rv = str(store.rv)
    async with http.get(
        "/api/v1/namespaces/default/configmaps", params={"watch": "1", "resourceVersion": rv}
    ) as r:
        assert store.watchers.get("configmaps")  # registered before the response headers were sent
        # Writes arrive faster than this client reads: synchronous commits, no await in between.
        for i in range(20):
            store._commit(
                store.resource_type("configmaps"),
                "ADDED",
                {"metadata": {"name": f"x{i}", "namespace": "default"}},
                None,
            )
        assert not store.watchers["configmaps"]
        body = await asyncio.wait_for(r.content.read(), 5)
    lines = body.splitlines()
    assert 1 <= len(lines) <= 6
    assert all(orjson.loads(line)["type"] == "ADDED" for line in lines)


async def test_foreground_deletion_waits_for_dependents(cluster: SimCluster) -> None:
    store = cluster.store

    def ref(obj: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "name": obj["metadata"]["name"],
                "uid": obj["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    spec = {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    }
    dep = await store.create(
        "deployments.apps", {"metadata": {"name": "d", "namespace": "default"}, "spec": spec}
    )
    rs = await store.create(
        "replicasets.apps",
        {"metadata": {"name": "d-1", "namespace": "default", "ownerReferences": ref(dep)}, "spec": spec},
    )
    pod_spec = {"containers": [{"name": "c", "image": "x"}]}
    await store.create(
        "pods",
        {
            "metadata": {"name": "running", "namespace": "default", "ownerReferences": ref(rs)},
            "spec": dict(pod_spec, nodeName="n1"),
        },
    )
    await store.create(
        "pods",
        {
            "metadata": {"name": "pending", "namespace": "default", "ownerReferences": ref(rs)},
            "spec": pod_spec,
        },
    )
    await store.delete("deployments.apps", "default", "d", propagation="Foreground")
    held = store.get("deployments.apps", "default", "d")
    assert held is not None
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert held["metadata"]["deletionTimestamp"]
    rs_held = store.get("replicasets.apps", "default", "d-1")
    assert rs_held is not None
    assert rs_held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert store.get("pods", "default", "pending") is None
    running = store.get("pods", "default", "running")
    assert running is not None
    assert running["metadata"]["deletionGracePeriodSeconds"] == 30
    # The node agent finishing the graceful deletion releases the whole chain.
    await store.delete("pods", "default", "running", grace_period_s=0)
    assert store.get("replicasets.apps", "default", "d-1") is None
    assert store.get("deployments.apps", "default", "d") is None


async def test_history_is_per_resource_like_the_watch_cache() -> None:
    async with SimCluster(behaviour=False, history_size=10) as cluster:
        store = cluster.store
        rv = store.rv
        await store.create("secrets", {"metadata": {"name": "quiet", "namespace": "default"}})
        for i in range(30):  # churn on another resource pushes only that resource's window forward
            await store.create("configmaps", {"metadata": {"name": f"busy{i}", "namespace": "default"}})
        w = store.add_watcher("secrets", "default", since_rv=rv)
        ev = w.queue.get_nowait()
        assert ev is not None
        assert not isinstance(ev, str)
        assert (ev.type, ev.obj["metadata"]["name"]) == ("ADDED", "quiet")
        store.remove_watcher(w)
        with pytest.raises(ApiError) as err:
            store.add_watcher("configmaps", "default", since_rv=rv)
        assert err.value.code == 410
        assert store.compacted_for("secrets") == 0
        cluster.faults.compact()
        assert store.compacted_for("secrets") == store.rv
