/* engine.c: an inference session (see engine.h). */
#include "engine.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hparams.h"

/* The KV cache's geometry comes from the graph: the KV_STORE nodes' k, and
 * the query heads of the ATTENTION nodes reading them. */
static int kv_geometry(const struct graph *g, int64_t *n_head_kv, int64_t *head_dim, int64_t *n_head, int *n_layer)
{
    *n_layer = 0;
    *n_head = 0;
    for (int i = 0; i < g->n; i++) {
        const struct node *n = &g->node[i];
        if (n->op == OP_ATTENTION)
            *n_head = g->node[n->src[0]].ne[1];
        if (n->op != OP_KV_STORE)
            continue;
        const struct node *k = &g->node[n->src[0]];
        *head_dim = k->ne[0];
        *n_head_kv = k->ne[1];
        *n_layer = n->layer + 1 > *n_layer ? n->layer + 1 : *n_layer;
    }
    return *n_layer > 0 && *n_head > 0 ? 0 : -1;
}

static int64_t widest_row(const struct model *m)
{
    int64_t k = 0;
    for (int i = 0; i < m->n_w; i++)
        k = m->w[i].ne[0] > k ? m->w[i].ne[0] : k;
    return k;
}

static int build(struct engine *en, int64_t nt, int64_t n_out, struct error *e)
{
    if (en->graph_nt == nt && en->graph_n_out == n_out)
        return 0;
    const struct arch_def *a = en->m->arch;
    en->graph_nt = 0;
    if (a->build(&en->g, en->m->hp, en->m->weights, nt, n_out) < 0)
        return fail(e, "%s", en->g.err.msg);
    if (en->g.arena_bytes > en->arena_bytes)
        return fail(e, "graph for %lld tokens (%lld with logits) needs %zu arena bytes, %zu were planned", (long long)nt,
                    (long long)n_out, en->g.arena_bytes, en->arena_bytes);
    en->graph_nt = nt;
    en->graph_n_out = n_out;
    return 0;
}

static int64_t training_context(const struct model *m)
{
    for (int i = 0; i < m->arch->n_hparams; i++)
        if (strcmp(m->arch->hparams[i].name, "n_ctx") == 0 && !m->arch->hparams[i].is_float)
            return *(const int64_t *)((const char *)m->hp + m->arch->hparams[i].offset);
    return 4096;
}

/* The default context is the model's training context, halved while its KV
 * cache would take more than a quarter of the machine's memory (never below
 * 512); the engine records the cap so the caller can say so. */
static void cap_context(struct engine *en, int n_layer, int64_t n_head_kv, int64_t head_dim)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double budget = pages > 0 && page > 0 ? (double)pages * (double)page / 4 : 4e9;
    double per_position = 2.0 * n_layer * (double)n_head_kv * (double)head_dim *
                          (en->cfg.kv_type == KV_F32 ? 4 : en->cfg.kv_type == KV_F16 ? 2 : 34.0 / 32);
    en->n_ctx_train = en->cfg.n_ctx;
    while (en->cfg.n_ctx > 512 && per_position * (double)en->cfg.n_ctx > budget)
        en->cfg.n_ctx /= 2;
}

