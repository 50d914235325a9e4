"""Bad input to `vpa sim`, `vpa replay` and the recommender's flags: one line naming the flag or file, exit 2,
and nothing created or served on the user's behalf (issue 45, items 6 and "Also found")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cli.helpers import vpa


def test_sim_refuses_a_port_out_of_range_instead_of_listening_elsewhere() -> None:
    result = vpa(["sim", "--port", "99999"], timeout=30)
    assert result.returncode == 2
    assert "--port" in result.stderr
    assert "99999" in result.stderr
    assert "API server:" not in result.stdout


def test_sim_refuses_a_kubeconfig_out_in_a_missing_folder_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "kc"
    result = vpa(["sim", "--kubeconfig-out", str(target)], timeout=30)
    assert result.returncode == 2
    assert "--kubeconfig-out" in result.stderr
    assert str(target.parent) in result.stderr
    assert not (tmp_path / "missing").exists()


def test_replay_of_a_binary_file_names_the_file_and_row(tmp_path: Path) -> None:
    trace = tmp_path / "usage.csv"
    trace.write_bytes(b"timestamp,container,cpu_cores\n1,a,0.5\n\xff\xfe\x00\x9c binary \x80\n")
    result = vpa(["replay", str(trace)])
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert f"{trace}:" in result.stderr
    assert "not UTF-8" in result.stderr
    assert "codec" not in result.stderr  # not Python's own message


def test_replay_of_a_directory_says_it_is_a_directory(tmp_path: Path) -> None:
    result = vpa(["replay", str(tmp_path)])
    assert result.returncode == 2
    assert f"{tmp_path}: is a directory" in result.stderr
    assert "no such" not in result.stderr


def test_replay_of_a_trace_without_usage_columns_is_bad_input(tmp_path: Path) -> None:
    trace = tmp_path / "usage.csv"
    trace.write_text("timestamp,container\n1,a\n", encoding="utf-8")
    result = vpa(["replay", str(trace)])
    assert result.returncode == 2
    assert "no usage column" in result.stderr
    assert str(trace) in result.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["replay", "t.csv", "--target-cpu-percentile=1.5"], "--target-cpu-percentile"),
        (["replay", "t.csv", "--recommendation-upper-bound-memory-percentile=-0.1"],
         "--recommendation-upper-bound-memory-percentile"),
        (["run", "--target-memory-percentile=2"], "--target-memory-percentile"),
        (["run", "--recommender-overrides=default:target-cpu-percentile=1.01"], "--target-cpu-percentile"),
        (["run", "--kube-api-qps=-5"], "--kube-api-qps"),
        (["run", "--kube-api-burst=-1"], "--kube-api-burst"),
    ],
)
def test_flags_out_of_range_are_refused(args: list[str], flag: str) -> None:
    result = vpa(args, timeout=30)
    assert result.returncode == 2, result.stderr
    assert flag in result.stderr
    assert result.stderr.count("\n") == 1
