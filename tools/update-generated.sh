#!/usr/bin/env bash
# update-generated.sh: rewrites the committed generated/ from archs/ with the
# built compiler (a test fails while the committed copy is stale).
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build minfer-compile
for f in archs/*.lua; do
    a=$(basename "$f" .lua)
    build/minfer-compile "$f" --out "generated/$a"
done
build/minfer-compile --registry generated/registry.c $(for f in archs/*.lua; do basename "$f" .lua; done)
echo "update-generated: generated/ is current"
