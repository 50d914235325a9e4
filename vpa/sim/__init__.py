"""The simulated cluster: a Kubernetes API server, controllers and node agent in one asyncio process.

`from vpa.sim import SimCluster` is the entry point for tests; it is imported lazily so that importing
`vpa.sim.contracts` (the cluster behaviour does) does not pull in the HTTP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vpa.sim.apiserver.harness import SimCluster

__all__ = ["SimCluster"]


def __getattr__(name: str) -> Any:
    if name == "SimCluster":
        from vpa.sim.apiserver.harness import SimCluster

        return SimCluster
    raise AttributeError(f"module 'vpa.sim' has no attribute {name!r}")
