"""The hook registry through which cluster behaviour plugs kind-specific semantics into the API server.

Owns: the registered validators, defaulters, subresource handlers and aggregated (computed, read-only)
resources, and running validators/defaulters in registration order.

Must not: hold objects or serve HTTP. The store calls validators/defaulters on every write; the HTTP
layer routes subresources and aggregated APIs here.
"""

from __future__ import annotations

from dataclasses import dataclass

from vpa.sim.contracts import (
    AggregatedLister,
    Defaulter,
    JsonObj,
    Operation,
    SubresourceHandler,
    Validator,
)


@dataclass(frozen=True, slots=True)
class AggregatedResource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    # Called as lister(namespace, name, label_selector): namespace None = all namespaces, name None = list.
    lister: AggregatedLister


class Hooks:
    """Implements `vpa.sim.contracts.HookRegistry`."""

    def __init__(self) -> None:
        self.validators: dict[str, list[Validator]] = {}
        self.defaulters: dict[str, list[Defaulter]] = {}
        self.subresources: dict[tuple[str, str], SubresourceHandler] = {}
        self.aggregated: dict[tuple[str, str, str], AggregatedResource] = {}

    def add_validator(self, resource: str, validator: Validator) -> None:
        self.validators.setdefault(resource, []).append(validator)

    def add_defaulter(self, resource: str, defaulter: Defaulter) -> None:
        self.defaulters.setdefault(resource, []).append(defaulter)

    def add_subresource(self, resource: str, subresource: str, handler: SubresourceHandler) -> None:
        self.subresources[(resource, subresource)] = handler

    def add_aggregated_resource(
        self,
        *,
        group: str,
        version: str,
        plural: str,
        kind: str,
        namespaced: bool,
        lister: AggregatedLister,
    ) -> None:
        self.aggregated[(group, version, plural)] = AggregatedResource(
            group, version, plural, kind, namespaced, lister
        )

    def run_defaulters(
        self, resource: str, op: Operation, old: JsonObj | None, new: JsonObj, subresource: str | None
    ) -> None:
        for d in self.defaulters.get(resource, ()):
            d(op, old, new, subresource)

    def run_validators(
        self, resource: str, op: Operation, old: JsonObj | None, new: JsonObj, subresource: str | None
    ) -> None:
        for v in self.validators.get(resource, ()):
            v(op, old, new, subresource)
