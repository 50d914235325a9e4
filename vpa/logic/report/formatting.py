"""What every output format of `vpa report` shares: amounts as kubectl prints them (and as plain cores for
spreadsheets), times, the one-line text of a VPA's conditions and last action, and the report as one JSON
document (the JSON output, and the data the HTML page embeds). Exact integers (millicores, bytes) stand in
the document next to Kubernetes quantity strings.

Must not: do I/O or read the clock (the caller passes `generated_at`), or compute anything the report
logic owns (rows, sums).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from vpa.logic.report.rows import ContainerRow, NamespaceTotals, VpaReport
from vpa.model.resources import Resources

_KI: Final = 2**10
_MI: Final = 2**20
_GI: Final = 2**30


# --- amounts and text -------------------------------------------------------------------------------------


def cores(millicores: int | None) -> str:
    """Millicores as plain cores, for spreadsheets (CSV): 250 → `0.25`, 2000 → `2`, -1500 → `-1.5`."""
    if millicores is None:
        return ""
    return f"{millicores / 1000:.3f}".rstrip("0").rstrip(".")


def cpu(millicores: int | None) -> str:
    """CPU as kubectl prints it: 25 → `25m`, 2000 → `2`, 1500 → `1500m`, -250 → `-250m`; None → ``."""
    if millicores is None:
        return ""
    sign, magnitude = ("-" if millicores < 0 else ""), abs(millicores)
    return sign + (f"{magnitude // 1000}" if magnitude % 1000 == 0 else f"{magnitude}m")


def memory(value: int | None) -> str:
    """Memory as kubectl prints a binary quantity: 268435456 → `256Mi`, 2147483648 → `2Gi`, 1610612736 →
    `1536Mi`; an amount that is no whole number of Mi (a recommendation's raw bytes) to one decimal,
    272061154 → `259.5Mi`; below 1Mi in Ki or bytes; None → ``. Negative amounts keep their sign."""
    if value is None:
        return ""
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if magnitude >= _GI and magnitude % _GI == 0:
        text = f"{magnitude // _GI}Gi"
    elif magnitude >= _MI:
        text = f"{magnitude / _MI:.1f}".removesuffix(".0") + "Mi"
    elif magnitude >= _KI and magnitude % _KI == 0:
        text = f"{magnitude // _KI}Ki"
    else:
        text = str(magnitude)
    return sign + text


def iso_time(timestamp: float | None) -> str:
    """A time as RFC 3339 in UTC to the second; None → ``."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions_text(report: VpaReport) -> str:
    """The VPA's conditions as `Type=Status` pairs, comma-separated."""
    return ",".join(f"{c.type}={c.status}" for c in report.conditions)


def action_text(report: VpaReport) -> str:
    """The last updater action as one line: reason, object, time and message; `` when there is none."""
    action = report.last_action
    if action is None:
        return ""
    where = f"{action.object_kind}/{action.object_name}"
    return f"{action.reason} {where} at {iso_time(action.timestamp)}: {action.message}"


def signed(text: str) -> str:
    """An amount's text with a `+` before a positive one (a difference)."""
    return text if not text or text.startswith("-") or text == "0" else "+" + text


# --- the JSON document ------------------------------------------------------------------------------------


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
             "lastTransitionTime": iso_time(c.last_transition_time) or None}
            for c in report.conditions
        ],
        "lastAction": None if action is None else {
            "reason": action.reason, "message": action.message, "kind": action.object_kind,
            "name": action.object_name, "time": iso_time(action.timestamp),
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
        "generatedAt": iso_time(generated_at),
        "vpas": [_report_json(report) for report in reports],
        "namespaces": [_totals_json(t) for t in totals],
    }
