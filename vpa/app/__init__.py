"""Composition root (layer L4): `run(settings)` is what `vpa run` calls.

Owns: process set-up (log configuration, the start-up checks of `vpa.app.preflight`, uvloop), choosing
which components run from `--components`, and handing them to `vpa.app.runtime.Runtime`, which builds the
shared client, caches, health server and leader electors and supervises everything until a signal.

Must not: parse argv or environment (that is `vpa.cli`), or hold decisions (that is `vpa.logic`).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import structlog
import uvloop

from vpa.app import logs, preflight
from vpa.app.runtime import ComponentSpec, Runtime
from vpa.components import health, recommendation_metrics, updater, webhook
from vpa.components.context import ComponentContext
from vpa.components.recommender import RecommenderGroup
from vpa.model.settings import RunSettings, StartupError

__all__ = ["ComponentSpec", "Runtime", "build_components", "run"]

log = structlog.get_logger(__name__)

EXIT_STARTUP = 2


def _build_recommender(ctx: ComponentContext) -> Callable[[], Awaitable[None]]:
    """The recommenders `--recommender-name` lists (usually one), on the runtime's shared client, pod and VPA
    caches, clock, registry and health, under the one recommender Lease."""
    settings = ctx.settings
    recommender = RecommenderGroup.from_client(
        settings.recommender,
        common=settings.common,
        gates=settings.feature_gates,
        client=ctx.client,
        pods=ctx.pods,
        vpas=ctx.vpas,
        clock=ctx.clock,
        registry=ctx.registry,
        health=ctx.health,
        recorder=ctx.events,
    )
    return recommender.run_forever


def _build_admission_controller(ctx: ComponentContext) -> Callable[[], Awaitable[None]]:
    """The webhook on `--port`, listening on the same host as `--address` (one bind host per process:
    `:8942` means all interfaces, as upstream's `:8000`; `127.0.0.1:…` keeps everything on loopback)."""
    host, _ = health.parse_address(ctx.settings.address)
    return webhook.AdmissionController(ctx, host=host).run


def build_components(settings: RunSettings) -> list[ComponentSpec]:
    """The components `--components` selects, each with its Lease settings when it is leader-elected.

    The recommender and the updater are leader-elected with their own Leases (`vpa-recommender-lease`,
    `vpa-updater` by default); the admission controller serves on every replica.
    """
    specs: list[ComponentSpec] = []
    if settings.runs("recommender"):
        specs.append(
            ComponentSpec("recommender", _build_recommender, lease=settings.recommender.leader_election)
        )
    if settings.runs("updater"):
        specs.append(ComponentSpec("updater", updater.build, lease=settings.updater.leader_election))
    if settings.runs("admission-controller"):
        specs.append(ComponentSpec("admission-controller", _build_admission_controller, lease=None))
    if settings.recommendation_metrics:
        # Every replica exports them (not elected): whichever replica Prometheus scrapes has the series.
        specs.append(ComponentSpec("recommendation-metrics", recommendation_metrics.build, lease=None))
    return specs


def run(settings: RunSettings) -> int:
    """Configure logging, then run the process on uvloop until a signal; returns the exit status.

    A fatal start-up error (`StartupError`: a kubeconfig that does not load, an address in use, certificate
    files missing) is one line on stderr naming the flag or file, and exit status 2, as for a bad flag.
    """
    logs.configure(v=settings.common.v, log_format=settings.common.log_format)
    for warning in settings.warnings:
        log.warning(warning)
    try:
        preflight.check(settings)  # before anything is written to the cluster
        return uvloop.run(Runtime(settings, components=build_components(settings)).run())
    except StartupError as error:
        print(f"vpa run: {error}", file=sys.stderr, flush=True)
        return EXIT_STARTUP
