#!/usr/bin/env bash
# loopbound and the Python peers under the same load, on this machine, in one go: one load model
# server (the testkit's, whole replies, LATENCY_MS per reply) shared by everything; loopbound's
# `load` command at each N, and journaled on SQLite at the first N; Microsoft Agent Framework and
# Pydantic AI at each N (halved until it passes, to find the largest N each sustains under
# MAX_RSS_MIB). Prints one table and keeps every report in OUT.
#
#   benches/peers-load/compare.sh                       # N = 1000 and 10000: about an hour here,
#                                                       # most of it the peers at 10000 hitting
#                                                       # their time cap, then halving
#   NS="1000 2500" benches/peers-load/compare.sh        # about 15 minutes
#   NS="200" PEERS="pydantic_ai" benches/peers-load/compare.sh
#
# Environment:
#   NS           the concurrent runs to try (default "1000 10000")
#   PEERS        subset of: agent_framework pydantic_ai (default both)
#   LATENCY_MS   the server's latency per reply (default 200)
#   RELEASE_OVER_MS  answer the held first calls evenly over this window, so that the calls
#                arrive spread (default 0: all at once, a burst); e.g. LATENCY_MS=3000
#                RELEASE_OVER_MS=9000 keeps every run in flight for 6 s at N / 9 calls a second
#   HTTP2        loopbound also over HTTP/2 on this many connections (default 8; 0: not)
#   MAX_RSS_MIB  a peer that passes this resident set stops and counts as failed (default 8192)
#   MAX_SECONDS  a peer load still running then stops and counts as failed (default 900)
#   JOURNAL=0    skip the journaled loopbound run
#   VENV         the peers' virtualenv (default /tmp/peers-load-venv; created if missing, pinned by
#                requirements.txt here and constrained by the scripted peers' requirements.lock)
#   PEERS_DIR    the scripted peers' folder, for its requirements.lock (default ../shared/bench/peers)
#   OUT          where the reports go (default target/peers-load/<UTC time>)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NS=${NS:-"1000 10000"}
PEERS=${PEERS:-"agent_framework pydantic_ai"}
LATENCY_MS=${LATENCY_MS:-200}
RELEASE_OVER_MS=${RELEASE_OVER_MS:-0}
HTTP2=${HTTP2:-8}
export LOAD_RELEASE_OVER_MS=$RELEASE_OVER_MS
export LOAD_MAX_RSS_MIB=${MAX_RSS_MIB:-8192} LOAD_MAX_SECONDS=${MAX_SECONDS:-900}
VENV=${VENV:-/tmp/peers-load-venv}
PEERS_DIR=${PEERS_DIR:-$root/../shared/bench/peers}
export PYTHONDONTWRITEBYTECODE=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
OUT=${OUT:-$CARGO_TARGET_DIR/peers-load/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

log() { echo "[peers-load $(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
started=$(date +%s)

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV from $here/requirements.txt"
  python3.11 -m venv "$VENV"
  constraint=()
  if [ -f "$PEERS_DIR/requirements.lock" ]; then constraint=(-c "$PEERS_DIR/requirements.lock"); fi
  "$VENV/bin/pip" install -q -r "$here/requirements.txt" "${constraint[@]}"
fi
PY="$VENV/bin/python"

log "building the load command and the load server (release)"
cargo build --release --locked -q -p loopbound-benches --bin load
cargo build --release --locked -q -p loopbound-testkit --bin load-server
load="$CARGO_TARGET_DIR/release/load"

"$CARGO_TARGET_DIR/release/load-server" --whole --latency-ms "$LATENCY_MS" --url-file "$OUT/url" > /dev/null &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$OUT/url" ] && break; sleep 0.1; done
export LOAD_URL=$(cat "$OUT/url") LOAD_LATENCY_MS=$LATENCY_MS LOAD_OUT=$OUT
log "load server at $LOAD_URL (pid $server_pid), $LATENCY_MS ms per reply"

{
  bash "$root/benches/machine.sh" "$PY"
  echo "open files: $(ulimit -Hn) (hard limit; each client raises its soft limit to it)"
  echo "latency per reply: $LATENCY_MS ms; first calls released over: $RELEASE_OVER_MS ms; N: $NS"
} > "$OUT/machine.txt"

first_n=${NS%% *}
# Every loopbound run is watched: a task per run reads its live stream to the outcome.
lb=(--server "$LOAD_URL" --latency-ms "$LATENCY_MS" --release-over-ms "$RELEASE_OVER_MS" --watch)
for n in $NS; do
  log "loopbound, N = $n"
  "$load" --runs "$n" "${lb[@]}" --out "$OUT/loopbound.n$n.json" \
    > "$OUT/loopbound.n$n.txt" || log "loopbound failed at N = $n; see $OUT/loopbound.n$n.txt"
  if [ "$HTTP2" != 0 ]; then
    log "loopbound over HTTP/2 x $HTTP2, N = $n"
    "$load" --runs "$n" "${lb[@]}" --http2 "$HTTP2" --out "$OUT/loopbound-h2.n$n.json" \
      > "$OUT/loopbound-h2.n$n.txt" || log "loopbound over HTTP/2 failed at N = $n"
  fi
  if [ "$n" = "$first_n" ] && [ "${JOURNAL:-1}" != 0 ]; then
    log "loopbound journaled on SQLite, N = $n"
    "$load" --runs "$n" "${lb[@]}" --journal sqlite \
      --out "$OUT/loopbound-sqlite.n$n.json" > "$OUT/loopbound-sqlite.n$n.txt" \
      || log "journaled loopbound failed at N = $n"
  fi
done
for peer in $PEERS; do
  for n in $NS; do
    try=$n
    while [ "$try" -ge 100 ]; do
      log "$peer, N = $try"
      if LOAD_RUNS=$try "$PY" "$here/load_$peer.py" > /dev/null 2> "$OUT/$peer.n$try.stderr"; then
        break
      fi
      log "$peer failed at N = $try; see $OUT/$peer.n$try.json / .stderr"
      try=$((try / 2))
    done
  done
done
find "$OUT" -name '*.stderr' -empty -delete
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
"$PY" "$here/table.py" "$OUT" > "$OUT/table.md"
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
log "done in $(( $(date +%s) - started )) s; reports in $OUT"
