"""`vpa sim --control-plane=kubernetes --kubelet=hollow`: a hollow kubelet of the release joins as a node.

One hollow node, sized by `--node-cpu`/`--node-memory`, must become Ready reporting the release's
`kubeletVersion` and an allocatable equal to the flags; a pod bound to it runs, and metrics.k8s.io reports
its usage from the pod's `sim.vpa.dev/usage` profile. The release is the newest stable one built, or
`$FIDELITY_KUBERNETES_VERSION` (as in the kubelet fidelity suite: v1.38.0-beta.0, whose hollow kubelet is set
up by our own code, not kubemark's). Skips with one line when the release (hollow-node included) is not built.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import pytest

from tests.integration.fidelity.test_api_fidelity import Api
from vpa.sim.kubernetes.cluster import RealCluster
from vpa.sim.kubernetes.releases import ReleaseError, locate

pytestmark = pytest.mark.timeout(240)

RELEASE = os.environ.get("FIDELITY_KUBERNETES_VERSION") or None


@pytest.fixture
async def hollow() -> AsyncIterator[RealCluster]:
    try:
        locate(RELEASE, hollow=True)
    except ReleaseError as err:
        pytest.skip(f"hollow kubelet not built: {err}")
    cluster = RealCluster(
        nodes=1,
        node_cpu="3500m",
        node_memory="6Gi",
        kubelet="hollow",
        metrics_resolution_s=1,
        kubernetes_version=RELEASE,
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


async def test_one_hollow_node_is_ready_with_the_release_and_the_size_asked(hollow: RealCluster) -> None:
    cp = hollow.control_plane
    api = Api("kube-apiserver", cp.url, cp.ca_pem, cp.admin_token)
    await api.open()
    try:
        status, nodes = await api.call("GET", "/api/v1/nodes")
        assert status == 200
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["node-1"]
        node = nodes["items"][0]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == hollow.release
        assert hollow.release.startswith(f"v{hollow.version[0]}.{hollow.version[1]}.")
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready
        assert ready[0]["status"] == "True"
        allocatable = node["status"]["allocatable"]
        assert allocatable["cpu"] == "3500m"
        assert allocatable["memory"] == "6Gi"
        assert allocatable["pods"] == "110"
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "sim"

        usage = json.dumps({"c": {"memory": {"type": "constant", "value": "200Mi"}}})
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"sim.vpa.dev/usage": usage}},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                              "limits": {"memory": "256Mi"}}}],
            },
        }  # fmt: skip
        await api.namespace("t")
        status, _ = await api.call("POST", "/api/v1/namespaces/t/pods", body)
        assert status == 201

        async def running() -> bool:
            _, pod = await api.call("GET", "/api/v1/namespaces/t/pods/p")
            return (pod.get("status") or {}).get("phase") == "Running"

        await api.until("pod p Running on the hollow node", running, 60)
        # A pod without limits: its pod cgroup reads back "no limit", which the kubelet must not trip on.
        bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
                "spec": {"automountServiceAccountToken": False,
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}  # fmt: skip
        status, _ = await api.call("POST", "/api/v1/namespaces/t/pods", bare)
        assert status == 201

        async def bare_running() -> bool:
            _, pod = await api.call("GET", "/api/v1/namespaces/t/pods/bare")
            return (pod.get("status") or {}).get("phase") == "Running"

        await api.until("pod bare Running on the hollow node", bare_running, 60)

        async def metrics() -> dict[str, object] | None:
            code, doc = await api.call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/t/pods/p")
            return doc if code == 200 else None

        doc = await api.until("PodMetrics of p", metrics, 30)
        assert doc["containers"] == [{"name": "c", "usage": {"cpu": "50m", "memory": "204800Ki"}}]
        nodes_of = hollow.hollow
        assert nodes_of is not None

        async def usage_written() -> bool:  # what the hollow kubelet's stats calls answer
            return "t/p/c 209715200\n" in nodes_of.usage_file.read_text()

        await api.until("the pod's usage in the hollow node's usage file", usage_written, 10)
        nodes_of.check_alive()  # no node crashed on the way
    finally:
        await api.close()
