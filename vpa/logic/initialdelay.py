"""AEP-9936's observation window (`spec.updatePolicy.initialDelaySeconds`, gate `VPAInitialDelay`).

Owns: the window as a pure function of the VPA's `creationTimestamp`, the current `initialDelaySeconds` and
`now` — `initial_delay_expiry`, `in_initial_delay` — and the `InitialDelayActive` condition it implies
(`initial_delay_condition`: True / `WindowActive` while it lasts, False / `WindowExpired` after, None when the
field is unset). The updater and the admission controller treat a VPA inside its window as `Off`; the
recommender keeps publishing recommendations and writes the condition.

The window is anchored on the immutable creation time: changing the field moves its end, nothing resets
it (the AEP's choice). A value below 1 counts as unset, as the AEP's helper reads it; admission rejects it.

Must not: read the clock (callers pass `now`), read feature gates (callers check `VPAInitialDelay`), or do
I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final, NamedTuple

from vpa.model.vpa import VpaView

MAX_INITIAL_DELAY_S: Final = 7_776_000
"""90 days: the AEP's upper bound (CRD `maximum`, admission check)."""
WINDOW_ACTIVE: Final = "WindowActive"
WINDOW_EXPIRED: Final = "WindowExpired"


class WindowCondition(NamedTuple):
    """The `InitialDelayActive` condition's status, reason and message."""

    active: bool
    reason: str
    message: str


def initial_delay_expiry(vpa: VpaView) -> float | None:
    """When the window ends (Unix seconds), or None when `initialDelaySeconds` is unset or below 1."""
    delay = vpa.update_policy.initial_delay_s
    if delay is None or delay < 1:
        return None
    return vpa.creation_timestamp + delay


def in_initial_delay(vpa: VpaView, now: float) -> bool:
    """True while the window lasts: `now < creationTimestamp + initialDelaySeconds`."""
    expiry = initial_delay_expiry(vpa)
    return expiry is not None and now < expiry


def _stamp(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def initial_delay_condition(vpa: VpaView, now: float) -> WindowCondition | None:
    """The `InitialDelayActive` condition for `vpa` at `now`; None when the VPA sets no window."""
    expiry = initial_delay_expiry(vpa)
    if expiry is None:
        return None
    delay = vpa.update_policy.initial_delay_s
    if now < expiry:
        return WindowCondition(
            True,
            WINDOW_ACTIVE,
            f"recommendations are not applied to pods until {_stamp(expiry)} "
            f"(initialDelaySeconds {delay} after creation)",
        )
    return WindowCondition(False, WINDOW_EXPIRED, f"initialDelaySeconds {delay} elapsed at {_stamp(expiry)}")
