"""`Arrivals`: SIGIO from a watched socket reaches the main thread, which gives way while the owner's work
is pending; not installed off the main thread; SIGIO ignored once closed; a handler never runs inside
itself."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from vpa.aio.pacing import Deference
from vpa.components.arrivals import Arrivals


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.fixture
def arrivals() -> Iterator[Arrivals]:
    before = signal.getsignal(signal.SIGIO)
    made = Arrivals(Deference(max_wait_s=0.2))
    yield made
    made.close()
    signal.signal(signal.SIGIO, before)


def _until(check: object, limit_s: float = 2.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.001)
    return False


def test_data_on_a_watched_socket_signals_the_main_thread(
    arrivals: Arrivals, pair: tuple[socket.socket, socket.socket]
) -> None:
    assert arrivals.install()
    watched, peer = pair
    arrivals.watch(watched)
    peer.send(b"review")
    assert _until(lambda: arrivals.signals >= 1)


def test_the_main_thread_gives_way_while_the_data_waits_for_its_owner(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    deference = Deference(max_wait_s=0.2)
    arrivals = Arrivals(deference)
    before = signal.getsignal(signal.SIGIO)
    try:
        assert arrivals.install()
        watched, peer = pair
        owner_ready = threading.Event()
        read_at: list[float] = []

        def owner() -> None:
            deference.wanted()
            deference.unwanted()  # the owner is known, nothing is wanted yet
            arrivals.watch(watched)
            owner_ready.set()
            # A busy owner: it reads only once the main thread's handler has seen the data waiting (or
            # after a second, and the assertions below fail). Reading at once could consume the data before
            # the handler polls, and then the handler has nothing to notice: the race this test must not run.
            deadline = time.perf_counter() + 1.0
            while deference.noticed == 0 and time.perf_counter() < deadline:
                time.sleep(0.001)
            watched.settimeout(2)
            data = watched.recv(64)  # the review arrives
            deference.enter()
            time.sleep(0.05)  # and takes a while
            read_at.append(time.perf_counter())
            deference.leave()
            assert data == b"review"

        thread = threading.Thread(target=owner)
        thread.start()
        assert owner_ready.wait(2)
        peer.send(b"review")
        # The main thread runs bytecode; the handler runs between two of them and waits for the review.
        assert _until(lambda: deference.waits >= 1)
        resumed = time.perf_counter()
        thread.join(2)
        assert read_at
        assert resumed >= read_at[0] - 0.005
        assert arrivals.signals >= 1
        assert deference.noticed >= 1
    finally:
        arrivals.close()
        signal.signal(signal.SIGIO, before)


def test_nothing_pending_means_no_wait(arrivals: Arrivals) -> None:
    assert arrivals.install()
    arrivals._signalled(signal.SIGIO, None)  # no owner, no socket with data: returns at once
    assert arrivals.signals == 1
    assert arrivals._deference.waits == 0


def test_a_handler_does_not_run_inside_itself(arrivals: Arrivals) -> None:
    assert arrivals.install()
    arrivals._handling = True  # as if a signal came while the handler ran
    arrivals._signalled(signal.SIGIO, None)
    assert arrivals.signals == 0


def test_not_installed_off_the_main_thread(pair: tuple[socket.socket, socket.socket]) -> None:
    made = Arrivals(Deference())
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(made.install()))
    thread.start()
    thread.join(2)
    assert result == [False]
    made.watch(pair[0])  # not installed: the socket is left alone
    assert not made.installed


def test_sigio_ignored_once_closed(arrivals: Arrivals, pair: tuple[socket.socket, socket.socket]) -> None:
    assert arrivals.install()
    watched, peer = pair
    arrivals.watch(watched)
    arrivals.close()
    assert signal.getsignal(signal.SIGIO) == signal.SIG_IGN
    peer.send(b"late")  # still marked for SIGIO: the process must not end
    time.sleep(0.05)
    assert arrivals.signals == 0


def test_arrived_without_an_owner_or_inside_defer_changes_nothing() -> None:
    deference = Deference(max_wait_s=0.2)
    deference.arrived()
    deference.defer()  # nothing wanted: at once
    assert deference.waits == 0
    assert deference.noticed == 0
