"""Controllers, scheduler and evictions: what the VPA updater relies on when it evicts or waits for pods."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Mapping
from typing import Any

from tests.integration.sim_cluster.helpers import (
    condition,
    container,
    create_pod,
    deployment,
    evict,
    pod,
    sim,
)
from tests.integration.webhook_fake import patching_webhook


def pods_of(cluster, app: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.store.list("pods", "default", label_selector=f"app={app}")
        if not p["metadata"].get("deletionTimestamp")
    ]


@contextlib.asynccontextmanager
async def annotating_webhook() -> AsyncIterator[tuple[str, str, list[str]]]:
    """An HTTPS mutating webhook that annotates every pod it sees; yields (caBundle, names seen)."""
    seen: list[str] = []

    def annotate(review: dict[str, Any]) -> list[dict[str, Any]]:
        obj = review["request"]["object"]
        seen.append(obj["metadata"].get("name") or obj["metadata"].get("generateName", ""))
        return [{"op": "add", "path": "/metadata/annotations", "value": {"admitted-by": "test-webhook"}}]

    async with patching_webhook(annotate) as hook:
        yield hook.url, hook.ca_bundle, seen


async def test_eviction_respects_pdb_and_deployment_recreates_through_admission() -> None:
    async with sim("1.35", nodes=2) as (cluster, http), annotating_webhook() as (url, ca, seen):
        await cluster.store.create(
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "test"},
                "webhooks": [
                    {
                        "name": "test.example.com",
                        "clientConfig": {"url": url, "caBundle": ca},
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["pods"],
                            }
                        ],
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "failurePolicy": "Fail",
                    }
                ],
            },
        )
        await cluster.store.create("deployments.apps", deployment("web", 3))
        await cluster.store.create(
            "poddisruptionbudgets.policy",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        await cluster.settle()
        pdb = cluster.store.get("poddisruptionbudgets.policy", "default", "web")
        assert pdb is not None
        assert counts(pdb) == (3, 2, 3, 1)
        before = pods_of(cluster, "web")
        assert len(before) == 3
        assert all(p["metadata"]["annotations"]["admitted-by"] == "test-webhook" for p in before)
        rs_name = before[0]["metadata"]["ownerReferences"][0]["name"]
        assert rs_name.startswith("web-")
        assert before[0]["metadata"]["labels"]["pod-template-hash"] == rs_name[4:]

        victim, other = before[0]["metadata"]["name"], before[1]["metadata"]["name"]
        code, body = await evict(http, victim)
        assert code == 201, body
        assert body["status"] == "Success"
        # The budget is used up until the replacement is ready.
        code, body = await evict(http, other, version="policy/v1beta1")
        assert code == 429
        assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
        assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"

        await cluster.settle()
        after = pods_of(cluster, "web")
        names = {p["metadata"]["name"] for p in after}
        assert len(after) == 3
        assert victim not in names
        new = next(p for p in after if p["metadata"]["name"] not in {q["metadata"]["name"] for q in before})
        assert new["metadata"]["name"].startswith(f"{rs_name}-")
        assert new["metadata"]["annotations"]["admitted-by"] == "test-webhook"
        assert new["spec"]["containers"][0]["resources"] == before[0]["spec"]["containers"][0]["resources"]
        assert new["status"]["phase"] == "Running"
        assert sum(1 for s in seen if s.startswith(f"{rs_name}-")) == 4
        dep = cluster.store.get("deployments.apps", "default", "web")
        assert dep is not None
        assert dep["status"]["readyReplicas"] == 3
        code, _ = await evict(http, other)
        assert code == 201


def budget(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**spec, "selector": {"matchLabels": {"app": app}}},
    }


BUDGET_COUNTS = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")


def counts(pdb: Mapping[str, Any]) -> tuple[int, ...]:
    """A budget's currentHealthy, desiredHealthy, expectedPods and disruptionsAllowed."""
    return tuple(pdb["status"][k] for k in BUDGET_COUNTS)


