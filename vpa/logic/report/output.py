"""`vpa report`'s output formats: a readable table, JSON, CSV, and a self-contained HTML page with charts.

Owns: turning `VpaReport`s and `NamespaceTotals` (from `vpa.logic.report.rows`) into text. JSON carries
exact integers (millicores, bytes) next to Kubernetes quantity strings; CSV carries CPU in cores and
memory in bytes, one line per container, for spreadsheets; the table and the HTML page show CPU in cores
and memory in Mi/Gi. The HTML page has no external URL: styles, the inline-SVG bar charts (CPU and memory
requested against recommended, per namespace) and a small script (summary line, sortable
tables, reading the report data embedded as JSON) are all in the page.

Must not: do I/O or read the clock (the caller passes `generated_at`), or compute anything the report
logic owns (rows, sums).
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from vpa.logic.report.rows import ContainerRow, NamespaceTotals, VpaReport
from vpa.model.resources import Resources

OUTPUTS: Final = ("table", "json", "csv", "html")
_MI: Final = 2**20
_GI: Final = 2**30


# --- amounts ----------------------------------------------------------------------------------------------


def cores(millicores: int | None) -> str:
    """Millicores as cores for people: 250 → `0.25`, 2000 → `2`, -1500 → `-1.5`; None → ``."""
    if millicores is None:
        return ""
    return f"{millicores / 1000:.3f}".rstrip("0").rstrip(".")


def memory(value: int | None) -> str:
    """Bytes for people, to one decimal: 268435456 → `256Mi`, 1610612736 → `1.5Gi`, small values in
    bytes; None → ``. Negative amounts keep their sign."""
    if value is None:
        return ""
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if magnitude >= _GI:
        text = f"{magnitude / _GI:.1f}".removesuffix(".0") + "Gi"
    elif magnitude >= _MI:
        text = f"{magnitude / _MI:.1f}".removesuffix(".0") + "Mi"
    else:
        text = str(magnitude)
    return sign + text


def _iso(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(report: VpaReport) -> str:
    return ",".join(f"{c.type}={c.status}" for c in report.conditions)


def _action_text(report: VpaReport) -> str:
    action = report.last_action
    if action is None:
        return ""
    where = f"{action.object_kind}/{action.object_name}"
    return f"{action.reason} {where} at {_iso(action.timestamp)}: {action.message}"


# --- JSON ---------------------------------------------------------------------------------------------------


def _resources_json(resources: Resources | None) -> dict[str, Any] | None:
    if resources is None:
        return None
    return {
        "cpuMillicores": resources.cpu_millicores,
        "memoryBytes": resources.memory_bytes,
        "quantities": resources.to_resource_list(),
    }


def _row_json(row: ContainerRow) -> dict[str, Any]:
    return {
        "container": row.container,
        "pods": row.pods,
        "requests": _resources_json(row.requests),
        "limits": _resources_json(row.limits),
        "target": _resources_json(row.target),
        "lowerBound": _resources_json(row.lower_bound),
        "upperBound": _resources_json(row.upper_bound),
        "uncappedTarget": _resources_json(row.uncapped_target),
        "cpuDiffMillicores": row.cpu_diff_millicores,
        "memoryDiffBytes": row.memory_diff_bytes,
    }


def _report_json(report: VpaReport) -> dict[str, Any]:
    action = report.last_action
    return {
        "namespace": report.namespace,
        "name": report.name,
        "workload": report.workload,
        "mode": report.mode,
        "targetProblem": report.target_problem,
        "containers": [_row_json(row) for row in report.containers],
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
             "lastTransitionTime": _iso(c.last_transition_time) or None}
            for c in report.conditions
        ],
        "lastAction": None if action is None else {
            "reason": action.reason, "message": action.message, "kind": action.object_kind,
            "name": action.object_name, "time": _iso(action.timestamp),
        },
    }


def _totals_json(totals: NamespaceTotals) -> dict[str, Any]:
    return {
        "namespace": totals.namespace,
        "vpas": totals.vpas,
        "pods": totals.pods,
        "cpuRequestsMillicores": totals.cpu_requests_millicores,
        "cpuTargetMillicores": totals.cpu_target_millicores,
        "cpuDiffMillicores": totals.cpu_diff_millicores,
        "memoryRequestsBytes": totals.memory_requests_bytes,
        "memoryTargetBytes": totals.memory_target_bytes,
        "memoryDiffBytes": totals.memory_diff_bytes,
    }


def report_document(
    reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float
) -> dict[str, Any]:
    """The JSON document (also embedded in the HTML page)."""
    return {
        "generatedAt": _iso(generated_at),
        "vpas": [_report_json(report) for report in reports],
        "namespaces": [_totals_json(t) for t in totals],
    }


def render_json(reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float) -> str:
    return json.dumps(report_document(reports, totals, generated_at), indent=2) + "\n"


# --- CSV ----------------------------------------------------------------------------------------------------

CSV_COLUMNS: Final = (
    "namespace", "vpa", "workload", "mode", "container", "pods",
    "cpu_request_cores", "cpu_limit_cores", "memory_request_bytes", "memory_limit_bytes",
    "cpu_target_cores", "cpu_lower_bound_cores", "cpu_upper_bound_cores", "cpu_uncapped_target_cores",
    "memory_target_bytes", "memory_lower_bound_bytes", "memory_upper_bound_bytes",
    "memory_uncapped_target_bytes", "cpu_diff_cores", "memory_diff_bytes", "conditions",
    "last_action", "last_action_time", "last_action_message", "target_problem",
)


def _csv_cores(millicores: int | None) -> str:
    return "" if millicores is None else cores(millicores)


def _csv_bytes(value: int | None) -> str:
    return "" if value is None else str(value)


def _pick(resources: Resources | None, resource: str) -> int | None:
    return None if resources is None else resources.get(resource)


def render_csv(reports: Sequence[VpaReport]) -> str:
    """One line per container (a VPA without any container gets one line with the container empty)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for report in reports:
        action = report.last_action
        tail = [
            _conditions(report),
            "" if action is None else action.reason,
            "" if action is None else _iso(action.timestamp),
            "" if action is None else action.message,
            report.target_problem,
        ]
        head = [report.namespace, report.name, report.workload, report.mode]
        if not report.containers:
            writer.writerow([*head, "", "0", *[""] * 14, *tail])
        for row in report.containers:
            bounds = (row.target, row.lower_bound, row.upper_bound, row.uncapped_target)
            writer.writerow([
                *head, row.container, str(row.pods),
                _csv_cores(row.requests.cpu_millicores), _csv_cores(row.limits.cpu_millicores),
                _csv_bytes(row.requests.memory_bytes), _csv_bytes(row.limits.memory_bytes),
                *[_csv_cores(_pick(b, "cpu")) for b in bounds],
                *[_csv_bytes(_pick(b, "memory")) for b in bounds],
                _csv_cores(row.cpu_diff_millicores), _csv_bytes(row.memory_diff_bytes),
                *tail,
            ])
    return out.getvalue()


