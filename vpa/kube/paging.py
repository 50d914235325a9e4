"""Paged LISTs, read a page at a time and parsed an item at a time, paced on the event loop.

Owns: `PagedList`, the one way the process reads a collection that can be large (the watch caches' LISTs,
the target resolver's snapshot of well-known controllers, checkpoints at restore, the report's reads):
`limit` pages; each page's continue token read before its items (kube-apiserver sends `metadata` first),
so the next page downloads while this one is parsed; the items parsed one by one from the chunks the page
was read in (`ListStream`), `paced` on the event loop, so a page of hundreds of objects never holds the
loop in one piece (as one `orjson.loads` of a page would) and is never joined or decoded whole (each fresh
page-sized object costs a page fault per page of memory); a continue token that expired
(410 Gone) restarting the LIST unpaged, as client-go's pager does, so the same cannot happen again mid-way.

Must not: convert or keep the objects (callers do, as they come); hold more than the page being parsed and the
next one downloading.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from typing import Any, Final

from vpa.aio.pacing import SLICE_S, paced
from vpa.kube.client import ApiError, Gone, KubeClient
from vpa.kube.metricsreading import ListStream

PAGE_SIZE: Final = 500
"""Objects per page, client-go's pager default."""

_END: Final = object()


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class PagedList:
    """One LIST of `path` (with `query`'s selectors), its items yielded by `items()` as they are parsed.

    After `items()` is exhausted, `resource_version` is the LIST's. `on_restart` is called when an expired
    continue token made the LIST start over (what was yielded before stays yielded: it was the server's
    state; the caller forgets what it counted as seen). Raises `ApiError` for an error answer (`Gone` on
    the first page included) and for a body that is not a list (reason `BadList`). Iterate it inside
    `contextlib.aclosing` (a download of the next page is cancelled when iteration stops early).
    """

    def __init__(
        self,
        client: KubeClient,
        path: str,
        query: Mapping[str, str | int | bool] | None = None,
        *,
        page_size: int = PAGE_SIZE,
        slice_s: float = SLICE_S,
        timeout_s: float | None = 60.0,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._query = dict(query or {})
        self._page_size = page_size
        self._slice_s = slice_s
        self._timeout_s = timeout_s
        self._on_restart = on_restart
        self.resource_version = ""
        self.requests = 0
        """Pages requested (a restart's included)."""
        self.restarts = 0

    def _fetch(self, page_size: int, continue_token: str | None) -> asyncio.Task[list[bytes]]:
        query = dict(self._query)
        if page_size > 0:
            query["limit"] = page_size
        if continue_token:
            query["continue"] = continue_token
        self.requests += 1
        return asyncio.ensure_future(self._get(query))

    async def _get(self, query: dict[str, str | int | bool]) -> list[bytes]:
        _, chunks = await self._client.request_chunks(
            "GET", self._path, query=query, timeout_s=self._timeout_s)
        return chunks

    async def items(self) -> AsyncGenerator[object, None]:
        """Every item of the LIST, in the server's order, each as `orjson`/`json` parsed it."""
        page_size = self._page_size
        token: str | None = None
        pending: asyncio.Task[list[bytes]] | None = self._fetch(page_size, None)
        try:
            while True:
                assert pending is not None
                try:
                    chunks = await pending
                except Gone:
                    if not token:
                        raise
                    self.restarts += 1
                    if self._on_restart is not None:
                        self._on_restart()
                    token, page_size = None, 0
                    pending = self._fetch(page_size, None)
                    continue
                pending = None
                stream = ListStream()

                def told(stream: ListStream = stream, page_size: int = page_size) -> None:
                    # The page's metadata is parsed: its continue token, and the next page fetched meanwhile.
                    nonlocal token, pending
                    token = self._next(page_size, stream.others)
                    if token:
                        pending = self._fetch(page_size, token)

                async for obj in paced(self._parse(stream, chunks, told), self._slice_s):
                    yield obj
                if not token:
                    metadata = _as_dict(stream.others.get("metadata"))
                    self.resource_version = str(metadata.get("resourceVersion") or "")
                    return
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending

    def _parse(self, stream: ListStream, chunks: list[bytes], told: Callable[[], None]) -> Iterator[object]:
        """The items of one page, parsed from its chunks one at a time (each chunk let go of once fed);
        `told()` as soon as the page's `metadata` is parsed (kube-apiserver sends it first), or at the end."""
        others = stream.others
        metadata_seen = False
        chunks.reverse()  # popped from the end
        ending = False
        while not ending:
            ending = not chunks
            try:
                parsed = stream.finish() if ending else stream.feed(chunks.pop())
            except ValueError as err:  # a UnicodeDecodeError
                raise self._bad(err) from None
            while True:
                try:
                    obj = next(parsed, _END)
                except ValueError as err:
                    raise self._bad(err) from None
                if not metadata_seen and "metadata" in others:
                    metadata_seen = True
                    told()
                if obj is _END:
                    break
                yield obj
                del obj
        if not metadata_seen:
            told()

    async def dicts(self) -> list[dict[str, Any]]:
        """Every item that is a JSON object, in one list (for a caller that wants the whole collection);
        paced like `items()`."""
        async with contextlib.aclosing(self.items()) as items:
            return [item async for item in items if isinstance(item, dict)]

    @staticmethod
    def _next(page_size: int, others: Mapping[str, object]) -> str | None:
        """The continue token of a page (none for an unpaged LIST, whatever the server says)."""
        if page_size <= 0:
            return None
        return str(_as_dict(others.get("metadata")).get("continue") or "") or None

    def _bad(self, err: Exception) -> ApiError:
        return ApiError(0, "BadList", f"LIST {self._path} did not return a list: {err}")
