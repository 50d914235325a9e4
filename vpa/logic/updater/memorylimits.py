"""Memory decreases that respect runtimes: which in-place lowerings of a memory limit a resize may make.

Owns: `policies_of` (the VPA's `vpa.dev/memory-limit-decrease` annotation read for the updater, failing
safe to `Never` for every container when the value does not parse) and `hold_memory_limit_decreases`, which
takes the changes a resize would make and removes the memory-limit decreases the container's policy does
not allow in place:

- `Always` (the default): nothing is held;
- `Never`: a lower memory limit is never sent in a resize (a higher one is);
- `OnRestart`: a lower memory limit is sent only when that resize restarts the container (its
  `resizePolicy` for memory is `RestartContainer`), so the runtime starts afresh under the new limit.

A held limit keeps its request company when the container's memory request equals its limit today (a
Guaranteed container): lowering the request alone would change the pod's QoS class. A recreated pod gets
the lower values at admission whatever the policy: the runtime then starts under them.

Why: a JVM or Go runtime sizes its heap from the limit it started with and rarely returns memory to the
kernel; lowering the limit under it is answered by the kernel's OOM killer, not by a smaller footprint
(docs/memory-limit-decrease.md).

Must not: call the API, read the clock, or decide anything but which changes to drop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from vpa.logic.updater.inplace import Change
from vpa.model import annotations as ann
from vpa.model.annotations import MemoryLimitDecrease
from vpa.model.pod import PodView
from vpa.model.resources import MEMORY

FAIL_SAFE: Final[Mapping[str, MemoryLimitDecrease]] = {ann.ALL_CONTAINERS: MemoryLimitDecrease.NEVER}


def policies_of(vpa_annotations: Mapping[str, str]) -> tuple[Mapping[str, MemoryLimitDecrease], str]:
    """The per-container policies of a VPA and a problem ("" when none).

    An unparsable value (the webhook rejects it, but a VPA may predate the webhook) holds every memory-limit
    decrease: lowering a limit the user tried to protect is the costly mistake, keeping it is not.
    """
    raw = vpa_annotations.get(ann.MEMORY_LIMIT_DECREASE)
    if raw is None:
        return {}, ""
    try:
        return ann.parse_memory_limit_decrease(raw), ""
    except ValueError as err:
        return FAIL_SAFE, f"{err}; every memory-limit decrease is held"


def hold_memory_limit_decreases(
    pod: PodView, changes: Sequence[Change], policies: Mapping[str, MemoryLimitDecrease]
) -> tuple[list[Change], tuple[str, ...]]:
    """`changes` without the memory-limit decreases the policies hold, and one note per held container."""
    if not policies:
        return list(changes), ()
    kept: list[Change] = []
    held: list[str] = []
    for change in changes:
        if change.resource != MEMORY or change.limit is None:
            kept.append(change)
            continue
        container = pod.containers[change.container_index]
        current_limit = container.limits.get(MEMORY)
        if current_limit is None or change.limit >= current_limit:
            kept.append(change)
            continue
        policy = ann.memory_limit_decrease_for(policies, change.container)
        if policy is MemoryLimitDecrease.ALWAYS or (
            policy is MemoryLimitDecrease.ON_RESTART and change.disruptive
        ):
            kept.append(change)
            continue
        held.append(f"{change.container}: memory limit {current_limit} kept ({policy.value})")
        request = change.request
        current_request = container.requests.get(MEMORY)
        if request is not None and current_request == current_limit and request < current_request:
            request = None  # a Guaranteed container keeps request == limit
        if request is not None:
            kept.append(change._replace(limit=None))
    return kept, tuple(held)