async def bare_budget(cluster: Any, **spec: Any) -> dict[str, Any]:
    """Two pods `a` and `b` with no controller, a budget `bare` over them, and its status once settled."""
    for name in ("a", "b"):
        await create_pod(cluster, pod(name, labels={"app": "bare"}))
    await cluster.store.create("poddisruptionbudgets.policy", budget("bare", "bare", **spec))
    await cluster.settle()
    pdb = cluster.store.get("poddisruptionbudgets.policy", "default", "bare")
    assert pdb is not None
    return dict(pdb)


async def test_budget_over_pods_without_a_controller_warns_and_counts_them() -> None:
    async with sim("1.35") as (cluster, http):
        pdb = await bare_budget(cluster, maxUnavailable=0)
        assert counts(pdb) == (2, 0, 0, 0)
        cond = condition(pdb, "DisruptionAllowed")
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "InsufficientPods", "")

        def warnings() -> list[dict[str, Any]]:
            return [e for e in cluster.store.list("events", "default") if e["reason"] == "UnmanagedPods"]

        (warning,) = warnings()
        assert warning["type"] == "Warning"
        assert warning["involvedObject"]["name"] == "bare"
        assert "(selector: &LabelSelector{MatchLabels:map[string]string{app: bare,}," in warning["message"]
        # Every sync warns again; the repeats are counted on the one Event.
        seen = warning["count"]
        stored = cluster.store.get("pods", "default", "a")
        assert stored is not None
        touched = copy.deepcopy(stored)
        touched["metadata"]["annotations"] = {"touched": "yes"}
        await cluster.store.update("pods", touched)
        await cluster.settle()
        (warning,) = warnings()
        assert warning["count"] > seen

        code, body = await evict(http, "a")
        assert code == 429
        assert body["details"]["causes"][0]["message"] == (
            "The disruption budget bare does not allow evicting pods currently"
        )

        # A pod whose controller cannot be found still fails the sync, as in kube.
        stray = pod("c", labels={"app": "bare"})
        stray["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "gone", "controller": True}
        ]
        await create_pod(cluster, stray)
        await cluster.settle()
        failed_pdb = cluster.store.get("poddisruptionbudgets.policy", "default", "bare")
        assert failed_pdb is not None
        cond = condition(failed_pdb, "DisruptionAllowed")
        assert cond is not None
        assert (cond["reason"], cond["message"]) == ("SyncFailed", 'found no controllers for pod "c"')
        events = cluster.store.list("events", "default")
        (failed,) = [e for e in events if e["reason"] == "CalculateExpectedPodCountFailed"]
        assert (failed["type"], failed["involvedObject"]["name"], failed["message"]) == (
            "Warning",
            "bare",
            'Failed to calculate the number of expected pods: found no controllers for pod "c"',
        )
        assert failed_pdb["status"]["disruptionsAllowed"] == 0
        code, body = await evict(http, "a")
        assert code == 429
        assert body["details"]["causes"][0]["message"] == (
            "The disruption budget bare does not allow evicting pods currently because it failed sync: "
            'found no controllers for pod "c"'
        )


async def test_integer_min_available_counts_pods_without_a_controller() -> None:
    async with sim("1.35") as (cluster, _http):
        pdb = await bare_budget(cluster, minAvailable=1)
        assert counts(pdb) == (2, 1, 2, 1)
        assert not [e for e in cluster.store.list("events", "default") if e["reason"] == "UnmanagedPods"]


async def test_budget_over_no_pods_says_so_at_every_sync() -> None:
    async with sim("1.35") as (cluster, _http):
        await cluster.store.create("poddisruptionbudgets.policy", budget("none", "nobody", minAvailable=1))
        await cluster.settle()

        def notices() -> list[dict[str, Any]]:
            return [e for e in cluster.store.list("events", "default") if e["reason"] == "NoPods"]

        (notice,) = notices()
        assert (notice["type"], notice["involvedObject"]["name"], notice["message"]) == (
            "Normal",
            "none",
            "No matching pods found",
        )
        seen = notice["count"]
        stored = cluster.store.get("poddisruptionbudgets.policy", "default", "none")
        assert stored is not None
        assert stored["status"]["expectedPods"] == 0
        touched = copy.deepcopy(stored)
        touched["metadata"]["labels"] = {"touched": "yes"}
        await cluster.store.update("poddisruptionbudgets.policy", touched)
        await cluster.settle()
        (notice,) = notices()
        assert notice["count"] > seen


