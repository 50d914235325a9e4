"""The admission controller: the HTTPS webhook that sets pod resources at creation and validates VPAs.

Owns:
- `Admitter`: one AdmissionReview in, one answer out (HTTP status + body). Pod CREATE: the pod's top-most
  controller (`AdmissionTargets`), the VPAs the shared cache's `target` index files under it, the target
  selectors, the controlling VPA (`logic.matching`), the namespace's LimitRanges (our own watch cache),
  the JSON patch (`logic.patches`). VPA CREATE/UPDATE: `logic.validation` → allowed with the defaulting
  patch and warnings, or denied with a 422 `Invalid` status naming the object and the fields.
- `AdmissionController`: the component. TLS (files, optionally reloaded, or self-managed certificates in
  a Secret), the aiohttp server on `--port`, self-registration of `vpa-webhook-config`, the status Lease,
  readiness, and a clean stop on cancellation. `run(ctx)` is what the runtime starts.

Reviews are served from an event loop of their own on a thread of their own (`vpa.components.loop_thread`),
so they never wait behind the recommender's or the watch caches' work on the main loop. What the admission
path reads from the main loop's caches it reads without awaiting (index lookups copy their keys in one
step; merged LimitRanges are kept only when no LimitRange changed meanwhile); its API reads and Events go
back to the main loop, which owns the client.

Slow or stalled clients (`vpa.components.connections`): the TLS handshake must finish within 10 s, the
first request's headers within 10 s more and a body within 10 s of its headers; at most 1,024 connections
at once; others are closed and counted.

Never the reason a pod cannot start: any exception while admitting a pod answers `allowed: true` with no
patch (logged, counted as `status="error"`); a review that cannot be read answers 400, a body over 5 MiB
413 and a non-JSON content type 415 (the API server then applies the failure policy, `Ignore` by default).

Certificates: `--tls-cert-file`/`--tls-private-key` are used when they exist. When neither exists and
`--register-webhook=true` (so we also control the caBundle), the certificates are self-managed: a CA and
an EC P-256 serving certificate for the Service names, shared by all replicas through the Secret
`vpa-webhook-certs` in the Service's namespace and renewed before expiry. Anything else is fatal.

Silence: when pods are created in namespaces with VPAs while no AdmissionReview at all reaches the server
for `silence_check_s` (60 s of wall time), the API server is not calling us (a wrong Service, endpoints
that do not reach this process, a NetworkPolicy, a failure policy of `Ignore` hiding it): one warning
`admission_webhook_not_called` and `vpa_admission_controller_webhook_silent` 1, until a review arrives.

Registration happens as soon as the server listens (upstream sleeps 10 s first) and replaces an existing
configuration in place (upstream deletes and recreates it).

Must not: import other components, make admission decisions itself (that is `vpa.logic`), or do Secret,
file or webhook-configuration I/O itself (that is `vpa.kube.certificates` / `vpa.kube.webhookregistering`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import hashlib
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Callable, Container, Mapping
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import orjson
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from vpa.aio.cancelling import cancel_and_wait
from vpa.aio.pacing import paced
from vpa.components.connections import (
    DEFAULT_LIMITS,
    ConnectionDrops,
    ConnectionGuard,
    ConnectionLimits,
    GuardedSite,
    read_body,
)
from vpa.components.context import ComponentContext
from vpa.components.health import LoopHistogram
from vpa.components.loop_thread import LoopThread
from vpa.components.sampled_log import SampledLog
from vpa.components.webhook_targets import AdmissionTargets
from vpa.kube import certificates as certs
from vpa.kube import webhookregistering as registering
from vpa.kube.client import ApiError, api_path
from vpa.kube.converting import ConversionError, pod_from_dict
from vpa.kube.eventing import EventRecorder, ObjectRef
from vpa.kube.leasing import StatusLeaseRenewer
from vpa.kube.watching import WatchCache
from vpa.logic.admission.patches import AdmissionOptions, PodLevelInvalid, pod_patch, pod_shape
from vpa.logic.admission.validation import validate_vpa
from vpa.logic.limitranges import NO_LIMITS, NamespaceLimits, namespace_limits
from vpa.logic.matching import controlling_vpa
from vpa.model.clock import RealClock
from vpa.model.features import FeatureGates
from vpa.model.limitrange import LimitRangeError, LimitRangeView, limitrange_from_dict
from vpa.model.pod import OwnerRef, PodView
from vpa.model.selector import Selector
from vpa.model.settings import StartupError
from vpa.model.vpa import VPA_API_VERSION, TargetRef, VpaView

log = structlog.get_logger(__name__)

SERVING_THREAD: Final = "admission-webhook"
"""The name of the thread the webhook serves on, in Python and (its first 15 bytes) in the kernel."""
MAX_BODY_BYTES: Final = 5 * 1024 * 1024
# The patch memo: entries are keyed on a 16-byte digest of the containers (never the containers themselves)
# and bounded in bytes; a patch larger than PATCH_MEMO_ENTRY_BYTES (absurdly long names) is not kept.
PATCH_MEMO_SIZE: Final = 4096
PATCH_MEMO_BYTES: Final = 8 * 1024 * 1024
PATCH_MEMO_ENTRY_BYTES: Final = 64 * 1024
_MEMO_ENTRY_OVERHEAD: Final = 512  # key tuple, digest, OrderedDict node: an entry's cost besides its patch
VPA_GROUP: Final = "autoscaling.k8s.io"
VPA_RESOURCE: Final = "verticalpodautoscalers"
REVIEW_V1: Final = "admission.k8s.io/v1"
# Upstream's buckets start at 10 ms, above everything a healthy webhook does; finer ones first.
LATENCY_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 300.0,
)  # fmt: skip

Status = Literal["error", "skipped", "applied"]
ResourceLabel = Literal["unknown", "Pod", "VPA"]


class VpaIndex(Protocol):
    """What the admission path reads from the VPA cache (a `WatchCache[VpaView]` with a `target` index)."""

    def by_index(self, name: str, value: str) -> list[VpaView]: ...


class Targets(Protocol):
    async def top_most(self, pod: PodView) -> str | None: ...

    async def selector(self, namespace: str, target: TargetRef) -> Selector | None: ...


# ------------------------------------------------------------------------------------------- metrics


class AdmissionMetrics:
    """Upstream's admission-controller metrics (spec §6.2), series pre-created for the hot path."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # Loop histograms: prometheus_client's `observe` takes a lock and walks the buckets, a noticeable
        # share of a review that observes six of them.
        self.latency = LoopHistogram(
            "vpa_admission_controller_admission_latency_seconds",
            "Time spent in the VPA admission controller, by outcome and resource.",
            ("status", "resource"),
            LATENCY_BUCKETS,
            registry=registry,
        )
        self.pods = Counter(
            "vpa_admission_controller_admission_pods_total",
            "Pods admitted, by whether a recommendation was applied.",
            ["applied"],
            registry=registry,
        )
        self.steps = LoopHistogram(
            "vpa_admission_controller_execution_latency_seconds",
            "Time spent in each step of an admission.",
            ("step",),
            LATENCY_BUCKETS,
            registry=registry,
        )
        # Reviews any client can send (unhandled resources, pods that do not convert, our own failures):
        # counted by reason, logged at most once per reason every 10 s.
        self.notices = SampledLog(
            registry,
            "vpa_admission_controller_review_problems_total",
            "Admission reviews that were answered without a decision, by reason (logged sampled).",
        )
        self._latency = {
            (s, r): self.latency.labels(s, r)
            for s in ("error", "skipped", "applied")
            for r in ("unknown", "Pod", "VPA")
        }
        self._pods = {True: self.pods.labels(applied="true"), False: self.pods.labels(applied="false")}
        self.step = {
            step: self.steps.labels(step)
            for step in ("read_request", "admit", "build_response", "write_response", "total")
        }

    def admission(self, status: Status, resource: ResourceLabel, seconds: float) -> None:
        self._latency[(status, resource)].observe(seconds)

    def admissions(self, status: Status, resource: ResourceLabel) -> int:
        return sum(self._latency[(status, resource)].counts)

    def pod(self, applied: bool) -> None:
        self._pods[applied].inc()


