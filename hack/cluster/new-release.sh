#!/usr/bin/env bash
# Creates the Go module folder of one Kubernetes release, hack/cluster/v1.<minor>/, from the release's own
# go.mod: k8s.io/kubernetes at the release, etcd at the version that release requires, and every staging
# module (k8s.io/api, k8s.io/client-go, ...) replaced by its published v0.<minor>.<patch>, since the release's
# go.mod points them at ./staging and a dependent module cannot follow that; the hollow node and its
# release-specific parts (hollow-node/release/v1.<minor>) by their folders. Then `go mod tidy`.
# Usage: hack/cluster/new-release.sh v1.37.2   (run again to move the folder to another patch release)
set -euo pipefail
version="${1:?usage: hack/cluster/new-release.sh v1.MINOR.PATCH}"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.]+)?$ ]] || {
  echo "new-release.sh: not a Kubernetes release: $version (want v1.MINOR.PATCH)" >&2; exit 2; }
minor="${BASH_REMATCH[1]}"
staging_version="v0.${minor}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
here="$(cd "$(dirname "$0")" && pwd)"
dir="$here/v1.$minor"
mkdir -p "$dir"
if [[ ! -d "$here/hollow-node/release/v1.$minor" ]]; then
  echo "new-release.sh: no hollow-node/release/v1.$minor (copy the nearest release's and fit it to the release's API)" >&2
  exit 1
fi
modfile="$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" 2>/dev/null \
  | awk -F'"' '$2 == "GoMod" {print $4}')" || true
if [[ -z "$modfile" || ! -f "$modfile" ]]; then
  # go mod download refuses a release whose go directive is newer than the local Go; say which.
  (cd "$dir" && go mod download -json "k8s.io/kubernetes@$version" | grep '"Error"') >&2 || true
  echo "new-release.sh: cannot download k8s.io/kubernetes@$version" >&2
  exit 1
fi
goline="$(awk '$1 == "go" {print $2; exit}' "$modfile")"
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
  echo ")"
} > "$dir/go.mod"
cp "$here/tools.go.in" "$dir/tools.go"
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "wrote $dir/go.mod and go.sum for k8s.io/kubernetes $version"
