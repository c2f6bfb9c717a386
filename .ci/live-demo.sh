#!/usr/bin/env bash
# Starts the pinned scripted mock server (aimock) on 127.0.0.1, runs `demo330 --live` against it
# in both compositions and on both call paths, through both providers (OpenAI-compatible chat
# completions and the Anthropic Messages API), checks that each run is Completed with the
# events of the scripted `complete` scenario, and stops the server by its PID.
# Skips with a printed reason only where `node` is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null; then
    echo "SKIPPED: node is not installed, so the aimock server cannot run"
    exit 0
fi
bash testkit/aimock/setup.sh

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp /tmp/loopbound-aimock.XXXXXX.log)"
node testkit/aimock/node_modules/@copilotkit/aimock/dist/cli.js -h 127.0.0.1 -p "$port" \
    --validate-on-load -f testkit/fixtures/aimock-review.json >"$log" 2>&1 &
pid=$!
stop() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "stopped aimock (PID $pid)"
}
trap stop EXIT
for _ in $(seq 1 100); do
    grep -q "listening on" "$log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "error: aimock exited" >&2; exit 1; }
    sleep 0.1
done
echo "aimock (PID $pid) listening on 127.0.0.1:$port"

cargo build --quiet --locked -p loopbound-demos --bin demo330
demo="${CARGO_TARGET_DIR:-target}/debug/demo330"
expected='[{"kind":"ModelCall","name":"model","count":1},{"kind":"Middleware","name":"read_ticket","count":1},{"kind":"ToolCall","name":"read_ticket","count":1},{"kind":"ModelCall","name":"model","count":2},{"kind":"Middleware","name":"finish_review","count":2},{"kind":"ToolCall","name":"finish_review","count":2},{"kind":"ModelCall","name":"model","count":3}]'
for flags in "" "--simple" "--stream" "--simple --stream" \
    "--provider anthropic" "--provider anthropic --simple" "--provider anthropic --stream" \
    "--provider anthropic --simple --stream"; do
    # shellcheck disable=SC2086 # The flags are words.
    report="$(LOOPBOUND_OPENAI_BASE_URL="http://127.0.0.1:$port/v1" LOOPBOUND_OPENAI_MODEL=aimock-review \
        LOOPBOUND_ANTHROPIC_BASE_URL="http://127.0.0.1:$port/v1" LOOPBOUND_ANTHROPIC_MODEL=aimock-review \
        "$demo" complete --live --json $flags)"
    status="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["status"])' "$report")"
    events="$(python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])["events"], separators=(",", ":")))' "$report")"
    if [ "$status" != "Completed" ] || [ "$events" != "$expected" ]; then
        echo "FAIL: demo330 complete --live $flags: $report" >&2
        exit 1
    fi
    echo "demo330 complete --live $flags: Completed with the scripted run's events"
done