# ------------------------------------------------------------------------------------------ admitter


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


class NamespacesWithVpas:
    """Namespaces holding at least one VPA, kept by the VPA cache's handlers: a pod in any other
    namespace is answered without touching the API."""

    def __init__(self) -> None:
        self._counts: Tally[str] = Tally()
        self._counting = False

    async def attach(self, cache: WatchCache[VpaView]) -> None:
        """Count the cache's VPAs, then follow its events. The handlers go on with the snapshot counted
        (nothing awaited between the two), and the snapshot is counted `paced`: a large cluster's VPAs are
        counted while the main loop's other work goes on. Meanwhile a
        namespace's count may dip below zero (an update or a delete of a VPA not counted yet): no namespace
        is dropped until the snapshot is counted. Answer no review before it returns."""
        snapshot = cache.list()
        cache.on_add(self._add)
        cache.on_update(self._update)
        cache.on_delete(self._remove)
        self._counting = True
        try:
            async for vpa in paced(snapshot):
                self._counts[vpa.namespace] += 1
        finally:
            self._counting = False
            for namespace in [ns for ns, n in self._counts.items() if n <= 0]:
                del self._counts[namespace]

    def _add(self, vpa: VpaView) -> None:
        self._counts[vpa.namespace] += 1

    def _update(self, old: VpaView, new: VpaView) -> None:
        self._remove(old)
        self._add(new)

    def _remove(self, vpa: VpaView) -> None:
        self._counts[vpa.namespace] -= 1
        if self._counts[vpa.namespace] <= 0 and not self._counting:
            del self._counts[vpa.namespace]

    def __contains__(self, namespace: object) -> bool:
        return namespace in self._counts


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
    ) -> None:
        self._events = events
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
        ops = pod_patch(pod, pod_shape(raw), vpa, limits, self._options)
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


