"""What the API server lets an in-place resize change, from its version and from what it refused (issue 42).

Owns:
- `parse_git_version`: `/version`'s `gitVersion` (`v1.37.2`, `v1.36.0-beta.0+abc`, `v1.36.3-gke.100`) to
  `(major, minor)`, None when it is not a Kubernetes version;
- `ResizeFeatures` and `features_for_version`: which parts of a pod the server's release resizes by default
  — pod-level `spec.resources` (`InPlacePodLevelResourcesVerticalScaling`: alpha and off in 1.35, beta and
  on from 1.36) and non-sidecar init containers (`InPlacePodVerticalScalingInitContainers`: beta and on in
  1.36, GA in 1.37). Native sidecars and regular containers resize on every release the project supports,
  so neither depends on `InPlacePodVerticalScaling` (removed in 1.38); an unknown version is taken to be a
  supported one (1.36+), and a refusal then teaches otherwise;
- `with_override`: the updater's `--in-place-pod-level-resources` (`auto` = what the server says);
- `refused_feature`: which of the two a 422 from `pods/<name>/resize` says the server does not resize (the
  feature gate switched off on a release that has it, or an older release than detected), so the updater
  stops asking for the rest of the process instead of refusing pod after pod.

Must not: call the API, read the clock, or log (the updater asks `/version` and keeps the learned value).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import Final

Version = tuple[int, int]

POD_LEVEL_SINCE: Final[Version] = (1, 36)
"""`InPlacePodLevelResourcesVerticalScaling` is beta and on by default from 1.36 (alpha, off, in 1.35)."""
INIT_CONTAINERS_SINCE: Final[Version] = (1, 36)
"""`InPlacePodVerticalScalingInitContainers` is beta and on by default in 1.36, GA (locked on) in 1.37."""

_GIT_VERSION: Final = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?")

POD_LEVEL_REFUSAL: Final = "resize of pods with pod-level resources is forbidden"
"""kube-apiserver's `ValidatePodResize` text (1.35–1.38) when `InPlacePodLevelResourcesVerticalScaling` is
off: every resize of a pod with pod-level resources, of its containers too, is a 422."""
INIT_CONTAINER_REFUSALS: Final = (
    "resources for non-sidecar init containers are immutable",
    "only cpu and memory resources for sidecar containers are mutable",
)
"""The same function's texts (422) when `InPlacePodVerticalScalingInitContainers` is off; the second one is
older releases' wording, which `vpa sim` still answers below 1.36."""


def parse_git_version(text: str) -> Version | None:
    """`(major, minor)` of a `gitVersion`; None when `text` is not one."""
    match = _GIT_VERSION.fullmatch(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True, slots=True)
class ResizeFeatures:
    """What in-place resizes may change on this server besides regular containers and native sidecars.

    The default is the conservative one (neither): the pure logic resizes such pods only when told.
    """

    pod_level: bool = False
    """Pod-level `spec.resources` (and any resize of a pod that has them)."""
    init_containers: bool = False
    """Non-sidecar init containers' `resources`."""
    version: Version | None = None
    """The version these were read from; None when it was not known."""

    def describe(self) -> str:
        version = "unknown" if self.version is None else f"{self.version[0]}.{self.version[1]}"
        pod_level = "resized" if self.pod_level else "not resized"
        init = "resized" if self.init_containers else "not resized"
        return f"kubernetes {version}: pod-level resources {pod_level}, plain init containers {init} in place"


def features_for_version(version: Version | None) -> ResizeFeatures:
    """What a release resizes in place with its default feature gates. Unknown (None): a release the
    project supports (1.36+), so both; the first refusal corrects it (`refused_feature`)."""
    if version is None:
        return ResizeFeatures(pod_level=True, init_containers=True, version=None)
    return ResizeFeatures(
        pod_level=version >= POD_LEVEL_SINCE,
        init_containers=version >= INIT_CONTAINERS_SINCE,
        version=version,
    )


def with_override(features: ResizeFeatures, pod_level: bool | None) -> ResizeFeatures:
    """`--in-place-pod-level-resources`: None (`auto`) keeps what the server says; true or false wins."""
    if pod_level is None or pod_level == features.pod_level:
        return features
    return replace(features, pod_level=pod_level)


class Refused(enum.StrEnum):
    POD_LEVEL = "PodLevelResources"
    INIT_CONTAINERS = "InitContainers"


def refused_feature(status: int, message: str) -> Refused | None:
    """Which resize feature a refusal of `pods/<name>/resize` says the server lacks, if any: only a 422
    (Invalid) with kube-apiserver's own text counts, never a 403, 409 or transient error."""
    if status != 422:
        return None
    if POD_LEVEL_REFUSAL in message:
        return Refused.POD_LEVEL
    if any(text in message for text in INIT_CONTAINER_REFUSALS):
        return Refused.INIT_CONTAINERS
    return None


def without(features: ResizeFeatures, refused: Refused) -> ResizeFeatures:
    """`features` after the server refused `refused`: it stays off for the rest of the process."""
    if refused is Refused.POD_LEVEL:
        return replace(features, pod_level=False)
    return replace(features, init_containers=False)
