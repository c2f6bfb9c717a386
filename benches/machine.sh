#!/usr/bin/env bash
# Prints the machine a comparison ran on, one `key: value` line each, for the comparison
# scripts' machine.txt: date, CPUs, memory, kernel, rustc, and the Python given as $1.
set -euo pipefail
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "kernel: $(uname -sr)"
echo "rustc: $(rustc --version)"
echo "python: $("$1" --version 2>&1)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