int engine_init(struct engine *en, const struct model *m, const struct engine_config *cfg, struct error *e)
{
    memset(en, 0, sizeof *en);
    en->m = m;
    en->cfg = *cfg;
    if (en->cfg.n_batch <= 0)
        en->cfg.n_batch = 512;
    bool default_ctx = en->cfg.n_ctx <= 0;
    if (default_ctx)
        en->cfg.n_ctx = training_context(m);
    if (en->cfg.n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        en->cfg.n_threads = n > 0 && n <= 64 ? (int)n : 1;
    }
    const struct arch_def *a = m->arch;
    if (graph_init(&en->g, a->max_nodes(m->hp), a->source, e))
        return -1;
    en->g.kernels = a->kernels;
    en->g.n_kernels = a->n_kernels;
    int64_t n_head_kv = 0, head_dim = 0, n_head = 0;
    int n_layer;
    if (a->build(&en->g, m->hp, m->weights, 1, 1) < 0 ||
        kv_geometry(&en->g, &n_head_kv, &head_dim, &n_head, &n_layer)) {
        fail(e, "%s", en->g.failed ? en->g.err.msg : "the graph stores no keys and values");
        engine_free(en);
        return -1;
    }
    for (int i = 0; i < en->g.n; i++) /* placement is decided here, once: no fallback mid-run */
        if (!cpu_supports(en->g.node[i].op)) {
            fail(e, "%s:%d: the CPU backend has no kernel for %s", a->source, en->g.node[i].line,
                 graph_op_name(en->g.node[i].op));
            engine_free(en);
            return -1;
        }
    if (default_ctx)
        cap_context(en, n_layer, n_head_kv, head_dim);
    if (en->cfg.n_batch > en->cfg.n_ctx)
        en->cfg.n_batch = en->cfg.n_ctx;
    int result = en->g.result;
    en->n_vocab = en->g.node[result].ne[0];
    en->arena_bytes = a->arena_bytes(m->hp, en->cfg.n_batch, en->cfg.logits_all ? en->cfg.n_batch : 1);
    en->arena = aligned_alloc(256, (en->arena_bytes + 255) & ~(size_t)255);
    en->pos = malloc((size_t)en->cfg.n_batch * sizeof *en->pos);
    en->logits = malloc((size_t)en->n_vocab * sizeof *en->logits);
    int rc = !en->arena || !en->pos || !en->logits
                 ? fail(e, "out of memory for activations (%.1f MiB for batches of %lld)",
                        (double)en->arena_bytes / 1048576.0, (long long)en->cfg.n_batch)
                 : 0;
    struct cpu_sizes sizes = { widest_row(m), en->cfg.n_ctx, n_head / n_head_kv, head_dim, en->cfg.n_threads };
    rc = rc || kv_init(&en->kv, en->cfg.kv_type, n_layer, en->cfg.n_ctx, n_head_kv, head_dim, e) ||
         cpu_scratch_init(&en->scratch, &sizes, e);
    if (rc) {
        engine_free(en);
        return -1;
    }
    return 0;
}

void engine_free(struct engine *en)
{
    graph_free(&en->g);
    kv_free(&en->kv);
    cpu_scratch_free(&en->scratch);
    free(en->arena);
    free(en->pos);
    free(en->logits);
    memset(en, 0, sizeof *en);
}

/* One graph over nt tokens; out, if given, receives every token's logits. */
static int eval_batch(struct engine *en, const int32_t *tokens, int64_t nt, float *out, struct error *e)
{
    if (build(en, nt, out ? nt : 1, e))
        return -1;
    const struct graph *g = &en->g;
    int32_t *ids = NULL;
    for (int i = 0; i < g->n && !ids; i++)
        if (g->node[i].op == OP_TOKENS)
            ids = (int32_t *)(en->arena + g->node[i].offset);
    memcpy(ids, tokens, (size_t)nt * sizeof *ids);
    for (int64_t t = 0; t < nt; t++)
        en->pos[t] = en->n_past + t;
    struct cpu_run run = { en->arena, en->pos, &en->kv, &en->scratch };
    if (cpu_execute(g, &run, e))
        return -1;
    const float *logits = (const float *)(en->arena + g->node[g->result].offset);
    size_t row = (size_t)en->n_vocab;
    if (out)
        memcpy(out, logits, (size_t)nt * row * sizeof *out);
    memcpy(en->logits, logits + (size_t)(g->n_out - 1) * row, row * sizeof *en->logits);
    en->n_past += nt;
    return 0;
}

static int eval(struct engine *en, const int32_t *tokens, int64_t n, float *out, struct error *e)
{
    if (n <= 0)
        return fail(e, "no tokens to evaluate");
    if (en->n_past + n > en->cfg.n_ctx)
        return fail(e, "context overflow: %lld tokens in the cache plus %lld new exceed the context of %lld",
                    (long long)en->n_past, (long long)n, (long long)en->cfg.n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= en->n_vocab)
            return fail(e, "token id %d at position %lld is outside the vocabulary of %lld", tokens[i],
                        (long long)(en->n_past + i), (long long)en->n_vocab);
    for (int64_t done = 0; done < n;) {
        int64_t nt = n - done < en->cfg.n_batch ? n - done : en->cfg.n_batch;
        if (eval_batch(en, tokens + done, nt, out ? out + done * en->n_vocab : NULL, e))
            return -1;
        done += nt;
    }
    return 0;
}

int engine_eval(struct engine *en, const int32_t *tokens, int64_t n, struct error *e)
{
    return eval(en, tokens, n, NULL, e);
}

int engine_eval_logits(struct engine *en, const int32_t *tokens, int64_t n, float *out, struct error *e)
{
    if (!en->cfg.logits_all)
        return fail(e, "engine_eval_logits: the engine was not made with logits_all");
    return eval(en, tokens, n, out, e);
}

void engine_truncate(struct engine *en, int64_t n_past)
{
    if (n_past >= 0 && n_past < en->n_past)
        en->n_past = n_past;
}
