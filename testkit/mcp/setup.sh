#!/usr/bin/env bash
# Installs the pinned MCP servers into testkit/mcp/node_modules, where the loopbound-mcp tests
# and the mcp330 console look for them:
#   @modelcontextprotocol/server-everything 2026.8.31 (2025-06-18: tools of many shapes, long operations)
#   @modelcontextprotocol/server-filesystem 2026.8.31 (2025-06-18: real side effects in a temporary folder)
#   @modelcontextprotocol/server 2.4.0, the TypeScript SDK v2, which modern.mjs (in this folder)
#     runs on (2026-07-28: discovery, multi-round-trip requests)
# Idempotent: does nothing when every pinned version is already installed.
set -euo pipefail
cd "$(dirname "$0")"

# package@version, each under node_modules/@modelcontextprotocol/.
readonly PINNED=(server-everything@2026.8.31 server-filesystem@2026.8.31 server@2.4.0 core@2.4.0)

installed_version() {
    local manifest="node_modules/@modelcontextprotocol/$1/package.json"
    [ -f "$manifest" ] && node -e "process.stdout.write(require('./$manifest').version)"
}

all_installed() {
    for pinned in "${PINNED[@]}"; do
        [ "$(installed_version "${pinned%@*}" || true)" = "${pinned#*@}" ] || return 1
    done
}

command -v node >/dev/null || { echo "error: node (>= 20) is required" >&2; exit 1; }

if all_installed; then
    echo "MCP servers ${PINNED[*]} already installed in $(pwd)/node_modules"
    exit 0
fi

command -v npm >/dev/null || { echo "error: npm is required" >&2; exit 1; }

npm install --no-audit --no-fund --no-package-lock --loglevel=error

for pinned in "${PINNED[@]}"; do
    version="$(installed_version "${pinned%@*}" || true)"
    if [ "$version" != "${pinned#*@}" ]; then
        echo "error: expected @modelcontextprotocol/${pinned%@*} ${pinned#*@}, found '${version}'" >&2
        exit 1
    fi
done
echo "MCP servers ${PINNED[*]} installed in $(pwd)/node_modules"
