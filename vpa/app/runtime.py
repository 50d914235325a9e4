"""The running process: settings → clock → API client → shared caches → components, and a clean stop.

Owns: building every long-lived object from `RunSettings` (metrics registry, clock, `KubeClient`, the shared
watch caches with their indexes, the event recorder, the metrics/health server, one `LeaderElector` per
elected component), supervising the root tasks (a crash of any of them stops the process with exit status
1, so Kubernetes restarts it, as upstream's fatal errors do), and graceful shutdown on SIGTERM/SIGINT within
`SHUTDOWN_BUDGET_S`: readiness turns false, elected work is cancelled and leases are released, caches and
servers stop, the client closes.

Components (recommender, updater, admission controller) plug in through `ComponentSpec`: a name, whether it
is leader-elected (and with which lease settings), and `build`, called once with a `ComponentContext`
(the shared objects) after the caches have synced, which returns the work to run. Elected work runs only while
this process holds that component's Lease; on losing it the work is cancelled and the process campaigns
again (upstream exits instead; we stay up because the same process also serves the webhook).

Must not: make decisions (that is `logic/`), parse argv or env (that is `cli`), or leave a task running
after `run()` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)

from vpa import __version__
from vpa.aio.executor import start_default_executor
from vpa.aio.heap import HeapKeeper
from vpa.components import health
from vpa.components.context import ComponentContext
from vpa.kube import converting
from vpa.kube.client import ClientOptions, KubeClient, api_path
from vpa.kube.clocking import SimClock
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.kubeconfig import KubeconfigError
from vpa.kube.leasing import LeaderElector
from vpa.kube.ratelimiting import TokenBucket
from vpa.kube.watching import WatchCache, counter_observer
from vpa.model.clock import Clock, RealClock
from vpa.model.pod import PodView
from vpa.model.settings import CommonSettings, LeaderElectionSettings, RunSettings, StartupError
from vpa.model.vpa import VpaView

if TYPE_CHECKING:
    from vpa.debug.stalls import StallProbe

log = structlog.get_logger(__name__)

SHUTDOWN_BUDGET_S = 10.0
VPA_GROUP, VPA_VERSION = "autoscaling.k8s.io", "v1"


@dataclass(frozen=True)
class ComponentSpec:
    """A component as the runtime sees it.

    `build(ctx)` is called once (so the component registers its metrics once) and returns the coroutine
    function to run: once for an unelected component, or once per leadership term when `lease` is set and
    leader election is on (each term starts afresh, e.g. the recommender restores from its checkpoints).
    """

    name: str
    build: Callable[[ComponentContext], Callable[[], Awaitable[None]]]
    lease: LeaderElectionSettings | None = None


@dataclass
class SharedCaches:
    """The watch caches every component reads; built once per process."""

    pods: WatchCache[PodView]
    vpas: WatchCache[VpaView]
    all: list[WatchCache[Any]] = field(default_factory=list)
    controllers: ControllerCaches | None = None

    def synced(self) -> bool:
        return all(cache.has_synced for cache in self.all)


def pod_owner_keys(pod: PodView) -> list[str]:
    return [f"{pod.namespace}/{pod.owner.kind}/{pod.owner.name}"] if pod.owner else []


def vpa_target_keys(vpa: VpaView) -> list[str]:
    ref = vpa.target_ref
    return [f"{vpa.namespace}/{ref.kind}/{ref.name}"] if ref else []


def _namespace_field_selector(settings: RunSettings) -> str | None:
    ignored = [ns for ns in settings.common.ignored_vpa_object_namespaces if ns]
    return ",".join(f"metadata.namespace!={ns}" for ns in ignored) or None


class Runtime:
    """One process's long-lived objects. `await Runtime(settings).run()` returns the exit status."""

    def __init__(self, settings: RunSettings, *, components: list[ComponentSpec] | None = None) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._requests = Counter(
            "rest_client_requests_total",
            "HTTP requests to the API server, by status code and method (client-go's metric name).",
            ["code", "method"],
            registry=self.registry,
        )
        self._leader = Gauge(
            "leader_election_master_status",
            "1 while this process holds the component's Lease (client-go's metric name).",
            ["name"],
            registry=self.registry,
        )
        self._watch_events = Counter(
            "vpa_watch_cache_events_total",
            "What the shared watch caches went through (lists, relists, watch restarts, events, skips).",
            ["cache", "what"],
            registry=self.registry,
        )
        self._components = list(components or [])
        self.stop_event = asyncio.Event()
        self.clock: Clock = RealClock()
        self.client: KubeClient | None = None
        self.caches: SharedCaches | None = None
        self.events: EventRecorder | None = None
        self.health_state: health.HealthState | None = None
        self.health_server: health.HealthServer | None = None
        self.electors: dict[str, LeaderElector] = {}
        self._sim_clock: SimClock | None = None
        self._stall_probe: StallProbe | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._gc_frozen = False
        self._started = False
        self._started_at = 0.0
        self._lag: health.LoopLagMonitor | None = None
        self.heap = HeapKeeper(self.registry)

    def add_component(self, spec: ComponentSpec) -> None:
        self._components.append(spec)

    # ---------------------------------------------------------------------------------- building

    async def _build(self) -> None:
        s = self.settings
        options = ClientOptions(
            qps=s.common.kube_api_qps,
            burst=max(1, int(s.common.kube_api_burst)),
            server_pacing=s.common.kube_api_server_pacing,
            user_agent=f"vpa/{__version__}",
        )
        self.client = await _connect(
            s.common,
            options,
            on_request=lambda method, code: self._requests.labels(code=str(code), method=method).inc(),
        )
        if s.clock == "sim":
            self._sim_clock = SimClock(self.client)
            try:
                await self._sim_clock.start()
            except Exception as err:  # any failure to read the clock means this is not a simulated cluster
                raise StartupError(
                    f"--clock=sim: the cluster at {self.client.host} does not serve the simulated clock "
                    f"(/sim/v1/clock): {_one_line(err)}"
                ) from None
            self.clock = self._sim_clock
            log.info("following the simulated cluster's clock", time_scale=self._sim_clock.time_scale)
        self.caches = self._build_caches()
        self.health_state = health.HealthState(self.clock)
        caches = self.caches
        self.health_state.add_readiness("watch-caches", caches.synced)
        if s.common.profiling:
            from vpa.debug.stalls import StallProbe  # loaded only when asked for: production runs without it

            self._stall_probe = StallProbe()
        self.health_server = health.HealthServer(
            self.health_state, self.registry, address=s.address, profiling=s.common.profiling,
            stalls=self._stall_probe.render if self._stall_probe is not None else None,
        )
        self.events = EventRecorder(self.client, self.clock, component="vpa", stamp_clock=RealClock())

    def _build_caches(self) -> SharedCaches:
        assert self.client is not None
        s = self.settings
        namespace = s.common.vpa_object_namespace or None
        field_selector = _namespace_field_selector(s)
        interner = converting.Interner()

        observe = counter_observer(self._watch_events)

        def to_pod(obj: dict[str, Any]) -> PodView | None:
            try:
                return converting.pod_from_dict(obj, interner=interner)
            except converting.ConversionError as err:
                log.warning("skipping a pod that does not convert", error=str(err))
                return None

        def to_vpa(obj: dict[str, Any]) -> VpaView | None:
            try:
                return converting.vpa_from_dict(obj)
            except converting.ConversionError as err:
                meta = obj.get("metadata") or {}
                log.warning(
                    "skipping a malformed VerticalPodAutoscaler",
                    vpa=f"{meta.get('namespace')}/{meta.get('name')}",
                    error=str(err),
                )
                return None

        pods: WatchCache[PodView] = WatchCache(
            self.client,
            self.clock,
            api_path("", "v1", "pods", namespace=namespace),
            to_pod,
            name="pods",
            field_selector=field_selector,
            observer=observe,
        )
        # Indexed by owner only (the updater's matching): nothing reads pods by namespace, and a namespace
        # index kept every pod's key a second time, in sets that grew in single steps.
        pods.add_index("owner", pod_owner_keys)
        vpas: WatchCache[VpaView] = WatchCache(
            self.client,
            self.clock,
            api_path(VPA_GROUP, VPA_VERSION, "verticalpodautoscalers", namespace=namespace),
            to_vpa,
            name="verticalpodautoscalers",
            field_selector=field_selector,
            observer=observe,
        )
        vpas.add_index("target", vpa_target_keys)
        # The updater and the admission controller both walk pods up to their top-most controller (as
        # upstream's, each from informers of the same kinds): one set of caches, synced before either starts.
        controllers: ControllerCaches | None = None
        if s.components & {"updater", "admission-controller"}:
            controllers = ControllerCaches(self.client, self.clock, namespace=namespace, observer=observe)
        return SharedCaches(
            pods=pods,
            vpas=vpas,
            all=[pods, vpas, *(controllers.caches if controllers is not None else [])],
            controllers=controllers,
        )

    def _elector(self, component: str, lease: LeaderElectionSettings) -> LeaderElector:
        assert self.client is not None

        def on_change(leading: bool) -> None:
            self._leader.labels(name=lease.resource_name).set(1 if leading else 0)

        self._leader.labels(name=lease.resource_name).set(0)
        # Leases get their own (unlimited) limiter on the same connection pool, as client-go does, so a
        # burst of status or checkpoint writes can never queue a renewal past its deadline.
        lease_client = self.client.derive(limiter=TokenBucket.unlimited(self.clock))
        return LeaderElector(
            lease_client,
            self.clock,
            name=lease.resource_name,
            namespace=lease.resource_namespace,
            lease_duration_s=lease.lease_duration_s,
            renew_deadline_s=lease.renew_deadline_s,
            retry_period_s=lease.retry_period_s,
            on_change=on_change,
        )

    # ---------------------------------------------------------------------------------- running

    def _spawn(self, name: str, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks[name] = task

    async def run(self, *, install_signal_handlers: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or `stop_event`), or until a root task fails; return the exit status."""
        loop = asyncio.get_running_loop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop_event.set)
        try:
            await self._build()
            assert self.caches is not None
            assert self.health_server is not None
            assert self.events is not None
            try:
                await self.health_server.start()
            except OSError as err:
                raise StartupError(
                    f"--address {self.settings.address}: cannot listen: {err.strerror or err}"
                ) from None
            self._started = True
            self._started_at = time.monotonic()
            start_default_executor(loop)  # before the loop has anything else to do
            if self._stall_probe is not None:
                self._stall_probe.start()
            lag = self._lag = health.LoopLagMonitor(
                self.registry, interval_s=self.settings.common.event_loop_lag_interval_s)
            self._spawn("loop-lag", lag.run())
            self._spawn("events", self.events.run())
            for cache in self.caches.all:
                self._spawn(f"cache:{cache.name}", cache.run())
            for spec in self._components:
                self._spawn(f"component:{spec.name}", self._run_component(spec))
            log.info(
                "vpa started",
                version=__version__,
                server=self.client.host if self.client is not None else "",
                components=sorted(self.settings.components),
                address=self.settings.address,
                health_port=self.health_server.port,
            )
            return await self._supervise()
        finally:
            await self._shutdown()
            if install_signal_handlers:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

    def context(self) -> ComponentContext:
        """The shared objects handed to every component (valid once the runtime is built)."""
        assert self.client is not None
        assert self.caches is not None
        assert self.health_state is not None
        assert self.events is not None
        return ComponentContext(
            settings=self.settings,
            client=self.client,
            clock=self.clock,
            registry=self.registry,
            health=self.health_state,
            events=self.events,
            pods=self.caches.pods,
            vpas=self.caches.vpas,
            controllers=self.caches.controllers,
        )

    async def _run_component(self, spec: ComponentSpec) -> None:
        await self._wait_synced()
        work = spec.build(self.context())
        if spec.lease is None or not spec.lease.leader_elect:
            await work()
            return
        elector = self._elector(spec.name, spec.lease)
        self.electors[spec.name] = elector
        await elector.run_forever(work)

    async def _wait_synced(self) -> None:
        assert self.caches is not None
        await asyncio.gather(*(cache.wait_synced() for cache in self.caches.all))
        if not self._gc_frozen:
            self._report_synced()
            # The initial sync leaves hundreds of thousands of long-lived objects; moving them out of the
            # cyclic GC's generations keeps later collections (and the loop stalls they cause) short. No
            # full collection first: it would scan the whole cache at once (the webhook may be serving by
            # now), and the start-up garbage it would free is small (the LISTs are parsed into acyclic
            # objects with the GC paused).
            gc.freeze()
            self._gc_frozen = True
            # From now on full collections run on a schedule, not in the middle of a recommender loop.
            self._spawn("heap", self.heap.run())

    def _report_synced(self) -> None:
        """Log `caches_synced` with how long the initial LISTs took and the longest event-loop lag up to them
        (read at the lag monitor's next sample, so a stall that ended the sync counts; the components have
        just started, so at most one sampling interval of their work can)."""
        synced_s = time.monotonic() - self._started_at

        def report(lag_max_s: float) -> None:
            log.info("caches_synced", seconds=round(synced_s, 3),
                     event_loop_lag_max_ms=round(lag_max_s * 1000, 1))

        if self._lag is not None:
            self._lag.after_next_sample(report)

    async def _supervise(self) -> int:
        stop = asyncio.ensure_future(self.stop_event.wait())
        try:
            while True:
                pending = set(self._tasks.values())
                done, _ = await asyncio.wait({stop, *pending}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    log.info("shutting down on signal")
                    return 0
                for task in done:
                    name = task.get_name()
                    self._tasks.pop(name, None)
                    error = None if task.cancelled() else task.exception()
                    if isinstance(error, StartupError):
                        raise error
                    if error is not None:
                        log.error("a root task failed; stopping", task=name, error=repr(error))
                        return 1
                    if name.startswith("component:"):
                        log.info("component finished", task=name)
                    else:
                        log.error("a root task ended unexpectedly; stopping", task=name)
                        return 1
        finally:
            stop.cancel()

    async def _shutdown(self) -> None:
        """Stop everything within SHUTDOWN_BUDGET_S; leases are released by the cancelled electors."""
        if self.health_state is not None:
            self.health_state.set_shutting_down()
        # Components first (electors release their leases while the client still works), then the rest.
        components = [t for n, t in self._tasks.items() if n.startswith("component:")]
        others = [t for n, t in self._tasks.items() if not n.startswith("component:")]
        budget = SHUTDOWN_BUDGET_S
        for group, share in ((components, 0.6), (others, 0.2)):
            for task in group:
                task.cancel()
            if group:
                _, still = await asyncio.wait(group, timeout=budget * share)
                for task in still:
                    log.warning("task did not stop in time", task=task.get_name())
        if self.events is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.events.flush(), timeout=1.0)
        if self._sim_clock is not None:
            await self._sim_clock.stop()
        if self._stall_probe is not None:
            await self._stall_probe.stop()
        if self.health_server is not None:
            await self.health_server.stop()
        if self.client is not None:
            await self.client.close()
        self._tasks.clear()
        if self._started:
            log.info("vpa stopped")


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


async def _connect(
    common: CommonSettings, options: ClientOptions, *, on_request: Callable[[str, int], None]
) -> KubeClient:
    """The API client from the kubeconfig kubectl would use (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`,
    in-cluster; `--context`); any failure is a `StartupError` naming the file (kubernetes-asyncio's own
    messages mislead: a missing file is reported as one without `current-context`)."""
    try:
        return await KubeClient.from_config(
            RealClock(), options, kubeconfig=common.kubeconfig or None,
            kubeconfig_env=common.kubeconfig_env or None, context=common.context or None,
            default_kubeconfig=common.default_kubeconfig, on_request=on_request,
        )
    except KubeconfigError as err:
        raise StartupError(str(err)) from None
    except Exception as err:  # kubernetes-asyncio raises ConfigException, yaml and OS errors alike
        raise StartupError(
            "no kubeconfig: give --kubeconfig (or $KUBECONFIG, or ~/.kube/config), or run inside a cluster "
            f"(in-cluster configuration: {_one_line(err)})"
        ) from None


async def main(settings: RunSettings, *, components: list[ComponentSpec] | None = None) -> int:
    return await Runtime(settings, components=components).run()
