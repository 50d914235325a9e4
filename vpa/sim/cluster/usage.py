"""Which usage profile applies to which container, and what a container uses at a virtual instant.

Owns: the precedence `set_usage()` override > pod annotation `sim.vpa.dev/usage` > default profile, a cache
of parsed annotations per pod uid, and the two readings everything else uses: memory as the kernel would
see it (for OOM kills) and CPU capped at the container's CPU limit (for metrics).

Must not: write to the store or keep per-pod runtime state (the node agent passes start times in).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vpa.sim.cluster.pods import container_amounts
from vpa.sim.cluster.profiles import (
    ANNOTATION,
    CPU,
    MEMORY,
    Profile,
    ProfileError,
    TraceCache,
    UsageProfile,
    default_profile,
    parse_annotation,
)

log = logging.getLogger(__name__)


class UsageRegistry:
    def __init__(self, default_fraction: float = 0.5, trace_dir: Path | None = None) -> None:
        self.default_fraction = default_fraction
        self.traces = TraceCache(trace_dir)
        self._overrides: dict[tuple[str, str, str], UsageProfile] = {}
        self._parsed: dict[str, tuple[str | None, dict[str, UsageProfile]]] = {}

    def set_usage(self, namespace: str, pod: str, container: str, profile: UsageProfile) -> None:
        self._overrides[(namespace, pod, container)] = profile

    def forget(self, uid: str) -> None:
        self._parsed.pop(uid, None)

    def _annotated(self, pod: Mapping[str, Any]) -> dict[str, UsageProfile]:
        md = pod.get("metadata") or {}
        uid = md.get("uid") or ""
        text = (md.get("annotations") or {}).get(ANNOTATION)
        cached = self._parsed.get(uid)
        # Keyed by the annotation's text too: `kubectl annotate` on a running pod changes its usage.
        parsed = cached[1] if cached is not None and cached[0] == text else None
        if parsed is None:
            parsed = {}
            if text:
                try:
                    parsed = parse_annotation(text, self.traces, f"{md.get('namespace')}/{md.get('name')}")
                except ProfileError as err:
                    log.warning(
                        "pod %s/%s: ignoring %s: %s", md.get("namespace"), md.get("name"), ANNOTATION, err
                    )
            self._parsed[uid] = (text, parsed)
        return parsed

    def profile(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        resource: str,
        requests: Mapping[str, int] | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> Profile:
        """The profile for one resource of one container; `requests`/`limits` (actual) feed the default."""
        md = pod.get("metadata") or {}
        name = str(container.get("name") or "")
        override = self._overrides.get((md.get("namespace") or "", md.get("name") or "", name))
        chosen = getattr(override, resource) if override is not None else None
        if chosen is None:
            annotated = self._annotated(pod).get(name)
            chosen = getattr(annotated, resource) if annotated is not None else None
        if chosen is not None:
            return chosen  # type: ignore[no-any-return]
        reqs = requests if requests is not None else container_amounts(container, "requests")
        lims = limits if limits is not None else container_amounts(container, "limits")
        return default_profile(resource, reqs.get(resource), lims.get(resource), self.default_fraction)

    def memory_bytes(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        t: float,
        pod_start: float,
        container_start: float,
        requests: Mapping[str, int],
        limits: Mapping[str, int],
    ) -> int:
        prof = self.profile(pod, container, MEMORY, requests, limits)
        return int(prof.value(t, pod_start, container_start))

    def cpu_millicores(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        t: float,
        pod_start: float,
        container_start: float,
        requests: Mapping[str, int],
        limits: Mapping[str, int],
    ) -> int:
        prof = self.profile(pod, container, CPU, requests, limits)
        value = int(prof.value(t, pod_start, container_start))
        limit = limits.get(CPU)
        return min(value, limit) if limit else value
