"""Benchmark: the production client's own cost per API request (`KubeClient.request_json`).

One process: an aiohttp server on 127.0.0.1 answers every GET with a small JSON object; the client
(`KubeClient` over kubernetes-asyncio's session, an unlimited rate limiter) sends N sequential GETs.
Reported: mean wall time per request, with the session looking the proxy up in the environment on every
request (aiohttp's `trust_env`, kubernetes-asyncio's default, a worker-thread hop each time) and as the
client runs it (the proxy resolved once per client). Leaves out TLS and any server-side work: it isolates
what the client adds, which every one of a steady loop's ~12,000 requests pays.

    python -m benchmarks.client_request [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from benchmarks import run_loop
from vpa.kube.client import KubeClient
from vpa.kube.ratelimiting import TokenBucket
from vpa.model.clock import RealClock


async def _per_request_us(url: str, requests: int, *, per_request_env_lookup: bool) -> float:
    clock = RealClock()
    client = KubeClient(ApiClient(Configuration(host=url)), clock, limiter=TokenBucket.unlimited(clock))
    if per_request_env_lookup:
        client._session._trust_env = True  # what kubernetes-asyncio's session does on its own
    try:
        await client.request_json("GET", "/api/v1/namespaces/default")  # connect once, outside the timing
        started = time.perf_counter()
        for _ in range(requests):
            await client.request_json("GET", "/api/v1/namespaces/default")
        return (time.perf_counter() - started) / requests * 1e6
    finally:
        await client.close()


async def _run(requests: int, rounds: int) -> None:
    async def answer(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Namespace", "metadata": {"name": "default"}})

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        results: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for lookup in (True, False):
                results[lookup].append(await _per_request_us(url, requests, per_request_env_lookup=lookup))
    finally:
        await runner.cleanup()
    print(f"client cost per GET, {requests} sequential requests x {rounds} rounds (no TLS, trivial server)")
    print("| session | per request, µs (each round) | best |")
    print("| --- | --- | --- |")
    for lookup, label in ((True, "proxy looked up per request (trust_env)"), (False, "proxy resolved once")):
        values = results[lookup]
        print(f"| {label} | {', '.join(f'{v:.0f}' for v in values)} | {min(values):.0f} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.client_request")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    run_loop(_run(args.requests, args.rounds))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
