#!/usr/bin/env bash
# Builds one Kubernetes release for `vpa sim --control-plane=kubernetes`: kube-apiserver,
# kube-controller-manager, kube-scheduler and etcd (the control plane the e2e suite is judged by) and
# hollow-node (this repository's hollow kubelet, hack/cluster/hollow-node, on the release's kubelet code),
# from the published Go modules of the release's folder hack/cluster/v1.<minor>/, into
# .tools/cluster/<version>/bin/. Nothing of Kubernetes is kept in the repository but go.mod and go.sum.
#
# Usage: hack/cluster/build.sh [--optional] [VERSION...]   (default: $KUBERNETES_VERSION, else the newest
# stable release below). Each binary has its own stamp (go.mod, go.sum, this script, its sources, the Go
# version), so a second run only checks stamps, and a changed hollow node relinks only itself. Progress is
# printed per binary, with a line a minute while one compiles. All releases built with the machine's Go share
# its one build cache; a release whose go.mod needs a newer Go (v1.38: go 1.27.0) is built with the approved
# GOTOOLCHAIN=go1.27.3, which this script sets for that release alone and says so (go-toolchain.sh), so no
# shell needs the export to build it. $VPA_CLUSTER_DIR moves the cache folder (default .tools/cluster).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# The releases with a module folder here; the first is the default (newest stable), pre-releases come last.
# Kept in step with vpa/sim/kubernetes/releases.py.
releases=(v1.37.2 v1.36.3 v1.38.0-beta.0)
source "$here/go-toolchain.sh"

optional=0
versions=()
for arg in "$@"; do
  case "$arg" in
    --optional) optional=1 ;;
    v*) versions+=("$arg") ;;
    *) echo "hack/cluster/build.sh: unknown argument $arg (want --optional or a release such as ${releases[0]})" >&2; exit 2 ;;
  esac
done
[[ ${#versions[@]} -gt 0 ]] || versions=("${KUBERNETES_VERSION:-${releases[0]}}")

# --optional: without Go, say so in one line and succeed (the tests that need the binaries then skip).
if ! command -v go >/dev/null 2>&1; then
  if [[ $optional == 1 ]]; then
    echo "control plane: not built: go not found (Go 1.26 or newer builds it; its tests skip)"
    exit 0
  fi
  echo "hack/cluster/build.sh: go not found on PATH (Go 1.26 or newer builds the control plane)" >&2
  exit 3
fi

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

build_release() {
  local version="$1" minor dir out
  minor="${version#v1.}"; minor="${minor%%.*}"
  dir="$here/v1.$minor"
  if [[ ! -f "$dir/go.mod" ]] || [[ "$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$dir/go.mod")" != "$version" ]]; then
    echo "hack/cluster/build.sh: $version has no module folder (built here: ${releases[*]}; add one with hack/cluster/new-release.sh $version)" >&2
    return 2
  fi
  # The machine's Go unless the go line needs the newer one; `local` also overrides a GOTOOLCHAIN exported
  # in the shell, so the releases of the machine's Go keep their warm build cache.
  local goline toolchain gover
  goline="$(go_line "$dir/go.mod")"
  toolchain="$(go_toolchain_for "$goline")" || {
    echo "hack/cluster/build.sh: $version: its go.mod says go $goline, which no toolchain here builds" >&2
    return 2
  }
  export GOTOOLCHAIN="$toolchain"
  if [[ $toolchain != local ]]; then
    echo "Kubernetes $version: go.mod says go $goline, newer than this machine's go $(go_local_version): building with GOTOOLCHAIN=$toolchain (fetched once from the Go module proxy)"
  fi
  gover="$(go env GOVERSION)"
  out="${VPA_CLUSTER_DIR:-$root/.tools/cluster}/$version/bin"
  mkdir -p "$out"
  local vpkg=k8s.io/component-base/version
  local kflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
  kflags+=" -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
  local tags=""
  [[ $minor -le 36 ]] && tags="kube136"  # the cadvisor fake's MachineInfo took no logger before 1.37
  local base; base="$(hash_of "$dir/go.mod" "$dir/go.sum" "$0")"
  local hollow
  hollow="$(hash_of "$here"/hollow-node/*.go "$here/hollow-node/go.mod" "$here/hollow-node/release/v1.$minor"/* \
    $(find "$here/stand-ins" -type f -name '*.go' -o -type f -name go.mod | sort))"
  # name, package, ldflags, extra stamp input
  local -a plan=(
    "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|$kflags|"
    "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|$kflags|"
    "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|$kflags|"
    "hollow-node|vpa.local/hack/cluster/hollow-node|$kflags|$hollow"
    "etcd|go.etcd.io/etcd/server/v3|-s -w|"
  )
  local todo=() entry name pkg flags extra want
  for entry in "${plan[@]}"; do
    IFS='|' read -r name pkg flags extra <<<"$entry"
    want="$base $extra $gover $tags"
    if [[ -x "$out/$name" && -f "$out/.stamp-$name" && "$(cat "$out/.stamp-$name")" == "$want" ]]; then
      continue
    fi
    todo+=("$entry")
  done
  if [[ ${#todo[@]} == 0 ]]; then
    echo "Kubernetes $version already built in $out"
    return 0
  fi
  echo "Kubernetes $version: building ${#todo[@]} binaries into $out (cold: 10-20 minutes on 2 cores; warm: seconds)"
  local start=$SECONDS i=0 t ticker
  for entry in "${todo[@]}"; do
    IFS='|' read -r name pkg flags extra <<<"$entry"
    i=$((i + 1))
    t=$SECONDS
    echo "  [$i/${#todo[@]}] $name ..."
    # The ticker waits on its sleep with `wait`, which a signal interrupts, and takes the sleep with it.
    (
      trap 'kill "$s" 2>/dev/null; exit 0' TERM
      while :; do
        sleep "${VPA_BUILD_TICK_S:-60}" >/dev/null & s=$!
        wait "$s"
        echo "      still compiling $name ($((SECONDS - t)) s)"
      done
    ) &
    ticker=$!
    if ! (cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags "$tags" -ldflags "$flags" -o "$out/$name.new" "$pkg"); then
      kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
      echo "hack/cluster/build.sh: building $name of $version failed (see above)" >&2
      return 1
    fi
    kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
    mv -f "$out/$name.new" "$out/$name"
    echo "$base $extra $gover $tags" > "$out/.stamp-$name"
    echo "  [$i/${#todo[@]}] $name done in $((SECONDS - t)) s"
  done
  echo "Kubernetes $version built in $((SECONDS - start)) s into $out"
}

for v in "${versions[@]}"; do
  build_release "$v"
done
