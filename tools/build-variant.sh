#!/usr/bin/env bash
# build-variant.sh NAME FILE.cu|all [NVCC FLAGS...]: minfer, minfer-gpu-bench
# and minfer-cuda-tests with FILE.cu (all: every runtime/cuda/*.cu) compiled
# again with FLAGS (e.g. -DATT_THREADS=128; -DMINFER_TIMELINE, with all: a
# measuring build, timeline.cuh; -DMINFER_BOUNDS with runtime/cuda/device.cu:
# a bound's build, MINFER_SKIP; -DMINFER_PIECE_PRELOAD=N with
# runtime/cuda/matmul.cu: the piece kernel's Q8_0 lanes load N groups
# ahead),
# as .base/<binary>-NAME, stripped, for an
# A/B against build/ on the GPU machine (tools/gpu-check.sh ab,
# AB=".base/minfer-NAME"). FILE.cu may be another version of a runtime/cuda
# file (its object's name is its file name's). Needs a built build/
# (tools/gpu-check.sh --build-only).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: tools/build-variant.sh NAME FILE.cu|all [NVCC FLAGS...]" >&2; exit 2; }
name=$1
if [ "$2" = all ]; then srcs=$(realpath runtime/cuda/*.cu); else srcs=$(realpath "$2"); fi
shift 2
lib=/tmp/libminfer-$name.a
objdir=$(mktemp -d)
cd build
. ../tools/variant-command.sh
cp libminfer.a "$lib"
pids=()
for src in $srcs; do
    member=$(basename "$src" .cu).o
    ar t libminfer.a | grep -qx "$member" || { echo "build-variant: libminfer.a has no $member" >&2; exit 1; }
    cmd=$(variant_command "$member" "$src" "$objdir/$member" "$@") # the build's own, FLAGS added
    eval "$cmd" &
    pids+=($!)
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi # two at a time (a failure stops the script)
done
for p in "${pids[@]}"; do wait "$p"; done
ar r "$lib" "$objdir"/*.o 2>/dev/null
mkdir -p ../.base
for t in minfer minfer-gpu-bench minfer-cuda-tests; do
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/ libminfer.a / $lib }
    link=${link/-o $t /-o ../.base/$t-$name }
    eval "$link"
    strip "../.base/$t-$name"
done
rm -rf "$lib" "$objdir"
ls -l ../.base/*-"$name"
