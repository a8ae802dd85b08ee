/* test_cli.c: the minfer binary: info (text and JSON), quantize, run, chat,
 * bench, tokenize, perplexity, and the one-line errors for bad input. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "model.h"
#include "tokenizer/tokenizer.h"
#include "quant/half.h"
#include "support.h"
#include "quant/tensor_type.h"

static const char *demo_model(void)
{
    const char *path = temp_path(".gguf");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen2 --hparams n_embd=384,n_layer=2,n_head=6,n_head_kv=2,n_ff=1024,"
             "n_vocab=2048,n_ctx=4096,eps=1e-6 --type f32 --tied --seed 7 --threads 2 -o %s", minfer_bin(), path);
    cr_assert_eq(run_cmd(cmd, NULL), 0, "%s", cmd);
    return path;
}

static int minfer(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int minfer(char **out, const char *fmt, ...)
{
    char args[2048], cmd[2400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s", minfer_bin(), args);
    return run_cmd(cmd, out);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(cli, info_prints_architecture_hparams_tensors_totals)
{
    const char *model = demo_model();
    char *out;
    cr_assert_eq(minfer(&out, "info %s", model), 0, "%s", out);
    cr_assert(strstr(out, "architecture:  qwen2\n"), "%s", out);
    cr_assert(strstr(out, "hyperparameters:\n  qwen2.embedding_length"), "%s", out);
    cr_assert(strstr(out, "qwen2.rope.freq_base                         1000000"), "%s", out);
    cr_assert(strstr(out, "tokenizer.ggml.tokens                        string[2048] [\"Ā\", \"ā\""), "%s", out);
    cr_assert(strstr(out, "tensors: 26\n"), "%s", out);
    cr_assert(strstr(out, "token_embd.weight                        F32      384 x 2048"), "%s", out);
    /* 2048*384 + 2*(3*384 + 2*384*384 + 2*384*128 + 2*128 + 3*384*1024) + 384 */
    cr_assert(strstr(out, "totals: 3935360 parameters"), "%s", out);
    cr_assert(strstr(out, "32.0000 bits per weight"), "%s", out);
    free(out);
}

Test(cli, info_json_is_valid_json_with_the_same_facts)
{
    const char *model = demo_model(), *json = temp_path(".json");
    char *out, cmd[2048];
    snprintf(cmd, sizeof cmd, "%s info --json %s > %s && python3 -c \"import json,sys; d=json.load(open('%s')); "
             "print(d['architecture'], d['totals']['parameters'], len(d['tensors']), "
             "d['hyperparameters']['qwen2.block_count']['value'], "
             "len(d['metadata']['tokenizer.ggml.tokens']['value']))\"",
             minfer_bin(), model, json, json);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "qwen2 3935360 26 2 2048\n");
    free(out);
}

