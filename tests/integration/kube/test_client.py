"""KubeClient over real HTTP: configuration, typed errors, retries with backoff, content types, limiter."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from vpa.kube.client import (
    CONTENT_JSON_PATCH,
    CONTENT_MERGE_PATCH,
    STREAM_CHUNK_BYTES,
    ApiError,
    ClientOptions,
    Conflict,
    Gone,
    KubeClient,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    _read_chunks,
    api_path,
    build_api_client,
)
from vpa.kube.ratelimiting import TokenBucket
from vpa.model.clock import VirtualClock

from .helpers import turns_counted
from .scripted import ScriptedServer, status_body


class RecordingClock(VirtualClock):
    """Virtual time that jumps forward on every sleep, remembering how long each sleep was."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
        await super().sleep(0)


def write_kubeconfig(tmp_path: Path, url: str, token: str = "s3cret") -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_bytes(orjson.dumps(config))  # JSON is YAML
    return path


async def make_client(
    tmp_path: Path, server: ScriptedServer, clock: RecordingClock, **options: object
) -> KubeClient:
    path = write_kubeconfig(tmp_path, server.url)
    api = await build_api_client(kubeconfig=None, kubeconfig_env=str(path), user_agent="vpa-test/1")
    return KubeClient(api, clock, ClientOptions(**options), rng=random.Random(7))  # type: ignore[arg-type]


