"""`vpa replay --evaluate`, `--recommender` and `--list-recommenders`: the orchestration, the three
outputs, the flags, and the HTML report rendered by a headless Chromium (skipped when none is installed)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vpa import cli
from vpa.flags import commands
from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.settings import ReplaySettings
from vpa.replay.evaluating import evaluate, evaluation_json, render_html, render_table
from vpa.replay.replaying import Trace, run

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
GIB = 2**30
STEP = 300


def trace(days: int = 4, step_day: int = 2) -> Trace:
    """Two keys at 5-minute samples: `steady` at 1 GiB and 0.5 core; `grows` 1 GiB, then 2 GiB from
    `step_day` on (an OOM proxy for any recommender that only knows the past)."""
    t = Trace([], [], [], [], [])
    for step in range(days * 86_400 // STEP):
        now = T0 + step * STEP
        for key in ("grows", "steady"):
            memory = 2 * GIB if key == "grows" and now >= T0 + step_day * 86_400 else GIB
            t.timestamps.append(now)
            t.containers.append(key)
            t.cpu_cores.append(0.5)
            t.memory_bytes.append(memory)
            t.oom.append(False)
    return t


def test_every_builtin_recommender_is_scored() -> None:
    result = evaluate(trace(), ("default", "cost-aware"), RecommenderConfig(), 3600.0)
    default, cost_aware = result.recommenders
    assert [k.key for k in default.keys] == ["grows", "steady"]
    # Constant usage: the first recommendation comes at the first recomputation, an hour in.
    assert all(k.time_to_first_s == 3600 for k in default.keys + cost_aware.keys)
    # The step to 2 GiB overruns both (the past never saw it), the steady key never.
    grows = {r.name: r.keys[0] for r in result.recommenders}
    steady = {r.name: r.keys[1] for r in result.recommenders}
    assert all(score.oom_proxies > 0 for score in grows.values())
    assert all(score.oom_proxies == 0 for score in steady.values())
    # Without upstream's 15% margin, the cost-aware target leaves less slack on the steady key.
    assert (steady["cost-aware"].memory_slack or 1) < (steady["default"].memory_slack or 0)
    # CPU is upstream's estimate in both.
    assert steady["cost-aware"].cpu_slack == steady["default"].cpu_slack


def test_moving_window_follows_a_step_within_an_interval() -> None:
    """Recomputed every 5 minutes, `moving-window` covers the step to 2 GiB one sample after it (one OOM
    proxy); on the steady key it leaves less slack than upstream's 15% margin; CPU is upstream's; every
    change of target counts as an update."""
    result = evaluate(trace(), ("default", "moving-window"), RecommenderConfig(), 300.0)
    grows = {r.name: r.keys[0] for r in result.recommenders}
    steady = {r.name: r.keys[1] for r in result.recommenders}
    assert grows["moving-window"].oom_proxies == 1
    assert steady["moving-window"].oom_proxies == 0
    assert (steady["moving-window"].memory_slack or 1) < (steady["default"].memory_slack or 0)
    assert steady["moving-window"].cpu_slack == steady["default"].cpu_slack
    assert grows["moving-window"].updates >= 2  # up to 2 GiB, and the hand-over from upstream's estimate


def test_closed_loop_feeds_oom_proxies_back() -> None:
    open_loop = evaluate(trace(), ("default",), RecommenderConfig(), 3600.0)
    closed = evaluate(trace(), ("default",), RecommenderConfig(), 3600.0, closed_loop=True)
    assert closed.closed_loop
    assert not open_loop.closed_loop
    # Fed back as OOM kills, overruns are bumped by upstream's OOM rule (×1.2 of the limit), not
    # learnt as the usage itself: the targets that follow differ.
    closed_targets = closed.recommenders[0].plots["grows"].memory_target
    assert closed_targets != open_loop.recommenders[0].plots["grows"].memory_target


def test_json_and_table_outputs() -> None:
    result = evaluate(trace(days=2), ("default", "cost-aware"), RecommenderConfig(), 3600.0)
    document = json.loads(json.dumps(evaluation_json(result)))
    assert document["intervalSeconds"] == 3600.0
    assert [r["name"] for r in document["recommenders"]] == ["default", "cost-aware"]
    overall = document["recommenders"][0]["overall"]
    assert set(overall) >= {"memory_slack", "oom_proxies_per_day", "throttle_proxies_per_day", "updates",
                            "mean_time_to_first_s", "cpu_slack", "days", "keys"}
    table = render_table(result)
    assert table.splitlines()[1].split()[:3] == ["RECOMMENDER", "KEY-DAYS", "MEMORY"]
    assert re.search(r"^cost-aware\s+steady\s+\d", table, re.MULTILINE)


def _csv(path: Path, t: Trace) -> Path:
    lines = ["timestamp,container,cpu_cores,memory_bytes"]
    lines += [f"{ts:.0f},{key},{cpu},{memory}" for ts, key, cpu, memory
              in zip(t.timestamps, t.containers, t.cpu_cores, t.memory_bytes, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`vpa replay ARGV` through the CLI entry point (the replay tool writes to the process's streams)."""
    capsys.readouterr()
    status = cli.main(["replay", *argv], {}, stdout=io.StringIO(), stderr=io.StringIO())
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_list_recommenders_prints_one_name_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["--list-recommenders"], capsys) == (0, "default\ncost-aware\nmoving-window\n", "")


