"""The simulated API server compresses large responses as kube-apiserver does (APIResponseCompression).

Over 128 KiB and asked for with an exact `gzip` token in `Accept-Encoding`: gzip, `Vary: Accept-Encoding`.
Smaller bodies, other `Accept-Encoding` values and watch streams are sent as they are.
"""

from __future__ import annotations

import gzip
import ssl

import aiohttp
import orjson
import pytest

from tests.integration.sim.helpers import read_events
from vpa.sim import SimCluster
from vpa.sim.apiserver.compression import GZIP_THRESHOLD_BYTES, accepts_gzip

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(
    ("header", "gzipped"),
    [
        ("gzip", True),
        ("gzip, deflate", True),
        ("deflate,gzip", True),
        ("br, gzip , deflate", True),
        ("", False),
        ("identity", False),
        ("deflate", False),
        ("gzip;q=1.0", False),  # kube-apiserver matches the token exactly, without q-values
        ("x-gzip", False),
        ("*", False),
    ],
)
def test_accepts_gzip_matches_kube_apiservers_token_rule(header: str, gzipped: bool) -> None:
    assert accepts_gzip(header) is gzipped


async def _fill(cluster: SimCluster, n: int = 40) -> None:
    for i in range(n):
        await cluster.store.create(
            "configmaps",
            {"metadata": {"name": f"cm-{i:03d}", "namespace": "default"}, "data": {"x": "v" * 4096}},
        )


async def _raw(cluster: SimCluster, path: str, accept_encoding: str) -> tuple[aiohttp.ClientResponse, bytes]:
    """GET without aiohttp's automatic decompression, so the bytes on the wire are what the test sees."""
    ctx = ssl.create_default_context(cadata=cluster.ca_cert_pem.decode())
    async with aiohttp.ClientSession(
        base_url=cluster.url, connector=aiohttp.TCPConnector(ssl=ctx), auto_decompress=False,
        headers={"Authorization": "Bearer test"}, skip_auto_headers=("Accept-Encoding",),
    ) as session:  # fmt: skip
        headers = {"Accept-Encoding": accept_encoding} if accept_encoding else {}
        async with session.get(path, headers=headers) as resp:
            return resp, await resp.read()


async def test_a_large_list_is_gzipped_when_asked(cluster: SimCluster) -> None:
    await _fill(cluster)
    resp, wire = await _raw(cluster, CONFIGMAPS, "gzip, deflate")
    assert resp.status == 200
    assert resp.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in resp.headers.getall("Vary")
    body = gzip.decompress(wire)
    assert len(body) > GZIP_THRESHOLD_BYTES > len(wire)
    assert [item["metadata"]["name"] for item in orjson.loads(body)["items"]] == [
        f"cm-{i:03d}" for i in range(40)
    ]


@pytest.mark.parametrize("accept_encoding", ["", "identity", "gzip;q=1.0"])
async def test_a_large_list_is_plain_unless_gzip_is_named(cluster: SimCluster, accept_encoding: str) -> None:
    await _fill(cluster)
    resp, wire = await _raw(cluster, CONFIGMAPS, accept_encoding)
    assert resp.status == 200
    assert "Content-Encoding" not in resp.headers
    assert len(orjson.loads(wire)["items"]) == 40


async def test_small_bodies_and_watches_are_never_gzipped(cluster: SimCluster) -> None:
    await _fill(cluster)
    resp, wire = await _raw(cluster, CONFIGMAPS + "/cm-000", "gzip")
    assert "Content-Encoding" not in resp.headers
    assert orjson.loads(wire)["metadata"]["name"] == "cm-000"
    _, page = await _raw(cluster, CONFIGMAPS + "?limit=5", "gzip")  # a page of 5: about 21 KiB
    assert len(orjson.loads(page)["items"]) == 5


async def test_the_client_reads_a_gzipped_list_and_watch_unchanged(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    """aiohttp (as client-go) asks for gzip by default and decompresses: a client sees the same JSON."""
    await _fill(cluster)
    async with http.get(CONFIGMAPS) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        listed = await resp.json()
    assert len(listed["items"]) == 40
    rv = listed["metadata"]["resourceVersion"]
    async with http.get(CONFIGMAPS, params={"watch": "1", "resourceVersion": rv}) as resp:
        assert "Content-Encoding" not in resp.headers
        await cluster.store.create(
            "configmaps", {"metadata": {"name": "late", "namespace": "default"}, "data": {"x": "v" * 1000}}
        )
        (event,) = await read_events(resp, 1)
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "late"
