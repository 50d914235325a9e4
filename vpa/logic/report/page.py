"""`vpa report --output=html`: one page with no external URL that fits its window. Styles, the inline-SVG
charts (per namespace, requested against recommended; per workload, each pod's requests against the target
and bounds over the time its pods and events cover) and a small script (summary line, sorting, filtering by
namespace and savings, hiding columns, reading the report data embedded as JSON) are all in the page.
Amounts show as kubectl prints them (`25m`, `256Mi`).

Must not: do I/O, read the clock (the caller passes `generated_at`) or compute what the report logic
owns (rows, sums); nor may the page load anything from outside itself.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Final

from vpa.logic.report.formatting import (
    action_text,
    conditions_text,
    cpu,
    iso_time,
    memory,
    report_document,
    signed,
)
from vpa.logic.report.rows import ContainerRow, NamespaceTotals, VpaReport
from vpa.model.resources import Resources

# The page fits its window: the tables take the full width and wrap their cells (long names and conditions
# break anywhere) and charts scale down with their viewBox; columns can be hidden.
_STYLE: Final = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1rem;color:#222;max-width:100%}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
.controls{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center;margin:.5rem 0;font-size:.85rem}
.controls fieldset{border:1px solid #ccc;padding:.2rem .6rem;display:flex;flex-wrap:wrap;gap:.2rem .8rem}
table{border-collapse:collapse;font-size:.8rem;width:100%}
th,td{border:1px solid #ccc;padding:.2rem .35rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f0f0;cursor:pointer;user-select:none}
th[data-order=asc]::after{content:" \\25B2"}th[data-order=desc]::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.pos{color:#1a7f37}.neg{color:#b42318}.problem{color:#b42318}
.hidden{display:none}
svg{max-width:100%;height:auto}
svg text{font-size:11px;font-family:system-ui,sans-serif}
svg.chart{display:inline-block;margin:1rem 2rem 0 0;vertical-align:top}
.requested{fill:#8fb3de}.recommended{fill:#2f6db3}
.workload{display:inline-block;vertical-align:top;margin:0 1rem 1rem 0;max-width:100%}
.workload h3{font-size:.9rem;margin:.5rem 0 .2rem}
.band{fill:#2f6db3;fill-opacity:.15}.target{stroke:#2f6db3;stroke-width:2}
.pod{stroke:#e07b00;stroke-width:2}.mark{stroke:#555;stroke-dasharray:3 2}.axis{stroke:#999}
"""

# Sorting, filtering (namespace, savings), column hiding and the summary line, from the page alone.
_SCRIPT: Final = """
(function(){
  var data = JSON.parse(document.getElementById('report-data').textContent);
  function plural(n, word){ return n + ' ' + word + (n === 1 ? '' : 's'); }
  var containers = 0;
  data.vpas.forEach(function(v){ containers += v.containers.length; });
  document.getElementById('summary').textContent = plural(data.vpas.length, 'VPA') + ', ' +
    plural(containers, 'container') + ', ' + plural(data.namespaces.length, 'namespace');
  document.querySelectorAll('table.sortable th').forEach(function(th){
    var index = th.cellIndex;  // within its own table
    th.addEventListener('click', function(){
      var body = th.closest('table').tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var asc = th.dataset.order !== 'asc';
      th.closest('tr').querySelectorAll('th').forEach(function(o){ delete o.dataset.order; });
      th.dataset.order = asc ? 'asc' : 'desc';
      rows.sort(function(a, b){
        var x = a.cells[index].dataset.value, y = b.cells[index].dataset.value;
        if (x === undefined) x = a.cells[index].textContent;
        if (y === undefined) y = b.cells[index].textContent;
        var nx = parseFloat(x), ny = parseFloat(y), xn = !isNaN(nx), yn = !isNaN(ny);
        // Numbers by value; a row without one (no recommendation, "-") before every number.
        var c = (xn && yn) ? nx - ny : (xn !== yn ? (xn ? 1 : -1) : String(x).localeCompare(String(y)));
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
  var namespace = document.getElementById('filter-namespace');
  var savings = document.getElementById('filter-savings');
  function filter(){
    var ns = namespace.value, want = savings.value;
    document.querySelectorAll('tr.vpa-row, tr.namespace-row, div.workload').forEach(function(el){
      var show = !ns || el.dataset.namespace === ns;
      if (show && want && el.dataset.cpuDiff !== undefined) {
        var cpu = parseFloat(el.dataset.cpuDiff || '0'), mem = parseFloat(el.dataset.memoryDiff || '0');
        if (want === 'over') show = cpu > 0 || mem > 0;
        if (want === 'under') show = cpu < 0 || mem < 0;
      }
      el.classList.toggle('hidden', !show);
    });
  }
  namespace.addEventListener('change', filter);
  savings.addEventListener('change', filter);
  document.querySelectorAll('input.column-toggle').forEach(function(box){
    box.addEventListener('change', function(){
      document.querySelectorAll('#vpas .col-' + box.value).forEach(function(cell){
        cell.classList.toggle('hidden', !box.checked);
      });
    });
  });
})();
"""