Test(cli, bad_files_and_flags_give_one_line_and_nonzero_exit)
{
    struct {
        const char *args, *expect;
    } cases[] = {
        { "info /nonexistent.gguf", "minfer: /nonexistent.gguf: cannot open: No such file or directory\n" },
        { "info", "minfer: info: no file given (usage: minfer info FILE [--json])\n" },
        { "info --frobnicate x.gguf", "minfer: info: unknown option '--frobnicate'\n" },
        { "info a.gguf b.gguf", "minfer: info: more than one file given ('a.gguf' and 'b.gguf')\n" },
        { "bogus", "minfer: unknown command 'bogus' (try minfer --help)\n" },
        { "quantize a.gguf", "minfer: quantize: need an input and an output file (usage: minfer quantize IN OUT "
                             "--type T)\n" },
        { "quantize a.gguf b.gguf", "minfer: quantize: --type is required (one of: f32, f16, bf16, q8_0, q4_0, "
                                    "q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m)\n" },
        { "quantize a.gguf b.gguf --type q3_k_xl", "minfer: quantize: unknown type 'q3_k_xl' (one of: f32, f16, "
                                                   "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, "
                                                   "q5_k_m)\n" },
        { "quantize /nonexistent.gguf b.gguf --type q8_0", "minfer: quantize: /nonexistent.gguf: cannot open: No "
                                                           "such file or directory\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        int rc = minfer(&out, "%s", cases[i].args);
        cr_assert_neq(rc, 0, "'%s' exited 0", cases[i].args);
        cr_assert_str_eq(out, cases[i].expect, "'%s'", cases[i].args);
        free(out);
    }
}

/* serve's bad flags and addresses: one line naming the flag or value, a
 * non-zero exit, no server left listening. */
Test(cli, serve_refuses_bad_flags)
{
    const char *m = demo_model();
    struct {
        const char *args, *expect;
    } cases[] = {
        { "--port 70000", "minfer: serve: --port wants a whole number in [0, 65535], got '70000'\n" },
        { "--parallel 0", "minfer: serve: --parallel wants a whole number in [1, 64], got '0'\n" },
        { "--queue -1", "minfer: serve: --queue wants a whole number in [0, 4096], got '-1'\n" },
        { "--api-key", "minfer: serve: --api-key needs a key\n" },
        { "--context-shift", "minfer: serve: unknown option '--context-shift' (try minfer serve --help)\n" },
        { "--host example.org --port 0", "minfer: serve: --host example.org is not an IPv4 address\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        int rc = minfer(&out, "serve -m %s %s 2>&1 >/dev/null | grep -v '^serve: '", m, cases[i].args);
        (void)rc; /* the pipe's status is grep's: the exit is checked below */
        cr_assert_str_eq(out, cases[i].expect, "'%s'", cases[i].args);
        free(out);
        cr_assert_neq(minfer(NULL, "serve -m %s %s >/dev/null 2>&1", m, cases[i].args), 0, "'%s' exited 0", cases[i].args);
    }
}

/* MINFER_CPU_UNIT picks the fast path's vector unit for measurements; a
 * unit the processor lacks, or no unit at all, is an error, not a guess. */
Test(cli, an_unknown_cpu_unit_is_an_error)
{
    char *out;
    setenv("MINFER_CPU_UNIT", "avx1024", 1);
    int rc = minfer(&out, "run -m %s -p hi -n 1 --device cpu-fast", demo_model());
    unsetenv("MINFER_CPU_UNIT");
    cr_assert_neq(rc, 0, "%s", out);
    cr_assert(strstr(out, "MINFER_CPU_UNIT=avx1024: not a vector unit this processor has") != NULL, "%s", out);
    cr_assert_eq(count_lines(out), 1, "%s", out);
    free(out);
    setenv("MINFER_CPU_UNIT", "scalar", 1); /* every processor has it */
    rc = minfer(&out, "run -m %s -p hi -n 1 --device cpu-fast", demo_model());
    unsetenv("MINFER_CPU_UNIT");
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
}

/* A well-formed file that is no model (a vocabulary alone) is described and
 * says so; run refuses it, naming what is missing. */
Test(cli, info_describes_a_file_that_is_not_a_model)
{
    struct gguf_writer *w = gguf_writer_new();
    const char *tokens[2] = { "a", "b" }, *path = temp_path(".gguf");
    struct error e;
    cr_assert(w && !gguf_set_str(w, "general.architecture", "qwen2") && !gguf_set_str_arr(w, "tokenizer.ggml.tokens", 2, tokens));
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    char *out;
    cr_assert_eq(minfer(&out, "info %s", path), 0, "%s", out);
    cr_assert(strstr(out, "tokenizer.ggml.tokens") &&
              strstr(out, "model: none: the file has no tensors (a vocabulary or metadata only), so run cannot load it\n"),
              "%s", out);
    free(out);
    cr_assert_eq(minfer(&out, "run -m %s -p hi", path), 1);
    char want[1200];
    snprintf(want, sizeof want, "minfer: %s: metadata 'qwen2.embedding_length' is missing\n", path);
    cr_assert_str_eq(out, want);
    free(out);
}

Test(cli, info_on_a_corrupt_file_prints_the_readers_error)
{
    const char *model = demo_model();
    char *out;
    FILE *f = fopen(model, "r+b");
    cr_assert_not_null(f);
    fseek(f, 4, SEEK_SET);
    fputc(9, f); /* version 9 */
    fclose(f);
    cr_assert_eq(minfer(&out, "info %s", model), 1);
    cr_assert(strstr(out, "unsupported GGUF version 9 (supported: 2, 3)\n"), "%s", out);
    cr_assert_eq(count_lines(out), 1, "%s", out);
    free(out);
}

static void expect_type(const struct gguf *g, const char *name, const char *type)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    cr_assert_not_null(t, "%s missing", name);
    cr_assert_str_eq(type_name(t->type), type, "%s", name);
}

Test(cli, quantize_q4_k_m_applies_the_recipe, .timeout = 120)
{
    const char *model = demo_model(), *q = temp_path(".gguf");
    char *out;
    cr_assert_eq(minfer(&out, "quantize %s %s --type q4_k_m", model, q), 0, "%s", out);
    cr_assert(strstr(out, "quantize: q4_k_m: 26 tensors"), "%s", out);
    free(out);
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, q, &e), 0, "%s", e.msg);
    expect_type(&g, "token_embd.weight", "Q8_0");      /* tied output: Q6_K, 384 rows fall back */
    expect_type(&g, "blk.0.attn_q.weight", "Q5_0");    /* Q4_K falls back for 384 */
    /* Two layers: only layer 1 (the last eighth) gets the _M mix's extra bits. */
    expect_type(&g, "blk.0.attn_v.weight", "Q5_0");
    expect_type(&g, "blk.1.attn_v.weight", "Q8_0");   /* Q6_K, falls back for 384 */
    expect_type(&g, "blk.0.ffn_down.weight", "Q4_K"); /* 1024 rows: a K-quant fits */
    expect_type(&g, "blk.1.ffn_down.weight", "Q6_K");
    expect_type(&g, "blk.0.attn_norm.weight", "F32");
    expect_type(&g, "blk.0.attn_q.bias", "F32");
    uint32_t ft;
    cr_assert_eq(gguf_get_u32(&g, "general.file_type", &ft, &e), 0);
    cr_assert_eq(ft, 15);
    cr_assert_not_null(gguf_find(&g, "tokenizer.ggml.tokens"));
    gguf_free(&g);

    cr_assert_eq(minfer(&out, "quantize %s %s.again --type q4_0", q, q), 1);
    cr_assert(strstr(out, "tensor 'blk.0.attn_q.weight' is already Q5_0; requantizing loses quality (pass --allow-requantize)\n"), "%s", out);
    free(out);
    cr_assert_eq(minfer(&out, "quantize %s %s.pure --type q8_0 --pure", model, q), 0, "%s", out);
    free(out);
}

