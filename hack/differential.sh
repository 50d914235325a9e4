#!/usr/bin/env bash
# `make differential`: upstream VPA's own binaries (built by hack/upstream/build.sh into .tools/, cached)
# beside ours on the same cluster: tests/differential. Each test runs itself in a network namespace of its
# own with only loopback (upstream's webhook binds every interface). Without Go it prints one line and
# exits 0 (the tests would skip anyway).
#
# Environment: PY (default .venv/bin/python), PYTEST_ARGS passed to pytest (e.g. "-k recommender"),
# DIFFERENTIAL_KUBERNETES_VERSION (e.g. v1.37.2): run the tests that need a cluster (recommender, updater) on
# that release's real control plane instead of `vpa sim` (built by hack/cluster/build.sh, cached).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
bash hack/upstream/build.sh --optional
select=()
if [ -n "${DIFFERENTIAL_KUBERNETES_VERSION:-}" ]; then
    bash hack/cluster/build.sh "$DIFFERENTIAL_KUBERNETES_VERSION"
    export VPA_DIFFERENTIAL_CONTROL_PLANE_BIN="$PWD/.tools/cluster/$DIFFERENTIAL_KUBERNETES_VERSION/bin"
    select=(-k "test_recommender or test_updater")
fi
# shellcheck disable=SC2086
"$PY" -m pytest tests/differential -m differential -p no:cacheprovider -rs "${select[@]}" ${PYTEST_ARGS:-}
