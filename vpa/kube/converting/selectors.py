"""The selectors of target workloads: `selector_from_workload` and `selector_from_scale`.

Owns: which kinds carry `spec.selector` as a LabelSelector and which a plain map, and the selector string
of a scale subresource.

Must not: do I/O, log or decide anything; a malformed object raises ConversionError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from vpa.kube.converting.readers import (
    ConversionError,
    _map,
    _str,
    _type_name,
)
from vpa.model.selector import Selector, SelectorError

# --- selectors of targets ---------------------------------------------------------------------------------

_SPEC_SELECTOR_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"})


def selector_from_workload(obj: Mapping[str, Any]) -> Selector:
    """The pod selector of a well-known controller, as upstream's target fetcher reads it.

    Deployment, ReplicaSet, StatefulSet, DaemonSet, Job: `spec.selector` (a LabelSelector; absent →
    nothing). ReplicationController: the `spec.selector` label map. CronJob: the labels of
    `spec.jobTemplate.spec.template.metadata`. Raises ConversionError naming the field.
    """
    kind = _str(obj.get("kind"), "kind")
    spec = _map(obj.get("spec"), "spec")
    if kind in _SPEC_SELECTOR_KINDS:
        raw = spec.get("selector")
        try:
            return Selector.from_label_selector(None if raw is None else _map(raw, "spec.selector"))
        except SelectorError as err:
            raise ConversionError("spec.selector", str(err)) from None
    if kind == "ReplicationController":
        raw_map = spec.get("selector")
        if raw_map is None:
            return Selector.nothing()
        return _selector_from_map(raw_map, "spec.selector")
    if kind == "CronJob":
        field = "spec.jobTemplate.spec.template.metadata.labels"
        job_spec = _map(
            _map(spec.get("jobTemplate"), "spec.jobTemplate").get("spec"), "spec.jobTemplate.spec"
        )
        template = _map(job_spec.get("template"), "spec.jobTemplate.spec.template")
        labels = _map(template.get("metadata"), "spec.jobTemplate.spec.template.metadata").get("labels")
        return _selector_from_map(labels or {}, field)
    raise ConversionError("kind", f"{kind!r} is not a well-known controller with a pod selector")


def _selector_from_map(value: object, field: str) -> Selector:
    raw = _map(value, field)
    for key, item in raw.items():
        if not isinstance(item, str):
            raise ConversionError(f"{field}[{key!r}]", f"expected a string, got {_type_name(item)}")
    try:
        return Selector.from_match_labels(raw)
    except SelectorError as err:
        raise ConversionError(field, str(err)) from None


def selector_from_scale(obj: Mapping[str, Any]) -> Selector:
    """The pod selector of a `scale` subresource (`status.selector`, string form).

    An absent or empty selector is an error, as in upstream's fetcher ("Resource … has an empty selector").
    """
    text = _str(_map(obj.get("status"), "status").get("selector"), "status.selector")
    if not text:
        raise ConversionError("status.selector", "the scale subresource has an empty selector")
    try:
        return Selector.parse(text)
    except SelectorError as err:
        raise ConversionError("status.selector", str(err)) from None
