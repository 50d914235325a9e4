"""Helpers every part of the node agent shares: timestamps, container resources and the taints it adds.

Owns: `rfc3339` / `parse_time` (re-exported from `vpa.sim.timestamps`), a container's CPU and memory
requests and limits (`resources_of`), their parsed amounts (`amounts_of`, memoised; `same_amounts`), and the
taints that stand for cordoned and not-ready nodes.

Must not: hold state or know pods' or nodes' lifecycles (`runs` holds the records, the mixins the behaviour).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.pods import CPU, MEMORY, container_amounts
from vpa.sim.timestamps import parse_time as parse_time
from vpa.sim.timestamps import rfc3339 as rfc3339


def _limited(rl: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (rl or {}).items() if k in (CPU, MEMORY)}


def resources_of(container: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    res = container.get("resources") or {}
    return {"requests": _limited(res.get("requests")), "limits": _limited(res.get("limits"))}


def amounts_of(res: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(requests, limits) as integers; memoised, so the returned dicts are shared and must not be changed."""
    key = (
        tuple(sorted((res.get("requests") or {}).items())),
        tuple(sorted((res.get("limits") or {}).items())),
    )
    try:
        return _amounts_cached(key)
    except TypeError:  # an unhashable value: not worth caching
        return _parse_amounts(res)


def _parse_amounts(res: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    return (
        container_amounts({"resources": {"requests": res.get("requests")}}, "requests"),
        container_amounts({"resources": {"limits": res.get("limits")}}, "limits"),
    )


@functools.lru_cache(maxsize=8192)
def _amounts_cached(key: tuple[tuple[Any, ...], tuple[Any, ...]]) -> tuple[dict[str, int], dict[str, int]]:
    return _parse_amounts({"requests": dict(key[0]), "limits": dict(key[1])})


def same_amounts(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> bool:
    return amounts_of(a) == amounts_of(b)


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
