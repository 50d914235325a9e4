"""Benchmark: hollow kubelets (`vpa sim --control-plane=kubernetes --kubelet=hollow`) beside the stand-in.

Start to ready of N hollow nodes (the control plane first, then the nodes: the time from starting the node
processes to every node Ready, and the whole `RealCluster.start`), and the latency of P concurrent in-place
resizes, from each PATCH of `pods/resize` to the pod's `status.containerStatuses[].resources` showing the
new request (seen through one watch of the namespace), on hollow and on sim kubelets. Real time, loopback.

    python -m benchmarks.kubelets [--nodes 1,5,50] [--resize-nodes 5] [--pods 50] [--kubelet hollow,sim]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from typing import Any

import aiohttp
import orjson

from vpa.sim.kubernetes.cluster import RealCluster


class _Api:
    def __init__(self, cluster: RealCluster) -> None:
        import ssl

        cp = cluster.control_plane
        ctx = ssl.create_default_context(cadata=cp.ca_pem.decode())
        self.session = aiohttp.ClientSession(
            base_url=cp.url,
            connector=aiohttp.TCPConnector(ssl=ctx, limit=200),
            headers={"Authorization": f"Bearer {cp.admin_token}"},
        )

    async def call(self, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
        data = orjson.dumps(body) if body is not None else None
        async with self.session.request(method, path, data=data, headers={"Content-Type": ctype}) as resp:
            doc = orjson.loads(await resp.read() or b"{}")
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {doc.get('message')}")
            return doc


async def start_to_ready(nodes: int) -> tuple[float, float]:
    cluster = RealCluster(nodes=nodes, kubelet="hollow", node_cpu="4", node_memory="16Gi")
    start = time.monotonic()
    await cluster.start()
    total = time.monotonic() - start
    nodes_s = cluster.nodes_ready_s
    await cluster.stop()
    return nodes_s, total


async def resize_latency(kubelet: str, nodes: int, pods: int) -> list[float]:
    cluster = RealCluster(nodes=nodes, kubelet=kubelet, node_cpu="4", node_memory="16Gi")
    await cluster.start()
    api = _Api(cluster)
    try:
        await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        for _ in range(100):
            try:
                await api.call("GET", "/api/v1/namespaces/bench/serviceaccounts/default")
                break
            except RuntimeError:
                await asyncio.sleep(0.1)
        res = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
        for i in range(pods):
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                    "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                             "resources": res}]}}  # fmt: skip
            await api.call("POST", "/api/v1/namespaces/bench/pods", body)
        while True:
            listed = await api.call("GET", "/api/v1/namespaces/bench/pods")
            if sum((p.get("status") or {}).get("phase") == "Running" for p in listed["items"]) == pods:
                break
            await asyncio.sleep(0.5)
        done: dict[str, float] = {}
        all_done = asyncio.Event()
        rv = listed["metadata"]["resourceVersion"]

        async def watch() -> None:
            path = f"/api/v1/namespaces/bench/pods?watch=1&resourceVersion={rv}"
            async with api.session.get(path, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                async for line in resp.content:
                    obj = orjson.loads(line)["object"]
                    for cs in (obj.get("status") or {}).get("containerStatuses") or []:
                        if ((cs.get("resources") or {}).get("requests") or {}).get("cpu") == "150m":
                            done.setdefault(obj["metadata"]["name"], time.monotonic())
                            if len(done) == pods:
                                all_done.set()

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.5)
        patch = {"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}]}}  # fmt: skip
        sent: dict[str, float] = {}

        async def one(i: int) -> None:
            sent[f"p{i}"] = time.monotonic()
            await api.call("PATCH", f"/api/v1/namespaces/bench/pods/p{i}/resize", patch,
                           "application/strategic-merge-patch+json")  # fmt: skip

        await asyncio.gather(*(one(i) for i in range(pods)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_done.wait(), 120)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        if len(done) < pods:
            raise RuntimeError(f"{kubelet}: only {len(done)} of {pods} resizes done in 120 s")
        return sorted(done[n] - sent[n] for n in sent)
    finally:
        await api.session.close()
        await cluster.stop()


async def _main(args: argparse.Namespace) -> int:
    for n in [int(x) for x in args.nodes.split(",") if x]:
        nodes_s, total = await start_to_ready(n)
        print(f"hollow nodes {n:>3}: nodes Ready {nodes_s:.1f} s after their start; "
              f"RealCluster.start {total:.1f} s", flush=True)  # fmt: skip
    for kubelet in [k for k in args.kubelet.split(",") if k]:
        lat = await resize_latency(kubelet, args.resize_nodes, args.pods)
        print(f"{args.pods} concurrent resizes on {args.resize_nodes} {kubelet} nodes: median "
              f"{statistics.median(lat):.2f} s, max {max(lat):.2f} s", flush=True)  # fmt: skip
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.kubelets")
    p.add_argument("--nodes", default="1,5,50")
    p.add_argument("--resize-nodes", type=int, default=5)
    p.add_argument("--pods", type=int, default=50)
    p.add_argument("--kubelet", default="hollow,sim")
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
