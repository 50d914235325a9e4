#!/usr/bin/env bash
# `make e2e-cluster`: the e2e scenarios against a real control plane — kube-apiserver,
# kube-controller-manager, kube-scheduler and etcd of one Kubernetes release, built from the Go modules of
# hack/cluster/v1.<minor>/ — with metrics.k8s.io from the simulator's usage profiles
# (`vpa sim --control-plane=kubernetes`), `vpa run` as separate processes holding exactly the Helm chart's
# RBAC. The nodes run the simulator's kubelet stand-in, or with E2E_KUBELET=hollow the release's own kubelet
# code (one hollow kubelet process per node).
#
# Needs Go (1.26 or newer) to build the release once into .tools/cluster/<release>/bin (cached); without Go
# it prints one line and exits 0. helm (for rendering the chart's RBAC) comes from hack/install-tools.sh.
#
# Environment: KUBERNETES_VERSION (default: build.sh's newest stable), E2E_KUBELET (sim | hollow),
# E2E_SELECT (a pytest -k expression, spaces allowed: "not in_place"), PY (default .venv/bin/python),
# PYTEST_ARGS passed to pytest as words (e.g. "-x --maxfail=2").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
    echo "e2e-cluster: skipped: go not found (Go 1.26 or newer builds the control plane)"
    exit 0
fi
PY=${PY:-.venv/bin/python}
version=${KUBERNETES_VERSION:-v1.37.2}
bash hack/cluster/build.sh "$version"
bash hack/install-tools.sh >/dev/null
start=$SECONDS
# Real time: scenarios take minutes, not seconds, so the per-test timeout is longer than the suite's.
# shellcheck disable=SC2086
E2E_CONTROL_PLANE=kubernetes E2E_KUBERNETES_VERSION="$version" E2E_KUBELET="${E2E_KUBELET:-sim}" \
    "$PY" -m pytest e2e -o timeout=900 -p no:cacheprovider ${E2E_SELECT:+-k "$E2E_SELECT"} ${PYTEST_ARGS:-} \
    && rc=0 || rc=$?
echo "e2e-cluster: Kubernetes $version, kubelet ${E2E_KUBELET:-sim}: pytest exit $rc in $((SECONDS - start)) s"
exit $rc
