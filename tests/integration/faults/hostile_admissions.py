"""Hostile AdmissionReviews over HTTP on 127.0.0.1: many distinct large pods, absurd quantities, fuzz.

`hostile_admissions_scenario` serves an `AdmissionServer` (the webhook's own aiohttp app, with the fakes of
the webhook's unit tests for the VPA index and the targets) and sends it
- `large_pods` pods, each with distinct containers of about `pod_bytes` (a long argument): the webhook's
  memo must not keep them, so the process's RSS must stay flat;
- `fuzzed` reviews: a valid pod review whose containers get random absurd requests and limits (negative,
  zero, `1e308`, `1n`, past 2**63) or one field replaced by arbitrary JSON.
Every answer must be 200 (or 400 for a body that is no review), never a 5xx; a pod is never denied; every
value in a patch must be a valid pod quantity with no limit below its request.
"""

from __future__ import annotations

import base64
import copy
import gc
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp.test_utils import TestServer

from tests.unit.components.test_webhook import POD_REVIEW, _admitter, _vpa
from vpa.components.webhook.admitter import PATCH_MEMO_BYTES
from vpa.components.webhook.server import AdmissionServer
from vpa.model.quantity import MAX_VALUE, Quantity

HOSTILE_QUANTITIES = (
    "-1",
    "0",
    "1n",
    "1m",
    "1",
    "1e308",
    "-46116860184273879035",
    "9223372036854775807",
    "8Ei",
    "1e18",
    "1e-9",
    "-1e308",
    "250Mi",
    "1e19",
    "0.000000001",
    "9999999999999Ei",
)
JUNK: tuple[Any, ...] = (None, True, 7, -1.5, "x", [], {}, [1, "a"], {"a": {"b": None}}, "1e308", 1e300)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class HostileResult:
    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    pods_denied: int = 0
    invalid_values: list[str] = field(default_factory=list)
    rss_before: int = 0
    rss_peak_growth: int = 0
    rss_growth: int = 0
    memo_bytes: int = 0
    seconds: float = 0.0


def _check_patch(response: dict[str, Any], result: HostileResult) -> None:
    if "patch" not in response:
        return
    emitted: dict[tuple[str, str, str], Quantity] = {}
    for op in orjson.loads(base64.b64decode(response["patch"])):
        parts = str(op.get("path", "")).split("/")
        if len(parts) == 7 and parts[4] == "resources":
            try:
                amount = Quantity.parse(op["value"])
            except (ValueError, TypeError):
                result.invalid_values.append(repr(op))
                continue
            if not 0 <= amount.value <= MAX_VALUE:
                result.invalid_values.append(repr(op))
            emitted[(parts[3], parts[5], parts[6])] = amount
    for (index, kind, resource), amount in emitted.items():
        request = emitted.get((index, "requests", resource))
        if kind == "limits" and request is not None and amount < request:
            result.invalid_values.append(f"container {index} {resource}: limit {amount} < request {request}")


def _absurd_review(rng: random.Random) -> dict[str, Any]:
    review = copy.deepcopy(POD_REVIEW)
    container = review["request"]["object"]["spec"]["containers"][0]
    resources: dict[str, Any] = {}
    for kind in ("requests", "limits"):
        if rng.random() < 0.8:
            resources[kind] = {
                r: rng.choice(HOSTILE_QUANTITIES) for r in ("cpu", "memory") if rng.random() < 0.8
            }
    container["resources"] = resources
    if rng.random() < 0.3:  # one more field replaced by junk
        node: Any = review["request"]["object"]
        path = rng.choice(
            [
                ("metadata", "labels"),
                ("metadata", "ownerReferences"),
                ("spec", "containers"),
                ("metadata",),
                ("spec",),
            ]
        )
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = rng.choice(JUNK)
    return review


async def hostile_admissions_scenario(
    *, large_pods: int, pod_bytes: int, fuzzed: int, seed: int = 7, concurrency: int = 8
) -> HostileResult:
    rng = random.Random(seed)
    admitter = _admitter(_vpa())
    server = TestServer(AdmissionServer(admitter).app, host="127.0.0.1")
    await server.start_server()
    result = HostileResult()
    started = time.monotonic()
    try:
        gc.collect()
        result.rss_before = rss_bytes()
        url = server.make_url("/")
        async with aiohttp.ClientSession() as session:

            async def post(body: bytes) -> None:
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    raw = await resp.read()
                    result.statuses[resp.status] = result.statuses.get(resp.status, 0) + 1
                    result.sent += 1
                    if resp.status != 200:
                        return
                    response = orjson.loads(raw)["response"]
                    if response.get("allowed") is not True:
                        result.pods_denied += 1
                    _check_patch(response, result)

            large = copy.deepcopy(POD_REVIEW)
            filler = "x" * pod_bytes
            for start in range(0, large_pods, concurrency):
                bodies = []
                for index in range(start, min(start + concurrency, large_pods)):
                    large["request"]["object"]["spec"]["containers"][0]["args"] = [f"{index:09d}{filler}"]
                    bodies.append(orjson.dumps(large))
                for body in bodies:
                    await post(body)
                del bodies
                result.rss_peak_growth = max(result.rss_peak_growth, rss_bytes() - result.rss_before)
            for _ in range(fuzzed):
                await post(orjson.dumps(_absurd_review(rng)))
        gc.collect()
        result.rss_growth = rss_bytes() - result.rss_before
        result.rss_peak_growth = max(result.rss_peak_growth, result.rss_growth)
        result.memo_bytes = admitter.memo_bytes
        assert result.memo_bytes <= PATCH_MEMO_BYTES
    finally:
        await server.close()
        result.seconds = time.monotonic() - started
    return result
