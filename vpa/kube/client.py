"""The one Kubernetes API client the process shares: configuration, raw JSON requests, watch streams.

Owns: building a kubernetes-asyncio `ApiClient` from the kubeconfig kubectl would use (`vpa.kube.kubeconfig`:
`--kubeconfig`, `$KUBECONFIG` as the caller passes it, `~/.kube/config`, else the in-cluster service account,
and `--context`); and `KubeClient`, a small facade that sends raw requests
on that client's aiohttp session with its TLS and auth, parses bodies with orjson, raises a typed
`ApiError` for every non-2xx answer, bounds every request with client-side timeouts, sends every request
through the QPS/burst `TokenBucket` (or, once the server shows it does API Priority and Fairness, through
`ServerPacing`: a window of requests in flight that a 429 halves and whose `Retry-After` holds every new
request), and retries 429, 5xx and connection errors with jittered exponential
backoff (honouring `Retry-After`) when that is safe. Typed write helpers set explicit content types, so a
custom object is never sent a strategic-merge or a JSON-patch content type with an object body. The errors
it raises are `vpa.kube.errors`'s (importable from here as well).

Size: over 600 lines because `KubeClient` is one class whose three ways to send (`request_chunks` with its
retries, `stream_lines` for watches, `get_chunks` for large bodies) share its limiter, pacing window,
session, headers and request counting; split, each piece would reach into the others' private state.

Must not: read environment variables or global configuration (the caller passes paths and options), use the
generated models on hot paths, or know about VPAs or pods beyond URL shapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import quote

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from yarl import URL

from vpa.kube import kubeconfig as kubeconfigs

# The errors are `vpa.kube.errors`'s; most callers import them from here, beside the client that raises them.
from vpa.kube.errors import ApiError as ApiError
from vpa.kube.errors import Conflict as Conflict
from vpa.kube.errors import Gone as Gone
from vpa.kube.errors import NotFound as NotFound
from vpa.kube.errors import ServerError as ServerError
from vpa.kube.errors import TooManyRequests as TooManyRequests
from vpa.kube.errors import TransportError as TransportError
from vpa.kube.ratelimiting import ServerPacing, TokenBucket
from vpa.model.clock import Clock

JsonObj = dict[str, Any]
Query = Mapping[str, str | int | bool] | Sequence[tuple[str, str | int | bool]]
Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

CONTENT_JSON: Final = "application/json"
CONTENT_MERGE_PATCH: Final = "application/merge-patch+json"
CONTENT_JSON_PATCH: Final = "application/json-patch+json"
CONTENT_STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

# kube-apiserver answers every request API Priority and Fairness classified with these (the matched
# FlowSchema's and PriorityLevelConfiguration's UIDs): the server paces its clients itself.
PF_FLOW_SCHEMA_UID_HEADER: Final = "X-Kubernetes-PF-FlowSchema-UID"
PF_PRIORITY_LEVEL_UID_HEADER: Final = "X-Kubernetes-PF-PriorityLevel-UID"

_IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "PUT", "DELETE"})
_DEFAULT_USER_AGENT: Final = "vpa/0.1.0"


STREAM_CHUNK_BYTES: Final = 256 * 1024
"""The most `get_chunks` hands over at once. What arrived is handed over as it is buffered, and a TLS
transport that reads ahead can buffer megabytes, which the caller would then decode as one piece."""


RECEIVE_BUFFER_BYTES: Final = 128 * 1024
"""`SO_RCVBUF` of every connection to the API server (the kernel doubles it for its bookkeeping). uvloop
(libuv) reads a socket several times per readiness event while reads come back full, and decrypts each
read's TLS records there and then, each `SSL_read` giving up the GIL: with Linux's autotuned buffer (up to
32 MiB) a LIST page that arrived while the loop was busy was read, decrypted and fed to aiohttp in one
callback, with a GIL hand-off to the webhook's or the scrape's thread per read. Fixed, the buffer bounds
what one readiness event reads. It also bounds how fast the next LIST page downloads while this one is
parsed (one readiness event per loop turn): large enough that a page arrives in about the time the page
before takes to parse (a smaller one made the initial sync wait for its downloads), small enough to keep a
callback short."""


def api_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket for a connection to the API server (aiohttp's `socket_factory`), its receive buffer
    `RECEIVE_BUFFER_BYTES`, set before it connects so that the window it offers is sized to it."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=type_, proto=proto)
    with contextlib.suppress(OSError):  # a platform that refuses keeps its default: no less correct
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    return sock


# ---------------------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How the client talks to the API server. Defaults follow upstream flags where they exist."""

    qps: float = 50.0  # --kube-api-qps; <= 0 disables client-side limiting
    burst: int = 100  # --kube-api-burst
    # --kube-api-server-pacing: once the server's answers carry API Priority and Fairness headers, pace by
    # its answers (at most `burst` requests in flight, halved on a 429, whose Retry-After holds every new
    # request) instead of the `qps` token bucket.
    server_pacing: bool = True
    connect_timeout_s: float = 10.0
    request_timeout_s: float = 30.0  # total time for one non-watch request, body included
    watch_timeout_s: int = 300  # server-side `timeoutSeconds` on watches
    watch_read_timeout_s: float = 360.0  # client-side: longest silence on a watch socket
    max_retries: int = 5  # retries after the first attempt for retryable failures
    backoff_base_s: float = 0.2
    backoff_max_s: float = 10.0
    max_retry_after_s: float = 60.0  # never sleep longer than this on a server's Retry-After
    user_agent: str = _DEFAULT_USER_AGENT