async def test_integer_min_available_expects_pods_that_have_finished() -> None:
    async with sim("1.35") as (cluster, _http):
        await create_pod(cluster, pod("a", labels={"app": "bare"}))
        done = pod("b", labels={"app": "bare"}, annotations={"sim.vpa.dev/run-seconds": "1"})
        done["spec"]["restartPolicy"] = "Never"
        await create_pod(cluster, done)
        await cluster.advance(5)
        finished = cluster.store.get("pods", "default", "b")
        assert finished is not None
        assert finished["status"]["phase"] == "Succeeded"
        await cluster.store.create("poddisruptionbudgets.policy", budget("bare", "bare", minAvailable=1))
        await cluster.settle()
        pdb = cluster.store.get("poddisruptionbudgets.policy", "default", "bare")
        assert pdb is not None
        assert counts(pdb) == (1, 1, 2, 0)


async def test_eviction_of_missing_pod_and_pod_without_budget() -> None:
    async with sim("1.35") as (cluster, http):
        code, body = await evict(http, "nope")
        assert code == 404
        assert body["reason"] == "NotFound"
        await create_pod(cluster, pod("lonely"))
        code, _ = await evict(http, "lonely")
        assert code == 201
        await cluster.settle()
        assert cluster.store.get("pods", "default", "lonely") is None


