"""What state an in-place resize of a pod is in, and whether it has waited too long (updater).

Owns: reading the resize state of a pod from the Kubernetes ≥ 1.33 pod conditions (`PodResizePending`
with reason `Deferred` / `Infeasible`, `PodResizeInProgress` with reason `Error` on a kubelet failure) or,
on older clusters that still set it, the legacy `status.resize` field (`Proposed`, `InProgress`, `Deferred`,
`Infeasible`); the fallback timeouts of `InPlaceOrRecreate` (Deferred > 5 min, in progress > 1 h) measured
from a start time the caller supplies. As upstream, `PodResizeInProgress` means "in progress" only with
neither reason nor message; a message without a reason is Unknown (waits like Deferred).

Differences from upstream (spec §4.7, §11.7), on purpose:
- both conditions are read (upstream returns on the first one it finds, even when it is not True); when both
  are True the pending one wins, because it describes the newest desired state;
- the legacy `status.resize` field is read when neither condition is present (upstream never reads it);
- a kubelet `Error` is transient: it waits like "in progress" (upstream evicts at once);
- the timers start at *our* patch (the caller passes it), falling back to the condition's
  `lastTransitionTime`; upstream starts them when it first observes the resize.

Must not: decide what to do about the state (that is `vpa.logic.updater.inplace`), read the clock, or log.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from vpa.model import annotations as ann
from vpa.model.pod import PodView

DEFERRED_TIMEOUT_S: Final = 5 * 60.0
"""upstream `DeferredResizeUpdateTimeout`: a Deferred resize older than this falls back to eviction."""
IN_PROGRESS_TIMEOUT_S: Final = 60 * 60.0
"""upstream `InProgressResizeUpdateTimeout`: an in-progress (or erroring) resize older than this does too."""


class ResizeState(enum.StrEnum):
    NONE = "None"
    """No resize under way (or the kubelet finished it)."""
    PROPOSED = "Proposed"
    """Legacy only: requested, the kubelet has not looked at it yet. Waits like InProgress."""
    IN_PROGRESS = "InProgress"
    DEFERRED = "Deferred"
    INFEASIBLE = "Infeasible"
    ERROR = "Error"
    """The kubelet failed to actuate (PodResizeInProgress reason Error); it retries by itself."""
    UNKNOWN = "Unknown"
    """A condition or legacy value this code does not know; waits like Deferred."""


class ResizeSource(enum.StrEnum):
    CONDITIONS = "conditions"
    LEGACY = "status.resize"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ResizeStatus:
    state: ResizeState
    source: ResizeSource
    since: float | None = None
    """`lastTransitionTime` of the condition that gave the state (None for the legacy field)."""
    message: str = ""

    @property
    def resizing(self) -> bool:
        return self.state is not ResizeState.NONE

    @property
    def timeout_s(self) -> float | None:
        """How long `InPlaceOrRecreate` waits in this state before evicting (0 = at once, None = never)."""
        if self.state is ResizeState.INFEASIBLE:
            return 0.0
        if self.state in (ResizeState.DEFERRED, ResizeState.UNKNOWN):
            return DEFERRED_TIMEOUT_S
        if self.state in (ResizeState.IN_PROGRESS, ResizeState.PROPOSED, ResizeState.ERROR):
            return IN_PROGRESS_TIMEOUT_S
        return None

    def timed_out(self, started_at: float | None, now: float) -> bool:
        """True when the resize has waited strictly longer than its timeout (Infeasible: always).

        `started_at` is when the updater sent its patch; None falls back to `since`; with neither known the
        wait cannot be measured and the resize has not timed out.
        """
        timeout = self.timeout_s
        if timeout is None:
            return False
        if timeout == 0.0:
            return True
        start = started_at if started_at is not None else self.since
        if start is None:
            return False
        return now - start > timeout


NOT_RESIZING: Final = ResizeStatus(ResizeState.NONE, ResizeSource.NONE)

_PENDING_REASONS: Final = {
    ann.RESIZE_REASON_DEFERRED: ResizeState.DEFERRED,
    ann.RESIZE_REASON_INFEASIBLE: ResizeState.INFEASIBLE,
}
_LEGACY: Final = {
    ann.LEGACY_RESIZE_PROPOSED: ResizeState.PROPOSED,
    ann.LEGACY_RESIZE_IN_PROGRESS: ResizeState.IN_PROGRESS,
    ann.LEGACY_RESIZE_DEFERRED: ResizeState.DEFERRED,
    ann.LEGACY_RESIZE_INFEASIBLE: ResizeState.INFEASIBLE,
}


def resize_status(pod: PodView) -> ResizeStatus:
    """The pod's resize state: from the conditions when either is present, else from `status.resize`."""
    pending = pod.resize_pending
    in_progress = pod.resize_in_progress
    if pending is not None or in_progress is not None:
        if pending is not None and pending.is_true:
            state = _PENDING_REASONS.get(pending.reason, ResizeState.UNKNOWN)
            return ResizeStatus(state, ResizeSource.CONDITIONS, pending.last_transition_time, pending.message)
        if in_progress is not None and in_progress.is_true:
            if in_progress.reason == ann.RESIZE_REASON_ERROR:
                state = ResizeState.ERROR
            elif in_progress.reason == "" and in_progress.message == "":
                state = ResizeState.IN_PROGRESS  # a message without a reason is not "in progress" (upstream)
            else:
                state = ResizeState.UNKNOWN
            return ResizeStatus(
                state, ResizeSource.CONDITIONS, in_progress.last_transition_time, in_progress.message
            )
        return NOT_RESIZING
    legacy = pod.resize_status
    if not legacy:
        return NOT_RESIZING
    return ResizeStatus(_LEGACY.get(legacy, ResizeState.UNKNOWN), ResizeSource.LEGACY)