# --- table --------------------------------------------------------------------------------------------------

_TABLE_HEAD: Final = ("NAMESPACE", "VPA", "WORKLOAD", "MODE", "CONTAINER", "PODS", "CPU REQ/LIM",
                      "CPU TARGET [LOWER-UPPER]", "MEM REQ/LIM", "MEM TARGET [LOWER-UPPER]",
                      "CPU DIFF", "MEM DIFF")


def _pair(a: str, b: str) -> str:
    return f"{a or '-'}/{b or '-'}"


def _bounds(target: str, lower: str, upper: str) -> str:
    if not target:
        return "-"
    return f"{target} [{lower or '-'}-{upper or '-'}]"


def _signed(text: str) -> str:
    return text if not text or text.startswith("-") or text == "0" else "+" + text


def _align(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def render_table(
    reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float
) -> str:
    """Containers, then the per-namespace savings, then each VPA's conditions and last action."""
    rows: list[tuple[str, ...]] = [_TABLE_HEAD]
    for report in reports:
        for row in report.containers or ():
            target = row.target or Resources()
            lower = row.lower_bound or Resources()
            upper = row.upper_bound or Resources()
            rows.append((
                report.namespace, report.name, report.workload or "-", report.mode, row.container,
                str(row.pods),
                _pair(cores(row.requests.cpu_millicores), cores(row.limits.cpu_millicores)),
                _bounds(cores(target.cpu_millicores), cores(lower.cpu_millicores),
                        cores(upper.cpu_millicores)),
                _pair(memory(row.requests.memory_bytes), memory(row.limits.memory_bytes)),
                _bounds(memory(target.memory_bytes), memory(lower.memory_bytes),
                        memory(upper.memory_bytes)),
                _signed(cores(row.cpu_diff_millicores)) or "-",
                _signed(memory(row.memory_diff_bytes)) or "-",
            ))
        if not report.containers:
            rows.append((report.namespace, report.name, report.workload or "-", report.mode, "-", "0",
                         *["-"] * 6))
    lines = [f"VPA report, {_iso(generated_at)}", ""]
    lines += _align(rows) if len(rows) > 1 else ["No VerticalPodAutoscalers found."]
    if totals:
        lines += ["", "Savings per namespace (requests minus recommendation, summed over pods):"]
        lines += _align([
            ("NAMESPACE", "VPAS", "PODS", "CPU REQUESTED", "CPU RECOMMENDED", "CPU SAVINGS",
             "MEM REQUESTED", "MEM RECOMMENDED", "MEM SAVINGS"),
            *[(t.namespace, str(t.vpas), str(t.pods), cores(t.cpu_requests_millicores),
               cores(t.cpu_target_millicores), _signed(cores(t.cpu_diff_millicores)),
               memory(t.memory_requests_bytes), memory(t.memory_target_bytes),
               _signed(memory(t.memory_diff_bytes))) for t in totals],
        ])
    details = [r for r in reports if r.conditions or r.last_action or r.target_problem]
    if details:
        lines += ["", "Conditions and last action:"]
        for report in details:
            lines.append(f"  {report.namespace}/{report.name}: {_conditions(report) or 'no conditions'}")
            if report.target_problem:
                lines.append(f"    target: {report.target_problem}")
            if report.last_action is not None:
                lines.append(f"    last action: {_action_text(report)}")
    return "\n".join(lines) + "\n"


# --- HTML ---------------------------------------------------------------------------------------------------

_STYLE: Final = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0;cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.pos{color:#1a7f37}.neg{color:#b42318}
svg text{font-size:11px;font-family:system-ui,sans-serif}
svg.chart{display:inline-block;margin:1rem 2rem 0 0;vertical-align:top}
.requested{fill:#8fb3de}.recommended{fill:#2f6db3}.saving{fill:#1a7f37}.deficit{fill:#b42318}
"""

# Sortable tables and the summary line, from the report data embedded in the page.
_SCRIPT: Final = """
(function(){
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var containers = 0;
  data.vpas.forEach(function(v){ containers += v.containers.length; });
  document.getElementById('summary').textContent =
    data.vpas.length + ' VPAs, ' + containers + ' containers, ' + data.namespaces.length + ' namespaces';
  document.querySelectorAll('table.sortable th').forEach(function(th, index){
    th.addEventListener('click', function(){
      var body = th.closest('table').tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var asc = th.dataset.order !== 'asc';
      th.dataset.order = asc ? 'asc' : 'desc';
      rows.sort(function(a, b){
        var x = a.cells[index].dataset.value || a.cells[index].textContent;
        var y = b.cells[index].dataset.value || b.cells[index].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _td(text: str, value: int | None = None, classes: str = "") -> str:
    attrs = f' data-value="{value}"' if value is not None else ""
    if classes:
        attrs += f' class="{classes}"'
    return f"<td{attrs}>{_e(text)}</td>"


def _diff_td(text: str, value: int | None) -> str:
    sign = "" if value is None or value == 0 else ("pos" if value > 0 else "neg")
    return _td(_signed(text) or "-", value, f"num {sign}".strip())


def _bar_chart(chart_id: str, title: str, items: Sequence[tuple[str, int, int]], fmt: str) -> str:
    """Horizontal bars, two per item: requested (light) and recommended (dark), scaled to the largest."""
    if not items:
        return ""
    label_w, bar_w, row_h, top = 180, 360, 34, 40
    largest = max(max(a, b) for _, a, b in items) or 1
    height = row_h * len(items) + top + 4
    parts = [f'<svg id="{chart_id}" class="chart" '
             f'width="{label_w + bar_w + 120}" height="{height}" role="img" aria-label="{_e(title)}">',
             f'<text x="0" y="12">{_e(title)}</text>',
             '<rect class="requested" x="0" y="20" width="10" height="10"></rect>'
             '<text x="14" y="29">requested</text>'
             '<rect class="recommended" x="90" y="20" width="10" height="10"></rect>'
             '<text x="104" y="29">recommended (target)</text>']
    for index, (label, requested, recommended) in enumerate(items):
        y = top + index * row_h
        parts.append(f'<text x="0" y="{y + 18}">{_e(label)}</text>')
        for offset, (kind, amount) in enumerate((("requested", requested), ("recommended", recommended))):
            width = max(0, round(bar_w * amount / largest))
            text = cores(amount) if fmt == "cpu" else memory(amount)
            parts.append(
                f'<rect class="bar {kind}" data-chart="{chart_id}" data-label="{_e(label)}" '
                f'data-value="{amount}" x="{label_w}" y="{y + offset * 14}" width="{width}" height="12">'
                f'<title>{kind}: '
                f'{_e(text)}</title></rect>'
                f'<text x="{label_w + width + 4}" y="{y + offset * 14 + 10}">{_e(text)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _vpa_table(reports: Sequence[VpaReport]) -> str:
    head = ("Namespace", "VPA", "Workload", "Mode", "Container", "Pods", "CPU request", "CPU limit",
            "CPU target", "CPU lower", "CPU upper", "Memory request", "Memory limit", "Memory target",
            "Memory lower", "Memory upper", "CPU diff", "Memory diff", "Conditions", "Last action")
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
                _td(report.namespace), _td(report.name), _td(report.workload or report.target_problem),
                _td(report.mode), _td(row.container if row else "-"), _td(str(row.pods if row else 0)),
                _td(cores(req.cpu_millicores), req.cpu_millicores, "num"),
                _td(cores(lim.cpu_millicores), lim.cpu_millicores, "num"),
                _td(cores(target.cpu_millicores), target.cpu_millicores, "num"),
                _td(cores(lower.cpu_millicores), lower.cpu_millicores, "num"),
                _td(cores(upper.cpu_millicores), upper.cpu_millicores, "num"),
                _td(memory(req.memory_bytes), req.memory_bytes, "num"),
                _td(memory(lim.memory_bytes), lim.memory_bytes, "num"),
                _td(memory(target.memory_bytes), target.memory_bytes, "num"),
                _td(memory(lower.memory_bytes), lower.memory_bytes, "num"),
                _td(memory(upper.memory_bytes), upper.memory_bytes, "num"),
                _diff_td(cores(cpu_diff), cpu_diff),
                _diff_td(memory(memory_diff), memory_diff),
                _td(_conditions(report)), _td(_action_text(report)),
            ]
            rows.append(
                f'<tr class="vpa-row" data-namespace="{_e(report.namespace)}" data-vpa="{_e(report.name)}" '
                f'data-container="{_e(row.container if row else "")}">' + "".join(cells) + "</tr>"
            )
    return ('<table id="vpas" class="sortable"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _namespace_table(totals: Sequence[NamespaceTotals]) -> str:
    head = ("Namespace", "VPAs", "Pods", "CPU requested", "CPU recommended", "CPU savings",
            "Memory requested", "Memory recommended", "Memory savings")
    rows = [
        f'<tr class="namespace-row" data-namespace="{_e(t.namespace)}">' + "".join([
            _td(t.namespace), _td(str(t.vpas), t.vpas, "num"), _td(str(t.pods), t.pods, "num"),
            _td(cores(t.cpu_requests_millicores), t.cpu_requests_millicores, "num"),
            _td(cores(t.cpu_target_millicores), t.cpu_target_millicores, "num"),
            _diff_td(cores(t.cpu_diff_millicores), t.cpu_diff_millicores),
            _td(memory(t.memory_requests_bytes), t.memory_requests_bytes, "num"),
            _td(memory(t.memory_target_bytes), t.memory_target_bytes, "num"),
            _diff_td(memory(t.memory_diff_bytes), t.memory_diff_bytes),
        ]) + "</tr>"
        for t in totals
    ]
    return ('<table id="namespaces" class="sortable"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def render_html(reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float) -> str:
    """A page that works offline: no external URL, charts as inline SVG, data embedded as JSON."""
    data = json.dumps(report_document(reports, totals, generated_at), separators=(",", ":"))
    # Inside <script>, `</` must not appear literally; `\u003c` is the same JSON string.
    data = data.replace("<", "\\u003c")
    cpu_items = [(t.namespace, t.cpu_requests_millicores, t.cpu_target_millicores) for t in totals]
    cpu_chart = _bar_chart("chart-cpu", "CPU requested vs recommended (cores), per namespace", cpu_items,
                           "cpu")
    memory_chart = _bar_chart("chart-memory", "Memory requested vs recommended, per namespace",
                              [(t.namespace, t.memory_requests_bytes, t.memory_target_bytes) for t in totals],
                              "memory")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>VPA report {_e(_iso(generated_at))}</title><style>{_STYLE}</style></head><body>"
        f"<h1>VPA report</h1><p>Generated {_e(_iso(generated_at))}. "
        '<span id="summary"></span></p>'
        "<h2>Savings per namespace</h2>"
        "<p>Requests minus the recommendation's target, summed over the pods: positive is what could be "
        "given back, negative is what is missing.</p>"
        f"{_namespace_table(totals)}{cpu_chart}{memory_chart}"
        f"<h2>VerticalPodAutoscalers</h2>{_vpa_table(reports)}"
        f'<script type="application/json" id="report-data">{data}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def render(
    output: str, reports: Sequence[VpaReport], totals: Sequence[NamespaceTotals], generated_at: float
) -> str:
    """The report in `output` (one of `OUTPUTS`)."""
    if output == "json":
        return render_json(reports, totals, generated_at)
    if output == "csv":
        return render_csv(reports)
    if output == "html":
        return render_html(reports, totals, generated_at)
    if output == "table":
        return render_table(reports, totals, generated_at)
    raise ValueError(f"unknown output {output!r} (valid: {', '.join(OUTPUTS)})")
