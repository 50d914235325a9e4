#!/usr/bin/env bash
# `make e2e-kind`: the e2e scenarios against a real cluster — kind, the image built from this repository,
# the chart installed with helm — instead of the simulated cluster.
#
# Needs docker (with a reachable daemon) and kind on PATH; without them it prints one line and exits 0, so
# it can sit in any pipeline. helm comes from hack/install-tools.sh (.tools/). metrics-server is installed
# from its release manifest (recommendations need metrics.k8s.io), so this step needs network access.
#
# Environment: KIND_CLUSTER (default vpa-e2e), KEEP_CLUSTER=1 to leave the cluster running afterwards,
# PYTEST_ARGS passed to pytest (e.g. "-k admission").
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker >/dev/null 2>&1 || ! command -v kind >/dev/null 2>&1; then
    echo "e2e-kind: skipped: docker/kind not found"
    exit 0
fi
if ! docker info >/dev/null 2>&1; then
    echo "e2e-kind: skipped: docker daemon not reachable"
    exit 0
fi

PY=${PY:-.venv/bin/python}
make -s setup PY="$PY"
HELM=.tools/helm/helm
CLUSTER=${KIND_CLUSTER:-vpa-e2e}
IMAGE=vpa:e2e
NAMESPACE=vpa-system
METRICS_SERVER=https://github.com/kubernetes-sigs/metrics-server/releases/download/v0.7.2/components.yaml
WORK=$(mktemp -d)
KUBECONFIG_FILE="$WORK/kubeconfig"

cleanup() {
    if [ "${KEEP_CLUSTER:-0}" != "1" ]; then
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    else
        echo "e2e-kind: cluster $CLUSTER kept; kubeconfig: $KUBECONFIG_FILE"
    fi
}
trap cleanup EXIT

bash hack/install-tools.sh
kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_FILE" --wait 120s
kubectl() { .venv/bin/kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

# metrics.k8s.io: kind's kubelets serve self-signed certificates.
kubectl apply -f "$METRICS_SERVER"
kubectl -n kube-system patch deployment metrics-server --type=json \
    -p '[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--kubelet-insecure-tls"}]'
kubectl -n kube-system rollout status deployment/metrics-server --timeout=180s

# The scenarios' InPlace workload needs the gate on (the gate-off rejection scenario skips here).
"$HELM" install vpa charts/vpa --kubeconfig "$KUBECONFIG_FILE" -n "$NAMESPACE" --create-namespace \
    --set image.repository=vpa --set image.tag=e2e --set image.pullPolicy=Never \
    --set featureGates.InPlace=true --wait --timeout 5m

E2E_KUBECONFIG="$KUBECONFIG_FILE" "$PY" -m pytest e2e ${PYTEST_ARGS:-}