class AdmissionServer:
    """The aiohttp application around an `Admitter`: any path, POST, JSON only, 5 MiB at most."""

    def __init__(
        self,
        admitter: Admitter,
        limits: ConnectionLimits = DEFAULT_LIMITS,
        drops: ConnectionDrops | None = None,
    ) -> None:
        self.admitter = admitter
        self.requests = 0
        """Requests received on any path, well-formed or not: proof that the API server reaches us."""
        self.limits = limits
        self.drops = drops if drops is not None else ConnectionDrops(CollectorRegistry())
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.router.add_route("*", "/", self.handle)  # the path the API server calls: matched first
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        metrics = self.admitter.metrics
        started = time.perf_counter()
        if request.method != "POST":
            return web.Response(status=405, text="only POST is served\n", headers={"Allow": "POST"})
        if request.content_type != "application/json":
            return web.Response(status=415, text=f"expected application/json, got {request.content_type!r}\n")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return web.Response(status=413, text="request payload too large\n")
        try:
            body = await read_body(request, self.limits, self.drops, "admission-controller")
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text="request payload too large\n")
        if body is None:  # the body did not arrive in time: the connection is gone
            return web.Response(status=408, text="request body timed out\n")
        read_done = time.perf_counter()
        metrics.step["read_request"].observe(read_done - started)
        try:
            api_version, review_request, uid = Admitter.parse(body)
        except BadReview as err:
            metrics.admission("error", "unknown", time.perf_counter() - started)
            return web.Response(status=400, text=f"{err}\n")
        try:
            verdict = await self.admitter.admit(review_request)
        except Exception as exc:  # the Admitter catches its own; this is the last line of defence
            log.error("admission failed; allowing without changes", error=repr(exc), exc_info=True)
            verdict = Verdict(outcome="error")
        admit_done = time.perf_counter()
        metrics.step["admit"].observe(admit_done - read_done)
        payload = Admitter.response_body(api_version, uid, verdict)
        built = time.perf_counter()
        metrics.step["build_response"].observe(built - admit_done)
        response = web.Response(body=payload, content_type="application/json")
        done = time.perf_counter()
        # aiohttp writes the response after we return: `write_response` covers handing it over.
        metrics.step["write_response"].observe(done - built)
        metrics.step["total"].observe(done - started)
        metrics.admission(verdict.outcome, verdict.resource, done - started)
        return response


