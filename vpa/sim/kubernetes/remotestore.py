"""`RemoteStore`: the simulator's `Store` seam over a real API server, so one kubelet model drives both.

Owns: a LIST+WATCH cache per tracked resource (bookmarks, resume from the last resourceVersion after a
dropped stream, a fresh LIST after 410 Gone with the differences replayed as events), the synchronous
`get`/`list` the node agent and the metrics API read from that cache, the asynchronous writes as plain REST
calls (POST, PUT, DELETE; `pods/binding` as a Binding POST) whose results go into the cache at once, and
`ApiError` from the server's `Status` answers, so callers see what they see from the in-process store.

Must not: interpret any kind (the node agent does), or retry writes itself: a 409 or 404 goes back to the
caller, which already handles both against the in-process store.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson

from vpa.aio.cancelling import cancel_and_wait
from vpa.sim.apiserver.selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from vpa.sim.cluster.runtime import key_of, rv_of
from vpa.sim.contracts import ApiError, JsonObj, WatchEvent

log = logging.getLogger(__name__)

_WATCH_TIMEOUT_S = 290
_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class Kind:
    """Where a resource lives in the API: `/api/v1` or `/apis/GROUP/VERSION`, namespaced or not."""

    prefix: str
    plural: str
    namespaced: bool
    kind: str


KINDS: dict[str, Kind] = {
    "pods": Kind("/api/v1", "pods", True, "Pod"),
    "nodes": Kind("/api/v1", "nodes", False, "Node"),
    "namespaces": Kind("/api/v1", "namespaces", False, "Namespace"),
    "events": Kind("/api/v1", "events", True, "Event"),
    "services": Kind("/api/v1", "services", True, "Service"),
    "leases.coordination.k8s.io": Kind("/apis/coordination.k8s.io/v1", "leases", True, "Lease"),
    "apiservices.apiregistration.k8s.io": Kind(
        "/apis/apiregistration.k8s.io/v1", "apiservices", False, "APIService"
    ),
    "customresourcedefinitions.apiextensions.k8s.io": Kind(
        "/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False, "CustomResourceDefinition"
    ),
}


class _Tracked:
    """One resource's cache, the resourceVersion to watch from, and the subscribers' queues."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], JsonObj] = {}
        self.rv = ""
        self.queues: list[asyncio.Queue[WatchEvent]] = []

    def apply(self, etype: str, obj: JsonObj, *, notify: bool = True) -> None:
        k = key_of(obj)
        cur = self.objects.get(k)
        if etype == "DELETED":
            if cur is None:
                return
            self.objects.pop(k, None)
        else:
            same_uid = cur is not None and (cur.get("metadata") or {}).get("uid") == (
                obj.get("metadata") or {}
            ).get("uid")
            if same_uid and cur is not None and rv_of(cur) >= rv_of(obj):
                return  # our own write's result got here first
            self.objects[k] = obj
            etype = "MODIFIED" if cur is not None else "ADDED"
        if notify:
            event = WatchEvent(etype, obj)  # type: ignore[arg-type]
            for q in self.queues:
                q.put_nowait(event)


