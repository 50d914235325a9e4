"""The knobs of the simulated cluster's behaviour (`ClusterOptions`), with defaults that suit tests.

Owns: the option values and their validation. Must not: hold state or start anything.
"""

from __future__ import annotations

from dataclasses import dataclass

# 1.38 only as the kubelet stand-in on a real 1.38 kube-apiserver (`vpa sim --control-plane=kubernetes
# --kubernetes-version=v1.38.0-beta.0`); the simulated API server emulates up to 1.37 (apiserver/harness.py).
SUPPORTED_VERSIONS = ((1, 32), (1, 33), (1, 34), (1, 35), (1, 36), (1, 37), (1, 38))


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = 3
    node_cpu_millicores: int = 4000
    node_memory_bytes: int = 16 * 2**30
    kubernetes_version: tuple[int, int] = (1, 37)  # 1.32 .. 1.38; the newest stable release by default
    # Node objects are named f"{node_name_prefix}{i}" for i in 1..nodes.
    node_name_prefix: str = "node-"
    max_pods_per_node: int = 110
    # Virtual seconds from binding to Running (0: the binding write already reports Running).
    pod_start_delay_s: float = 0.0
    # Virtual seconds a deleted pod's containers take to stop (capped by its grace period); 0 = promptly.
    pod_termination_s: float = 0.0
    # Virtual seconds between a resize being allocated (PodResizeInProgress) and actuated.
    resize_actuation_s: float = 0.0
    # How often the kubelet retries a resize that failed to actuate (PodResizeInProgress/Error).
    kubelet_retry_s: float = 60.0
    # How long a Job's pods run before succeeding, unless annotated `sim.vpa.dev/run-seconds`.
    job_run_s: float = 60.0
    # Kubelet crash back-off base: after the first (immediate) restart, crashes wait base·2^(n−2) seconds,
    # capped at 300 s, reset after 10 minutes of running (CrashLoopBackOff). 0 restarts at once.
    crash_backoff_s: float = 10.0
    # Usage of containers without a profile: this fraction of the request (or the limit).
    default_usage_fraction: float = 0.5
    # metrics.k8s.io: samples are taken at multiples of the resolution; `window` is reported as is.
    metrics_resolution_s: float = 15.0
    metrics_window_s: float = 30.0
    # Directory that relative trace paths in usage profiles are resolved against (None: the cwd).
    trace_dir: str | None = None
    # Whether the node agent schedules pending pods itself (False: a real kube-scheduler binds them, and the
    # agent only runs what is bound to its nodes).
    schedule: bool = True
    # Seconds between renewals of each node's Lease in kube-node-lease, the heartbeat a real node lifecycle
    # controller watches (0: no Leases; the simulator has no node lifecycle controller).
    node_lease_renew_s: float = 0.0
    # kube-apiserver's and the kubelet's `InPlacePodLevelResourcesVerticalScaling` gate on 1.35 (KEP-5419,
    # alpha there, off by default; beta and on from 1.36): /resize also changes `spec.resources`. Off, every
    # resize of a pod with pod-level resources is refused (Forbidden), its containers' too.
    pod_level_resize: bool = False

    def __post_init__(self) -> None:
        if self.kubernetes_version not in SUPPORTED_VERSIONS:
            raise ValueError(
                f"kubernetes_version {self.kubernetes_version} not supported: "
                f"{', '.join(f'{a}.{b}' for a, b in SUPPORTED_VERSIONS)}"
            )
        if self.nodes < 0:
            raise ValueError("nodes must be >= 0")
        if self.metrics_resolution_s <= 0:
            raise ValueError(f"metrics resolution must be > 0 seconds, got {self.metrics_resolution_s:g}")