/* F32 -> F16 -> F32 through the command must give exactly the f16-rounded
 * weights (and untouched F32 norms), tensor by tensor. */
Test(cli, quantize_f16_round_trip_is_exact, .timeout = 120)
{
    const char *model = demo_model(), *f16 = temp_path(".gguf"), *back = temp_path(".gguf");
    char *out;
    cr_assert_eq(minfer(&out, "quantize %s %s --type f16", model, f16), 0, "%s", out);
    free(out);
    cr_assert_eq(minfer(&out, "quantize %s %s --type f32", f16, back), 0, "%s", out);
    free(out);
    struct gguf a, b;
    struct error e;
    cr_assert_eq(gguf_open(&a, model, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_open(&b, back, &e), 0, "%s", e.msg);
    cr_assert_eq(a.n_tensors, b.n_tensors);
    for (uint64_t i = 0; i < a.n_tensors; i++) {
        const struct gguf_tensor *ta = &a.tensors[i], *tb = &b.tensors[i];
        cr_assert_eq(tb->type, TYPE_F32);
        for (uint64_t k = 0; k < ta->n_elems; k++) {
            float x, y;
            memcpy(&x, ta->data + 4 * k, 4);
            memcpy(&y, tb->data + 4 * k, 4);
            float want = ta->n_dims > 1 ? f16_to_f32(f32_to_f16(x)) : x;
            cr_assert_eq(y, want, "tensor %llu element %llu", (unsigned long long)i, (unsigned long long)k);
        }
    }
    gguf_free(&a);
    gguf_free(&b);
}

Test(cli, quantize_to_an_unwritable_place_names_it)
{
    const char *model = demo_model();
    char *out;
    cr_assert_eq(minfer(&out, "quantize %s /nonexistent/dir/out.gguf --type q8_0", model), 1);
    cr_assert_str_eq(out, "minfer: quantize: /nonexistent/dir/out.gguf: cannot create: No such file or directory\n");
    free(out);
}

Test(cli, help_and_version_exit_zero)
{
    char *out;
    cr_assert_eq(minfer(&out, "--help"), 0);
    cr_assert(strstr(out, "minfer info FILE"), "%s", out);
    free(out);
    cr_assert_eq(minfer(&out, "quantize --help"), 0);
    cr_assert(strstr(out, "q4_k_m"), "%s", out);
    free(out);
}

/* The specialized binary the build always makes (configure.lua) refuses a
 * Qwen2 file of other shapes, naming the hyperparameter and both values. */
Test(cli, a_specialized_binary_refuses_other_shapes)
{
    const char *model = demo_model();
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "./minfer-qwen2.5-0.5b info %s", model);
    cr_assert_eq(run_cmd(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "minfer: ") && strstr(out, ": this binary is built for qwen2.5-0.5b: n_embd "
                                                   "(qwen2.embedding_length) must be 896, the file has 384\n"),
              "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./minfer-qwen2.5-0.5b info %s/tests/fuzz/corpus/small_model.gguf", src_dir());
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "model: architecture 'seedarch' is not compiled into this binary"), "%s", out);
    free(out);
}

