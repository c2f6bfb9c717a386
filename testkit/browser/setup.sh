#!/usr/bin/env bash
# Makes sure a headless browser and its WebDriver server are on this machine, for the operator
# page's browser tests (demos/tests/page.rs): Debian's chromium and chromium-driver, installed
# from the distribution's packages when missing. Nothing is started here (each test starts and
# stops its own chromedriver).
# Idempotent: does nothing when both chromium and chromedriver are found on PATH.
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "browser found: $(chromium --version 2>/dev/null || echo chromium), $(chromedriver --version | head -1)"
    exit 0
fi

command -v apt-get >/dev/null || { echo "error: chromium is missing and apt-get is not available" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "error: chromium is missing; installing it needs root" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null

command -v chromium >/dev/null && command -v chromedriver >/dev/null \
    || { echo "error: chromium was installed but chromium or chromedriver is still not found" >&2; exit 1; }
echo "browser installed: $(chromium --version 2>/dev/null || echo chromium), $(chromedriver --version | head -1)"
