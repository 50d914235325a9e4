"""Benchmark: the simulated API server holding N realistic pods on M nodes; LIST all pods over HTTPS.

A child process runs a bare `SimCluster` (behaviour=False) and creates the nodes and pods directly in its
store (create, then a `/status` update, as the node agent would), then serves HTTPS on loopback. This
process times `GET /api/v1/pods` with `limit=0` (one response) and with `limit=500` paging, both to the
last byte and including an orjson parse, and reads the server's resident set size.

Targets (issue): 50,000 pods on 500 nodes; LIST of all pods ≤ 5 s; server ≤ 4 GiB resident.

    python -m benchmarks.sim_list [--pods 50000] [--nodes 500] [--page-size 500]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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


def make_pod(i: int, nodes: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A realistic pod (two containers, probes, env, resources) and the status a node agent would write."""
    app = f"app-{i % 1000:03d}"
    name = f"{app}-{i:06d}"
    ns = f"ns-{i % 50:02d}"
    container: dict[str, Any] = {
        "name": "main",
        "image": f"registry.example.com/{app}:1.{i % 7}",
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [
            {"name": "APP", "value": app},
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 5,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "resizePolicy": [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "NotRequired"},
        ],
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    sidecar: dict[str, Any] = {
        "name": "proxy",
        "image": "registry.example.com/proxy:2.3",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": app, "pod-template-hash": "5d8f9c7b6d", "tier": "backend"},
            "annotations": {"vpaUpdates": "Pod resources updated by web-vpa: container 0: cpu request"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-5d8f9c7b6d",
                    "uid": f"00000000-0000-4000-8000-{i % 1000:012d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [container, sidecar],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "nodeName": f"node-{i % nodes:04d}",
            "enableServiceLinks": True,
            "priority": 0,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                        "defaultMode": 420,
                    },
                }
            ],
        },
    }
    t = "2026-01-01T00:00:00Z"
    status = {
        "phase": "Running",
        "qosClass": "Burstable",
        "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
        "hostIP": f"192.168.{i % nodes // 256}.{i % nodes % 256}",
        "startTime": t,
        "conditions": [
            {"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": t}
            for c in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": c["image"],
                "imageID": f"docker-pullable://{c['image']}@sha256:{'ab' * 32}",
                "containerID": f"containerd://{'%064x' % (i * 2 + k)}",
                "state": {"running": {"startedAt": t}},
                "allocatedResources": c["resources"]["requests"],
                "resources": c["resources"],
            }
            for k, c in enumerate((container, sidecar))
        ],
    }
    return pod, status


def _serve(pods: int, nodes: int, conn: Any) -> None:
    import uvloop

    from vpa.sim import SimCluster

    async def run() -> None:
        async with SimCluster(behaviour=False, vpa_crds=False) as cluster:
            store = cluster.store
            started = time.perf_counter()
            for n in range(nodes):
                await store.create(
                    "nodes",
                    {
                        "metadata": {
                            "name": f"node-{n:04d}",
                            "labels": {"kubernetes.io/hostname": f"node-{n:04d}"},
                        },
                        "status": {
                            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                        },
                    },
                )
            for ns in range(50):
                await store.create("namespaces", {"metadata": {"name": f"ns-{ns:02d}"}})
            for i in range(pods):
                pod, status = make_pod(i, nodes)
                created = await store.create("pods", pod)
                await store.update("pods", dict(created, status=status), subresource="status")
            load_s = time.perf_counter() - started
            conn.send({"url": cluster.url, "ca": cluster.ca_cert_pem, "load_s": load_s, "pid": os.getpid()})
            # Wait (off the event loop) until the client is done.
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    uvloop.run(run())


async def _measure(url: str, ca: bytes, page_size: int) -> dict[str, float]:
    import aiohttp

    ctx = ssl.create_default_context(cadata=ca.decode())
    out: dict[str, float] = {}
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx), timeout=timeout, read_bufsize=2**21
    ) as s:
        for attempt in range(2):
            started = time.perf_counter()
            async with s.get(f"{url}/api/v1/pods") as r:
                body = await r.read()
            fetched = time.perf_counter() - started
            gc.disable()  # as the project's watch cache does around big parses (research/tooling.md §2)
            try:
                items = len(orjson.loads(body)["items"])
            finally:
                gc.enable()
            parsed = time.perf_counter() - started
            if attempt == 1:
                out.update(full_s=fetched, full_parse_s=parsed, full_bytes=len(body), full_items=items)
        token = ""
        pages = items = 0
        fetch_s = parse_s = 0.0
        while True:
            params = {"limit": str(page_size)}
            if token:
                params["continue"] = token
            started = time.perf_counter()
            async with s.get(f"{url}/api/v1/pods", params=params) as r:
                page = await r.read()
            fetch_s += time.perf_counter() - started
            started = time.perf_counter()
            gc.disable()
            try:
                doc = orjson.loads(page)
            finally:
                gc.enable()
            parse_s += time.perf_counter() - started
            pages += 1
            items += len(doc["items"])
            token = doc["metadata"].get("continue", "")
            if not token:
                break
        out.update(paged_s=fetch_s, paged_parse_s=fetch_s + parse_s, pages=pages, paged_items=items)
    return out


def run(
    pods: int = 50_000, nodes: int = 500, page_size: int = 500
) -> tuple[list[tuple[str, str, str]], bool]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(pods, nodes, child), daemon=True)
    proc.start()
    try:
        info = parent.recv()
        rss_loaded = _rss_bytes(info["pid"])
        res = asyncio.run(_measure(info["url"], info["ca"], page_size))
        rss_after = _rss_bytes(info["pid"])
        parent.send("done")
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.terminate()
    ok = (
        res["full_s"] <= TARGET_LIST_SECONDS
        and res["paged_s"] <= TARGET_LIST_SECONDS
        and max(rss_loaded, rss_after) <= TARGET_RSS_BYTES
        and res["full_items"] == pods
        and res["paged_items"] == pods
    )
    gib = 2**30
    rows = [
        ("objects", f"{pods:,} pods on {nodes:,} nodes", ""),
        (
            "load into store (create + status update)",
            f"{info['load_s']:.1f} s",
            f"{pods / info['load_s']:,.0f} pods/s",
        ),
        ("LIST all, limit=0 (to last byte)", f"{res['full_s']:.2f} s", f"≤ {TARGET_LIST_SECONDS:.0f} s"),
        (
            "  + orjson parse in client",
            f"{res['full_parse_s']:.2f} s",
            f"{res['full_bytes'] / 2**20:,.0f} MiB body",
        ),
        (
            f"LIST all, limit={page_size} paging (to last byte)",
            f"{res['paged_s']:.2f} s",
            f"{int(res['pages'])} pages, ≤ {TARGET_LIST_SECONDS:.0f} s",
        ),
        ("  + orjson parse in client", f"{res['paged_parse_s']:.2f} s", ""),
        ("server RSS after load", f"{rss_loaded / gib:.2f} GiB", f"≤ {TARGET_RSS_BYTES / gib:.0f} GiB"),
        (
            "server RSS after LISTs",
            f"{rss_after / gib:.2f} GiB",
            f"{rss_after / pods / 1024:.1f} KiB per pod",
        ),
    ]
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sim_list", description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=50_000)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--page-size", type=int, default=500)
    args = p.parse_args(argv)
    rows, ok = run(args.pods, args.nodes, args.page_size)
    width = max(len(r[0]) for r in rows)
    print(f"\nsim_list: simulated API server LIST over HTTPS ({'PASS' if ok else 'MISS'})")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
