"""Quantities as kubectl prints them in every human-facing output (issue 45): `vpa replay --output table`
and `vpa report` (table) show CPU as `1737m` or `2`, never `1.737` cores; JSON keeps exact numbers beside
the quantity strings. (The HTML page: tests/integration/app/test_report_page.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.cli.helpers import SimProcess, vpa

# A CPU amount in cores with a fraction (`1.737`, `0.25`) that is not a memory amount (`2.92Gi`).
_FRACTIONAL_CORES = re.compile(r"(?<![\w.])-?\+?\d+\.\d+(?![\d.]*(?:Ki|Mi|Gi|Ti))\b")


def test_replay_table_prints_cpu_in_millicores(tmp_path: Path) -> None:
    trace = tmp_path / "usage.csv"
    rows = [f"{1767225600 + i * 60},app,1.5,{300 * 2**20},2,512Mi" for i in range(200)]
    trace.write_text("timestamp,container,cpu_cores,memory_bytes,cpu_request,memory_request\n"
                     + "\n".join(rows) + "\n")
    result = vpa(["replay", str(trace), "--output", "table"])
    assert result.returncode == 0, result.stderr
    table = result.stdout.splitlines()[1:3]
    assert re.search(r"\b1[0-9]{3}m\b", table[1]), table
    assert _FRACTIONAL_CORES.search("\n".join(table)) is None, table
    assert " 2 " in table[1]  # the request of 2 cores, as kubectl prints it


def test_report_table_prints_kubectl_quantities_and_json_exact_numbers(tmp_path: Path) -> None:
    sim = SimProcess(tmp_path, "--nodes", "1")
    try:
        kubeconfig = str(sim.kubeconfig)
        manifest = tmp_path / "app.yaml"
        manifest.write_text(
            "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\n"
            "metadata: {name: web, namespace: default}\n"
            "spec: {targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}}\n")
        status = {"recommendation": {"containerRecommendations": [{
            "containerName": "app", "target": {"cpu": "25m", "memory": "262144k"},
            "lowerBound": {"cpu": "25m", "memory": "256Mi"},
            "upperBound": {"cpu": "1500m", "memory": "1Gi"}}]}}
        kubectl = str(Path(sys.executable).parent / "kubectl")
        subprocess.run([kubectl, "--kubeconfig", kubeconfig, "apply", "-f", str(manifest)], check=True,
                       capture_output=True, timeout=60)
        subprocess.run([kubectl, "--kubeconfig", kubeconfig, "patch", "vpa", "web", "--subresource=status",
                        "--type=merge", "-p", json.dumps({"status": status})],
                       check=True, capture_output=True, timeout=60)
        table = vpa(["report", "--kubeconfig", kubeconfig])
        assert table.returncode == 0, table.stderr
        line = next(line for line in table.stdout.splitlines() if line.startswith("default "))
        assert "25m [25m-1500m]" in line
        assert "250Mi [256Mi-1Gi]" in line  # 262144k is 250Mi
        assert _FRACTIONAL_CORES.search(line) is None, line
        document = json.loads(vpa(["report", "--kubeconfig", kubeconfig, "--output=json"]).stdout)
        target = document["vpas"][0]["containers"][0]["target"]
        assert target == {"cpuMillicores": 25, "memoryBytes": 262144000,
                          "quantities": {"cpu": "25m", "memory": "250Mi"}}
    finally:
        sim.stop()
