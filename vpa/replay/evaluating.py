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
from vpa.model.settings import ReplaySettings
from vpa.replay.replaying import Replayer, Trace
from vpa.replay.scoring import KeyScore, Scorer, Summary

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
    cpu_peak: list[float | None] = field(default_factory=list)
    cpu_target: list[float | None] = field(default_factory=list)


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
                 algorithm: PodRecommender | None = None) -> RecommenderEvaluation:
    """Replay `trace` through the recommender `name`, recomputing every `interval_s` from the first row.
    `algorithm`, when given, is replayed under the label `name` instead of the built-in of that name."""
    if not interval_s > 0:
        raise ValueError(f"interval must be greater than 0, got {interval_s}")
    replayer = Replayer(config, name, algorithm)
    scorer = Scorer()
    plotted = set(sorted(set(trace.containers))[:plot_keys])
    plots = {key: PlotSeries() for key in sorted(plotted)}
    peaks: dict[str, list[float]] = {key: [-1.0, -1.0] for key in plotted}
    ts, keys, cpu, memory = trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes
    next_time = ts[0] + interval_s if ts else math.inf
    limits: dict[str, int | None] = {}

    def recompute(now: float) -> None:
        for item in replayer.recommendations(now):
            key = item.container_name
            target, lower, upper = item.target, item.lower_bound, item.upper_bound
            scorer.recommend(key, now, (target.cpu_millicores, target.memory_bytes),
                             (lower.cpu_millicores, lower.memory_bytes),
                             (upper.cpu_millicores, upper.memory_bytes))
            limits[key] = target.memory_bytes
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
                peak[0] = peak[1] = -1.0

    for index in range(len(ts)):
        timestamp = ts[index]
        while next_time <= timestamp:
            recompute(next_time)
            next_time += interval_s
        key, cpu_cores, memory_bytes = keys[index], cpu[index], memory[index]
        oom = scorer.observe(key, timestamp, cpu_cores, memory_bytes)
        peak = peaks.get(key)
        if peak is not None:
            if cpu_cores is not None:
                peak[0] = max(peak[0], cpu_cores)
            if memory_bytes is not None:
                peak[1] = max(peak[1], float(memory_bytes))
        if closed_loop and oom:
            replayer.apply(timestamp, key, cpu_cores, limits.get(key), True)
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


def evaluation_json(evaluation: Evaluation) -> dict[str, object]:
    def summary(item: Summary) -> dict[str, object]:
        return {k: (_round(v) if isinstance(v, float) else v) for k, v in asdict(item).items()}

    def key_score(item: KeyScore) -> dict[str, object]:
        return {k: (_round(v) if isinstance(v, float) else v) for k, v in asdict(item).items()}

    return {
        "intervalSeconds": evaluation.interval_s,
        "closedLoop": evaluation.closed_loop,
        "recommenders": [{"name": rec.name, "overall": summary(rec.summary),
                          "containers": [key_score(score) for score in rec.keys]}
                         for rec in evaluation.recommenders],
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


def render_table(evaluation: Evaluation) -> str:
    overall: list[tuple[str, ...]] = [("RECOMMENDER", "KEY-DAYS", "MEMORY SLACK", "MEAN", "OOM/DAY",
                                       "OOM DAYS", "CPU SLACK", "THROTTLE/DAY", "THROTTLE DAYS", "UPDATES",
                                       "FIRST REC")]
    for rec in evaluation.recommenders:
        s = rec.summary
        overall.append((rec.name, str(s.days), _cell(s.memory_slack), _cell(s.memory_mean_slack),
                        _cell(s.oom_proxies_per_day),
                        _cell(s.oom_day_share), _cell(s.cpu_slack), _cell(s.throttle_proxies_per_day),
                        _cell(s.throttle_day_share), str(s.updates), _duration(s.mean_time_to_first_s)))
    lines = [f"recomputed every {_duration(evaluation.interval_s)}"
             f"{', closed loop (OOM proxies fed back as OOM kills)' if evaluation.closed_loop else ''}"]
    lines += _columns(overall)
    per_key: list[tuple[str, ...]] = [("RECOMMENDER", "CONTAINER", "DAYS", "MEMORY SLACK", "OOM", "OOM DAYS",
                                       "CPU SLACK", "THROTTLE", "THROTTLE DAYS", "UPDATES", "FIRST REC")]
    for rec in evaluation.recommenders:
        for k in rec.keys:
            per_key.append((rec.name, k.key, str(k.days), _cell(k.memory_slack), str(k.oom_proxies),
                            str(k.oom_days), _cell(k.cpu_slack), str(k.throttle_proxies),
                            str(k.throttle_days),
                            str(k.updates), _duration(k.time_to_first_s)))
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
        values.append(s.memory_target if memory else s.cpu_target)
    # Usage and targets set the scale; bounds (very wide on a short history) are clipped to the frame.
    top = 1.3 * max(_scale(v) for v in values)
    t0, t1 = first.times[0], first.times[-1]
    unit = "GiB" if memory else "cores"

    def scaled(items: Sequence[float | None]) -> list[float | None]:
        return [None if v is None else v / divisor for v in items]

    body = [_axes(f"{key}: {'memory' if memory else 'CPU'} ({unit}) — peak usage per interval vs. "
                  f"{'target and bounds' if memory else 'target'}", top / divisor, unit)]
    body.append(_polyline(first.times, scaled(peak), t0, t1, top / divisor, "#777", label="usage"))
    legend = [("usage (peak)", "#777", "")]
    for index, (name, s) in enumerate(series):
        colour = _COLOURS[index % len(_COLOURS)]
        target = s.memory_target if memory else s.cpu_target
        body.append(_polyline(s.times, scaled(target), t0, t1, top / divisor, colour, label=f"{name} target"))
        legend.append((f"{name} target", colour, ""))
        if memory:
            body.append(_polyline(s.times, scaled(s.memory_lower), t0, t1, top / divisor, colour, "2,3",
                                  label=f"{name} lower"))
            body.append(_polyline(s.times, scaled(s.memory_upper), t0, t1, top / divisor, colour, "6,3",
                                  label=f"{name} upper"))
    body.append(_legend(legend[:5]))
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
            f'viewBox="0 0 {_W} {_H}">{"".join(body)}</svg>')


