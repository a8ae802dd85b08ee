#!/usr/bin/env bash
# check-variants.sh [BUILDDIR]: compiles the measuring builds' code (the
# flags of tools/build-variant.sh that BENCHMARKS' calls use) with the
# build's own nvcc command, warnings as errors, for sm_90's PTX alone (no
# machine code: ptxas is the one step left out), so code behind an #ifdef
# that the default build never compiles cannot rot unseen. One line a
# variant: "variant NAME: ok" or "variant NAME: FAILED", then the errors.
# Exit status: the number of variants that failed.
set -uo pipefail
cd "$(dirname "$0")/../${1:-build}" || exit 1
. ../tools/variant-command.sh
variants=( # name, files (all: every runtime/cuda/*.cu), flags
    "timeline|all|-DMINFER_TIMELINE"
    "preload4|matmul.cu|-DMINFER_PIECE_PRELOAD=4"
    "bounds|device.cu|-DMINFER_BOUNDS"
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bad=0
for v in "${variants[@]}"; do
    IFS='|' read -r name files flags <<<"$v"
    [ "$files" = all ] && files=$(cd ../runtime/cuda && ls *.cu)
    ok=1
    for f in $files; do
        cmd=$(variant_command "${f%.cu}.o" "../runtime/cuda/$f" "$out/o" -gencode=arch=compute_90a,code=compute_90a $flags) ||
            { echo "check-variants: no build command for ${f%.cu}.o" >"$out/err"; ok=0; break; }
        cmd=$(sed -E 's/ -gencode=arch=compute_[0-9a-z]+,code=sm_[0-9a-z]+//g' <<<"$cmd") # PTX alone: no machine code
        eval "$cmd" >"$out/err" 2>&1 || { ok=0; break; }
    done
    if [ $ok = 1 ]; then echo "variant $name: ok"; else echo "variant $name: FAILED ($f)"; cat "$out/err"; bad=$((bad + 1)); fi
done
exit $bad
