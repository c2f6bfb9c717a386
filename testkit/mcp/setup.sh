#!/usr/bin/env bash
# Installs the two pinned reference MCP servers into testkit/mcp/node_modules, where the
# loopbound-mcp tests and the mcp330 console look for them:
#   @modelcontextprotocol/server-everything 2026.8.31 (tools of many shapes, long operations)
#   @modelcontextprotocol/server-filesystem 2026.8.31 (real side effects in a temporary folder)
# Idempotent: does nothing when both pinned versions are already installed.
set -euo pipefail
cd "$(dirname "$0")"

readonly PINNED=2026.8.31
readonly PACKAGES=(server-everything server-filesystem)

installed_version() {
    local manifest="node_modules/@modelcontextprotocol/$1/package.json"
    [ -f "$manifest" ] && node -e "process.stdout.write(require('./$manifest').version)"
}

all_installed() {
    for package in "${PACKAGES[@]}"; do
        [ "$(installed_version "$package" || true)" = "$PINNED" ] || return 1
    done
}

command -v node >/dev/null || { echo "error: node (>= 20) is required" >&2; exit 1; }

if all_installed; then
    echo "MCP servers $PINNED already installed in $(pwd)/node_modules"
    exit 0
fi

command -v npm >/dev/null || { echo "error: npm is required" >&2; exit 1; }

npm install --no-audit --no-fund --no-package-lock --loglevel=error

for package in "${PACKAGES[@]}"; do
    version="$(installed_version "$package" || true)"
    if [ "$version" != "$PINNED" ]; then
        echo "error: expected @modelcontextprotocol/$package $PINNED, found '${version}'" >&2
        exit 1
    fi
done
echo "MCP servers $PINNED installed in $(pwd)/node_modules"
