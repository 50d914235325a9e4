"""Server-side printing: the `meta.k8s.io/v1` `Table` answers `kubectl get` asks for.

Owns: column definitions and cells for built-in kinds (pods, deployments, replica sets, nodes, namespaces,
events, ...; Name + Age for the rest), CRD `additionalPrinterColumns` evaluated with the JSONPath subset
CRDs use (`.a.b`, `[0]`, `[*]`, `[?(@.k=='v')]`), and kube's human-readable ages (`HumanDuration`).

Must not: touch the store or HTTP; it turns objects into rows.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from typing import Any

from vpa.sim.apiserver.registry import ResourceType

JsonObj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, format, priority


def parse_time(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return float(calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """Kubernetes' `duration.HumanDuration`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def age(obj: JsonObj, now: float) -> str:
    created = parse_time(obj.get("metadata", {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


# ---------------------------------------------------------------- JSONPath subset

_TOKEN_RE = re.compile(
    r"\.([A-Za-z0-9_\-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]"
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN_RE.match(path, pos)
        if m is None:
            return []
        pos = m.end()
        nxt: list[Any] = []
        for cur in current:
            if m.group(1) is not None:
                if isinstance(cur, dict) and m.group(1) in cur:
                    nxt.append(cur[m.group(1)])
            elif m.group(2) is not None:
                if isinstance(cur, list):
                    if m.group(2) == "*":
                        nxt.extend(cur)
                    elif int(m.group(2)) < len(cur):
                        nxt.append(cur[int(m.group(2))])
            else:
                key, want = m.group(3), m.group(4)
                if isinstance(cur, list):
                    for it in cur:
                        val: Any = it
                        for part in key.split("."):
                            val = val.get(part) if isinstance(val, dict) else None
                        if val is not None and str(val) == want:
                            nxt.append(it)
        current = nxt
    return current


def _cell(ctype: str, value: Any, now: float) -> Any:
    if value is None:
        return None
    if ctype == "date":
        t = parse_time(value) if isinstance(value, str) else None
        return "<invalid>" if t is None else human_duration(now - t)
    if ctype == "string":
        if isinstance(value, (dict, list)):
            import orjson

            return orjson.dumps(value).decode()
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    if ctype == "integer":
        return value if isinstance(value, int) else None
    if ctype == "number":
        return value if isinstance(value, (int, float)) else None
    if ctype == "boolean":
        return value if isinstance(value, bool) else None
    return value


# ---------------------------------------------------------------- built-in printers


def _pod_row(o: JsonObj, now: float) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        st = s.get("state") or {}
        if "waiting" in st and st["waiting"].get("reason"):
            reason = st["waiting"]["reason"]
        elif "terminated" in st and st["terminated"].get("reason"):
            reason = st["terminated"]["reason"]
    if o.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        o["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        restarts,
        age(o, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
    ]


def _deploy_row(o: JsonObj, now: float) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [
        o["metadata"]["name"],
        f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        st.get("updatedReplicas", 0),
        st.get("availableReplicas", 0),
        age(o, now),
    ]


def _rs_row(o: JsonObj, now: float) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [
        o["metadata"]["name"],
        spec.get("replicas", 1),
        st.get("replicas", 0),
        st.get("readyReplicas", 0),
        age(o, now),
    ]


def _sts_row(o: JsonObj, now: float) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [o["metadata"]["name"], f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", age(o, now)]


def _node_row(o: JsonObj, now: float) -> list[Any]:
    conds = (o.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = o["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")))
    version = ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [o["metadata"]["name"], state, roles or "<none>", age(o, now), version]


def _ns_row(o: JsonObj, now: float) -> list[Any]:
    return [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Active"), age(o, now)]


def _event_row(o: JsonObj, now: float) -> list[Any]:
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    t = parse_time(last)
    inv = o.get("involvedObject") or o.get("regarding") or {}
    return [
        "<unknown>" if t is None else human_duration(now - t),
        o.get("type", ""),
        o.get("reason", ""),
        f"{(inv.get('kind') or '').lower()}/{inv.get('name', '')}",
        o.get("message") or o.get("note", ""),
    ]


def _job_row(o: JsonObj, now: float) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    status = "Complete" if st.get("succeeded", 0) >= spec.get("completions", 1) else "Running"
    return [
        o["metadata"]["name"],
        status,
        f"{st.get('succeeded', 0)}/{spec.get('completions', 1)}",
        age(o, now),
    ]


def _configmap_row(o: JsonObj, now: float) -> list[Any]:
    return [
        o["metadata"]["name"],
        len(o.get("data") or {}) + len(o.get("binaryData") or {}),
        age(o, now),
    ]


def _crd_row(o: JsonObj, now: float) -> list[Any]:
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]


_S, _I = "string", "integer"
BUILTIN: dict[str, tuple[list[Column], Callable[[JsonObj, float], list[Any]]]] = {
    "pods": (
        [
            ("Name", _S, "name", 0),
            ("Ready", _S, "", 0),
            ("Status", _S, "", 0),
            ("Restarts", _S, "", 0),
            ("Age", _S, "", 0),
            ("IP", _S, "", 1),
            ("Node", _S, "", 1),
        ],
        _pod_row,
    ),
    "deployments.apps": (
        [
            ("Name", _S, "name", 0),
            ("Ready", _S, "", 0),
            ("Up-to-date", _I, "", 0),
            ("Available", _I, "", 0),
            ("Age", _S, "", 0),
        ],
        _deploy_row,
    ),
    "replicasets.apps": (
        [
            ("Name", _S, "name", 0),
            ("Desired", _I, "", 0),
            ("Current", _I, "", 0),
            ("Ready", _I, "", 0),
            ("Age", _S, "", 0),
        ],
        _rs_row,
    ),
    "statefulsets.apps": ([("Name", _S, "name", 0), ("Ready", _S, "", 0), ("Age", _S, "", 0)], _sts_row),
    "nodes": (
        [
            ("Name", _S, "name", 0),
            ("Status", _S, "", 0),
            ("Roles", _S, "", 0),
            ("Age", _S, "", 0),
            ("Version", _S, "", 0),
        ],
        _node_row,
    ),
    "namespaces": ([("Name", _S, "name", 0), ("Status", _S, "", 0), ("Age", _S, "", 0)], _ns_row),
    "configmaps": ([("Name", _S, "name", 0), ("Data", _I, "", 0), ("Age", _S, "", 0)], _configmap_row),
    "events": (
        [
            ("Last Seen", _S, "", 0),
            ("Type", _S, "", 0),
            ("Reason", _S, "", 0),
            ("Object", _S, "", 0),
            ("Message", _S, "", 0),
        ],
        _event_row,
    ),
    "customresourcedefinitions.apiextensions.k8s.io": (
        [("Name", _S, "name", 0), ("Created At", "date", "", 0)],
        _crd_row,
    ),
    "jobs.batch": (
        [("Name", _S, "name", 0), ("Status", _S, "", 0), ("Completions", _S, "", 0), ("Age", _S, "", 0)],
        _job_row,
    ),
}


def _default_row(o: JsonObj, now: float) -> list[Any]:
    return [o["metadata"]["name"], age(o, now)]


def columns_and_printer(
    rt: ResourceType, version: str | None
) -> tuple[list[Column], Callable[[JsonObj, float], list[Any]]]:
    if rt.crd:
        cols_raw = rt.printer_columns.get(version or rt.version) or []
        if not cols_raw:
            return [("Name", _S, "name", 0), ("Age", "date", "", 0)], _default_row
        cols: list[Column] = [("Name", _S, "name", 0)]
        for c in cols_raw:
            cols.append((c["name"], c.get("type", "string"), c.get("format", ""), int(c.get("priority", 0))))

        def crd_row(o: JsonObj, now: float) -> list[Any]:
            row: list[Any] = [o["metadata"]["name"]]
            for c in cols_raw:
                found = jsonpath(o, c.get("jsonPath", ""))
                row.append(_cell(c.get("type", "string"), found[0] if found else None, now))
            return row

        return cols, crd_row
    if rt.key in BUILTIN:
        return BUILTIN[rt.key]
    return [("Name", _S, "name", 0), ("Age", _S, "", 0)], _default_row


def column_definitions(cols: list[Column]) -> list[JsonObj]:
    return [{"name": n, "type": t, "format": f, "description": n, "priority": p} for n, t, f, p in cols]


def row(obj: JsonObj, printer: Callable[[JsonObj, float], list[Any]], now: float, include: str) -> JsonObj:
    out: JsonObj = {"cells": printer(obj, now)}
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        md = obj.get("metadata") or {}
        out["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md}
    return out
