"""Running upstream VPA's own binaries beside ours on one `vpa sim` cluster, for the differential suite.

Owns: finding upstream's binaries (`make upstream`), the private network namespace every test here runs
in (upstream's webhook and metrics servers bind every interface and have no flag to change that, so a test
re-runs itself under `unshare -n` with only loopback up), starting `vpa sim`, upstream's processes and
`vpa run` as child processes with their logs in the test's folder, webhook certificates, and a small JSON
client for the sim's API.

Must not: decide what is compared; the tests do.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from vpa.sim.apiserver.tls import issue, new_ca

REPO = Path(__file__).resolve().parents[2]
MODULE = "k8s.io/autoscaler/vertical-pod-autoscaler"
IN_NETNS = "VPA_DIFFERENTIAL_NETNS"


def upstream_version() -> str:
    for line in (REPO / "hack" / "upstream" / "go.mod").read_text().splitlines():
        words = line.replace("require", "").split()
        if len(words) >= 2 and words[0] == MODULE:
            return words[1]
    raise AssertionError("hack/upstream/go.mod does not pin " + MODULE)


def upstream_bin() -> Path:
    env = os.environ.get("VPA_UPSTREAM_BIN")
    return Path(env) if env else REPO / ".tools" / "upstream" / upstream_version() / "bin"


BINARIES = ("recommender", "updater", "admission-controller")


def missing_binaries() -> str:
    """Why upstream cannot run here, in one line, or "" when its three binaries are built."""
    missing = [b for b in BINARIES if not (upstream_bin() / b).is_file()]
    if missing:
        return f"upstream VPA {upstream_version()} not built ({', '.join(missing)}): run `make upstream`"
    return ""


needs_upstream = pytest.mark.skipif(bool(missing_binaries()), reason=missing_binaries() or "built")


def isolated() -> bool:
    """True inside a network namespace whose only interface is loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def run_isolated(request: pytest.FixtureRequest) -> bool:
    """True when the calling test is in a private network namespace and should do its work. Otherwise the
    test re-runs itself in one (`unshare -n`, or `unshare -rn` where unprivileged), this call asserts that
    run passed (or skips as it skipped), and returns False."""
    if isolated():
        return True
    if os.environ.get(IN_NETNS):
        pytest.fail("unshare gave a network namespace with more than loopback")
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a private network namespace")
    inner = f'{ip} link set lo up && exec "$@"'
    # The inner run keeps its folders (process logs) under the outer test's own temporary folder.
    basetemp = Path(request.getfixturevalue("tmp_path")) / "netns"
    argv = [sys.executable, "-m", "pytest", request.node.nodeid, "-p", "no:cacheprovider", "-q", "-rs", "-s"]
    argv.append(f"--basetemp={basetemp}")
    env = dict(os.environ, **{IN_NETNS: "1"})
    for flags in (["-n"], ["-rn"]):
        probe = subprocess.run([unshare, *flags, "true"], capture_output=True, check=False)
        if probe.returncode == 0:
            break
    else:
        pytest.skip("cannot make a network namespace here (unshare -n and -rn both refused)")
    proc = subprocess.run(
        [unshare, *flags, "sh", "-c", inner, "sh", *argv], cwd=REPO, env=env, capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and " skipped" in out and " passed" not in out:
        pytest.skip("in the network namespace: " + out.strip().splitlines()[-1])
    assert proc.returncode == 0, out[-20000:]
    print(out[-4000:])
    return False


@dataclass
class Certs:
    ca: Path
    cert: Path
    key: Path


def webhook_certs(folder: Path) -> Certs:
    """A CA and a serving certificate for the `vpa-webhook.kube-system.svc` Service and 127.0.0.1."""
    ca = new_ca("vpa_webhook_ca")
    cert, key = issue(ca, "vpa-webhook.kube-system.svc", ("vpa-webhook.kube-system.svc", "127.0.0.1"))
    out = Certs(folder / "caCert.pem", folder / "serverCert.pem", folder / "serverKey.pem")
    out.ca.write_bytes(ca.cert_pem)
    out.cert.write_bytes(cert)
    out.key.write_bytes(key)
    return out


@dataclass
class Proc:
    name: str
    proc: asyncio.subprocess.Process
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


@dataclass
class Cluster:
    url: str
    kubeconfig: Path
    folder: Path
    session: aiohttp.ClientSession
    procs: list[Proc] = field(default_factory=list)

    async def request(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = ()) -> Any:
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self.session.request(method, self.url + path, json=body, headers=headers) as r:
            data = await r.json(content_type=None)
            if r.status >= 300 and r.status not in ok:
                raise AssertionError(f"{method} {path}: {r.status} {data}")
            return data

    async def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        log = self.folder / f"{name}.log"
        handle = log.open("wb")
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=self.folder,
            env=dict(os.environ, **(env or {})),
        )
        handle.close()
        p = Proc(name, proc, log)
        self.procs.append(p)
        return p

    async def upstream(self, binary: str, *flags: str, name: str = "") -> Proc:
        """One of upstream's binaries with its defaults but for the kubeconfig and `flags`; NAMESPACE as its
        Deployment sets it."""
        argv = [str(upstream_bin() / binary), f"--kubeconfig={self.kubeconfig}", *flags]
        return await self.start(name or f"upstream-{binary}", argv, {"NAMESPACE": "kube-system"})

    async def ours(self, *flags: str, name: str = "vpa-run") -> Proc:
        argv = [sys.executable, "-m", "vpa", "run", f"--kubeconfig={self.kubeconfig}", *flags]
        return await self.start(name, argv)


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float, what: str, cluster: Cluster | None = None
) -> Any:
    """Poll `check` until it returns something truthy; on timeout fail with `what` and the process logs."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            logs = ""
            for p in cluster.procs if cluster else []:
                lines = p.text().splitlines()
                panic = next(
                    (i for i, line in enumerate(lines) if line.startswith(("panic", "http: panic"))), None
                )
                shown = lines[panic : panic + 12] if panic is not None else lines[-15:]
                logs += (
                    f"\n--- {p.name} ({'its panic' if panic is not None else 'last lines'})\n"
                    + "\n".join(shown)
                )
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{logs}")
        await asyncio.sleep(1.0)


@asynccontextmanager
async def sim(folder: Path, *flags: str) -> AsyncIterator[Cluster]:
    """`vpa sim` on wall time with upstream's webhook Service mapped to 127.0.0.1:8000, its default port."""
    os.makedirs(folder, exist_ok=True)
    kc = folder / "kubeconfig"
    argv = [sys.executable, "-m", "vpa.sim.main", "--kubeconfig-out", str(kc), "--start-time", "now"]
    argv += ["--webhook-service", "kube-system/vpa-webhook=127.0.0.1:8000", *flags]
    log = (folder / "sim.log").open("wb")
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=log, cwd=REPO)
    log.close()
    assert proc.stdout is not None
    info: dict[str, str] = {}
    try:
        while "kubeconfig" not in info:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, (folder / "sim.log").read_text()
            key, _, value = line.decode().strip().partition(": ")
            info[key] = value
        config = yaml.safe_load(kc.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        token = config["users"][0]["user"]["token"]
        ctx = ssl.create_default_context(cadata=ca)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=16),
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as session:
            cluster = Cluster(info["API server"], kc, folder, session)
            try:
                yield cluster
            finally:
                for p in reversed(cluster.procs):
                    await p.stop()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
        _keep_logs(folder)


def _keep_logs(folder: Path) -> None:
    """The logs outlive pytest's rotation of temporary folders: .run/differential/logs/<test>/."""
    keep = REPO / ".run" / "differential" / "logs" / folder.parent.name
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    for path in folder.glob("*.log"):
        shutil.copy(path, keep / path.name)