async def build_api_client(
    kubeconfig: str | None = None,
    kubeconfig_env: str | None = None,
    *,
    context: str | None = None,
    user_agent: str = _DEFAULT_USER_AGENT,
    default_kubeconfig: str = "",
) -> k8s_client.ApiClient:
    """An `ApiClient` from the kubeconfig kubectl would use (`vpa.kube.kubeconfig.choose`: `--kubeconfig`,
    else `$KUBECONFIG` (passed in, a list merged as kubectl merges it), else `default_kubeconfig` when it
    exists, else in-cluster config), at `context` or the current context. Raises
    `kubeconfig.KubeconfigError` (one line naming the file) for a kubeconfig that cannot be used.

    Must run inside a running event loop (aiohttp binds its connector to it).
    """
    configuration = k8s_client.Configuration()
    choice = kubeconfigs.choose(kubeconfig or "", kubeconfig_env or "", default_kubeconfig)
    if choice.in_cluster:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        merged = kubeconfigs.load(choice, context or "")
        try:
            await k8s_config.load_kube_config_from_dict(
                merged, context=context or None, client_configuration=configuration
            )
        except Exception as err:  # kubernetes-asyncio raises ConfigException and plain errors alike
            detail = " ".join(str(err).split()) or type(err).__name__
            raise kubeconfigs.KubeconfigError(f"{choice.describe()}: cannot load: {detail}") from None
    api = k8s_client.ApiClient(configuration)
    api.user_agent = user_agent
    return api


