"""Dynamic admission: calling the webhooks registered in Mutating/ValidatingWebhookConfiguration objects.

Owns: matching writes against webhook rules (apiGroups, apiVersions, operations, resources with
subresource forms, scope), namespaceSelector and objectSelector; sending AdmissionReview v1 requests over
HTTPS verified with `clientConfig.caBundle` (a `service` reference is mapped to a local address and the
certificate is checked against `<service>.<namespace>.svc`, as kube-apiserver does); applying JSONPatch
responses; `failurePolicy` (default Fail), `timeoutSeconds` (default 10), `sideEffects` on dry runs,
warnings, and kube-apiserver's denial messages.

Must not: write to the store. Webhook configuration objects themselves are never sent to webhooks.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from vpa.sim.apiserver import patching
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.store import WARNINGS
from vpa.sim.contracts import ApiError, JsonObj, Operation

if TYPE_CHECKING:
    from vpa.sim.apiserver.store import ObjectStore

MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations.admissionregistration.k8s.io"
_EXEMPT = {MUTATING, VALIDATING}


def selector_matches(selector: JsonObj | None, labels: dict[str, str]) -> bool:
    """A structured LabelSelector; an empty or missing selector matches everything."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _rule_matches(rule: JsonObj, rt: ResourceType, version: str, op: Operation, sub: str | None) -> bool:
    ops = rule.get("operations") or []
    if "*" not in ops and op not in ops:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and version not in versions:
        return False
    scope = rule.get("scope", "*")
    if scope == "Cluster" and rt.namespaced:
        return False
    if scope == "Namespaced" and not rt.namespaced:
        return False
    for res in rule.get("resources") or []:
        r, _, s = res.partition("/")
        if r not in ("*", rt.plural):
            continue
        if sub is None:
            if s == "" or res == "*/*":
                return True
        elif s in ("*", sub):
            return True
    return False


