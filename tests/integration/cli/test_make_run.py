"""`make run` as a user meets it (issue 45, items 1, 2, 4, 9 and 10, and what it prints first), driven through
`hack/run-local.sh` with ports of its own and a temporary run directory, so it runs beside other tests and
never touches the developer's `.run/`.

One steady run serves the tests in order: its first lines; a second run refused without touching it; a
Deployment given usage by the annotation the first lines show, recommended above the floor and resized in
place; `kubectl describe vpa` showing the resizes with ages in seconds or minutes; the log quiet while
nothing changes; and how it stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.integration.cli.helpers import REPO, api_get, closed_port

SCRIPT = REPO / "hack" / "run-local.sh"
KUBECTL = Path(sys.executable).parent / "kubectl"
T = TypeVar("T")

APP = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        resources: {requests: {cpu: 100m, memory: 100Mi}}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  updatePolicy: {updateMode: InPlaceOrRecreate}
"""


def _env(run_dir: Path, address_port: int, webhook_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NAMESPACE")}
    env.update(RUN_DIR=str(run_dir), ADDRESS=f"127.0.0.1:{address_port}", WEBHOOK_PORT=str(webhook_port),
               TIME_SCALE="60", VPA=str(Path(sys.executable).parent / "vpa"), PY=sys.executable)
    return env


class MakeRun:
    """`hack/run-local.sh` without a terminal, in a session of its own; its output collected in a file."""

    def __init__(self, run_dir: Path, env: dict[str, str], out: str = "") -> None:
        self.run_dir = run_dir
        self.kubeconfig = run_dir / "kubeconfig"
        self.out_path = run_dir.parent / (out or f"{run_dir.name}.out")
        self._out = self.out_path.open("w")
        self.process = subprocess.Popen(["bash", str(SCRIPT)], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                        stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def output(self) -> str:
        return self.out_path.read_text()

    def wait_for_output(self, needle: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.output:
            assert self.process.poll() is None, self.output
            assert time.monotonic() < deadline, self.output
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM, wait_s: float = 0) -> int:
        """Wait up to `wait_s` for it to end by itself, else send `sig`; its exit status."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=wait_s or None) if wait_s else None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._out.close()
        return self.process.returncode


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _wait(what: str, probe: Callable[[], T | None], timeout_s: float = 90) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeRun]:
    folder = tmp_path_factory.mktemp("make-run")
    ports = (closed_port(), closed_port())
    process = MakeRun(folder / "run", _env(folder / "run", *ports))
    process.ports = ports  # type: ignore[attr-defined]
    process.wait_for_output("admission webhook serving")
    yield process
    process.stop()


def test_first_lines_say_how_to_reach_stop_and_give_usage(run: MakeRun) -> None:
    first = run.output.splitlines()[:8]
    text = "\n".join(first)
    assert f"--kubeconfig {run.kubeconfig}" in text
    assert "Ctrl-C" in text
    assert "SIGTERM" in text
    assert "sim.vpa.dev/usage=" in text


def test_a_second_make_run_is_refused_and_leaves_the_first_reachable(run: MakeRun, tmp_path: Path) -> None:
    kubeconfig_before = run.kubeconfig.read_text()
    sim_log_before = (run.run_dir / "sim.log").stat().st_size
    ports: tuple[int, int] = run.ports  # type: ignore[attr-defined]
    # The same run directory (and ports): refused by the lock, before anything is written.
    second = MakeRun(run.run_dir, _env(run.run_dir, *ports), out="second.out")
    assert second.stop(wait_s=30) == 2
    assert "another make run is using" in second.output
    # Another run directory with the same ports: refused by the port check, its directory left empty.
    third = MakeRun(tmp_path / "other", _env(tmp_path / "other", *ports))
    assert third.stop(wait_s=30) == 2
    assert "cannot listen" in third.output
    assert not (tmp_path / "other" / "kubeconfig").exists()
    assert run.kubeconfig.read_text() == kubeconfig_before
    assert (run.run_dir / "sim.log").stat().st_size >= sim_log_before > 0
    assert api_get(run.kubeconfig, "/api/v1/nodes")[0] == 200
    assert run.process.poll() is None


def _cpu_target(kubeconfig: Path) -> int:
    vpa = json.loads(_kubectl(kubeconfig, "get", "vpa", "web", "-n", "default", "-o", "json"))
    for item in (vpa.get("status") or {}).get("recommendation", {}).get("containerRecommendations", []):
        cpu = item["target"]["cpu"]
        return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return 0


def test_the_usage_annotation_from_the_first_lines_drives_the_recommendation(run: MakeRun) -> None:
    _kubectl(run.kubeconfig, "apply", "-f", "-", stdin=APP)
    _wait("two running pods", lambda: len(json.loads(_kubectl(
        run.kubeconfig, "get", "pods", "-l", "app=web", "-n", "default", "-o", "json"))["items"]) == 2)
    # The example line as printed, run as the user would paste it.
    line = next(line for line in run.output.splitlines() if "annotate pods" in line).strip()
    args = re.match(r"\S+ --kubeconfig \S+ annotate pods -l app=web '(.*)'$", line)
    assert args is not None, line
    _kubectl(run.kubeconfig, "annotate", "pods", "-n", "default", "-l", "app=web", args.group(1))
    assert _wait("a CPU target from the annotated usage", lambda: _cpu_target(run.kubeconfig) >= 400 or None)
    _wait("an in-place resize", lambda: "InPlaceResizedPod" in _kubectl(
        run.kubeconfig, "describe", "vpa", "web", "-n", "default"))


def test_describe_vpa_shows_the_resizes_with_ages_as_kubectl_reads_them(run: MakeRun) -> None:
    text = _kubectl(run.kubeconfig, "describe", "vpa", "web", "-n", "default")
    events = text[text.index("Events:"):]
    assert "<none>" not in events
    rows = [row for row in events.splitlines() if "InPlaceResizedPod" in row]
    assert rows, events
    for row in rows:
        age = row.split()[2]
        assert re.fullmatch(r"\d+s|\d+m\d*s?|\d+m", age), row  # seconds or minutes, never "337d"
    pod_events = _kubectl(run.kubeconfig, "get", "events", "-n", "default",
                          "--field-selector", "reason=InPlaceResizedByVPA")
    assert "d " not in pod_events.split("\n", 1)[1][:8]


def test_the_log_is_quiet_while_nothing_changes(run: MakeRun) -> None:
    time.sleep(5)  # let the resize settle
    start = len(run.output.splitlines())
    time.sleep(30)
    lines = run.output.splitlines()[start:]
    noise = [line for line in lines if "updater_prompt_pass_done" in line and "resized=0" in line]
    assert noise == []
    assert len(lines) < 20, "\n".join(lines)


def test_sigint_to_the_process_group_stops_both_quietly(tmp_path: Path) -> None:
    ports = (closed_port(), closed_port())
    process = MakeRun(tmp_path / "run", _env(tmp_path / "run", *ports))
    process.wait_for_output("vpa started", timeout_s=60)
    children = _children(process.process.pid)
    os.killpg(process.process.pid, signal.SIGINT)
    status = process.stop(wait_s=30)
    assert status == 0, process.output
    assert "Terminated" not in process.output
    _wait("vpa sim and vpa run gone", lambda: not any(_alive(pid) for pid in children), timeout_s=20)


def test_sigterm_to_make_stops_both(tmp_path: Path) -> None:
    env = _env(tmp_path / "run", closed_port(), closed_port())
    make = subprocess.Popen(["make", "-s", "-o", "setup", "-o", ".venv/.installed", "run"],
                            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert make.stdout is not None
    output = []
    for line in make.stdout:
        output.append(line)
        if "vpa started" in line:
            break
    descendants = _children(make.pid)
    make.send_signal(signal.SIGTERM)
    rest, _ = make.communicate(timeout=30)
    assert "Terminated" not in rest
    _wait("vpa sim and vpa run gone", lambda: not any(_alive(pid) for pid in descendants), timeout_s=20)


def test_ctrl_c_in_a_terminal_stops_both_without_job_noise(tmp_path: Path) -> None:
    env = _env(tmp_path / "run", closed_port(), closed_port())
    pid, fd = pty.fork()
    if pid == 0:  # the child: the script on a terminal, as `make run` in a shell
        os.chdir(REPO)
        os.execvpe("bash", ["bash", str(SCRIPT)], env)
    output = b""
    deadline = time.monotonic() + 60
    while b"vpa started" not in output and time.monotonic() < deadline:
        output += _read(fd, 0.5)
    assert b"vpa started" in output, output.decode(errors="replace")
    os.write(fd, b"\x03")  # Ctrl-C
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        output += _read(fd, 0.2)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    output += _read(fd, 0.2)
    os.close(fd)
    assert status is not None
    assert os.waitstatus_to_exitcode(status) == 0, output.decode(errors="replace")
    assert b"Terminated" not in output
    assert b"Traceback" not in output


def _read(fd: int, timeout_s: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def _children(root: int) -> list[int]:
    """Every descendant of `root` (from /proc), so the test can see them all gone."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                found.append(pid)
                frontier.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