def api_path(
    group: str,
    version: str,
    plural: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """REST path of a collection or object: `/api/v1/...` for the core group, `/apis/g/v/...` otherwise."""
    parts = ["/api", version] if group in ("", "core") else ["/apis", group, version]
    if namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


def _encode_query(query: Query | None) -> list[tuple[str, str]]:
    if not query:
        return []
    items = query.items() if isinstance(query, Mapping) else query
    out: list[tuple[str, str]] = []
    for key, value in items:
        if isinstance(value, bool):
            out.append((key, "true" if value else "false"))
        else:
            out.append((key, str(value)))
    return out


# ------------------------------------------------------------------------------------------------ client


def env_proxy(host: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for `host` (`HTTPS_PROXY`/`HTTP_PROXY`, `NO_PROXY` honoured, as
    client-go does) and its credentials; (None, None) when there is none."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except (LookupError, ValueError):
        return None, None
    return str(proxy), auth



async def _read_chunks(resp: aiohttp.ClientResponse) -> list[bytes]:
    """The whole body as the chunks it was read in, `STREAM_CHUNK_BYTES` at a time, with the event loop
    given a turn between chunks: aiohttp's `read()` drains what is already buffered in one go, and a LIST
    page that arrived while the previous one was parsed would hold the loop for all of it. A body of one
    chunk costs no turn. The chunks are not joined here: a caller that parses as it goes (`PagedList`)
    never needs the page in one object (a fresh large object costs a page fault per page)."""
    chunks: list[bytes] = []
    async for chunk in resp.content.iter_chunked(STREAM_CHUNK_BYTES):
        if chunks:
            await asyncio.sleep(0)
        chunks.append(chunk)
    return chunks


def _joined(chunks: list[bytes]) -> bytes:
    if not chunks:
        return b""
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class KubeClient:
    """Raw JSON access to the API server through one shared `ApiClient` (its session, TLS and auth).

    Every request waits for the rate limiter, carries client-side timeouts, and is retried with jittered
    exponential backoff on 429 (any verb: the server did not act), and on 5xx or transport errors for
    idempotent requests (GET, HEAD, PUT, DELETE; merge patches when asked). `on_request(method, status)` is
    called once per HTTP attempt (status 0 = no answer) so the caller can count requests in metrics.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        clock: Clock,
        options: ClientOptions | None = None,
        *,
        limiter: TokenBucket | None = None,
        rng: random.Random | None = None,
        on_request: Callable[[str, int], None] | None = None,
    ) -> None:
        self._api = api_client
        self._clock = clock
        self.options = options or ClientOptions()
        self._limiter = limiter or TokenBucket(self.options.qps, self.options.burst, clock)
        # Only a client whose bucket limits anything switches to server pacing (a lease client's does not).
        self.pacing = ServerPacing(clock, self.options.burst, max_hold_s=self.options.max_retry_after_s)
        self._may_pace = self.options.server_pacing and self._limiter.enabled
        self._rng = rng or random.Random()
        self._on_request = on_request
        configuration = api_client.configuration
        self._host = str(configuration.host).rstrip("/")
        self._server_hostname: str | None = getattr(configuration, "tls_server_name", None)
        self._proxy: str | None = getattr(configuration, "proxy", None)
        self._proxy_auth: aiohttp.BasicAuth | None = None
        if not self._proxy:
            self._proxy, self._proxy_auth = env_proxy(self._host)
        # Every request goes to this one host and the proxy from the environment is resolved above, once:
        # the session must not look it (and ~/.netrc) up again per request, which aiohttp does in a worker
        # thread (`trust_env`, set by kubernetes-asyncio): a thread hand-off on every request.
        self._session._trust_env = False
        # kubernetes-asyncio builds the connector; its sockets get a bounded receive buffer (`api_socket`).
        connector = self._session.connector
        if isinstance(connector, aiohttp.TCPConnector) and connector._socket_factory is None:
            connector._socket_factory = api_socket
        self.retries = 0  # retried attempts so far, for tests and metrics

    @classmethod
    async def from_config(
        cls,
        clock: Clock,
        options: ClientOptions | None = None,
        *,
        kubeconfig: str | None = None,
        kubeconfig_env: str | None = None,
        context: str | None = None,
        on_request: Callable[[str, int], None] | None = None,
        default_kubeconfig: str = "",
    ) -> KubeClient:
        """Build the `ApiClient` (see `build_api_client`) and wrap it."""
        options = options or ClientOptions()
        api = await build_api_client(
            kubeconfig, kubeconfig_env, context=context, user_agent=options.user_agent,
            default_kubeconfig=default_kubeconfig,
        )
        return cls(api, clock, options, on_request=on_request)

    def derive(
        self,
        *,
        limiter: TokenBucket | None = None,
        options: ClientOptions | None = None,
        on_request: Callable[[str, int], None] | None = None,
    ) -> KubeClient:
        """A client on the same connection pool and credentials with its own limiter and options.

        Give leader election its own (unlimited) limiter, as client-go does, so a burst of writes can
        never queue a lease renewal past its deadline. Close only the original client.
        """
        options = options or self.options
        return KubeClient(
            self._api,
            self._clock,
            options,
            limiter=limiter or TokenBucket(options.qps, options.burst, self._clock),
            rng=self._rng,
            on_request=on_request or self._on_request,
        )

    def on_own_pool(self, clock: Clock | None = None) -> KubeClient:
        """A client with the same configuration, options and request callback on a connection pool of its
        own, with its own limiter and pacing window on `clock` (default: this client's).

        Its session binds to the running event loop: call this on the loop that will use it (a thread with
        a loop of its own, such as the webhook's, must not use a client of another loop), and close it
        there.
        """
        api = k8s_client.ApiClient(self._api.configuration)
        api.user_agent = self._api.user_agent or self.options.user_agent
        clock = clock or self._clock
        return KubeClient(
            api,
            clock,
            self.options,
            limiter=TokenBucket(self.options.qps, self.options.burst, clock),
            rng=random.Random(),
            on_request=self._on_request,
        )

    @property
    def api_client(self) -> k8s_client.ApiClient:
        """The underlying kubernetes-asyncio client, for the rare call that wants generated models."""
        return self._api

    @property
    def limiter(self) -> TokenBucket:
        return self._limiter

    @property
    def host(self) -> str:
        return self._host

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------------------------- plumbing

    @property
    def _session(self) -> aiohttp.ClientSession:
        session: aiohttp.ClientSession = self._api.rest_client.pool_manager
        return session

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {str(k): str(v) for k, v in self._api.default_headers.items()}
        headers["Accept"] = CONTENT_JSON
        # Uncompressed answers: kube-apiserver gzips a body over 128 KiB for a client that accepts it, and
        # aiohttp inflates what arrives inside its transport callback, before any paced parser sees it:
        # megabytes of a large LIST page or PodMetrics list in one piece of the event loop.
        # client-go's `DisableCompression` makes the same choice; the bytes stay on the cluster network.
        headers["Accept-Encoding"] = "identity"
        if content_type is not None:
            headers["Content-Type"] = content_type
        auth = await self._api.configuration.auth_settings()
        for setting in auth.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def _request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self._server_hostname:
            kwargs["server_hostname"] = self._server_hostname
        if self._proxy:
            kwargs["proxy"] = self._proxy
            if self._proxy_auth is not None:
                kwargs["proxy_auth"] = self._proxy_auth
        return kwargs

    async def _send_once(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        data: bytes | None,
        content_type: str | None,
        timeout_s: float,
    ) -> tuple[int, list[bytes], Mapping[str, str]]:
        pacing = self.pacing if self.pacing.active else None
        if pacing is None:
            await self._limiter.acquire()
        else:
            await pacing.enter()
        status = 0
        retry_after: float | None = None
        try:
            status, chunks, resp_headers = await self._exchange(
                method, path, query, data, content_type, timeout_s)
            if status == 429:
                retry_after = ApiError.from_response(status, _joined(chunks), resp_headers).retry_after_s
        finally:
            if pacing is not None:
                pacing.leave(throttled=status == 429, retry_after_s=retry_after)
        return status, chunks, resp_headers

    def _note_server(self, headers: Mapping[str, str]) -> None:
        if self._may_pace and not self.pacing.active and PF_PRIORITY_LEVEL_UID_HEADER in headers:
            self.pacing.engage()

    async def _exchange(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        data: bytes | None,
        content_type: str | None,
        timeout_s: float,
    ) -> tuple[int, list[bytes], Mapping[str, str]]:
        headers = await self._headers(content_type)
        timeout = aiohttp.ClientTimeout(
            total=timeout_s,
            connect=self.options.connect_timeout_s,
            sock_connect=self.options.connect_timeout_s,
        )
        try:
            async with self._session.request(
                method,
                self._host + path,
                params=query or None,
                data=data,
                headers=headers,
                timeout=timeout,
                **self._request_kwargs(),
            ) as resp:
                chunks = await _read_chunks(resp)
                status = resp.status
                resp_headers: Mapping[str, str] = resp.headers
        except (aiohttp.ClientError, TimeoutError) as exc:
            if self._on_request is not None:
                self._on_request(method, 0)
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if self._on_request is not None:
            self._on_request(method, status)
        self._note_server(resp_headers)
        return status, chunks, resp_headers

    def _backoff_s(self, attempt: int) -> float:
        ceiling = min(self.options.backoff_max_s, self.options.backoff_base_s * 2.0**attempt)
        # "Equal jitter": at least half the ceiling, so retries never bunch up at zero.
        return ceiling * (0.5 + 0.5 * self._rng.random())

    async def request_chunks(
        self,
        method: Method,
        path: str,
        *,
        query: Query | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
        idempotent: bool | None = None,
        max_retries: int | None = None,
    ) -> tuple[int, list[bytes]]:
        """Send a request with retries; return (status, body) for a 2xx, raise `ApiError` otherwise. The
        body is handed over as the chunks it was read in (at most `STREAM_CHUNK_BYTES` each, none for an
        empty body), never joined: a caller that parses a large body as it goes never holds it whole."""
        encoded = _encode_query(query)
        timeout = self.options.request_timeout_s if timeout_s is None else timeout_s
        retry_unsafe_failures = method in _IDEMPOTENT_METHODS if idempotent is None else idempotent
        retries_left = self.options.max_retries if max_retries is None else max_retries
        attempt = 0
        while True:
            try:
                status, chunks, headers = await self._send_once(
                    method, path, encoded, data, content_type, timeout
                )
            except TransportError:
                if not retry_unsafe_failures or attempt >= retries_left:
                    raise
                delay = self._backoff_s(attempt)
            else:
                if 200 <= status < 300:
                    return status, chunks
                error = ApiError.from_response(status, _joined(chunks), headers)
                retryable = status == 429 or (status >= 500 and retry_unsafe_failures)
                if not retryable or attempt >= retries_left:
                    raise error
                delay = self._backoff_s(attempt)
                if error.retry_after_s is not None:
                    delay = max(delay, min(error.retry_after_s, self.options.max_retry_after_s))
            attempt += 1
            self.retries += 1
            await self._clock.sleep(delay)

    async def request_json(
        self,
        method: Method,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
        idempotent: bool | None = None,
        max_retries: int | None = None,
    ) -> tuple[int, JsonObj]:
        """Send `body` (serialised with orjson) and return (status, parsed JSON object) for a 2xx answer."""
        data = None if body is None else orjson.dumps(body)
        if data is not None and content_type is None:
            content_type = CONTENT_JSON
        status, chunks = await self.request_chunks(
            method,
            path,
            query=query,
            data=data,
            content_type=content_type,
            timeout_s=timeout_s,
            idempotent=idempotent,
            max_retries=max_retries,
        )
        if not chunks:
            return status, {}
        parsed = orjson.loads(_joined(chunks))
        return status, parsed if isinstance(parsed, dict) else {"items": parsed}

    async def stream_lines(
        self, path: str, query: Query | None = None, *, read_timeout_s: float | None = None
    ) -> AsyncGenerator[bytes, None]:
        """Open a streaming GET (a watch) and yield its newline-delimited lines, without the newline.

        Raises `ApiError` if the server answers non-2xx (410 Gone included) and `TransportError` on a
        connection failure or when the socket stays silent for `read_timeout_s`. Not retried: the caller
        (the watch cache) decides how to resume. Ends when the server closes the stream.
        """
        if self.pacing.active:
            await self.pacing.wait_hold()  # a watch is long-running: it takes no room in the window
        else:
            await self._limiter.acquire()
        headers = await self._headers(None)
        read_timeout = self.options.watch_read_timeout_s if read_timeout_s is None else read_timeout_s
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self.options.connect_timeout_s,
            sock_connect=self.options.connect_timeout_s,
            sock_read=read_timeout,
        )
        try:
            async with self._session.request(
                "GET",
                self._host + path,
                params=_encode_query(query) or None,
                headers=headers,
                timeout=timeout,
                **self._request_kwargs(),
            ) as resp:
                if self._on_request is not None:
                    self._on_request("WATCH", resp.status)
                self._note_server(resp.headers)
                if not 200 <= resp.status < 300:
                    raise ApiError.from_response(resp.status, await resp.read(), resp.headers)
                content = resp.content
                while True:
                    line = await content.readline()
                    if not line:
                        return
                    line = line.rstrip(b"\r\n")
                    if line:
                        yield line
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"WATCH {path}: {type(exc).__name__}: {exc}") from exc

    async def get_chunks(
        self, path: str, *, query: Query | None = None, timeout_s: float | None = None
    ) -> AsyncGenerator[bytes, None]:
        """A GET whose 2xx body is handed over in the chunks it arrives in, so that a body of tens of MB is
        never joined into one object (the join and its decode would hold the event loop for all of it, and the
        copies would be the process's memory peak), and at most `STREAM_CHUNK_BYTES` at a
        time. Paced like every request; not retried
        (the caller reads again later). Raises `ApiError` for a non-2xx answer, `TransportError` when the
        connection fails or `timeout_s` passes."""
        pacing = self.pacing if self.pacing.active else None
        if pacing is None:
            await self._limiter.acquire()
        else:
            await pacing.enter()
        status = 0
        retry_after: float | None = None
        headers = await self._headers(None)
        timeout = aiohttp.ClientTimeout(
            total=self.options.request_timeout_s if timeout_s is None else timeout_s,
            connect=self.options.connect_timeout_s,
            sock_connect=self.options.connect_timeout_s,
        )
        try:
            async with self._session.request(
                "GET",
                self._host + path,
                params=_encode_query(query) or None,
                headers=headers,
                timeout=timeout,
                **self._request_kwargs(),
            ) as resp:
                status = resp.status
                if self._on_request is not None:
                    self._on_request("GET", status)
                self._note_server(resp.headers)
                if not 200 <= status < 300:
                    error = ApiError.from_response(status, await resp.read(), resp.headers)
                    retry_after = error.retry_after_s
                    raise error
                async for chunk in resp.content.iter_chunked(STREAM_CHUNK_BYTES):
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            if self._on_request is not None and status == 0:
                self._on_request("GET", 0)
            raise TransportError(f"GET {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            if pacing is not None:
                pacing.leave(throttled=status == 429, retry_after_s=retry_after)

    # --------------------------------------------------------------------------------- typed helpers

    async def get(
        self,
        path: str,
        *,
        query: Query | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> JsonObj:
        return (
            await self.request_json("GET", path, query=query, timeout_s=timeout_s, max_retries=max_retries)
        )[1]

    async def create(
        self, path: str, body: JsonObj, *, timeout_s: float | None = None, max_retries: int | None = None
    ) -> JsonObj:
        """POST to a collection. Not retried on 5xx/transport errors (it might have been applied).

        A 429 is retried (the server did not act); pass `max_retries=0` where a 429 is an answer, such as
        an eviction refused by a PodDisruptionBudget.
        """
        return (
            await self.request_json("POST", path, body=body, timeout_s=timeout_s, max_retries=max_retries)
        )[1]

    async def replace(
        self, path: str, body: JsonObj, *, timeout_s: float | None = None, max_retries: int | None = None
    ) -> JsonObj:
        """PUT an object; with `metadata.resourceVersion` set a stale copy raises `Conflict`."""
        return (
            await self.request_json("PUT", path, body=body, timeout_s=timeout_s, max_retries=max_retries)
        )[1]

    async def merge_patch(
        self, path: str, patch: JsonObj, *, timeout_s: float | None = None, max_retries: int | None = None
    ) -> JsonObj:
        """JSON merge patch (RFC 7386): the only object-patch type custom resources accept.

        Retried like an idempotent call: applying the same merge patch twice gives the same object.
        """
        return (
            await self.request_json(
                "PATCH",
                path,
                body=patch,
                content_type=CONTENT_MERGE_PATCH,
                timeout_s=timeout_s,
                max_retries=max_retries,
                idempotent=True,
            )
        )[1]

    async def json_patch(
        self,
        path: str,
        operations: list[JsonObj],
        *,
        timeout_s: float | None = None,
        idempotent: bool = False,
        max_retries: int | None = None,
    ) -> JsonObj:
        """JSON patch (RFC 6902). Not retried on 5xx/transport errors unless the caller says it is safe."""
        return (
            await self.request_json(
                "PATCH",
                path,
                body=operations,
                content_type=CONTENT_JSON_PATCH,
                timeout_s=timeout_s,
                max_retries=max_retries,
                idempotent=idempotent,
            )
        )[1]

    async def strategic_merge_patch(
        self, path: str, patch: JsonObj, *, timeout_s: float | None = None, max_retries: int | None = None
    ) -> JsonObj:
        """Strategic merge patch: built-in kinds only (never custom resources)."""
        return (
            await self.request_json(
                "PATCH",
                path,
                body=patch,
                content_type=CONTENT_STRATEGIC_MERGE_PATCH,
                timeout_s=timeout_s,
                max_retries=max_retries,
                idempotent=True,
            )
        )[1]

    async def delete(
        self,
        path: str,
        *,
        body: JsonObj | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> JsonObj:
        return (
            await self.request_json("DELETE", path, body=body, timeout_s=timeout_s, max_retries=max_retries)
        )[1]

    async def patch_custom_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        patch: JsonObj,
        *,
        subresource: str | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> JsonObj:
        """Merge-patch a namespaced custom object, or its `/status` with `subresource="status"`."""
        path = api_path(group, version, plural, namespace=namespace, name=name, subresource=subresource)
        return await self.merge_patch(path, patch, timeout_s=timeout_s, max_retries=max_retries)
