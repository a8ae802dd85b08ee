/* test_graph_plan.c: every generated graph, built for real shapes from a
 * synthetic model of its architecture, checked by brute force: no two
 * buffers that are live at the same time share a byte of the arena, every
 * buffer lies inside it, and node counts match what the builder promises. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch_def.h"
#include "model.h"
#include "support.h"

struct tiny {
    char arch[16];
    char hparams[160];
};

static struct tiny tinies[] = {
    { "qwen3", "n_embd=64,n_layer=3,n_head=4,n_head_kv=2,head_dim=32,n_ff=96,n_vocab=300,n_ctx=256,eps=1e-6" },
    { "qwen2", "n_embd=64,n_layer=3,n_head=4,n_head_kv=2,n_ff=96,n_vocab=300,n_ctx=256,eps=1e-6" },
    { "llama", "n_embd=96,n_layer=2,n_head=3,n_head_kv=1,n_ff=64,n_vocab=300,n_ctx=256,eps=1e-5" },
    /* per-layer values: a window of 3 on two layers of three, the third global with its positions scaled by 4 */
    { "gemma3", "n_embd=64,n_layer=3,n_head=4,n_head_kv=2,head_dim=32,n_ff=96,n_vocab=300,n_ctx=256,eps=1e-6,"
                "sliding_window=3,swa_period=3,rope_factor=4" },
};

static const char *synth(const struct tiny *t, const char *type)
{
    const char *path = temp_path(".gguf");
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s synth --arch %s --hparams %s --type %s --threads 2 -o %s", minfer_bin(), t->arch,
             t->hparams, type, path);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s\n%s", cmd, out);
    free(out);
    return path;
}

/* Reads through views to the node that owns the bytes. */
static int owner(const struct graph *g, int i)
{
    while (g->node[i].view_of >= 0)
        i = g->node[i].view_of;
    return i;
}

static void check_plan(const struct graph *g)
{
    int n = g->n;
    int *first = malloc((size_t)n * sizeof *first), *last = malloc((size_t)n * sizeof *last);
    for (int i = 0; i < n; i++) {
        /* a PART is written when the MATMUL_QKV it belongs to runs; inputs before the graph runs */
        first[i] = g->node[i].op == OP_PART ? g->node[i].src[0] : op_kind(g->node[i].op) == OPK_INPUT ? -1 : i;
        last[i] = first[i];
    }
    for (int i = 0; i < n; i++) {
        const struct node *x = &g->node[i];
        for (int s = 0; s < op_n_src(x->op); s++) {
            int o = owner(g, x->src[s]);
            last[o] = i > last[o] ? i : last[o];
        }
    }
    last[owner(g, g->result)] = n; /* the logits are read after the graph ran */
    for (int i = 0; i < n; i++) { /* a node that may share a launch with the next keeps its sources through it */
        int k = i + 1;
        while (k < n && op_is_passive(g->node[k].op))
            k++;
        if (k < n && op_shares_launch(g->node[i].op) && g->node[k].op == g->node[i].op)
            for (int s = 0; s < op_n_src(g->node[i].op); s++) {
                int o = owner(g, g->node[i].src[s]);
                last[o] = k > last[o] ? k : last[o];
            }
    }
    for (int i = 0; i < n; i++) {
        const struct node *a = &g->node[i];
        if (!a->bytes)
            continue;
        cr_assert_leq(a->offset + a->bytes, g->arena_bytes, "node %d (%s, line %d) ends past the arena", i,
                      graph_op_name(a->op), a->line);
        for (int j = i + 1; j < n; j++) {
            const struct node *b = &g->node[j];
            if (!b->bytes)
                continue;
            bool live_together = first[i] <= last[j] && first[j] <= last[i];
            bool share = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            cr_assert(!(live_together && share),
                      "node %d (%s, line %d, layer %d, live %d..%d, bytes %zu+%zu) and node %d (%s, line %d, layer "
                      "%d, live %d..%d, bytes %zu+%zu) overlap",
                      i, graph_op_name(a->op), a->line, a->layer, first[i], last[i], a->offset, a->bytes, j,
                      graph_op_name(b->op), b->line, b->layer, first[j], last[j], b->offset, b->bytes);
        }
    }
    free(first);
    free(last);
}