async def test_unschedulable_pods_stay_pending_until_room_frees() -> None:
    async with sim("1.35", nodes=2, cpu="2") as (cluster, _http):
        for name in ("a", "b"):
            await create_pod(cluster, pod(name, container(cpu="1500m", cpu_limit="2")))
        waiting = await create_pod(cluster, pod("c", container(cpu="1500m", cpu_limit="2")))
        assert waiting["status"]["phase"] == "Pending"
        assert "nodeName" not in waiting["spec"]
        scheduled = condition(waiting, "PodScheduled")
        assert scheduled is not None
        assert scheduled["status"] == "False"
        assert scheduled["reason"] == "Unschedulable"
        assert scheduled["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
        await cluster.store.delete("pods", "default", "a")
        await cluster.settle()
        now = cluster.store.get("pods", "default", "c")
        assert now is not None
        assert now["status"]["phase"] == "Running"
        assert now["spec"]["nodeName"] == "node-1"


async def test_daemonset_statefulset_and_replication_controller() -> None:
    async with sim("1.35", nodes=3) as (cluster, _http):
        template = {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [container()]}}
        await cluster.store.create(
            "daemonsets.apps",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
            },
        )
        sts_template = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [container()]}}
        await cluster.store.create(
            "statefulsets.apps",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": sts_template,
                },
            },
        )
        await cluster.store.create(
            "replicationcontrollers",
            {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "metadata": {"name": "old", "namespace": "default"},
                "spec": {
                    "replicas": 2,
                    "selector": {"app": "old"},
                    "template": {
                        "metadata": {"labels": {"app": "old"}},
                        "spec": {"containers": [container()]},
                    },
                },
            },
        )
        await cluster.settle()
        agents = pods_of(cluster, "agent")
        assert sorted(p["spec"]["nodeName"] for p in agents) == ["node-1", "node-2", "node-3"]
        ds = cluster.store.get("daemonsets.apps", "default", "agent")
        assert ds is not None
        assert ds["status"]["numberReady"] == 3
        assert ds["status"]["desiredNumberScheduled"] == 3
        assert sorted(p["metadata"]["name"] for p in pods_of(cluster, "db")) == ["db-0", "db-1", "db-2"]
        assert len(pods_of(cluster, "old")) == 2
        # A StatefulSet pod comes back under the same name.
        old_uid = cluster.store.get("pods", "default", "db-1")["metadata"]["uid"]  # type: ignore[index]
        await cluster.store.delete("pods", "default", "db-1")
        await cluster.settle()
        again = cluster.store.get("pods", "default", "db-1")
        assert again is not None
        assert again["metadata"]["uid"] != old_uid
        assert again["status"]["phase"] == "Running"
        assert again["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"


async def test_cronjob_creates_a_job_at_the_scheduled_virtual_time_and_the_job_completes() -> None:
    async with sim("1.35") as (cluster, _http):
        # The virtual clock starts at 2026-01-01T00:00:00Z.
        await cluster.store.create(
            "cronjobs.batch",
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "report", "namespace": "default"},
                "spec": {
                    "schedule": "*/30 * * * *",
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                "metadata": {
                                    "labels": {"app": "report"},
                                    "annotations": {"sim.vpa.dev/run-seconds": "120"},
                                },
                                "spec": {"restartPolicy": "Never", "containers": [container()]},
                            }
                        }
                    },
                },
            },
        )
        await cluster.settle()
        await cluster.advance(29 * 60)
        assert cluster.store.list("jobs.batch", "default") == []
        await cluster.advance(60)
        jobs = cluster.store.list("jobs.batch", "default")
        assert [j["metadata"]["name"] for j in jobs] == [
            f"report-{int(cluster.clock.now() // 1800 * 1800 // 60)}"
        ]
        assert (
            jobs[0]["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
            == "2026-01-01T00:30:00Z"
        )
        job_pods = pods_of(cluster, "report")
        assert len(job_pods) == 1
        assert job_pods[0]["status"]["phase"] == "Running"
        await cluster.advance(120)
        done = cluster.store.get("pods", "default", job_pods[0]["metadata"]["name"])
        assert done is not None
        assert done["status"]["phase"] == "Succeeded"
        job = cluster.store.get("jobs.batch", "default", jobs[0]["metadata"]["name"])
        assert job is not None
        assert job["status"]["succeeded"] == 1
        assert condition(job, "Complete") is not None
        cj = cluster.store.get("cronjobs.batch", "default", "report")
        assert cj is not None
        assert cj["status"]["lastScheduleTime"] == "2026-01-01T00:30:00Z"


async def test_deployment_template_change_rolls_to_a_new_replicaset() -> None:
    async with sim("1.35", nodes=2) as (cluster, _http):
        await cluster.store.create("deployments.apps", deployment("web", 2))
        await cluster.settle()
        dep = cluster.store.get("deployments.apps", "default", "web")
        assert dep is not None
        first = {p["metadata"]["labels"]["pod-template-hash"] for p in pods_of(cluster, "web")}
        dep = dict(dep)
        dep["spec"] = {
            **dep["spec"],
            "template": {**dep["spec"]["template"], "spec": {"containers": [container(cpu="600m")]}},
        }
        await cluster.store.update("deployments.apps", dep)
        await cluster.settle()
        now = pods_of(cluster, "web")
        second = {p["metadata"]["labels"]["pod-template-hash"] for p in now}
        assert len(now) == 2
        assert len(second) == 1
        assert second != first
        assert all(p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "600m" for p in now)
        status = cluster.store.get("deployments.apps", "default", "web")["status"]  # type: ignore[index]
        assert status["updatedReplicas"] == 2
        assert status["observedGeneration"] == 2
        # Deleting the Deployment cascades (API server GC) and the nodes get their room back.
        await cluster.store.delete("deployments.apps", "default", "web")
        await cluster.settle()
        assert cluster.store.list("pods", "default") == []
        assert all(n.sched_cpu == 0 and not n.pods for n in cluster.behaviour.agent.nodes.values())


async def test_cordoned_and_tainted_nodes_and_kubelet_admission_of_prebound_pods() -> None:
    async with sim("1.35", nodes=3, cpu="2") as (cluster, _http):
        node1 = cluster.store.get("nodes", None, "node-1")
        assert node1 is not None
        await cluster.store.update(
            "nodes", {**node1, "spec": {**node1.get("spec", {}), "unschedulable": True}}
        )
        node2 = cluster.store.get("nodes", None, "node-2")
        assert node2 is not None
        taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
        await cluster.store.update("nodes", {**node2, "spec": {**node2.get("spec", {}), "taints": [taint]}})
        await cluster.settle()
        plain = await create_pod(cluster, pod("plain"))
        assert plain["spec"]["nodeName"] == "node-3"
        tolerant = await create_pod(
            cluster,
            pod(
                "tolerant",
                tolerations=[
                    {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
                ],
            ),
        )
        assert tolerant["spec"]["nodeName"] == "node-2"
        # A pod bound directly to a node is checked by that node's kubelet.
        await create_pod(cluster, pod("hog", container(cpu="1500m", cpu_limit="2"), nodeName="node-3"))
        rejected = await create_pod(
            cluster, pod("late", container(cpu="1", cpu_limit="2"), nodeName="node-3")
        )
        assert rejected["status"]["phase"] == "Failed"
        assert rejected["status"]["reason"] == "OutOfcpu"
        assert rejected["status"]["message"] == (
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 2000, "
            "capacity: 2000"
        )


async def test_job_runs_completions_with_bounded_parallelism() -> None:
    async with sim("1.35") as (cluster, _http):
        await cluster.store.create(
            "jobs.batch",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "batch", "namespace": "default"},
                "spec": {
                    "completions": 3,
                    "parallelism": 2,
                    "template": {
                        "metadata": {"labels": {"app": "batch"}},
                        "spec": {"restartPolicy": "Never", "containers": [container()]},
                    },
                },
            },
        )
        await cluster.settle()
        assert len(pods_of(cluster, "batch")) == 2
        job = cluster.store.get("jobs.batch", "default", "batch")
        assert job is not None
        assert job["status"]["active"] == 2
        await cluster.advance(60)  # the default run time of a Job's pod
        job = cluster.store.get("jobs.batch", "default", "batch")
        assert job is not None
        assert job["status"]["succeeded"] == 2
        assert job["status"]["active"] == 1
        await cluster.advance(60)
        job = cluster.store.get("jobs.batch", "default", "batch")
        assert job is not None
        assert job["status"]["succeeded"] == 3
        assert condition(job, "Complete") is not None
        assert job["status"]["completionTime"] == "2026-01-01T00:02:00Z"


