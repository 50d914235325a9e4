"""`vpa run` against the simulated cluster: caches sync, readiness, metrics, leases, clean shutdown.

In-process for the details (leases released, readiness turns false on shutdown), and once as a real
`vpa run` subprocess receiving SIGTERM, which is how Kubernetes stops it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from vpa.app import build_components
from vpa.app.runtime import SHUTDOWN_BUDGET_S, Runtime
from vpa.flags.commands import parse_run_args
from vpa.model.settings import StartupError
from vpa.sim import SimCluster
from vpa.sim.apiserver.harness import SimCluster as SimClusterType


@pytest.fixture
async def cluster() -> AsyncIterator[SimClusterType]:
    async with SimCluster(nodes=1, behaviour=False) as sim:
        yield sim


def _settings(kubeconfig: str, *extra: str) -> Any:
    return parse_run_args(
        [f"--kubeconfig={kubeconfig}", "--address=127.0.0.1:0", "--port=0", *extra],
        env={"NAMESPACE": "kube-system"},
    )


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def _wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def _lease(cluster: SimClusterType, name: str) -> dict[str, Any] | None:
    return cluster.store.get("leases.coordination.k8s.io", "kube-system", name)


async def test_runtime_syncs_serves_elects_and_stops(cluster: SimClusterType) -> None:
    await cluster.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        },
    )
    settings = _settings(
        str(cluster.kubeconfig_path),
        "--leader-elect=true",
        "--leader-elect-retry-period=1s",
        "--leader-elect-renew-deadline=5s",
        "--leader-elect-lease-duration=8s",
    )
    runtime = Runtime(settings, components=build_components(settings))
    task = asyncio.create_task(runtime.run(install_signal_handlers=False))
    await _wait_for(lambda: runtime.caches is not None and runtime.caches.synced())
    assert runtime.health_server is not None
    port = runtime.health_server.port
    assert await _get(port, "/readyz") == (200, "ok\n")
    assert (await _get(port, "/healthz"))[0] == 200
    assert runtime.caches is not None
    pod = runtime.caches.pods.get("default", "web-1")
    assert pod is not None
    assert pod.labels["app"] == "web"

    # Both elected components hold their own Lease.
    await _wait_for(
        lambda: all(e.is_leader for e in runtime.electors.values()) and len(runtime.electors) == 2
    )
    for name in ("vpa-recommender-lease", "vpa-updater"):
        lease = _lease(cluster, name)
        assert lease is not None
        assert lease["spec"]["holderIdentity"]
    status, metrics = await _get(port, "/metrics")
    assert status == 200
    assert 'leader_election_master_status{name="vpa-recommender-lease"} 1.0' in metrics
    assert "vpa_event_loop_lag_seconds_bucket" in metrics
    assert 'rest_client_requests_total{code="200",method="GET"}' in metrics

    # A new pod shows up in the cache through the watch.
    await cluster.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-2", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        },
    )
    await _wait_for(
        lambda: runtime.caches is not None and runtime.caches.pods.get("default", "web-2") is not None
    )

    started = time.monotonic()
    runtime.stop_event.set()
    assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0
    assert time.monotonic() - started < SHUTDOWN_BUDGET_S
    # Leases released on shutdown so a successor takes over at once.
    for name in ("vpa-recommender-lease", "vpa-updater"):
        lease = _lease(cluster, name)
        assert lease is not None
        assert not lease["spec"].get("holderIdentity")


async def test_runtime_logs_once_when_its_caches_synced(cluster: SimClusterType) -> None:
    settings = _settings(str(cluster.kubeconfig_path), "--event-loop-lag-interval=5ms")
    runtime = Runtime(settings, components=build_components(settings))
    with capture_logs() as logs:
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        await _wait_for(lambda: any(e["event"] == "caches_synced" for e in logs))
        await asyncio.sleep(0.05)  # a few more lag samples: still one line
        runtime.stop_event.set()
        assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0
    synced = [e for e in logs if e["event"] == "caches_synced"]
    assert len(synced) == 1
    assert 0 < synced[0]["seconds"] < 10
    assert synced[0]["event_loop_lag_max_ms"] >= 0


async def test_malformed_vpa_is_skipped_not_fatal(cluster: SimClusterType) -> None:
    good = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "good", "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    await cluster.store.create("verticalpodautoscalers.autoscaling.k8s.io", good)
    settings = _settings(str(cluster.kubeconfig_path), "--components=admission-controller")
    runtime = Runtime(settings, components=build_components(settings))
    task = asyncio.create_task(runtime.run(install_signal_handlers=False))
    await _wait_for(lambda: runtime.caches is not None and runtime.caches.synced())
    assert runtime.caches is not None
    vpa = runtime.caches.vpas.get("default", "good")
    assert vpa is not None
    assert runtime.caches.vpas.by_index("target", "default/Deployment/web") == [vpa]
    runtime.stop_event.set()
    assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0


async def test_unloadable_kubeconfig_is_a_startup_error(tmp_path: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not: a kubeconfig\n")
    settings = _settings(str(kubeconfig))
    with pytest.raises(StartupError, match=f"kubeconfig {kubeconfig} .*not a kubeconfig"):
        await asyncio.wait_for(Runtime(settings).run(install_signal_handlers=False), timeout=10)


async def _vpa_run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`vpa run ARGS` as a process, expected to stop by itself: (exit status, stderr)."""
    base = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vpa.cli", "run", "--log-format=json", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**base, **(env or {})},
    )  # fmt: skip
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


