/* engine.c: an inference session (see engine.h). */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler.h"

/* The KV cache's geometry comes from the graph: the KV_STORE nodes' k, and
 * the query heads of the ATTENTION nodes reading them. */
static int kv_geometry(const struct graph *g, struct backend_sizes *z)
{
    z->n_layer = 0;
    z->n_head = 0;
    for (int i = 0; i < g->n; i++) {
        const struct node *n = &g->node[i];
        if (n->op == OP_ATTENTION)
            z->n_head = g->node[n->src[0]].ne[1];
        if (n->op != OP_KV_STORE)
            continue;
        const struct node *k = &g->node[n->src[0]];
        z->head_dim = k->ne[0];
        z->n_head_kv = k->ne[1];
        z->n_layer = n->layer + 1 > z->n_layer ? n->layer + 1 : z->n_layer;
    }
    return z->n_layer > 0 && z->n_head > 0 ? 0 : -1;
}

static int64_t widest_row(const struct model *m)
{
    int64_t k = 0;
    for (int i = 0; i < m->n_w; i++)
        k = m->w[i].ne[0] > k ? m->w[i].ne[0] : k;
    return k;
}

/* Builds the graph for (nt, n_out) into slot s, and has the backend judge
 * every node before it ever runs. */
static int build(struct engine *en, int s, int64_t nt, int64_t n_out, struct error *e)
{
    struct engine_graph *eg = &en->graphs[s];
    const struct arch_def *a = en->m->arch;
    eg->nt = 0;
    if (a->build(&eg->g, en->m->hp, en->m->weights, nt, n_out) < 0)
        return fail(e, "%s", eg->g.err.msg);
    if (eg->g.arena_bytes > (size_t)a->arena_bytes(en->m->hp, en->cfg.n_batch, en->cfg.logits_all ? en->cfg.n_batch : 1))
        return fail(e, "graph for %lld tokens (%lld with logits) outgrows the arena planned for batches of %lld",
                    (long long)nt, (long long)n_out, (long long)en->cfg.n_batch);
    for (int i = 0; i < eg->g.n; i++)
        if (!en->be->supports(&eg->g, i, e))
            return fail_prefix(e, "the %s backend cannot run this model", en->be->name);
    eg->nt = nt;
    eg->n_out = n_out;
    return 0;
}

/* The kept graph for (nt, n_out): one token and a full batch have their
 * own; any other shape takes the third slot, rebuilt when it changes. */
static int graph_for(struct engine *en, int64_t nt, int64_t n_out, int *slot, struct error *e)
{
    int s = nt == 1 && n_out == 1 ? ENGINE_DECODE : nt == en->cfg.n_batch && n_out == 1 ? ENGINE_BATCH : ENGINE_OTHER;
    *slot = s;
    if (en->graphs[s].nt == nt && en->graphs[s].n_out == n_out)
        return 0;
    return build(en, s, nt, n_out, e);
}

/* The default context is the model's training context, halved while its KV
 * cache would take more than a quarter of the machine's memory (never below
 * 512); the engine records the cap so the caller can say so. */
static void cap_context(struct engine *en, const struct backend_sizes *z)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double budget = pages > 0 && page > 0 ? (double)pages * (double)page / 4 : 4e9;
    double per_position = 2.0 * z->n_layer * (double)z->n_head_kv * (double)z->head_dim *
                          (en->cfg.kv_type == KV_F32 ? 4 : en->cfg.kv_type == KV_F16 ? 2 : 34.0 / 32);
    en->n_ctx_train = en->cfg.n_ctx;
    while (en->cfg.n_ctx > 512 && per_position * (double)en->cfg.n_ctx > budget)
        en->cfg.n_ctx /= 2;
}

/* Everything a backend needs, with it: the graphs recorded for it (Q8_1
 * activations or not), its state, and every node of the decode and
 * full-batch graphs judged by it. */
