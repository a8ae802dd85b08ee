#!/usr/bin/env bash
# test.sh: the whole test suite, as the README and CI run it:
#   1. the release build and its Criterion suite (CUDA compiled in when nvcc
#      exists; GPU tests report skipped without a GPU), and then the measuring
#      builds' code compiled (tools/check-variants.sh);
#   2. the real-model suite on the release build: Qwen2.5-Coder-0.5B against
#      llama.cpp's recorded answers, and Gemma 3's tokenizer against llama.cpp's
#      ids (tools/fetch-model.sh downloads each model once);
#   3. an ASan+UBSan build of the Criterion suite;
#   3b. the server's cases (tests/ref/server_check.py) on a ThreadSanitizer build;
#   4. the libFuzzer targets under ASan+UBSan: the GGUF reader (and the
#      tokenizer from its metadata) for 60 seconds, the server's request
#      parser and reply builders for 30.
# Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0 failed=0 skipped=0
log=$(mktemp -d)

count_criterion() { # adds a Criterion run's synthesis line to the totals
    local line
    line=$(grep -a "Synthesis: Tested:" "$1" | tail -1)
    if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
    local pass fail crash
    pass=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
    fail=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
    crash=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
    passed=$((passed + pass)); failed=$((failed + fail))
    [ "$crash" -gt 0 ] && echo "test.sh: $crash crashing tests are counted among the failing"
}

suite() { # name, configure options...
    local name=$1; shift
    echo "== $name"
    if ! lua5.4 configure.lua "$@" || ! ninja -C "$dir" >"$log/$name.build" 2>&1; then
        cat "$log/$name.build"; echo "test.sh: $name: build failed"; failed=$((failed + 1)); return
    fi
    ninja -C "$dir" test 2>&1 | tee "$log/$name.out"
    count_criterion "$log/$name.out"
    if [ -x "$dir/minfer-cuda-tests" ]; then
        "$dir/minfer-cuda-tests" 2>&1 | tee "$log/$name.cuda"
        local line
        line=$(grep -aE '^cuda: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log/$name.cuda" | tail -1)
        if [ -z "$line" ]; then failed=$((failed + 1)); else
            read -r p f s < <(sed -E 's/^cuda: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/' <<<"$line")
            passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
        fi
    fi
}

dir=build suite release --builddir=build
if [ -f build/obj/runtime/cuda/matmul.o ]; then # CUDA compiled in: the measuring builds' code compiles too
    echo "== measuring builds (tools/check-variants.sh)"
    tools/check-variants.sh build 2>&1 | tee "$log/variants.out"
    rc=${PIPESTATUS[0]} bad=$(grep -c ': FAILED' "$log/variants.out")
    passed=$((passed + $(grep -c ': ok$' "$log/variants.out"))); failed=$((failed + bad))
    [ "$rc" != 0 ] && [ "$bad" = 0 ] && { echo "test.sh: check-variants.sh failed (rc=$rc)"; failed=$((failed + 1)); }
fi
echo "== real models (llama.cpp agreement; downloads the models once)"
if model=$(tools/fetch-model.sh) && gemma=$(tools/fetch-model.sh gemma3-270m); then
    MINFER_BIN=./minfer MINFER_SRC=.. MINFER_MODEL=$PWD/$model MINFER_GEMMA=$PWD/$gemma \
        bash -c 'cd build && ./minfer-model-tests --verbose' 2>&1 | tee "$log/model.out"
    count_criterion "$log/model.out"
else
    echo "test.sh: the models could not be fetched"; failed=$((failed + 1))
fi

dir=build-asan suite sanitized --builddir=build-asan --no-cuda --debug --sanitize=address,undefined

# The server's threads under ThreadSanitizer: each of its cases, the first
# race reported ending the server (and so failing the case).
echo "== server under ThreadSanitizer"
if lua5.4 configure.lua --builddir=build-tsan --no-cuda --sanitize=thread >/dev/null &&
    ninja -C build-tsan minfer demo-q4_k_m.gguf >"$log/tsan.build" 2>&1; then
    for case in $(python3 tests/ref/server_check.py --cases); do
        if (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 SERVER_CHECK_SANITIZER=thread \
            python3 -u ../tests/ref/server_check.py "$case" ./minfer ./demo-q4_k_m.gguf) >"$log/tsan.$case" 2>&1; then
            passed=$((passed + 1)); echo "[PASS] $case"
        else
            failed=$((failed + 1)); cat "$log/tsan.$case"; echo "[FAIL] $case"
        fi
    done
else
    cat "$log/tsan.build"; echo "test.sh: the ThreadSanitizer build failed"; failed=$((failed + 1))
fi

fuzz() { # target, corpus folder, seconds
    echo "== fuzz $1 ($3 s)"
    if [ ! -x "build/$1" ]; then
        echo "test.sh: build/$1 missing (clang not installed)"; failed=$((failed + 1)); return
    fi
    local corpus
    corpus=$(mktemp -d)
    cp "$2"/* "$corpus/"
    if "build/$1" -max_total_time="$3" -print_final_stats=1 -artifact_prefix="$log/" "$corpus" \
        >"$log/$1.out" 2>&1; then
        passed=$((passed + 1)); tail -3 "$log/$1.out"
    else
        failed=$((failed + 1)); tail -40 "$log/$1.out"
        echo "test.sh: $1 found a crash; its input is in $log (add it as a regression test)"
    fi
    rm -rf "$corpus"
}
fuzz fuzz-gguf tests/fuzz/corpus 60
fuzz fuzz-api tests/fuzz/corpus_api 30

echo "summary: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
