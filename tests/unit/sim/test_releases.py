"""Which release `vpa sim --control-plane=kubernetes` runs and where its binaries are, and the one-line
errors that say how to build one (`vpa.sim.kubernetes.releases`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vpa.sim.kubernetes.releases import (
    BIN_ENV,
    CACHE_ENV,
    CONTROL_PLANE,
    DEFAULT_RELEASE,
    HOLLOW_NODE,
    PRE_RELEASES,
    RELEASES,
    STABLE_RELEASES,
    ReleaseError,
    locate,
    resolve,
)


def _build(folder: Path, names: tuple[str, ...]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cluster"))
    monkeypatch.delenv(BIN_ENV, raising=False)
    return tmp_path / "cluster"


def test_supported_releases_follow_upstream_vpa_1_8() -> None:
    minors = {r.split(".")[1] for r in RELEASES}
    assert minors <= {"36", "37", "38"}
    assert {"36", "37", "38"} <= minors
    assert DEFAULT_RELEASE == "v1.37.2"
    # the default is the newest stable release; a pre-release is built and run only when named
    assert STABLE_RELEASES[0] == DEFAULT_RELEASE
    assert all("-" not in r for r in STABLE_RELEASES)
    assert PRE_RELEASES == ("v1.38.0-beta.0",)
    assert RELEASES == STABLE_RELEASES + PRE_RELEASES


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("v1.37.2", "v1.37.2"),
        ("1.37.2", "v1.37.2"),
        ("1.37", "v1.37.2"),
        ("v1.36", "v1.36.3"),
        (" v1.36.3 ", "v1.36.3"),
        ("v1.38.0-beta.0", "v1.38.0-beta.0"),
        ("1.38", "v1.38.0-beta.0"),
        ("v1.38", "v1.38.0-beta.0"),
    ],
)
def test_resolve(text: str, want: str) -> None:
    assert resolve(text) == want


@pytest.mark.parametrize("text", ["1.35", "v1.35.4", "1.37.1", "v1.38.0-beta.1", "v1.38.0", "latest", ""])
def test_resolve_refuses_with_one_line_naming_the_flag(text: str) -> None:
    with pytest.raises(ReleaseError) as err:
        resolve(text)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"--kubernetes-version={text}:")
    assert "v1.37.2" in message


def test_requested_release_is_found_in_its_cache_folder(cache: Path) -> None:
    built = _build(cache / "v1.36.3" / "bin", CONTROL_PLANE)
    assert locate("1.36") == ("v1.36.3", built)


def test_no_release_requested_takes_the_newest_built(cache: Path) -> None:
    _build(cache / "v1.36.3" / "bin", (*CONTROL_PLANE, HOLLOW_NODE))
    assert locate(None)[0] == "v1.36.3"
    _build(cache / "v1.37.2" / "bin", CONTROL_PLANE)
    assert locate(None)[0] == "v1.37.2"
    # hollow nodes need the hollow kubelet too: v1.37.2 lacks it, v1.36.3 has it
    assert locate(None, hollow=True)[0] == "v1.36.3"


def test_a_built_pre_release_runs_only_when_named(cache: Path) -> None:
    beta = _build(cache / "v1.38.0-beta.0" / "bin", (*CONTROL_PLANE, HOLLOW_NODE))
    assert locate("v1.38.0-beta.0", hollow=True) == ("v1.38.0-beta.0", beta)
    assert locate("1.38") == ("v1.38.0-beta.0", beta)
    # nothing stable built: the default is still v1.37.2 (and says how to build it), not the beta
    with pytest.raises(ReleaseError) as err:
        locate(None)
    assert str(err.value).startswith("Kubernetes v1.37.2 is not built")
    _build(cache / "v1.36.3" / "bin", CONTROL_PLANE)
    assert locate(None)[0] == "v1.36.3"


@pytest.mark.parametrize(
    ("requested", "built", "hollow", "want"),
    [
        ("v1.37.2", (), False, "run `make control-plane KUBERNETES_VERSION=v1.37.2`"),
        (None, (), False, "run `make control-plane KUBERNETES_VERSION=v1.37.2`"),
        ("1.36", CONTROL_PLANE[:2], False, "run `make control-plane KUBERNETES_VERSION=v1.36.3`"),
        ("v1.37.2", CONTROL_PLANE, True, "(hollow-node missing in"),
        ("1.38", (), True, "run `make control-plane KUBERNETES_VERSION=v1.38.0-beta.0`"),
    ],
)
def test_not_built_is_one_line_saying_how_to_build(
    cache: Path, requested: str | None, built: tuple[str, ...], hollow: bool, want: str
) -> None:
    release = resolve(requested) if requested else DEFAULT_RELEASE
    _build(cache / release / "bin", built)
    with pytest.raises(ReleaseError) as err:
        locate(requested, hollow=hollow)
    message = str(err.value)
    assert "\n" not in message
    assert want in message
    assert message.startswith(f"Kubernetes {release} is not built")


def test_control_plane_bin_env_is_used_as_is(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _build(tmp_path / "mine", CONTROL_PLANE)
    monkeypatch.setenv(BIN_ENV, str(folder))
    assert locate(None) == ("", folder)
    assert locate("1.36") == ("v1.36.3", folder)
    with pytest.raises(ReleaseError) as err:
        locate(None, hollow=True)
    assert f"hollow-node not found in {folder}" in str(err.value)
    assert "\n" not in str(err.value)


def test_explicit_folder_wins_over_env(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BIN_ENV, str(tmp_path / "nothing-here"))
    folder = _build(tmp_path / "given", (*CONTROL_PLANE, HOLLOW_NODE))
    assert locate("v1.37.2", folder, hollow=True) == ("v1.37.2", folder)
