"""OOM right after start, against a behaving simulated cluster: the recommender still recommends memory.

A container whose working set is above its memory limit from the first moment is OOM-killed before the
metrics API ever reports it, so it has no CPU sample. Upstream keeps only containers with CPU samples and
never recommends for it: the pod crash-loops at its old limit forever (kubernetes/autoscaler #4981, #6236).
"""

from __future__ import annotations

import copy

from tests.integration.components.recommender_helpers import MI, VPAS, create, deployment, harness, vpa
from vpa.kube.converting import vpa_status_from_dict

# 300Mi from the first instant, under a 200Mi limit: killed at every start, never running at a sample.
STARVED = {"app": {"cpu": {"type": "constant", "value": "100m"},
                   "memory": {"type": "constant", "value": "300Mi"}}}


async def test_a_container_oom_killed_before_any_sample_gets_a_memory_recommendation() -> None:
    async with harness() as h:
        await create(h, "deployments.apps", deployment("starved", STARVED, memory_limit="256Mi"))
        await create(h, VPAS, vpa("starved"))
        await h.loop()
        reports = await h.run_for(900, 60.0)
        assert sum(r.ooms for r in reports) >= 1
        assert sum(r.samples for r in reports) == 0  # the container never ran at a sampling instant
        status = vpa_status_from_dict(h.vpa("starved")["status"])
        assert status.recommendation is not None, "no recommendation for an OOM-killed container"
        (container,) = status.recommendation.containers
        assert container.container_name == "app"
        # The OOM bump on the 256Mi request (no usage seen): max(256Mi + 100Mi, 256Mi × 1.2) = 356Mi, then
        # the histogram bucket holding it and the 15% margin: above the bump, and well above the limit.
        target = container.target.memory_bytes
        assert target is not None
        assert target >= 356 * MI
        # No CPU sample: no CPU recommendation (the pod keeps its own CPU request).
        assert container.target.cpu_millicores is None
        assert container.lower_bound.cpu_millicores is None
        assert container.upper_bound.cpu_millicores is None


async def test_the_first_oom_of_a_pod_no_loop_has_loaded_yet_counts() -> None:
    # The pod starts and is killed between two loops: its OOM reaches the prompt OOM pass before any loop
    # has put the pod into the model. Dropping it ("pod ... is not tracked", as upstream does) would leave
    # the container without history until a loop loads the pod and the next kill comes, a crash back-off
    # later; the pass tracks the pod from the cache instead and records the kill.
    async with harness() as h:
        await create(h, "deployments.apps", deployment("starved", STARVED, replicas=0, memory_limit="256Mi"))
        await create(h, VPAS, vpa("starved"))
        await h.loop()  # the VPA and its (empty) workload known; no pod yet
        stored = h.cluster.store.get("deployments.apps", "default", "starved")
        assert stored is not None
        scaled = copy.deepcopy(stored)
        scaled["spec"]["replicas"] = 1
        await h.cluster.store.update("deployments.apps", scaled)
        await h.cluster.settle()
        await h.cluster.advance(5)
        await h.caught_up()
        report = await h.rec.react_to_ooms()
        assert report.ooms >= 1
        await h.loop()  # no time passes: no further kill, so the recommendation is from the first ones
        status = vpa_status_from_dict(h.vpa("starved")["status"])
        assert status.recommendation is not None, "the first OOM kill was dropped"
        (container,) = status.recommendation.containers
        assert container.target.memory_bytes is not None
        assert container.target.memory_bytes >= 356 * MI


async def test_the_oom_of_a_pod_deleted_before_the_next_loop_still_counts() -> None:
    # Upstream 1.8: a pod gone from the cluster is dropped from the model only after the loop has applied
    # the OOMs observed since the last loop (`DeleteRemovedPods` after the metrics and OOM step), so a kill
    # just before a pod's deletion still raises the recommendation. The prompt OOM pass is not run here:
    # only the loop sees the kill, after the pod is gone.
    async with harness() as h:
        await create(h, "deployments.apps", deployment("starved", STARVED, memory_limit="256Mi"))
        await create(h, VPAS, vpa("starved"))
        first = await h.loop()  # the pod in the model, with whatever kills happened at its start
        await h.cluster.advance(60)  # crash back-off over: killed again at least once meanwhile
        stored = h.cluster.store.get("deployments.apps", "default", "starved")
        assert stored is not None
        scaled = copy.deepcopy(stored)
        scaled["spec"]["replicas"] = 0
        await h.cluster.store.update("deployments.apps", scaled)
        await h.cluster.settle()
        await h.caught_up()
        assert not [p for p in h.cluster.store.list("pods") if p["metadata"]["name"].startswith("starved")]
        report = await h.loop()
        assert report.ooms >= 1, "the OOM kills of the deleted pod were dropped"
        assert first.pods == 1
        assert report.pods == 0
