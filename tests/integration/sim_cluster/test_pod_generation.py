"""Pod `metadata.generation`: scheduling (a binding) leaves it alone; an in-place resize bumps it."""

from __future__ import annotations

from vpa.sim import SimCluster

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "g", "namespace": "default"},
    "spec": {
        "containers": [
            {"name": "app", "image": "example.com/app:1", "resources": {"requests": {"cpu": "100m"}}}
        ]
    },
}


async def test_binding_does_not_bump_generation_and_resize_does() -> None:
    async with SimCluster(nodes=1, behaviour=True, kubernetes_version="1.35") as cluster:
        await cluster.store.create("pods", POD)
        await cluster.settle()
        pod = cluster.store.get("pods", "default", "g")
        assert pod is not None
        assert pod["spec"]["nodeName"]  # scheduled through pods/binding
        assert pod["metadata"]["generation"] == 1
        resized = {**pod, "spec": {**pod["spec"], "containers": [
            {**pod["spec"]["containers"][0], "resources": {"requests": {"cpu": "200m"}}}
        ]}}  # fmt: skip
        await cluster.store.update("pods", resized, subresource="resize")
        await cluster.settle()
        pod = cluster.store.get("pods", "default", "g")
        assert pod is not None
        assert pod["metadata"]["generation"] == 2