def _tradeoff_chart(evaluation: Evaluation) -> str:
    points = [(rec.name, rec.summary.oom_proxies_per_day, rec.summary.memory_slack or 0.0)
              for rec in evaluation.recommenders]
    x_top = max((x for _, x, _ in points), default=1.0) * 1.2 or 1.0
    body = [_axes("memory relative slack (y, 0–1) vs. OOM proxies per key-day (x)", 1.0, ""),
            f'<text x="{_W - _PAD}" y="{_H - 4}" font-size="10" text-anchor="end">{x_top:.3g}</text>']
    for index, (name, x, y) in enumerate(points):
        cx = _PAD + x / x_top * (_W - 2 * _PAD)
        cy = _H - _PAD / 2 - y * (_H - _PAD)
        colour = _COLOURS[index % len(_COLOURS)]
        body.append(f'<circle class="point" data-label="{html.escape(name)}" cx="{cx:.1f}" cy="{cy:.1f}" '
                    f'r="5" fill="{colour}"/><text x="{cx + 8:.1f}" y="{cy + 4:.1f}" font-size="12">'
                    f'{html.escape(name)}</text>')
    return (f'<svg class="chart" id="tradeoff" xmlns="http://www.w3.org/2000/svg" width="{_W}" '
            f'height="{_H}" viewBox="0 0 {_W} {_H}">{"".join(body)}</svg>')


def render_html(evaluation: Evaluation, title: str = "vpa recommendation quality") -> str:
    """One self-contained page: summary table, trade-off plot, per-key plots; inline SVG only."""
    head = ("<th>recommender</th><th>key-days</th><th>memory slack</th><th>memory mean slack</th>"
            "<th>OOM proxies / day</th>"
            "<th>days with OOM proxy</th><th>CPU slack</th><th>throttling proxies / day</th>"
            "<th>days with throttling</th><th>updates</th><th>first recommendation</th>")
    rows = []
    for rec in evaluation.recommenders:
        s = rec.summary
        name = html.escape(rec.name)
        rows.append(f'<tr class="summary" data-recommender="{name}"><td>{name}'
                    f"</td><td>{s.days}</td><td>{_cell(s.memory_slack)}</td><td>{_cell(s.memory_mean_slack)}"
                    f"</td><td>{_cell(s.oom_proxies_per_day)}"
                    f"</td><td>{_cell(s.oom_day_share)}</td><td>{_cell(s.cpu_slack)}</td>"
                    f"<td>{_cell(s.throttle_proxies_per_day)}</td><td>{_cell(s.throttle_day_share)}</td>"
                    f"<td>{s.updates}</td><td>{_duration(s.mean_time_to_first_s)}</td></tr>")
    keys = sorted({key for rec in evaluation.recommenders for key in rec.plots})
    charts = "".join(f'<section class="key"><h3>{html.escape(key)}</h3>{_key_chart(evaluation, key, True)}'
                     f"{_key_chart(evaluation, key, False)}</section>" for key in keys)
    loop = " Closed loop: OOM proxies fed back as OOM kills." if evaluation.closed_loop else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:1.5em}}"
        "table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child{text-align:left}svg{display:block;margin:.5em 0}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>Recommendations recomputed every {_duration(evaluation.interval_s)} from past samples only; "
        "each sample scored against the recommendation in effect. Memory slack (Autopilot's relative "
        "slack): mean over key-days of (mean target − p95 usage) / mean target; mean slack: mean over "
        "key-days of the day's average (target − usage)⁺ / target. OOM proxy: a memory sample above the "
        f"memory target (the limit); throttling proxy: a CPU sample above the CPU target.{loop}</p>"
        f'<table id="summary"><tr>{head}</tr>{"".join(rows)}</table>'
        f"<h2>Slack / OOM trade-off</h2>{_tradeoff_chart(evaluation)}"
        f"<h2>Usage and recommendations</h2>{charts}</body></html>\n"
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
