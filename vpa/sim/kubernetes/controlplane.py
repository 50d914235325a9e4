"""A real Kubernetes control plane as child processes: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, all on loopback.

Owns: finding the binaries of a release (`hack/cluster/build.sh` builds them into
`.tools/cluster/<release>/bin/`; `vpa.sim.kubernetes.releases` says where), a work
directory with throwaway certificates (a cluster CA for the API server's serving certificate, a front-proxy
CA and client certificate for the aggregation layer, a service-account signing key) and static bearer
tokens for the admin, the controller manager, the scheduler and each hollow node (`system:node:<name>` in
`system:nodes`, with a kubeconfig each, so the Node authorizer judges them as it judges kubelets); starting
the four processes with their logs
in the work directory; readiness checks (`/readyz` of the API server, `/healthz` of the controller manager
and the scheduler, the `default` ServiceAccount that proves the controllers run); the admin kubeconfig; and
a clean shutdown by PID (SIGTERM, then SIGKILL after a grace period). The work directory is removed after
a clean run and kept, with its logs, when start-up fails. For fault scenarios: killing kube-apiserver by its
PID (SIGKILL, a crash), starting it again with the same flags, port, certificates and tokens, and compacting
etcd at its current revision through etcd's v3 JSON gateway on its loopback client URL.

Must not: know anything about pods, nodes or the autoscaler: the kubelet stand-in (`vpa.sim.cluster`
driven through `RemoteStore`) and the metrics API are started on top of it by `RealCluster`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import shutil
import signal
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from vpa.sim.apiserver.tls import issue, new_ca, write_kubeconfig
from vpa.sim.kubernetes.releases import CONTROL_PLANE, ReleaseError, locate

BINARIES = CONTROL_PLANE
SERVICE_CIDR = "10.96.0.0/16"  # ClusterIPs are only allocated, never routed: nothing here proxies Services
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0


class ControlPlaneError(Exception):
    """The control plane cannot be started; the message is one line naming what and where."""


def find_binaries(bin_dir: Path | None = None, release: str | None = None) -> dict[str, Path]:
    """The four binaries, or ControlPlaneError (one line) saying how to build them."""
    try:
        _, where = locate(release, bin_dir)
    except ReleaseError as err:
        raise ControlPlaneError(str(err)) from None
    return {name: where / name for name in BINARIES}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class _Proc:
    name: str
    proc: asyncio.subprocess.Process
    log: Path


@dataclass
class ControlPlane:
    """Start with `await start()`, stop with `await stop()`; `kubeconfig` is the admin's."""

    bin_dir: Path | None = None
    workdir: Path | None = None
    release: str | None = None
    node_names: tuple[str, ...] = ()
    node_kubeconfigs: dict[str, Path] = field(default_factory=dict)
    node_monitor_grace_s: int = 300
    extra_apiserver_flags: tuple[str, ...] = ()
    url: str = ""
    admin_token: str = ""
    ca_pem: bytes = b""
    kubeconfig: Path = field(default_factory=Path)
    apiserver_port: int = 0
    etcd_url: str = ""
    _procs: list[_Proc] = field(default_factory=list)
    _commands: dict[str, tuple[Path, list[str]]] = field(default_factory=dict)
    _own_workdir: bool = False
    _failed: bool = False

    async def start(self) -> None:
        binaries = find_binaries(self.bin_dir, self.release)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="vpa-control-plane-"))
            self._own_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            await self._start(binaries, self.workdir)
        except BaseException:
            self._failed = True
            await self.stop()
            raise

    async def _start(self, binaries: dict[str, Path], work: Path) -> None:
        pki = work / "pki"
        pki.mkdir(exist_ok=True)
        ca = new_ca("vpa-control-plane-ca")
        (pki / "ca.crt").write_bytes(ca.cert_pem)
        (pki / "ca.key").write_bytes(
            ca.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        cert, key = issue(
            ca,
            "kube-apiserver",
            (
                "127.0.0.1",
                "localhost",
                "10.96.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        (pki / "apiserver.crt").write_bytes(cert)
        (pki / "apiserver.key").write_bytes(key)
        proxy_ca = new_ca("vpa-front-proxy-ca")
        (pki / "front-proxy-ca.crt").write_bytes(proxy_ca.cert_pem)
        cert, key = issue(proxy_ca, "front-proxy-client", client=True)
        (pki / "front-proxy-client.crt").write_bytes(cert)
        (pki / "front-proxy-client.key").write_bytes(key)
        sa_key = ec.generate_private_key(ec.SECP256R1())
        (pki / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.ca_pem = ca.cert_pem
        tokens = {
            "admin": (secrets.token_hex(16), "system:masters"),
            "system:kube-controller-manager": (secrets.token_hex(16), ""),
            "system:kube-scheduler": (secrets.token_hex(16), ""),
        }
        for node in self.node_names:
            tokens[f"system:node:{node}"] = (secrets.token_hex(16), "system:nodes")
        (pki / "tokens.csv").write_text(
            "".join(
                f'{tok},{user},{user},"{groups}"\n' if groups else f"{tok},{user},{user}\n"
                for user, (tok, groups) in tokens.items()
            )
        )
        self.admin_token = tokens["admin"][0]

        etcd_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.apiserver_port = free_port()
        self.url = f"https://127.0.0.1:{self.apiserver_port}"
        self.kubeconfig = write_kubeconfig(
            work / "admin.kubeconfig", self.url, ca.cert_pem, self.admin_token, "vpa-control-plane"
        )
        kcm_kubeconfig = write_kubeconfig(
            work / "controller-manager.kubeconfig",
            self.url,
            ca.cert_pem,
            tokens["system:kube-controller-manager"][0],
            "vpa-control-plane",
        )
        sched_kubeconfig = write_kubeconfig(
            work / "scheduler.kubeconfig",
            self.url,
            ca.cert_pem,
            tokens["system:kube-scheduler"][0],
            "vpa-control-plane",
        )

        nodes_dir = work / "nodes"
        for node in self.node_names:
            nodes_dir.mkdir(exist_ok=True)
            self.node_kubeconfigs[node] = write_kubeconfig(
                nodes_dir / f"{node}.kubeconfig",
                self.url,
                ca.cert_pem,
                tokens[f"system:node:{node}"][0],
                "vpa-control-plane",
            )

        await self._spawn(
            "etcd",
            binaries["etcd"],
            [
                "--name=default",
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        await self._wait_http(
            "etcd", f"http://127.0.0.1:{etcd_port}/health", None, lambda body: '"health":"true"' in body
        )
        await self._spawn(
            "kube-apiserver",
            binaries["kube-apiserver"],
            [
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.apiserver_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # The aggregation layer: the API server proxies metrics.k8s.io with this client certificate.
                f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                # The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation refuses.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                f"--cert-dir={work / 'apiserver-certs'}",
                *self.extra_apiserver_flags,
            ],
        )
        await self._wait_http("kube-apiserver", f"{self.url}/readyz", self.admin_token, lambda b: b == "ok")
        kcm_port, sched_port = free_port(), free_port()
        await self._spawn(
            "kube-controller-manager",
            binaries["kube-controller-manager"],
            [
                f"--kubeconfig={kcm_kubeconfig}",
                f"--authentication-kubeconfig={kcm_kubeconfig}",
                f"--authorization-kubeconfig={kcm_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={work / 'controller-manager-certs'}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Nodes heartbeat through their Leases; a slow machine must not see them go NotReady.
                f"--node-monitor-grace-period={self.node_monitor_grace_s}s",
                # A laptop cluster has no reason to throttle its own controllers (defaults: 20 QPS, burst 30).
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--profiling=false",
            ],
        )
        await self._spawn(
            "kube-scheduler",
            binaries["kube-scheduler"],
            [
                f"--kubeconfig={sched_kubeconfig}",
                f"--authentication-kubeconfig={sched_kubeconfig}",
                f"--authorization-kubeconfig={sched_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                "--leader-elect=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--profiling=false",
            ],
        )
        await self._wait_http(
            "kube-controller-manager", f"https://127.0.0.1:{kcm_port}/healthz", None, lambda b: b == "ok"
        )
        await self._wait_http(
            "kube-scheduler", f"https://127.0.0.1:{sched_port}/healthz", None, lambda b: b == "ok"
        )
        # The service-account controller runs once the default namespace has its ServiceAccount.
        await self._wait_http(
            "kube-controller-manager (default ServiceAccount)",
            f"{self.url}/api/v1/namespaces/default/serviceaccounts/default",
            self.admin_token,
            lambda b: '"name":"default"' in b.replace(" ", ""),
        )

    async def _spawn(self, name: str, binary: Path, args: list[str]) -> None:
        self._commands[name] = (binary, args)
        self._procs.append(await self._exec(name, binary, args))

    async def _exec(self, name: str, binary: Path, args: list[str]) -> _Proc:
        assert self.workdir is not None
        log = self.workdir / f"{name}.log"
        with log.open("ab") as out:
            proc = await asyncio.create_subprocess_exec(
                str(binary),
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        return _Proc(name, proc, log)

    # --- faults ------------------------------------------------------------------------------------------

    def _proc(self, name: str) -> _Proc:
        for p in self._procs:
            if p.name == name:
                return p
        raise ControlPlaneError(f"{name} was never started")

    def pid(self, name: str) -> int | None:
        """The PID of `name` while it runs, else None."""
        p = self._proc(name)
        return p.proc.pid if p.proc.returncode is None else None

    async def kill_apiserver(self) -> int:
        """SIGKILL kube-apiserver by its PID (a crash: no graceful shutdown, open watches just break) and wait
        until it has exited; returns the PID it had."""
        p = self._proc("kube-apiserver")
        if p.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.proc.kill()
        await p.proc.wait()
        return p.proc.pid

    async def start_apiserver(self) -> int:
        """Start kube-apiserver again, as it first ran (same flags, port, certificates and tokens), and wait
        until /readyz says ok; returns the new PID. ControlPlaneError when it is still running."""
        p = self._proc("kube-apiserver")
        if p.proc.returncode is None:
            raise ControlPlaneError(f"kube-apiserver is still running (pid {p.proc.pid}); kill it first")
        binary, args = self._commands["kube-apiserver"]
        fresh = await self._exec("kube-apiserver", binary, args)
        # Same place in the list: stop() still stops it before etcd.
        self._procs[self._procs.index(p)] = fresh
        await self._wait_http("kube-apiserver", f"{self.url}/readyz", self.admin_token, lambda b: b == "ok")
        return fresh.proc.pid

    async def compact_etcd(self) -> int:
        """Compact etcd's history at its current revision (v3 JSON gateway, loopback); returns that revision.

        Physical, so the compaction is done when this returns: any read or watch of an older revision is
        refused by etcd from then on (and kube-apiserver answers its clients 410 Gone where it must ask etcd).
        """
        key = base64.b64encode(b"/registry/").decode()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async with session.post(f"{self.etcd_url}/v3/kv/range", json={"key": key, "limit": 1}) as resp:
                body = await resp.json(content_type=None)
                if resp.status != 200:
                    raise ControlPlaneError(f"etcd range for the revision: HTTP {resp.status}: {body}")
            revision = int(body["header"]["revision"])
            async with session.post(
                f"{self.etcd_url}/v3/kv/compaction", json={"revision": str(revision), "physical": True}
            ) as resp:
                answer = await resp.json(content_type=None)
                # Nothing written since the last compaction: etcd refuses to compact the same revision twice.
                if resp.status != 200 and "compacted" not in str(answer):
                    raise ControlPlaneError(
                        f"etcd compaction at revision {revision}: HTTP {resp.status}: {answer}"
                    )
        return revision

    async def _wait_http(self, name: str, url: str, token: str | None, ok: object) -> None:
        check = ok if callable(ok) else (lambda _b: True)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # readiness only; the kubeconfig pins the CA for real clients
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + START_TIMEOUT_S
        last = ""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    async with session.get(url, ssl=ctx if url.startswith("https") else False,
                                           headers=headers) as resp:  # fmt: skip
                        body = await resp.text()
                        if resp.status == 200 and check(body):
                            return
                        last = f"HTTP {resp.status}: {body[:200]}"
                except (TimeoutError, aiohttp.ClientError, OSError) as err:
                    last = str(err) or type(err).__name__
                await asyncio.sleep(0.25)
        raise ControlPlaneError(
            f"{name} not ready after {START_TIMEOUT_S:.0f} s ({last}); logs in {self.workdir}"
        )

    def _check_alive(self) -> None:
        for p in self._procs:
            if p.proc.returncode is not None:
                tail = p.log.read_text(errors="replace").strip().splitlines()[-1:] if p.log.exists() else []
                raise ControlPlaneError(
                    f"{p.name} exited with status {p.proc.returncode} at start-up "
                    f"({tail[0][:300] if tail else 'no output'}); logs in {self.workdir}"
                )

    def failed_processes(self) -> list[str]:
        """Names of control-plane processes that have exited (none while healthy)."""
        return [p.name for p in self._procs if p.proc.returncode is not None]

    async def stop(self) -> None:
        """Stop every process by PID, newest first (etcd last); remove the work directory unless it failed."""
        for p in reversed(self._procs):
            if p.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(p.proc.wait(), STOP_GRACE_S)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        p.proc.kill()
                    await p.proc.wait()
        self._procs.clear()
        if self._own_workdir and not self._failed and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
