#!/usr/bin/env bash
# Creates the Go module folder of one Kubernetes release, hack/cluster/v1.<minor>/, from the release's own
# go.mod: k8s.io/kubernetes at the release, etcd at the version that release requires, and every staging
# module (k8s.io/api, k8s.io/client-go, ...) replaced by its published v0.<minor>.<patch>, since the release's
# go.mod points them at ./staging and a dependent module cannot follow that; the hollow node and its
# release-specific parts (hollow-node/release/v1.<minor>) by their folders, and a required module the Go
# module proxy does not serve by our stand-in for it (stand-ins/<name>). Then `go mod tidy`, with the
# machine's Go or, for a release whose go line needs it, the approved newer one (go-toolchain.sh).
# Usage: hack/cluster/new-release.sh v1.37.2   (or a pre-release: v1.38.0-beta.0; run again to move the
# folder to another patch release)
set -euo pipefail
version="${1:?usage: hack/cluster/new-release.sh v1.MINOR.PATCH}"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.]+)?$ ]] || {
  echo "new-release.sh: not a Kubernetes release: $version (want v1.MINOR.PATCH or v1.MINOR.PATCH-PRE)" >&2; exit 2; }
minor="${BASH_REMATCH[1]}"
staging_version="v0.${minor}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
here="$(cd "$(dirname "$0")" && pwd)"
dir="$here/v1.$minor"
mkdir -p "$dir"
if [[ ! -d "$here/hollow-node/release/v1.$minor" ]]; then
  echo "new-release.sh: no hollow-node/release/v1.$minor (copy the nearest release's and fit it to the release's API)" >&2
  exit 1
fi
source "$here/go-toolchain.sh"
# Read the release's go.mod from outside any module (a module folder of a newer Go would stop the go
# command first). A release whose go line is newer than this Go still has its go.mod downloaded, with an
# "Error" saying so; the go line then picks the toolchain for the rest.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
json="$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$version" 2>/dev/null)" || true
modfile="$(awk -F'"' '$2 == "GoMod" {print $4}' <<<"$json")"
if [[ -z "$modfile" || ! -f "$modfile" ]]; then
  grep '"Error"' <<<"$json" >&2 || true
  echo "new-release.sh: cannot download k8s.io/kubernetes@$version" >&2
  exit 1
fi
goline="$(go_line "$modfile")"
toolchain="$(go_toolchain_for "$goline")" || { echo "new-release.sh: k8s.io/kubernetes $version needs a newer Go" >&2; exit 1; }
export GOTOOLCHAIN="$toolchain"
echo "k8s.io/kubernetes $version: go $goline, Go toolchain $toolchain"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$modfile")"
{
  echo "module vpa.local/hack/cluster/v1.$minor"
  echo
  echo "go $goline"
  echo
  echo "require ("
  echo "	go.etcd.io/etcd/server/v3 $etcd"
  echo "	k8s.io/kubernetes $version"
  echo "	vpa.local/hack/cluster/hollow-node v0.0.0"
  echo "	vpa.local/hack/cluster/hollow-node/release v0.0.0"
  echo ")"
  echo
  echo "replace ("
  awk -v sv="$staging_version" '$2 == "=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, sv}' "$modfile"
  echo "	vpa.local/hack/cluster/hollow-node => ../hollow-node"
  echo "	vpa.local/hack/cluster/hollow-node/release => ../hollow-node/release/v1.$minor"
  # A module the release requires and the Go module proxy does not serve: our own stand-in for it.
  for standin in "$here"/stand-ins/*/go.mod; do
    path="$(awk '$1 == "module" {print $2; exit}' "$standin")"
    if awk -v p="$path" '$1 == p' "$modfile" | grep -q .; then
      echo "	$path => ../stand-ins/$(basename "$(dirname "$standin")")"
    fi
  done
  echo ")"
} > "$dir/go.mod"
cp "$here/tools.go.in" "$dir/tools.go"
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "wrote $dir/go.mod and go.sum for k8s.io/kubernetes $version"