/* ... and accepts a file of its own shapes, building its graph; its
 * kernels instantiated for its row lengths give the generic build's bits.
 * The build always makes two: a Qwen2 and a Gemma 3 (per-layer values). */
struct specialized {
    char preset[16], arch[16], prefix[16];
    int tensors, nodes, launches; /* launches: matmuls a token */
};
static struct specialized specialized[] = { { "qwen2.5-0.5b", "qwen2", "qwen2_5_0_5b", 290, 367, 97 },
                                            { "gemma3-270m", "gemma3", "gemma3_270m", 236, 314, 73 } };

ParameterizedTestParameters(cli, a_specialized_binary_runs_its_own_shapes)
{
    return cr_make_param_array(struct specialized, specialized, sizeof specialized / sizeof specialized[0]);
}

ParameterizedTest(struct specialized *sp, cli, a_specialized_binary_runs_its_own_shapes, .timeout = 240)
{
    const char *model = temp_path(".gguf");
    char cmd[1024], *out, want[256];
    snprintf(cmd, sizeof cmd, "%s synth --preset %s --type q4_0 -o %s && ./minfer-%s info %s", minfer_bin(), sp->preset,
             model, sp->preset, model);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    snprintf(want, sizeof want, "model: %s (specialized for %s, archs/%s.lua): hyperparameters and %d tensors check out; "
             "graph of %d nodes", sp->prefix, sp->preset, sp->arch, sp->tensors, sp->nodes);
    cr_assert(strstr(out, want), "want '%s' in\n%s", want, out);
#ifdef MINFER_CUDA
    /* Q4_0 is not the Q4_K_M mix the build's typed kernels were made for:
     * most launches take the generic ones (the build compiles none for the
     * row length alone: it knows its types) */
    snprintf(want, sizeof want, " of a token's %d matmul launches on the GPU take this build's typed kernels (its rows "
             "and types); 0 its kernels for their row length, ", sp->launches);
    cr_assert(strstr(out, want), "want '%s' in\n%s", want, out);
    free(out);
    snprintf(cmd, sizeof cmd, "./minfer-%s info --json %s | python3 -c \"import json,sys; m=json.load(sys.stdin)['model']; "
             "print(m['launches'], m['typed_launches'] < m['launches'])\"", sp->preset, model);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    snprintf(want, sizeof want, "%d True\n", sp->launches);
    cr_assert_str_eq(out, want);
#endif
    free(out);
    const char *a = temp_path(".f32"), *b = temp_path(".f32");
    snprintf(cmd, sizeof cmd, "./minfer-%s run -m %s -p 'Hello there' -n 2 --temp 0 --logits-out %s && "
             "%s run -m %s -p 'Hello there' -n 2 --temp 0 --logits-out %s && cmp %s %s",
             sp->preset, model, a, minfer_bin(), model, b, a, b);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    free(out);
}

