"""Wiring the updater into the process: the leader-elected term (`build`, `run`) and the VPA-cache trigger
of prompt passes (`watch_recommendations`).

Must not: hold the loop's logic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from vpa.aio.cancelling import cancel_and_wait
from vpa.components.context import ComponentContext
from vpa.components.triggering import Trigger
from vpa.components.updater.events import EVENT_SOURCE
from vpa.components.updater.metrics import UpdaterMetrics
from vpa.components.updater.updater import Updater
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.neighbourwatching import node_cache
from vpa.kube.statuswriting import VpaConditionWriter
from vpa.logic.updater.reactive import prompts_in_place
from vpa.model.clock import RealClock
from vpa.model.vpa import VpaView

log = structlog.get_logger(__name__)
def watch_recommendations(ctx: ComponentContext) -> Trigger | None:
    """With `--in-place-on-recommendation`, a trigger fired (with the VPA's key) by every VPA add or update
    that `vpa.logic.updater.reactive.prompts_in_place` says deserves a prompt pass; registered on the shared
    VPA cache, so call it once per process."""
    settings = ctx.settings.updater
    if not settings.in_place_on_recommendation:
        return None
    trigger = Trigger(ctx.clock, settings.in_place_reaction_delay_s)

    def on_update(old: VpaView, new: VpaView) -> None:
        if prompts_in_place(old, new):
            trigger.fire(new.key)

    def on_add(new: VpaView) -> None:
        if prompts_in_place(None, new):
            trigger.fire(new.key)

    ctx.vpas.on_update(on_update)
    ctx.vpas.on_add(on_add)
    return trigger


def build(ctx: ComponentContext) -> Callable[[], Awaitable[None]]:
    """`ComponentSpec.build` for the updater: metrics and the recommendation trigger set up once, a fresh
    updater per leadership term."""
    metrics = UpdaterMetrics(ctx.registry)
    trigger = watch_recommendations(ctx)

    async def term() -> None:
        if trigger is not None:
            trigger.clear()  # changes seen while not leading are covered by the term's first loop
        await run(ctx, metrics=metrics, trigger=trigger)

    return term


async def run(ctx: ComponentContext, *, metrics: UpdaterMetrics | None = None,
              trigger: Trigger | None = None) -> None:
    """The updater's elected work: its event recorder, then the loop. The controller/LimitRange caches are
    the process's shared ones (synced before this starts); a context without them gets caches of its own."""
    # Stamped with the wall clock, which kubectl compares them with, even on a simulated clock.
    events = EventRecorder(ctx.client, ctx.clock, component=EVENT_SOURCE, stamp_clock=RealClock())
    background = [asyncio.ensure_future(events.run())]
    controllers = ctx.controllers
    if controllers is None:
        namespace = ctx.settings.common.vpa_object_namespace or None
        controllers = ControllerCaches(ctx.client, ctx.clock, namespace=namespace)
        background.append(asyncio.ensure_future(controllers.run()))
    # Gates InPlaceCapacityAware (AEP-9726), DaemonSetScope (AEP-10031) and ResizeGuard read Nodes.
    gates = ctx.settings.feature_gates
    reads_nodes = gates.in_place_capacity_aware or gates.daemonset_scope or gates.resize_guard
    nodes = node_cache(ctx.client, ctx.clock) if reads_nodes else None
    if nodes is not None:
        background.append(asyncio.ensure_future(nodes.run()))
    try:
        await controllers.wait_synced()
        if nodes is not None:
            await nodes.wait_synced()
        await Updater(ctx, controllers, events=events, metrics=metrics, trigger=trigger, nodes=nodes,
                      conditions=VpaConditionWriter(ctx.client)).run_forever()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(events.flush(), timeout=1.0)
        await cancel_and_wait(background)
