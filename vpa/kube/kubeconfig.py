"""Which kubeconfig a command uses, and the merged configuration it reads, as kubectl decides both.

Owns: the order kubectl follows — `--kubeconfig`, else `$KUBECONFIG` (a list of files joined by the path
separator, merged: the first file to set a map key wins, for `clusters`, `users` and `contexts` by name
and for `current-context`), else `~/.kube/config` when it exists, else the in-cluster service account —
and reading those files into one dict: relative certificate and token paths resolved against the file
that names them, and every file checked to be a YAML mapping, so a wrong file (a CSV given as
`--kubeconfig`) is one line naming it. `--context` picks a context other than `current-context`.

Must not: talk to the API server, build clients (that is `vpa.kube.client`), or read the environment
(callers pass `$KUBECONFIG` and the home directory's default path).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

# The map-valued lists of a kubeconfig; entries are keyed by `name`.
_NAMED_LISTS: Final = ("clusters", "users", "contexts")
# Fields holding file paths, relative to the kubeconfig that holds them (kubectl resolves them so).
_PATH_FIELDS: Final = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


class KubeconfigError(Exception):
    """The kubeconfig cannot be used; `str()` is one line naming the file (and where it came from)."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The kubeconfig files to read (none: the in-cluster configuration) and why those."""

    paths: tuple[str, ...]
    origin: str
    """`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config` or `in-cluster`: named in every error."""

    @property
    def in_cluster(self) -> bool:
        return not self.paths

    def describe(self) -> str:
        if self.in_cluster:
            return "the in-cluster configuration"
        return f"kubeconfig {os.pathsep.join(self.paths)} ({self.origin})"


def choose(flag: str, env_value: str, default_path: str) -> Choice:
    """kubectl's order: the flag, then `$KUBECONFIG` (a list), then `default_path` if it is a file, then
    in-cluster. Only the existence of `default_path` is looked at here."""
    if flag:
        return Choice((flag,), "--kubeconfig")
    listed = tuple(part for part in env_value.split(os.pathsep) if part)
    if listed:
        return Choice(listed, "$KUBECONFIG")
    if default_path and Path(default_path).is_file():
        return Choice((default_path,), "~/.kube/config")
    return Choice((), "in-cluster")


def _absolutise(entry: dict[str, Any], kind: str, folder: Path) -> None:
    body = entry.get(kind)
    if not isinstance(body, dict):
        return
    for field_name in _PATH_FIELDS[kind]:
        value = body.get(field_name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[field_name] = str(folder / value)


def _read_one(path: str, origin: str) -> dict[str, Any]:
    where = f"kubeconfig {path} ({origin})"
    file = Path(path)
    if not file.exists():
        raise KubeconfigError(f"{where}: no such file")
    if not file.is_file():
        raise KubeconfigError(f"{where}: not a file")
    try:
        document = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        raise KubeconfigError(f"{where}: not a kubeconfig: {detail}") from None
    if document is None:
        return {}
    known = (*_NAMED_LISTS, "current-context")
    if not isinstance(document, dict) or not any(key in document for key in known):
        raise KubeconfigError(f"{where}: not a kubeconfig (a YAML mapping with clusters, users and contexts)")
    for list_name in _NAMED_LISTS:
        entries = document.get(list_name) or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise KubeconfigError(f"{where}: {list_name} is not a list of named entries")
    folder = file.resolve().parent
    for entry in document.get("clusters") or []:
        _absolutise(entry, "cluster", folder)
    for entry in document.get("users") or []:
        _absolutise(entry, "user", folder)
    return document


def merge(documents: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """kubectl's merge of a `$KUBECONFIG` list: the first file to set a key (a named entry, or a scalar
    such as `current-context`) wins; later files only add what is not set yet."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    named: dict[str, dict[str, Any]] = {name: {} for name in _NAMED_LISTS}
    for document in documents:
        for key, value in document.items():
            if key in _NAMED_LISTS:
                for entry in value or []:
                    named[key].setdefault(str(entry.get("name", "")), entry)
            elif key not in merged or (key == "current-context" and not merged[key]):
                merged[key] = value
    for name in _NAMED_LISTS:
        merged[name] = list(named[name].values())
    return merged


def load(choice: Choice, context: str = "") -> dict[str, Any]:
    """The merged configuration `choice` names, checked to have the context to use. Raises
    KubeconfigError (one line naming the file or files)."""
    merged = merge([_read_one(path, choice.origin) for path in choice.paths])
    wanted = context or merged.get("current-context") or ""
    names = [str(entry.get("name", "")) for entry in merged["contexts"]]
    if not wanted:
        raise KubeconfigError(f"{choice.describe()}: no current-context; give --context (one of: "
                              f"{', '.join(names) or 'none defined'})")
    if wanted not in names:
        flag = "--context" if context else "current-context"
        raise KubeconfigError(f"{choice.describe()}: {flag} {wanted!r} is not defined (contexts: "
                              f"{', '.join(names) or 'none'})")
    return merged