static int setup(struct engine *en, const struct model *m, struct error *e)
{
    const struct arch_def *a = m->arch;
    for (int s = 0; s < ENGINE_GRAPHS; s++) {
        en->graphs[s].nt = 0;
        en->graphs[s].g.q8_activations = en->be->q8_activations;
    }
    struct backend_sizes z = { .kv_type = en->cfg.kv_type, .n_threads = en->cfg.n_threads, .k_max = widest_row(m),
                               .graphs = !en->cfg.no_graphs };
    struct graph *g = &en->graphs[ENGINE_DECODE].g;
    if (a->build(g, m->hp, m->weights, 1, 1) < 0)
        return fail(e, "%s", g->err.msg);
    if (kv_geometry(g, &z))
        return fail(e, "%s: the graph stores no keys and values", a->source);
    if (en->cfg.n_ctx <= 0) {
        en->cfg.n_ctx = a->n_ctx(m->hp);
        cap_context(en, &z);
    }
    if (en->cfg.n_batch <= 0) /* the default: 512 tokens a graph, at most the context */
        en->cfg.n_batch = en->cfg.n_ctx < 512 ? en->cfg.n_ctx : 512;
    else if (en->cfg.n_batch > en->cfg.n_ctx)
        return fail(e, "a batch of %lld tokens does not fit the context of %lld positions (-b at most -c)",
                    (long long)en->cfg.n_batch, (long long)en->cfg.n_ctx);
    z.n_ctx = en->cfg.n_ctx;
    z.n_batch = en->cfg.n_batch;
    z.arena_bytes = a->arena_bytes(m->hp, en->cfg.n_batch, en->cfg.logits_all ? en->cfg.n_batch : 1);
    en->n_vocab = g->node[g->result].ne[0];
    if (en->be->init(&en->bs, m, &z, e))
        return -1;
    /* placement is decided here, once, for the graphs every run uses: no fallback mid-run */
    return build(en, ENGINE_DECODE, 1, 1, e) || build(en, ENGINE_BATCH, en->cfg.n_batch, 1, e) ? -1 : 0;
}

/* The first backend --device allows that can run the model; with auto, a
 * GPU that cannot is passed over for the CPU, and the note says why. */
static int choose(struct engine *en, const struct model *m, struct error *e)
{
    const struct backend *candidates[2];
    int n = backend_choose(en->cfg.device, candidates, e);
    const struct engine_config asked = en->cfg;
    for (int k = 0; k < n; k++) {
        en->be = candidates[k];
        if (setup(en, m, e) == 0)
            return 0;
        if (k + 1 < n) {
            snprintf(en->note, sizeof en->note, "%s cannot run this model (%s); %s runs it", candidates[k]->name, e->msg,
                     candidates[k + 1]->name);
            if (en->bs)
                en->be->free(en->bs);
            en->bs = NULL;
            en->cfg = asked;
        }
    }
    return -1;
}

int engine_init(struct engine *en, const struct model *m, const struct engine_config *cfg, struct error *e)
{
    memset(en, 0, sizeof *en);
    en->m = m;
    en->cfg = *cfg;
    en->last = -1;
    if (en->cfg.n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        en->cfg.n_threads = n > 0 && n <= 64 ? (int)n : 1;
    }
    for (int s = 0; s < ENGINE_GRAPHS; s++)
        if (graph_init(&en->graphs[s].g, m->arch->max_nodes(m->hp), m->arch->source, e)) {
            engine_free(en);
            return -1;
        }
    if (choose(en, m, e)) {
        engine_free(en);
        return -1;
    }
    en->pos = malloc((size_t)en->cfg.n_batch * sizeof *en->pos);
    en->logits = malloc((size_t)en->n_vocab * sizeof *en->logits);
    if (!en->pos || !en->logits) {
        engine_free(en);
        return fail(e, "out of memory for %lld logits", (long long)en->n_vocab);
    }
    return 0;
}

void engine_free(struct engine *en)
{
    for (int s = 0; s < ENGINE_GRAPHS; s++)
        graph_free(&en->graphs[s].g);
    if (en->be && en->bs)
        en->be->free(en->bs);
    free(en->pos);
    free(en->logits);
    memset(en, 0, sizeof *en);
}

