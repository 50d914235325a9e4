"""`vpa run`'s start-up checks come before any side effect (issue 45, item 3 and "Also found"): certificate
files given but missing or not PEM, and a webhook or metrics port that is taken, are one line naming the flag
and the file, exit 2 — and nothing was written to the cluster (no certificate Secret, no webhook
configuration)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli.helpers import SimProcess, api_get, vpa

SECRET = "/api/v1/namespaces/kube-system/secrets/vpa-webhook-certs"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = SimProcess(tmp_path_factory.mktemp("sim"), "--no-behaviour")
    yield process
    process.stop()


def _nothing_written(sim: SimProcess) -> None:
    assert api_get(sim.kubeconfig, SECRET)[0] == 404
    status, body = api_get(sim.kubeconfig, WEBHOOKS)
    assert status == 200
    assert body["items"] == []


def _run(sim: SimProcess, *flags: str) -> tuple[int, str]:
    result = vpa(["run", "--kubeconfig", str(sim.kubeconfig), "--address=127.0.0.1:0", *flags], timeout=40)
    return result.returncode, result.stderr


def test_certificate_files_that_do_not_exist_are_refused(sim: SimProcess) -> None:
    code, err = _run(sim, "--port=0", "--tls-cert-file=/nonexistent/c.pem",
                     "--tls-private-key=/nonexistent/k.pem")
    assert code == 2, err
    assert "--tls-cert-file /nonexistent/c.pem" in err
    assert "--tls-private-key /nonexistent/k.pem" in err
    assert err.count("\n") == 1
    _nothing_written(sim)


def test_one_certificate_file_missing_is_named(sim: SimProcess, tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    code, err = _run(sim, "--port=0", f"--tls-cert-file={cert}", f"--tls-private-key={tmp_path / 'k.pem'}")
    assert code == 2
    assert f"--tls-private-key {tmp_path / 'k.pem'}: no such file" in err
    _nothing_written(sim)


@pytest.mark.parametrize("which", ["cert", "key"])
def test_a_file_that_is_not_pem_is_named_with_its_flag(sim: SimProcess, tmp_path: Path, which: str) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    (cert if which == "cert" else key).write_bytes(b"\x00\x01 binary, not PEM")
    code, err = _run(sim, "--port=0", f"--tls-cert-file={cert}", f"--tls-private-key={key}")
    assert code == 2
    flag, path = ("--tls-cert-file", cert) if which == "cert" else ("--tls-private-key", key)
    assert f"{flag} {path}: not a PEM" in err
    assert "_ssl.c" not in err
    _nothing_written(sim)


def test_a_pair_that_does_not_load_names_both_files(sim: SimProcess, tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    code, err = _run(sim, "--port=0", f"--tls-cert-file={cert}", f"--tls-private-key={key}")
    assert code == 2
    assert f"--tls-cert-file {cert} / --tls-private-key {key}" in err
    assert "PEM lib" not in err


@pytest.mark.parametrize("flag", ["--port", "--address"])
def test_a_port_in_use_fails_before_anything_is_written(sim: SimProcess, flag: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if flag == "--port":
            code, err = _run(sim, f"--port={port}")
        else:
            code, err = _run(sim, "--port=0", f"--address=127.0.0.1:{port}")
    assert code == 2, err
    assert f"{flag} " in err
    assert str(port) in err
    assert "cannot listen" in err
    _nothing_written(sim)
