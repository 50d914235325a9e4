#!/usr/bin/env bash
# Builds upstream VPA's three commands (recommender, updater, admission-controller) of the release pinned in
# go.mod from the published Go module into .tools/upstream/<version>/bin/, where the differential suite
# looks for them. Only go.mod, go.sum and tools.go are kept here: nothing of upstream is in the repository.
# Idempotent: a stamp of go.mod, go.sum, this script and the Go version skips a build already done.
# --optional: without Go, say so in one line and succeed (the differential tests then skip).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mod=k8s.io/autoscaler/vertical-pod-autoscaler

if ! command -v go >/dev/null 2>&1; then
  if [[ "${1:-}" == "--optional" ]]; then
    echo "upstream VPA: not built: go not found (Go 1.26 or newer builds it; the differential tests skip)"
    exit 0
  fi
  echo "hack/upstream/build.sh: go not found on PATH (Go 1.26 or newer builds upstream VPA)" >&2
  exit 3
fi

version="$(awk -v m="$mod" '$1 == m {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$here/go.mod")"
out="${VPA_UPSTREAM_BIN:-$root/.tools/upstream/$version/bin}"
stamp="$out/.stamp"
want="$(cat "$here/go.mod" "$here/go.sum" "$here/tools.go" "$0" | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
bins=(recommender updater admission-controller)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  ok=1
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || ok=0; done
  if [[ $ok == 1 ]]; then
    echo "upstream VPA $version already built in $out"
    exit 0
  fi
fi

mkdir -p "$out"
cd "$here"
start=$(date +%s)
echo "building upstream VPA $version: ${bins[*]} into $out (a cold build takes about ten minutes)"
# One binary at a time, so each reports its own time; the second and third reuse most compiled packages.
for b in "${bins[@]}"; do
  t0=$(date +%s)
  CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$out/$b.tmp" "$mod/pkg/$b"
  mv "$out/$b.tmp" "$out/$b"
  echo "  $b: $(( $(date +%s) - t0 )) s (total $(( $(date +%s) - start )) s)"
done
echo "$want" > "$stamp"
echo "upstream VPA $version built in $(( $(date +%s) - start )) s into $out"
