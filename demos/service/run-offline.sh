#!/usr/bin/env bash
# Runs the service example offline, with nothing to configure:
#   1. installs (once) the pinned scripted model server, aimock, and the pinned MCP servers;
#   2. builds the service (the first build takes several minutes);
#   3. starts aimock on 127.0.0.1 with demos/service/fixtures.json, and checks that it loaded
#      every fixture of that file;
#   4. starts the service against it, over the installed MCP filesystem server, with a files
#      folder and a SQLite journal in one state folder (PostgreSQL instead when
#      LOOPBOUND_DATABASE_URL is set), two tenants (acme and globex, 20,000 tokens a day each),
#      and a development approver token (made once, kept in the state folder's approver-token);
#      prints the operator page's link, then `listening on http://…`.
# Ctrl-C (or SIGTERM) stops both servers by their PIDs. docs/service.md has a session to try.
#
# Optional environment:
#   LOOPBOUND_SERVICE_LISTEN  the service's address (default 127.0.0.1:8330; port 0: any free port)
#   LOOPBOUND_SERVICE_DIR     the state folder: files/ and service.db (default target/service-offline)
#   LOOPBOUND_SERVICE_BIN     a service binary already built (default: built here by cargo)
#   AIMOCK_PORT               aimock's port (default 0: any free port; its address is printed)
#   LOOPBOUND_APPROVER_TOKEN  the development token commands present (default: the state
#                             folder's approver-token, made once from /dev/urandom)
set -euo pipefail
cd "$(dirname "$0")/../.."

readonly FIXTURES=demos/service/fixtures.json
readonly AIMOCK=testkit/aimock/node_modules/@copilotkit/aimock/dist/cli.js
readonly FILESYSTEM=testkit/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
listen="${LOOPBOUND_SERVICE_LISTEN:-127.0.0.1:8330}"
state="${LOOPBOUND_SERVICE_DIR:-target/service-offline}"

command -v node >/dev/null || { echo "error: node (>= 20.15) and npm are required" >&2; exit 1; }
bash testkit/aimock/setup.sh
bash testkit/mcp/setup.sh

if [ -n "${LOOPBOUND_SERVICE_BIN:-}" ]; then
    service_bin="$LOOPBOUND_SERVICE_BIN"
else
    echo "building the service (cargo build -p loopbound-demos --bin service)"
    cargo build --locked -p loopbound-demos --bin service
    service_bin="${CARGO_TARGET_DIR:-target}/debug/service"
fi

mkdir -p "$state/files"
# The approver: a development token (a real service sits behind a proxy that names the
# approver; docs/service.md, "Who approves"). Made once, readable by this user only.
token_file="$state/approver-token"
if [ -z "${LOOPBOUND_APPROVER_TOKEN:-}" ]; then
    if [ ! -s "$token_file" ]; then
        (umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$token_file")
    fi
    LOOPBOUND_APPROVER_TOKEN="$(cat "$token_file")"
fi
export LOOPBOUND_APPROVER_TOKEN
aimock_log="$state/aimock.log"
aimock_pid=""
service_pid=""
stop() {
    for pid in $service_pid $aimock_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

node "$AIMOCK" -h 127.0.0.1 -p "${AIMOCK_PORT:-0}" --validate-on-load -f "$FIXTURES" >"$aimock_log" 2>&1 &
aimock_pid=$!
model_url=""
for _ in $(seq 1 300); do
    model_url="$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$aimock_log" | head -n 1)"
    [ -n "$model_url" ] && break
    kill -0 "$aimock_pid" 2>/dev/null || { cat "$aimock_log" >&2; echo "error: aimock exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$model_url" ] || { cat "$aimock_log" >&2; echo "error: aimock did not start in 30 s" >&2; exit 1; }
# aimock starts even when it loads nothing (a wrong flag or path): check the count.
expected="$(node -e "process.stdout.write(String(require('./$FIXTURES').fixtures.length))")"
if ! grep -q "Loaded $expected fixture(s)" "$aimock_log"; then
    cat "$aimock_log" >&2
    echo "error: aimock did not load the $expected fixtures of $FIXTURES" >&2
    exit 1
fi
echo "aimock (PID $aimock_pid) serves $expected fixtures at $model_url/v1 (log: $aimock_log)"

LOOPBOUND_OPENAI_BASE_URL="$model_url/v1" LOOPBOUND_OPENAI_MODEL=aimock "$service_bin" \
    --listen "$listen" --files "$state/files" --journal "$state/service.db" \
    --tenant acme=20000 --tenant globex=20000 \
    --mcp-program node --mcp-arg "$FILESYSTEM" &
service_pid=$!
echo "service (PID $service_pid) starting; files in $state/files; approver token in $token_file"
case "$listen" in
    *:0) echo "the operator page: the address below, followed by /#token=$LOOPBOUND_APPROVER_TOKEN" ;;
    *) echo "the operator page: http://$listen/#token=$LOOPBOUND_APPROVER_TOKEN" ;;
esac
wait "$service_pid"
