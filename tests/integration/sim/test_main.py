"""`vpa sim` as a separate process: it prints its URL and kubeconfig, serves kubectl, exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import ssl
import sys
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from tests.integration.webhook_fake import FakeWebhook, patching_webhook
from vpa.sim.main import build_parser

REPO = Path(__file__).resolve().parents[3]
KUBECTL = REPO / ".venv" / "bin" / "kubectl"


async def _start(tmp_path: Path, *extra: str) -> tuple[asyncio.subprocess.Process, dict[str, str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vpa.sim.main",
        "--port",
        "0",
        "--kubeconfig-out",
        str(tmp_path / "kc"),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout is not None
    info: dict[str, str] = {}
    while "kubeconfig" not in info:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, (await proc.stderr.read()).decode()  # type: ignore[union-attr]
        key, _, value = line.decode().strip().partition(": ")
        info[key] = value
    return proc, info


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl not installed")
async def test_vpa_sim_process_serves_kubectl_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc, info = await _start(tmp_path, "--no-behaviour", "--time-scale", "0", "--kubernetes-version", "1.32")
    try:
        assert info["API server"].startswith("https://127.0.0.1:")
        assert Path(info["kubeconfig"]) == tmp_path / "kc"
        env = dict(os.environ, HOME=str(tmp_path))
        kubectl = await asyncio.create_subprocess_exec(
            str(KUBECTL),
            "--kubeconfig",
            info["kubeconfig"],
            "get",
            "ns",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(kubectl.communicate(), 60)
        assert kubectl.returncode == 0, err.decode()
        assert "kube-system" in out.decode()
        kubectl = await asyncio.create_subprocess_exec(
            str(KUBECTL),
            "--kubeconfig",
            info["kubeconfig"],
            "version",
            "-o",
            "json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, _ = await asyncio.wait_for(kubectl.communicate(), 60)
        assert '"gitVersion": "v1.32.0"' in out.decode()
    finally:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 15)
    assert rc == 0
    assert time.monotonic() - started < 5


def test_flags_parse() -> None:
    args = build_parser().parse_args(
        [
            "--nodes",
            "5",
            "--node-cpu",
            "8",
            "--node-memory",
            "32Gi",
            "--time-scale",
            "60",
            "--kubernetes-version",
            "1.36",
            "--crd",
            "a.yaml",
            "--crd",
            "b.yaml",
            "--no-vpa-crds",
            "--webhook-service",
            "kube-system/vpa-webhook=127.0.0.1:8000",
        ]
    )
    assert args.nodes == 5
    assert args.time_scale == 60.0
    assert [str(p) for p in args.crd] == ["a.yaml", "b.yaml"]
    assert args.no_vpa_crds
    assert args.webhook_service == [(("kube-system", "vpa-webhook"), ("127.0.0.1", 8000))]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--webhook-service", "nonsense"])
    assert args.kubernetes_version == "1.36"
    assert args.kubelet == "sim"
    assert build_parser().parse_args([]).kubernetes_version is None  # each control plane has its default
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--kubelet", "docker"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", "now"),
        ("2026-03-01T12:00:00Z", 1_772_366_400.0),
        ("2026-03-01T13:00:00+01:00", 1_772_366_400.0),
    ],
)
def test_start_time_parses_now_and_rfc3339(text: str, expected: object) -> None:
    assert build_parser().parse_args(["--start-time", text]).start_time == expected


@pytest.mark.parametrize("text", ["yesterday", "2026-03-01T12:00:00", ""])
def test_start_time_rejects_other_text(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--start-time", text])
    assert exc.value.code == 2
    assert "--start-time" in capsys.readouterr().err


async def _clock(info: dict[str, str], tmp_path: Path) -> dict[str, float]:
    kubeconfig = yaml.safe_load((tmp_path / "kc").read_text())
    ca_pem = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s,
        s.get(f"{info['API server']}/sim/v1/clock") as r,
    ):
        body: dict[str, float] = await r.json()
        return body


@pytest.mark.parametrize(
    ("flags", "wall"),
    [
        (("--start-time", "now", "--time-scale", "1"), True),
        (("--start-time", "2030-01-01T00:00:00Z", "--time-scale", "0"), False),
        (("--time-scale", "0"), False),
    ],
)
async def test_start_time_sets_the_virtual_clock(tmp_path: Path, flags: tuple[str, ...], wall: bool) -> None:
    proc, info = await _start(tmp_path, "--no-behaviour", *flags)
    try:
        await asyncio.sleep(1.0)
        clock = await _clock(info, tmp_path)
        if wall:
            # On wall time and staying there: a second later it still matches the wall clock.
            assert abs(clock["now"] - time.time()) < 0.5
        elif "--start-time" in flags:
            assert clock["now"] == 1_893_456_000.0
        else:
            assert clock["now"] == 1_767_225_600.0  # the default start, 2026-01-01T00:00:00Z
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 15)
    assert rc == 0


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl not installed")
async def test_vpa_sim_with_cluster_behaviour_and_clock_endpoints(tmp_path: Path) -> None:
    proc, info = await _start(tmp_path, "--nodes", "2", "--node-cpu", "2", "--time-scale", "0")
    try:
        env = dict(os.environ, HOME=str(tmp_path))
        kubectl = await asyncio.create_subprocess_exec(
            str(KUBECTL),
            "--kubeconfig",
            info["kubeconfig"],
            "get",
            "nodes",
            "-o",
            "name",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(kubectl.communicate(), 60)
        assert kubectl.returncode == 0, err.decode()
        assert len(out.decode().split()) == 2
        kubeconfig = yaml.safe_load((tmp_path / "kc").read_text())
        ca_pem = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as s:
            async with s.get(f"{info['API server']}/sim/v1/clock") as r:
                before = await r.json()
            assert before["timeScale"] == 0.0
            async with s.post(f"{info['API server']}/sim/v1/clock/advance", json={"seconds": 3600}) as r:
                after = await r.json()
            assert after["now"] == before["now"] + 3600
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 15)
    assert rc == 0


WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"""


