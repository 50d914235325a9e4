"""`metrics.k8s.io/v1beta1` as metrics-server serves it, computed on request from usage profiles.

Owns: `PodMetrics` (running pods only: `metadata{name, namespace, labels, creationTimestamp}`, `timestamp`,
`window`, `containers[{name, usage{cpu, memory}}]`, native sidecars listed after the containers) and
`NodeMetrics` (the sum over the node's running pods), label selection of the list, and the sampling
instant (the current virtual time rounded down to the metrics resolution). Like metrics-server, which
serves its last scrape until the next one, a pod's usage is fixed at its first read in a resolution
interval: two clients reading the same interval see the same numbers even when a container is OOM-killed
or restarts between their reads (on real time, `--time-scale 1`, the clock moves between them).

The documents, the sampling instant and GET / LIST with their 404s are shared with the hollow nodes'
metrics (`vpa.sim.kubernetes.hollow`), which read usage from the pods' status instead of the node agent.

Must not: keep samples beyond the current interval or write to the store: a reading is computed lazily from
the node agent's state at its first read in the interval.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.model.quantity import Quantity
from vpa.sim.cluster.nodeagent import NodeAgent, rfc3339
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.pods import container_amounts, is_sidecar
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import ApiError, HookRegistry, JsonObj


def _stamp(t: float) -> str:
    return rfc3339(t)


def _window(seconds: float) -> str:
    return f"{seconds:g}s"


def cpu_string(millicores: int) -> str:
    """CPU usage as a quantity of whole millicores (metrics-server would print nanocores, `123456789n`)."""
    return Quantity(millicores * 10**6).canonical() if millicores else "0"


def pod_metrics_doc(
    pod: Mapping[str, Any], usage: list[tuple[str, int, int]], t: float, created: float, window_s: float
) -> JsonObj:
    """The `metrics.k8s.io/v1beta1` PodMetrics of `pod` at `t`, from (container, millicores, bytes)."""
    md = pod.get("metadata") or {}
    return {
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "labels": md.get("labels") or {},
            "creationTimestamp": _stamp(created),
        },
        "timestamp": _stamp(t),
        "window": _window(window_s),
        "containers": [
            {"name": n, "usage": {"cpu": cpu_string(cpu), "memory": memory_string(mem)}}
            for n, cpu, mem in usage
        ],
    }


def node_metrics_doc(
    name: str, labels: Mapping[str, str], cpu: int, mem: int, t: float, created: float, window_s: float
) -> JsonObj:
    """The `metrics.k8s.io/v1beta1` NodeMetrics of node `name` at `t`, from its pods' summed usage."""
    return {
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": _stamp(created)},
        "timestamp": _stamp(t),
        "window": _window(window_s),
        "usage": {"cpu": cpu_string(cpu), "memory": memory_string(mem)},
    }


