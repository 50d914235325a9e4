"""Conflicts: the losing VPAs of a shared target, and HPAs scaling a target on a resource a VPA sizes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import BASE_TIME, make_vpa
from vpa.kube.converting import vpa_from_dict
from vpa.kube.neighbourwatching import hpa_from_dict
from vpa.logic.recommender.conflicts import VpaConflicts, hpa_conflicts, vpa_conflicts
from vpa.model.node import HpaView
from vpa.model.vpa import VpaView


def v(name: str, age_s: float = 0, mode: str = "Recreate", target: str = "web", ns: str = "default",
      policies: list[dict[str, Any]] | None = None) -> VpaView:
    return vpa_from_dict(make_vpa(name, namespace=ns, created_at=BASE_TIME - age_s, update_mode=mode,
                                  target_name=target, container_policies=policies))


VPA_CASES: list[tuple[str, list[VpaView], dict[str, str]]] = [
    ("alone", [v("a")], {}),
    ("older wins", [v("young", 10), v("old", 100)], {"young": "old"}),
    ("same age: smaller name wins", [v("b", 5), v("a", 5)], {"b": "a"}),
    ("three: two losers", [v("c", 1), v("a", 9), v("b", 5)], {"b": "a", "c": "a"}),
    ("off neither wins nor loses", [v("off", 100, "Off"), v("live", 1)], {}),
    ("initial competes", [v("init", 100, "Initial"), v("live", 1)], {"live": "init"}),
    ("other targets do not compete", [v("a", target="web"), v("b", target="api")], {}),
    ("other namespaces do not compete", [v("a", ns="x"), v("b", ns="y")], {}),
]


@pytest.mark.parametrize(("vpas", "expected"), [c[1:] for c in VPA_CASES], ids=[c[0] for c in VPA_CASES])
def test_vpa_conflicts(vpas: list[VpaView], expected: dict[str, str]) -> None:
    got = {key[1]: winner.name for key, winner in vpa_conflicts(vpas).items()}
    assert got == expected


def test_the_tally_one_vpa_at_a_time_answers_for_what_it_was_given() -> None:
    tally = VpaConflicts()
    tally.add(v("c", 1))
    tally.add(v("b", 5))
    assert {key[1]: w.name for key, w in tally.losers().items()} == {"c": "b"}
    tally.add(v("a", 9))  # an older one arrives: both earlier ones now lose to it
    tally.add(v("off", 100, "Off"))
    assert {key[1]: w.name for key, w in tally.losers().items()} == {"b": "a", "c": "a"}


def hpa(name: str, *metrics: dict[str, Any], target: str = "web", kind: str = "Deployment",
        ns: str = "default") -> HpaView:
    return hpa_from_dict({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                 "minReplicas": 1, "maxReplicas": 5, "metrics": list(metrics)},
    })


def res(name: str) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": name, "target": {"type": "Utilization",
                                                                      "averageUtilization": 60}}}


def cres(name: str, container: str) -> dict[str, Any]:
    return {"type": "ContainerResource", "containerResource": {
        "name": name, "container": container, "target": {"type": "Utilization", "averageUtilization": 60}}}


EXTERNAL = {"type": "External", "external": {"metric": {"name": "queue"},
                                             "target": {"type": "Value", "value": "10"}}}
CPU_OFF_FOR_ALL = [{"containerName": "*", "controlledResources": ["memory"]}]
APP_OFF = [{"containerName": "app", "mode": "Off"}]

# (case, vpa, hpas, containers, expected [(hpa, resource, container)])
HPA_CASES: list[tuple[str, VpaView, list[HpaView], list[str], list[tuple[str, str, str | None]]]] = [
    ("cpu utilization on the same target", v("a"), [hpa("h", res("cpu"))], ["app"], [("h", "cpu", None)]),
    ("memory too", v("a"), [hpa("h", res("memory"), res("cpu"))], ["app"],
     [("h", "cpu", None), ("h", "memory", None)]),
    ("other target", v("a"), [hpa("h", res("cpu"), target="api")], ["app"], []),
    ("other kind", v("a"), [hpa("h", res("cpu"), kind="StatefulSet")], ["app"], []),
    ("other namespace", v("a"), [hpa("h", res("cpu"), ns="prod")], ["app"], []),
    ("external metric only", v("a"), [hpa("h", EXTERNAL)], ["app"], []),
    ("cpu not controlled", v("a", policies=CPU_OFF_FOR_ALL), [hpa("h", res("cpu"))], ["app"], []),
    ("memory still controlled", v("a", policies=CPU_OFF_FOR_ALL), [hpa("h", res("memory"))], ["app"],
     [("h", "memory", None)]),
    ("vpa off", v("a", mode="Off"), [hpa("h", res("cpu"))], ["app"], []),
    ("container metric on an off container", v("a", policies=APP_OFF), [hpa("h", cres("cpu", "app"))],
     ["app", "sidecar"], []),
    ("container metric on a sized container", v("a", policies=APP_OFF), [hpa("h", cres("cpu", "sidecar"))],
     ["app", "sidecar"], [("h", "cpu", "sidecar")]),
    ("pod metric with one sized container", v("a", policies=APP_OFF), [hpa("h", res("cpu"))],
     ["app", "sidecar"], [("h", "cpu", None)]),
    ("pod metric, only container off", v("a", policies=APP_OFF), [hpa("h", res("cpu"))], ["app"], []),
    ("no containers known: the policy decides", v("a"), [hpa("h", res("cpu"))], [], [("h", "cpu", None)]),
]


@pytest.mark.parametrize(("vpa", "hpas", "containers", "expected"), [c[1:] for c in HPA_CASES],
                         ids=[c[0] for c in HPA_CASES])
def test_hpa_conflicts(vpa: VpaView, hpas: list[HpaView], containers: list[str],
                       expected: list[tuple[str, str, str | None]]) -> None:
    got = [(c.hpa, c.metric.resource, c.metric.container) for c in hpa_conflicts(vpa, hpas, containers)]
    assert got == expected


def test_describe() -> None:
    (conflict,) = hpa_conflicts(v("a"), [hpa("web-hpa", cres("memory", "app"))], ["app"])
    assert conflict.describe() == "HPA web-hpa scales on memory of container app"
