#!/usr/bin/env bash
# One comparison, in one go, on this machine: loopbound's scripted `complete` run timed the
# peers' way, the same scenario in the Python agent frameworks under PEERS_DIR, the `repeat`
# behaviour of each, the in-process speed targets and the memory footprint. Prints the tables
# and keeps every raw output in OUT.
#
#   benches/compare.sh                                   # all peers, one round (~2.5 min)
#   PEERS="agent_framework pydantic_ai" benches/compare.sh
#   ROUNDS=3 PEER_RUNS=500 benches/compare.sh
#
# Environment:
#   PEERS_DIR    the peers' scripts (default: ../shared/bench/peers from the repository root)
#   PEERS        subset of: agent_framework pydantic_ai openai_agents langgraph langchain_agent
#   ROUNDS       rounds, interleaved across frameworks; the table keeps each one's best (default 1)
#   PEER_RUNS, PEER_WARMUP   timed and warm-up runs, for every framework (default 2000, 200)
#   PEER_TOOLS   async (default) or sync tool bodies in the peers
#   VENV         the peers' virtualenv (default /tmp/peers-venv; created from their
#                requirements.txt if missing)
#   OUT          where raw outputs go (default target/compare/<UTC time>)
#   TARGETS=0    skip the in-process targets; FOOTPRINT=0 skip the memory footprint;
#   LOCK=0       skip what an admission runs under the ledger's lock (lock.sh, callgrind;
#                skipped without valgrind)
#
# The peers' scripts have no switch to skip their default-limit `repeat` runs: the two
# LangGraph-based peers spend about a minute each there (about 5000 model calls each). Leave
# them out with PEERS=... for a quick look.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$root/../shared/bench/peers}
if [ ! -f "$PEERS_DIR/common.py" ]; then
  echo "compare.sh: no peer scripts in $PEERS_DIR; set PEERS_DIR to the peers' folder" >&2
  exit 64
fi
PEERS_DIR=$(cd "$PEERS_DIR" && pwd)
VENV=${VENV:-/tmp/peers-venv}
PEERS=${PEERS:-"agent_framework pydantic_ai openai_agents langgraph langchain_agent"}
ROUNDS=${ROUNDS:-1}
export PEER_RUNS=${PEER_RUNS:-2000} PEER_WARMUP=${PEER_WARMUP:-200} PEER_TOOLS=${PEER_TOOLS:-async}
export PYTHONDONTWRITEBYTECODE=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
OUT=${OUT:-$CARGO_TARGET_DIR/compare/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

log() { echo "[compare $(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
started=$(date +%s)

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV from $PEERS_DIR/requirements.txt"
  python3.11 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$PEERS_DIR/requirements.txt"
fi
PY="$VENV/bin/python"

log "building the compare binary (release)"
cargo build --release --locked -q -p loopbound-benches --bin compare
compare="$CARGO_TARGET_DIR/release/compare"

{
  bash "$root/benches/machine.sh" "$PY"
  echo "runs: $PEER_RUNS timed after $PEER_WARMUP warm-up, $ROUNDS round(s), peer tools: $PEER_TOOLS"
} > "$OUT/machine.txt"

for round in $(seq 1 "$ROUNDS"); do
  log "round $round: loopbound"
  "$compare" run --runs "$PEER_RUNS" --warmup "$PEER_WARMUP" --round "$round" --out "$OUT" > /dev/null
  for peer in $PEERS; do
    log "round $round: $peer ($PEER_TOOLS tools)"
    if ! PEER_ROUND=$round PEER_OUT=$OUT "$PY" "$PEERS_DIR/peer_$peer.py" > /dev/null \
        2> "$OUT/$peer.$PEER_TOOLS.r$round.stderr"; then
      log "$peer failed; see $OUT/$peer.$PEER_TOOLS.r$round.stderr"
    fi
  done
done
find "$OUT" -name '*.stderr' -empty -delete

if [ "${FOOTPRINT:-1}" != 0 ]; then
  log "memory footprint (dhat)"
  cargo bench --locked -q -p loopbound-benches --bench footprint > "$OUT/footprint.md" 2> "$OUT/footprint.stderr"
fi
if [ "${TARGETS:-1}" != 0 ]; then
  log "speed targets, measured in one process"
  "$compare" targets > "$OUT/targets.md"
fi
if [ "${LOCK:-1}" != 0 ] && command -v valgrind > /dev/null; then
  log "instructions under the ledger's lock (callgrind)"
  bash "$root/benches/lock.sh" "$compare" > "$OUT/lock.md"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
"$compare" table "$OUT" --tools "$PEER_TOOLS" > "$OUT/table.md"

cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
for part in targets lock footprint; do
  if [ -s "$OUT/$part.md" ]; then
    echo "### $part"
    echo
    cat "$OUT/$part.md"
    echo
  fi
done
log "done in $(( $(date +%s) - started )) s; raw outputs in $OUT"