ParameterizedTestParameters(graph_plan, no_live_buffers_overlap)
{
    return cr_make_param_array(struct tiny, tinies, sizeof tinies / sizeof tinies[0]);
}

ParameterizedTest(struct tiny *t, graph_plan, no_live_buffers_overlap, .timeout = 120)
{
    const char *path = synth(t, "q8_0");
    struct model m;
    struct error e;
    cr_assert_eq(model_open(&m, path, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.arch->name, t->arch);
    struct graph g;
    cr_assert_eq(graph_init(&g, m.arch->max_nodes(m.hp), m.arch->source, &e), 0);
    static const int64_t nts[] = { 1, 2, 7, 64 };
    for (int k = 0; k < 8; k++) { /* logits of the last token, then of every token */
        int64_t nt = nts[k % 4], n_out = k < 4 ? 1 : nt;
        int result = m.arch->build(&g, m.hp, m.weights, nt, n_out);
        cr_assert_geq(result, 0, "%s nt=%lld: %s", t->arch, (long long)nt, g.err.msg);
        cr_assert_eq(g.n, m.arch->max_nodes(m.hp), "%s: node count differs from max_nodes", t->arch);
        cr_assert_eq(g.arena_bytes, m.arch->arena_bytes(m.hp, nt, n_out));
        const struct node *logits = &g.node[result];
        cr_assert(logits->ne[1] == n_out && logits->dtype == ACT_F32, "logits of the last %lld tokens", (long long)n_out);
        check_plan(&g);
    }
    graph_free(&g);
    model_close(&m);
}

Test(graph_plan, a_tensor_of_the_wrong_shape_is_refused_by_name, .timeout = 60)
{
    /* qwen3 with n_ff=96 in the metadata but its tensors made for n_ff=128:
     * the loader must name the first tensor that does not fit. */
    struct tiny big = { "qwen3", "n_embd=64,n_layer=1,n_head=4,n_head_kv=2,head_dim=32,n_ff=128,n_vocab=300,n_ctx=64,eps=1e-6" };
    const char *path = synth(&big, "f32");
    /* rewrite the u32 feed_forward_length value in place: find "feed_forward_length" + type + value */
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    const char *key = "qwen3.feed_forward_length";
    size_t klen = strlen(key), at = 0;
    while (at + klen <= n && memcmp(buf + at, key, klen) != 0)
        at++;
    cr_assert_leq(at + klen, n, "key not found");
    long value_at = (long)(at + klen) + 4;
    fseek(f, value_at, SEEK_SET);
    uint32_t v = 96;
    fwrite(&v, 4, 1, f);
    fclose(f);
    struct model m;
    struct error e;
    cr_assert_eq(model_open(&m, path, &e), -1);
    cr_assert(strstr(e.msg, ": tensor 'blk.0.ffn_gate.weight' has shape [64, 128, 1, 1], the description expects [64, 96, 1, 1]"),
              "%s", e.msg);
}

Test(graph_plan, an_unknown_architecture_is_named)
{
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s info %s/tests/fuzz/corpus/small_model.gguf", minfer_bin(), src_dir());
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "model: architecture 'seedarch' is not compiled into this binary"), "%s", out);
    free(out);
    struct model m;
    struct error e;
    snprintf(cmd, sizeof cmd, "%s/tests/fuzz/corpus/small_model.gguf", src_dir());
    cr_assert_eq(model_open(&m, cmd, &e), -1);
    cr_assert(strstr(e.msg, "architecture 'seedarch' is not compiled into this binary (it has: gemma3, llama, qwen2, qwen3)"),
              "%s", e.msg);
}

/* The synth file, read by the Python gguf package: the tensors a Qwen2
 * model of these shapes has (biases included, output tied), in the types the
 * q4_k_m recipe gives, with the promised value scales. */
