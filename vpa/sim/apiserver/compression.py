"""Response compression as kube-apiserver does it (`APIResponseCompression`, on by default).

Owns: the aiohttp middleware that gzips a complete response body over 128 KiB, at level 1, when the request's
`Accept-Encoding` lists `gzip` (one of its comma-separated tokens, exactly; kube-apiserver ignores q-values
and other codings), setting `Content-Encoding: gzip` and `Vary: Accept-Encoding`. The compression runs in a
worker thread (zlib gives the GIL away while it works), so a large PodMetrics list does not hold the
simulator's event loop while it is compressed.

Streamed responses (watches) are never compressed, as kube-apiserver's are not: a watch's first write is
one event, far below the threshold.

Must not: decide what a response contains, or compress a body a handler already encoded.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable

from aiohttp import web

GZIP_THRESHOLD_BYTES = 128 * 1024
"""kube-apiserver's `defaultGzipThresholdBytes`: a body of this size or less is sent as it is."""

GZIP_LEVEL = 1
"""kube-apiserver's `defaultGzipContentEncodingLevel`: the least CPU for most of the size reduction."""


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether kube-apiserver would gzip for this `Accept-Encoding` value: a token that is exactly `gzip`."""
    return any(token.strip() == "gzip" for token in accept_encoding.split(","))


def gzip_bytes(body: bytes) -> bytes:
    """The gzip member (RFC 1952) for `body` at `GZIP_LEVEL`."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    return compressor.compress(body) + compressor.flush()


@web.middleware
async def compress_large_responses(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    resp = await handler(request)
    if not isinstance(resp, web.Response) or resp.prepared or "Content-Encoding" in resp.headers:
        return resp
    body = resp.body
    if not isinstance(body, bytes) or len(body) <= GZIP_THRESHOLD_BYTES:
        return resp
    if not accepts_gzip(request.headers.get("Accept-Encoding", "")):
        return resp
    resp.body = await asyncio.to_thread(gzip_bytes, body)
    resp.headers["Content-Encoding"] = "gzip"
    resp.headers.add("Vary", "Accept-Encoding")
    return resp
