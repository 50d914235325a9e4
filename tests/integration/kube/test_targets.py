"""`TargetResolver` against the simulated API server: selectors, the top-most check, caching."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.kube.helpers import new_client
from vpa.kube.client import KubeClient
from vpa.kube.targets import TargetResolver
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef
from vpa.sim import SimCluster


def widget_crd(scale: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "subresources": {"status": {}},
    }
    if scale:
        version["subresources"]["scale"] = {
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
            "labelSelectorPath": ".status.selector",
        }
    kind = "Widget" if scale else "Gadget"
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind}, "versions": [version]},
    }


def deployment(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "uid": "u-1", "controller": True}]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "x"}]}}},
    }


@pytest.fixture
async def env() -> AsyncIterator[tuple[SimCluster, KubeClient]]:
    async with SimCluster(nodes=0, behaviour=False) as cluster:
        await cluster.install_crd(widget_crd(scale=True))
        await cluster.install_crd(widget_crd(scale=False))
        await cluster.settle()
        client = await new_client(cluster, cluster.clock)
        try:
            yield cluster, client
        finally:
            await client.close()


async def test_well_known_scalable_and_unsupported_targets(env: tuple[SimCluster, KubeClient]) -> None:
    cluster, client = env
    store = cluster.store
    await store.create("deployments.apps", deployment("web"))
    widget = await store.create("widgets.example.com", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
        "spec": {"size": 1}})
    status = {"size": 1, "selector": "app=w,tier in (a)"}
    await store.update("widgets.example.com", dict(widget, status=status), subresource="status")
    await store.create("gadgets.example.com", {
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"}})
    # A Deployment owned by the scalable Widget: not top-most.
    await store.create("deployments.apps", deployment("owned", {"apiVersion": "example.com/v1",
                                                                "kind": "Widget", "name": "w"}))
    await store.create("cronjobs.batch", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {
            "metadata": {"labels": {"job": "nightly"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}})
    resolver = TargetResolver(client, cluster.clock)

    web = await resolver.resolve("default", TargetRef("apps/v1", "Deployment", "web"))
    assert web.ok
    assert web.selector == Selector.from_match_labels({"app": "web"})
    nightly = await resolver.resolve("default", TargetRef("batch/v1", "CronJob", "nightly"))
    assert nightly.selector == Selector.from_match_labels({"job": "nightly"})
    w = await resolver.resolve("default", TargetRef("example.com/v1", "Widget", "w"))
    assert w.ok
    assert w.selector == Selector.parse("app=w,tier in (a)")

    owned = await resolver.resolve("default", TargetRef("apps/v1", "Deployment", "owned"))
    assert owned.selector is None
    assert owned.unsupported == ("The target apps/v1.Deployment/owned has a parent controller but it should "
                                 "point to a topmost well-known or scalable controller")
    gadget = await resolver.resolve("default", TargetRef("example.com/v1", "Gadget", "g"))
    assert gadget.unsupported is not None
    assert "neither a well-known controller nor a resource with a scale subresource" in gadget.unsupported
    missing = await resolver.resolve("default", TargetRef("apps/v1", "Deployment", "nope"))
    assert missing.unsupported == "Cannot read targetRef. Reason: Deployment default/nope does not exist"
    no_kind = await resolver.resolve("default", TargetRef("example.com/v1", "Thing", "t"))
    assert no_kind.unsupported == "Cannot read targetRef. Reason: no resource of kind Thing in example.com/v1"


async def test_answers_are_cached_and_refreshed_on_schedule(env: tuple[SimCluster, KubeClient]) -> None:
    cluster, client = env
    for i in range(20):
        await cluster.store.create("deployments.apps", deployment(f"web-{i}"))
    resolver = TargetResolver(client, cluster.clock, workload_refresh_s=300, missing_retry_s=60)
    refs = [TargetRef("apps/v1", "Deployment", f"web-{i}") for i in range(20)]
    for ref in refs:
        assert (await resolver.resolve("default", ref)).ok
    assert resolver.requests == 1  # one LIST for all twenty
    missing = TargetRef("apps/v1", "Deployment", "late")
    assert not (await resolver.resolve("default", missing)).ok
    assert not (await resolver.resolve("default", missing)).ok
    assert resolver.requests == 2  # one GET; the 404 is remembered
    await cluster.store.create("deployments.apps", deployment("late"))
    cluster.clock.advance(61)
    assert (await resolver.resolve("default", missing)).ok  # asked again after missing_retry_s
    assert resolver.requests == 3
    for ref in refs:
        await resolver.resolve("default", ref)
    assert resolver.requests == 3
    cluster.clock.advance(300)
    for ref in refs:
        await resolver.resolve("default", ref)
    assert resolver.requests == 4  # the snapshot is listed again after workload_refresh_s