Test(synth, file_reads_back_in_the_gguf_package, .timeout = 120)
{
    struct tiny t = { "qwen2", "n_embd=256,n_layer=2,n_head=4,n_head_kv=2,n_ff=512,n_vocab=1000,n_ctx=256,eps=1e-6" };
    const char *cmdpath = temp_path(".gguf");
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen2 --hparams %s --type q4_k_m --tied --seed 5 -o %s", minfer_bin(),
             t.hparams, cmdpath);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    free(out);
    const char *expected = temp_path(".txt");
    FILE *f = fopen(expected, "w");
    /* tied: token_embd takes the output rule (Q6_K); 256-wide rows suit K-quants;
     * with two layers only layer 1 gets the _M mix's extra bits */
    fprintf(f, "token_embd.weight Q6_K 256 1000\noutput_norm.weight F32 256\n");
    for (int il = 0; il < 2; il++) {
        const char *more = il == 1 ? "Q6_K" : "Q4_K";
        fprintf(f, "blk.%d.attn_norm.weight F32 256\nblk.%d.attn_q.weight Q4_K 256 256\nblk.%d.attn_q.bias F32 256\n"
                   "blk.%d.attn_k.weight Q4_K 256 128\nblk.%d.attn_k.bias F32 128\nblk.%d.attn_v.weight %s 256 128\n"
                   "blk.%d.attn_v.bias F32 128\nblk.%d.attn_output.weight Q4_K 256 256\nblk.%d.ffn_norm.weight F32 256\n"
                   "blk.%d.ffn_gate.weight Q4_K 256 512\nblk.%d.ffn_up.weight Q4_K 256 512\nblk.%d.ffn_down.weight %s 512 256\n",
                il, il, il, il, il, il, more, il, il, il, il, il, il, more);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/ref/check_synth.py %s %s qwen2 1000", src_dir(), cmdpath, expected);
    int rc = run_cmd(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "checked 26 tensors: 0 differences"), "%s", out);
    free(out);
}

Test(synth, same_seed_same_bytes_any_thread_count, .timeout = 120)
{
    const char *a = temp_path(".gguf"), *b = temp_path(".gguf");
    char cmd[2048], *out;
    const char *hp = "n_embd=64,n_layer=1,n_head=4,n_head_kv=2,head_dim=16,n_ff=64,n_vocab=300,n_ctx=64,eps=1e-6";
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen3 --hparams %s --type q8_0 --threads 1 -o %s && "
             "%s synth --arch qwen3 --hparams %s --type q8_0 --threads 3 -o %s && cmp %s %s",
             minfer_bin(), hp, a, minfer_bin(), hp, b, a, b);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
    free(out);
}

Test(synth, bad_requests_are_one_line_errors)
{
    struct {
        const char *args, *expect;
    } cases[] = {
        { "synth -o x.gguf", "minfer: synth: give --preset (one of: qwen3-8b, qwen3-0.6b, qwen2.5-0.5b, qwen2.5-7b, "
                             "llama3-8b, smollm2-135m, gemma3-270m, gemma3-1b) or --arch with --hparams\n" },
        { "synth --preset qwen9 -o x.gguf", "minfer: synth: unknown preset 'qwen9' (known: qwen3-8b, qwen3-0.6b, "
                                            "qwen2.5-0.5b, qwen2.5-7b, llama3-8b, smollm2-135m, gemma3-270m, gemma3-1b)\n" },
        { "synth --arch qwen3 --hparams n_embd=64 -o /tmp/x.gguf",
          "minfer: synth: hyperparameter 'n_layer' (qwen3.block_count) is required: give it with --hparams\n" },
        { "synth --arch qwen2 --hparams head_dim=64 -o x.gguf",
          "minfer: synth: hyperparameter 'head_dim' is derived by archs/qwen2.lua; set what it derives from\n" },
        { "synth --arch qwen3 --hparams n_experts=8 -o x.gguf",
          "minfer: synth: qwen3 has no hyperparameter 'n_experts' (settable: n_embd, n_layer, n_head, n_head_kv, "
          "head_dim, n_ff, n_ctx, n_vocab, eps, rope_base)\n" },
        { "synth --arch mamba --hparams n_embd=8 -o x.gguf", "minfer: synth: architecture 'mamba' is not compiled into this binary\n" },
        { "synth --preset qwen3-8b --type q3_k_xl -o x.gguf", "minfer: synth: unknown type 'q3_k_xl' (one of: f32, f16, "
                                                              "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m)\n" },
        { "synth --preset qwen3-8b --threads 0 -o x.gguf", "minfer: synth: --threads wants 1..256, got '0'\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out;
        snprintf(cmd, sizeof cmd, "%s %s", minfer_bin(), cases[i].args);
        cr_assert_neq(run_cmd(cmd, &out), 0, "%s", cases[i].args);
        cr_assert_str_eq(out, cases[i].expect, "%s", cases[i].args);
        free(out);
    }
}

#include "engine.h"
#include "gguf/gguf_write.h"

/* A file without one of the tensors the description needs is refused,
 * naming it; an optional one (a Qwen2 bias) may be absent. */
Test(graph_plan, missing_tensors_are_named_and_optional_ones_may_be_absent, .timeout = 60)
{
    const char *path = synth(&tinies[1], "f32"); /* qwen2 */
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, path, &e), 0, "%s", e.msg);
    const char *drop[2] = { "blk.1.attn_k.bias", "blk.1.ffn_up.weight" };
    for (int k = 0; k < 2; k++) {
        struct gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < g.n_kv; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)g.kv[i].key.n, g.kv[i].key.p);
            gguf_set_value(w, key, &g.kv[i].value);
        }
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const struct gguf_tensor *t = &g.tensors[i];
            char name[80];
            snprintf(name, sizeof name, "%.*s", (int)t->name.n, t->name.p);
            if (strcmp(name, drop[k]) != 0)
                cr_assert_eq(gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, &e), 0, "%s", e.msg);
        }
        const char *out = temp_path(".gguf");
        cr_assert_eq(gguf_write_file(w, out, &e), 0, "%s", e.msg);
        gguf_writer_free(w);
        struct model m;
        int rc = model_open(&m, out, &e);
        if (k == 0) {
            cr_assert_eq(rc, 0, "an absent optional bias: %s", e.msg);
            struct engine en; /* and the model runs without it */
            struct engine_config cfg = { .n_ctx = 16, .n_batch = 4, .kv_type = KV_F32, .n_threads = 1 };
            cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
            int32_t ids[3] = { 1, 2, 3 };
            cr_assert_eq(engine_eval(&en, ids, 3, &e), 0, "%s", e.msg);
            engine_free(&en);
            model_close(&m);
        } else {
            cr_assert_eq(rc, -1);
            cr_assert(strstr(e.msg, ": tensor 'blk.1.ffn_up.weight' is missing (archs/qwen2.lua declares it as ffn_up)"),
                      "%s", e.msg);
        }
    }
    gguf_free(&g);
}