def sample_instant(now: float, resolution_s: float) -> float:
    """`now` rounded down to the metrics resolution: reads within one resolution interval agree."""
    return (now // resolution_s) * resolution_s if resolution_s > 0 else now


def read_pod_metrics(
    namespace: str | None,
    name: str | None,
    label_selector: str | None,
    get: Callable[[str | None, str], Mapping[str, Any] | None],
    pods: Iterable[Mapping[str, Any]],
    metrics: Callable[[Mapping[str, Any]], JsonObj | None],
) -> list[JsonObj]:
    """A PodMetrics GET (`get` the pod; 404 when it has no metrics) or LIST (`pods`, in their order, by
    namespace and labels); `metrics` is None for a pod without any (not running)."""
    if name is not None:
        pod = get(namespace, name)
        item = metrics(pod) if pod is not None else None
        if item is None:
            raise ApiError(
                404,
                "NotFound",
                f'podmetrics.metrics.k8s.io "{namespace}/{name}" not found',
                kind="pods",
                name=name,
                group="metrics.k8s.io",
            )
        return [item]
    out: list[JsonObj] = []
    for pod in pods:
        md = pod.get("metadata") or {}
        if namespace and md.get("namespace") != namespace:
            continue
        if not _selector_matches(label_selector, md.get("labels") or {}):
            continue
        item = metrics(pod)
        if item is not None:
            out.append(item)
    return out


def read_node_metrics(
    name: str | None,
    label_selector: str | None,
    names: Iterable[str],
    metrics: Callable[[str], JsonObj | None],
) -> list[JsonObj]:
    """A NodeMetrics GET (404 for a node `metrics` does not know) or LIST (`names`, in order, by labels)."""
    if name is not None:
        item = metrics(name)
        if item is None:
            raise ApiError(
                404,
                "NotFound",
                f'nodemetrics.metrics.k8s.io "{name}" not found',
                kind="nodes",
                name=name,
                group="metrics.k8s.io",
            )
        return [item]
    out = []
    for node_name in names:
        item = metrics(node_name)
        if item is not None and _selector_matches(label_selector, item["metadata"]["labels"]):
            out.append(item)
    return out


def memory_string(value: int) -> str:
    """metrics-server reports the working set in whole KiB."""
    return f"{value // 1024}Ki" if value >= 1024 else str(value)


def _selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    """The label-selector string forms metrics clients send (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`)."""
    if not selector:
        return True
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for raw in parts:
        part = raw.strip()
        if not part:
            continue
        if " notin " in part or " in " in part:
            negate = " notin " in part
            key, values = part.split(" notin " if negate else " in ", 1)
            options = {v.strip() for v in values.strip().strip("()").split(",")}
            present = key.strip() in labels
            inside = present and labels[key.strip()] in options
            if (negate and inside) or (not negate and not inside):
                return False
        elif "!=" in part:
            key, value = part.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif part.startswith("!"):
            if part[1:].strip() in labels:
                return False
        elif part not in labels:
            return False
    return True


class Metrics:
    def __init__(
        self, agent: NodeAgent, usage: UsageRegistry, clock: VirtualClock, options: ClusterOptions
    ) -> None:
        self.agent = agent
        self.usage = usage
        self.clock = clock
        self.options = options
        # The current interval's usage by pod (namespace, name, uid), fixed at its first read (None: not
        # running then).
        self._interval = float("nan")
        self._fixed: dict[tuple[str, str, str], list[tuple[str, int, int]] | None] = {}

    def register(self, hooks: HookRegistry) -> None:
        hooks.add_aggregated_resource(
            group="metrics.k8s.io",
            version="v1beta1",
            plural="pods",
            kind="PodMetrics",
            namespaced=True,
            lister=self.list_pods,
        )
        hooks.add_aggregated_resource(
            group="metrics.k8s.io",
            version="v1beta1",
            plural="nodes",
            kind="NodeMetrics",
            namespaced=False,
            lister=self.list_nodes,
        )

    def sample_time(self) -> float:
        return sample_instant(self.clock.now(), self.options.metrics_resolution_s)

    def _usage(self, pod: Mapping[str, Any], t: float) -> list[tuple[str, int, int]] | None:
        """The pod's usage in the interval starting at `t`: computed at its first read, then the same."""
        if t != self._interval:
            self._interval, self._fixed = t, {}
        md = pod.get("metadata") or {}
        key = (md.get("namespace") or "", md.get("name") or "", md.get("uid") or "")
        if key in self._fixed:
            return self._fixed[key]
        usage = self._fixed[key] = self._compute(pod, t)
        return usage

    def _compute(self, pod: Mapping[str, Any], t: float) -> list[tuple[str, int, int]] | None:
        k = (
            (pod.get("metadata") or {}).get("namespace") or "",
            (pod.get("metadata") or {}).get("name") or "",
        )
        run = self.agent.runs.get(k)
        if run is None or run.phase != "Running" or run.uid != (pod.get("metadata") or {}).get("uid"):
            return None
        specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
        out: list[tuple[str, int, int]] = []
        for name, c in run.containers.items():
            if c.terminated is not None or (c.waiting_until is not None and c.waiting_until > t):
                continue
            container = specs.get(name) or {"name": name}
            req, lim = c.actual_amounts()
            started = min(c.started_at, t)
            cpu = self.usage.cpu_millicores(pod, container, t, run.start_at, started, req, lim)
            mem = self.usage.memory_bytes(pod, container, t, run.start_at, started, req, lim)
            limit = lim.get("memory")
            if limit is not None and mem > limit:
                kill = run.oom_timers.get(name)
                if kill is not None and not kill.cancelled and kill.due <= t:
                    continue  # killed by then: the node agent's timer for it just has not run yet
                mem = limit  # the kernel never lets the working set exceed the limit
            out.append((name, cpu, mem))
        # Native sidecars run for the pod's lifetime and metrics-server reports them beside the containers
        # (the kubelet's summary lists every running container). The node agent runs them with their spec
        # resources from the pod's start (see `NodeAgent._init_statuses`); plain init containers have exited.
        for init in (pod.get("spec") or {}).get("initContainers") or []:
            if not is_sidecar(init) or init.get("name") in run.containers:
                continue
            req, lim = container_amounts(init, "requests"), container_amounts(init, "limits")
            started = min(run.start_at, t)
            cpu = self.usage.cpu_millicores(pod, init, t, run.start_at, started, req, lim)
            mem = self.usage.memory_bytes(pod, init, t, run.start_at, started, req, lim)
            limit = lim.get("memory")
            if limit is not None:
                mem = min(mem, limit)
            out.append((str(init.get("name")), cpu, mem))
        return out

    def pod_metrics(self, pod: Mapping[str, Any], t: float) -> JsonObj | None:
        usage = self._usage(pod, t)
        if usage is None:
            return None
        return pod_metrics_doc(pod, usage, t, self.clock.now(), self.options.metrics_window_s)

    def list_pods(
        self, namespace: str | None, name: str | None, label_selector: str | None = None
    ) -> list[JsonObj]:
        t = self.sample_time()
        store = self.agent.store
        pods = (
            pod
            for k in sorted(self.agent.runs)
            if not namespace or k[0] == namespace
            if (pod := store.get("pods", k[0], k[1])) is not None
        )
        return read_pod_metrics(
            namespace,
            name,
            label_selector,
            lambda ns, n: store.get("pods", ns, n),
            pods,
            lambda pod: self.pod_metrics(pod, t),
        )

    def node_metrics(self, node_name: str, t: float) -> JsonObj | None:
        node = self.agent.nodes.get(node_name)
        if node is None:
            return None
        cpu = mem = 0
        for k in node.pods:
            pod = self.agent.store.get("pods", k[0], k[1])
            usage = self._usage(pod, t) if pod is not None else None
            for _n, c, m in usage or ():
                cpu += c
                mem += m
        obj = self.agent.store.get("nodes", None, node_name) or {}
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return node_metrics_doc(
            node_name, labels, cpu, mem, t, self.clock.now(), self.options.metrics_window_s
        )

    def list_nodes(
        self, namespace: str | None, name: str | None, label_selector: str | None = None
    ) -> list[JsonObj]:
        t = self.sample_time()
        return read_node_metrics(
            name, label_selector, self.agent.node_order, lambda n: self.node_metrics(n, t)
        )
