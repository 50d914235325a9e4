"""Ending CPU startup boosts (spec §4.9): expiry, the resize that ends a boost, what is left alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.builders import make_vpa
from tests.unit.logic.updater.test_support import NOW, ctr, pod, rec
from vpa.kube.converting import vpa_from_dict
from vpa.logic.updater.unboost import Blocked, blocked, boost_expiry, plan_unboost
from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.vpa import VpaView

READY_AGE = 100.0  # the test pods turned Ready READY_AGE - 8 seconds before NOW
ORIGINAL_APP = '{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"200m"}}'
ORIGINAL_SIDE = '{"requests":{"cpu":"50m"},"limits":{}}'


def boost_vpa(
    mode: str = "Recreate",
    recs: list[dict[str, Any]] | None = None,
    duration_s: int = 0,
    policies: list[dict[str, Any]] | None = None,
) -> VpaView:
    raw = make_vpa(
        update_mode=mode,
        startup_boost={"cpu": {"type": "Factor", "factor": 4, "durationSeconds": duration_s}},
        container_policies=policies,
        recommendation=recs if recs is not None else [rec("app", cpu="150m", mem="128Mi")],
    )
    return vpa_from_dict(raw)


def boosted_pod(*, app_cpu: str = "400m", app_limit: str = "800m", side: bool = False) -> PodView:
    containers = [ctr("app", cpu=app_cpu, mem="128Mi", cpu_limit=app_limit)]
    annotations = {ann.cpu_startup_boost_key("app"): ORIGINAL_APP}
    if side:
        containers.append(ctr("side", cpu="200m", mem=None))
        annotations[ann.cpu_startup_boost_key("side")] = ORIGINAL_SIDE
    containers.append(ctr("plain", cpu="100m", mem="64Mi"))
    return pod(containers=containers, age_s=READY_AGE, annotations=annotations)


def changes(plan: Any) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    return {
        c.name: (c.requests.to_resource_list(), c.limits.to_resource_list()) for c in plan.changes
    }


READY_FOR = READY_AGE - 8


@pytest.mark.parametrize(
    ("vpa_kwargs", "expected_expired", "expected"),
    [
        # duration 0: ends as soon as Ready; back to the recommendation, limit kept proportional (2×);
        # the never-boosted sibling gets its recommendation too (none here: no change)
        ({}, ("app",), {"app": ({"cpu": "150m"}, {"cpu": "300m"})}),
        # not yet: Ready for READY_FOR seconds, duration one second longer
        ({"duration_s": int(READY_FOR) + 1}, (), {}),
        # exactly at the duration: upstream needs strictly more
        ({"duration_s": int(READY_FOR)}, (), {}),
        ({"duration_s": int(READY_FOR) - 1}, ("app",), {"app": ({"cpu": "150m"}, {"cpu": "300m"})}),
        # update mode Off: back to the original CPU from the annotation, whatever the recommendation
        ({"mode": "Off"}, ("app",), {"app": ({"cpu": "100m"}, {"cpu": "200m"})}),
        # Initial: the recommendation is used for the boosted container
        ({"mode": "Initial"}, ("app",), {"app": ({"cpu": "150m"}, {"cpu": "300m"})}),
        # no recommendation for the container: the original CPU
        ({"recs": [rec("other")]}, ("app",), {"app": ({"cpu": "100m"}, {"cpu": "200m"})}),
        # CPU not controlled: the recommendation sets memory, the CPU goes back to the original
        (
            {"policies": [{"containerName": "app", "controlledResources": ["memory"]}],
             "recs": [rec("app", cpu="150m", mem="256Mi")]},
            ("app",),
            {"app": ({"cpu": "100m", "memory": "256Mi"}, {"cpu": "200m"})},
        ),
        # a sibling that was never boosted is updated with its recommendation in the same resize
        (
            {"recs": [rec("app", cpu="150m", mem="128Mi"), rec("plain", cpu="120m", mem="64Mi")]},
            ("app",),
            {"app": ({"cpu": "150m"}, {"cpu": "300m"}), "plain": ({"cpu": "120m"}, {})},
        ),
        # ... but not when the mode does not update running pods
        (
            {"mode": "Initial", "recs": [rec("app", cpu="150m", mem="128Mi"), rec("plain", cpu="120m")]},
            ("app",),
            {"app": ({"cpu": "150m"}, {"cpu": "300m"})},
        ),
    ],
    ids=["expired", "not-yet", "exactly-at-duration", "just-past", "mode-off", "mode-initial",
         "no-recommendation", "cpu-not-controlled", "sibling-updated", "sibling-initial"],
)  # fmt: skip
def test_plan_unboost(
    vpa_kwargs: dict[str, Any],
    expected_expired: tuple[str, ...],
    expected: dict[str, tuple[dict[str, str], dict[str, str]]],
) -> None:
    v = boost_vpa(**vpa_kwargs)
    plan = plan_unboost(boosted_pod(), v, v.recommendation, NOW)
    assert plan.expired == expected_expired
    assert changes(plan) == expected


def test_unexpired_container_left_alone_while_sibling_unboosts() -> None:
    # app's boost lasts 0 s after Ready, side's (container policy) an hour: only app is resized now
    v = boost_vpa(
        policies=[{"containerName": "side", "startupBoost": {"cpu": {"type": "Factor", "factor": 4,
                                                                    "durationSeconds": 3600}}}],
        recs=[rec("app", cpu="150m", mem="128Mi"), rec("side", cpu="60m", mem="64Mi")],
    )  # fmt: skip
    p = boosted_pod(side=True)
    plan = plan_unboost(p, v, v.recommendation, NOW)
    assert plan.expired == ("app",)
    assert set(changes(plan)) == {"app"}
    assert plan.next_expiry == boost_expiry(p, v, "side")
    assert plan.annotation_patch() == {
        "metadata": {"annotations": {"vpaCpuStartupBoost/app": None, "vpaInPlaceUpdated": "true"}}
    }
    # an hour later the side container ends too
    later = plan_unboost(p, v, v.recommendation, NOW + 3600)
    assert later.expired == ("app", "side")


def test_already_at_target_only_the_annotation_goes() -> None:
    v = boost_vpa(mode="Off")
    plan = plan_unboost(boosted_pod(app_cpu="100m", app_limit="200m"), v, v.recommendation, NOW)
    assert plan.expired == ("app",)
    assert plan.changes == ()
    assert plan.annotation_patch() == {"metadata": {"annotations": {"vpaCpuStartupBoost/app": None}}}


def test_not_ready_never_expires() -> None:
    p = boosted_pod()
    ready = p.ready
    assert ready is not None
    not_ready = replace(p, conditions=tuple(
        replace(c, status="False") if c.type == "Ready" else c for c in p.conditions
    ))  # fmt: skip
    v = boost_vpa()
    assert boost_expiry(not_ready, v, "app") is None
    plan = plan_unboost(not_ready, v, v.recommendation, NOW + 10**6)
    assert plan.expired == ()
    assert plan.next_expiry is None


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [({}, None), ({"phase": "Pending"}, Blocked.PENDING), ({"in_progress_reason": ""}, Blocked.RESIZING)],
    ids=["running", "pending", "resizing"],
)
def test_blocked(kwargs: dict[str, str], expected: Blocked | None) -> None:
    assert blocked(pod(**kwargs)) is expected  # type: ignore[arg-type]
