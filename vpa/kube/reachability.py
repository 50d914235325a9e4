"""Whether the API server answers, told once per change and naming the server.

Owns: one `Reachability` per server URL (`for_server`), which every watch cache of a process shares: the
first connection failure logs one warning, `api_server_unreachable`, with the server, the error and what to
check; later failures stay quiet (the caches log them at debug) until an answer logs
`api_server_reachable` with how long it was down. Without it, an unreachable server showed as a dozen
`TransportError` warnings every few seconds, none naming the server.

Must not: retry, sleep or make requests itself (the callers do), or hold more than one flag per server.
"""

from __future__ import annotations

import time

import structlog

log = structlog.get_logger(__name__)


class Reachability:
    """The API server at `server`: reachable until a connection fails, again once something answers."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.down_since: float | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: BaseException) -> bool:
        """A request got no answer; True (and one warning) when the server was thought reachable."""
        if self.down_since is not None:
            return False
        self.down_since = time.monotonic()
        detail = " ".join(str(error).split()) or type(error).__name__
        log.warning("api_server_unreachable", server=self.server, error=detail,
                    check="the server is up and the kubeconfig (--kubeconfig, --context) points at it; "
                          "retrying with backoff")
        return True

    def answered(self) -> None:
        if self.down_since is None:
            return
        log.info("api_server_reachable", server=self.server,
                 down_s=round(time.monotonic() - self.down_since, 1))
        self.down_since = None


_SERVERS: dict[str, Reachability] = {}


def for_server(server: str) -> Reachability:
    """The one `Reachability` of `server` in this process."""
    found = _SERVERS.get(server)
    if found is None:
        found = _SERVERS[server] = Reachability(server)
    return found
