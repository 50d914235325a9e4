"""Upstream VPA 1.8.1's `TestGetMatchingVpa` (`pkg/admission-controller/resource/vpa/matcher_test.go`),
restated as facts about `vpa.logic.matching.controlling_vpa`.

Upstream's test owns the pod by a StatefulSet (its fake controller fetcher walks no hierarchy), indexes the
VPAs by targetRef and fetches one label selector for all of them (none when the case gives none). Here the
candidates are every VPA of the case, each paired with that selector (None when the case gives none), and
the controller key is the pod's StatefulSet. No row disagrees. `matcher_benchmark_test.go` is a benchmark,
not a fact.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_vpa
from vpa.kube.converting import ConversionError, vpa_from_dict
from vpa.logic.matching import controller_key, controlling_vpa
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

LABELS = {"app": "test"}
STS = controller_key("default", "StatefulSet", "sts")
BOOST = {"cpu": {"type": "Factor", "factor": 1, "durationSeconds": 0}}


def _vpa(
    name: str,
    mode: str | None = "Recreate",
    *,
    target: tuple[str, str] = ("StatefulSet", "sts"),
    boost: bool = False,
    container_boost: bool = False,
) -> VpaView:
    raw: dict[str, Any] = make_vpa(
        name,
        update_mode=mode,
        target_kind=target[0],
        target_name=target[1],
        startup_boost=BOOST if boost else None,
        container_policies=[{"containerName": "i-am-container", "startupBoost": BOOST}]
        if container_boost
        else None,
    )
    return vpa_from_dict(raw)


# (name, VPAs, label selector or None, pod has a controller, expected VPA name)
CASES: list[tuple[str, list[VpaView], str | None, bool, str | None]] = [
    ("matching selector", [_vpa("recreate-vpa")], "app = test", True, "recreate-vpa"),
    ("no matching ownerRef (orphan pod)", [_vpa("recreate-vpa")], "app = test", False, None),
    (
        "no vpa with matching targetRef",
        [_vpa("recreate-vpa", target=("ReplicaSet", "rs"))],
        "app = test",
        True,
        None,
    ),
    ("not matching selector", [_vpa("recreate-vpa")], "app = differentApp", True, None),
    ("off mode", [_vpa("off-vpa", "Off")], None, True, None),
    (
        "two vpas, one in off mode",
        [_vpa("off-vpa", "Off"), _vpa("recreate-vpa")],
        "app = test",
        True,
        "recreate-vpa",
    ),
    ("initial mode", [_vpa("initial-vpa", "Initial")], "app = test", True, "initial-vpa"),
    ("no vpa objects", [], None, True, None),
    (
        "vpa with update mode off but with startup boost is matched",
        [_vpa("off-with-boost-vpa", "Off", boost=True)],
        "app = test",
        True,
        "off-with-boost-vpa",
    ),
    (
        "vpa with update mode off but with container-level startup boost is matched",
        [_vpa("off-with-container-boost-vpa", "Off", container_boost=True)],
        "app = test",
        True,
        "off-with-container-boost-vpa",
    ),
    (
        "vpa with default update mode and startup boost is matched",
        [_vpa("auto-with-boost-vpa", None, boost=True)],
        "app = test",
        True,
        "auto-with-boost-vpa",
    ),
]


@pytest.mark.parametrize(
    ("vpas", "selector", "owned", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_get_matching_vpa(
    vpas: list[VpaView], selector: str | None, owned: bool, expected: str | None
) -> None:
    fetched = Selector.parse(selector) if selector is not None else None
    chosen = controlling_vpa("default", LABELS, STS if owned else None, [(v, fetched) for v in vpas])
    assert (chosen.name if chosen is not None else None) == expected


def test_vpa_without_target_ref_never_matches() -> None:
    # "vpa without targetRef": such a VPA does not even convert (the caches keep no VPA without a target),
    # so it is never a candidate
    raw = make_vpa("recreate-vpa", target_kind="StatefulSet", target_name="sts")
    raw["spec"].pop("targetRef")
    with pytest.raises(ConversionError):
        vpa_from_dict(raw)
