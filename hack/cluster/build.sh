#!/usr/bin/env bash
# Builds the real control plane the e2e suite is judged by: kube-apiserver, kube-controller-manager and
# kube-scheduler of the release pinned in go.mod, and etcd, from the published Go modules, into
# .tools/cluster/bin/. Idempotent: a stamp of go.mod, go.sum and this script skips a build already done.
# Nothing of Kubernetes is kept in the repository but go.mod and go.sum.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${VPA_CONTROL_PLANE_BIN:-$root/.tools/cluster/bin}"  # where vpa sim --control-plane=kubernetes looks
stamp="$out/.stamp"

# --optional: without Go, say so in one line and succeed (the tests that need the binaries then skip).
if ! command -v go >/dev/null 2>&1; then
  if [[ "${1:-}" == "--optional" ]]; then
    echo "control plane: not built: go not found (Go 1.25 or newer builds it; its tests skip)"
    exit 0
  fi
  echo "hack/cluster/build.sh: go not found on PATH (Go 1.25 or newer builds the control plane)" >&2
  exit 3
fi

version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")"
want="$(cat "$here/go.mod" "$here/go.sum" "$0" | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
bins=(kube-apiserver kube-controller-manager kube-scheduler etcd)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  ok=1
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || ok=0; done
  if [[ $ok == 1 ]]; then
    echo "control plane $version already built in $out"
    exit 0
  fi
fi

mkdir -p "$out"
minor="${version#v1.}"; minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
ldflags+=" -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
cd "$here"
start=$(date +%s)
echo "building kube-apiserver, kube-controller-manager, kube-scheduler $version and etcd (a cold build takes a while)"
# One build for the three Kubernetes commands shares the compiled packages between them.
CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler
CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
echo "$want" > "$stamp"
echo "built in $(( $(date +%s) - start )) s into $out"
