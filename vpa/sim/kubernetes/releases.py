"""The Kubernetes releases `vpa sim --control-plane=kubernetes` can run, and where their binaries are.

Owns: the list of releases `hack/cluster/build.sh` builds (one Go module folder each under `hack/cluster/`;
support follows upstream VPA 1.8, Kubernetes 1.36-1.38), which of them are pre-releases (run only when
asked for by name), reading `--kubernetes-version` (`v1.37.2`, `1.37`, `v1.37`), the build cache layout
(`.tools/cluster/<release>/bin`, or `$VPA_CLUSTER_DIR/<release>/bin`), `$VPA_CONTROL_PLANE_BIN` (one folder
of binaries, used as is), choosing the newest built stable release when none is asked for, and the
one-line errors that say how to build a release.

Must not: build anything or start processes.
"""

from __future__ import annotations

import os
from pathlib import Path

# Stable releases, newest first; the first is the default, and CI tests them. Kept in step with `releases`
# in hack/cluster/build.sh.
STABLE_RELEASES = ("v1.37.2", "v1.36.3")
# Built and run only when named (`--kubernetes-version=v1.38.0-beta.0` or `1.38`), never picked by default;
# CI does not run them. v1.38's go.mod needs Go 1.27: build.sh sets GOTOOLCHAIN for it (docs/install.md).
PRE_RELEASES = ("v1.38.0-beta.0",)
RELEASES = STABLE_RELEASES + PRE_RELEASES
DEFAULT_RELEASE = STABLE_RELEASES[0]
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
HOLLOW_NODE = "hollow-node"
BIN_ENV = "VPA_CONTROL_PLANE_BIN"
CACHE_ENV = "VPA_CLUSTER_DIR"


class ReleaseError(Exception):
    """A release is unknown or not built; the message is one line saying what to run."""


def cache_dir() -> Path:
    """`$VPA_CLUSTER_DIR`, else `.tools/cluster` of the checkout this package runs from."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / ".tools" / "cluster"


def resolve(text: str) -> str:
    """The release `text` names: a full `v1.37.2` (`v1.38.0-beta.0`), or a minor `1.37`/`v1.37` for its
    release here."""
    t = text.strip()
    want = t if t.startswith("v") else f"v{t}"
    if want in RELEASES:
        return want
    for release in RELEASES:
        if ".".join(release.split(".")[:2]) == want:
            return release
    raise ReleaseError(
        f"--kubernetes-version={text}: not a release this project builds ({', '.join(RELEASES)})"
    )


def build_hint(release: str) -> str:
    return f"make control-plane KUBERNETES_VERSION={release}"


def missing(bin_dir: Path, hollow: bool) -> list[str]:
    names = CONTROL_PLANE + ((HOLLOW_NODE,) if hollow else ())
    return [n for n in names if not _executable(bin_dir / n)]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate(requested: str | None, bin_dir: Path | None = None, *, hollow: bool = False) -> tuple[str, Path]:
    """The release to run and its binaries' folder, or ReleaseError (one line) saying how to build it.

    An explicit folder (`bin_dir`, else `$VPA_CONTROL_PLANE_BIN`) is used as is. Otherwise the requested
    release's cache folder; with no release requested, the newest stable release that is built (a
    pre-release only when named).
    """
    explicit = bin_dir or (Path(os.environ[BIN_ENV]) if os.environ.get(BIN_ENV) else None)
    release = resolve(requested) if requested else None
    if explicit is not None:
        lacking = missing(explicit, hollow)
        if lacking:
            raise ReleaseError(
                f"{lacking[0]} not found in {explicit} (build it with "
                f"`{build_hint(release or DEFAULT_RELEASE)}` and point ${BIN_ENV} at "
                ".tools/cluster/<release>/bin, or unset it)"
            )
        return release or "", explicit
    if release is None:
        for candidate in STABLE_RELEASES:
            if not missing(cache_dir() / candidate / "bin", hollow):
                return candidate, cache_dir() / candidate / "bin"
        release = DEFAULT_RELEASE
    where = cache_dir() / release / "bin"
    lacking = missing(where, hollow)
    if lacking:
        raise ReleaseError(
            f"Kubernetes {release} is not built ({lacking[0]} missing in {where}): "
            f"run `{build_hint(release)}`"
        )
    return release, where
