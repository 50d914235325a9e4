"""Cluster state: aggregation keys, VPA linking, merged and checkpointed states, garbage collection, and the
recommendation facade over it."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from vpa.logic.recommender.aggregation import AggregationConfig
from vpa.logic.recommender.checkpointing import (
    MAX_IN_PROGRESS_PEAKS,
    CheckpointError,
    InProgressPeak,
    checkpoint_status,
    format_in_progress_peaks,
    parse_in_progress_peaks,
)
from vpa.logic.recommender.cluster import (
    GC_STEP,
    AggregateStateKey,
    ClusterState,
    ContainerId,
    PodId,
    UnknownContainerError,
)
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import ContainerResourcePolicy, ContainerScalingMode, ResourcePolicy, VpaView

MIDNIGHT = 1_767_225_600.0
DAY = 86_400.0
MIB = 1024 * 1024
WEB = Selector.from_match_labels({"app": "web"})


def _pod(cluster: ClusterState, name: str, labels: dict[str, str], containers: tuple[str, ...] = ("app",),
         namespace: str = "default", phase: str = "Running") -> PodId:
    pod_id = PodId(namespace, name)
    cluster.add_or_update_pod(pod_id, labels, phase, MIDNIGHT)
    for container in containers:
        cluster.add_or_update_container(ContainerId(pod_id, container), Resources(100, MIB), MIDNIGHT)
    return pod_id


def _feed(cluster: ClusterState, pod_id: PodId, container: str, cpu: int, days: float = 1.0,
          memory: int = 200 * MIB) -> None:
    for minute in range(int(days * 1440) + 1):
        timestamp = MIDNIGHT + minute * 60
        cluster.add_cpu_sample(ContainerId(pod_id, container), cpu, timestamp)
        cluster.add_memory_sample(ContainerId(pod_id, container), memory, timestamp)


def test_same_name_namespace_and_labels_share_an_aggregate() -> None:
    cluster = ClusterState(AggregationConfig())
    _pod(cluster, "a", {"app": "web"})
    _pod(cluster, "b", {"app": "web"})
    _pod(cluster, "c", {"app": "web", "track": "canary"})
    _pod(cluster, "d", {"app": "web"}, namespace="other")
    assert len(cluster.aggregates) == 3


def test_vpa_links_matching_aggregates_in_its_namespace_and_counts_pods() -> None:
    cluster = ClusterState(AggregationConfig())
    a = _pod(cluster, "a", {"app": "web"}, containers=("app", "sidecar"))
    _pod(cluster, "b", {"app": "db"})
    _pod(cluster, "c", {"app": "web"}, namespace="other")
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    assert cluster.matching_pod_count("default", "web") == 1
    _feed(cluster, a, "app", 500)
    assert set(cluster.merged_states("default", "web")) == {"app", "sidecar"}
    # A pod created later is linked too.
    later = _pod(cluster, "e", {"app": "web", "v": "2"})
    _feed(cluster, later, "app", 500)
    assert cluster.matching_pod_count("default", "web") == 2
    assert cluster.merged_states("default", "web")["app"].total_samples_count == 2 * 1441


def test_label_change_moves_a_container_to_another_aggregate() -> None:
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    pod = _pod(cluster, "a", {"app": "web"})
    cluster.add_cpu_sample(ContainerId(pod, "app"), 500, MIDNIGHT)
    cluster.add_or_update_pod(pod, {"app": "db"}, "Running", MIDNIGHT + 60)
    cluster.add_cpu_sample(ContainerId(pod, "app"), 500, MIDNIGHT + 120)
    assert cluster.matching_pod_count("default", "web") == 0
    assert cluster.merged_states("default", "web")["app"].total_samples_count == 1
    assert sorted(a.total_samples_count for a in cluster.aggregates.values()) == [1, 1]


def test_unknown_container_samples_are_errors() -> None:
    cluster = ClusterState(AggregationConfig())
    with pytest.raises(UnknownContainerError, match="pod default/x is not tracked"):
        cluster.add_cpu_sample(ContainerId(PodId("default", "x"), "app"), 1, MIDNIGHT)
    pod = _pod(cluster, "a", {"app": "web"})
    with pytest.raises(UnknownContainerError, match="container other"):
        cluster.add_memory_sample(ContainerId(pod, "other"), 1, MIDNIGHT)


def test_checkpointed_state_merges_in_and_checkpoints_exclude_the_current_peak() -> None:
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    pod = _pod(cluster, "a", {"app": "web"})
    _feed(cluster, pod, "app", 500, days=0.5)  # one open memory window (ends at midnight + 1 d)
    now = MIDNIGHT + DAY / 2
    stored = cluster.checkpoint_states("default", "web", now)["app"]
    assert stored.memory.is_empty()  # the only peak is still in progress
    assert stored.total_samples_count == 721
    # Restore into a fresh cluster: CPU history comes back, merged with new samples.
    restored = ClusterState(AggregationConfig())
    restored.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    restored.load_checkpoint("default", "web", "app", checkpoint_status(stored, now), now)
    assert restored.merged_states("default", "web")["app"].total_samples_count == 721
    with pytest.raises(CheckpointError):
        restored.load_checkpoint("default", "web", "app", {"version": "v1"}, now)
    with pytest.raises(KeyError):
        restored.load_checkpoint("default", "missing", "app", checkpoint_status(stored, now), now)


def _restart(cluster: ClusterState, now: float, *, keep_peaks: bool = True) -> ClusterState:
    """What a restart from checkpoints gives: a fresh cluster with the VPA, the checkpoint (status and, with
    `keep_peaks`, the in-progress peaks through their annotation text) and the same pods re-listed."""
    contents = cluster.checkpoint_contents("default", "web", now)
    restored = ClusterState(AggregationConfig())
    restored.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    for container, (state, peaks) in contents.items():
        text = format_in_progress_peaks(peaks) if keep_peaks else None
        restored.load_checkpoint("default", "web", container, checkpoint_status(state, now), now,
                                 parse_in_progress_peaks(text))
    for name in ("a", "b"):
        _pod(restored, name, {"app": "web"})
    return restored


def _memory_p90(cluster: ClusterState) -> float:
    return cluster.merged_states("default", "web")["app"].memory.percentile(0.9)


def _spiky(cluster: ClusterState, start_min: int, end_min: int) -> None:
    # Pod a peaks at 900 MiB in the first hours of the day, then runs at 200 MiB; pod b at 300 MiB.
    for minute in range(start_min, end_min):
        timestamp = MIDNIGHT + minute * 60
        for pod, memory in (("a", 900 * MIB if minute % 1440 < 180 else 200 * MIB), ("b", 300 * MIB)):
            container = ContainerId(PodId("default", pod), "app")
            cluster.add_cpu_sample(container, 250, timestamp)
            cluster.add_memory_sample(container, memory, timestamp)


@pytest.mark.parametrize("restart_at_hours", [6, 20, 30])
def test_restart_mid_window_keeps_the_in_progress_memory_peak(restart_at_hours: int) -> None:
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    for name in ("a", "b"):
        _pod(cluster, name, {"app": "web"})
    restart = restart_at_hours * 60
    _spiky(cluster, 0, restart + 1)
    now = MIDNIGHT + restart * 60
    before = _memory_p90(cluster)
    restored = _restart(cluster, now)
    lost = _restart(cluster, now, keep_peaks=False)
    assert _memory_p90(restored) == pytest.approx(before, rel=0.01)
    if restart_at_hours < 24:  # upstream's checkpoint alone loses the first day's peak (900 MiB)
        assert _memory_p90(lost) < 0.5 * before
    # Both go on for two more days: the taken-over windows continue, nothing is counted twice.
    for state in (cluster, restored):
        _spiky(state, restart + 1, restart + 2 * 1440)
    for p in (0.5, 0.9, 0.95, 0.99):  # (total weights differ by the histograms' reference, not in shape)
        assert restored.merged_states("default", "web")["app"].memory.percentile(p) == pytest.approx(
            cluster.merged_states("default", "web")["app"].memory.percentile(p), rel=0.01)


def test_restored_peaks_of_pods_that_never_return_stay_in_the_next_checkpoint() -> None:
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    _pod(cluster, "a", {"app": "web"})
    _feed(cluster, PodId("default", "a"), "app", 500, days=0.25, memory=700 * MIB)
    now = MIDNIGHT + DAY / 4
    (_, peaks), = cluster.checkpoint_contents("default", "web", now).values()
    assert [(p.pod, p.window_end, p.peak_bytes) for p in peaks] == [("a", MIDNIGHT + DAY, 700 * MIB)]
    restored = ClusterState(AggregationConfig())
    restored.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    (state, _), = cluster.checkpoint_contents("default", "web", now).values()
    restored.load_checkpoint("default", "web", "app", checkpoint_status(state, now), now, peaks)
    (_, again), = restored.checkpoint_contents("default", "web", now + 60).values()
    assert again == peaks  # not taken over yet: still in progress, still written beside the status


def test_in_progress_peak_annotation_round_trips_and_rejects_garbage() -> None:
    peaks = [InProgressPeak("web-1", MIDNIGHT + DAY, 300 * MIB, 0), InProgressPeak("web-0", MIDNIGHT, 1, 5)]
    assert parse_in_progress_peaks(format_in_progress_peaks(peaks)) == sorted(peaks, key=lambda p: p.pod)
    assert parse_in_progress_peaks(None) == []
    for bad in ("{", "[]", '{"v":2,"peaks":[]}', '{"v":1,"peaks":[["p","x",1,0]]}',
                '{"v":1,"peaks":[["p",1,-1,0]]}', 7):
        with pytest.raises(CheckpointError, match="in-progress-memory-peaks"):
            parse_in_progress_peaks(bad)
    many = [InProgressPeak(f"p{i}", MIDNIGHT, i, 0) for i in range(MAX_IN_PROGRESS_PEAKS + 5)]
    kept = parse_in_progress_peaks(format_in_progress_peaks(many))
    assert len(kept) == MAX_IN_PROGRESS_PEAKS
    assert min(p.peak_bytes for p in kept) == 5  # the largest are kept


@pytest.mark.parametrize(
    ("phase", "live_controller", "samples", "now", "collected"),
    [
        ("Running", False, False, MIDNIGHT + DAY, False),  # empty but contributive (active pod)
        ("Succeeded", False, False, MIDNIGHT + DAY, True),  # empty, pod finished, no controller
        ("Succeeded", True, False, MIDNIGHT + DAY, False),  # empty, pod finished, controller alive
        ("Running", False, False, MIDNIGHT + 8 * DAY, True),  # empty for a whole window: expired
        ("Running", False, True, MIDNIGHT + 9 * DAY - 61, False),  # last sample at +1 d: not yet 8 d
        ("Running", False, True, MIDNIGHT + 9 * DAY, True),  # 8 days after the last CPU sample
    ],
    ids=["empty-active", "empty-finished", "empty-controller", "empty-expired", "used-fresh", "used-expired"],
)
def test_garbage_collection(phase: str, live_controller: bool, samples: bool, now: float,
                            collected: bool) -> None:
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    pod = _pod(cluster, "a", {"app": "web"}, phase=phase)
    if samples:
        _feed(cluster, pod, "app", 500)
    deleted = cluster.garbage_collect(now, {pod} if live_controller else set())
    assert bool(deleted) is collected
    assert (len(cluster.aggregates) == 0) is collected
    assert ("app" in cluster.merged_states("default", "web")) is not collected


def test_collected_aggregate_is_recreated_by_the_next_sample() -> None:
    cluster = ClusterState(AggregationConfig())
    pod = _pod(cluster, "a", {"app": "web"})
    _feed(cluster, pod, "app", 500)
    assert cluster.garbage_collect(MIDNIGHT + 10 * DAY)
    cluster.add_cpu_sample(ContainerId(pod, "app"), 500, MIDNIGHT + 10 * DAY)
    (aggregate,) = cluster.aggregates.values()
    assert aggregate.total_samples_count == 1
    assert aggregate.creation_time == MIDNIGHT + 10 * DAY


def test_core_recommends_skipping_off_and_unsampled_containers() -> None:
    core = RecommenderCore()
    policy = ResourcePolicy((ContainerResourcePolicy("off", mode=ContainerScalingMode.OFF),
                             ContainerResourcePolicy("*", min_allowed=Resources(100, None))))
    core.cluster.add_or_update_vpa(VpaView(namespace="default", name="web", resource_policy=policy), WEB)
    pod = _pod(core.cluster, "a", {"app": "web"}, containers=("app", "off", "idle", "side"))
    for name in ("app", "off", "side"):
        _feed(core.cluster, pod, name, 5, days=8, memory=10 * MIB)
    recommendation = core.recommend("default", "web")
    assert [item.container_name for item in recommendation.containers] == ["app", "side"]
    app = recommendation.containers[0]
    # 5 m → start(1) = 10 m + 1; the per-pod minimum is split over the 2 kept containers: 12 m, 125 MiB;
    # the wildcard policy raises CPU to minAllowed 100 m but uncappedTarget keeps the estimate.
    assert app.target == Resources(100, 131_072_000)
    assert app.uncapped_target == Resources(12, 131_072_000)


def test_config_maps_the_recommender_settings() -> None:
    settings = RecommenderSettings(recommendation_margin_fraction=0.3, pod_recommendation_min_memory_mib=100,
                                   memory_aggregation_interval_s=3600, round_cpu_millicores=5,
                                   container_recommendation_max_allowed_cpu_millicores=4000)
    config = RecommenderConfig.from_settings(settings, per_vpa_config=True)
    assert config.estimation.margin_fraction == 0.3
    assert config.estimation.pod_min_memory_mb == 100
    assert config.aggregation.defaults.memory_aggregation_interval_s == 3600
    assert config.aggregation.per_vpa_config
    assert config.post_processing.round_cpu_millicores == 5
    assert config.post_processing.global_max_allowed == Resources(4000, None)


def test_garbage_collection_is_rate_limited_to_once_an_hour() -> None:
    cluster = ClusterState(AggregationConfig())
    finished = _pod(cluster, "done", {"app": "web"}, phase="Succeeded")
    _pod(cluster, "live", {"app": "db"})
    assert cluster.pods_needing_controller_check() == [finished]
    assert cluster.maybe_garbage_collect(MIDNIGHT) == []  # starts the clock
    assert cluster.maybe_garbage_collect(MIDNIGHT + 3599) == []  # too soon
    deleted = cluster.maybe_garbage_collect(MIDNIGHT + 3600)
    assert [key.container_name for key in deleted] == ["app"]
    assert len(cluster.aggregates) == 1  # the active pod's empty aggregate stays


def _exhaust(steps: Generator[None, None, list[AggregateStateKey]]) -> tuple[list[AggregateStateKey], int]:
    """Run a generator of garbage-collection steps to its end: (its result, how many times it paused)."""
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, pauses
        pauses += 1


def test_garbage_collection_in_steps_matches_the_single_pass() -> None:
    """`garbage_collect_steps` pauses every `GC_STEP` aggregates it handles and ends with what
    `garbage_collect` would have done: the same keys deleted, in the same order, and VPA links dropped."""
    pods = GC_STEP + 40

    def build() -> ClusterState:
        cluster = ClusterState(AggregationConfig())
        cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
        for index in range(pods):
            _pod(cluster, f"p{index}", {"app": "web", "i": str(index)}, containers=("app", "side"),
                 phase="Succeeded" if index % 3 == 0 else "Running")
        return cluster

    single, stepped = build(), build()
    expected = single.garbage_collect(MIDNIGHT + DAY)
    deleted, pauses = _exhaust(stepped.garbage_collect_steps(MIDNIGHT + DAY))
    assert deleted == expected
    assert len(expected) == 2 * ((pods + 2) // 3)  # both containers of every finished pod
    assert pauses >= 2 * pods // GC_STEP  # the scan alone looked at 2 × `pods` aggregates
    assert list(stepped.aggregates) == list(single.aggregates)
    assert list(stepped.merged_states("default", "web")) == list(single.merged_states("default", "web"))


def test_maybe_garbage_collect_steps_start_the_clock_first() -> None:
    cluster = ClusterState(AggregationConfig())
    _pod(cluster, "done", {"app": "web"}, phase="Succeeded")
    assert _exhaust(cluster.maybe_garbage_collect_steps(MIDNIGHT)) == ([], 0)  # starts the clock
    assert _exhaust(cluster.maybe_garbage_collect_steps(MIDNIGHT + 3599)) == ([], 0)  # too soon
    deleted, _ = _exhaust(cluster.maybe_garbage_collect_steps(MIDNIGHT + 3600))
    assert [key.container_name for key in deleted] == ["app"]


def test_default_settings_map_to_the_default_config() -> None:
    assert RecommenderConfig.from_settings(RecommenderSettings()) == RecommenderConfig()


@pytest.mark.parametrize(
    ("history", "controlled", "expected"),
    [
        # (what the container saw, its controlledResources, the resources recommended for it; None = none)
        ("nothing", None, None),  # created, never sampled, never killed: nothing to say yet
        ("samples", None, ("cpu", "memory")),
        ("oom only", None, ("memory",)),  # killed before the first metrics read: memory from the OOM bump
        ("oom only", ("cpu",), None),  # memory not controlled: nothing left to recommend
        ("oom only", ("cpu", "memory"), ("memory",)),
        ("samples and oom", None, ("cpu", "memory")),
    ],
    ids=lambda value: str(value),
)
def test_a_container_killed_before_its_first_cpu_sample_gets_memory_only(
    history: str, controlled: tuple[str, ...] | None, expected: tuple[str, ...] | None
) -> None:
    core = RecommenderCore()
    policy = ResourcePolicy((ContainerResourcePolicy("*", controlled_resources=controlled),))
    core.cluster.add_or_update_vpa(VpaView(namespace="default", name="web", resource_policy=policy), WEB)
    pod = _pod(core.cluster, "a", {"app": "web"})
    container = ContainerId(pod, "app")
    if "samples" in history:
        _feed(core.cluster, pod, "app", 50, days=0.1)
    if "oom" in history:
        # `used` is the 1 MiB request, or the 200 MiB peak when sampled: max(used + 100 MiB, used × 1.2).
        bumped = core.cluster.record_oom(container, MIDNIGHT + 3 * 3600, MIB)
        assert bumped == (300 if "samples" in history else 101) * MIB
    recommendation = core.recommend("default", "web")
    if expected is None:
        assert recommendation.containers == ()
        return
    (app,) = recommendation.containers
    for bound in (app.target, app.lower_bound, app.upper_bound):
        assert tuple(r for r in ("cpu", "memory") if bound.get(r) is not None) == expected
    if history == "oom only":
        # The OOM-bumped 101 MiB, to its histogram bucket's end, plus the 15% margin: at least 116 MiB.
        assert app.target.memory_bytes is not None
        assert app.target.memory_bytes >= 116 * MIB


def test_a_namespace_of_many_pods_links_counts_and_forgets() -> None:
    """A namespace's pods, a label set's pods and a namespace's aggregates: VPAs created before and after
    count and link them, label changes and deletes move them, and an emptied table is dropped."""
    cluster = ClusterState(AggregationConfig())
    cluster.add_or_update_vpa(VpaView(namespace="default", name="web"), WEB)
    containers = ("app", "sidecar", "proxy")
    pods = [_pod(cluster, f"web-{i}", {"app": "web"}, containers=containers) for i in range(5)]
    pods += [_pod(cluster, f"db-{i}", {"app": "db", "shard": str(i)}) for i in range(4)]
    assert cluster.matching_pod_count("default", "web") == 5
    cluster.add_or_update_vpa(VpaView(namespace="default", name="later"), WEB)
    assert cluster.matching_pod_count("default", "later") == 5
    for pod in pods[:5]:
        _feed(cluster, pod, "app", 500, days=0.01)
    assert set(cluster.merged_states("default", "later")) == {"app", "sidecar", "proxy"}
    assert cluster.merged_states("default", "later")["app"].total_samples_count == 5 * 15
    cluster.add_or_update_pod(pods[0], {"app": "db"}, "Running", MIDNIGHT)
    assert cluster.matching_pod_count("default", "web") == 4
    for pod in pods:
        cluster.delete_pod(pod)
    assert list(cluster.pod_ids()) == []
    assert cluster.matching_pod_count("default", "web") == 0
    assert cluster.garbage_collect(MIDNIGHT + 10 * DAY)
    assert len(cluster.aggregates) == 0
    cluster.add_or_update_vpa(VpaView(namespace="default", name="empty"), WEB)
    assert cluster.matching_pod_count("default", "empty") == 0
    assert cluster.merged_states("default", "empty") == {}
