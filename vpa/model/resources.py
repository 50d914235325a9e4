"""CPU and memory amounts as exact integers: the unit every part of vpa computes in.

Owns: `Resources` (millicores and bytes, either may be absent) and conversion to and from the
Kubernetes ResourceList string form. Must not: know about pods, VPAs or policies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vpa.model import quantity

CPU = "cpu"
MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Resources:
    """A ResourceList restricted to what a VPA manages. `None` means "not set", not zero."""

    cpu_millicores: int | None = None
    memory_bytes: int | None = None

    @classmethod
    def from_resource_list(cls, resource_list: Mapping[str, object] | None) -> Resources:
        """`{"cpu": "250m", "memory": "1Gi"}` → Resources(250, 1073741824); other resources are ignored.

        Raises quantity.QuantityError naming the resource when a value is not a quantity.
        """
        if not resource_list:
            return cls()
        return cls(
            cpu_millicores=_read(resource_list, CPU, lambda q: q.millis),
            memory_bytes=_read(resource_list, MEMORY, lambda q: q.value),
        )

    def to_resource_list(self) -> dict[str, str]:
        """Canonical strings as the VPA writes them: CPU in millicores (`250m`, `1`), memory in binary
        form (`250Mi`, or plain bytes like `279172665` when not a multiple of 1024)."""
        out: dict[str, str] = {}
        if self.cpu_millicores is not None:
            out[CPU] = quantity.format_cpu_millicores(self.cpu_millicores)
        if self.memory_bytes is not None:
            out[MEMORY] = quantity.format_memory_bytes(self.memory_bytes, "BinarySI")
        return out

    def get(self, resource: str) -> int | None:
        """The amount for `cpu` (millicores) or `memory` (bytes); None for anything else or unset."""
        if resource == CPU:
            return self.cpu_millicores
        if resource == MEMORY:
            return self.memory_bytes
        return None

    def is_empty(self) -> bool:
        return self.cpu_millicores is None and self.memory_bytes is None

    def merged(self, other: Resources) -> Resources:
        """These amounts with `other`'s set values on top (what adding `other` into a ResourceList gives)."""
        cpu = other.cpu_millicores if other.cpu_millicores is not None else self.cpu_millicores
        memory = other.memory_bytes if other.memory_bytes is not None else self.memory_bytes
        if cpu == self.cpu_millicores and memory == self.memory_bytes:
            return self
        return Resources(cpu, memory)


def _read(
    resource_list: Mapping[str, object], name: str, pick: Callable[[quantity.Quantity], int]
) -> int | None:
    raw = resource_list.get(name)
    if raw is None:
        return None
    text = str(raw) if isinstance(raw, int | float) else raw
    if not isinstance(text, str):
        raise quantity.QuantityError(f"{name}: expected a quantity string, got {type(raw).__name__}")
    try:
        parsed = quantity.Quantity.parse(text)
    except quantity.QuantityError as err:
        raise quantity.QuantityError(f"{name}: {err}") from err
    return pick(parsed)


def format_patch_amount(resource: str, amount: int) -> str:
    """The quantity text a pod patch (admission or in-place resize) writes: CPU canonical (`250m`, `1`),
    memory in the recommendation's form (`quantity.format_memory_bytes_as_written`: `256Mi`, `300M`)."""
    if resource == CPU:
        return quantity.format_cpu_millicores(amount)
    return quantity.format_memory_bytes_as_written(amount)
