"""Requests reaching the admission webhook's sockets, noticed by the main thread before the webhook runs.

Owns: `Arrivals`, which marks the webhook's sockets (its listening socket and each accepted connection) for
signal-driven I/O (`O_ASYNC`, the owner being the main thread: Linux sends that thread `SIGIO` when data
or a connection arrives) and handles `SIGIO` on the main thread: when one of those sockets has something
unread, or a review is under way, the main thread gives way at once (`pacing.Deference.arrived` and
`defer`).

Why: the main thread gives way to a review at its paced points (`pacing.Deference`), but it learns of the
review only at the webhook's first TLS read, and the webhook's thread needs the GIL before that read: right
after its poll returns. A main thread sending thousands of API requests a second gives the GIL away and
takes it back every few hundred microseconds, each time before the waiting thread is even scheduled
(CPython 3.11 restarts a waiter's switch interval at every release), so that first wait lasted tens of
milliseconds: the worst reviews during a first recommender loop. A Python signal handler runs on the main
thread at its next bytecode, whatever it is doing; the kernel sends the signal when the bytes arrive.

Must not: be installed anywhere but on the main thread (signal handlers run there only); leave `SIGIO` at
its default (which ends the process) while a marked socket may still be open: `close` ignores it instead;
decide anything about the requests themselves.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import threading
from types import FrameType
from typing import Any, Final

import structlog

from vpa.aio.pacing import Deference

log = structlog.get_logger(__name__)

_F_SETOWN_EX: Final = getattr(fcntl, "F_SETOWN_EX", 15)
_F_OWNER_TID: Final = getattr(fcntl, "F_OWNER_TID", 0)


class Arrivals:
    """`SIGIO` from the webhook's sockets, handled on the main thread by giving way to the webhook."""

    __slots__ = ("_deference", "_epoll", "_handling", "_installed", "_tid", "signals")

    def __init__(self, deference: Deference) -> None:
        self._deference = deference
        self._epoll: select.epoll | None = None
        self._installed = False
        self._handling = False
        self._tid = 0
        self.signals = 0
        """`SIGIO`s handled."""

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> bool:
        """On the main thread: handle `SIGIO` there. False (and nothing marked later) where this cannot be
        done: another thread, a platform without `SIGIO` or `epoll`."""
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGIO"):
            return False
        try:
            self._epoll = select.epoll()
            signal.signal(signal.SIGIO, self._signalled)
        except (AttributeError, OSError, ValueError) as err:
            log.info("webhook arrivals not signalled", reason=str(err))
            if self._epoll is not None:
                self._epoll.close()
                self._epoll = None
            return False
        self._tid = threading.get_native_id()
        self._installed = True
        return True

    def watch(self, sock: Any) -> None:
        """From the webhook's thread: signal the main thread when `sock` (a socket, or a transport's
        `socket` extra) has data or a connection to accept. A socket that cannot be marked is left as it
        is (its reviews still get the paced deference)."""
        epoll = self._epoll
        if not self._installed or epoll is None or sock is None:
            return
        try:
            fd = sock.fileno()
            if fd < 0:
                return
            fcntl.fcntl(fd, _F_SETOWN_EX, struct.pack("ii", _F_OWNER_TID, self._tid))
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
            epoll.register(fd, select.EPOLLIN)
        except (OSError, ValueError):
            return  # closed under us, or already registered (a number reused is dropped from epoll on close)

    def close(self) -> None:
        """On the main thread, once the webhook stopped serving: `SIGIO` ignored from now on (a socket still
        marked, closing, must not end the process)."""
        if not self._installed:
            return
        self._installed = False
        signal.signal(signal.SIGIO, signal.SIG_IGN)
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None

    def _signalled(self, signum: int, frame: FrameType | None) -> None:
        # A handler runs between any two bytecodes of the main thread, this one's too: a signal arriving
        # while it holds the deference's event lock must not run it again (that lock is not reentrant).
        if self._handling:
            return
        self._handling = True
        try:
            self.signals += 1
            epoll = self._epoll
            if epoll is None:
                return
            try:
                waiting = bool(epoll.poll(0))
            except (OSError, ValueError):
                return
            if waiting:
                self._deference.arrived()
            self._deference.defer()
        finally:
            self._handling = False