async def test_kubeconfig_auth_user_agent_and_json(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(200, {"kind": "Pod", "metadata": {"name": "p"}})
        async with await make_client(tmp_path, server, clock) as client:
            status, body = await client.request_json("GET", "/api/v1/namespaces/ns/pods/p", query={"x": True})
    assert (status, body["metadata"]["name"]) == (200, "p")
    [req] = server.received
    assert req.headers["authorization"] == "Bearer s3cret"
    assert req.headers["User-Agent"] == "vpa-test/1"
    assert req.query == {"x": "true"}


async def test_connections_to_the_api_server_have_a_bounded_receive_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection's socket comes from `api_socket`, its receive buffer fixed (not autotuned to MBs)
    before it connects: uvloop reads a socket up to 32 times per readiness event and decrypts what it read
    there."""
    import socket

    from vpa.kube import client as client_module

    made: list[socket.socket] = []
    real = client_module.api_socket

    def spy(addr_info: tuple[object, ...]) -> socket.socket:
        sock = real(addr_info)
        made.append(sock)
        return sock

    monkeypatch.setattr(client_module, "api_socket", spy)
    async with ScriptedServer() as server:
        server.then(200, {"kind": "Pod"})
        async with await make_client(tmp_path, server, RecordingClock()) as client:
            await client.request_json("GET", "/api/v1/namespaces/ns/pods/p")
            assert len(made) == 1
            size = made[0].getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    # Linux doubles what is set, for its bookkeeping; autotuning would start at 128 KiB and grow to MBs.
    assert client_module.RECEIVE_BUFFER_BYTES <= size <= 2 * client_module.RECEIVE_BUFFER_BYTES


async def test_answers_are_asked_for_uncompressed(tmp_path: Path) -> None:
    """kube-apiserver gzips a large body for a client that accepts it; ours never asks (inflating happens
    in the transport callback, before any paced parser), for single reads and streamed LISTs alike."""
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(200, {"kind": "Pod"}).then(200, {"kind": "PodList", "items": []})
        async with await make_client(tmp_path, server, clock) as client:
            await client.request_json("GET", "/api/v1/namespaces/ns/pods/p")
            chunks = [chunk async for chunk in client.get_chunks("/api/v1/pods")]
    assert orjson.loads(b"".join(chunks))["kind"] == "PodList"
    assert [req.headers["Accept-Encoding"] for req in server.received] == ["identity", "identity"]


async def test_a_streamed_body_is_handed_over_in_bounded_chunks(tmp_path: Path) -> None:
    """However much the transport buffered while the caller was busy, `get_chunks` hands over at most
    `STREAM_CHUNK_BYTES` at a time (one buffered join of 4.4 MB held the event loop 6.4 ms)."""
    clock = RecordingClock()
    items = [{"metadata": {"name": f"pod-{n}", "labels": {"filler": "x" * 200}}} for n in range(8000)]
    async with ScriptedServer() as server:
        server.then(200, {"kind": "PodList", "items": items})
        async with await make_client(tmp_path, server, clock) as client:
            chunks = []
            async for chunk in client.get_chunks("/api/v1/pods"):
                chunks.append(chunk)
                if len(chunks) == 1:
                    await asyncio.sleep(0.2)  # busy: the rest of the body arrives meanwhile
    assert len(orjson.loads(b"".join(chunks))["items"]) == 8000
    assert len(b"".join(chunks)) > 4 * STREAM_CHUNK_BYTES
    assert max(len(chunk) for chunk in chunks) <= STREAM_CHUNK_BYTES


async def test_a_large_buffered_body_is_read_with_the_loop_given_turns() -> None:
    """A body that arrived whole while the caller was busy (a LIST page downloading while the previous one
    is parsed) is read a chunk at a time, other tasks running between chunks; it is returned as those chunks,
    never joined. (The transport here hands over buffered chunks without ever waiting, as aiohttp's buffer
    does.)"""
    body = bytes(range(256)) * (5 * STREAM_CHUNK_BYTES // 256 + 7)

    class Buffered:
        async def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
            for at in range(0, len(body), n):
                yield body[at:at + n]

    class Response:
        content = Buffered()

    async with turns_counted() as turns:
        before = turns[0]
        chunks = await _read_chunks(Response())  # type: ignore[arg-type]
        during = turns[0] - before
    assert b"".join(chunks) == body
    assert [len(chunk) for chunk in chunks[:-1]] == [STREAM_CHUNK_BYTES] * 5
    assert during >= 5  # six chunks: a turn between each two
    one = bytes(100)

    class Small:
        async def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
            yield one

    class SmallResponse:
        content = Small()

    small = await _read_chunks(SmallResponse())  # type: ignore[arg-type]
    assert len(small) == 1
    assert small[0] is one


async def test_explicit_kubeconfig_wins_over_env(tmp_path: Path) -> None:
    async with ScriptedServer() as good:
        server_path = write_kubeconfig(tmp_path, good.url)
        api = await build_api_client(kubeconfig=str(server_path), kubeconfig_env="/nonexistent/kubeconfig")
        async with KubeClient(api, RecordingClock()) as client:
            await client.get("/version")
    assert len(good.received) == 1


@pytest.mark.parametrize(
    ("status", "reason", "error_type", "predicate"),
    [
        (404, "NotFound", NotFound, "is_not_found"),
        (409, "Conflict", Conflict, "is_conflict"),
        (410, "Expired", Gone, "is_gone"),
        (422, "Invalid", ApiError, None),
    ],
    ids=["404", "409", "410", "422"],
)
async def test_typed_errors_are_not_retried(
    tmp_path: Path, status: int, reason: str, error_type: type[ApiError], predicate: str | None
) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(status, status_body(status, reason, "the message", name="p"))
        async with await make_client(tmp_path, server, clock) as client:
            with pytest.raises(error_type) as caught:
                await client.get("/api/v1/namespaces/ns/pods/p")
    err = caught.value
    assert type(err) is error_type
    assert (err.status, err.reason, err.message) == (status, reason, "the message")
    assert err.body["details"]["name"] == "p"
    if predicate:
        assert getattr(err, predicate)
    assert len(server.received) == 1
    assert clock.sleeps == []


async def test_429_is_retried_honouring_retry_after(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(429, status_body(429, "TooManyRequests", "slow down"), Retry_After="3")
        server.then(429, status_body(429, "TooManyRequests", "slow down", retryAfterSeconds=2))
        server.then(200, {"ok": 1})
        async with await make_client(tmp_path, server, clock) as client:
            # POST too: a 429 means the server did not act, so it is safe to send again.
            body = await client.create("/api/v1/namespaces/ns/configmaps", {"metadata": {"name": "c"}})
            assert body == {"ok": 1}
            assert client.retries == 2
    assert len(server.received) == 3
    assert clock.sleeps[0] >= 3.0
    assert clock.sleeps[1] >= 2.0


async def test_5xx_backoff_grows_with_jitter_and_gives_up(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.default = type(server.default)(500, status_body(500, "InternalError", "boom"))
        async with await make_client(
            tmp_path, server, clock, max_retries=4, backoff_base_s=0.1, backoff_max_s=0.5
        ) as client:
            with pytest.raises(ServerError):
                await client.get("/api/v1/pods")
    assert len(server.received) == 5  # first attempt + 4 retries
    ceilings = [0.1, 0.2, 0.4, 0.5]
    assert len(clock.sleeps) == 4
    for slept, ceiling in zip(clock.sleeps, ceilings, strict=True):
        assert ceiling / 2 <= slept <= ceiling


async def test_5xx_on_post_and_json_patch_is_not_retried(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.default = type(server.default)(503, status_body(503, "ServiceUnavailable", "down"))
        async with await make_client(tmp_path, server, clock) as client:
            with pytest.raises(ServerError):
                await client.create("/api/v1/namespaces/ns/events", {"metadata": {"name": "e"}})
            with pytest.raises(ServerError):
                await client.json_patch(
                    "/api/v1/namespaces/ns/pods/p", [{"op": "add", "path": "/x", "value": 1}]
                )
    assert len(server.received) == 2


async def test_429_gives_up_after_max_retries(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.default = type(server.default)(429, status_body(429, "TooManyRequests", "no"))
        async with await make_client(tmp_path, server, clock, max_retries=2) as client:
            with pytest.raises(TooManyRequests):
                await client.get("/api/v1/pods")
    assert len(server.received) == 3


async def test_connection_errors_are_retried_then_raised(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        url = server.url
    # The server is gone: every attempt is refused.
    path = write_kubeconfig(tmp_path, url)
    api = await build_api_client(kubeconfig=str(path))
    async with KubeClient(api, clock, ClientOptions(max_retries=3, connect_timeout_s=1.0)) as client:
        with pytest.raises(TransportError) as caught:
            await client.get("/api/v1/pods")
        assert caught.value.is_transport
        assert client.retries == 3


async def test_patch_content_types_and_paths(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server, await make_client(tmp_path, server, clock) as client:
        await client.patch_custom_object(
            "autoscaling.k8s.io",
            "v1",
            "verticalpodautoscalers",
            "ns",
            "v",
            {"status": {}},
            subresource="status",
        )
        await client.json_patch("/api/v1/namespaces/ns/pods/p/resize", [{"op": "replace", "path": "/a"}])
        await client.replace("/api/v1/namespaces/ns/configmaps/c", {"metadata": {"resourceVersion": "5"}})
    merge, jsonp, put = server.received
    assert merge.method == "PATCH"
    assert merge.path == "/apis/autoscaling.k8s.io/v1/namespaces/ns/verticalpodautoscalers/v/status"
    assert merge.headers["Content-Type"] == CONTENT_MERGE_PATCH
    assert orjson.loads(merge.body) == {"status": {}}
    assert jsonp.headers["Content-Type"] == CONTENT_JSON_PATCH
    assert orjson.loads(jsonp.body) == [{"op": "replace", "path": "/a"}]
    assert (put.method, put.headers["Content-Type"]) == ("PUT", "application/json")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("", "v1", "pods"), "/api/v1/pods"),
        (("", "v1", "pods", "ns"), "/api/v1/namespaces/ns/pods"),
        (("", "v1", "pods", "ns", "p", "resize"), "/api/v1/namespaces/ns/pods/p/resize"),
        (
            ("coordination.k8s.io", "v1", "leases", "kube-system", "l"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        ),
        (("apps", "v1", "deployments", None, None), "/apis/apps/v1/deployments"),
    ],
    ids=["core-all", "core-ns", "subresource", "group-object", "group-all"],
)
def test_api_path(args: tuple[str | None, ...], expected: str) -> None:
    group, version, plural, *rest = args
    keys = ["namespace", "name", "subresource"]
    assert api_path(str(group), str(version), str(plural), **dict(zip(keys, rest, strict=False))) == expected


async def test_every_request_goes_through_the_limiter(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        path = write_kubeconfig(tmp_path, server.url)
        api = await build_api_client(kubeconfig=str(path))
        async with KubeClient(api, clock, limiter=TokenBucket(2.0, 2, clock)) as client:
            for _ in range(5):
                await client.get("/api/v1/pods")
            lines = [line async for line in client.stream_lines("/api/v1/pods", {"watch": True})]
    assert lines == [b'{"kind":"Status","status":"Success"}']
    assert len(server.received) == 6
    assert clock.sleeps == pytest.approx([0.5, 0.5, 0.5, 0.5], abs=1e-3)


async def test_stream_lines_and_gone(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.stream([b'{"type":"ADDED"}', b"", b'{"type":"BOOKMARK"}'])
        server.then(410, status_body(410, "Expired", "too old resource version"))
        async with await make_client(tmp_path, server, clock) as client:
            lines = [line async for line in client.stream_lines("/api/v1/pods", {"watch": "1"})]
            assert lines == [b'{"type":"ADDED"}', b'{"type":"BOOKMARK"}']
            with pytest.raises(Gone):
                async for _ in client.stream_lines("/api/v1/pods", {"watch": "1", "resourceVersion": "1"}):
                    pass


async def test_derived_client_shares_the_session_with_its_own_limiter(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        path = write_kubeconfig(tmp_path, server.url)
        api = await build_api_client(kubeconfig=str(path))
        async with KubeClient(api, clock, limiter=TokenBucket(1.0, 1, clock)) as client:
            leases = client.derive(limiter=TokenBucket.unlimited(clock))
            assert leases.api_client is client.api_client
            await client.get("/api/v1/pods")  # takes the shared client's only token
            for _ in range(5):
                await leases.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l")
            assert clock.sleeps == []  # the lease client never waited behind the busy one
            await client.get("/api/v1/pods")
            assert clock.sleeps == pytest.approx([1.0], abs=1e-3)
    assert len(server.received) == 7
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in server.received)


async def test_eviction_style_429_can_be_returned_at_once(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(429, status_body(429, "TooManyRequests", "Cannot evict pod", retryAfterSeconds=10))
        async with await make_client(tmp_path, server, clock) as client:
            with pytest.raises(TooManyRequests) as caught:
                await client.create(
                    "/api/v1/namespaces/ns/pods/p/eviction", {"kind": "Eviction"}, max_retries=0
                )
    assert caught.value.retry_after_s == 10.0
    assert len(server.received) == 1
    assert clock.sleeps == []


PF = {"X_Kubernetes_PF_FlowSchema_UID": "fs-uid", "X_Kubernetes_PF_PriorityLevel_UID": "pl-uid"}


@pytest.mark.parametrize(
    ("server_pacing", "pf_headers", "bucket_sleeps"),
    [
        # The server shows it does priority and fairness: after its first answer the bucket is lifted.
        (True, True, 0),
        # No APF headers (an old or unusual server): the --kube-api-qps bucket throughout.
        (True, False, 4),
        # --kube-api-server-pacing=false: the bucket throughout, as upstream.
        (False, True, 4),
    ],
    ids=["apf-server-paces", "no-apf-bucket", "pacing-off-bucket"],
)
async def test_server_pacing_replaces_the_bucket_only_for_an_apf_server(
    tmp_path: Path, server_pacing: bool, pf_headers: bool, bucket_sleeps: int
) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        for _ in range(6):
            server.then(200, {"ok": 1}, **(PF if pf_headers else {}))
        path = write_kubeconfig(tmp_path, server.url)
        api = await build_api_client(kubeconfig=str(path))
        options = ClientOptions(qps=2.0, burst=2, server_pacing=server_pacing)
        async with KubeClient(api, clock, options) as client:
            for _ in range(6):
                await client.get("/api/v1/pods")
            assert client.pacing.active is (server_pacing and pf_headers)
    assert len(clock.sleeps) == bucket_sleeps


async def test_a_429_under_server_pacing_holds_every_request_for_retry_after(tmp_path: Path) -> None:
    clock = RecordingClock()
    async with ScriptedServer() as server:
        server.then(200, {"ok": 1}, **PF)
        server.then(429, status_body(429, "TooManyRequests", "too many requests"), Retry_After="4", **PF)
        server.then(200, {"ok": 2}, **PF)
        server.then(200, {"ok": 3}, **PF)
        path = write_kubeconfig(tmp_path, server.url)
        api = await build_api_client(kubeconfig=str(path))
        async with KubeClient(api, clock, ClientOptions(burst=8), rng=random.Random(7)) as client:
            await client.get("/api/v1/pods")
            assert client.pacing.active
            assert client.pacing.window == 8
            assert await client.get("/api/v1/pods") == {"ok": 2}  # retried after the hold
            assert client.pacing.throttled == 1
            assert client.pacing.holds == 1
            assert client.pacing.window == 4  # halved once
            assert await client.get("/api/v1/pods") == {"ok": 3}
    # The retry waited for the server's Retry-After (the hold and the retry's own backoff agree on 4 s).
    assert max(clock.sleeps, default=0.0) >= 4.0
