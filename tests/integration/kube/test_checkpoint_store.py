"""CheckpointStore against the simulated API server: status replaced, our annotation set on checkpoints
written by upstream (no annotations map) and by us, and created when missing."""

from __future__ import annotations

from vpa.kube.statuswriting import CheckpointStore
from vpa.model.clock import VirtualClock
from vpa.sim import SimCluster

from .helpers import new_client

CHECKPOINTS = "verticalpodautoscalercheckpoints.autoscaling.k8s.io"
KEY = "vpa.dev/in-progress-memory-peaks"
STATUS = {"version": "v3", "lastUpdateTime": "2026-01-01T00:00:00Z", "totalSamplesCount": 3}


async def test_write_sets_status_and_annotation_on_upstream_and_own_checkpoints() -> None:
    async with SimCluster(nodes=1, behaviour=False) as cluster:
        upstream_written = {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "web-app", "namespace": "default"},
            "spec": {"vpaObjectName": "web", "containerName": "app"},
            "status": {"version": "v3", "totalSamplesCount": 1, "lastUpdateTime": "2025-12-31T00:00:00Z"},
        }
        await cluster.store.create(CHECKPOINTS, upstream_written)
        client = await new_client(cluster, VirtualClock())
        async with client:
            store = CheckpointStore(client)
            for name in ("web-app", "web-new"):  # an upstream checkpoint, then one that does not exist
                await store.write(
                    "default", name, "web", name.split("-")[1], STATUS, {KEY: '{"v":1,"peaks":[]}'}
                )
                obj = cluster.store.get(CHECKPOINTS, "default", name)
                assert obj is not None
                assert obj["status"] == STATUS
                assert obj["metadata"]["annotations"] == {KEY: '{"v":1,"peaks":[]}'}
            # Ours again: only our key is replaced, other annotations stay.
            obj = cluster.store.get(CHECKPOINTS, "default", "web-app")
            assert obj is not None
            obj["metadata"]["annotations"]["team"] = "a"
            await cluster.store.update(CHECKPOINTS, obj)
            await store.write(
                "default", "web-app", "web", "app", STATUS, {KEY: '{"v":1,"peaks":[["p",1,2,0]]}'}
            )
            obj = cluster.store.get(CHECKPOINTS, "default", "web-app")
            assert obj is not None
            assert obj["metadata"]["annotations"] == {KEY: '{"v":1,"peaks":[["p",1,2,0]]}', "team": "a"}
            # Without annotations (as before): the status alone.
            await store.write("default", "web-app", "web", "app", {**STATUS, "totalSamplesCount": 9})
            obj = cluster.store.get(CHECKPOINTS, "default", "web-app")
            assert obj is not None
            assert obj["status"]["totalSamplesCount"] == 9
