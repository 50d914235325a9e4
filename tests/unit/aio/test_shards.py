"""Sharded tables: they behave as a dict or a set would (but for order across shards); no shard is large."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpa.aio.shards import SHARD_AT, SHARDS, ShardedDict, ShardedSet, add_in, file_in

KEYS = st.tuples(st.sampled_from(["", "default", "bench-1"]), st.text(min_size=1, max_size=4))
OPS = st.lists(
    st.tuples(st.sampled_from(["set", "del", "pop", "discard"]), KEYS, st.integers()), max_size=60
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_a_sharded_dict_and_set_agree_with_a_dict_and_a_set_after_any_operations(
    ops: list[tuple[str, tuple[str, str], int]],
) -> None:
    table: ShardedDict[tuple[str, str], int] = ShardedDict()
    members: ShardedSet[tuple[str, str]] = ShardedSet()
    plain: dict[tuple[str, str], int] = {}
    plain_members: set[tuple[str, str]] = set()
    for op, key, value in ops:
        if op == "set":
            table[key] = value
            plain[key] = value
            members.add(key)
            plain_members.add(key)
        elif op == "del":
            if key in plain:
                del table[key]
                del plain[key]
            else:
                with pytest.raises(KeyError):
                    del table[key]
        elif op == "pop":
            assert table.pop(key, None) == plain.pop(key, None)
        else:
            members.discard(key)
            plain_members.discard(key)
        assert len(table) == len(plain)
        assert bool(table) == bool(plain)
        assert len(members) == len(plain_members)
    assert dict(table.items()) == plain
    assert sorted(table) == sorted(plain) == sorted(table.keys())
    assert sorted(table.values()) == sorted(plain.values())
    assert set(members) == plain_members
    assert members <= plain_members  # a collections.abc.Set: compares as one
    assert members >= plain_members
    for key in plain:
        assert key in table
        assert table[key] == plain[key] == table.get(key) == table.shard(key)[key]
    assert table.get(("absent", "x")) is None
    assert table.get(("absent", "x"), 7) == 7
    assert ("absent", "x") not in table
    assert sorted(table.keys_not_in(members)) == sorted(set(plain) - plain_members)


def test_a_popped_key_without_a_default_raises_like_a_dict() -> None:
    table: ShardedDict[str, int] = ShardedDict()
    table["a"] = 1
    assert table.pop("a") == 1
    with pytest.raises(KeyError):
        table.pop("a")
    with pytest.raises(KeyError):
        table["a"]


def test_keys_are_spread_so_that_no_shard_holds_much_more_than_its_share() -> None:
    """The point of sharding: 50,000 keys, and the largest table (what one growth copies) holds about a
    sixty-fourth of them, never a large part."""
    table: ShardedDict[tuple[str, str], int] = ShardedDict()
    even = ((f"bench-{n % 10}", f"web-{n}") for n in range(0, 50_000, 2))
    seen: ShardedSet[tuple[str, str]] = ShardedSet(even)
    for n in range(50_000):
        table[(f"bench-{n % 10}", f"web-{n}")] = n
    assert len(table.shards) == len(seen.shards) == SHARDS
    assert max(map(len, table.shards)) < 2 * 50_000 // SHARDS
    assert max(map(len, seen.shards)) < 2 * 25_000 // SHARDS
    gone = table.keys_not_in(seen)
    assert len(gone) == 25_000
    assert all(int(name.removeprefix("web-")) % 2 == 1 for _, name in gone)
    table.clear()
    seen.clear()
    assert len(table) == len(seen) == 0
    assert not table


@pytest.mark.parametrize(
    ("entries", "sharded"),
    [
        (1, False),  # a table made on the first entry is a plain one
        (SHARD_AT - 1, False),
        (SHARD_AT, True),  # the entry that fills it to the bound shards it
        (SHARD_AT + 10, True),  # and it stays sharded
    ],
)
def test_a_filed_table_is_sharded_once_it_holds_shard_at_entries(entries: int, sharded: bool) -> None:
    tables: dict[str, dict[int, str] | ShardedDict[int, str]] = {"other": {0: "zero"}}
    members: dict[str, set[int] | ShardedSet[int]] = {}
    for key in range(entries):
        file_in(tables, "big", key, str(key))
        add_in(members, "big", key)
    assert isinstance(tables["big"], ShardedDict) is sharded
    assert isinstance(members["big"], ShardedSet) is sharded
    assert dict(tables["big"].items()) == {key: str(key) for key in range(entries)}
    assert set(members["big"]) == set(range(entries))
    assert type(tables["other"]) is dict  # the other tables are left as they are
