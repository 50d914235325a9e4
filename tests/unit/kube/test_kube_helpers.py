"""Small pieces of the kube adapters: error mapping, lease time formats, clock deadlines, metric observers."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from prometheus_client import CollectorRegistry, Counter

from vpa.kube.client import (
    ApiError,
    Conflict,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
)
from vpa.kube.leasing import DeadlineExceeded, call_with_deadline, format_micro_time, parse_time
from vpa.kube.watching import WatchStats, counter_observer
from vpa.model.clock import VirtualClock


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected_type", "reason", "retry_after"),
    [
        (404, {"reason": "NotFound", "message": 'pods "p" not found'}, None, NotFound, "NotFound", None),
        (409, {"reason": "AlreadyExists", "message": "exists"}, None, Conflict, "AlreadyExists", None),
        (410, {"reason": "Expired", "message": "too old"}, None, Gone, "Expired", None),
        (429, {"message": "slow"}, {"Retry-After": "7"}, TooManyRequests, "TooManyRequests", 7.0),
        (429, {"details": {"retryAfterSeconds": 3}}, None, TooManyRequests, "TooManyRequests", 3.0),
        (
            503,
            None,
            {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
            ServerError,
            "ServiceUnavailable",
            None,
        ),
        (500, None, None, ServerError, "InternalError", None),
        (422, {"reason": "Invalid", "message": "bad"}, None, ApiError, "Invalid", None),
    ],
    ids=["404", "409-exists", "410", "429-header", "429-body", "503-http-date", "500-empty", "422"],
)
def test_error_mapping(
    status: int,
    body: dict[str, object] | None,
    headers: dict[str, str] | None,
    expected_type: type[ApiError],
    reason: str,
    retry_after: float | None,
) -> None:
    raw = orjson.dumps(body) if body is not None else b""
    err = ApiError.from_response(status, raw, headers)
    assert type(err) is expected_type
    assert err.status == status
    assert err.reason == reason
    assert err.retry_after_s == retry_after
    assert str(status) in str(err)


def test_non_json_error_body_keeps_its_text() -> None:
    err = ApiError.from_response(502, b"<html>bad gateway</html>")
    assert err.message == "<html>bad gateway</html>"
    assert err.body == {}
    assert err.is_server_error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01T00:00:00Z", 1_767_225_600.0),
        ("2026-01-01T00:00:00.250000Z", 1_767_225_600.25),
        ("2026-01-01T01:00:00+01:00", 1_767_225_600.0),
        ("2026-01-01T00:00:00", 1_767_225_600.0),
        ("", None),
        ("yesterday", None),
        (None, None),
    ],
    ids=["seconds", "micro", "offset", "naive-is-utc", "empty", "garbage", "none"],
)
def test_parse_time(text: object, expected: float | None) -> None:
    assert parse_time(text) == expected


def test_micro_time_round_trips() -> None:
    text = format_micro_time(1_767_225_600.123456)
    assert text == "2026-01-01T00:00:00.123456Z"
    assert parse_time(text) == pytest.approx(1_767_225_600.123456)


async def test_call_with_deadline_on_a_virtual_clock() -> None:
    clock = VirtualClock()

    async def slow() -> str:
        await asyncio.Event().wait()
        return "never"

    async def quick() -> str:
        return "done"

    assert await call_with_deadline(clock, 5, quick()) == "done"
    pending = asyncio.create_task(call_with_deadline(clock, 5, slow()))
    await asyncio.sleep(0.01)
    assert not pending.done()
    clock.advance(5)
    with pytest.raises(DeadlineExceeded):
        await asyncio.wait_for(pending, 1)
    with pytest.raises(DeadlineExceeded):
        await call_with_deadline(clock, 0, quick())


async def test_call_with_deadline_gives_a_fast_virtual_clock_a_floor_of_real_time() -> None:
    clock = VirtualClock(time_scale=1000.0)  # 5 virtual seconds pass in 5 ms

    async def api_call() -> str:
        await asyncio.sleep(0.05)  # what a real API call takes
        return "answered"

    with pytest.raises(DeadlineExceeded):
        await call_with_deadline(clock, 5, api_call())
    assert await call_with_deadline(clock, 5, api_call(), min_wall_s=0.2) == "answered"

    async def hung() -> str:
        await asyncio.Event().wait()
        return "never"

    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await call_with_deadline(clock, 5, hung(), min_wall_s=0.2)
    # uvloop's timers have millisecond granularity: allow them to fire a little early.
    assert 0.18 <= time.monotonic() - started < 2


async def test_call_with_deadline_propagates_errors() -> None:
    async def boom() -> None:
        raise NotFound(404, "NotFound", "gone")

    with pytest.raises(NotFound):
        await call_with_deadline(VirtualClock(), 5, boom())


def test_counter_observer_uses_the_callers_registry() -> None:
    registry = CollectorRegistry()
    counter = Counter("vpa_watch_cache_events", "watch cache events", ["cache", "what"], registry=registry)
    observe = counter_observer(counter)
    observe("pods", "relists", 1)
    observe("pods", "relists", 2)
    observe("vpas", "events", 5)
    assert (
        registry.get_sample_value("vpa_watch_cache_events_total", {"cache": "pods", "what": "relists"}) == 3
    )
    assert (
        registry.get_sample_value("vpa_watch_cache_events_total", {"cache": "vpas", "what": "events"}) == 5
    )
    assert set(WatchStats().as_dict()) >= {"relists", "restarts", "events", "stalls", "malformed"}
