"""Choosing the controlling VPA for a pod: stronger VPA (oldest, then name), Off skipped unless it boosts,
selector and target mismatches, no controller."""

from __future__ import annotations

import pytest

from tests.builders import BASE_TIME, make_vpa
from vpa.kube.converting import vpa_from_dict
from vpa.logic.matching import controller_key, controlling_vpa, target_key
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

LABELS = {"app": "web"}
WEB = Selector.from_match_labels({"app": "web"})
DB = Selector.from_match_labels({"app": "db"})
CONTROLLER = controller_key("default", "Deployment", "web")


def v(
    name: str, age_s: float = 0, mode: str = "Recreate", target: str = "web", boost: bool = False
) -> VpaView:
    raw = make_vpa(name, created_at=BASE_TIME - age_s, update_mode=mode, target_name=target)
    if boost:
        raw["spec"]["startupBoost"] = {"cpu": {"type": "Factor", "factor": 2}}
    return vpa_from_dict(raw)


CASES: list[tuple[str, list[tuple[VpaView, Selector | None]], str | None, str | None]] = [
    ("single", [(v("a"), WEB)], CONTROLLER, "a"),
    ("oldest-wins", [(v("young", 10), WEB), (v("old", 100), WEB)], CONTROLLER, "old"),
    ("tie-smaller-name", [(v("b", 5), WEB), (v("a", 5), WEB)], CONTROLLER, "a"),
    ("off-skipped-before-choosing", [(v("old-off", 100, "Off"), WEB), (v("new", 1), WEB)], CONTROLLER, "new"),
    ("off-only", [(v("off", 0, "Off"), WEB)], CONTROLLER, None),
    ("off-with-boost", [(v("off", 0, "Off", boost=True), WEB)], CONTROLLER, "off"),
    ("initial-matches", [(v("init", 0, "Initial"), WEB)], CONTROLLER, "init"),
    ("selector-mismatch", [(v("a"), DB)], CONTROLLER, None),
    ("selector-unknown", [(v("a"), None)], CONTROLLER, None),
    ("other-target", [(v("a", target="api"), WEB)], CONTROLLER, None),
    ("no-controller", [(v("a"), WEB)], None, None),
    ("no-candidates", [], CONTROLLER, None),
]


@pytest.mark.parametrize(
    ("candidates", "controller", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_controlling_vpa(
    candidates: list[tuple[VpaView, Selector | None]], controller: str | None, expected: str | None
) -> None:
    chosen = controlling_vpa("default", LABELS, controller, candidates)
    assert (chosen.name if chosen is not None else None) == expected


def test_other_namespace_never_matches() -> None:
    other = vpa_from_dict(make_vpa("a", namespace="prod"))
    assert controlling_vpa("default", LABELS, CONTROLLER, [(other, WEB)]) is None


def test_keys_agree() -> None:
    assert target_key(v("a")) == CONTROLLER == "default/Deployment/web"