/* Each architecture compiled without fusion (--no-fuse): every plain op's
 * runtime shape rule agrees with the compiler's (graph_add checks each node
 * against the shape the generated code passes), and the fused graph gives
 * the unfused one's logits bit for bit, since every fused CPU kernel does
 * its parts' arithmetic in their order. */
extern const struct arch_def qwen3_unfused_arch, qwen2_unfused_arch, llama_unfused_arch, gemma3_unfused_arch;

ParameterizedTestParameters(graph_plan, fusion_keeps_the_bits)
{
    return cr_make_param_array(struct tiny, tinies, sizeof tinies / sizeof tinies[0]);
}

ParameterizedTest(struct tiny *t, graph_plan, fusion_keeps_the_bits, .timeout = 120)
{
    const char *path = synth(t, "q8_0");
    const struct arch_def *unfused = strcmp(t->arch, "qwen3") == 0   ? &qwen3_unfused_arch
                                     : strcmp(t->arch, "qwen2") == 0 ? &qwen2_unfused_arch
                                     : strcmp(t->arch, "gemma3") == 0 ? &gemma3_unfused_arch
                                                                      : &llama_unfused_arch;
    int32_t ids[7] = { 5, 17, 250, 3, 99, 120, 7 };
    static float logits[2][7 * 300];
    for (int k = 0; k < 2; k++) {
        struct model m;
        struct error e;
        cr_assert_eq(model_open(&m, path, &e), 0, "%s", e.msg);
        if (k == 1)
            m.arch = unfused; /* the same hyperparameters and weights, bound by the same description */
        struct engine en;
        struct engine_config cfg = { .n_ctx = 32, .n_batch = 4, .kv_type = KV_F32, .n_threads = 2, .logits_all = true };
        cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
        cr_assert_eq(engine_eval_logits(&en, ids, 7, logits[k], &e), 0, "%s", e.msg);
        if (k == 1) /* plain ops only */
            for (int i = 0; i < en.graphs[ENGINE_OTHER].g.n; i++)
                cr_assert_not(op_is_fused(en.graphs[ENGINE_OTHER].g.node[i].op), "%s has a fused op", unfused->name);
        engine_free(&en);
        model_close(&m);
    }
    cr_assert_eq(memcmp(logits[0], logits[1], sizeof logits[0]), 0, "%s: the fused graph's logits differ", t->arch);
}

