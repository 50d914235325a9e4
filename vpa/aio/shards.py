"""Tables that never grow in one long step: a dict and a set spread over `SHARDS` smaller ones by key hash.

Owns: `ShardedDict` and `ShardedSet`, for tables keyed per object of a large cluster (the pods cache's
50,000 entries, the keys a LIST saw, strings shared across workloads). Why: a CPython dict or set grows by
allocating a table twice or four times as large and copying every entry into it, in one C call that holds
the GIL. During `run_scale`'s initial LIST the pods cache's dict grew at its 43,691st pod, 10-13 ms in one
insertion, and on a quiet machine a dict takes 2.0 ms to grow at 43,690 keys, 4.4 ms at 87,381, 9.2 ms at
174,762 and 16.8 ms at 349,525: a stall of the event loop (and of the webhook's thread, waiting for the
GIL) that grows with the cluster. Spread over 64 tables, each table grows at a sixty-fourth of the size, and
each growth copies a sixty-fourth as much.

What it costs: a lookup computes the key's hash once more and goes through a Python method (about 0.1 µs);
hot paths take `shard(key)` once and work on that dict. Iterating, `values()` and `items()` chain the
shards' own iterators in C, so a snapshot taken from another thread (`list(d.values())`) is not interrupted
for another thread's bytecode within one shard; across shards it may be, so it is one shard at a time
consistent, as a dict read between two of its writer's steps is.

Must not: do I/O or import anything of the autoscaler or the simulator (every layer may use it).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, MutableMapping
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import Final, Generic, TypeVar, overload

SHARDS: Final = 64
"""Tables each sharded table is spread over (a power of two: the shard is the hash's low bits)."""

SHARD_AT: Final = 512
"""Entries past which a table that is usually small is turned into its sharded form (`file_in`, `add_in`):
an index's bucket or a namespace's pods is a few entries for most keys and tens of thousands for one (a
namespace of 50,000 pods, a rollout's boosted pods), and that one grows in one long step like any dict or
set. Why 512: the turn rehashes every entry in Python, about 0.6 µs each for the recommender's dataclass
keys (2.5-4.8 ms at 4,096 in `benchmarks.recommender_loop --vpas-per-namespace 10000`), so it is taken
while the table is small; a table of 512 costs about as much memory sharded as plain, and the thousands of
tables that stay small (an owner's pods, a label set's) are not sharded at all."""

_MASK: Final = SHARDS - 1
_MISSING: Final = object()

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")
Outer = TypeVar("Outer", bound=Hashable)


class ShardedDict(Generic[K, V]):
    """A dict of `SHARDS` dicts; the shard of a key is `hash(key)`'s low bits. Insertion order is kept
    within a shard, not across shards."""

    __slots__ = ("shards",)

    def __init__(self, items: Iterable[tuple[K, V]] = ()) -> None:
        self.shards: tuple[dict[K, V], ...] = tuple({} for _ in range(SHARDS))
        for key, value in items:
            self.shards[hash(key) & _MASK][key] = value

    def shard(self, key: K) -> dict[K, V]:
        """The dict that holds (or would hold) `key`."""
        return self.shards[hash(key) & _MASK]

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        return self.shards[hash(key) & _MASK].get(key, default)

    def __getitem__(self, key: K) -> V:
        return self.shards[hash(key) & _MASK][key]

    def __setitem__(self, key: K, value: V) -> None:
        self.shards[hash(key) & _MASK][key] = value

    def __delitem__(self, key: K) -> None:
        del self.shards[hash(key) & _MASK][key]

    @overload
    def pop(self, key: K) -> V: ...

    @overload
    def pop(self, key: K, default: D) -> V | D: ...

    def pop(self, key: K, default: object = _MISSING) -> object:
        shard = self.shards[hash(key) & _MASK]
        return shard.pop(key) if default is _MISSING else shard.pop(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.shards[hash(key) & _MASK]

    def __len__(self) -> int:
        return sum(map(len, self.shards))

    def __bool__(self) -> bool:
        return any(self.shards)

    def __iter__(self) -> Iterator[K]:
        return chain.from_iterable(self.shards)

    def keys(self) -> Iterator[K]:
        return chain.from_iterable(self.shards)

    def values(self) -> Iterator[V]:
        return chain.from_iterable(map(dict.values, self.shards))

    def items(self) -> Iterator[tuple[K, V]]:
        return chain.from_iterable(map(dict.items, self.shards))

    def clear(self) -> None:
        for shard in self.shards:
            shard.clear()

    def keys_not_in(self, other: ShardedSet[K]) -> list[K]:
        """The keys held here and not in `other`, a shard at a time (a set difference in C each)."""
        return list(chain.from_iterable(map(_keys_minus, self.shards, other.shards)))


def _keys_minus(shard: dict[K, V], other: set[K]) -> set[K]:
    return shard.keys() - other


class ShardedSet(AbstractSet[K]):
    """A set of `SHARDS` sets, sharded as `ShardedDict` is: `ShardedDict.keys_not_in` compares a shard
    with its counterpart. A `collections.abc.Set` (comparisons and operators from its mixins, slow: for
    tests and small sets), so that code taking any set takes it as one without copying it."""

    __slots__ = ("shards",)

    def __init__(self, items: Iterable[K] = ()) -> None:
        self.shards: tuple[set[K], ...] = tuple(set() for _ in range(SHARDS))
        for item in items:
            self.add(item)

    def add(self, key: K) -> None:
        self.shards[hash(key) & _MASK].add(key)

    def discard(self, key: K) -> None:
        self.shards[hash(key) & _MASK].discard(key)

    def __contains__(self, key: object) -> bool:
        return key in self.shards[hash(key) & _MASK]

    def __len__(self) -> int:
        return sum(map(len, self.shards))

    def __iter__(self) -> Iterator[K]:
        return chain.from_iterable(self.shards)

    def clear(self) -> None:
        for shard in self.shards:
            shard.clear()


def file_in(tables: MutableMapping[Outer, dict[K, V] | ShardedDict[K, V]], outer: Outer, key: K,
            value: V) -> None:
    """`tables[outer][key] = value`: the inner table made when missing, and sharded once it holds
    `SHARD_AT` entries."""
    table = tables.get(outer)
    if table is None:
        tables[outer] = {key: value}
        return
    table[key] = value
    if type(table) is dict and len(table) >= SHARD_AT:
        tables[outer] = ShardedDict(table.items())


def add_in(tables: MutableMapping[Outer, set[K] | ShardedSet[K]], outer: Outer, key: K) -> None:
    """`tables[outer].add(key)`: the inner set made when missing, and sharded once it holds `SHARD_AT`
    keys."""
    table = tables.get(outer)
    if table is None:
        tables[outer] = {key}
        return
    table.add(key)
    if type(table) is set and len(table) >= SHARD_AT:
        tables[outer] = ShardedSet(table)
