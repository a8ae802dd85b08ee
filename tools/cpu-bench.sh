#!/usr/bin/env bash
# cpu-bench.sh: minfer (the f32 reference and the fast path) and llama.cpp
# (through llama-cpp-python, which must be installed: pip install
# llama-cpp-python) on the real model on this machine, the same threads, one
# after the other in one run: pp128, pp512 and tg128.
#   tools/cpu-bench.sh [THREADS]     (default: every core)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
model=$(tools/fetch-model.sh)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; $(date -u +%F)"
echo "SIMD: $(grep -o -m1 -w 'avx512f' /proc/cpuinfo || grep -o -m1 -w avx2 /proc/cpuinfo || echo none)"
for device in cpu cpu-fast; do
    build/minfer bench -m "$model" -p 128 -n 0 -r 3 -t "$threads" --device "$device"
    build/minfer bench -m "$model" -p 512 -n 128 -r 3 -t "$threads" --device "$device"
done
python3 tests/ref/llama_reference.py "$model" --bench "$threads"
