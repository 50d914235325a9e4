"""One AdmissionReview in, one verdict out.

Owns: `Admitter` (parse a review, decide, build the answer; never raises), `pod_identity` (the part of a raw
pod that decides which VPA controls it) and the patch memo. Pod CREATE: the pod's top-most controller
(`Targets`), the VPAs the shared cache's `target` index files under it, the target selectors, the
controlling VPA (`logic.matching`), the namespace's LimitRanges, the JSON patch (`logic.admission.patches`).
VPA CREATE/UPDATE: `logic.admission.validation` → allowed with the defaulting patch and warnings, or denied
with a 422 `Invalid` status naming the object and the fields.

Never the reason a pod cannot start: any exception while admitting a pod answers `allowed: true` with no
patch (logged, counted as `status="error"`).

Must not: do HTTP or TLS (that is `server`), make decisions itself (that is `vpa.logic`), await anything
but the targets' lookups.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import orjson
import structlog

from vpa.components.webhook.caches import NamespacesWithVpas
from vpa.components.webhook.metrics import AdmissionMetrics, ResourceLabel, Status
from vpa.kube.converting import ConversionError, pod_from_dict
from vpa.kube.eventing import EventRecorder, ObjectRef
from vpa.logic.admission.patches import AdmissionOptions, PodLevelInvalid, pod_patch, pod_shape
from vpa.logic.admission.validation import validate_vpa
from vpa.logic.initialdelay import in_initial_delay
from vpa.logic.limitranges import NamespaceLimits
from vpa.logic.matching import controlling_vpa
from vpa.logic.scope import is_scoped, node_of_daemonset_pod, scope_value, scoped_view
from vpa.model.clock import Clock
from vpa.model.features import FeatureGates
from vpa.model.pod import OwnerRef, PodView
from vpa.model.selector import Selector
from vpa.model.vpa import VPA_API_VERSION, TargetRef, VpaView

log = structlog.get_logger(__name__)

# The patch memo: entries are keyed on a 16-byte digest of the containers (never the containers themselves)
# and bounded in bytes; a patch larger than PATCH_MEMO_ENTRY_BYTES (absurdly long names) is not kept.
PATCH_MEMO_SIZE: Final = 4096
PATCH_MEMO_BYTES: Final = 8 * 1024 * 1024
PATCH_MEMO_ENTRY_BYTES: Final = 64 * 1024
_MEMO_ENTRY_OVERHEAD: Final = 512  # key tuple, digest, OrderedDict node: an entry's cost besides its patch
VPA_GROUP: Final = "autoscaling.k8s.io"
VPA_RESOURCE: Final = "verticalpodautoscalers"
REVIEW_V1: Final = "admission.k8s.io/v1"
POD_LEVEL_RESOURCES_REASON: Final = "PodLevelResourcesUnchanged"


class VpaIndex(Protocol):
    """What the admission path reads from the VPA cache (a `WatchCache[VpaView]` with a `target` index)."""

    def by_index(self, name: str, value: str) -> list[VpaView]: ...


class Targets(Protocol):
    async def top_most(self, pod: PodView) -> str | None: ...

    async def selector(self, namespace: str, target: TargetRef) -> Selector | None: ...


class NodeLabels(Protocol):
    """A Node's labels by name (gate DaemonSetScope); None when the node is not known."""

    def labels(self, name: str) -> Mapping[str, str] | None: ...


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer (→ HTTP 400)."""


@dataclasses.dataclass(slots=True)
class Verdict:
    allowed: bool = True
    patch: list[dict[str, Any]] | None = None
    warnings: tuple[str, ...] = ()
    status: dict[str, Any] | None = None
    outcome: Status = "skipped"
    resource: ResourceLabel = "unknown"


def pod_identity(raw: Mapping[str, Any], namespace: str) -> PodView:
    """The part of a raw pod that decides which VPA controls it: name, labels and controller owner.

    Cheaper than `pod_from_dict` (no containers); raises ConversionError for wrong types, as it does.
    """
    metadata = raw.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ConversionError("metadata", "expected an object")
    labels = metadata.get("labels")
    if labels is None:
        labels = {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConversionError("metadata.labels", "expected an object of strings")
    name, generate_name = metadata.get("name") or "", metadata.get("generateName") or ""
    if not isinstance(name, str) or not isinstance(generate_name, str):
        raise ConversionError("metadata.name", "expected a string")
    owner: OwnerRef | None = None
    owners = metadata.get("ownerReferences")
    if owners is not None and not isinstance(owners, list):
        raise ConversionError("metadata.ownerReferences", "expected a list")
    for index, ref in enumerate(owners or ()):
        if not isinstance(ref, dict):
            raise ConversionError(f"metadata.ownerReferences[{index}]", "expected an object")
        if ref.get("controller") is True:
            kind, owner_name = ref.get("kind"), ref.get("name")
            if not isinstance(kind, str) or not isinstance(owner_name, str):
                raise ConversionError(f"metadata.ownerReferences[{index}]", "kind and name must be strings")
            owner = OwnerRef(
                str(ref.get("apiVersion") or ""), kind, owner_name, str(ref.get("uid") or ""), True
            )
            break
    return PodView(namespace=namespace, name=name, generate_name=generate_name, labels=labels, owner=owner)


class Admitter:
    """Turns AdmissionReview bytes into the answer. Never raises."""

    def __init__(
        self,
        vpas: VpaIndex,
        targets: Targets,
        limits: Callable[[str], NamespaceLimits],
        gates: FeatureGates,
        metrics: AdmissionMetrics,
        *,
        max_allowed_cpu_boost_millicores: int | None = None,
        namespaces: NamespacesWithVpas | None = None,
        events: EventRecorder | None = None,
        clock: Clock | None = None,
        nodes: NodeLabels | None = None,
    ) -> None:
        self._events = events
        # Gate VPAInitialDelay (AEP-9936) reads the time; gate DaemonSetScope (AEP-10031) a node's labels.
        self._clock = clock
        self._nodes = nodes
        self._vpas = vpas
        self._targets = targets
        self._limits = limits
        self._gates = gates
        self._options = AdmissionOptions(
            gates=gates, max_allowed_cpu_boost_millicores=max_allowed_cpu_boost_millicores
        )
        self.metrics = metrics
        self.notices = metrics.notices
        self._namespaces = namespaces
        self._memo: OrderedDict[tuple[object, ...], tuple[list[dict[str, Any]], int]] = OrderedDict()
        self.memo_bytes = 0  # what the memo's entries cost, by PATCH_MEMO_BYTES' measure

    # ---- reading

    @staticmethod
    def parse(body: bytes) -> tuple[str, Mapping[str, Any], str]:
        """(apiVersion, request, uid) of a review; raises BadReview."""
        try:
            review = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise BadReview(f"the body is not JSON: {err}") from None
        if not isinstance(review, dict):
            raise BadReview("the body is not an AdmissionReview object")
        request = review.get("request")
        if not isinstance(request, dict):
            raise BadReview("the AdmissionReview has no request")
        uid = request.get("uid")
        if not isinstance(uid, str) or not uid:
            raise BadReview("the AdmissionReview request has no uid")
        api_version = review.get("apiVersion")
        if api_version != "admission.k8s.io/v1beta1":
            api_version = REVIEW_V1
        return str(api_version), request, uid

    # ---- deciding

    async def admit(self, request: Mapping[str, Any]) -> Verdict:
        resource = request.get("resource")
        group = resource.get("group") if isinstance(resource, dict) else None
        plural = resource.get("resource") if isinstance(resource, dict) else None
        version = resource.get("version") if isinstance(resource, dict) else None
        operation = request.get("operation")
        if request.get("subResource"):
            return Verdict()
        if group == "" and plural == "pods":
            verdict = Verdict(resource="Pod")
            if operation == "CREATE" and version == "v1":
                try:
                    return await self._admit_pod(request)
                except Exception as exc:  # never block a pod on our own bug
                    self.notices.event(
                        "admission_error", "pod admission failed; allowing without changes",
                        level="error", error=repr(exc), exc_info=True,
                    )
                    verdict.outcome = "error"
            return verdict
        if group == VPA_GROUP and plural == VPA_RESOURCE:
            verdict = Verdict(resource="VPA")
            if operation in ("CREATE", "UPDATE"):
                return self._admit_vpa(request, operation == "CREATE")
            return verdict
        self.notices.event(
            "unhandled_resource", "admission review for a resource this webhook does not handle",
            level="error", group=group, resource=plural,
        )
        return Verdict()

    async def _admit_pod(self, request: Mapping[str, Any]) -> Verdict:
        raw = request.get("object")
        verdict = Verdict(resource="Pod")
        if not isinstance(raw, dict):
            return verdict
        metadata = raw.get("metadata")
        namespace = request.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        if not isinstance(namespace, str) or not namespace:
            return verdict
        if self._namespaces is not None and namespace not in self._namespaces:
            self.metrics.pod(False)
            return verdict
        try:
            identity = pod_identity(raw, namespace)
        except ConversionError as err:
            self.notices.event(
                "pod_not_converting", "pod does not convert; admitting it unchanged", namespace=namespace,
                error=str(err),
            )
            verdict.outcome = "error"
            return verdict
        pod_name = identity.name or f"{identity.generate_name}%"
        controller = await self._targets.top_most(identity)
        vpa: VpaView | None = None
        if controller is not None:
            candidates = self._vpas.by_index("target", controller)
            if candidates:
                pairs = []
                for candidate in candidates:
                    target = candidate.target_ref
                    selector = None if target is None else await self._targets.selector(namespace, target)
                    pairs.append((candidate, selector))
                vpa = controlling_vpa(namespace, identity.labels, controller, pairs)
        if vpa is None:
            log.debug("no VPA controls the pod", pod=f"{namespace}/{pod_name}", controller=controller)
            self.metrics.pod(False)
            return verdict
        if _has_pod_level_resources(raw) and not self._options.gates.pod_level_resources:
            # Pod-level requests must stay at least the containers' sum, and limits at least each container's;
            # patching containers alone could make the pod invalid, so it is admitted as it is.
            self._pod_level_unchanged(
                namespace, pod_name, vpa, "its containers' requests were left unchanged"
            )
            return verdict
        if is_scoped(vpa, self._gates.daemonset_scope):
            # A DaemonSet pod is not bound yet: its node comes from the affinity its controller wrote.
            node = node_of_daemonset_pod(raw)
            labels = self._nodes.labels(node) if self._nodes is not None and node else None
            vpa = scoped_view(vpa, scope_value(vpa.scope, node, labels))
        try:
            ops = self._patch(raw, namespace, vpa)
        except PodLevelInvalid as err:
            # Gate PodLevelResources: no values keep the pod valid; never the reason it cannot be created.
            self._pod_level_unchanged(namespace, pod_name, vpa, f"it was admitted unchanged: {err}")
            return verdict
        if ops is None:
            verdict.outcome = "error"
            return verdict
        applied = bool(ops)
        self.metrics.pod(applied)
        log.debug(
            "pod admitted", pod=f"{namespace}/{pod_name}", vpa=vpa.name, operations=len(ops), applied=applied
        )
        if applied:
            verdict.patch = ops
            verdict.outcome = "applied"
        return verdict

    def _pod_level_unchanged(self, namespace: str, pod_name: str, vpa: VpaView, what: str) -> None:
        self.metrics.pod(False)
        self.notices.event(
            "pod_level_resources", "pod has pod-level resources; admitting it unchanged",
            level="info", namespace=namespace, vpa=vpa.name,
        )
        if self._events is not None:
            self._events.warning(
                ObjectRef(
                    kind="VerticalPodAutoscaler", namespace=vpa.namespace, name=vpa.name, uid=vpa.uid,
                    api_version=VPA_API_VERSION,
                ),
                POD_LEVEL_RESOURCES_REASON,
                f"pod {namespace}/{pod_name} sets pod-level resources (spec.resources); {what}",
            )

    def _patch(self, raw: dict[str, Any], namespace: str, vpa: VpaView) -> list[dict[str, Any]] | None:
        """`pod_patch` for the raw pod, memoised: the replicas of one template get the same patch.

        The patch depends only on the containers' spec (and status, absent at creation), whether the pod
        has annotations, the VPA (uid + resourceVersion) and the namespace's merged LimitRanges; the key
        holds exactly these, the containers as a BLAKE2b digest of their JSON, so that what the memo
        keeps does not grow with the pods' size: at most PATCH_MEMO_SIZE entries and PATCH_MEMO_BYTES
        (patch JSON plus a fixed overhead each). None when the pod does not convert.
        """
        limits = self._limits(namespace)
        now = self._clock.now() if self._clock is not None and self._gates.vpa_initial_delay else None
        delayed = now is not None and in_initial_delay(vpa, now)
        key: tuple[object, ...] | None = None
        if not raw.get("status"):
            spec = raw.get("spec")
            metadata = raw.get("metadata")
            has_annotations = isinstance(metadata, dict) and metadata.get("annotations") is not None
            containers = spec.get("containers") if isinstance(spec, dict) else None
            # Sidecars (gate NativeSidecar) and pod-level resources (gate PodLevelResources) shape the patch.
            extra = (spec.get("initContainers"), spec.get("resources")) if isinstance(spec, dict) else None
            try:
                key = (
                    vpa.uid,
                    vpa.resource_version,
                    vpa.key,
                    delayed,
                    vpa.recommendation,  # a scoped DaemonSet VPA's group (AEP-10031)
                    limits,
                    has_annotations,
                    hashlib.blake2b(orjson.dumps([containers, extra]), digest_size=16).digest(),
                )
            except TypeError:
                key = None
            if key is not None:
                cached = self._memo.get(key)
                if cached is not None:
                    self._memo.move_to_end(key)
                    return cached[0]
        try:
            pod = pod_from_dict(raw)
        except ConversionError as err:
            self.notices.event(
                "pod_not_converting", "pod does not convert; admitting it unchanged", namespace=namespace,
                error=str(err),
            )
            return None
        if pod.namespace != namespace:
            pod = dataclasses.replace(pod, namespace=namespace)
        ops = pod_patch(pod, pod_shape(raw), vpa, limits, self._options, now=now)
        if key is not None:
            self._remember(key, ops)
        return ops

    def _remember(self, key: tuple[object, ...], ops: list[dict[str, Any]]) -> None:
        size = len(orjson.dumps(ops)) + _MEMO_ENTRY_OVERHEAD
        if size > PATCH_MEMO_ENTRY_BYTES:
            return
        previous = self._memo.pop(key, None)
        if previous is not None:
            self.memo_bytes -= previous[1]
        self._memo[key] = (ops, size)
        self.memo_bytes += size
        while len(self._memo) > PATCH_MEMO_SIZE or self.memo_bytes > PATCH_MEMO_BYTES:
            _, (_, evicted) = self._memo.popitem(last=False)
            self.memo_bytes -= evicted

    def _admit_vpa(self, request: Mapping[str, Any], create: bool) -> Verdict:
        obj = request.get("object")
        old = None if create else request.get("oldObject")
        result = validate_vpa(obj, self._gates, old=old, create=create)
        name = ""
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            meta = obj["metadata"]
            name = str(meta.get("name") or meta.get("generateName") or "")
        if not result.allowed:
            message = f'VerticalPodAutoscaler.{VPA_GROUP} "{name}" is invalid: {result.message()}'
            log.debug("VPA rejected", vpa=name, message=message)
            return Verdict(
                allowed=False,
                warnings=result.warnings,
                status={"status": "Failure", "code": 422, "reason": "Invalid", "message": message},
                outcome="error",
                resource="VPA",
            )
        log.debug("VPA accepted", vpa=name, defaulted=bool(result.patch), warnings=len(result.warnings))
        return Verdict(
            patch=list(result.patch) or None,
            warnings=result.warnings,
            outcome="applied" if result.patch else "skipped",
            resource="VPA",
        )

    # ---- answering

    @staticmethod
    def response_body(api_version: str, uid: str, verdict: Verdict) -> bytes:
        response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
        if verdict.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode()
        if verdict.warnings:
            response["warnings"] = list(verdict.warnings)
        if verdict.status is not None:
            response["status"] = verdict.status
        return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})


def _has_pod_level_resources(raw: Mapping[str, Any]) -> bool:
    spec = raw.get("spec")
    resources = spec.get("resources") if isinstance(spec, dict) else None
    return isinstance(resources, dict) and any(
        isinstance(resources.get(k), dict) and resources[k] for k in ("requests", "limits")
    )