# The VPA table's columns: (id, heading, hideable group). Groups can be hidden from the page.
_COLUMNS: Final = (
    ("namespace", "Namespace", ""), ("vpa", "VPA", ""), ("workload", "Workload", "workload"),
    ("mode", "Mode", "mode"), ("container", "Container", ""), ("pods", "Pods", "pods"),
    ("cpu-request", "CPU request", ""), ("cpu-limit", "CPU limit", "limits"),
    ("cpu-target", "CPU target", ""), ("cpu-bounds", "CPU lower–upper", "bounds"),
    ("memory-request", "Memory request", ""), ("memory-limit", "Memory limit", "limits"),
    ("memory-target", "Memory target", ""), ("memory-bounds", "Memory lower–upper", "bounds"),
    ("cpu-diff", "CPU diff", ""), ("memory-diff", "Memory diff", ""),
    ("status", "Conditions", "conditions"), ("action", "Last action", "action"),
)
_GROUPS: Final = (("workload", "workload"), ("mode", "mode"), ("pods", "pods"), ("limits", "limits"),
                  ("bounds", "bounds"), ("conditions", "conditions"), ("action", "last action"))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _td(column: str, text: str, value: int | None = None, classes: str = "") -> str:
    group = next(g for c, _, g in _COLUMNS if c == column)
    attrs = f' data-value="{value}"' if value is not None else ""
    names = " ".join(part for part in (classes, f"col-{group}" if group else "") if part)
    if names:
        attrs += f' class="{names}"'
    return f"<td{attrs}>{_e(text)}</td>"


def _diff_td(column: str, text: str, value: int | None) -> str:
    sign = "" if value is None or value == 0 else ("pos" if value > 0 else "neg")
    return _td(column, signed(text) or "-", value, f"num {sign}".strip())


def _range(lower: str, upper: str) -> str:
    return f"{lower}–{upper}" if lower or upper else ""


