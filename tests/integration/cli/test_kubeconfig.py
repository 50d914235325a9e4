"""kubectl's kubeconfig conventions in `vpa report` and `vpa run`, against a `vpa sim` process (issue 45):
`--kubeconfig`, then `$KUBECONFIG` (a list, merged: the first file to set a key wins), then
`~/.kube/config`, then in-cluster; `--context`; a file that is not a kubeconfig named in one line; an
unreachable server named, in seconds."""

from __future__ import annotations

import copy
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.cli.helpers import REPO, SimProcess, closed_port, vpa


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = SimProcess(tmp_path_factory.mktemp("sim"), "--no-behaviour")
    yield process
    process.stop()


def _two_contexts(sim: SimProcess, current: str) -> dict[str, Any]:
    """The simulator's kubeconfig with a second context, `dead`, whose server nothing listens on."""
    config: dict[str, Any] = yaml.safe_load(sim.kubeconfig.read_text())
    dead_cluster = copy.deepcopy(config["clusters"][0])
    dead_cluster["name"] = "dead"
    dead_cluster["cluster"]["server"] = f"https://127.0.0.1:{closed_port()}"
    config["clusters"].append(dead_cluster)
    config["contexts"].append({"name": "dead", "context": {"cluster": "dead", "user": "vpa-sim"}})
    config["current-context"] = current
    return config


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def test_report_falls_back_to_the_home_kubeconfig(sim: SimProcess, tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(sim.kubeconfig.read_text())
    result = vpa(["report", "--output=json"], env={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.lstrip().startswith("{")


def test_report_with_no_kubeconfig_anywhere_says_what_it_looked_for(tmp_path: Path) -> None:
    result = vpa(["report"], env={"HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "~/.kube/config" in result.stderr
    assert result.stderr.count("\n") == 1


def test_report_context_picks_another_context_than_current(sim: SimProcess, tmp_path: Path) -> None:
    kubeconfig = _write(tmp_path / "kc", _two_contexts(sim, current="dead"))
    good = vpa(["report", "--kubeconfig", str(kubeconfig), "--context", "vpa-sim", "--output=json"])
    assert good.returncode == 0, good.stderr
    missing = vpa(["report", "--kubeconfig", str(kubeconfig), "--context", "nope"])
    assert missing.returncode == 2
    assert "--context 'nope' is not defined" in missing.stderr
    assert str(kubeconfig) in missing.stderr


def test_report_names_an_unreachable_server_within_seconds(sim: SimProcess, tmp_path: Path) -> None:
    config = _two_contexts(sim, current="dead")
    kubeconfig = _write(tmp_path / "kc", config)
    started = time.monotonic()
    result = vpa(["report", "--kubeconfig", str(kubeconfig)])
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert config["clusters"][1]["cluster"]["server"] in result.stderr
    assert result.stderr.count("\n") == 1
    assert elapsed < 8, elapsed


def test_kubeconfig_list_merges_as_kubectl_the_first_file_to_set_a_key_wins(
    sim: SimProcess, tmp_path: Path
) -> None:
    both = _two_contexts(sim, current="vpa-sim")
    # The first file sets only current-context and a `vpa-sim` context that points at the live cluster;
    # the second sets everything, with current-context `dead` and `vpa-sim` pointing at the dead cluster.
    first = {"apiVersion": "v1", "kind": "Config", "current-context": "vpa-sim",
             "contexts": [{"name": "vpa-sim", "context": {"cluster": "vpa-sim", "user": "vpa-sim"}}]}
    second = copy.deepcopy(both)
    second["current-context"] = "dead"
    second["contexts"] = [{"name": "vpa-sim", "context": {"cluster": "dead", "user": "vpa-sim"}},
                          {"name": "dead", "context": {"cluster": "dead", "user": "vpa-sim"}}]
    paths = f"{_write(tmp_path / 'a', first)}:{_write(tmp_path / 'b', second)}"
    merged = vpa(["report", "--output=json"], env={"KUBECONFIG": paths, "HOME": str(tmp_path)})
    assert merged.returncode == 0, merged.stderr
    reversed_order = f"{tmp_path / 'b'}:{tmp_path / 'a'}"
    dead = vpa(["report"], env={"KUBECONFIG": reversed_order, "HOME": str(tmp_path)})
    assert dead.returncode == 1
    assert both["clusters"][1]["cluster"]["server"] in dead.stderr


@pytest.mark.parametrize("command", ["report", "run"])
def test_a_file_that_is_not_a_kubeconfig_is_named(command: str, tmp_path: Path) -> None:
    usage = tmp_path / "usage.csv"
    usage.write_text("timestamp,container,cpu_cores\n1,a,0.5\n")
    result = vpa([command, "--kubeconfig", str(usage)], timeout=30)
    assert result.returncode == 2
    assert f"{usage}" in result.stderr
    assert "not a kubeconfig" in result.stderr
    assert "item assignment" not in result.stderr


def test_run_context_not_defined_is_a_start_up_error(sim: SimProcess, tmp_path: Path) -> None:
    kubeconfig = _write(tmp_path / "kc", _two_contexts(sim, current="vpa-sim"))
    result = vpa(["run", "--kubeconfig", str(kubeconfig), "--context", "nope", "--address=127.0.0.1:0",
                  "--port=0"], timeout=30)
    assert result.returncode == 2
    assert "--context 'nope' is not defined" in result.stderr


def _run_until(args: list[str], env: dict[str, str], needle: str, timeout: float = 30) -> str:
    """Start `vpa run`, wait until its log shows `needle`, stop it with SIGTERM; its log."""
    process = subprocess.Popen([sys.executable, "-m", "vpa.cli", "run", *args], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        for line in process.stdout:
            lines.append(line)
            if needle in line or time.monotonic() > deadline:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=20)
    return "".join(lines) + rest


def test_run_uses_the_home_kubeconfig_and_context(sim: SimProcess, tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    _write(tmp_path / ".kube" / "config", _two_contexts(sim, current="dead"))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    log = _run_until(["--context=vpa-sim", "--components=recommender", "--address=127.0.0.1:0",
                      "--log-format=json"], env, "vpa started")
    assert '"vpa started"' in log, log
