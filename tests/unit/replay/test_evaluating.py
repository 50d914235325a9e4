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
from vpa.logic.recommender.cost_aware import BUILTIN_RECOMMENDERS
from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.settings import ReplaySettings
from vpa.replay.evaluating import evaluate, evaluate_one, evaluation_json, render_html, render_table
from vpa.replay.replaying import Replayer, run
from vpa.replay.traces import Trace

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


def test_closed_loop_feeds_an_overrun_back_as_an_oom_and_the_next_recommendation_shows_the_bump() -> None:
    """`grows` jumps from 1 GiB to 2 GiB at day 2, above the applied limit: in the closed loop its first
    sample becomes an OOM kill at the applied limit, and the next recommendation is exactly what the
    recommender gives after that OOM: upstream's bump (max(1.2 × limit, limit + 100 MiB)) is in it, not
    the 2 GiB the open loop learns."""
    t = trace(days=3)
    config = RecommenderConfig()
    closed = evaluate_one(t, "default", config, 3600.0, closed_loop=True)
    open_loop = evaluate_one(t, "default", config, 3600.0)
    jump, after = T0 + 2 * 86_400, T0 + 2 * 86_400 + 3600
    series = closed.plots["grows"]
    at = series.times.index(jump)
    limit = int(series.memory_applied[at] or 0)
    assert GIB < limit < 2 * GIB  # the jump overruns the applied limit
    # The same rows fed by hand: usage before the jump, the OOM at the limit, then usage at the limit.
    replayer = Replayer(config, "default")
    for ts, key, cpu, memory in zip(t.timestamps, t.containers, t.cpu_cores, t.memory_bytes, strict=True):
        if ts >= after:
            break
        if key == "grows" and ts == jump:
            replayer.apply(ts, key, cpu, limit, True)
        elif key == "grows" and ts > jump:
            replayer.apply(ts, key, cpu, limit, False)
        else:
            replayer.apply(ts, key, cpu, memory, False)
    assert replayer.stats.ooms == 1
    [expected] = [item for item in replayer.recommendations(after) if item.container_name == "grows"]
    assert series.memory_target[at + 1] == expected.target.memory_bytes
    bump = max(1.2 * limit, limit + 100 * 2**20)
    assert (expected.target.memory_bytes or 0) >= bump
    assert (expected.target.memory_bytes or 0) < (open_loop.plots["grows"].memory_target[at + 1] or 0)
    # One overrun run fed back once: one OOM kill; the steady key never overruns.
    grows_score = next(k for k in closed.keys if k.key == "grows")
    assert grows_score.memory_runs >= 1
    assert next(k for k in closed.keys if k.key == "steady").memory_runs == 0


def test_json_contract_change_points_and_measures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`vpa replay VM.csv --evaluate --loop closed --every 1h --output json` without `--recommender`:
    every built-in recommender, each container's applied change points in time order."""
    path = _csv(tmp_path / "t.csv", trace(days=3))
    status, out, err = _cli([str(path), "--evaluate", "--loop", "closed", "--every", "1h", "--output",
                             "json"], capsys)
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert document["loop"] == "closed"
    assert [r["name"] for r in document["recommenders"]] == list(BUILTIN_RECOMMENDERS)
    for rec in document["recommenders"]:
        assert {"memory_held_gib_h", "memory_overruns", "memory_runs", "memory_run_day_share",
                "changes_per_day", "cpu_overruns", "legacy"} <= set(rec["overall"])
        assert {"memory_slack", "oom_proxies_per_day"} <= set(rec["overall"]["legacy"])
        for container in rec["containers"]:
            applied = container["applied"]
            assert applied
            assert [p["time"] for p in applied] == sorted(p["time"] for p in applied)
            assert all(set(p) == {"time", "memory", "cpu"} for p in applied)
            assert container["changes"] == len(applied) - 1
            assert {"memory_overruns", "memory_runs", "memory_held_gib_h", "legacy"} <= set(container)
    default = document["recommenders"][0]
    assert default["overall"]["memory_held_ratio_to_default"] == 1.0
    # `steady` holds 1 GiB and 0.5 core throughout: one application, never changed, never overrun.
    [steady] = [c for c in default["containers"] if c["key"] == "steady"]
    assert len(steady["applied"]) == 1
    assert steady["memory_overruns"] == 0
    assert steady["applied"][0]["time"] == T0 + 3600
    assert steady["applied"][0]["memory"] > GIB


def test_json_and_table_outputs() -> None:
    result = evaluate(trace(days=2), ("default", "cost-aware"), RecommenderConfig(), 3600.0)
    document = json.loads(json.dumps(evaluation_json(result)))
    assert document["intervalSeconds"] == 3600.0
    assert [r["name"] for r in document["recommenders"]] == ["default", "cost-aware"]
    overall = document["recommenders"][0]["overall"]
    assert set(overall) >= {"memory_held_gib_h", "memory_applied_slack", "memory_overruns_per_day",
                            "memory_runs_per_day", "memory_run_day_share", "changes_per_day",
                            "cpu_overruns_per_day", "mean_time_to_first_s", "days", "keys", "legacy"}
    # The measures against the latest target stay, labelled legacy.
    assert set(overall["legacy"]) == {"memory_slack", "oom_proxies_per_day", "throttle_proxies_per_day",
                                      "updates", "cpu_slack", "memory_mean_slack", "cpu_mean_slack",
                                      "oom_day_share", "throttle_day_share"}
    table = render_table(result)
    assert table.splitlines()[1].split()[:4] == ["RECOMMENDER", "KEY-DAYS", "MEM", "HELD"]
    assert "legacy (scored against the latest target" in table
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
    names = "default\ncost-aware\nmoving-window\noom-averse\nraise-on-overrun\n"
    assert _cli(["--list-recommenders"], capsys) == (0, names, "")


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
     "--recommender: unknown recommender 'nope' (built-in: default, cost-aware, moving-window, oom-averse, "
     "raise-on-overrun)"),
    (["t.csv", "--output=html"], "--output html needs --evaluate"),
    (["t.csv", "--closed-loop"], "--closed-loop needs --evaluate"),
    (["t.csv", "--loop=closed"], "--loop needs --evaluate"),
    (["t.csv", "--evaluate", "--loop=open", "--closed-loop"], "--loop open contradicts --closed-loop"),
    (["t.csv", "--evaluate", "--loop=half"], "--loop"),
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
    assert commands.parse_replay_args(["t.csv", "--evaluate", "--loop=closed"], {}).closed_loop
    assert not commands.parse_replay_args(["t.csv", "--evaluate", "--loop=open"], {}).closed_loop


def test_html_is_self_contained() -> None:
    page = render_html(evaluate(trace(days=2), ("default", "cost-aware"), RecommenderConfig(), 3600.0))
    assert "<script" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg")
    assert page.count("<svg") == 1 + 2 * 2  # trade-off, and memory and CPU per key
    assert 'id="legacy"' in page
    assert 'data-label="default applied"' in page


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
    assert dom.count('class="summary"') == len(BUILTIN_RECOMMENDERS)
    assert len(re.findall(r"<svg[^>]*class=\"chart\"", dom)) == 5
    points = re.findall(r'<polyline[^>]*points="([^"]+)"', dom)
    assert points
    assert all(len(p.split()) >= 2 for p in points)
    assert dom.count('class="point"') == len(BUILTIN_RECOMMENDERS)
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=900,1400", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000  # a page with plots, not a blank one
