"""Cluster state's VPA index: linking and pod counts equal a brute-force match of every VPA's selector against
every pod and aggregate, through pod, VPA and label churn; checkpoint peaks subtracted per aggregate."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vpa.logic.recommender.aggregation import AggregationConfig
from vpa.logic.recommender.cluster import ClusterState, ContainerId, PodId
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

T0 = 1_767_225_600.0
MIB = 1024 * 1024

SELECTORS = [
    "app=a", "app=b", "app in (a,b)", "app=a,tier=db", "tier=db", "app!=a", "app notin (a,b)", "track",
    "!track", "app=c,track", "",
]
LABELS = st.dictionaries(st.sampled_from(["app", "tier", "track"]), st.sampled_from(["a", "b", "c", "db"]),
                         max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.sampled_from(["default", "other"]), st.integers(0, 5), LABELS),
        st.tuples(st.just("delete-pod"), st.sampled_from(["default", "other"]), st.integers(0, 5)),
        st.tuples(st.just("vpa"), st.sampled_from(["default", "other"]), st.integers(0, 4),
                  st.sampled_from(SELECTORS)),
        st.tuples(st.just("delete-vpa"), st.sampled_from(["default", "other"]), st.integers(0, 4)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_index_agrees_with_matching_every_selector(ops: list[tuple[object, ...]]) -> None:
    cluster = ClusterState(AggregationConfig())
    pods: dict[PodId, dict[str, str]] = {}
    vpas: dict[tuple[str, str], Selector] = {}
    for op in ops:
        if op[0] == "pod":
            _, namespace, index, labels = op
            pod_id = PodId(str(namespace), f"pod-{index}")
            assert isinstance(labels, dict)
            cluster.add_or_update_pod(pod_id, labels, "Running", T0)
            cluster.add_or_update_container(ContainerId(pod_id, "app"), Resources(100, MIB), T0)
            pods[pod_id] = labels
        elif op[0] == "delete-pod":
            pod_id = PodId(str(op[1]), f"pod-{op[2]}")
            cluster.delete_pod(pod_id)
            pods.pop(pod_id, None)
        elif op[0] == "vpa":
            _, namespace, index, text = op
            selector = Selector.parse(str(text))
            cluster.add_or_update_vpa(VpaView(namespace=str(namespace), name=f"vpa-{index}"), selector)
            vpas[(str(namespace), f"vpa-{index}")] = selector
        else:
            cluster.delete_vpa(str(op[1]), f"vpa-{op[2]}")
            vpas.pop((str(op[1]), f"vpa-{op[2]}"), None)
    for (namespace, name), selector in vpas.items():
        expected_pods = sum(1 for pod_id, labels in pods.items()
                            if pod_id.namespace == namespace and selector.matches(labels))
        assert cluster.matching_pod_count(namespace, name) == expected_pods, (namespace, name, str(selector))
        expected_aggregates = {key for key in cluster.aggregates
                               if key.namespace == namespace and selector.matches(key.label_map())}
        linked = cluster._vpas[(namespace, name)].aggregates
        assert set(linked) == expected_aggregates, (namespace, name, str(selector))


def test_checkpoint_subtracts_the_open_peak_of_every_container_feeding_the_vpa() -> None:
    cluster = ClusterState(AggregationConfig())
    selector = Selector.parse("app=web")
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), selector)
    for index, labels in enumerate([{"app": "web"}, {"app": "web"}, {"app": "web", "v": "2"}, {"app": "db"}]):
        pod_id = PodId("default", f"p{index}")
        cluster.add_or_update_pod(pod_id, labels, "Running", T0)
        cluster.add_or_update_container(ContainerId(pod_id, "app"), Resources(100, MIB), T0)
        cluster.add_memory_sample(ContainerId(pod_id, "app"), 300 * MIB, T0 + 60)
    merged = cluster.merged_states("default", "web")["app"]
    checkpointed = cluster.checkpoint_states("default", "web", T0 + 120)["app"]
    # Three web pods had an open memory peak each; the db pod's is not the VPA's to subtract.
    assert merged.memory.total_weight > 0
    assert checkpointed.memory.is_empty()
