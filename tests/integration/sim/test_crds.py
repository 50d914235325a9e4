"""The project's own VPA CRDs (`vpa/crds/vpa-v1.yaml`) against upstream's, and CRD handling in the server.

The schemas must accept and reject the same objects: checked structurally (schemas equal once descriptions
are removed), by the simulator's validator, and by `jsonschema` as an independent oracle.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.sim.helpers import tls_session
from vpa.sim import SimCluster
from vpa.sim.apiserver.schema import validate_and_prune
from vpa.sim.contracts import ApiError

REPO = Path(__file__).resolve().parents[3]
OWN = REPO / "vpa" / "crds" / "vpa-v1.yaml"
# Upstream's generated CRDs without their descriptions (API facts only), kept with the tests.
UPSTREAM = REPO / "tests" / "data" / "upstream-vpa-v1-crd-schema.yaml"


def _load(path: Path) -> dict[str, dict[str, Any]]:
    return {d["spec"]["names"]["kind"]: d for d in yaml.safe_load_all(path.read_text()) if d}


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _schema(crds: dict[str, dict[str, Any]], kind: str, version: str = "v1") -> dict[str, Any]:
    v = next(v for v in crds[kind]["spec"]["versions"] if v["name"] == version)
    schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
    return schema


VALID_VPAS: list[dict[str, Any]] = [
    {"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}},
    {
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
            "updatePolicy": {
                "updateMode": "InPlaceOrRecreate",
                "minReplicas": 1,
                "evictionRequirements": [
                    {"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}
                ],
            },
            "resourcePolicy": {
                "containerPolicies": [
                    {
                        "containerName": "*",
                        "mode": "Auto",
                        "minAllowed": {"cpu": "50m", "memory": 33554432},
                        "maxAllowed": {"cpu": 2, "memory": "4Gi"},
                        "controlledResources": ["cpu", "memory"],
                        "controlledValues": "RequestsOnly",
                    },
                    {"containerName": "sidecar", "mode": "Off"},
                ]
            },
            "recommenders": [{"name": "custom"}],
        },
        "status": {
            "recommendation": {
                "containerRecommendations": [
                    {
                        "containerName": "app",
                        "target": {"cpu": "250m", "memory": "256Mi"},
                        "lowerBound": {"cpu": "100m"},
                        "upperBound": {"cpu": "1"},
                        "uncappedTarget": {"cpu": "250m"},
                    }
                ]
            },
            "conditions": [
                {
                    "type": "RecommendationProvided",
                    "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    },
]
INVALID_VPAS: list[tuple[str, dict[str, Any]]] = [
    (
        "spec.updatePolicy.updateMode",
        {
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "w"},
                "updatePolicy": {"updateMode": "Sometimes"},
            }
        },
    ),
    ("spec.targetRef", {"spec": {}}),
    ("spec.targetRef.name", {"spec": {"targetRef": {"kind": "Deployment"}}}),
    (
        "spec.updatePolicy.evictAfterOOMSeconds",
        {
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "w"},
                "updatePolicy": {"evictAfterOOMSeconds": 0},
            }
        },
    ),
    (
        "spec.resourcePolicy.containerPolicies[0].controlledValues",
        {
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "w"},
                "resourcePolicy": {"containerPolicies": [{"containerName": "a", "controlledValues": "All"}]},
            }
        },
    ),
    (
        "spec.resourcePolicy.containerPolicies[0].mode",
        {
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "w"},
                "resourcePolicy": {"containerPolicies": [{"containerName": "a", "mode": "Maybe"}]},
            }
        },
    ),
    (
        "spec.recommenders[0].name",
        {"spec": {"targetRef": {"kind": "Deployment", "name": "w"}, "recommenders": [{}]}},
    ),
    ("spec.targetRef.name", {"spec": {"targetRef": {"kind": "Deployment", "name": 7}}}),
    ("spec", {"metadata": {"name": "x"}}),
]
VALID_CHECKPOINT: dict[str, Any] = {
    "spec": {"vpaObjectName": "web", "containerName": "app"},
    "status": {
        "version": "v3",
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "totalSamplesCount": 10,
        "firstSampleStart": "2026-01-01T00:00:00Z",
        "lastSampleStart": "2026-01-01T00:01:00Z",
        "cpuHistogram": {
            "referenceTimestamp": "2026-01-01T00:00:00Z",
            "bucketWeights": {"1": 10000},
            "totalWeight": 1.5,
        },
        "memoryHistogram": {
            "referenceTimestamp": "2026-01-01T00:00:00Z",
            "bucketWeights": {"3": 5},
            "totalWeight": 2,
        },
    },
}


def _obj(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    out = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "default"},
    }
    out.update(copy.deepcopy(body))
    return out


# The fields of upstream's open proposals that our CRD serves ahead of upstream (the AEPs' API shapes).
# They are the only difference allowed against upstream's generated schema.
AEP_FIELDS: list[tuple[str, ...]] = [
    ("spec", "updatePolicy", "initialDelaySeconds"),  # AEP-9936
    ("spec", "resourcePolicy", "containerPolicies", "recommendationPercentiles"),  # AEP-9970
    ("spec", "scope"),  # AEP-10031
    ("status", "groups"),  # AEP-10031
]


def _without(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """`schema` (a v1 version's `schema`) without the property at `path`, following `items` of arrays."""
    out = copy.deepcopy(schema)
    node = out["openAPIV3Schema"]
    for name in path[:-1]:
        node = node["properties"][name]
        if node.get("type") == "array":
            node = node["items"]
    assert path[-1] in node["properties"], path
    del node["properties"][path[-1]]
    return out


def test_own_crds_match_upstream_names_versions_columns_and_schemas() -> None:
    own = _load(OWN)
    assert set(own) == {"VerticalPodAutoscaler", "VerticalPodAutoscalerCheckpoint"}
    assert own["VerticalPodAutoscaler"]["spec"]["names"]["shortNames"] == ["vpa"]
    assert own["VerticalPodAutoscalerCheckpoint"]["spec"]["names"]["shortNames"] == ["vpacheckpoint"]
    up = _load(UPSTREAM)
    for kind in own:
        a, b = own[kind]["spec"], up[kind]["spec"]
        assert a["group"] == b["group"] == "autoscaling.k8s.io"
        assert a["names"] == b["names"]
        assert a["scope"] == b["scope"]
        for va, vb in zip(a["versions"], b["versions"], strict=True):
            assert (va["name"], va["served"], va["storage"]) == (vb["name"], vb["served"], vb["storage"])
            assert va.get("subresources") == vb.get("subresources")
            assert _strip(va.get("additionalPrinterColumns")) == _strip(vb.get("additionalPrinterColumns"))
            schema = va["schema"]
            if kind == "VerticalPodAutoscaler" and va["name"] == "v1":
                for path in AEP_FIELDS:
                    schema = _without(schema, path)
            assert _strip(schema) == _strip(vb["schema"]), f"{kind} {va['name']} schema differs"
        # Our descriptions are our own and short.
        own_text = yaml.safe_dump(a)
        assert "VerticalPodAutoscaler is the configuration for a vertical pod" not in own_text


def test_the_upstream_schema_kept_with_the_tests_carries_no_prose() -> None:
    """Only the API facts of upstream's CRDs are kept in the repository, never their descriptions."""
    text = UPSTREAM.read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "description" not in body
    assert set(_load(UPSTREAM)) == {"VerticalPodAutoscaler", "VerticalPodAutoscalerCheckpoint"}


@pytest.mark.parametrize("body", VALID_VPAS, ids=["minimal", "full"])
def test_valid_vpa_accepted_by_both(body: dict[str, Any]) -> None:
    for path in (OWN, UPSTREAM):
        obj = _obj("VerticalPodAutoscaler", body)
        assert validate_and_prune(_schema(_load(path), "VerticalPodAutoscaler"), obj) == []
        assert obj["spec"] == body["spec"]  # nothing pruned from a valid object


@pytest.mark.parametrize(("field", "body"), INVALID_VPAS, ids=[f for f, _ in INVALID_VPAS])
def test_invalid_vpa_rejected_by_both_naming_the_field(field: str, body: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for path in (OWN, UPSTREAM):
        schema = _schema(_load(path), "VerticalPodAutoscaler")
        errors = validate_and_prune(schema, _obj("VerticalPodAutoscaler", body))
        assert errors, f"{path.name} accepted an invalid object"
        assert any(f == field for f, _, _ in errors), errors
        # Independent oracle: plain JSON-schema validation agrees that the object is invalid.
        assert not jsonschema.Draft4Validator(_jsonschema(schema)).is_valid(
            _obj("VerticalPodAutoscaler", body)
        )


def test_valid_examples_pass_jsonschema_oracle() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for path in (OWN, UPSTREAM):
        crds = _load(path)
        for body in VALID_VPAS:
            jsonschema.Draft4Validator(_jsonschema(_schema(crds, "VerticalPodAutoscaler"))).validate(
                _obj("VerticalPodAutoscaler", body)
            )
        checkpoint = _obj("VerticalPodAutoscalerCheckpoint", VALID_CHECKPOINT)
        schema = _schema(crds, "VerticalPodAutoscalerCheckpoint")
        jsonschema.Draft4Validator(_jsonschema(schema)).validate(checkpoint)
        assert validate_and_prune(schema, checkpoint) == []


def _jsonschema(node: Any) -> Any:
    """OpenAPI v3 structural schema → JSON schema (int-or-string, nullable)."""
    if isinstance(node, list):
        return [_jsonschema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes") and k != "format"}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("anyOf", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


async def test_crd_lifecycle_in_the_server() -> None:
    async with SimCluster(behaviour=False, vpa_crds=False) as cluster:
        store = cluster.store
        assert store.registry.get("verticalpodautoscalers.autoscaling.k8s.io") is None
        for doc in _load(OWN).values():
            await store.create("customresourcedefinitions.apiextensions.k8s.io", doc)
        crd = store.get(
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
            "verticalpodautoscalers.autoscaling.k8s.io",
        )
        assert crd is not None
        assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
        rt = store.registry.get("verticalpodautoscalers.autoscaling.k8s.io")
        assert rt is not None
        assert rt.versions == ("v1",)  # v1beta2 is not served
        await store.create(
            "verticalpodautoscalers.autoscaling.k8s.io", _obj("VerticalPodAutoscaler", VALID_VPAS[0])
        )
        # Deleting the CRD removes its objects and its resource.
        await store.delete(
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
            "verticalpodautoscalers.autoscaling.k8s.io",
        )
        assert store.registry.get("verticalpodautoscalers.autoscaling.k8s.io") is None
        with pytest.raises(ApiError) as err:
            store.list("verticalpodautoscalers.autoscaling.k8s.io")
        assert err.value.code == 404
        # A CRD with a scale subresource serves /scale with the declared paths.
        scaled = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {
                            "status": {},
                            "scale": {
                                "specReplicasPath": ".spec.size",
                                "statusReplicasPath": ".status.size",
                                "labelSelectorPath": ".status.selector",
                            },
                        },
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                    "status": {
                                        "type": "object",
                                        "properties": {
                                            "size": {"type": "integer"},
                                            "selector": {"type": "string"},
                                        },
                                    },
                                },
                            }
                        },
                    }
                ],
            },
        }
        await store.create("customresourcedefinitions.apiextensions.k8s.io", scaled)
        w = await store.create(
            "widgets.example.com",
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "namespace": "default"},
                "spec": {"size": 2},
            },
        )
        await store.update(
            "widgets.example.com", dict(w, status={"size": 2, "selector": "app=w"}), subresource="status"
        )
        async with tls_session(cluster) as http:
            async with http.get("/apis/example.com/v1/namespaces/default/widgets/w/scale") as r:
                scale = await r.json()
            assert scale["spec"] == {"replicas": 2}
            assert scale["status"] == {"replicas": 2, "selector": "app=w"}
            async with http.patch(
                "/apis/example.com/v1/namespaces/default/widgets/w/scale",
                data=b'{"spec":{"replicas":5}}',
                headers={"Content-Type": "application/merge-patch+json"},
            ) as r:
                assert r.status == 200
        widget = store.get("widgets.example.com", "default", "w")
        assert widget is not None
        assert widget["spec"]["size"] == 5
        assert widget["metadata"]["generation"] == 2


