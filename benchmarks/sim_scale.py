"""Benchmark: the simulated cluster WITH its behaviour (scheduler, node agent, controllers) at scale.

A child process runs `SimCluster` with behaviour on (M nodes), creates D Deployments of R replicas through
the store (the Deployment → ReplicaSet → Pod controllers, the first-fit scheduler and the node agent do the
rest) and reports the wall time until every pod is Running and its resident set size. This process then
times, over HTTPS, `GET /api/v1/pods` with `limit=0` (one response) and in pages, and
`GET /apis/metrics.k8s.io/v1beta1/pods` (every PodMetrics), each to the last byte.

Targets (issue 3): 50,000 pods on 500 nodes; LIST of all pods ≤ 5 s; ≤ 4 GiB resident.

    python -m benchmarks.sim_scale [--pods 50000] [--nodes 500] [--replicas 50] [--page-size 500]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import ssl
import sys
import time
from typing import Any

import orjson

TARGET_LIST_SECONDS = 5.0
TARGET_RSS_BYTES = 4 * 2**30


def _rss_bytes(pid: int | None = None) -> int:
    with open(f"/proc/{pid or 'self'}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def deployment(i: int, replicas: int) -> dict[str, Any]:
    """Deployment `app-NNNN` in one of 50 namespaces: one container with requests and limits."""
    name = f"app-{i:04d}"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": f"ns-{i % 50:02d}"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "backend"}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": f"registry.example.com/{name}:1.0",
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"cpu": "500m", "memory": "256Mi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def _running(store: Any) -> int:
    return sum(1 for e in store.iter_entries("pods") if (e.obj.get("status") or {}).get("phase") == "Running")


def _serve(pods: int, nodes: int, replicas: int, conn: Any) -> None:
    import uvloop

    from vpa.sim import SimCluster

    deployments = max(1, pods // replicas)

    async def run() -> None:
        async with SimCluster(
            nodes=nodes, node_cpu="32", node_memory="128Gi", vpa_crds=False, time_scale=0.0
        ) as cluster:
            store = cluster.store
            for ns in range(min(50, deployments)):
                await store.create("namespaces", {"metadata": {"name": f"ns-{ns:02d}"}})
            started = time.perf_counter()
            for i in range(deployments):
                await store.create("deployments.apps", deployment(i, replicas))
            created_s = time.perf_counter() - started
            want = deployments * replicas
            running = 0
            while True:
                await cluster.settle()
                running = _running(store)
                if running >= want or time.perf_counter() - started > 1800:
                    break
                await asyncio.sleep(0.05)
            running_s = time.perf_counter() - started
            assert cluster.behaviour is not None
            conn.send(
                {
                    "url": cluster.url,
                    "ca": cluster.ca_cert_pem,
                    "pid": os.getpid(),
                    "created_s": created_s,
                    "running_s": running_s,
                    "running": running,
                    "errors": cluster.behaviour.runtime.errors,
                }
            )
            # Wait (off the event loop) until the client is done.
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    uvloop.run(run())


async def _measure(url: str, ca: bytes, page_size: int) -> dict[str, float]:
    import aiohttp

    ctx = ssl.create_default_context(cadata=ca.decode())
    out: dict[str, float] = {}
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx),
        timeout=aiohttp.ClientTimeout(total=600),
        read_bufsize=2**21,
    ) as s:
        for attempt in range(2):
            started = time.perf_counter()
            async with s.get(f"{url}/api/v1/pods") as r:
                body = await r.read()
            if attempt == 1:
                out.update(
                    full_s=time.perf_counter() - started,
                    full_bytes=len(body),
                    full_items=len(orjson.loads(body)["items"]),
                )
        token = ""
        pages = items = 0
        fetch_s = 0.0
        while True:
            params = {"limit": str(page_size)}
            if token:
                params["continue"] = token
            started = time.perf_counter()
            async with s.get(f"{url}/api/v1/pods", params=params) as r:
                page = await r.read()
            fetch_s += time.perf_counter() - started
            doc = orjson.loads(page)
            pages += 1
            items += len(doc["items"])
            token = doc["metadata"].get("continue", "")
            if not token:
                break
        out.update(paged_s=fetch_s, pages=pages, paged_items=items)
        for attempt in range(2):
            started = time.perf_counter()
            async with s.get(f"{url}/apis/metrics.k8s.io/v1beta1/pods") as r:
                body = await r.read()
            if attempt == 1:
                out.update(
                    metrics_s=time.perf_counter() - started,
                    metrics_items=len(orjson.loads(body)["items"]),
                )
    return out


def run(
    pods: int = 50_000, nodes: int = 500, replicas: int = 50, page_size: int = 500
) -> tuple[list[tuple[str, str, str]], bool]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(pods, nodes, replicas, child), daemon=True)
    proc.start()
    try:
        while not parent.poll(1.0):
            if not proc.is_alive():
                raise SystemExit(f"sim_scale: the cluster process died (exit code {proc.exitcode})")
        info = parent.recv()
        rss_running = _rss_bytes(info["pid"])
        res = asyncio.run(_measure(info["url"], info["ca"], page_size))
        rss_after = _rss_bytes(info["pid"])
        parent.send("done")
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.terminate()
    want = max(1, pods // replicas) * replicas
    ok = (
        info["running"] == want
        and info["errors"] == 0
        and res["full_items"] == want
        and res["paged_items"] == want
        and res["metrics_items"] == want
        and res["full_s"] <= TARGET_LIST_SECONDS
        and res["paged_s"] <= TARGET_LIST_SECONDS
        and max(rss_running, rss_after) <= TARGET_RSS_BYTES
    )
    gib = 2**30
    rows = [
        ("workload", f"{want:,} pods on {nodes:,} nodes", f"{want // replicas:,} Deployments × {replicas}"),
        ("create the Deployments (store writes only)", f"{info['created_s']:.2f} s", ""),
        (
            "all pods Running (from the first create)",
            f"{info['running_s']:.1f} s",
            f"{info['running']:,} Running, {info['errors']} behaviour errors",
        ),
        (
            "LIST all pods, limit=0 (to last byte)",
            f"{res['full_s']:.2f} s",
            f"{res['full_bytes'] / 2**20:,.0f} MiB, ≤ {TARGET_LIST_SECONDS:.0f} s",
        ),
        (
            f"LIST all pods, limit={page_size} paging",
            f"{res['paged_s']:.2f} s",
            f"{int(res['pages'])} pages, ≤ {TARGET_LIST_SECONDS:.0f} s",
        ),
        (
            "LIST all PodMetrics (to last byte)",
            f"{res['metrics_s']:.2f} s",
            f"{int(res['metrics_items']):,} items",
        ),
        ("process RSS, all Running", f"{rss_running / gib:.2f} GiB", f"≤ {TARGET_RSS_BYTES / gib:.0f} GiB"),
        (
            "process RSS after the LISTs",
            f"{rss_after / gib:.2f} GiB",
            f"{rss_after / want / 1024:.1f} KiB per pod",
        ),
    ]
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sim_scale", description=__doc__.splitlines()[0])
    p.add_argument("--pods", "--scale", dest="pods", type=int, default=50_000, help="total pods")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--replicas", type=int, default=50, help="replicas per Deployment")
    p.add_argument("--page-size", type=int, default=500)
    args = p.parse_args(argv)
    rows, ok = run(args.pods, args.nodes, args.replicas, args.page_size)
    width = max(len(r[0]) for r in rows)
    print(f"\nsim_scale: simulated cluster with behaviour at scale ({'PASS' if ok else 'MISS'})")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