def _bar_chart(chart_id: str, title: str, items: Sequence[tuple[str, int, int]], fmt: str) -> str:
    """Horizontal bars, two per item: requested (light) and recommended (dark), scaled to the largest."""
    if not items:
        return ""
    label_w, bar_w, row_h, top = 180, 360, 34, 40
    largest = max(max(a, b) for _, a, b in items) or 1
    height = row_h * len(items) + top + 4
    width = label_w + bar_w + 120
    parts = [f'<svg id="{chart_id}" class="chart" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" role="img" aria-label="{_e(title)}">',
             f'<text x="0" y="12">{_e(title)}</text>',
             '<rect class="requested" x="0" y="20" width="10" height="10"></rect>'
             '<text x="14" y="29">requested</text>'
             '<rect class="recommended" x="90" y="20" width="10" height="10"></rect>'
             '<text x="104" y="29">recommended (target)</text>']
    for index, (label, requested, recommended) in enumerate(items):
        y = top + index * row_h
        parts.append(f'<text x="0" y="{y + 18}">{_e(label)}</text>')
        for offset, (kind, amount) in enumerate((("requested", requested), ("recommended", recommended))):
            bar = max(0, round(bar_w * amount / largest))
            text = cpu(amount) if fmt == "cpu" else memory(amount)
            parts.append(
                f'<rect class="bar {kind}" data-chart="{chart_id}" data-label="{_e(label)}" '
                f'data-value="{amount}" x="{label_w}" y="{y + offset * 14}" width="{bar}" height="12">'
                f'<title>{kind}: '
                f'{_e(text)}</title></rect>'
                f'<text x="{label_w + bar + 4}" y="{y + offset * 14 + 10}">{_e(text)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _time_chart(report: VpaReport, row: ContainerRow, resource: str, generated_at: float) -> str:
    """One container's requests, pod by pod since each pod started, against the recommendation's target
    and bounds, with every updater action of the VPA marked on the time axis, over the time the pods and
    events cover (up to `generated_at`)."""
    def amount(resources: Resources | None) -> int | None:
        return None if resources is None else resources.get(resource)

    pods = [(pod.name, pod.since, amount(dict(pod.requests).get(row.container))) for pod in report.pods_seen
            if row.container in dict(pod.requests)]
    times = [since for _, since, _ in pods if since > 0] + [mark.timestamp for mark in report.actions]
    start = min(times, default=generated_at - 3600)
    end = max(generated_at, *times) if times else generated_at
    if end - start < 60:
        start = end - 60
    target, lower, upper = amount(row.target), amount(row.lower_bound), amount(row.upper_bound)
    values = [v for v in (target, lower, upper, *(a for _, _, a in pods)) if v is not None]
    if not values:
        return ""
    top_value = max(values) * 1.15 or 1
    fmt = cpu if resource == "cpu" else memory
    width, height, left, right, top, bottom = 420, 160, 62, 10, 18, 28
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(t: float) -> float:
        return round(left + plot_w * (t - start) / (end - start), 1)

    def y(v: int) -> float:
        return round(top + plot_h * (1 - v / top_value), 1)

    name = "CPU" if resource == "cpu" else "Memory"
    parts = [f'<svg class="timeline" data-resource="{resource}" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" role="img" aria-label="{name} of {_e(row.container)}">',
             f'<text x="{left}" y="12">{name}: requests per pod (orange), target (line) and bounds '
             "(band)</text>",
             f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
             f'<text x="{left}" y="{height - 8}">{_e(iso_time(start))}</text>',
             f'<text x="{left + plot_w}" y="{height - 8}" text-anchor="end">{_e(iso_time(end))}</text>',
             f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{_e(fmt(round(top_value)))}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>']
    if lower is not None and upper is not None:
        parts.append(f'<rect class="band" x="{left}" y="{y(upper)}" width="{plot_w}" '
                     f'height="{round(y(lower) - y(upper), 1)}"><title>bounds {_e(fmt(lower))}–'
                     f'{_e(fmt(upper))}</title></rect>')
    if target is not None:
        parts.append(f'<line class="target" x1="{left}" y1="{y(target)}" x2="{left + plot_w}" '
                     f'y2="{y(target)}"><title>target {_e(fmt(target))}</title></line>')
    for pod_name, since, value in pods:
        if value is None:
            continue
        parts.append(f'<line class="pod" data-pod="{_e(pod_name)}" x1="{x(max(since, start))}" '
                     f'y1="{y(value)}" x2="{left + plot_w}" y2="{y(value)}"><title>{_e(pod_name)}: '
                     f'{_e(fmt(value))} since {_e(iso_time(since))}</title></line>')
    for mark in report.actions:
        parts.append(f'<line class="mark" x1="{x(mark.timestamp)}" y1="{top}" x2="{x(mark.timestamp)}" '
                     f'y2="{top + plot_h}"><title>{_e(mark.reason)} {_e(mark.object_name)} at '
                     f'{_e(iso_time(mark.timestamp))}</title></line>')
    parts.append("</svg>")
    return "".join(parts)


def _workload_charts(reports: Sequence[VpaReport], generated_at: float) -> str:
    out = []
    for report in reports:
        for row in report.containers:
            charts = "".join(_time_chart(report, row, resource, generated_at)
                             for resource in ("cpu", "memory"))
            if not charts:
                continue
            out.append(
                f'<div class="workload" data-namespace="{_e(report.namespace)}" data-vpa="{_e(report.name)}" '
                f'data-cpu-diff="{row.cpu_diff_millicores or 0}" '
                f'data-memory-diff="{row.memory_diff_bytes or 0}">'
                f"<h3>{_e(report.namespace)}/{_e(report.name)} ({_e(report.workload or '-')}), container "
                f"{_e(row.container)}</h3>{charts}</div>")
    return "".join(out) or "<p>No pods or recommendations to chart.</p>"


def _status(report: VpaReport) -> str:
    conditions = conditions_text(report)
    if report.target_problem:
        return f"{conditions}; {report.target_problem}" if conditions else report.target_problem
    return conditions


def _vpa_table(reports: Sequence[VpaReport]) -> str:
    rows = []
    for report in reports:
        for row in report.containers or (None,):
            target = (row.target if row else None) or Resources()
            lower = (row.lower_bound if row else None) or Resources()
            upper = (row.upper_bound if row else None) or Resources()
            req = row.requests if row else Resources()
            lim = row.limits if row else Resources()
            cpu_diff = row.cpu_diff_millicores if row else None
            memory_diff = row.memory_diff_bytes if row else None
            cells = [
                _td("namespace", report.namespace), _td("vpa", report.name),
                _td("workload", report.workload or "-"),
                _td("mode", report.mode), _td("container", row.container if row else "-"),
                _td("pods", str(row.pods if row else 0), row.pods if row else 0, "num"),
                _td("cpu-request", cpu(req.cpu_millicores), req.cpu_millicores, "num"),
                _td("cpu-limit", cpu(lim.cpu_millicores), lim.cpu_millicores, "num"),
                _td("cpu-target", cpu(target.cpu_millicores), target.cpu_millicores, "num"),
                _td("cpu-bounds", _range(cpu(lower.cpu_millicores), cpu(upper.cpu_millicores)),
                    lower.cpu_millicores, "num"),
                _td("memory-request", memory(req.memory_bytes), req.memory_bytes, "num"),
                _td("memory-limit", memory(lim.memory_bytes), lim.memory_bytes, "num"),
                _td("memory-target", memory(target.memory_bytes), target.memory_bytes, "num"),
                _td("memory-bounds", _range(memory(lower.memory_bytes), memory(upper.memory_bytes)),
                    lower.memory_bytes, "num"),
                _diff_td("cpu-diff", cpu(cpu_diff), cpu_diff),
                _diff_td("memory-diff", memory(memory_diff), memory_diff),
                _td("status", _status(report), None, "problem" if report.target_problem else ""),
                _td("action", action_text(report)),
            ]
            rows.append(
                f'<tr class="vpa-row" data-namespace="{_e(report.namespace)}" data-vpa="{_e(report.name)}" '
                f'data-container="{_e(row.container if row else "")}" data-cpu-diff="{cpu_diff or 0}" '
                f'data-memory-diff="{memory_diff or 0}">' + "".join(cells) + "</tr>"
            )
    head = "".join(
        f'<th data-column="{column}"' + (f' class="col-{group}"' if group else "") + f">{_e(title)}</th>"
        for column, title, group in _COLUMNS)
    return (f'<table id="vpas" class="sortable"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _namespace_table(totals: Sequence[NamespaceTotals]) -> str:
    head = ("Namespace", "VPAs", "Pods", "CPU requested", "CPU recommended", "CPU savings",
            "Memory requested", "Memory recommended", "Memory savings")

    def td(text: str, value: int | None = None, classes: str = "") -> str:
        attrs = f' data-value="{value}"' if value is not None else ""
        attrs += f' class="{classes}"' if classes else ""
        return f"<td{attrs}>{_e(text)}</td>"

    def diff(text: str, value: int) -> str:
        sign = "" if value == 0 else ("pos" if value > 0 else "neg")
        return td(signed(text) or "-", value, f"num {sign}".strip())

    rows = [
        f'<tr class="namespace-row" data-namespace="{_e(t.namespace)}" '
        f'data-cpu-diff="{t.cpu_diff_millicores}" data-memory-diff="{t.memory_diff_bytes}">' + "".join([
            td(t.namespace), td(str(t.vpas), t.vpas, "num"), td(str(t.pods), t.pods, "num"),
            td(cpu(t.cpu_requests_millicores), t.cpu_requests_millicores, "num"),
            td(cpu(t.cpu_target_millicores), t.cpu_target_millicores, "num"),
            diff(cpu(t.cpu_diff_millicores), t.cpu_diff_millicores),
            td(memory(t.memory_requests_bytes), t.memory_requests_bytes, "num"),
            td(memory(t.memory_target_bytes), t.memory_target_bytes, "num"),
            diff(memory(t.memory_diff_bytes), t.memory_diff_bytes),
        ]) + "</tr>"
        for t in totals
    ]
    return ('<table id="namespaces" class="sortable"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _controls(reports: Sequence[VpaReport]) -> str:
    namespaces = sorted({report.namespace for report in reports})
    options = "".join(f'<option value="{_e(ns)}">{_e(ns)}</option>' for ns in namespaces)
    toggles = "".join(
        f'<label><input type="checkbox" class="column-toggle" value="{group}" checked> {_e(label)}</label>'
        for group, label in _GROUPS)
    return (
        '<div class="controls">'
        '<label>Namespace <select id="filter-namespace"><option value="">all</option>'
        f"{options}</select></label>"
        '<label>Savings <select id="filter-savings"><option value="">all</option>'
        '<option value="over">requests above the target (can give back)</option>'
        '<option value="under">requests below the target (missing)</option></select></label>'
        f"<fieldset><legend>Columns</legend>{toggles}</fieldset>"
        "</div>"
    )


def render_html(reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float) -> str:
    """A page that works offline as one file: no external URL, charts as inline SVG, data embedded as JSON,
    sorting, filtering and column hiding by its own script."""
    data = json.dumps(report_document(reports, totals, generated_at), separators=(",", ":"))
    # Inside <script>, `</` must not appear literally; `\\u003c` is the same JSON string.
    data = data.replace("<", "\\u003c")
    cpu_items = [(t.namespace, t.cpu_requests_millicores, t.cpu_target_millicores) for t in totals]
    cpu_chart = _bar_chart("chart-cpu", "CPU requested vs recommended, per namespace", cpu_items, "cpu")
    memory_chart = _bar_chart("chart-memory", "Memory requested vs recommended, per namespace",
                              [(t.namespace, t.memory_requests_bytes, t.memory_target_bytes) for t in totals],
                              "memory")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>VPA report {_e(iso_time(generated_at))}</title><style>{_STYLE}</style></head><body>"
        f"<h1>VPA report</h1><p>Generated {_e(iso_time(generated_at))}. "
        '<span id="summary"></span></p>'
        f"{_controls(reports)}"
        "<h2>Savings per namespace</h2>"
        "<p>Requests minus the recommendation's target, summed over the pods: positive is what could be "
        "given back, negative is what is missing.</p>"
        f"{_namespace_table(totals)}{cpu_chart}{memory_chart}"
        f"<h2>VerticalPodAutoscalers</h2>{_vpa_table(reports)}"
        "<h2>Requests against the recommendation, per workload</h2>"
        "<p>Each pod's current request since the pod started (the API keeps no older requests), the "
        "recommendation's target and bounds as they are now, and every resize or eviction the events "
        "still hold (dashed), over the time they cover.</p>"
        f"{_workload_charts(reports, generated_at)}"
        f'<script type="application/json" id="report-data">{data}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
