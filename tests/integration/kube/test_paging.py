"""`PagedList`: pages in order with the next one requested before this one's items are used, an expired
continue token restarting the LIST unpaged, a body that is not a list, early close, and pacing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from vpa.kube.client import ApiError, Gone, KubeClient
from vpa.kube.paging import PagedList
from vpa.model.clock import VirtualClock

from .helpers import turns_counted
from .scripted import ScriptedServer, status_body


def cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


def page(names: list[str], rv: str, cont: str = "") -> dict[str, object]:
    metadata = {"resourceVersion": rv} | ({"continue": cont} if cont else {})
    items = [cm(n) for n in names]
    return {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": metadata, "items": items}


@contextlib.asynccontextmanager
async def client_of(server: ScriptedServer) -> AsyncIterator[KubeClient]:
    from kubernetes_asyncio.client import ApiClient, Configuration

    client = KubeClient(ApiClient(Configuration(host=server.url)), VirtualClock())
    try:
        yield client
    finally:
        await client.close()


async def names(pages: PagedList) -> list[str]:
    out: list[str] = []
    async with contextlib.aclosing(pages.items()) as items:
        async for obj in items:
            assert isinstance(obj, dict)
            out.append(obj["metadata"]["name"])
    return out


async def test_pages_are_read_in_order_and_the_next_is_asked_for_before_this_ones_items_are_used() -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, page(["a", "b"], "7", cont="tok-1"))
        server.then(200, page(["c", "d"], "8", cont="tok-2"))
        server.then(200, page(["e"], "9"))
        pages = PagedList(client, "/api/v1/configmaps", {"labelSelector": "x=y"}, page_size=2)
        seen_when_first_used: list[int] = []
        out: list[str] = []
        async with contextlib.aclosing(pages.items()) as items:
            async for obj in items:
                assert isinstance(obj, dict)
                if obj["metadata"]["name"] == "a":
                    await asyncio.sleep(0.2)  # the second page downloads meanwhile
                    seen_when_first_used.append(len(server.received))
                out.append(obj["metadata"]["name"])
    assert out == ["a", "b", "c", "d", "e"]
    assert pages.resource_version == "9"
    assert pages.requests == 3
    assert seen_when_first_used == [2]
    first, second, third = server.received
    assert first.query == {"labelSelector": "x=y", "limit": "2"}
    assert second.query == {"labelSelector": "x=y", "limit": "2", "continue": "tok-1"}
    assert third.query["continue"] == "tok-2"


async def test_an_expired_continue_token_restarts_the_list_unpaged() -> None:
    restarted: list[int] = []
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, page(["a"], "10", cont="tok-1"))
        server.then(410, status_body(410, "Expired", "The provided continue parameter is too old"))
        server.then(200, page(["a", "b"], "12", cont="ignored: the LIST is unpaged"))
        pages = PagedList(client, "/api/v1/configmaps", page_size=1, on_restart=lambda: restarted.append(1))
        assert await names(pages) == ["a", "a", "b"]
    assert restarted == [1]
    assert pages.restarts == 1
    assert pages.resource_version == "12"
    assert pages.requests == 3
    assert "limit" not in server.received[2].query
    assert "continue" not in server.received[2].query


async def test_gone_on_the_first_page_is_raised() -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(410, status_body(410, "Expired", "too old resource version"))
        with pytest.raises(Gone):
            await names(PagedList(client, "/api/v1/configmaps"))


@pytest.mark.parametrize(
    "body", [b"[1, 2]", b'{"items": {"a": 1}}', b'{"items": [{"metadata": {"name": "a"}}', b"\xff\xfe"])
async def test_a_body_that_is_not_a_list_is_an_api_error_naming_the_path(body: bytes) -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, body)
        with pytest.raises(ApiError) as caught:
            await names(PagedList(client, "/api/v1/configmaps"))
    assert caught.value.reason == "BadList"
    assert "LIST /api/v1/configmaps did not return a list" in str(caught.value)


async def test_stopping_early_cancels_the_next_pages_download() -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, page(["a", "b"], "7", cont="tok-1"))
        pages = PagedList(client, "/api/v1/configmaps", page_size=2)
        async with contextlib.aclosing(pages.items()) as items:
            async for _ in items:
                break
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and "_get" in repr(t)]
        assert tasks == []
        assert pages.resource_version == ""


async def test_other_tasks_run_between_slices_of_a_page() -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, page([f"cm-{i}" for i in range(50)], "7"))
        async with turns_counted() as turns:
            pages = PagedList(client, "/api/v1/configmaps", slice_s=0.0)
            ticks_at: list[int] = []
            async with contextlib.aclosing(pages.items()) as items:
                async for _ in items:
                    ticks_at.append(turns[0])
    assert len(ticks_at) == 50
    assert ticks_at[-1] - ticks_at[0] >= 49  # the ticker ran between every two items


async def test_dicts_gathers_every_object_of_every_page_and_skips_the_rest() -> None:
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, {"metadata": {"continue": "tok-1"}, "items": [cm("a"), 7, None]})
        server.then(200, {"metadata": {"resourceVersion": "9"}, "items": [cm("b")]})
        pages = PagedList(client, "/api/v1/configmaps", page_size=3)
        assert [obj["metadata"]["name"] for obj in await pages.dicts()] == ["a", "b"]
    assert pages.resource_version == "9"


async def test_a_page_of_many_chunks_is_parsed_from_them_items_cut_anywhere() -> None:
    """A page read in several chunks (a 500-pod page is 4 MiB) is parsed from those chunks, never joined:
    items, strings and multi-byte characters cut at chunk boundaries come out whole and in order."""
    from vpa.kube.client import STREAM_CHUNK_BYTES

    many = [f"cm-{i}-ünïcödé-{'x' * (i % 97)}" for i in range(6000)]
    async with ScriptedServer() as server, client_of(server) as client:
        server.then(200, page(many[:4000], "7"))
        server.then(200, page(many[:4000], "7", cont="tok-1"))
        server.then(200, page(many[4000:], "8"))
        _, chunks = await client.request_chunks("GET", "/api/v1/configmaps")
        assert sum(map(len, chunks)) > 2 * STREAM_CHUNK_BYTES  # so at least three chunks …
        assert max(map(len, chunks)) <= STREAM_CHUNK_BYTES  # … none over the chunk size
        pages = PagedList(client, "/api/v1/configmaps", page_size=4000)
        assert await names(pages) == many
    assert pages.resource_version == "8"