# ---------------------------------------------------------------------------------------- LimitRanges


class LimitRanges:
    """The LimitRanges of every namespace (a watch cache: the process's shared one, or our own), merged per
    namespace on demand."""

    def __init__(self, cache: WatchCache[LimitRangeView]) -> None:
        self.cache = cache
        self._merged: dict[str, NamespaceLimits] = {}
        self._changes = 0  # the webhook merges on its own thread while this cache's handlers forget
        if not cache.has_index("namespace"):  # the shared cache has it (`ControllerCaches`)
            cache.add_index("namespace", lambda lr: [lr.namespace])
        cache.on_add(self._forget)
        cache.on_update(lambda _old, new: self._forget(new))
        cache.on_delete(self._forget)

    def _forget(self, limit_range: LimitRangeView) -> None:
        self._changes += 1
        self._merged.pop(limit_range.namespace, None)

    def __call__(self, namespace: str) -> NamespaceLimits:
        merged = self._merged.get(namespace)
        if merged is None:
            changes = self._changes
            ranges = sorted(self.cache.by_index("namespace", namespace), key=lambda lr: lr.name)
            merged = namespace_limits(ranges) if ranges else NO_LIMITS
            if changes == self._changes:  # nothing changed while merging: the result may be kept
                self._merged[namespace] = merged
        return merged


def _to_limit_range(obj: dict[str, Any]) -> LimitRangeView | None:
    try:
        return limitrange_from_dict(obj)
    except LimitRangeError as err:
        log.warning("skipping a LimitRange that does not convert", error=str(err))
        return None


# --------------------------------------------------------------------------------------- the component


@dataclasses.dataclass
class ReviewSilence:
    """Pods that appeared in namespaces holding a VPA since the last AdmissionReview (bookkeeping only).

    The API server sends every pod CREATE to the webhook before it stores the pod, so a pod that reaches
    the watch cache after the last review, in a namespace the webhook cares about, was never shown to us.
    Counting what the cache sees (not comparing creation times) keeps this independent of clock skew.
    """

    namespaces: Container[str]
    pods: int = 0
    example: str = ""
    where: set[str] = dataclasses.field(default_factory=set)

    def pod_added(self, pod: PodView) -> None:
        if pod.namespace in self.namespaces:
            self.pods += 1
            self.example = self.example or f"{pod.namespace}/{pod.name}"
            if len(self.where) < 5:
                self.where.add(pod.namespace)

    def reset(self) -> None:
        self.pods, self.example = 0, ""
        self.where.clear()

    def warning(self, service: str, silent_for_s: float) -> dict[str, object]:
        """The fields of the one `admission_webhook_not_called` warning."""
        return {
            "pods_created": self.pods,
            "namespaces": sorted(self.where),
            "example_pod": self.example,
            "silent_for_s": round(silent_for_s),
            "check": f"the Service {service} and its endpoints reach this process on --port, no "
            "NetworkPolicy blocks the API server, and the MutatingWebhookConfiguration points at that "
            "Service",
        }


def uses_self_managed_certificates(files: certs.CertificateFiles, register_webhook: bool) -> bool:
    """Files when they exist; self-managed when neither exists and we register the webhook; else fatal."""
    if files.exist():
        return False
    if not Path(files.cert_file).exists() and not Path(files.key_file).exists() and register_webhook:
        return True
    raise StartupError(
        f"--tls-cert-file {files.cert_file} / --tls-private-key {files.key_file}: one is missing "
        "(self-managed certificates need both absent and --register-webhook=true)"
    )


