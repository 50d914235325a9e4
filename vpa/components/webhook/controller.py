"""The admission-controller component: `AdmissionController` and `run(ctx)`, what the runtime starts.

Owns: TLS (files, optionally reloaded, or self-managed certificates in a Secret), the aiohttp server on
`--port` served from the webhook's own loop thread, self-registration of `vpa-webhook-config`, the status
Lease, readiness, the silence watcher, and a clean stop on cancellation.

Must not: decide admissions (that is `admitter`), or do Secret, file or webhook-configuration I/O itself
(that is `vpa.kube.certificates` / `vpa.kube.webhookregistering`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import structlog
from aiohttp import web
from prometheus_client import Gauge

from vpa.aio.cancelling import cancel_and_wait
from vpa.components.connections import (
    DEFAULT_LIMITS,
    ConnectionDrops,
    ConnectionGuard,
    ConnectionLimits,
    GuardedSite,
)
from vpa.components.context import ComponentContext
from vpa.components.webhook.admitter import Admitter
from vpa.components.webhook.caches import LimitRanges, NamespacesWithVpas, to_limit_range
from vpa.components.webhook.loop_thread import LoopThread
from vpa.components.webhook.metrics import AdmissionMetrics
from vpa.components.webhook.server import AdmissionServer
from vpa.components.webhook.silence import watch_silence
from vpa.components.webhook.targets import AdmissionTargets
from vpa.kube import certificates as certs
from vpa.kube import webhookregistering as registering
from vpa.kube.client import ApiError, api_path
from vpa.kube.leasing import StatusLeaseRenewer
from vpa.kube.neighbourwatching import node_cache
from vpa.kube.watching import WatchCache
from vpa.model.clock import RealClock
from vpa.model.limitrange import LimitRangeView
from vpa.model.node import NodeView
from vpa.model.settings import StartupError

log = structlog.get_logger(__name__)

SERVING_THREAD: Final = "admission-webhook"
"""The name of the thread the webhook serves on, in Python and (its first 15 bytes) in the kernel."""


def uses_self_managed_certificates(files: certs.CertificateFiles, register_webhook: bool) -> bool:
    """Files when they exist; self-managed when neither exists and we register the webhook; else fatal."""
    if files.exist():
        return False
    if not Path(files.cert_file).exists() and not Path(files.key_file).exists() and register_webhook:
        return True
    raise StartupError(
        f"--tls-cert-file {files.cert_file} / --tls-private-key {files.key_file}: one is missing "
        "(self-managed certificates need both absent and --register-webhook=true)"
    )


class AdmissionController:
    """The admission-controller component over a `ComponentContext`.

    `host`/`port` override where it listens (tests and benchmarks bind 127.0.0.1, port 0 = any free port);
    by default all interfaces on `--port`.
    """

    def __init__(
        self,
        ctx: ComponentContext,
        *,
        host: str | None = None,
        port: int | None = None,
        cert_poll_s: float = 1.0,
        secret_poll_s: float = 60.0,
        limitrange_sync_timeout_s: float = 10.0,
        silence_check_s: float = 60.0,
        self_managed_policy: certs.SelfManagedPolicy | None = None,
        limits: ConnectionLimits = DEFAULT_LIMITS,
    ) -> None:
        self.ctx = ctx
        self.settings = ctx.settings.admission
        self.host = host
        self.requested_port = self.settings.port if port is None else port
        self.port = 0
        self.cert_poll_s = cert_poll_s
        self.secret_poll_s = secret_poll_s
        self.limitrange_sync_timeout_s = limitrange_sync_timeout_s
        self.silence_check_s = silence_check_s
        self.silent = Gauge(
            "vpa_admission_controller_webhook_silent",
            "1 while pods are created in namespaces with VPAs but no AdmissionReview reaches this process.",
            registry=ctx.registry,
        )
        self.files = certs.CertificateFiles(
            self.settings.tls_cert_file, self.settings.tls_private_key, self.settings.client_ca_file
        )
        self.secret_store: certs.SecretCertificateStore | None = None
        if uses_self_managed_certificates(self.files, self.settings.register_webhook):
            self.secret_store = certs.SecretCertificateStore(
                ctx.client,
                RealClock(),  # certificate validity is checked against the wall clock, never a simulated one
                namespace=self.settings.webhook_service_namespace,
                service=self.settings.webhook_service,
                policy=self_managed_policy,
            )
            log.info("admission_certificates_self_managed",
                     reason=f"neither {self.files.cert_file} nor {self.files.key_file} exists",
                     secret=f"{self.settings.webhook_service_namespace}/{certs.SECRET_NAME}")
        self.metrics = AdmissionMetrics(ctx.registry)
        # Owners and selectors come from the shared controller caches; what they do not hold yet (a
        # ReplicaSet created a moment ago) is read, with its own limiter and pacing window (as upstream's
        # admission controller is a binary with its own client): such a read must never queue behind the
        # recommender's thousands of status writes. Served from the webhook's thread, the reads go through a
        # connection pool of that thread's loop too (`AdmissionTargets.open_own_client`).
        self.targets = AdmissionTargets(ctx.client.derive(), ctx.clock, known=ctx.controllers)
        namespace = ctx.settings.common.vpa_object_namespace or None
        # The process's LimitRanges cache when it has the shared controller caches (synced before this
        # starts), else one of our own, run from `start()`.
        self.own_limit_cache = ctx.controllers is None
        self.limit_cache: WatchCache[LimitRangeView]
        if ctx.controllers is not None:
            self.limit_cache = ctx.controllers.limitranges
        else:
            self.limit_cache = WatchCache(
                ctx.client,
                ctx.clock,
                api_path("", "v1", "limitranges", namespace=namespace),
                to_limit_range,
                name="limitranges",
            )
        self.limits = LimitRanges(self.limit_cache)
        self.namespaces = NamespacesWithVpas()
        # Gate DaemonSetScope (AEP-10031): a new DaemonSet pod's node group comes from the Node's labels.
        self.node_cache = (node_cache(ctx.client, ctx.clock) if ctx.settings.feature_gates.daemonset_scope
                           else None)
        self.node_labels = _NodeLabels(self.node_cache) if self.node_cache is not None else None
        self.admitter = Admitter(
            ctx.vpas,
            self.targets,
            self.limits,
            ctx.settings.feature_gates,
            self.metrics,
            max_allowed_cpu_boost_millicores=self.settings.max_allowed_cpu_boost_millicores,
            namespaces=self.namespaces,
            events=ctx.events,
            clock=ctx.clock,
            nodes=self.node_labels,
        )
        self.connection_limits = limits
        self.drops = ConnectionDrops(ctx.registry)
        self.server = AdmissionServer(self.admitter, limits, self.drops)
        self.guard: ConnectionGuard | None = None
        self.tls: certs.RotatingServerContext | None = None
        self.ca_bundle = b""
        self.registered_ca = b""
        self.lease = StatusLeaseRenewer(
            ctx.client,
            ctx.clock,
            namespace=self.settings.status_lease_namespace,
            name=self.settings.status_lease_name,
            interval_s=self.settings.status_lease_update_interval_s,
        )
        self.serving = False
        self._runner: web.AppRunner | None = None
        self.serving_thread = LoopThread(SERVING_THREAD)
        self._tasks: list[asyncio.Task[None]] = []

    # ---- TLS material

    async def _load_tls(self) -> tuple[bytes, bytes, bytes]:
        """(cert, key, CA bundle) from the files or the Secret."""
        if self.secret_store is not None:
            bundle = await self.secret_store.ensure()
            return bundle.cert_pem, bundle.key_pem, bundle.ca_cert_pem
        cert, key = self.files.read_pair()
        return cert, key, self.files.read_ca()

    async def _register(self) -> None:
        if not self.settings.register_webhook:
            return
        desired = registering.webhook_configuration(self.settings, self.ctx.settings.common, self.ca_bundle)
        await registering.register_webhook(self.ctx.client, desired)
        self.registered_ca = self.ca_bundle

    async def _apply_ca(self, ca: bytes) -> None:
        if ca and ca != self.registered_ca and self.settings.register_webhook:
            self.ca_bundle = ca
            try:
                await self._register()
            except ApiError as err:
                log.warning("could not update the webhook caBundle; will retry", error=str(err))
                self.registered_ca = b""  # retry on the next poll
            else:
                log.info("updated the webhook caBundle")

    async def _watch_files(self) -> None:
        """`--reload-cert`: poll the files; swap the pair on change; re-register a changed CA."""
        clock = RealClock()  # file times are wall-clock, whatever clock the process follows
        last = self.files.fingerprint()
        while True:
            await clock.sleep(self.cert_poll_s)
            current = self.files.fingerprint()
            retry_ca = self.settings.register_webhook and self.registered_ca != self.ca_bundle
            if current == last and not retry_ca:
                continue
            last = current
            assert self.tls is not None
            try:
                cert, key = self.files.read_pair()
                if cert != self.tls.cert_pem:
                    await asyncio.to_thread(self.tls.swap, cert, key)
                    log.info("reloaded the serving certificate", cert_file=self.files.cert_file)
            except certs.CertificateError as err:
                # Typically a half-written pair: keep serving the old one, look again next round.
                log.warning("serving certificate not reloaded yet", error=str(err))
                last = ()
                continue
            await self._apply_ca(self.files.read_ca())

    async def _watch_secret(self) -> None:
        """Self-managed: re-read (and renew when due) the shared Secret; swap and re-register on change."""
        assert self.secret_store is not None
        while True:
            await RealClock().sleep(self.secret_poll_s)  # wall-clock expiry, as above
            try:
                bundle = await self.secret_store.ensure()
            except (ApiError, certs.CertificateError) as err:
                log.warning("could not refresh the self-managed certificates", error=str(err))
                continue
            assert self.tls is not None
            if bundle.cert_pem != self.tls.cert_pem:
                await asyncio.to_thread(self.tls.swap, bundle.cert_pem, bundle.key_pem)
                log.info("serving the renewed self-managed certificate")
            await self._apply_ca(bundle.ca_cert_pem)

    # ---- lifecycle

    def _spawn(self, name: str, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"admission-controller:{name}")
        self._tasks.append(task)

    async def start(self) -> None:
        """Listen, register and start renewing the status Lease; returns once serving."""
        try:
            cert, key, ca = await self._load_tls()
            # Two contexts loaded from temporary files: off the event loop, which the caches' LISTs share.
            self.tls = await asyncio.to_thread(functools.partial(
                certs.RotatingServerContext,
                cert, key, min_tls_version=self.settings.min_tls_version, ciphers=self.settings.tls_ciphers))
        except certs.CertificateError as err:
            # The message names the file or the flag (--tls-ciphers, --min-tls-version) at fault.
            raise StartupError(f"admission controller TLS: {err}") from None
        self.ca_bundle = ca
        await self.namespaces.attach(self.ctx.vpas)
        if self.node_cache is not None:
            self._spawn("nodes", self.node_cache.run())
        if self.own_limit_cache:
            self._spawn("limitranges", self.limit_cache.run())
        try:
            await asyncio.wait_for(self.limit_cache.wait_synced(), self.limitrange_sync_timeout_s)
        except TimeoutError:
            log.warning("LimitRanges not listed yet; serving without them until they are")
        # Reviews are served from a loop of their own (`loop_thread`): they never queue behind the
        # recommender's or the watch caches' work on the main loop. The few API reads the admission path
        # makes (owners and selectors of workloads) go through a client of that loop; its Events go back to
        # the main loop.
        await self.serving_thread.spawn()
        try:
            self.port = await self.serving_thread.call(self._listen())
        except OSError as err:
            reason = err.strerror or err
            raise StartupError(f"--port {self.requested_port}: cannot listen: {reason}") from None
        self.serving = True
        self.ctx.health.add_readiness("admission-controller", lambda: self.serving)
        log.info("admission webhook serving", port=self.port, self_managed=self.secret_store is not None)
        await self._register()
        self._spawn("status-lease", self.lease.run())
        service = f"{self.settings.webhook_service_namespace}/{self.settings.webhook_service}"
        self._spawn("silence", watch_silence(self.ctx.pods, self.namespaces, lambda: self.server.requests,
                                             self.silent, service, self.silence_check_s))
        if self.secret_store is not None:
            self._spawn("certificates", self._watch_secret())
        elif self.settings.reload_cert:
            self._spawn("certificates", self._watch_files())

    async def _listen(self) -> int:
        """On the serving thread's loop: the aiohttp runner and the guarded TLS site; the port bound."""
        assert self.tls is not None
        self.targets.open_own_client()
        runner = web.AppRunner(
            self.server.app,
            access_log=None,
            shutdown_timeout=1.0,
            **self.connection_limits.runner_kwargs(),
        )
        await runner.setup()
        self._runner = runner
        assert runner.server is not None
        self.guard = ConnectionGuard(
            runner.server,
            self.connection_limits,
            self.drops,
            "admission-controller",
        )
        site = GuardedSite(
            runner,
            self.host or None,
            self.requested_port,
            limits=self.connection_limits,
            ssl_context=self.tls.listening,
            backlog=1024,
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self.requested_port

    async def _close(self) -> None:
        """On the serving thread's loop: stop serving, then drop what the admission path cached."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.targets.aclose()

    async def stop(self) -> None:
        self.serving = False
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        if self.serving_thread.running:
            await self.serving_thread.call(self._close())
        await self.serving_thread.stop()

    async def run(self) -> None:
        try:
            await self.start()
            await _first_failure(self._tasks)
        finally:
            await asyncio.shield(self.stop())


class _NodeLabels:
    """Node name → labels from the Node cache, for the admission path."""

    def __init__(self, cache: WatchCache[NodeView]) -> None:
        self._cache = cache

    def labels(self, name: str) -> Mapping[str, str] | None:
        node = self._cache.get(None, name)
        return node.labels if node is not None else None


async def _first_failure(tasks: list[asyncio.Task[None]]) -> None:
    """Wait forever, unless one of `tasks` fails: then re-raise its error (the runtime stops the process)."""
    while True:
        pending = [task for task in tasks if not task.done()]
        if not pending:
            await asyncio.Event().wait()
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error


async def run(ctx: ComponentContext) -> None:
    """The admission-controller component's entry point (`ComponentSpec("admission-controller", run)`)."""
    await AdmissionController(ctx).run()
