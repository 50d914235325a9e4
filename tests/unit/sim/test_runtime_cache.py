"""The controllers' cache: own writes first, late watch events must not roll it back or resurrect objects."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.sim.cluster.runtime import Cache


def obj(name: str, uid: str, rv: int, owner: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}
    if owner:
        md["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"metadata": md}


# Each step: (object, deleted). Expected: the cached resourceVersion of ("ns", "a") at the end (None: absent).
CASES: list[tuple[str, list[tuple[dict[str, Any], bool]], str | None]] = [
    ("newer-wins", [(obj("a", "u1", 5), False), (obj("a", "u1", 7), False)], "7"),
    ("late-older-event-ignored", [(obj("a", "u1", 7), False), (obj("a", "u1", 5), False)], "7"),
    ("delete-removes", [(obj("a", "u1", 5), False), (obj("a", "u1", 6), True)], None),
    ("no-resurrection-after-delete", [(obj("a", "u1", 6), True), (obj("a", "u1", 5), False)], None),
    ("same-name-new-uid-replaces", [(obj("a", "u1", 5), False), (obj("a", "u2", 9), False)], "9"),
    ("late-delete-of-old-uid-keeps-new", [(obj("a", "u2", 9), False), (obj("a", "u1", 6), True)], "9"),
]


@pytest.mark.parametrize(("steps", "expected"), [(s, e) for _, s, e in CASES], ids=[i for i, _, _ in CASES])
def test_cache_apply(steps: list[tuple[dict[str, Any], bool]], expected: str | None) -> None:
    cache = Cache("pods")
    for o, deleted in steps:
        cache.apply(o, deleted=deleted)
    found = cache.get(("ns", "a"))
    assert (found["metadata"]["resourceVersion"] if found else None) == expected


def test_owner_and_namespace_indexes_follow_changes() -> None:
    cache = Cache("pods")
    cache.apply(obj("a", "u1", 1, owner="rs1"))
    cache.apply(obj("b", "u2", 2, owner="rs1"))
    assert sorted(o["metadata"]["name"] for o in cache.owned_by("rs1")) == ["a", "b"]
    cache.apply(obj("a", "u1", 3), deleted=True)
    assert [o["metadata"]["name"] for o in cache.owned_by("rs1")] == ["b"]
    assert [o["metadata"]["name"] for o in cache.in_namespace("ns")] == ["b"]
    cache.apply(obj("b", "u2", 4, owner="rs2"))
    assert cache.owned_by("rs1") == []
    assert len(cache) == 1
