"""The README says what `make run` says first (issue 45): how to reach the cluster, how to stop it with and
without a terminal, and how to give a pod usage, with the one-line example; and kubectl's conventions."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SCRIPT = (Path(__file__).resolve().parents[2] / "hack" / "run-local.sh").read_text()


def test_readme_says_how_to_reach_stop_and_give_usage_as_make_run_does() -> None:
    assert "--kubeconfig .run/kubeconfig get nodes,pods,vpa -A" in README
    assert "Ctrl-C" in README
    assert "SIGTERM to make" in README
    example = re.search(r"annotate pods -l app=web '(sim\.vpa\.dev/usage=\{.*\})'", README)
    assert example is not None
    # The very example `make run` prints.
    assert example.group(1) in SCRIPT


def test_readme_gives_kubectls_kubeconfig_order_and_context() -> None:
    assert "`--kubeconfig`, else `$KUBECONFIG`" in README
    assert "`~/.kube/config`" in README
    assert "--context" in README
    assert "`25m`, `256Mi`" in README