class AdmissionController:
    """The admission-controller component over a `ComponentContext`.

    `host`/`port` override where it listens (tests and benchmarks bind 127.0.0.1, port 0 = any free port);
    by default all interfaces on `--port`.
    """

    def __init__(
        self,
        ctx: ComponentContext,
        *,
        host: str | None = None,
        port: int | None = None,
        cert_poll_s: float = 1.0,
        secret_poll_s: float = 60.0,
        limitrange_sync_timeout_s: float = 10.0,
        silence_check_s: float = 60.0,
        self_managed_policy: certs.SelfManagedPolicy | None = None,
        limits: ConnectionLimits = DEFAULT_LIMITS,
    ) -> None:
        self.ctx = ctx
        self.settings = ctx.settings.admission
        self.host = host
        self.requested_port = self.settings.port if port is None else port
        self.port = 0
        self.cert_poll_s = cert_poll_s
        self.secret_poll_s = secret_poll_s
        self.limitrange_sync_timeout_s = limitrange_sync_timeout_s
        self.silence_check_s = silence_check_s
        self.silent = Gauge(
            "vpa_admission_controller_webhook_silent",
            "1 while pods are created in namespaces with VPAs but no AdmissionReview reaches this process.",
            registry=ctx.registry,
        )
        self.files = certs.CertificateFiles(
            self.settings.tls_cert_file, self.settings.tls_private_key, self.settings.client_ca_file
        )
        self.secret_store: certs.SecretCertificateStore | None = None
        if uses_self_managed_certificates(self.files, self.settings.register_webhook):
            self.secret_store = certs.SecretCertificateStore(
                ctx.client,
                RealClock(),  # certificate validity is checked against the wall clock, never a simulated one
                namespace=self.settings.webhook_service_namespace,
                service=self.settings.webhook_service,
                policy=self_managed_policy,
            )
            log.info("admission_certificates_self_managed",
                     reason=f"neither {self.files.cert_file} nor {self.files.key_file} exists",
                     secret=f"{self.settings.webhook_service_namespace}/{certs.SECRET_NAME}")
        self.metrics = AdmissionMetrics(ctx.registry)
        # Owners and selectors come from the shared controller caches; what they do not hold yet (a
        # ReplicaSet created a moment ago) is read, with its own limiter and pacing window (as upstream's
        # admission controller is a binary with its own client): such a read must never queue behind the
        # recommender's thousands of status writes. Served from the webhook's thread, the reads go through a
        # connection pool of that thread's loop too (`AdmissionTargets.open_own_client`).
        self.targets = AdmissionTargets(ctx.client.derive(), ctx.clock, known=ctx.controllers)
        namespace = ctx.settings.common.vpa_object_namespace or None
        # The process's LimitRanges cache when it has the shared controller caches (synced before this
        # starts), else one of our own, run from `start()`.
        self.own_limit_cache = ctx.controllers is None
        self.limit_cache: WatchCache[LimitRangeView]
        if ctx.controllers is not None:
            self.limit_cache = ctx.controllers.limitranges
        else:
            self.limit_cache = WatchCache(
                ctx.client,
                ctx.clock,
                api_path("", "v1", "limitranges", namespace=namespace),
                _to_limit_range,
                name="limitranges",
            )
        self.limits = LimitRanges(self.limit_cache)
        self.namespaces = NamespacesWithVpas()
        self.admitter = Admitter(
            ctx.vpas,
            self.targets,
            self.limits,
            ctx.settings.feature_gates,
            self.metrics,
            max_allowed_cpu_boost_millicores=self.settings.max_allowed_cpu_boost_millicores,
            namespaces=self.namespaces,
            events=ctx.events,
        )
        self.connection_limits = limits
        self.drops = ConnectionDrops(ctx.registry)
        self.server = AdmissionServer(self.admitter, limits, self.drops)
        self.guard: ConnectionGuard | None = None
        self.tls: certs.RotatingServerContext | None = None
        self.ca_bundle = b""
        self.registered_ca = b""
        self.lease = StatusLeaseRenewer(
            ctx.client,
            ctx.clock,
            namespace=self.settings.status_lease_namespace,
            name=self.settings.status_lease_name,
            interval_s=self.settings.status_lease_update_interval_s,
        )
        self.serving = False
        self._runner: web.AppRunner | None = None
        self.serving_thread = LoopThread(SERVING_THREAD)
        self._tasks: list[asyncio.Task[None]] = []

    # ---- TLS material

    async def _load_tls(self) -> tuple[bytes, bytes, bytes]:
        """(cert, key, CA bundle) from the files or the Secret."""
        if self.secret_store is not None:
            bundle = await self.secret_store.ensure()
            return bundle.cert_pem, bundle.key_pem, bundle.ca_cert_pem
        cert, key = self.files.read_pair()
        return cert, key, self.files.read_ca()

    async def _register(self) -> None:
        if not self.settings.register_webhook:
            return
        desired = registering.webhook_configuration(self.settings, self.ctx.settings.common, self.ca_bundle)
        await registering.register_webhook(self.ctx.client, desired)
        self.registered_ca = self.ca_bundle

    async def _apply_ca(self, ca: bytes) -> None:
        if ca and ca != self.registered_ca and self.settings.register_webhook:
            self.ca_bundle = ca
            try:
                await self._register()
            except ApiError as err:
                log.warning("could not update the webhook caBundle; will retry", error=str(err))
                self.registered_ca = b""  # retry on the next poll
            else:
                log.info("updated the webhook caBundle")

    async def _watch_files(self) -> None:
        """`--reload-cert`: poll the files; swap the pair on change; re-register a changed CA."""
        clock = RealClock()  # file times are wall-clock, whatever clock the process follows
        last = self.files.fingerprint()
        while True:
            await clock.sleep(self.cert_poll_s)
            current = self.files.fingerprint()
            retry_ca = self.settings.register_webhook and self.registered_ca != self.ca_bundle
            if current == last and not retry_ca:
                continue
            last = current
            assert self.tls is not None
            try:
                cert, key = self.files.read_pair()
                if cert != self.tls.cert_pem:
                    await asyncio.to_thread(self.tls.swap, cert, key)
                    log.info("reloaded the serving certificate", cert_file=self.files.cert_file)
            except certs.CertificateError as err:
                # Typically a half-written pair: keep serving the old one, look again next round.
                log.warning("serving certificate not reloaded yet", error=str(err))
                last = ()
                continue
            await self._apply_ca(self.files.read_ca())

    async def _watch_secret(self) -> None:
        """Self-managed: re-read (and renew when due) the shared Secret; swap and re-register on change."""
        assert self.secret_store is not None
        while True:
            await RealClock().sleep(self.secret_poll_s)  # wall-clock expiry, as above
            try:
                bundle = await self.secret_store.ensure()
            except (ApiError, certs.CertificateError) as err:
                log.warning("could not refresh the self-managed certificates", error=str(err))
                continue
            assert self.tls is not None
            if bundle.cert_pem != self.tls.cert_pem:
                await asyncio.to_thread(self.tls.swap, bundle.cert_pem, bundle.key_pem)
                log.info("serving the renewed self-managed certificate")
            await self._apply_ca(bundle.ca_cert_pem)

    # ---- lifecycle

    def _spawn(self, name: str, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"admission-controller:{name}")
        self._tasks.append(task)

    async def start(self) -> None:
        """Listen, register and start renewing the status Lease; returns once serving."""
        try:
            cert, key, ca = await self._load_tls()
            # Two contexts loaded from temporary files: off the event loop, which the caches' LISTs share.
            self.tls = await asyncio.to_thread(functools.partial(
                certs.RotatingServerContext,
                cert, key, min_tls_version=self.settings.min_tls_version, ciphers=self.settings.tls_ciphers))
        except certs.CertificateError as err:
            # The message names the file or the flag (--tls-ciphers, --min-tls-version) at fault.
            raise StartupError(f"admission controller TLS: {err}") from None
        self.ca_bundle = ca
        await self.namespaces.attach(self.ctx.vpas)
        if self.own_limit_cache:
            self._spawn("limitranges", self.limit_cache.run())
        try:
            await asyncio.wait_for(self.limit_cache.wait_synced(), self.limitrange_sync_timeout_s)
        except TimeoutError:
            log.warning("LimitRanges not listed yet; serving without them until they are")
        # Reviews are served from a loop of their own (`loop_thread`): they never queue behind the
        # recommender's or the watch caches' work on the main loop. The few API reads the admission path
        # makes (owners and selectors of workloads) go through a client of that loop; its Events go back to
        # the main loop.
        await self.serving_thread.spawn()
        try:
            self.port = await self.serving_thread.call(self._listen())
        except OSError as err:
            reason = err.strerror or err
            raise StartupError(f"--port {self.requested_port}: cannot listen: {reason}") from None
        self.serving = True
        self.ctx.health.add_readiness("admission-controller", lambda: self.serving)
        log.info("admission webhook serving", port=self.port, self_managed=self.secret_store is not None)
        await self._register()
        self._spawn("status-lease", self.lease.run())
        self._spawn("silence", self._watch_silence())
        if self.secret_store is not None:
            self._spawn("certificates", self._watch_secret())
        elif self.settings.reload_cert:
            self._spawn("certificates", self._watch_files())

    async def _listen(self) -> int:
        """On the serving thread's loop: the aiohttp runner and the guarded TLS site; the port bound."""
        assert self.tls is not None
        self.targets.open_own_client()
        runner = web.AppRunner(
            self.server.app,
            access_log=None,
            shutdown_timeout=1.0,
            **self.connection_limits.runner_kwargs(),
        )
        await runner.setup()
        self._runner = runner
        assert runner.server is not None
        self.guard = ConnectionGuard(
            runner.server,
            self.connection_limits,
            self.drops,
            "admission-controller",
        )
        site = GuardedSite(
            runner,
            self.host or None,
            self.requested_port,
            limits=self.connection_limits,
            ssl_context=self.tls.listening,
            backlog=1024,
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self.requested_port

    async def _close(self) -> None:
        """On the serving thread's loop: stop serving, then drop what the admission path cached."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.targets.aclose()

    async def _watch_silence(self) -> None:
        """Warn once when pods appeared in VPA namespaces but no review arrived for a whole check interval;
        say so again (info) when reviews resume. The interval is wall time whatever clock the process
        follows: a network fault is measured in real seconds."""
        wall = RealClock()
        service = f"{self.settings.webhook_service_namespace}/{self.settings.webhook_service}"
        silence = ReviewSilence(self.namespaces)
        # A moment for the API server to pick up the configuration just registered.
        await wall.sleep(min(5.0, self.silence_check_s))
        self.ctx.pods.on_add(silence.pod_added)
        quiet_since, seen, warned = wall.now(), self.server.requests, False
        while True:
            await wall.sleep(self.silence_check_s)
            if self.server.requests != seen:
                if warned:
                    log.info("admission_webhook_called_again", service=service)
                    self.silent.set(0)
                silence.reset()
                quiet_since, seen, warned = wall.now(), self.server.requests, False
            elif silence.pods and not warned:
                fields = silence.warning(service, wall.now() - quiet_since)
                log.warning("admission_webhook_not_called", **fields)
                self.silent.set(1)
                warned = True

    async def stop(self) -> None:
        self.serving = False
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        if self.serving_thread.running:
            await self.serving_thread.call(self._close())
        await self.serving_thread.stop()

    async def run(self) -> None:
        try:
            await self.start()
            await _first_failure(self._tasks)
        finally:
            await asyncio.shield(self.stop())


async def _first_failure(tasks: list[asyncio.Task[None]]) -> None:
    """Wait forever, unless one of `tasks` fails: then re-raise its error (the runtime stops the process)."""
    while True:
        pending = [task for task in tasks if not task.done()]
        if not pending:
            await asyncio.Event().wait()
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error


async def run(ctx: ComponentContext) -> None:
    """The admission-controller component's entry point (`ComponentSpec("admission-controller", run)`)."""
    await AdmissionController(ctx).run()


POD_LEVEL_RESOURCES_REASON = "PodLevelResourcesUnchanged"


def _has_pod_level_resources(raw: Mapping[str, Any]) -> bool:
    spec = raw.get("spec")
    resources = spec.get("resources") if isinstance(spec, dict) else None
    return isinstance(resources, dict) and any(
        isinstance(resources.get(k), dict) and resources[k] for k in ("requests", "limits")
    )
