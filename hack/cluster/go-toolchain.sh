# Sourced by build.sh and new-release.sh: which Go toolchain builds a release module, from its go line.
#
# The machine's own Go (GOTOOLCHAIN=local) builds every release whose go.mod it can, so those releases keep
# one warm build cache. A release whose go line is newer (v1.38 says `go 1.27.0`) is built with the one
# approved newer toolchain, go1.27.3, which the go command fetches from the Go module proxy like a module
# (about 76 MB, once per machine); a go line newer than that is an error. A `toolchain` line in go.mod is
# not relied on: the machine's Go is set to GOTOOLCHAIN=local, which ignores it.

GO_NEWER_TOOLCHAIN=go1.27.3

# go_version_le A B: whether Go version A (1.27, 1.27.0, 1.27rc1; no "go" prefix) is at most B.
go_version_le() {
  [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$1" ]]
}

# go_local_version: the machine's own Go, without the "go" prefix (1.26.8), whatever GOTOOLCHAIN says.
go_local_version() {
  local v
  v="$(GOTOOLCHAIN=local go env GOVERSION)" || return 1
  echo "${v#go}"
}

# go_toolchain_for GOLINE: prints the GOTOOLCHAIN for a module whose go line is GOLINE: `local` when the
# machine's Go is new enough, else the approved newer toolchain; fails (one line on stderr) when GOLINE
# is newer than both.
go_toolchain_for() {
  local want="$1" have
  have="$(go_local_version)" || { echo "cannot run go env GOVERSION" >&2; return 1; }
  if go_version_le "$want" "$have"; then
    echo local
  elif go_version_le "$want" "${GO_NEWER_TOOLCHAIN#go}"; then
    echo "$GO_NEWER_TOOLCHAIN"
  else
    echo "go $want is newer than this machine's go $have and the approved $GO_NEWER_TOOLCHAIN" >&2
    return 1
  fi
}

# go_line FILE: the version on the go line of a go.mod.
go_line() {
  awk '$1 == "go" {print $2; exit}' "$1"
}
