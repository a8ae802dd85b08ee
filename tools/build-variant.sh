#!/usr/bin/env bash
# build-variant.sh NAME FILE.cu [NVCC FLAGS...]: minfer, minfer-gpu-bench and
# minfer-cuda-tests with FILE.cu compiled again with FLAGS (e.g.
# -DATT_THREADS=128), as .base/<binary>-NAME, stripped, for an A/B against
# build/ on the GPU machine (tools/gpu-check.sh ab, AB=".base/minfer-NAME").
# FILE.cu may be another version of a runtime/cuda file (its object's name
# is its file name's). Needs a built build/ (tools/gpu-check.sh --build-only).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: tools/build-variant.sh NAME FILE.cu [NVCC FLAGS...]" >&2; exit 2; }
name=$1 src=$(realpath "$2")
shift 2
member=$(basename "$src" .cu).o
lib=/tmp/libminfer-$name.a
obj=$(mktemp -d)/$member
cd build
ar t libminfer.a | grep -qx "$member" || { echo "build-variant: libminfer.a has no $member" >&2; exit 1; }
# the build's own nvcc command for that object, with FLAGS added and the output moved
cmd=$(ninja -t commands "obj/runtime/cuda/$member" | tail -1)
cmd=${cmd/-MD -MF obj\/runtime\/cuda\/$member.d /}
cmd=${cmd/ -c ..\/runtime\/cuda\/${member%.o}.cu -o obj\/runtime\/cuda\/$member/ $* -c $src -o $obj}
eval "$cmd"
cp libminfer.a "$lib"
ar r "$lib" "$obj" 2>/dev/null
mkdir -p ../.base
for t in minfer minfer-gpu-bench minfer-cuda-tests; do
    link=$(ninja -t commands "$t" | tail -1)
    link=${link/ libminfer.a / $lib }
    link=${link/-o $t /-o ../.base/$t-$name }
    eval "$link"
    strip "../.base/$t-$name"
done
rm -f "$lib" "$obj"
ls -l ../.base/*-"$name"