def _only_line(stderr: str) -> str:
    """The one line a fatal start-up error prints (no traceback, no log lines around it)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing-kubeconfig", r"^vpa run: kubeconfig \S+/absent \(--kubeconfig\): no such file"),
        ("no-kubeconfig-outside-a-cluster", r"^vpa run: no kubeconfig: give --kubeconfig .*in-cluster"),
        ("bad-address", r"^vpa run: invalid value 'notanaddress' for flag --address"),
    ],
)
async def test_startup_errors_without_a_cluster_are_one_line_exit_2(
    tmp_path: Any, case: str, expected: str
) -> None:
    args = {
        "missing-kubeconfig": [f"--kubeconfig={tmp_path / 'absent'}"],
        "no-kubeconfig-outside-a-cluster": [],
        "bad-address": ["--address=notanaddress"],
    }[case]
    code, stderr = await _vpa_run(*args)
    assert code == 2
    assert re.search(expected, _only_line(stderr)), stderr


@pytest.mark.parametrize("flag", ["address", "port"])
async def test_an_address_in_use_is_one_line_exit_2(cluster: SimClusterType, flag: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        address = f"127.0.0.1:{port}" if flag == "address" else "127.0.0.1:0"
        webhook_port = port if flag == "port" else 0
        code, stderr = await _vpa_run(
            f"--kubeconfig={cluster.kubeconfig_path}", f"--address={address}", f"--port={webhook_port}",
            env={"NAMESPACE": "kube-system"},
        )
    assert code == 2, stderr
    error = [line for line in stderr.splitlines() if line.startswith("vpa run:")]
    assert len(error) == 1, stderr
    assert re.match(rf"^vpa run: --{flag} \S*{port}: cannot listen", error[0]), stderr
    assert "Traceback" not in stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_vpa_run_process_stops_cleanly_on_sigterm(cluster: SimClusterType) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={cluster.kubeconfig_path}",
        f"--address=127.0.0.1:{port}", "--port=0", "--leader-elect=true", "--log-format=json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if (await _get(port, "/readyz"))[0] == 200:
                    break
            except aiohttp.ClientError:
                pass
            assert proc.returncode is None, "vpa run exited early"
            assert time.monotonic() < deadline, "vpa run never became ready"
            await asyncio.sleep(0.1)
        await _wait_for(
            lambda: bool((_lease(cluster, "vpa-updater") or {}).get("spec", {}).get("holderIdentity"))
        )
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=SHUTDOWN_BUDGET_S + 5)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert time.monotonic() - started < SHUTDOWN_BUDGET_S
        assert b'"event":"vpa stopped"' in stderr
        lease = _lease(cluster, "vpa-updater")
        assert lease is not None
        elections = stderr.decode().splitlines()
        assert not lease["spec"].get("holderIdentity"), "\n".join(elections[-25:])
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