class RemoteStore:
    """A `vpa.sim.contracts.Store` whose state is a real API server's (`url`, CA, bearer token)."""

    def __init__(
        self,
        url: str,
        ca_pem: bytes | None,
        token: str | None = None,
        *,
        client_cert: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        if ca_pem:
            self._ssl = ssl.create_default_context(cadata=ca_pem.decode())
        else:
            self._ssl = ssl.create_default_context()
        if client_cert is not None:
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "client.crt"), Path(tmp, "client.key")
                cert.write_bytes(client_cert[0])
                key.write_bytes(client_cert[1])
                self._ssl.load_cert_chain(cert, key)
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._session: aiohttp.ClientSession | None = None
        self._tracked: dict[str, _Tracked] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.requests = 0

    # --- lifecycle ---------------------------------------------------------------------------------------

    async def start(self, resources: list[str]) -> None:
        """LIST each resource into its cache, then keep it current with a watch."""
        self._session = aiohttp.ClientSession(
            headers=self._headers,
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=32),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            json_serialize=lambda o: orjson.dumps(o).decode(),
        )
        for resource in resources:
            tracked = self._tracked[resource] = _Tracked()
            await self._relist(resource, tracked, notify=False)
            self._tasks.append(asyncio.create_task(self._watch(resource, tracked), name=f"remote-{resource}"))

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- paths and calls ---------------------------------------------------------------------------------

    @staticmethod
    def kind(resource: str) -> Kind:
        kind = KINDS.get(resource)
        if kind is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return kind

    def path(
        self, resource: str, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        kind = self.kind(resource)
        parts = [kind.prefix]
        if kind.namespaced and namespace:
            parts.append(f"/namespaces/{quote(namespace, safe='')}")
        parts.append(f"/{kind.plural}")
        if name:
            parts.append(f"/{quote(name, safe='')}")
            if sub:
                parts.append(f"/{sub}")
        return "".join(parts)

    async def call(
        self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None
    ) -> JsonObj:
        """One request; a non-2xx answer raises ApiError with the server's code, reason and message."""
        assert self._session is not None, "RemoteStore.start() first"
        url = self.url + path + ("?" + urlencode(query) if query else "")
        self.requests += 1
        async with self._session.request(
            method,
            url,
            data=orjson.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json"} if body is not None else None,
            timeout=aiohttp.ClientTimeout(total=60),
        ) as resp:
            raw = await resp.read()
        try:
            doc = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            doc = {"message": raw.decode(errors="replace")[:300]}
        if resp.status >= 300:
            raise ApiError(
                resp.status,
                str(doc.get("reason") or "Unknown"),
                str(doc.get("message") or f"HTTP {resp.status}"),
                causes=list((doc.get("details") or {}).get("causes") or []),
            )
        result: JsonObj = doc
        return result

    # --- Store: reads ------------------------------------------------------------------------------------

    def _cache(self, resource: str) -> _Tracked:
        tracked = self._tracked.get(resource)
        if tracked is None:
            raise ApiError(500, "InternalError", f"resource {resource} is not tracked by this RemoteStore")
        return tracked

    def get(self, resource: str, namespace: str | None, name: str) -> JsonObj | None:
        return self._cache(resource).objects.get((namespace or "", name))

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[JsonObj]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, resource)
        out = []
        for (ns, _name), obj in sorted(self._cache(resource).objects.items()):
            if namespace and ns != namespace:
                continue
            if labels and not labels_match(labels, obj):
                continue
            if fields and not fields_match(fields, obj):
                continue
            out.append(obj)
        return out

    def subscribe(self, resource: str) -> AsyncIterator[WatchEvent]:
        """Every change from now on; registers at once, so nothing after this call is missed."""
        queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        self._cache(resource).queues.append(queue)
        return self._drain(queue)

    @staticmethod
    async def _drain(queue: asyncio.Queue[WatchEvent]) -> AsyncIterator[WatchEvent]:
        while True:
            yield await queue.get()

    # --- Store: writes -----------------------------------------------------------------------------------

    def _observe(self, resource: str, obj: JsonObj, deleted: bool = False) -> None:
        tracked = self._tracked.get(resource)
        if tracked is not None and obj.get("metadata"):
            tracked.apply("DELETED" if deleted else "MODIFIED", obj)

    async def create(self, resource: str, obj: JsonObj, *, admit: bool = True) -> JsonObj:
        # `admit` is the in-process store's switch; a real API server always runs admission.
        md = obj.get("metadata") or {}
        created = await self.call("POST", self.path(resource, md.get("namespace")), obj)
        self._observe(resource, created)
        return created

    async def update(self, resource: str, obj: JsonObj, *, subresource: str | None = None) -> JsonObj:
        md = obj.get("metadata") or {}
        namespace, name = md.get("namespace"), md.get("name") or ""
        if subresource == "binding":
            node = (obj.get("spec") or {}).get("nodeName") or ""
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            await self.call("POST", self.path(resource, namespace, name, "binding"), binding)
            updated = await self.call("GET", self.path(resource, namespace, name))
        else:
            updated = await self.call("PUT", self.path(resource, namespace, name, subresource), obj)
        self._observe(resource, updated)
        return updated

    async def delete(
        self, resource: str, namespace: str | None, name: str, *, grace_period_s: int | None = None
    ) -> JsonObj | None:
        body: JsonObj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_s is not None:
            body["gracePeriodSeconds"] = grace_period_s
        try:
            result = await self.call("DELETE", self.path(resource, namespace, name), body)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        if result.get("kind") == "Status":
            return None
        # A pod with a grace period is still there, marked for deletion; with 0 it is gone.
        gone = grace_period_s == 0 or not (result.get("metadata") or {}).get("deletionTimestamp")
        self._observe(resource, result, deleted=gone)
        return result

    # --- list and watch ----------------------------------------------------------------------------------

    async def _relist(self, resource: str, tracked: _Tracked, *, notify: bool) -> None:
        items: list[JsonObj] = []
        query = {"limit": "500"}
        kind = self.kind(resource)
        while True:
            page = await self.call("GET", self.path(resource), query=query)
            for item in page.get("items") or []:
                item.setdefault("kind", kind.kind)
                item.setdefault("apiVersion", kind.prefix.removeprefix("/apis/").removeprefix("/api/"))
                items.append(item)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                tracked.rv = str(meta.get("resourceVersion") or "")
                break
            query = {"limit": "500", "continue": meta["continue"]}
        seen = set()
        for item in items:
            seen.add(key_of(item))
            tracked.apply("ADDED", item, notify=notify)
        for k in [k for k in tracked.objects if k not in seen]:
            tracked.apply("DELETED", tracked.objects[k], notify=notify)

    async def _watch(self, resource: str, tracked: _Tracked) -> None:
        assert self._session is not None
        while True:
            query = {
                "watch": "1",
                "allowWatchBookmarks": "true",
                "resourceVersion": tracked.rv,
                "timeoutSeconds": str(_WATCH_TIMEOUT_S),
            }
            url = self.url + self.path(resource) + "?" + urlencode(query)
            expired = False
            try:
                async with self._session.get(
                    url, timeout=aiohttp.ClientTimeout(total=None, sock_read=_WATCH_TIMEOUT_S + 30)
                ) as resp:
                    if resp.status == 410:
                        expired = True
                    elif resp.status != 200:
                        raise ApiError(resp.status, "WatchFailed", (await resp.text())[:300])
                    else:
                        async for line in resp.content:
                            if not line.strip():
                                continue
                            event = orjson.loads(line)
                            etype, obj = event.get("type"), event.get("object") or {}
                            if etype == "ERROR":
                                expired = obj.get("code") == 410
                                break
                            rv = (obj.get("metadata") or {}).get("resourceVersion")
                            if rv:
                                tracked.rv = rv
                            if etype in ("ADDED", "MODIFIED", "DELETED"):
                                tracked.apply(etype, obj)
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, OSError, ApiError, TimeoutError, ValueError) as err:
                log.info("watch of %s interrupted (%s); resuming", resource, err)
                await asyncio.sleep(_RETRY_S)
            if expired:
                try:
                    await self._relist(resource, tracked, notify=True)
                except ApiError as err:
                    log.warning("relist of %s failed: %s", resource, err.message)
                    await asyncio.sleep(_RETRY_S)