GADGETS = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


async def test_crd_files_are_installed_at_start_and_served(tmp_path: Path) -> None:
    crd_file = tmp_path / "crds.yaml"
    crd_file.write_text(GADGETS)
    async with (
        SimCluster(behaviour=False, vpa_crds=False, crd_files=[crd_file]) as cluster,
        tls_session(cluster) as http,
    ):
        async with http.get("/apis/example.com/v1") as r:
            assert r.status == 200
            served = {res["name"]: res["namespaced"] for res in (await r.json())["resources"]}
        # The status subresource exists only where the CRD declares it, as in kube-apiserver.
        assert served == {"gadgets": True, "gizmos": False, "gizmos/status": False}
        gadgets = "/apis/example.com/v1/namespaces/default/gadgets"
        body = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"n": 1}}
        async with http.post(gadgets, json=body) as r:
            assert r.status == 201, await r.text()
        async with http.get(f"{gadgets}/g") as r:
            assert (await r.json())["spec"] == {"n": 1}
        async with http.get(f"{gadgets}/g/status") as r:
            assert r.status == 404
        gizmo = {
            "apiVersion": "example.com/v1",
            "kind": "Gizmo",
            "metadata": {"name": "z"},
            "status": {"ok": 1},
        }
        async with http.post("/apis/example.com/v1/gizmos", json=gizmo) as r:
            assert r.status == 201
            assert "status" not in await r.json()  # dropped on create: the status subresource owns it
        async with http.patch(
            "/apis/example.com/v1/gizmos/z/status",
            data=b'{"status": {"ok": 2}}',
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["status"] == {"ok": 2}


TARGET = {"kind": "Deployment", "name": "web"}
PERCENTILES = "spec.resourcePolicy.containerPolicies[0].recommendationPercentiles"


def _percentiles(value: dict[str, Any]) -> dict[str, Any]:
    return {"containerPolicies": [{"containerName": "app", "recommendationPercentiles": value}]}


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"updatePolicy": {"updateMode": "InPlace", "initialDelaySeconds": 3600}}, None),
        ({"updatePolicy": {"updateMode": "InPlace", "initialDelaySeconds": 0}},
         "spec.updatePolicy.initialDelaySeconds"),
        ({"updatePolicy": {"updateMode": "InPlace", "initialDelaySeconds": 7776001}},
         "spec.updatePolicy.initialDelaySeconds"),
        ({"resourcePolicy": _percentiles({"cpu": {"target": 95}, "memory": {"target": 1}})}, None),
        ({"resourcePolicy": _percentiles({"cpu": {"target": 101}})}, f"{PERCENTILES}.cpu.target"),
        ({"resourcePolicy": _percentiles({"memory": {}})}, f"{PERCENTILES}.memory.target"),
        ({"scope": "nvidia.com/gpu.present"}, None),
    ],
)
def test_aep_fields_are_served_not_pruned(spec: dict[str, Any], error: str | None) -> None:
    body = {"spec": {"targetRef": TARGET, **spec}}
    obj = _obj("VerticalPodAutoscaler", body)
    pruned: list[str] = []
    errors = validate_and_prune(_schema(_load(OWN), "VerticalPodAutoscaler"), obj, pruned)
    assert pruned == []
    assert [f for f, _, _ in errors if f != "<nil>"] == ([] if error is None else [error])
    assert obj["spec"] == body["spec"]


def test_status_groups_are_served_not_pruned() -> None:
    falco = [{"containerName": "falco", "target": {"cpu": "500m"}}]
    status = {"groups": [{"scopeValue": "true", "containerRecommendations": falco},
                         {"scopeValue": "__absent__", "containerRecommendations": []}]}  # fmt: skip
    obj = _obj("VerticalPodAutoscaler", {"spec": {"targetRef": TARGET}, "status": status})
    pruned: list[str] = []
    assert validate_and_prune(_schema(_load(OWN), "VerticalPodAutoscaler"), obj, pruned) == []
    assert pruned == []
    assert obj["status"] == status
