#!/usr/bin/env bash
# Installs the official JSON Schema Test Suite into testkit/jsonschema/suite, where the
# loopbound-mcp suite test (integrations/mcp/tests/suite.rs) reads it. The suite is not
# committed: its JSON files come from the source distribution of the Python package
# `jsonschema` 4.26.0 on PyPI (pinned by hash), which ships the suite under json/. Only those
# files are kept; nothing of the package is installed or run.
# Idempotent: does nothing when the pinned version is already in place.
set -euo pipefail
cd "$(dirname "$0")"

readonly VERSION=4.26.0
readonly SHA256=0c26707e2efad8aa1bfc5b7ce170f3fccc2e4918ff85989ba9ffa9facb2be326

if [ -f suite/VERSION ] && [ "$(cat suite/VERSION)" = "${VERSION}" ]; then
    echo "JSON Schema Test Suite (from jsonschema ${VERSION}) already in $(pwd)/suite"
    exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 (with pip) is required" >&2; exit 1; }
python3 -m pip --version >/dev/null || { echo "error: pip is required (python3 -m pip)" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
printf 'jsonschema==%s --hash=sha256:%s\n' "${VERSION}" "${SHA256}" >"${scratch}/requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --require-hashes -r "${scratch}/requirements.txt" -d "${scratch}"
tar -xzf "${scratch}/jsonschema-${VERSION}.tar.gz" -C "${scratch}" "jsonschema-${VERSION}/json"

rm -rf suite
mv "${scratch}/jsonschema-${VERSION}/json" suite
echo "${VERSION}" >suite/VERSION
echo "JSON Schema Test Suite (from jsonschema ${VERSION}) installed in $(pwd)/suite"
