#!/usr/bin/env bash
# What an admission runs under the scope's ledger lock, counted in instructions by callgrind:
# `compare spin` repeats the admission, and callgrind collects only inside Guard::locked, the
# function that is exactly a decision's critical section (core/src/guard/mod.rs). Instruction
# counts do not move with the machine's load, so binaries built from two commits can be
# compared on a busy machine.
#
#   benches/lock.sh                                  # the compare binary of this tree (built)
#   benches/lock.sh before/compare after/compare     # binaries side by side, one table
#
# Each figure is per admission: (count over 2N admissions − count over N) / N, which leaves out
# what the program does once (setup, the runtime, the watcher's end). Columns:
#   under the lock      instructions inside Guard::locked (taking the lock, the check and
#                       reserve, queueing the event for a watcher, releasing the lock)
#   the decision        instructions inside Guard::admit_tool: the above, plus what follows the
#                       release (waking the watcher)
#   whole admission     every instruction of the loop (binding, signature, the decision; for
#                       admit-watched also the watcher's task reading the event)
# A wake that unparks a sleeping thread makes a futex system call, which callgrind does not
# count: what runs in the kernel is in none of the columns.
#
# Environment: N (default 10000) admissions in the shorter run. The scope's log grows by one
# event per admission and doubles its buffer now and then; with N much below 10000 the copies
# of one doubling weigh on the figure (N = 1000 gives about 65 instructions more under the
# lock; N = 2000 and 10000 agree within 15).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-10000}
if ! command -v valgrind > /dev/null; then
  echo "lock.sh: valgrind is not installed" >&2
  exit 64
fi
if [ "$#" -eq 0 ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
  cargo build --release --locked -q -p loopbound-benches --bin compare
  set -- "$CARGO_TARGET_DIR/release/compare"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Instructions collected over `iterations` admissions of `op`, inside `collect` (a function name
# pattern) or everywhere (empty).
count() {
  local binary=$1 op=$2 iterations=$3 collect=$4
  local args=(--tool=callgrind "--callgrind-out-file=$work/out")
  if [ -n "$collect" ]; then
    args+=(--collect-atstart=no "--toggle-collect=$collect")
  fi
  valgrind "${args[@]}" "$binary" spin "$op" --iterations "$iterations" > /dev/null 2> "$work/log"
  sed -n 's/^summary: //p' "$work/out"
}

per_admission() {
  local small large
  small=$(count "$1" "$2" "$N" "$3")
  large=$(count "$1" "$2" "$((2 * N))" "$3")
  echo $(((large - small) / N))
}

echo "| binary | operation | under the lock | the decision | whole admission |"
echo "|---|---|---:|---:|---:|"
for binary in "$@"; do
  for op in admit admit-watched; do
    echo "| $binary | $op | $(per_admission "$binary" "$op" '*Guard::locked*') |" \
      "$(per_admission "$binary" "$op" '*Guard::admit_tool*') |" \
      "$(per_admission "$binary" "$op" '') |"
  done
done
