"""Native sidecars (AEP-8905, gate `NativeSidecar`): the pod view the components hand to the logic, the
admission patch for `/spec/initContainers/<j>`, and the in-place resize patch.

Rows are written from the AEP: an init container with `restartPolicy: Always` is recommended for and patched
like a regular container (its patch path is under `initContainers`); a plain init container never is; with
the gate off nothing about either changes (upstream 1.7).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import make_container, make_pod
from tests.unit.logic.admission.test_patches import admission_pod, apply_patch, rec, vpa_json
from vpa.components.recommender import ooms_from_pod_update
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import AdmissionOptions, pod_patch, pod_shape
from vpa.logic.limitranges import NO_LIMITS
from vpa.logic.updater.inplace import Change, ContainerChange, qos_before_and_after, resize_patch
from vpa.model.features import FeatureGates
from vpa.model.resources import Resources

JSON = dict[str, Any]
SIDECARS_ON = AdmissionOptions(gates=FeatureGates.parse("NativeSidecar=true"))
SIDECARS_OFF = AdmissionOptions()
APP = ["/spec/containers/0/resources/requests/cpu", "/spec/containers/0/resources/requests/memory"]


def _container(name: str, restart_policy: str | None = None, **resources: str | None) -> JSON:
    args: dict[str, Any] = {"cpu_request": "100m", "memory_request": "64Mi", "cpu_limit": None,
                            "memory_limit": None, "probes": False, "port": None}
    args.update(resources)
    return make_container(name, restart_policy=restart_policy, **args)


def _pod_with_inits(*inits: JSON) -> JSON:
    raw = admission_pod(_container("app"))
    raw["spec"]["initContainers"] = list(inits)
    return raw


def test_the_sidecar_view_appends_sidecars_and_finds_their_spec_path() -> None:
    raw = make_pod(containers=[_container("app")], init_containers=[
        _container("migrate"), _container("proxy", restart_policy="Always")])
    pod = pod_from_dict(raw)
    view = pod.with_native_sidecars()
    assert [c.name for c in view.containers] == ["app", "proxy"]
    assert [c.name for c in view.init_containers] == ["migrate", "proxy"]
    assert [c.name for c in view.plain_init_containers] == ["migrate"]
    assert [view.container_path(i) for i in range(2)] == ["/spec/containers/0", "/spec/initContainers/1"]
    assert view.with_native_sidecars() is view  # already extended
    plain = pod_from_dict(make_pod(containers=[_container("app")], init_containers=[_container("migrate")]))
    assert plain.with_native_sidecars() is plain  # no sidecar: the pod itself


@pytest.mark.parametrize(
    ("options", "inits", "recommended", "expected_paths", "updates", "observed"),
    [
        (  # gate on: the sidecar gets its recommendation under initContainers, the plain init none
            SIDECARS_ON,
            [_container("migrate"), _container("proxy", restart_policy="Always")],
            ("app", "proxy", "migrate"),
            [*APP, "/spec/initContainers/1/resources/requests/cpu",
             "/spec/initContainers/1/resources/requests/memory"],
            "container 0: cpu request, memory request; initContainer 1: cpu request, memory request",
            "app, proxy",
        ),
        (  # gate off: as upstream 1.7, init containers of any kind are left alone
            SIDECARS_OFF,
            [_container("migrate"), _container("proxy", restart_policy="Always")],
            ("app", "proxy", "migrate"),
            APP,
            "container 0: cpu request, memory request",
            "app",
        ),
        (  # gate on, no recommendation for the sidecar: it is not touched (no empty `resources` object)
            SIDECARS_ON,
            [_container("proxy", restart_policy="Always", cpu_request=None, memory_request=None)],
            ("app",),
            APP,
            "container 0: cpu request, memory request",
            "app, proxy",
        ),
        (  # gate on, a sidecar without resources gets the objects it needs created first
            SIDECARS_ON,
            [_container("proxy", restart_policy="Always", cpu_request=None, memory_request=None)],
            ("app", "proxy"),
            [*APP, "/spec/initContainers/0/resources", "/spec/initContainers/0/resources/requests",
             "/spec/initContainers/0/resources/requests/cpu",
             "/spec/initContainers/0/resources/requests/memory"],
            "container 0: cpu request, memory request; initContainer 0: cpu request, memory request",
            "app, proxy",
        ),
    ],
    ids=["gate-on", "gate-off", "sidecar-without-recommendation", "sidecar-without-resources"],
)
def test_admission_patches_sidecars_only_with_the_gate(
    options: AdmissionOptions, inits: list[JSON], recommended: tuple[str, ...], expected_paths: list[str],
    updates: str, observed: str,
) -> None:
    raw = _pod_with_inits(*inits)
    vpa = vpa_from_dict(vpa_json(*(rec(name, cpu="300m", memory="200Mi") for name in recommended)))
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), vpa, NO_LIMITS, options)
    paths = [op["path"] for op in ops if op["path"].startswith("/spec/")]
    assert paths == expected_paths
    annotations = {op["path"].rsplit("/", 1)[1]: op["value"] for op in ops if "annotations/" in op["path"]}
    assert annotations["vpaUpdates"] == f"Pod resources updated by web-vpa: {updates}"
    assert annotations["vpaObservedContainers"] == observed
    patched = apply_patch(raw, ops)
    for init in patched["spec"]["initContainers"]:
        if init["name"] == "proxy" and "proxy" in recommended and options is SIDECARS_ON:
            assert init["resources"]["requests"] == {"cpu": "300m", "memory": "200Mi"}
        if init["name"] == "migrate":
            assert init["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}


def test_a_sidecar_gets_no_startup_boost() -> None:
    raw = _pod_with_inits(_container("proxy", restart_policy="Always"))
    body = vpa_json(rec("app", cpu="300m", memory="200Mi"), rec("proxy", cpu="300m", memory="200Mi"))
    body["spec"]["startupBoost"] = {"cpu": {"type": "Factor", "factor": 2}}
    options = AdmissionOptions(gates=FeatureGates.parse("NativeSidecar=true,CPUStartupBoost=true"))
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), vpa_from_dict(body), NO_LIMITS, options)
    values = {op["path"]: op["value"] for op in ops}
    assert values["/spec/containers/0/resources/requests/cpu"] == "600m"  # boosted
    assert values["/spec/initContainers/0/resources/requests/cpu"] == "300m"  # recommended, not boosted
    assert "/metadata/annotations/vpaCpuStartupBoost~1proxy" not in values


def test_the_resize_patch_of_a_sidecar_targets_init_containers() -> None:
    raw = make_pod(containers=[_container("app")], init_containers=[
        _container("migrate"), _container("proxy", restart_policy="Always")])
    view = pod_from_dict(raw).with_native_sidecars()
    ops = resize_patch(view, [ContainerChange(1, "proxy", Resources(200, None), Resources(), False)])
    assert ops == [{"op": "add", "path": "/spec/initContainers/1/resources/requests/cpu", "value": "200m"}]


def test_qos_counts_a_sidecar_once_with_its_new_values() -> None:
    # app is Guaranteed; the sidecar's request goes up to its limit: the pod would become Guaranteed, which a
    # resize may not do. Counting the sidecar's old values a second time would hide that change.
    raw = make_pod(
        containers=[_container("app", cpu_limit="100m", memory_limit="64Mi")],
        init_containers=[_container("proxy", restart_policy="Always", cpu_limit="200m", memory_limit="64Mi")],
    )
    view = pod_from_dict(raw).with_native_sidecars()
    change = Change(1, "proxy", "cpu", 200, None, False)
    assert qos_before_and_after(view, [change]) == ("Burstable", "Guaranteed")


@pytest.mark.parametrize(
    ("restart_policy", "extended", "kills"),
    [
        ("Always", True, ["proxy"]),  # gate on: a sidecar's OOM kill raises its memory history
        ("Always", False, []),  # gate off: as upstream, init containers are not observed
        (None, True, []),  # a plain init container never is
    ],
    ids=["sidecar-gate-on", "sidecar-gate-off", "plain-init-container"],
)
def test_oom_kills_of_sidecars_are_observed_with_the_gate(
    restart_policy: str | None, extended: bool, kills: list[str]
) -> None:
    old_raw = make_pod(containers=[_container("app")],
                       init_containers=[_container("proxy", restart_policy=restart_policy)])
    new_raw = copy.deepcopy(old_raw)
    (status,) = new_raw["status"]["initContainerStatuses"]
    status["restartCount"] = 1
    status["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                          "startedAt": "2026-01-01T00:00:02Z",
                                          "finishedAt": "2026-01-01T00:05:00Z"}}
    old, new = pod_from_dict(old_raw), pod_from_dict(new_raw)
    if extended:
        old, new = old.with_native_sidecars(), new.with_native_sidecars()
    found = ooms_from_pod_update(old, new)
    assert [k.container_id.container_name for k in found] == kills
    if kills:
        assert found[0].memory_bytes == 64 * 2**20  # the sidecar's memory request
