#!/usr/bin/env bash
# Installs the pinned scripted mock server (@copilotkit/aimock 1.43.0, MIT, no dependencies)
# into testkit/aimock/node_modules, where the tests (through the testkit) look for it.
# Idempotent: does nothing when the pinned version is already installed.
set -euo pipefail
cd "$(dirname "$0")"

readonly PINNED=1.43.0
readonly MANIFEST=node_modules/@copilotkit/aimock/package.json

installed_version() {
    [ -f "$MANIFEST" ] && node -e "process.stdout.write(require('./$MANIFEST').version)"
}

if [ "$(installed_version || true)" = "$PINNED" ]; then
    echo "aimock $PINNED already installed in $(pwd)/node_modules"
    exit 0
fi

command -v node >/dev/null || { echo "error: node (>= 20.15) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "error: npm is required" >&2; exit 1; }

npm install --no-audit --no-fund --no-package-lock --loglevel=error

version="$(installed_version || true)"
if [ "$version" != "$PINNED" ]; then
    echo "error: expected @copilotkit/aimock $PINNED, found '${version}'" >&2
    exit 1
fi
echo "aimock $PINNED installed in $(pwd)/node_modules"
