#!/usr/bin/env bash
# Fuzz smoke test: runs every cargo-fuzz target of loopbound for a few seconds each.
#
#   fuzz/smoke.sh [SECONDS]     (default 30 per target; FUZZ_TARGETS="canonical run" to pick)
#
# Uses the nightly toolchain with sanitizer instrumentation when one is installed, else stable
# with `-s none` (coverage-guided, no sanitizer). Installs cargo-fuzz if it is missing. Each run
# starts from the committed seeds (fuzz/seeds/<target>/) in a scratch corpus, so nothing under
# fuzz/ changes unless a target crashes: then libFuzzer writes the input to
# fuzz/artifacts/<target>/ and this script exits non-zero. The committed seeds and regressions
# are replayed on stable by `cargo test --workspace` (proptests/tests/replay.rs) in any case.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-30}"
targets="${FUZZ_TARGETS:-canonical json_read bind_guard run openai_parse responses_parse anthropic_parse mcp_arguments journal_rows progress}"

step() {
    echo
    echo "==> $*"
    "$@"
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    step cargo install cargo-fuzz --locked
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
    sanitizer=()
    echo "fuzz smoke: nightly toolchain found, building with the address sanitizer"
else
    toolchain=()
    sanitizer=(-s none)
    echo "fuzz smoke: no nightly toolchain, building on stable without a sanitizer (-s none)"
fi

# Fuzz builds get their own target directory unless the caller chose one.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

for target in $targets; do
    dict=()
    if [ -f "$target.dict" ]; then
        dict=(-dict="$target.dict")
    fi
    mkdir -p "$scratch/$target"
    step cargo "${toolchain[@]}" fuzz run "${sanitizer[@]}" "$target" "$scratch/$target" "seeds/$target" \
        -- -max_total_time="$seconds" -print_final_stats=1 "${dict[@]}"
done

echo
echo "fuzz smoke passed: ${targets} for ${seconds}s each."