def test_replay_with_a_named_recommender(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path / "t.csv", trace(days=2))
    status, default_out, _ = _cli([str(path)], capsys)
    assert status == 0
    status, cost_out, _ = _cli([str(path), "--recommender=cost-aware"], capsys)
    assert status == 0
    memory = {json.loads(text)["containers"][1]["target"]["memory"] for text in (default_out, cost_out)}
    assert len(memory) == 2  # same trace, different memory targets


def test_evaluate_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path / "t.csv", trace(days=2))
    status, out, err = _cli([str(path), "--evaluate", "--every=2h", "--recommender=cost-aware"], capsys)
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert document["intervalSeconds"] == 7200.0
    assert [r["name"] for r in document["recommenders"]] == ["cost-aware"]


@pytest.mark.parametrize(("argv", "message"), [
    (["t.csv", "--recommender=nope"],
     "--recommender: unknown recommender 'nope' (built-in: default, cost-aware, moving-window)"),
    (["t.csv", "--output=html"], "--output html needs --evaluate"),
    (["t.csv", "--closed-loop"], "--closed-loop needs --evaluate"),
    (["t.csv", "--evaluate", "--at=5"], "--at does not apply to --evaluate"),
])
def test_usage_errors_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(commands.UsageError, match=re.escape(message)):
        commands.parse_replay_args(argv, {})


def test_settings_carry_the_new_flags() -> None:
    settings = commands.parse_replay_args(["t.csv", "--evaluate", "--closed-loop", "--output=html",
                                           "--recommender=default"], {})
    assert (settings.evaluate, settings.closed_loop, settings.output, settings.algorithm) == (
        True, True, "html", "default")


def test_html_is_self_contained() -> None:
    page = render_html(evaluate(trace(days=2), ("default", "cost-aware"), RecommenderConfig(), 3600.0))
    assert "<script" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg")
    assert page.count("<svg") == 1 + 2 * 2  # trade-off, and memory and CPU per key


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_html_report_renders_in_a_headless_browser(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on PATH")
    path = _csv(tmp_path / "t.csv", trace(days=2))
    out = io.StringIO()
    assert run(ReplaySettings(trace_path=str(path), evaluate=True, output="html"), stdout=out) == 0
    page = tmp_path / "report.html"
    page.write_text(out.getvalue())
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}", "--no-first-run"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    # The browser parsed the page into a DOM with the summary rows and the SVG plots drawn from points.
    assert dom.count('class="summary"') == 3  # every built-in recommender
    assert len(re.findall(r"<svg[^>]*class=\"chart\"", dom)) == 5
    points = re.findall(r'<polyline[^>]*points="([^"]+)"', dom)
    assert points
    assert all(len(p.split()) >= 2 for p in points)
    assert dom.count('class="point"') == 3
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=900,1400", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000  # a page with plots, not a blank one