/* ---- run, chat, bench ---- */

static const char *tiny_chat_model(void)
{
    static const char *path;
    if (!path) {
        path = temp_path(".gguf");
        char cmd[1024], *out;
        snprintf(cmd, sizeof cmd, "%s synth --arch qwen2 --hparams n_embd=64,n_layer=2,n_head=4,n_head_kv=2,n_ff=128,"
                 "n_vocab=400,n_ctx=256,eps=1e-6 --type q8_0 --tied --seed 3 --threads 2 -o %s", minfer_bin(), path);
        cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
        free(out);
    }
    return path;
}

static char *stdout_of(const char *cmd_fmt, ...) __attribute__((format(printf, 1, 2)));
static char *stdout_of(const char *cmd_fmt, ...)
{
    char args[4096], cmd[4200], *out;
    va_list ap;
    va_start(ap, cmd_fmt);
    vsnprintf(args, sizeof args, cmd_fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s 2>/dev/null", args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = 0, cap = 1 << 16;
    out = malloc(cap);
    n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s failed:\n%s", args, out);
    return out;
}

Test(run, greedy_and_seeded_sampling_repeat_exactly, .timeout = 120)
{
    const char *m = tiny_chat_model();
    char *a = stdout_of("%s run -m %s -p 'Once upon a time' -n 24 --temp 0", minfer_bin(), m);
    char *b = stdout_of("%s run -m %s -p 'Once upon a time' -n 24 --temp 0 -t 1 -b 3", minfer_bin(), m);
    cr_assert_str_eq(a, b, "greedy output depends on threads or batch size");
    char *c = stdout_of("%s run -m %s -p 'Once upon a time' -n 24 --temp 1.2 --top-k 50 --seed 42", minfer_bin(), m);
    char *d = stdout_of("%s run -m %s -p 'Once upon a time' -n 24 --temp 1.2 --top-k 50 --seed 42", minfer_bin(), m);
    char *f = stdout_of("%s run -m %s -p 'Once upon a time' -n 24 --temp 1.2 --top-k 50 --seed 43", minfer_bin(), m);
    cr_assert_str_eq(c, d, "the same seed gave different text");
    cr_assert_str_neq(c, f, "different seeds gave the same 24 sampled tokens");
    cr_assert_str_neq(a, c, "sampling at temperature 1.2 matched greedy");
    free(a), free(b), free(c), free(d), free(f);
}

/* Turn 2 of a chat (appended to the KV cache) says what a fresh run of the
 * whole conversation says. The model's vocabulary is bytes only (and three
 * specials), so the printed reply re-tokenizes to the very tokens generated
 * and the fresh run sees the same context. */
Test(chat, second_turn_matches_a_fresh_run_of_the_conversation, .timeout = 120)
{
    const char *m = temp_path(".gguf");
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen2 --hparams n_embd=64,n_layer=2,n_head=4,n_head_kv=2,n_ff=128,"
             "n_vocab=259,n_ctx=512,eps=1e-6 --type q8_0 --tied --seed 9 --threads 2 -o %s", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    free(out);
    char *one = stdout_of("printf 'hello there\n' | %s chat -m %s --system 'Be brief.' -n 12 --temp 0", minfer_bin(), m);
    char *two = stdout_of("printf 'hello there\nand again\n' | %s chat -m %s --system 'Be brief.' -n 12 --temp 0",
                          minfer_bin(), m);
    size_t n1 = strlen(one);
    cr_assert(strncmp(two, one, n1) == 0, "turn 1 differs between the two chats");
    const char *turn2 = two + n1;
    const char *prompt = temp_path(".txt");
    FILE *f = fopen(prompt, "wb");
    fprintf(f, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n");
    fwrite(one, 1, n1 - 1, f); /* the reply without the newline chat prints after it */
    fprintf(f, "<|im_end|>\n<|im_start|>user\nand again<|im_end|>\n<|im_start|>assistant\n");
    fclose(f);
    char *fresh = stdout_of("%s run -m %s -f %s -n 12 --temp 0", minfer_bin(), m, prompt);
    cr_assert_str_eq(fresh, turn2, "fresh run \"%s\" vs chat turn 2 \"%s\"", fresh, turn2);
    free(one), free(two), free(fresh);
}

Test(run, context_overflow_is_an_error_or_a_shift, .timeout = 120)
{
    const char *m = tiny_chat_model();
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a long enough prompt' -c 24 -n 40 --temp 0", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out); /* -n beyond the context: stops at the full context */
    cr_assert(strstr(out, "run: stopped at the context size (-c 24); --context-shift goes on\n"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p '%s' -c 8 -n 4 --temp 0", minfer_bin(), m, "this prompt is much longer");
    cr_assert_eq(run_cmd(cmd, &out), 1);
    cr_assert(strstr(out, "run: context overflow: 0 tokens in context plus 26 new exceed -c 8 (use a larger -c, or "
                          "--context-shift)\n"), "%s", out);
    free(out);
    /* 3 + 40 tokens through a context of 16: shifted, never stopped */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'abc' -c 16 -n 40 --temp 0 --context-shift --keep 2", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "prompt: 3 tokens in ") && strstr(out, "generation: 40 tokens in "), "%s", out);
    cr_assert(!strstr(out, "stopped at the context size"), "%s", out);
    free(out);
}

Test(bench, prints_a_table_and_json, .timeout = 120)
{
    const char *m = tiny_chat_model();
    char *t = stdout_of("%s bench -m %s -p 16 -n 8 -r 2", minfer_bin(), m);
    cr_assert(strstr(t, "| model | size | params | backend | threads | test | t/s |") && strstr(t, "| pp16 |") &&
              strstr(t, "| tg8 |") && strstr(t, "| CPU-FAST |"), "%s", t); /* auto without a GPU: the fast path */
    char *j = stdout_of("%s bench -m %s -p 16 -n 8 -r 2 --json | python3 -c \"import json,sys; d=json.load(sys.stdin); "
                        "print([r['test'] for r in d], all(r['tokens_per_second'] > 0 for r in d))\"", minfer_bin(), m);
    cr_assert_str_eq(j, "['pp16', 'tg8'] True\n");
    /* after a context of -d tokens, named as llama-bench names it; a -c too short for it is an error */
    char *d = stdout_of("%s bench -m %s -p 4 -n 4 -d 24 -r 1 2>&1", minfer_bin(), m);
    cr_assert(strstr(d, "| pp4 @ d24 |") && strstr(d, "| tg4 @ d24 |"), "%s", d);
    char *over = stdout_of("%s bench -m %s -p 0 -n 4 -d 24 -r 1 -c 16 2>&1; echo rc=$?", minfer_bin(), m);
    cr_assert(strstr(over, "rc=1") && strstr(over, "minfer: bench:"), "%s", over);
    /* without -p the context goes in as one batch (up to 2048), not a step a token; -b still says */
    char *b = stdout_of("%s bench -m %s -p 0 -n 2 -d 24 -r 1 --json | python3 -c \"import json,sys; print([r['n_batch'] for r in json.load(sys.stdin)])\"; "
                        "%s bench -m %s -p 0 -n 2 -d 24 -r 1 -b 8 --json | python3 -c \"import json,sys; print([r['n_batch'] for r in json.load(sys.stdin)])\"",
                        minfer_bin(), m, minfer_bin(), m);
    cr_assert_str_eq(b, "[24]\n[8]\n");
    free(t), free(j), free(d), free(over), free(b);
}

Test(tokenize, ids_and_pieces_as_llama_tokenize_prints_them)
{
    const char *m = tiny_chat_model();
    /* the tiny vocabulary is bytes (ids 0..255 in byte order's byte-level alphabet) and three specials */
    char *ids = stdout_of("%s tokenize -m %s -p 'ab<|im_end|>' --ids", minfer_bin(), m);
    cr_assert_str_eq(ids, "[97, 98, 399]\n");
    char *pieces = stdout_of("%s tokenize -m %s -p 'a\n<|im_end|>'", minfer_bin(), m);
    cr_assert_str_eq(pieces, "    97 -> 'a'\n    10 -> '\\n'\n   399 -> '<|im_end|>'\n");
    const char *text = write_temp("xyz", 3, ".txt");
    char *from_file = stdout_of("%s tokenize -m %s -f %s --ids", minfer_bin(), m, text);
    cr_assert_str_eq(from_file, "[120, 121, 122]\n");
    free(ids), free(pieces), free(from_file);
}

/* llama.cpp's perplexity, computed here the plain way from the engine's
 * logits: each window of c tokens evaluated whole from an empty cache, the
 * tokens of its second half (but its first) scored by the logits before them. */
static double perplexity_by_hand(const char *model, const char *text, int64_t c)
{
    struct model m;
    struct tokenizer t;
    struct engine en;
    struct error e;
    cr_assert_eq(model_open(&m, model, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&t, &m.gguf, &e), 0, "%s", e.msg);
    struct engine_config cfg = { .n_ctx = c, .n_batch = c, .kv_type = KV_F16, .logits_all = true };
    cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    cr_assert_eq(tokenizer_encode(&t, text, strlen(text), true, &ids, &n, &cap, &e), 0, "%s", e.msg);
    float *logits = malloc((size_t)(c * en.n_vocab) * sizeof *logits);
    double nll = 0;
    int64_t count = 0;
    for (int64_t w = 0; (w + 1) * c <= (int64_t)n; w++) {
        engine_truncate(&en, 0);
        cr_assert_eq(engine_eval_logits(&en, ids + w * c, c, logits, &e), 0, "%s", e.msg);
        for (int64_t i = c / 2; i < c - 1; i++) {
            const float *row = logits + i * en.n_vocab;
            double sum = 0;
            for (int64_t v = 0; v < en.n_vocab; v++)
                sum += exp((double)row[v]);
            nll -= row[ids[w * c + i + 1]] - log(sum);
            count++;
        }
    }
    free(logits), free(ids);
    engine_free(&en);
    tokenizer_free(&t);
    model_close(&m);
    return exp(nll / (double)count);
}

/* The command scores the second half of each window of -c tokens, whatever
 * the batch size and threads. */
Test(perplexity, scores_the_second_half_of_each_window, .timeout = 120)
{
    const char *m = tiny_chat_model();
    char text[600];
    for (int i = 0; i < 599; i++)
        text[i] = (char)('a' + (i * 7 + i / 13) % 26);
    text[599] = 0;
    const char *file = write_temp(text, strlen(text), ".txt");
    char *out = stdout_of("%s perplexity -m %s -f %s -c 64 -b 16", minfer_bin(), m, file);
    /* 599 byte tokens: 9 windows of 64; each scores 31 tokens */
    cr_assert(strncmp(out, "[1]", 3) == 0 && strstr(out, ",[9]") && !strstr(out, "[10]"), "%s", out);
    const char *at = strstr(out, "Final estimate: PPL = ");
    cr_assert_not_null(at, "%s", out);
    double ppl = atof(at + strlen("Final estimate: PPL = "));
    double want = perplexity_by_hand(m, text, 64);
    cr_assert_lt(fabs(ppl / want - 1), 1e-4, "perplexity %.4f, by hand %.4f", ppl, want);
    char *again = stdout_of("%s perplexity -m %s -f %s -c 64 -b 64 -t 1", minfer_bin(), m, file);
    cr_assert_str_eq(out, again, "perplexity depends on the batch size or threads");
    char *two = stdout_of("%s perplexity -m %s -f %s -c 64 --chunks 2", minfer_bin(), m, file);
    cr_assert(strstr(two, "[2]") && !strstr(two, "[3]"), "%s", two);
    char cmd[1024], *ten;
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s -c 64 --chunks 10", minfer_bin(), m, file);
    cr_assert_eq(run_cmd(cmd, &ten), 1, "%s", ten);
    cr_assert(strstr(ten, "perplexity: --chunks 10: ") && strstr(ten, " holds 9 windows of 64 tokens\n"), "%s", ten);
    free(out), free(again), free(two), free(ten);
}

/* The backend is chosen at load and said; one that cannot run here is an
 * error saying why, never a quiet fallback. */
Test(run, the_device_is_chosen_at_load_and_said, .timeout = 60)
{
    const char *m = tiny_chat_model();
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 --temp 0 --device cpu", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "run: backend cpu ("), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 --temp 0", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "run: backend cpu-fast (") && strstr(out, "chosen by --device auto"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 --device cuda", minfer_bin(), m);
    cr_assert_eq(run_cmd(cmd, &out), 1, "%s", out);
    cr_assert(strncmp(out, "minfer: --device cuda: ", 23) == 0 && strchr(out, '\n')[1] == 0, "%s", out);
    free(out);
}

Test(run, bad_flags_and_files_give_one_line)
{
    const char *m = tiny_chat_model(), *hello = write_temp("hello", 5, ".txt");
    struct {
        const char *args, *expect; /* %s: the model; expect's second %s: the text file */
    } cases[] = {
        { "run -p hi", "minfer: run: -m FILE is required\n" },
        { "run -m /nonexistent.gguf -p hi", "minfer: /nonexistent.gguf: cannot open: No such file or directory\n" },
        { "run -m %s", "minfer: run: -p TEXT (or -f FILE) is required\n" },
        { "run -m %s -p hi --temp hot", "minfer: run: --temp wants a number in [0, 100], got 'hot'\n" },
        { "run -m %s -p hi --cache-type q4", "minfer: run: --cache-type wants f32, f16 or q8_0, got 'q4'\n" },
        { "run -m %s -p hi --frobnicate", "minfer: run: unknown option '--frobnicate' (try minfer run --help)\n" },
        { "run -m %s -p hi --chat-template chatml", "minfer: run: unknown option '--chat-template' (try minfer run --help)\n" },
        { "bench -m %s -r 0", "minfer: bench: -r wants a whole number in [1, 1000], got '0'\n" },
        { "bench -m %s -d -1", "minfer: bench: -d wants a whole number in [0, 4194304], got '-1'\n" },
        { "bench -m %s -d 2.5", "minfer: bench: -d wants a whole number in [0, 4194304], got '2.5'\n" },
        { "run -m %s -p hi -n 1.5", "minfer: run: -n wants a whole number in [-1, 16777216], got '1.5'\n" },
        { "run -m %s -p hi -c 16 -b 32", "minfer: a batch of 32 tokens does not fit the context of 16 positions (-b at "
                                        "most -c)\n" },
        { "chat -m %s --chat-template vicuna", "minfer: chat: %s: unknown chat format 'vicuna' (minfer has chatml, llama3 and gemma)\n" },
        { "tokenize -m %s", "minfer: tokenize: give the text with -p TEXT or -f FILE (one of them)\n" },
        { "perplexity -m %s -p hi", "minfer: perplexity: the text comes from -f FILE\n" },
        { "run -m %s -p hi --device tpu", "minfer: unknown device 'tpu' (cpu, cpu-fast, cuda or auto)\n" },
        { "bench -m %s --device", "minfer: bench: --device needs cpu, cpu-fast, cuda or auto\n" },
        { "perplexity -m %s -c 512 -f", "minfer: perplexity: -f needs a file\n" },
        { "perplexity -m %s -c 512 -f %s", "minfer: perplexity: %2$s has 5 tokens; a window of 512 needs at least 1024\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], expect[2048], *out;
        snprintf(args, sizeof args, cases[i].args, m, hello);
        snprintf(expect, sizeof expect, cases[i].expect, m, hello);
        cr_assert_neq(minfer(&out, "%s", args), 0, "'%s' exited 0", args);
        cr_assert_str_eq(out, expect, "'%s'", args);
        free(out);
    }
    char *out;
    cr_assert_neq(minfer(&out, "run -m %s/tests/fuzz/corpus/small_model.gguf -p hi", src_dir()), 0);
    cr_assert(strstr(out, "architecture 'seedarch' is not compiled into this binary") && !strchr(out, '\n')[1], "%s", out);
    free(out);
}
