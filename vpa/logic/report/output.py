"""`vpa report`'s output formats: JSON (exact integers next to Kubernetes quantity strings), CSV (CPU in
cores and memory in bytes, one line per container, for spreadsheets) and the table (quantities as kubectl
prints them), each rendered here, and the HTML page, rendered by `vpa.logic.report.page`; `render` picks one
by name. The pieces they share (amounts, times, the JSON document) are `vpa.logic.report.formatting`'s.

Must not: do I/O or read the clock (the caller passes `generated_at`), or compute anything the report
logic owns (rows, sums).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Final

from vpa.logic.report.formatting import (
    action_text,
    conditions_text,
    cores,
    cpu,
    iso_time,
    memory,
    report_document,
    signed,
)
from vpa.logic.report.page import render_html
from vpa.logic.report.rows import NamespaceTotals, VpaReport
from vpa.model.resources import Resources

OUTPUTS: Final = ("table", "json", "csv", "html")


# --- JSON ---------------------------------------------------------------------------------------------------


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
            conditions_text(report),
            "" if action is None else action.reason,
            "" if action is None else iso_time(action.timestamp),
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
                _pair(cpu(row.requests.cpu_millicores), cpu(row.limits.cpu_millicores)),
                _bounds(cpu(target.cpu_millicores), cpu(lower.cpu_millicores),
                        cpu(upper.cpu_millicores)),
                _pair(memory(row.requests.memory_bytes), memory(row.limits.memory_bytes)),
                _bounds(memory(target.memory_bytes), memory(lower.memory_bytes),
                        memory(upper.memory_bytes)),
                signed(cpu(row.cpu_diff_millicores)) or "-",
                signed(memory(row.memory_diff_bytes)) or "-",
            ))
        if not report.containers:
            rows.append((report.namespace, report.name, report.workload or "-", report.mode, "-", "0",
                         *["-"] * 6))
    lines = [f"VPA report, {iso_time(generated_at)}", ""]
    lines += _align(rows) if len(rows) > 1 else ["No VerticalPodAutoscalers found."]
    if totals:
        lines += ["", "Savings per namespace (requests minus recommendation, summed over pods):"]
        lines += _align([
            ("NAMESPACE", "VPAS", "PODS", "CPU REQUESTED", "CPU RECOMMENDED", "CPU SAVINGS",
             "MEM REQUESTED", "MEM RECOMMENDED", "MEM SAVINGS"),
            *[(t.namespace, str(t.vpas), str(t.pods), cpu(t.cpu_requests_millicores),
               cpu(t.cpu_target_millicores), signed(cpu(t.cpu_diff_millicores)),
               memory(t.memory_requests_bytes), memory(t.memory_target_bytes),
               signed(memory(t.memory_diff_bytes))) for t in totals],
        ])
    details = [r for r in reports if r.conditions or r.last_action or r.target_problem]
    if details:
        lines += ["", "Conditions and last action:"]
        for report in details:
            lines.append(f"  {report.namespace}/{report.name}: {conditions_text(report) or 'no conditions'}")
            if report.target_problem:
                lines.append(f"    target: {report.target_problem}")
            if report.last_action is not None:
                lines.append(f"    last action: {action_text(report)}")
    return "\n".join(lines) + "\n"


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
