"""`vpa replay --evaluate`: recommenders replayed over a trace in time, scored on the usage that followed.

Owns: `evaluate` — for each named built-in recommender, a `Replayer` fed the trace in time order that
recomputes every key's recommendation every `interval_s` from past rows only, each sample scored by a
`vpa.replay.scoring.Scorer` against the recommendation then in effect; with `closed_loop`, a sample
above the memory limit is fed back as an OOM kill at that limit instead of as usage (as the live
recommender would see it); the per-key plot series of the first few keys; and the three renderings:
a table, JSON, and one self-contained HTML page (inline SVG plots, no script, no external URL).

Must not: talk to a cluster, read the clock, or score anything itself — the numbers come from `Scorer`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Final, TextIO

import orjson

from vpa.logic.recommender.cost_aware import BUILTIN_RECOMMENDERS
from vpa.logic.recommender.estimation import PodRecommender
from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.resources import Resources
from vpa.model.settings import ReplaySettings, UpdaterSettings
from vpa.model.vpa import DEFAULT_RECOMMENDER_NAME
from vpa.replay.applying import AppliedRequests
from vpa.replay.replaying import Replayer
from vpa.replay.scoring import KeyScore, Scorer, Summary
from vpa.replay.traces import Trace

DEFAULT_INTERVAL_S: Final = 3600.0
PLOT_KEYS: Final = 4
_COLOURS: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass(slots=True)
class PlotSeries:
    """One key's plot points at each recomputation: the interval's peak usage and the new values."""

    times: list[float] = field(default_factory=list)
    memory_peak: list[float | None] = field(default_factory=list)
    memory_target: list[float | None] = field(default_factory=list)
    memory_lower: list[float | None] = field(default_factory=list)
    memory_upper: list[float | None] = field(default_factory=list)
    memory_applied: list[float | None] = field(default_factory=list)
    cpu_peak: list[float | None] = field(default_factory=list)
    cpu_target: list[float | None] = field(default_factory=list)
    cpu_applied: list[float | None] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RecommenderEvaluation:
    name: str
    summary: Summary
    keys: list[KeyScore]
    plots: dict[str, PlotSeries]


@dataclass(frozen=True, slots=True)
class Evaluation:
    interval_s: float
    closed_loop: bool
    recommenders: list[RecommenderEvaluation]


def evaluate_one(trace: Trace, name: str, config: RecommenderConfig, interval_s: float,
                 closed_loop: bool = False, plot_keys: int = PLOT_KEYS,
                 algorithm: PodRecommender | None = None,
                 updater: UpdaterSettings | None = None) -> RecommenderEvaluation:
    """Replay `trace` through the recommender `name`, recomputing every `interval_s` from the first row;
    at each recomputation the updater (`vpa.replay.applying`) decides what is applied. With
    `closed_loop`, the first sample of each run above the applied memory limit is fed back as an OOM kill
    at that limit (the container restarts with the applied values) and the rest of the run as usage at
    the limit, the most a container can use. `algorithm`, when given, is replayed under the label `name`
    instead of the built-in of that name."""
    if not interval_s > 0:
        raise ValueError(f"interval must be greater than 0, got {interval_s}")
    replayer = Replayer(config, name, algorithm)
    scorer = Scorer()
    applied = AppliedRequests(updater)
    plotted = set(sorted(set(trace.containers))[:plot_keys])
    plots = {key: PlotSeries() for key in sorted(plotted)}
    peaks: dict[str, list[float]] = {key: [-1.0, -1.0] for key in plotted}
    ts, keys, cpu, memory = trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes
    next_time = ts[0] + interval_s if ts else math.inf

    def recompute(now: float) -> None:
        for item in replayer.recommendations(now):
            key = item.container_name
            target, lower, upper = item.target, item.lower_bound, item.upper_bound
            scorer.recommend(key, now, (target.cpu_millicores, target.memory_bytes),
                             (lower.cpu_millicores, lower.memory_bytes),
                             (upper.cpu_millicores, upper.memory_bytes))
            change = applied.recommend(key, now, item)
            if change is not None:
                scorer.apply(key, now, change.cpu_millicores, change.memory_bytes)
            if key in plots:
                series, peak = plots[key], peaks[key]
                series.times.append(now)
                series.memory_peak.append(peak[1] if peak[1] >= 0 else None)
                series.cpu_peak.append(peak[0] if peak[0] >= 0 else None)
                series.memory_target.append(_float(target.memory_bytes))
                series.memory_lower.append(_float(lower.memory_bytes))
                series.memory_upper.append(_float(upper.memory_bytes))
                cpu_target = target.cpu_millicores
                series.cpu_target.append(None if cpu_target is None else cpu_target / 1000)
                requests = applied.requests(key)
                series.memory_applied.append(None if requests is None else _float(requests.memory_bytes))
                series.cpu_applied.append(None if requests is None or requests.cpu_millicores is None
                                          else requests.cpu_millicores / 1000)
                peak[0] = peak[1] = -1.0

    for index in range(len(ts)):
        timestamp = ts[index]
        while next_time <= timestamp:
            recompute(next_time)
            next_time += interval_s
        key, cpu_cores, memory_bytes = keys[index], cpu[index], memory[index]
        observed = scorer.observe(key, timestamp, cpu_cores, memory_bytes)
        peak = peaks.get(key)
        if peak is not None:
            if cpu_cores is not None:
                peak[0] = max(peak[0], cpu_cores)
            if memory_bytes is not None:
                peak[1] = max(peak[1], float(memory_bytes))
        if closed_loop and observed.overrun:
            limit = (applied.requests(key) or Resources()).memory_bytes
            if observed.run_start:
                applied.oom(key, timestamp)
                replayer.apply(timestamp, key, cpu_cores, limit, True)
            else:
                replayer.apply(timestamp, key, cpu_cores, limit, False)
        else:
            replayer.apply(timestamp, key, cpu_cores, memory_bytes, False)
    return RecommenderEvaluation(name, scorer.summary(), scorer.scores(), plots)


def evaluate(trace: Trace, names: Sequence[str], config: RecommenderConfig,
             interval_s: float = DEFAULT_INTERVAL_S, closed_loop: bool = False,
             plot_keys: int = PLOT_KEYS) -> Evaluation:
    """`evaluate_one` for each recommender in `names`, in that order."""
    return Evaluation(interval_s, closed_loop,
                      [evaluate_one(trace, name, config, interval_s, closed_loop, plot_keys)
                       for name in names])


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


# --- output ---------------------------------------------------------------------------------------------


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


_LEGACY_SUMMARY: Final = ("memory_slack", "cpu_slack", "memory_mean_slack", "cpu_mean_slack",
                          "oom_proxies_per_day", "oom_day_share", "throttle_proxies_per_day",
                          "throttle_day_share", "updates")
_LEGACY_KEY: Final = ("memory_slack", "cpu_slack", "memory_mean_slack", "cpu_mean_slack", "oom_proxies",
                      "oom_days", "throttle_proxies", "throttle_days", "updates")
"""The measures against the latest target (before issue 44), reported under `legacy`."""


def _numbers(item: Summary | KeyScore, legacy: tuple[str, ...],
             skip: tuple[str, ...] = ()) -> dict[str, object]:
    values = {k: (_round(v) if isinstance(v, float) else v) for k, v in asdict(item).items()
              if k not in skip}
    out = {k: v for k, v in values.items() if k not in legacy}
    out["legacy"] = {k: values[k] for k in legacy}
    return out


def applied_json(score: KeyScore) -> list[dict[str, object]]:
    """The change points in time order: `{"time": unix seconds, "memory": bytes, "cpu": cores}`."""
    return [{"time": _json_number(time), "memory": memory,
             "cpu": None if cpu is None else cpu / 1000} for time, memory, cpu in score.applied]


def _json_number(value: float) -> float | int:
    return int(value) if value == int(value) else value


def held_ratio(evaluation: Evaluation, rec: RecommenderEvaluation) -> float | None:
    """`rec`'s memory held over `default`'s (None when `default` is not in the evaluation or held none)."""
    base = next((r for r in evaluation.recommenders if r.name == DEFAULT_RECOMMENDER_NAME), None)
    if base is None or not base.summary.memory_held_gib_h:
        return None
    return rec.summary.memory_held_gib_h / base.summary.memory_held_gib_h


def evaluation_json(evaluation: Evaluation) -> dict[str, object]:
    """`recommenders[]`, each with its `name`, `overall` measures and `containers[]`, each container with
    its `key`, its `applied[]` change points and its measures beside them; the measures against the
    latest target under `legacy`."""
    recommenders = []
    for rec in evaluation.recommenders:
        overall = _numbers(rec.summary, _LEGACY_SUMMARY)
        overall["memory_held_ratio_to_default"] = _round(held_ratio(evaluation, rec))
        containers = []
        for score in rec.keys:
            container: dict[str, object] = {"key": score.key, "applied": applied_json(score)}
            container.update(_numbers(score, _LEGACY_KEY, skip=("key", "applied")))
            containers.append(container)
        recommenders.append({"name": rec.name, "overall": overall, "containers": containers})
    return {
        "intervalSeconds": evaluation.interval_s,
        "loop": "closed" if evaluation.closed_loop else "open",
        "closedLoop": evaluation.closed_loop,
        "recommenders": recommenders,
    }


def _cell(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 3600:.1f}h"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _summary_row(evaluation: Evaluation, rec: RecommenderEvaluation) -> tuple[str, ...]:
    s = rec.summary
    return (rec.name, str(s.days), f"{s.memory_held_gib_h:.1f}", _ratio(held_ratio(evaluation, rec)),
            _cell(s.memory_applied_slack), _cell(s.memory_overruns_per_day), _cell(s.memory_runs_per_day),
            _cell(s.memory_run_day_share), _cell(s.changes_per_day), f"{s.cpu_held_core_h:.1f}",
            _cell(s.cpu_applied_slack), _cell(s.cpu_overruns_per_day), _cell(s.cpu_runs_per_day),
            _cell(s.cpu_run_day_share), _duration(s.mean_time_to_first_s))


def _legacy_row(rec: RecommenderEvaluation) -> tuple[str, ...]:
    s = rec.summary
    return (rec.name, _cell(s.memory_slack), _cell(s.memory_mean_slack), _cell(s.oom_proxies_per_day),
            _cell(s.oom_day_share), _cell(s.cpu_slack), _cell(s.throttle_proxies_per_day), str(s.updates))


def _key_rows(rec: RecommenderEvaluation) -> list[tuple[str, ...]]:
    return [(rec.name, k.key, str(k.days), f"{k.memory_held_gib_h:.1f}", _cell(k.memory_applied_slack),
             str(k.memory_overruns), str(k.memory_runs), str(k.memory_run_days), str(k.changes),
             _cell(k.cpu_applied_slack), str(k.cpu_overruns), str(k.cpu_runs), _duration(k.time_to_first_s))
            for k in rec.keys]


def render_table(evaluation: Evaluation) -> str:
    """The summary per recommender (what is applied, then the legacy measures) and one row per key."""
    overall: list[tuple[str, ...]] = [("RECOMMENDER", "KEY-DAYS", "MEM HELD GiB·h", "VS DEFAULT", "MEM SLACK",
                                       "OVERRUNS/DAY", "RUNS/DAY", "RUN DAYS", "CHANGES/DAY",
                                       "CPU HELD core·h", "CPU SLACK", "THROTTLED/DAY", "THR RUNS/DAY",
                                       "THR DAYS", "FIRST REC")]
    overall += [_summary_row(evaluation, rec) for rec in evaluation.recommenders]
    lines = [f"recomputed every {_duration(evaluation.interval_s)}, "
             + ("closed loop (each overrun run fed back as an OOM kill at the applied limit)"
                if evaluation.closed_loop else "open loop")
             + "; scored on the requests the updater applies"]
    lines += _columns(overall)
    legacy: list[tuple[str, ...]] = [("RECOMMENDER", "AUTOPILOT MEM SLACK", "MEAN SLACK VS TARGET",
                                      "ABOVE TARGET/DAY", "DAYS ABOVE TARGET", "AUTOPILOT CPU SLACK",
                                      "CPU ABOVE TARGET/DAY", "UPDATES")]
    legacy += [_legacy_row(rec) for rec in evaluation.recommenders]
    lines += ["", "legacy (scored against the latest target, as before issue 44):"]
    lines += _columns(legacy)
    per_key: list[tuple[str, ...]] = [("RECOMMENDER", "CONTAINER", "DAYS", "MEM HELD GiB·h", "MEM SLACK",
                                       "OVERRUNS", "RUNS", "RUN DAYS", "CHANGES", "CPU SLACK", "THROTTLED",
                                       "THR RUNS", "FIRST REC")]
    for rec in evaluation.recommenders:
        per_key += _key_rows(rec)
    lines.append("")
    lines += _columns(per_key)
    return "\n".join(lines) + "\n"


# --- HTML -----------------------------------------------------------------------------------------------

_W: Final = 760
_H: Final = 220
_PAD: Final = 44


def _scale(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None and math.isfinite(v)]
    top = max(present) if present else 1.0
    return top if top > 0 else 1.0


def _polyline(times: Sequence[float], values: Sequence[float | None], t0: float, t1: float, top: float,
              colour: str, dash: str = "", label: str = "") -> str:
    span = (t1 - t0) or 1.0
    segments: list[list[str]] = [[]]
    for time_, value in zip(times, values, strict=True):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        x = _PAD + (time_ - t0) / span * (_W - 2 * _PAD)
        y = _H - _PAD / 2 - min(value, top) / top * (_H - _PAD)
        segments[-1].append(f"{x:.1f},{y:.1f}")
    dashing = f' stroke-dasharray="{dash}"' if dash else ""
    return "".join(f'<polyline class="series" data-label="{html.escape(label)}" fill="none" '
                   f'stroke="{colour}" '
                   f'stroke-width="1.2"{dashing} points="{" ".join(points)}"/>'
                   for points in segments if points)


def _axes(title: str, top: float, unit: str) -> str:
    return (f'<text x="{_PAD}" y="14" font-size="13">{html.escape(title)}</text>'
            f'<line x1="{_PAD}" y1="{_H - _PAD / 2}" x2="{_W - _PAD}" y2="{_H - _PAD / 2}" stroke="#888"/>'
            f'<line x1="{_PAD}" y1="{_PAD / 2}" x2="{_PAD}" y2="{_H - _PAD / 2}" stroke="#888"/>'
            f'<text x="2" y="{_PAD / 2 + 4}" font-size="10">{top:.3g}</text>'
            f'<text x="2" y="{_H - _PAD / 2}" font-size="10">0 {html.escape(unit)}</text>')


def _legend(entries: Sequence[tuple[str, str, str]]) -> str:
    parts = []
    for index, (label, colour, dash) in enumerate(entries):
        x = _PAD + index * 150
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<line x1="{x}" y1="{_H - 6}" x2="{x + 18}" y2="{_H - 6}" stroke="{colour}" '
                     f'stroke-width="2"{dashing}/><text x="{x + 22}" y="{_H - 2}" font-size="11">'
                     f'{html.escape(label)}</text>')
    return "".join(parts)


def _key_chart(evaluation: Evaluation, key: str, memory: bool) -> str:
    series = [(rec.name, rec.plots[key]) for rec in evaluation.recommenders if key in rec.plots]
    if not series or not series[0][1].times:
        return ""
    first = series[0][1]
    divisor = 2.0**30 if memory else 1.0
    peak = first.memory_peak if memory else first.cpu_peak
    values: list[Sequence[float | None]] = [peak]
    for _, s in series:
        values.append(s.memory_applied if memory else s.cpu_applied)
    # Usage and applied requests set the scale; targets far above them are clipped to the frame.
    top = 1.3 * max(_scale(v) for v in values)
    t0, t1 = first.times[0], first.times[-1]
    unit = "GiB" if memory else "cores"

    def scaled(items: Sequence[float | None]) -> list[float | None]:
        return [None if v is None else v / divisor for v in items]

    title = (f"{key}: {'memory' if memory else 'CPU'} ({unit}) — peak usage per interval vs. the applied "
             "request (solid) and the target (dashed)")
    body = [_axes(title, top / divisor, unit)]
    body.append(_polyline(first.times, scaled(peak), t0, t1, top / divisor, "#777", label="usage"))
    legend = [("usage (peak)", "#777", "")]
    for index, (name, s) in enumerate(series):
        colour = _COLOURS[index % len(_COLOURS)]
        applied = s.memory_applied if memory else s.cpu_applied
        target = s.memory_target if memory else s.cpu_target
        body.append(_polyline(s.times, scaled(applied), t0, t1, top / divisor, colour,
                              label=f"{name} applied"))
        body.append(_polyline(s.times, scaled(target), t0, t1, top / divisor, colour, "4,3",
                              label=f"{name} target"))
        legend.append((f"{name} applied", colour, ""))
    body.append(_legend(legend[:5]))
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
            f'viewBox="0 0 {_W} {_H}">{"".join(body)}</svg>')


def _tradeoff_chart(evaluation: Evaluation) -> str:
    points = [(rec.name, rec.summary.memory_held_gib_h, rec.summary.memory_runs)
              for rec in evaluation.recommenders]
    x_top = max((x for _, x, _ in points), default=1.0) * 1.2 or 1.0
    y_top = max((y for _, _, y in points), default=1) * 1.2 or 1.0
    body = [_axes(f"overrun runs (y, 0–{y_top:.0f}) vs. memory held in GiB·h (x)", y_top, ""),
            f'<text x="{_W - _PAD}" y="{_H - 4}" font-size="10" text-anchor="end">{x_top:.4g}</text>']
    for index, (name, x, y) in enumerate(points):
        cx = _PAD + x / x_top * (_W - 2 * _PAD)
        cy = _H - _PAD / 2 - y / y_top * (_H - _PAD)
        colour = _COLOURS[index % len(_COLOURS)]
        body.append(f'<circle class="point" data-label="{html.escape(name)}" cx="{cx:.1f}" cy="{cy:.1f}" '
                    f'r="5" fill="{colour}"/><text x="{cx + 8:.1f}" y="{cy + 4:.1f}" font-size="12">'
                    f'{html.escape(name)}</text>')
    return (f'<svg class="chart" id="tradeoff" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
            f'height="{_H}" viewBox="0 0 {_W} {_H}">{"".join(body)}</svg>')


def _html_table(table_id: str, rows: list[tuple[str, ...]], row_class: str) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in rows[0])
    body = "".join(f'<tr class="{row_class}" data-recommender="{html.escape(row[0])}">'
                   + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:])
    return f'<table id="{table_id}"><tr>{head}</tr>{body}</table>'


def render_html(evaluation: Evaluation, title: str = "vpa recommendation quality") -> str:
    """One self-contained page: summary tables, trade-off plot, per-key plots; inline SVG only."""
    summary: list[tuple[str, ...]] = [(
        "recommender", "key-days", "memory held GiB·h", "vs default", "memory slack (clipped)",
        "overrun samples / day", "overrun runs / day", "days with an overrun", "applied changes / day",
        "CPU held core·h", "CPU slack (clipped)", "throttled samples / day", "throttled runs / day",
        "days throttled", "first recommendation")]
    legacy: list[tuple[str, ...]] = [(
        "recommender", "Autopilot memory slack", "mean slack vs target", "samples above target / day",
        "days above target", "Autopilot CPU slack", "CPU above target / day", "updates (old rule)")]
    per_key: list[tuple[str, ...]] = [(
        "recommender", "key", "days", "memory held GiB·h", "memory slack", "overrun samples", "overrun runs",
        "days with an overrun", "applied changes", "CPU slack", "throttled samples", "throttled runs",
        "first recommendation")]
    for rec in evaluation.recommenders:
        summary.append(_summary_row(evaluation, rec))
        legacy.append(_legacy_row(rec))
        per_key += _key_rows(rec)
    keys = sorted({key for rec in evaluation.recommenders for key in rec.plots})
    charts = "".join(f'<section class="key"><h3>{html.escape(key)}</h3>{_key_chart(evaluation, key, True)}'
                     f"{_key_chart(evaluation, key, False)}</section>" for key in keys)
    loop = (" Closed loop: the first sample of each overrun run is fed back as an OOM kill at the applied "
            "limit." if evaluation.closed_loop else " Open loop: the recommender sees only the trace.")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:1.5em}}"
        "table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child{text-align:left}svg{display:block;margin:.5em 0}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>Recommendations recomputed every {_duration(evaluation.interval_s)} from past samples only; at "
        "each recomputation the updater's rules decide what is applied, and each sample is scored against "
        "the applied requests (memory limit = memory request). Memory held: applied request × time. Slack: "
        "mean over key-days of the day's average (request − usage)⁺ / request. Overrun: a sample above the "
        "applied memory limit (CPU: above the applied request, a throttling proxy); a run of consecutive "
        f"overrun samples counts once.{loop}</p>"
        f'{_html_table("summary", summary, "summary")}'
        "<h2>Legacy measures (against the latest target, as before)</h2>"
        f'{_html_table("legacy", legacy, "legacy")}'
        f"<h2>Memory held / overrun runs</h2>{_tradeoff_chart(evaluation)}"
        f"<h2>Usage and applied requests</h2>{charts}"
        f'<h2>Per key</h2>{_html_table("keys", per_key, "key")}</body></html>\n'
    )


def run(trace: Trace, settings: ReplaySettings, config: RecommenderConfig, out: TextIO) -> int:
    """`vpa replay --evaluate`: evaluate and write the report in `settings.output`'s format."""
    names = (settings.algorithm,) if settings.algorithm else BUILTIN_RECOMMENDERS
    result = evaluate(trace, names, config, settings.every_s or DEFAULT_INTERVAL_S, settings.closed_loop)
    if settings.output == "table":
        out.write(render_table(result))
    elif settings.output == "html":
        out.write(render_html(result))
    else:
        out.write(orjson.dumps(evaluation_json(result), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
