#!/usr/bin/env bash
# `make e2e-cluster`: the e2e scenarios against a real control plane — kube-apiserver,
# kube-controller-manager, kube-scheduler and etcd built from the Go modules pinned in hack/cluster/go.mod —
# with the simulator's kubelets and metrics.k8s.io (`vpa sim --control-plane=kubernetes`), `vpa run` as
# separate processes holding exactly the Helm chart's RBAC.
#
# Needs Go (1.25 or newer) to build the binaries once into .tools/cluster/bin (cached); without Go it prints
# one line and exits 0. helm (for rendering the chart's RBAC) comes from hack/install-tools.sh.
#
# Environment: PY (default .venv/bin/python), PYTEST_ARGS passed to pytest (e.g. "-k actuation").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
    echo "e2e-cluster: skipped: go not found (Go 1.25 or newer builds the control plane)"
    exit 0
fi
PY=${PY:-.venv/bin/python}
bash hack/cluster/build.sh
bash hack/install-tools.sh >/dev/null
# Real time: scenarios take minutes, not seconds, so the per-test timeout is longer than the suite's.
# shellcheck disable=SC2086
E2E_CONTROL_PLANE=kubernetes "$PY" -m pytest e2e -o timeout=900 -p no:cacheprovider ${PYTEST_ARGS:-}