/* Logits of 9 tokens: 6 as one batch, then 3 single steps (or all 9 one at
 * a time), on a CPU device with a thread count. */
static void cpu_logits(const char *path, const char *device, int threads, bool singles, float *out)
{
    int32_t ids[9] = { 5, 17, 250, 3, 99, 120, 7, 64, 31 };
    struct model m;
    struct error e;
    cr_assert_eq(model_open(&m, path, &e), 0, "%s", e.msg);
    struct engine en;
    struct engine_config cfg = { .n_ctx = 32, .n_batch = 8, .kv_type = KV_F16, .n_threads = threads, .logits_all = true,
                                 .device = device };
    cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
    cr_assert_eq(en.n_vocab, 300);
    int first = singles ? 0 : 6;
    if (!singles)
        cr_assert_eq(engine_eval_logits(&en, ids, 6, out, &e), 0, "%s", e.msg);
    for (int i = first; i < 9; i++)
        cr_assert_eq(engine_eval_logits(&en, &ids[i], 1, out + i * en.n_vocab, &e), 0, "%s", e.msg);
    engine_free(&en);
    model_close(&m);
}

/* The CPU's worker pool splits matmul rows and attention heads among the
 * threads; every output element is computed the same way by whichever
 * thread, so 1, 2 and 3 threads give the same logits, bit for bit, over a
 * batch and single steps after it, on the reference and the fast path; and
 * on both a batch gives the bits of single steps. */
Test(graph_plan, thread_count_keeps_the_bits, .timeout = 120)
{
    const char *path = synth(&tinies[0], "q4_k_m");
    static const char *const devices[2] = { "cpu", "cpu-fast" };
    static float logits[4][9 * 300];
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 3; k++)
            cpu_logits(path, devices[d], k + 1, false, logits[k]);
        cpu_logits(path, devices[d], 2, true, logits[3]);
        for (int k = 1; k < 4; k++)
            cr_assert_eq(memcmp(logits[0], logits[k], sizeof logits[0]), 0, "%s: %s give other logits", devices[d],
                         k < 3 ? (k == 1 ? "2 threads" : "3 threads") : "single steps");
    }
}

/* The fast path (Q8_1 activations, integer dots) against the f32 reference
 * on each architecture in the Q4_K_M mix and Q8_0: the logits within 5% of
 * the largest (the Q8_1 rounding of activations; the GPU, which does the
 * same, is held to the same bound), and the argmax equal at most positions. */
ParameterizedTestParameters(graph_plan, fast_cpu_path_agrees_with_the_reference)
{
    return cr_make_param_array(struct tiny, tinies, sizeof tinies / sizeof tinies[0]);
}

ParameterizedTest(struct tiny *t, graph_plan, fast_cpu_path_agrees_with_the_reference, .timeout = 120)
{
    static const char *const mixes[2] = { "q4_k_m", "q8_0" };
    for (int x = 0; x < 2; x++) {
        const char *path = synth(t, mixes[x]);
        static float ref[9 * 300], fast[9 * 300];
        cpu_logits(path, "cpu", 2, false, ref);
        cpu_logits(path, "cpu-fast", 2, false, fast);
        double worst = 0;
        int agree = 0;
        for (int p = 0; p < 9; p++) {
            double diff = 0, scale = 0;
            int br = 0, bf = 0;
            for (int j = 0; j < 300; j++) {
                diff = fmax(diff, fabs((double)ref[p * 300 + j] - fast[p * 300 + j]));
                scale = fmax(scale, fabs((double)ref[p * 300 + j]));
                br = ref[p * 300 + j] > ref[p * 300 + br] ? j : br;
                bf = fast[p * 300 + j] > fast[p * 300 + bf] ? j : bf;
            }
            worst = fmax(worst, diff / scale);
            agree += br == bf;
        }
        cr_log_info("%s %s: fast against reference, worst max|diff|/max|ref| %.3g, argmax equal at %d of 9", t->arch,
                    mixes[x], worst, agree);
        cr_assert_leq(worst, 0.05, "%s %s: the fast path's logits differ by %.3g", t->arch, mixes[x], worst);
        cr_assert_geq(agree, 7, "%s %s: argmax equal at only %d of 9 positions", t->arch, mixes[x], agree);
    }
}