async def test_limit_ranger_defaults_and_enforces_over_http() -> None:
    async with sim("1.35") as (cluster, http):
        await cluster.store.create(
            "limitranges",
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "lr", "namespace": "default"},
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "default": {"cpu": "300m", "memory": "128Mi"},
                            "defaultRequest": {"cpu": "100m"},
                            "max": {"cpu": "1"},
                        }
                    ]
                },
            },
        )
        bare = {"name": "app", "image": "nginx:1.27"}
        sidecar = {"name": "log", "image": "busybox:1", "restartPolicy": "Always"}
        created = await create_pod(cluster, pod("defaulted", bare, initContainers=[sidecar]))
        assert created["spec"]["containers"][0]["resources"] == {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "300m", "memory": "128Mi"},
        }
        assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"].startswith(
            "LimitRanger plugin set: cpu, memory request for container log"
        )
        assert created["status"]["qosClass"] == "Burstable"
        init = created["status"]["initContainerStatuses"][0]
        assert init["name"] == "log"
        assert "running" in init["state"]
        assert init["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
        too_big = pod("big", container(cpu="500m", cpu_limit="2", memory="64Mi", memory_limit="128Mi"))
        async with http.post("/api/v1/namespaces/default/pods", json=too_big) as resp:
            body = await resp.json()
            assert resp.status == 403
        assert (
            body["message"] == 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
        )


async def test_statefulset_rolls_pods_in_reverse_ordinal_order_on_template_change() -> None:
    async with sim("1.35", nodes=2) as (cluster, _http):
        template = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [container()]}}
        await cluster.store.create(
            "statefulsets.apps",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db", "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": template,
                },
            },
        )
        await cluster.settle()
        sts = cluster.store.get("statefulsets.apps", "default", "db")
        assert sts is not None
        new_template = {**template, "spec": {"containers": [container(cpu="700m")]}}
        await cluster.store.update(
            "statefulsets.apps", {**sts, "spec": {**sts["spec"], "template": new_template}}
        )
        await cluster.settle()
        pods = sorted(pods_of(cluster, "db"), key=lambda p: p["metadata"]["name"])
        assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1", "db-2"]
        assert all(p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "700m" for p in pods)
        assert all(p["status"]["phase"] == "Running" for p in pods)
        status = cluster.store.get("statefulsets.apps", "default", "db")["status"]  # type: ignore[index]
        assert status["updatedReplicas"] == 3
        assert status["readyReplicas"] == 3
