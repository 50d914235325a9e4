"""Composition root (layer L4): `run(settings)` is what `vpa run` calls.

Owns: process set-up (log configuration, uvloop), choosing which components run from `--components`, and
handing them to `vpa.app.runtime.Runtime`, which builds the shared client, caches, health server and
leader electors and supervises everything until a signal.

Must not: parse argv or environment (that is `vpa.cli`), or hold decisions (that is `vpa.logic`).
"""

from __future__ import annotations

import asyncio

import structlog
import uvloop

from vpa.app import logs
from vpa.app.runtime import ComponentSpec, Runtime
from vpa.components import updater
from vpa.components.context import ComponentContext
from vpa.model.settings import RunSettings

__all__ = ["ComponentSpec", "Runtime", "build_components", "run"]

log = structlog.get_logger(__name__)


async def _hold_leadership(_: ComponentContext) -> None:
    """Elected work of a component whose loop is not part of this build: keep the Lease, do nothing else."""
    await asyncio.Event().wait()


def build_components(settings: RunSettings) -> list[ComponentSpec]:
    """The components `--components` selects, each with its Lease settings when it is leader-elected.

    The recommender and the updater are leader-elected with their own Leases (`vpa-recommender-lease`,
    `vpa-updater` by default); the admission controller serves on every replica.
    """
    specs: list[ComponentSpec] = []
    if settings.runs("recommender"):
        specs.append(
            ComponentSpec("recommender", _hold_leadership, lease=settings.recommender.leader_election)
        )
    if settings.runs("updater"):
        specs.append(ComponentSpec("updater", updater.run, lease=settings.updater.leader_election))
    return specs


def run(settings: RunSettings) -> int:
    """Configure logging, then run the process on uvloop until a signal; returns the exit status."""
    logs.configure(v=settings.common.v, log_format=settings.common.log_format)
    for warning in settings.warnings:
        log.warning(warning)
    return uvloop.run(Runtime(settings, components=build_components(settings)).run())
