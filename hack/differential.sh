#!/usr/bin/env bash
# `make differential`: upstream VPA's own binaries (built by hack/upstream/build.sh into .tools/, cached)
# beside ours on the same cluster: tests/differential. Each test runs itself in a network namespace of its
# own with only loopback (upstream's webhook binds every interface). Without Go it prints one line and
# exits 0 (the tests would skip anyway).
#
# Environment: PY (default .venv/bin/python), PYTEST_ARGS passed to pytest (e.g. "-k recommender").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
bash hack/upstream/build.sh --optional
# shellcheck disable=SC2086
"$PY" -m pytest tests/differential -m differential -p no:cacheprovider -rs ${PYTEST_ARGS:-}