class WebhookAdmission:
    """Implements the store's `Admission` protocol."""

    def __init__(self, store: ObjectStore, services: dict[tuple[str, str], tuple[str, int]]) -> None:
        self.store = store
        self.services = dict(services)
        self._sessions: dict[bytes, aiohttp.ClientSession] = {}

    def active(self) -> bool:
        return self.store.count(MUTATING) > 0 or self.store.count(VALIDATING) > 0

    async def close(self) -> None:
        for s in self._sessions.values():
            await s.close()
        self._sessions.clear()

    def _session(self, ca_bundle: bytes) -> aiohttp.ClientSession:
        s = self._sessions.get(ca_bundle)
        if s is None or s.closed:
            if ca_bundle:
                ctx = ssl.create_default_context(cadata=ca_bundle.decode(errors="replace"))
            else:
                ctx = ssl.create_default_context()
            s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=64))
            self._sessions[ca_bundle] = s
        return s

    def _webhooks(
        self,
        resource: str,
        rt: ResourceType,
        version: str,
        op: Operation,
        sub: str | None,
        obj: JsonObj | None,
        old: JsonObj | None,
        namespace: str | None,
    ) -> list[JsonObj]:
        out: list[JsonObj] = []
        ns_labels: dict[str, str] | None = None
        for cfg in self.store.list(resource):
            for wh in cfg.get("webhooks") or []:
                if not any(_rule_matches(r, rt, version, op, sub) for r in wh.get("rules") or []):
                    continue
                nsel = wh.get("namespaceSelector")
                if nsel:
                    if rt.key == "namespaces":
                        labels = ((obj or old or {}).get("metadata") or {}).get("labels") or {}
                        if not selector_matches(nsel, labels):
                            continue
                    elif rt.namespaced and namespace:
                        if ns_labels is None:
                            nso = self.store.get("namespaces", None, namespace) or {}
                            ns_labels = (nso.get("metadata") or {}).get("labels") or {}
                        if not selector_matches(nsel, ns_labels):
                            continue
                osel = wh.get("objectSelector")
                if osel:
                    hit = False
                    for o in (obj, old):
                        if o is not None and selector_matches(
                            osel, (o.get("metadata") or {}).get("labels") or {}
                        ):
                            hit = True
                    if not hit:
                        continue
                out.append(wh)
        return out

    def _request(
        self,
        rt: ResourceType,
        version: str,
        op: Operation,
        obj: JsonObj | None,
        old: JsonObj | None,
        sub: str | None,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
        review_version: str,
    ) -> tuple[str, JsonObj]:
        uid = str(uuid.uuid4())
        kind = {"group": rt.group, "version": version, "kind": rt.kind}
        resource = {"group": rt.group, "version": version, "resource": rt.plural}
        req: JsonObj = {
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "operation": op,
            "userInfo": user,
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
        }
        if sub:
            req["subResource"] = sub
            req["requestSubResource"] = sub
        if name:
            req["name"] = name
        if namespace:
            req["namespace"] = namespace
        opt_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[op]
        req["options"] = dict(options or {}, kind=opt_kind, apiVersion="meta.k8s.io/v1")
        return uid, {
            "apiVersion": f"admission.k8s.io/{review_version}",
            "kind": "AdmissionReview",
            "request": req,
        }

    async def _call(self, wh: JsonObj, review: JsonObj) -> JsonObj:
        cc = wh.get("clientConfig") or {}
        ca = base64.b64decode(cc["caBundle"]) if cc.get("caBundle") else b""
        server_hostname: str | None = None
        if cc.get("url"):
            url = str(cc["url"])
        elif cc.get("service"):
            svc = cc["service"]
            key = (svc.get("namespace", ""), svc.get("name", ""))
            addr = self.services.get(key)
            if addr is None:
                raise ConnectionError(
                    f'service "{key[1]}" in namespace "{key[0]}" has no local address '
                    "(map it with webhook_services / --webhook-service)"
                )
            path = svc.get("path") or "/"
            url = f"https://{addr[0]}:{addr[1]}{path}"
            server_hostname = f"{key[1]}.{key[0]}.svc"
        else:
            raise ConnectionError("webhook has neither url nor service")
        timeout = float(wh.get("timeoutSeconds") or 10)
        session = self._session(ca)
        kwargs: dict[str, Any] = {}
        if server_hostname is not None:
            kwargs["server_hostname"] = server_hostname
        async with session.post(
            url,
            data=orjson.dumps(review),
            headers={"Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=timeout),
            **kwargs,
        ) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise ConnectionError(f"webhook returned HTTP {resp.status}")
        data = orjson.loads(body)
        if not isinstance(data, dict):
            raise ValueError("webhook response is not a JSON object")
        return data

    async def _invoke(
        self,
        wh: JsonObj,
        rt: ResourceType,
        version: str,
        op: Operation,
        obj: JsonObj | None,
        old: JsonObj | None,
        sub: str | None,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> JsonObj | None:
        """Call one webhook; returns its `response`, or None when it failed and failurePolicy is Ignore."""
        wname = wh.get("name", "")
        if dry_run and wh.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise ApiError(400, "BadRequest", f'admission webhook "{wname}" does not support dry run')
        versions = wh.get("admissionReviewVersions") or ["v1"]
        review_version = "v1" if "v1" in versions else ("v1beta1" if "v1beta1" in versions else "")
        policy = wh.get("failurePolicy", "Fail")
        try:
            if not review_version:
                raise ValueError(f"webhook does not accept v1 or v1beta1 AdmissionReview: {versions}")
            uid, review = self._request(
                rt, version, op, obj, old, sub, namespace, name, dry_run, user, options, review_version
            )
            data = await self._call(wh, review)
            response = data.get("response")
            if not isinstance(response, dict):
                raise ValueError("webhook response has no response field")
            if response.get("uid") != uid:
                raise ValueError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
        except (
            TimeoutError,
            aiohttp.ClientError,
            ConnectionError,
            ValueError,
            OSError,
            orjson.JSONDecodeError,
        ) as exc:
            if policy == "Ignore":
                return None
            detail = "context deadline exceeded" if isinstance(exc, asyncio.TimeoutError) else str(exc)
            raise ApiError(
                500,
                "InternalError",
                f'Internal error occurred: failed calling webhook "{wname}": failed to call webhook: '
                f"{detail}",
            ) from exc
        sink = WARNINGS.get()
        if sink is not None:
            sink.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            status = response.get("status") or {}
            code = int(status.get("code") or 0)
            if code < 400:
                code = 400
            denied = f'admission webhook "{wname}" denied the request'
            if status.get("message"):
                msg = f"{denied}: {status['message']}"
            elif status.get("reason"):
                msg = f"{denied}: {status['reason']}"
            else:
                msg = f"{denied} without explanation"
            raise ApiError(code, str(status.get("reason") or ""), msg)
        return response

    def _version_of(self, rt: ResourceType, obj: JsonObj | None) -> str:
        if obj is not None:
            v = str(obj.get("apiVersion", "")).rpartition("/")[2]
            if v in rt.versions:
                return v
        return rt.version

    async def mutate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> tuple[JsonObj, list[str]]:
        if rt.key in _EXEMPT:
            return obj, []
        version = self._version_of(rt, obj)
        for wh in self._webhooks(MUTATING, rt, version, op, subresource, obj, old, namespace):
            response = await self._invoke(
                wh, rt, version, op, obj, old, subresource, namespace, name, dry_run, user, options
            )
            if response is None or not response.get("patch"):
                continue
            if response.get("patchType", "JSONPatch") != "JSONPatch":
                raise ApiError(
                    500,
                    "InternalError",
                    f'Internal error occurred: webhook "{wh.get("name")}" '
                    f"returned unsupported patchType {response.get('patchType')!r}",
                )
            try:
                ops = orjson.loads(base64.b64decode(response["patch"]))
                patched = patching.json_patch(obj, ops)
            except (ValueError, ApiError, orjson.JSONDecodeError) as exc:
                if wh.get("failurePolicy", "Fail") == "Ignore":
                    continue
                raise ApiError(
                    500,
                    "InternalError",
                    f"Internal error occurred: failed calling webhook "
                    f'"{wh.get("name")}": invalid JSON patch: {exc}',
                ) from exc
            if not isinstance(patched, dict):
                raise ApiError(500, "InternalError", "webhook patch produced a non-object")
            obj = patched
        return obj, []

    async def validate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj | None,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> list[str]:
        if rt.key in _EXEMPT:
            return []
        version = self._version_of(rt, obj or old)
        hooks = self._webhooks(VALIDATING, rt, version, op, subresource, obj, old, namespace)
        if hooks:
            await asyncio.gather(
                *(
                    self._invoke(
                        wh, rt, version, op, obj, old, subresource, namespace, name, dry_run, user, options
                    )
                    for wh in hooks
                )
            )
        return []
