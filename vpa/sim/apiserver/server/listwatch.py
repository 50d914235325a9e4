"""LIST and WATCH serving: the `ListWatch` mixin of `ApiServer`.

Owns: LIST with `resourceVersion` / `resourceVersionMatch` checks (504 too large, 410 expired), `limit`,
`continue` and `remainingItemCount`, built from each object's cached bytes; chunked WATCH streams with
`timeoutSeconds`, bookmarks (periodic, on request, and the `initial-events-end` one after
`sendInitialEvents`), 410 `Expired` as an `ERROR` event, `Table` rows, and objects converted to the
requested version or another API's view.

Must not: change objects, or keep a watcher registered after its stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import orjson
from aiohttp import web

from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.server.common import (
    JSON,
    bool_param,
    wants_table,
)
from vpa.sim.apiserver.server.core import ServerCore
from vpa.sim.apiserver.store import (
    Event,
    Watcher,
)
from vpa.sim.contracts import ApiError, JsonObj


class ListWatch(ServerCore):
    """LIST and WATCH."""

    # ------------------------------------------------------------------ list

    async def _list(
        self, request: web.Request, rt: ResourceType, version: str, namespace: str | None
    ) -> web.Response:
        q = request.query
        store = self.store
        rv_param = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        if rv_param and rv_param != "0":
            try:
                want = int(rv_param)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from exc
            if want > store.rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {want}, current: {store.rv}",
                    causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    retry_after_s=1,
                )
            floor = store.compacted_for(rt.key)
            if match == "Exact" and want < floor:
                raise ApiError(410, "Expired", f"too old resource version: {want} ({floor})")
        limit_raw = q.get("limit", "0")
        try:
            limit = int(limit_raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid limit {limit_raw!r}") from exc
        start: tuple[str, str] | None = None
        list_rv = store.rv
        if q.get("continue"):
            list_rv, start = store.decode_continue(q["continue"], rt.key)
        entries = store.iter_entries(
            rt.key,
            namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            start=start,
            limit=limit + 1 if limit > 0 else None,
        )
        meta: JsonObj = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(entries) > limit:
            entries = entries[:limit]
            last = entries[-1].obj["metadata"]
            meta["continue"] = store.encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
            if not q.get("labelSelector") and not q.get("fieldSelector"):
                total = (
                    len(store.iter_entries(rt.key, namespace, start=start))
                    if namespace
                    else _remaining(store.sorted_keys(rt.key), start)
                )
                meta["remainingItemCount"] = max(0, total - limit)
        if wants_table(request):
            return self._table_response(request, rt, version, [e.obj for e in entries], meta)
        api_version = rt.api_version(version)
        head = orjson.dumps({"kind": rt.list_kind, "apiVersion": api_version, "metadata": meta})
        if version != rt.version and rt.crd:
            raws = [orjson.dumps(dict(e.obj, apiVersion=api_version)) for e in entries]
        else:
            raws = [e.raw for e in entries]
        body = head[:-1] + b',"items":[' + b",".join(raws) + b"]}"
        return web.Response(body=body, content_type=JSON)

    # ------------------------------------------------------------------ watch

    async def _watch(
        self,
        request: web.Request,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str | None,
        *,
        storage_key: str | None = None,
        transform: Callable[[JsonObj], JsonObj] | None = None,
    ) -> web.StreamResponse:
        q = request.query
        field_selector = q.get("fieldSelector")
        if name:
            field_selector = f"metadata.name={name}" + (f",{field_selector}" if field_selector else "")
        rv_param = q.get("resourceVersion", "")
        send_initial = bool_param(request, "sendInitialEvents")
        bookmarks = bool_param(request, "allowWatchBookmarks")
        if send_initial and (q.get("resourceVersionMatch") != "NotOlderThan" or not bookmarks):
            raise ApiError(
                422,
                "Invalid",
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
            )
        since: int | None = None
        if rv_param and rv_param != "0":
            try:
                since = int(rv_param)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from exc
        initial = send_initial or since is None
        timeout_s = 1800.0
        if q.get("timeoutSeconds"):
            try:
                timeout_s = float(q["timeoutSeconds"])
            except ValueError as exc:
                raise ApiError(400, "BadRequest", "invalid timeoutSeconds") from exc
        table = wants_table(request)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        try:
            watcher = self.store.add_watcher(
                storage_key or rt.key,
                namespace,
                label_selector=q.get("labelSelector"),
                field_selector=field_selector,
                since_rv=since,
                initial=initial,
            )
        except ApiError as err:
            if err.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(orjson.dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await resp.write_eof()
            return resp
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            await resp.prepare(request)
            await self._pump(
                request,
                resp,
                watcher,
                rt,
                version,
                timeout_s,
                bookmarks,
                send_initial,
                table,
                since,
                transform,
            )
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.remove_watcher(watcher)
            if task is not None:
                self._streams.discard(task)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    async def _pump(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        w: Watcher,
        rt: ResourceType,
        version: str,
        timeout_s: float,
        bookmarks: bool,
        send_initial: bool,
        table: bool,
        since: int | None,
        transform: Callable[[JsonObj], JsonObj] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        api_version = rt.api_version(version)
        convert = version != rt.version and rt.crd
        initial_pending = send_initial
        first_table = True
        last_rv = since or 0

        def bookmark(annotate: bool = False) -> bytes:
            md: JsonObj = {"resourceVersion": str(max(self.store.rv, last_rv))}
            if annotate:
                md["annotations"] = {"k8s.io/initial-events-end": "true"}
            return (
                orjson.dumps(
                    {
                        "type": "BOOKMARK",
                        "object": {"kind": rt.kind, "apiVersion": api_version, "metadata": md},
                    }
                )
                + b"\n"
            )

        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            chunks: list[bytes] = []
            if w.queue.empty():
                if initial_pending:
                    initial_pending = False
                    await resp.write(bookmark(annotate=True))
                    continue
                try:
                    item = await asyncio.wait_for(
                        w.queue.get(), timeout=min(remaining, self.bookmark_interval_s)
                    )
                except TimeoutError:
                    if bookmarks:
                        await resp.write(bookmark())
                    continue
            else:
                item = w.queue.get_nowait()
            items: list[Event | str | None] = [item]
            while not w.queue.empty() and len(items) < 1000:
                items.append(w.queue.get_nowait())
            closing = False
            for it in items:
                if it is None:
                    closing = True
                    break
                if isinstance(it, str):
                    if bookmarks:
                        chunks.append(bookmark())
                    continue
                last_rv = max(last_rv, it.rv)
                if table:
                    tbl = self._table(
                        request, rt, version, [it.obj], {"resourceVersion": str(it.rv)}, headers=first_table
                    )
                    first_table = False
                    chunks.append(orjson.dumps({"type": it.type, "object": tbl}) + b"\n")
                elif transform is not None:
                    chunks.append(orjson.dumps({"type": it.type, "object": transform(it.obj)}) + b"\n")
                elif convert:
                    chunks.append(
                        orjson.dumps({"type": it.type, "object": dict(it.obj, apiVersion=api_version)})
                        + b"\n"
                    )
                else:
                    chunks.append(it.line())
            if chunks:
                await resp.write(b"".join(chunks))
            if closing:
                return


def _remaining(keys: list[tuple[str, str]], start: tuple[str, str] | None) -> int:
    if start is None:
        return len(keys)
    import bisect

    return len(keys) - bisect.bisect_right(keys, start)