/* The graph's inputs: the tokens, their positions and the KV length after them. */
static int write_inputs(struct engine *en, const struct graph *g, const int32_t *tokens, int64_t nt, struct error *e)
{
    for (int64_t t = 0; t < nt; t++)
        en->pos[t] = (int32_t)(en->n_past + t);
    int32_t kv_len = (int32_t)(en->n_past + nt);
    const void *data[3] = { tokens, en->pos, &kv_len };
    size_t bytes[3] = { (size_t)nt * sizeof *tokens, (size_t)nt * sizeof *en->pos, sizeof kv_len };
    for (int k = 0; k < 3; k++)
        if (g->input[k] >= 0 && en->be->write_input(en->bs, g, g->input[k], data[k], bytes[k], e))
            return -1;
    return 0;
}

/* One graph over nt tokens; out, if given, receives every token's logits. */
static int eval_batch(struct engine *en, const int32_t *tokens, int64_t nt, float *out, struct error *e)
{
    int s;
    if (graph_for(en, nt, out ? nt : 1, &s, e))
        return -1;
    const struct graph *g = &en->graphs[s].g;
    size_t row = (size_t)en->n_vocab;
    en->logits_read = false;
    if (write_inputs(en, g, tokens, nt, e) || en->be->execute(en->bs, g, e) ||
        (out && en->be->read_output(en->bs, g, g->result, 0, (size_t)nt * row, out, e)))
        return -1;
    en->n_past += nt;
    en->last = s;
    return 0;
}

/* Whether n more tokens fit the context; if not, e names both. */
static int room_for(const struct engine *en, int64_t n, struct error *e)
{
    if (en->n_past + n > en->cfg.n_ctx)
        return fail(e, "context overflow: %lld tokens in the cache plus %lld new exceed the context of %lld",
                    (long long)en->n_past, (long long)n, (long long)en->cfg.n_ctx);
    return 0;
}

static int eval(struct engine *en, const int32_t *tokens, int64_t n, float *out, struct error *e)
{
    if (n <= 0)
        return fail(e, "no tokens to evaluate");
    if (room_for(en, n, e))
        return -1;
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

const float *engine_logits(struct engine *en, struct error *e)
{
    if (en->last < 0) {
        fail(e, "logits before any token was evaluated");
        return NULL;
    }
    const struct graph *g = &en->graphs[en->last].g;
    if (!en->logits_read &&
        en->be->read_output(en->bs, g, g->result, g->n_out - 1, (size_t)en->n_vocab, en->logits, e))
        return NULL;
    en->logits_read = true;
    return en->logits;
}

int engine_argmax(struct engine *en, int32_t *out, struct error *e)
{
    if (en->last < 0)
        return fail(e, "argmax before any token was evaluated");
    const struct graph *g = &en->graphs[en->last].g;
    return en->be->read_argmax(en->bs, g, g->result, out, e);
}

int engine_eval_next(struct engine *en, int32_t *out, struct error *e)
{
    if (!en->be->execute_argmax)
        return engine_argmax(en, out, e) || eval(en, out, 1, NULL, e);
    if (en->last < 0)
        return fail(e, "argmax before any token was evaluated");
    if (room_for(en, 1, e))
        return -1;
    int s;
    const struct graph *from = &en->graphs[en->last].g;
    if (graph_for(en, 1, 1, &s, e))
        return -1;
    const struct graph *g = &en->graphs[s].g;
    en->logits_read = false;
    if (en->be->execute_argmax(en->bs, from, from->result, g, (int32_t)en->n_past, (int32_t)(en->n_past + 1), out, e))
        return -1;
    en->n_past += 1;
    en->last = s;
    return 0;
}

int engine_sample(struct engine *en, struct sampler *smp, int32_t *out, struct error *e)
{
    if (sampler_is_greedy(smp)) /* the backend finds it where the logits are */
        return engine_argmax(en, out, e);
    const float *logits = engine_logits(en, e);
    if (!logits)
        return -1;
    *out = sampler_sample(smp, logits);
    return 0;
}

void engine_truncate(struct engine *en, int64_t n_past)
{
    if (n_past >= 0 && n_past < en->n_past)
        en->n_past = n_past;
}

void engine_describe(const struct engine *en, char *buf, size_t n)
{
    char what[128];
    en->be->describe(en->bs, what, sizeof what);
    snprintf(buf, n, "%s (%s)", en->be->name, what);
}
