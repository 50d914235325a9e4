"""Admission scenarios: the webhook accepts a valid VPA and rejects invalid ones with its own message."""

from __future__ import annotations

import pytest

from e2e.conftest import MANIFESTS, Cluster, VpaRunFactory

# (manifest, what our message says, needs the InPlace gate off — only controllable on the simulator)
INVALID = [
    ("invalid-two-recommenders.yaml", "spec.recommenders: Too many: 2: must have at most 1 item", False),
    (
        "invalid-inplace-gate-off.yaml",
        "in order to use UpdateMode InPlace, you must enable feature gate InPlace",
        True,
    ),
]


@pytest.mark.parametrize(("manifest", "message", "gate_off"), INVALID, ids=[m for m, _, _ in INVALID])
def test_invalid_vpa_is_rejected_by_the_webhook(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str, manifest: str, message: str, gate_off: bool
) -> None:
    if gate_off:
        sim.require_sim("the installed vpa's feature gates are the chart's")
    vpa_run(feature_gates={"InPlace": False})
    # The same webhook accepts a valid object (so a rejection below is about the object).
    sim.apply_file("vpa-off.yaml", namespace)

    result = sim.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / manifest), check=False)
    assert result.returncode != 0, result.stdout
    assert 'admission webhook "vpa.k8s.io" denied the request' in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    name = manifest.removeprefix("invalid-").removesuffix(".yaml")
    assert sim.kubectl("get", "vpa", name, "-n", namespace, check=False).returncode != 0
