#!/usr/bin/env bash
# gpu-check.sh: build (where Lua and ninja exist), then on a GPU run the CUDA
# test suite under compute-sanitizer too, and the benchmark tables; prints a
# short summary table last. The GPU machine has no Lua, so build here and
# carry the binaries:
#   here:   tools/gpu-check.sh --build-only
#   device: tools/gpu-check.sh            (carry build/minfer-cuda-tests,
#                                          build/minfer-gpu-bench, build/quant-rmse)
set -uo pipefail
cd "$(dirname "$0")/.."

if command -v lua5.4 >/dev/null && command -v ninja >/dev/null; then
    lua5.4 configure.lua --builddir=build && ninja -C build || exit 1
fi
[ "${1:-}" = "--build-only" ] && exit 0

rows=()
row() { rows+=("$(printf '| %-34s | %-40s |' "$1" "$2")"); }

if [ ! -x build/minfer-cuda-tests ]; then
    echo "gpu-check: build/minfer-cuda-tests is missing (build with nvcc present, then carry it)"; exit 1
fi
build/minfer-cuda-tests | tee /tmp/gpu-check-tests.txt
row "CUDA tests" "$(tail -1 /tmp/gpu-check-tests.txt)"
if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        # the OOM test provokes a cudaMalloc error on purpose: API errors are not findings
        compute-sanitizer --tool "$tool" --report-api-errors no build/minfer-cuda-tests >/tmp/gpu-check-$tool.txt 2>&1
        row "compute-sanitizer $tool" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/gpu-check-$tool.txt | tail -1 | sed 's/========= //')"
    done
fi
if [ -x build/minfer-gpu-bench ]; then
    build/minfer-gpu-bench | tee /tmp/gpu-check-gemv.txt
    row "GEMV bench (Qwen3-8B shapes)" "$(grep -c '^| Q' /tmp/gpu-check-gemv.txt) shapes measured"
fi
if [ -x build/quant-rmse ]; then
    build/quant-rmse 4194304 | tee /tmp/gpu-check-rmse.txt
    row "quant RMSE table (CPU encoders)" "$(grep -c '^| [QFB]' /tmp/gpu-check-rmse.txt) types measured"
fi
if command -v nvidia-smi >/dev/null; then
    row "device" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
fi

echo
printf '| %-34s | %-40s |\n' "check" "result"
printf '|%s|%s|\n' "$(printf -- '-%.0s' {1..36})" "$(printf -- '-%.0s' {1..42})"
printf '%s\n' "${rows[@]}"
grep -q ', 0 failed,' /tmp/gpu-check-tests.txt