async def test_vpa_sim_serves_crd_files_and_maps_webhook_services(tmp_path: Path) -> None:
    """`--crd FILE` kinds are served (discovery, create, get); `--webhook-service` maps a service webhook."""
    async with patching_webhook(
        lambda _: [{"op": "add", "path": "/metadata/labels", "value": {"labelled": "yes"}}],
        hosts=("127.0.0.1", "labeller.hooks.svc"),
    ) as hook:
        await _serves_crd_files_and_maps_webhook_services(tmp_path, hook)


async def _serves_crd_files_and_maps_webhook_services(tmp_path: Path, hook: FakeWebhook) -> None:
    hook_port = hook.port
    crd_file = tmp_path / "widgets.yaml"
    crd_file.write_text(WIDGET_CRD)
    proc, info = await _start(
        tmp_path,
        "--no-behaviour",
        "--time-scale",
        "0",
        "--crd",
        str(crd_file),
        "--webhook-service",
        f"hooks/labeller=127.0.0.1:{hook_port}",
    )
    try:
        kubeconfig = yaml.safe_load((tmp_path / "kc").read_text())
        ca_pem = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
        async with aiohttp.ClientSession(
            base_url=info["API server"], connector=aiohttp.TCPConnector(ssl=ctx)
        ) as s:
            async with s.get("/apis") as r:
                groups = {g["name"] for g in (await r.json())["groups"]}
            assert "example.com" in groups
            async with s.get("/apis/example.com/v1") as r:
                # No `subresources` in the CRD: no widgets/status (nor /scale), as kube-apiserver serves it.
                [res] = (await r.json())["resources"]
            assert (res["name"], res["kind"], res["namespaced"], res["shortNames"]) == (
                "widgets",
                "Widget",
                True,
                ["wd"],
            )
            path = "/apis/example.com/v1/namespaces/default/widgets"
            body = {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {"size": 3},
            }
            async with s.post(path, json=body) as r:
                assert r.status == 201, await r.text()
            async with s.get(f"{path}/w") as r:
                assert r.status == 200
                assert (await r.json())["spec"] == {"size": 3}
            # A webhook registered by service reference is sent to the mapped local address.
            config = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "labeller"},
                "webhooks": [
                    {
                        "name": "labeller.example.com",
                        "clientConfig": {
                            "service": {"namespace": "hooks", "name": "labeller", "path": "/mutate"},
                            "caBundle": hook.ca_bundle,
                        },
                        "rules": [
                            {
                                "apiGroups": ["example.com"],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["widgets"],
                            }
                        ],
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                    }
                ],
            }
            async with s.post(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", json=config
            ) as r:
                assert r.status == 201, await r.text()
            async with s.post(path, json=dict(body, metadata={"name": "w2"})) as r:
                assert r.status == 201, await r.text()
                assert (await r.json())["metadata"]["labels"] == {"labelled": "yes"}
        assert [r["request"]["resource"]["resource"] for r in hook.reviews] == ["widgets"]
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 15)
    assert rc == 0
