"""Scheduler bookkeeping at modest scale: first-fit order, allocatable never exceeded, deletions free room."""

from __future__ import annotations

from collections import Counter

from tests.integration.sim_cluster.helpers import container, deployment, sim
from vpa.sim.cluster.pods import effective_requests


async def test_first_fit_fills_nodes_in_order_without_overcommitting() -> None:
    async with sim("1.35", nodes=10, cpu="1", memory="4Gi") as (cluster, _http):
        # 12 pods of 100m per node fit by CPU only up to 10: 30 deployments × 40 pods = 1200 pods, 100 fit.
        for i in range(30):
            await cluster.store.create(
                "deployments.apps",
                deployment(
                    f"d{i}", 40, container(cpu="100m", memory="64Mi", cpu_limit=None, memory_limit=None)
                ),
            )
        await cluster.settle()
        pods = cluster.store.list("pods")
        assert len(pods) == 1200
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert len(bound) == 100
        per_node = Counter(p["spec"]["nodeName"] for p in bound)
        assert per_node == {f"node-{i}": 10 for i in range(1, 11)}
        agent = cluster.behaviour.agent
        by_key = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        for node in agent.nodes.values():
            used = sum(effective_requests(by_key[k]["spec"])[0] for k in node.pods)
            assert used == node.sched_cpu == 1000
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        assert all(p["status"]["phase"] == "Pending" for p in pending)
        # Scale one deployment to zero: exactly its running pods' room is reused by pending pods.
        dep = cluster.store.get("deployments.apps", "default", "d0")
        assert dep is not None
        running_d0 = sum(1 for p in bound if p["metadata"]["labels"]["app"] == "d0")
        dep = {**dep, "spec": {**dep["spec"], "replicas": 0}}
        await cluster.store.update("deployments.apps", dep)
        await cluster.settle()
        pods = cluster.store.list("pods")
        assert len(pods) == 1200 - 40
        assert sum(1 for p in pods if p["spec"].get("nodeName")) == 100
        assert running_d0 > 0
        assert all(n.sched_cpu == 1000 for n in agent.nodes.values())
