"""The API server's version (`GET /version`), which the updater reads once to know what it may resize.

Owns: `read_git_version`, the `gitVersion` string of the server (`v1.37.2`), or None when the server did
not say (the request failed or the answer has no such field); the error is returned for the caller's log.

Must not: interpret the version (that is `vpa.logic.updater.serverfeatures`), retry, or log.
"""

from __future__ import annotations

from vpa.kube.client import ApiError, KubeClient


async def read_git_version(client: KubeClient, *, timeout_s: float = 10.0) -> tuple[str | None, str]:
    """(`gitVersion`, "") on an answer; (None, why) when there is none."""
    try:
        answer = await client.get("/version", timeout_s=timeout_s)
    except ApiError as error:
        return None, f"GET /version: {error}"
    version = answer.get("gitVersion") if isinstance(answer, dict) else None
    if not isinstance(version, str) or not version:
        return None, "GET /version: no gitVersion in the answer"
    return version, ""
