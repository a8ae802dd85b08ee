/* cuda_backend.c: the GPU as a backend (see backend.h). Per engine: its own
 * non-blocking stream, the activation arena, the KV cache and its graphs
 * (the decode step's, a prompt chunk's) captured as CUDA graphs after two
 * warm-up runs and replayed. Per model: its weights in device memory
 * (device_weights.h), shared by its engines; the first checks they fit
 * with its own buffers before it uploads them. Only the device layer (device.cu) calls the
 * CUDA runtime; this file walks graphs and calls kernel launchers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/device_weights.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"

#define WARMUP_RUNS 2   /* direct runs of a graph before it is captured */
#define CAPTURES 16     /* graphs kept captured at once (a graph's, one a span) */

struct capture {
    const struct graph *g;
    unsigned generation;  /* of g when captured: a rebuilt graph is captured again */
    int64_t span;         /* the attention span it was captured for (set_span) */
    unsigned long used;   /* when it was last asked for (capture_of) */
    int runs;             /* direct runs so far */
    void *exec;           /* the instantiated CUDA graph, once captured */
};

#define ROT_SLOTS 4 /* RoPEs a step (Gemma 3: its local and global ones) */

struct cuda_state {
    const struct model *m;
    struct cuda_device_info info;
    void *stream;
    uint8_t *arena;
    size_t arena_bytes;
    enum kv_type kv_type;
    uint8_t *kv_k, *kv_v;
    size_t kv_layer_bytes;
    int64_t n_ctx, n_head_kv, head_dim, chunk;
    /* The positions this step's attention launches cover (set_span), and
     * MINFER_NO_SPANS=1: always the whole cache's (for measurements) */
    int64_t span;
    bool spans_off;
    struct device_weights *weights; /* the model's, shared with the other engines over it */
    void **dev;           /* weights->dev: the device copy of each model weight (m->w order); 1-D ones as f32 */
    const struct cuda_kernel *special; /* a per-model build's decode matmuls, or NULL */
    /* Q8_1 activations outside the arena: [0] a matmul's input quantized when
     * its producer gave f32; [1] written by a producer (attention, the
     * SwiGLU pair) for the matmul right after it, whose node q8_of is */
    void *q8[2];
    size_t q8_bytes;
    int q8_of;
    int skip[2];          /* nodes an earlier launch computed (K's RoPE with Q's, the KV store with K's) */
    float *att;           /* attention partials */
    float *pair_y;        /* a decode pair's rows on their way to Q8_1 (cuda_matmul_multi), every bit set between launches */
    /* A decode step's rotations (struct cuda_rotation: head_dim floats
     * each), one for each RoPE of the step (its base, factor, head size and
     * positions), formed by the first head launch of it recorded in the
     * step (n_rot of them so far); off with MINFER_NO_ROTATION=1 (for
     * measurements: every launch forms its own) */
    float *rot[ROT_SLOTS];
    struct { float base, factor; int64_t d; const void *pos; } rot_key[ROT_SLOTS];
    int n_rot;
    bool rot_off;
    long rot_reads;       /* head launches recorded reading one (cuda_backend.h) */
    void *argmax;         /* the argmax's scratch (cuda_argmax_scratch_bytes) */
    /* The argmax's token id, page-locked and written by the kernel itself
     * (token_dev its device address), ready once token_ready has passed */
    volatile int32_t *token;
    int32_t *token_dev;
    void *token_ready;
    /* Page-locked staging for the graph inputs (token ids, positions, KV
     * length: one region each), so their copies are truly asynchronous; a
     * region is reused only after the stream has passed its last copy */
    uint8_t *staging;
    size_t staging_region;
    bool staged[3];
    int bound_skip;       /* a measuring build's MINFER_SKIP (cuda_bound_skip_mask): the launch classes left out */
    bool graphs;          /* capture decode graphs; off with --no-graphs or after a failed capture */
    long replays;         /* captured graphs launched (cuda_backend.h) */
    long captures;        /* graphs captured (cuda_backend.h) */
    struct capture cap[CAPTURES];
    unsigned long capture_asks;
};

static bool cuda_available(struct error *e)
{
    int n = 0;
    if (cuda_device_count(&n, e))
        return false;
    if (n == 0)
        return fail(e, "this machine has no CUDA device") == 0;
    return true;
}

static int weight_index(const struct cuda_state *s, const struct weight *w)
{
    return (int)(w - s->m->w);
}

static void *dev_of(const struct cuda_state *s, const struct weight *w) { return w ? s->dev[weight_index(s, w)] : NULL; }

static uint8_t *data(const struct cuda_state *s, const struct graph *g, int i) { return s->arena + g->node[i].offset; }

/* ---- placement: the whole node ---- */

static bool refuse(const struct graph *g, int i, struct error *e, const char *why)
{
    fail(e, "%s:%d: %s: %s", g->source, g->node[i].line, graph_op_name(g->node[i].op), why);
    return false;
}

static bool cuda_supports(const struct graph *g, int i, struct error *e)
{
    const struct node *n = &g->node[i];
    const struct op_info *info = op_info(n->op);
    for (int k = 0; k < info->n_w; k++) {
        const struct weight *w = n->p.w[k];
        char why[160];
        if (w && w->n_dims == 2 && !cuda_weight_type_ok(w->type)) {
            snprintf(why, sizeof why, "weight '%.*s' is %s, which the GPU kernels do not read", (int)w->name_len,
                     w->name, type_name(w->type));
            return refuse(g, i, e, why);
        }
    }
    if (info->matmul && cuda_matmul_takes_q8(n->p.w[0]->type) && g->node[n->src[0]].ne[0] % 32)
        return refuse(g, i, e, "a quantized matmul needs rows that are a multiple of 32");
    if (n->op == OP_RMS_NORM_Q8 && n->dtype == ACT_Q8_1 && n->ne[0] % 32)
        return refuse(g, i, e, "Q8_1 output needs a row length that is a multiple of 32");
    if ((n->op == OP_RMS_NORM || n->op == OP_RMS_NORM_Q8 || n->op == OP_RMS_NORM_ADD) && n->ne[0] > 8192)
        return refuse(g, i, e, "the norm kernel takes rows of at most 8192");
    if ((n->op == OP_ROPE || n->op == OP_HEAD_NORM || n->op == OP_HEAD_NORM_ROPE) && (n->ne[0] % 2 || n->ne[0] > 2048))
        return refuse(g, i, e, "head size must be even and at most 2048");
    if (n->op == OP_ATTENTION) {
        const struct node *q = &g->node[n->src[0]], *k = &g->node[g->node[n->src[1]].src[0]];
        if (q->ne[1] % k->ne[1])
            return refuse(g, i, e, "query heads must be a multiple of the KV heads");
        if (q->ne[0] % 8 || q->ne[0] > 256)
            return refuse(g, i, e, "the attention kernel takes head sizes that are a multiple of 8, up to 256");
    }
    return true;
}

/* ---- init: memory check, uploads ---- */

static void cuda_free_state(void *state)
{
    struct cuda_state *s = state;
    if (!s)
        return;
    if (s->stream) {
        struct error e;
        cuda_stream_sync(s->stream, "free", &e); /* nothing may still use what is freed */
    }
    for (int c = 0; c < CAPTURES; c++)
        cuda_graph_destroy(s->cap[c].exec);
    device_weights_release(s->weights);
    cuda_free(s->arena);
    cuda_free(s->kv_k);
    cuda_free(s->kv_v);
    cuda_free(s->q8[0]);
    cuda_free(s->q8[1]);
    cuda_free(s->att);
    cuda_free(s->pair_y);
    cuda_free(s->rot[0]);
    cuda_free(s->argmax);
    cuda_host_free((void *)s->token);
    cuda_event_destroy(s->token_ready);
    cuda_host_free(s->staging);
    cuda_stream_destroy(s->stream);
    free(s);
}

/* A per-model build's decode matmuls for m's architecture, or NULL (the
 * generic build's kernels throughout). */
static const struct cuda_kernel *special_table(const struct model *m)
{
    for (int t = 0; t < cuda_kernel_table_count; t++)
        if (strcmp(cuda_kernel_tables[t].arch, m->arch->name) == 0 && cuda_kernel_tables[t].kernels[0].matmul)
            return cuda_kernel_tables[t].kernels;
    return NULL;
}

int cuda_backend_weight_engines(const void *state)
{
    const struct cuda_state *s = state;
    return s->weights ? device_weights_engines(s->weights) : 0;
}

struct cuda_launches cuda_backend_fixed_launches(const struct model *m, const struct graph *g)
{
    const struct cuda_kernel *special = special_table(m);
    struct cuda_launches c = { 0, 0, 0 };
    for (int i = 0; i < g->n; i++) {
        const struct node *n = &g->node[i];
        if (!op_is_matmul(n->op))
            continue;
        struct cuda_matrix mats[3];
        const int n_w = op_info(n->op)->n_w;
        for (int j = 0; j < n_w && j < 3; j++)
            mats[j] = (struct cuda_matrix){ n->p.w[j]->type, NULL, n->p.w[j]->ne[1], NULL, NULL };
        switch (cuda_matmul_fixed(special, mats, n_w, g->node[n->src[0]].ne[0], n->op == OP_FFN_GLU)) {
        case CUDA_FIXED_TYPED: c.typed++; break;
        case CUDA_FIXED_LENGTH: c.by_length++; break;
        case CUDA_FIXED_NONE: c.generic++; break;
        }
    }
    return c;
}

static int cuda_init(void **state, const struct model *m, const struct backend_sizes *z, struct error *e)
{
    const int bound_skip = cuda_bound_skip_mask(e);
    if (bound_skip < 0)
        return -1;
    struct cuda_state *s = calloc(1, sizeof *s);
    if (!s)
        return fail(e, "out of memory");
    *state = s;
    s->bound_skip = bound_skip;
    s->m = m;
    s->special = special_table(m);
    s->graphs = z->graphs;
    s->kv_type = z->kv_type;
    s->n_ctx = z->n_ctx;
    s->n_head_kv = z->n_head_kv;
    s->head_dim = z->head_dim;
    s->chunk = cuda_attention_chunk(z->n_ctx);
    s->spans_off = getenv("MINFER_NO_SPANS") && strcmp(getenv("MINFER_NO_SPANS"), "1") == 0;
    s->span = z->n_ctx; /* until the first positions come */
    s->kv_layer_bytes = (size_t)z->n_head_kv * (size_t)z->n_ctx * kv_row_bytes(z->kv_type, z->head_dim);
    s->q8_bytes = (size_t)(z->k_max / 32 + 1) * 36 * (size_t)z->n_batch;
    s->staging_region = ((size_t)z->n_batch * sizeof(int32_t) + 255) & ~(size_t)255;
    size_t att = cuda_attention_scratch_floats(z->head_dim, z->n_head, z->n_ctx, s->chunk) * sizeof(float);
    /* the rows of a SwiGLU pair whose Q8_1 product a matmul of row length <= k_max reads */
    size_t pair_y = (size_t)z->k_max * sizeof(float);
    /* the prompt matmuls' stream scratch, sized here: it cannot grow inside a captured prompt */
    const size_t prompt_scratch = cuda_prompt_scratch_bytes(z->n_batch, z->k_max);
    /* the weights: another engine's over this model, or a new copy (under
     * the lock, so two engines starting at once upload once) */
    device_weights_lock();
    s->weights = device_weights_find(m);
    const size_t weights = s->weights ? 0 : device_weights_bytes(m);
    size_t kv = 2 * (size_t)z->n_layer * s->kv_layer_bytes, need = weights + kv + z->arena_bytes + 2 * s->q8_bytes + att + pair_y + prompt_scratch;
    size_t free_b = 0, total_b = 0;
    int rc = cuda_device_query(0, &s->info, e) || cuda_mem_info(&free_b, &total_b, e);
    if (!rc && need > free_b)
        rc = fail(e, "cuda: the model needs %.1f MiB of device memory (weights %.1f%s, KV cache %.1f, activations %.1f, "
                     "scratch %.1f) and %.1f MiB are free", (double)need / 1048576, (double)weights / 1048576,
                  s->weights ? ": shared with another engine" : "", (double)kv / 1048576,
                  (double)z->arena_bytes / 1048576, (double)(2 * s->q8_bytes + att + pair_y + prompt_scratch) / 1048576,
                  (double)free_b / 1048576);
    if (!rc && !s->weights)
        rc = (s->weights = device_weights_upload(m, e)) ? 0 : -1;
    device_weights_unlock();
    if (!rc)
        s->dev = device_weights_dev(s->weights);
    void *scratch;
    if (!rc)
        rc = cuda_stream_create(&s->stream, e) || cuda_alloc((void **)&s->arena, z->arena_bytes, "the activation arena", e) ||
             cuda_alloc((void **)&s->kv_k, kv / 2, "the K cache", e) || cuda_alloc((void **)&s->kv_v, kv / 2, "the V cache", e) ||
             cuda_alloc(&s->q8[0], s->q8_bytes, "Q8_1 scratch", e) || cuda_alloc(&s->q8[1], s->q8_bytes, "Q8_1 scratch", e) ||
             cuda_alloc((void **)&s->att, att, "attention scratch", e) ||
             cuda_alloc((void **)&s->pair_y, pair_y, "the pair's rows", e) ||
             cuda_alloc((void **)&s->rot[0], ROT_SLOTS * (size_t)z->head_dim * sizeof(float), "the step's rotations", e) ||
             cuda_alloc(&s->argmax, cuda_argmax_scratch_bytes(), "argmax scratch", e) ||
             cuda_memset_async(s->argmax, 0, cuda_argmax_scratch_bytes(), s->stream, e) ||
             cuda_host_alloc((void **)&s->token, sizeof(int32_t), "the argmax's token", e) ||
             cuda_host_device_pointer((void *)s->token, (void **)&s->token_dev, e) ||
             cuda_event_create(&s->token_ready, e) ||
             (prompt_scratch && cuda_stream_scratch(s->stream, prompt_scratch, &scratch, e)) ||
             cuda_host_alloc((void **)&s->staging, 3 * s->staging_region, "input staging", e) ||
             cuda_memset_async(s->kv_k, 0, kv / 2, s->stream, e) || cuda_memset_async(s->kv_v, 0, kv / 2, s->stream, e) ||
             cuda_memset_async(s->att, 0, att, s->stream, e) || cuda_memset_async(s->pair_y, 0xff, pair_y, s->stream, e);
    if (rc) {
        cuda_free_state(s);
        *state = NULL;
        return -1;
    }
    for (int r = 1; r < ROT_SLOTS; r++)
        s->rot[r] = s->rot[0] + (size_t)r * (size_t)z->head_dim;
    s->rot_off = getenv("MINFER_NO_ROTATION") && strcmp(getenv("MINFER_NO_ROTATION"), "1") == 0;
    s->arena_bytes = z->arena_bytes;
    return 0;
}

/* ---- execution ---- */

/* Whether every matrix of matmul node n reads Q8_1 (quantized weights). */
static bool all_q8(const struct node *n)
{
    for (int k = 0; k < op_info(n->op)->n_w; k++)
        if (!cuda_matmul_takes_q8(n->p.w[k]->type))
            return false;
    return true;
}

/* Whether node i should also write its output as Q8_1 (into q8[1]): the
 * next node is a matmul of quantized weights reading it. */
static bool feeds_q8(const struct graph *g, int i)
{
    const struct node *next = i + 1 < g->n ? &g->node[i + 1] : NULL;
    return next && op_is_matmul(next->op) && next->src[0] == i && all_q8(next);
}

/* Whether node i's launch also writes its output as Q8_1 (into q8[1]) for
 * the matmul after it: attention, or a decode pair whose own input is not
 * in q8[1] (reads_q8) and whose type can. */
static bool writes_q8(const struct graph *g, int i, bool reads_q8)
{
    const struct node *n = &g->node[i], *x = &g->node[n->src[0]];
    if (!feeds_q8(g, i))
        return false;
    if (n->op == OP_ATTENTION)
        return x->ne[0] % 32 == 0;
    return n->op == OP_FFN_GLU && n->ne[0] % 32 == 0 && !reads_q8 && cuda_pair_writes_q8(n->p.w[0]->type, x->ne[1]);
}

static int run_matmul(struct cuda_state *s, const struct graph *g, int i, struct error *e)
{
    const struct node *n = &g->node[i], *x = &g->node[n->src[0]];
    int64_t k = x->ne[0], nt = x->ne[1];
    const struct weight *const *w = n->p.w;
    bool need_q8 = false, need_f32 = false;
    for (int j = 0; j < op_info(n->op)->n_w; j++)
        *(cuda_matmul_takes_q8(w[j]->type) ? &need_q8 : &need_f32) = true;
    const void *xq = NULL;
    const float *xf = need_f32 ? (const float *)(s->arena + x->offset) : NULL;
    if (need_q8 && x->dtype == ACT_Q8_1)
        xq = s->arena + x->offset; /* the norm wrote Q8_1 */
    else if (need_q8 && s->q8_of == n->src[0])
        xq = s->q8[1]; /* the producer wrote it for us */
    else if (need_q8) {
        if (cuda_quantize_q8_1((const float *)(s->arena + x->offset), s->q8[0], k * nt, s->stream, e))
            return -1;
        xq = s->q8[0];
    }
    s->q8_of = -1;
    float *y = (float *)data(s, g, i);
#define MAT(W, BIAS, Y) { (W)->type, dev_of(s, W), (W)->ne[1], (const float *)dev_of(s, BIAS), Y }
    switch (n->op) {
    case OP_MATMUL: case OP_MATMUL_ADD: {
        const struct cuda_matrix m[1] = { MAT(w[0], n->p.bias[0], y) };
        return cuda_matmul_multi(m, 1, k, xq, xf, nt, n->op == OP_MATMUL_ADD ? (const float *)data(s, g, n->src[1]) : NULL,
                                 n->op == OP_MATMUL_ADD ? CUDA_EPI_ADD : CUDA_EPI_NONE, NULL, NULL, s->special, s->stream, e);
    }
    case OP_MATMUL_QKV: {
        const struct cuda_matrix m[3] = { MAT(w[0], n->p.bias[0], y), MAT(w[1], n->p.bias[1], (float *)data(s, g, n->part[0])),
                                          MAT(w[2], n->p.bias[2], (float *)data(s, g, n->part[1])) };
        return cuda_matmul_multi(m, 3, k, xq, xf, nt, NULL, CUDA_EPI_NONE, NULL, NULL, s->special, s->stream, e);
    }
    case OP_FFN_GLU: {
        const struct cuda_matrix m[2] = { MAT(w[0], NULL, y), MAT(w[1], NULL, NULL) };
        bool q8 = writes_q8(g, i, xq == s->q8[1]);
        if (cuda_matmul_multi(m, 2, k, xq, xf, nt, NULL, n->p.glu == GLU_GELU ? CUDA_EPI_PAIR_GELU : CUDA_EPI_PAIR,
                              q8 ? s->q8[1] : NULL, s->pair_y, s->special, s->stream, e))
            return -1;
        s->q8_of = q8 ? i : -1;
        return 0;
    }
    default: return fail(e, "not a matmul: %s", graph_op_name(n->op));
    }
#undef MAT
}

/* The node after i that computes something, or -1. */
static int next_active(const struct graph *g, int i)
{
    for (int j = i + 1; j < g->n; j++)
        if (!op_is_passive(g->node[j].op))
            return j;
    return -1;
}

/* The step's rotation for a head launch's RoPE (base, factor, heads of d,
 * nt columns at pos), into *rot: formed by an earlier head launch of the
 * step, or to be formed by this one; false where there is none (more than
 * one column, heads past head_dim, every slot taken, MINFER_NO_ROTATION). */
static bool rotation_of(struct cuda_state *s, float base, float factor, int64_t d, int64_t nt, const int32_t *pos,
                        struct cuda_rotation *rot)
{
    if (s->rot_off || nt != 1 || base <= 0 || d > s->head_dim)
        return false;
    int r = 0;
    while (r < s->n_rot && !(s->rot_key[r].base == base && s->rot_key[r].factor == factor && s->rot_key[r].d == d &&
                             s->rot_key[r].pos == pos))
        r++;
    if (r == ROT_SLOTS)
        return false;
    *rot = (struct cuda_rotation){ s->rot[r], r < s->n_rot };
    s->rot_reads += rot->formed;
    if (r == s->n_rot) {
        s->rot_key[r].base = base, s->rot_key[r].factor = factor, s->rot_key[r].d = d, s->rot_key[r].pos = pos;
        s->n_rot++;
    }
    return true;
}

/* Head norm / RoPE of node i, and of the next active node in the same
 * launch when it is the same op with the same parameters (Q's then K's:
 * the memory plan keeps Q's input alive through K's node, op_shares_launch),
 * and the KV store when it comes next and stores the last of them. */
static int run_heads(struct cuda_state *s, const struct graph *g, int i, struct error *e)
{
    const struct node *n = &g->node[i];
    bool norm = n->op != OP_ROPE, rope = n->op != OP_HEAD_NORM;
    struct cuda_heads parts[2];
    int count = 0, j = next_active(g, i);
    for (int k = i; count < 2 && k >= 0; k = count == 1 ? j : -1) {
        const struct node *x = &g->node[k];
        if (k != i && (x->op != n->op || x->ne[0] != n->ne[0] || x->ne[2] != n->ne[2] || x->p.eps != n->p.eps ||
                       x->p.rope_base != n->p.rope_base || x->p.rope_factor != n->p.rope_factor ||
                       x->p.rope_style != n->p.rope_style ||
                       (rope && x->src[1] != n->src[1])))
            break;
        parts[count++] = (struct cuda_heads){ (const float *)data(s, g, x->src[0]), norm ? dev_of(s, x->p.w[0]) : NULL,
                                              (float *)data(s, g, k), x->ne[1] };
    }
    if (count == 2)
        s->skip[0] = j;
    const int last = count == 2 ? j : i, st = next_active(g, last);
    struct cuda_kv_dest store;
    const struct node *kv = st >= 0 ? &g->node[st] : NULL;
    bool fold = kv && kv->op == OP_KV_STORE && kv->src[0] == last && (!rope || kv->src[2] == n->src[1]);
    if (fold) {
        size_t at = (size_t)kv->layer * s->kv_layer_bytes;
        store = (struct cuda_kv_dest){ s->kv_type, s->kv_k + at, s->kv_v + at, (const float *)data(s, g, kv->src[1]), s->n_ctx };
        s->skip[1] = st;
    }
    const int32_t *pos = fold ? (const int32_t *)data(s, g, kv->src[2]) : rope ? (const int32_t *)data(s, g, n->src[1]) : NULL;
    struct cuda_rotation rot;
    const bool rotated = rope && rotation_of(s, n->p.rope_base, n->p.rope_factor, n->ne[0], n->ne[2], pos, &rot);
    return cuda_head_norm_rope_parts(parts, count, n->p.eps, rope ? n->p.rope_base : 0.0f, n->p.rope_factor, n->p.rope_style, pos,
                                     n->ne[0], n->ne[2], fold ? &store : NULL, rotated ? &rot : NULL, s->stream, e);
}

/* Whether a bound's mask leaves node i out (cuda_bound_skip_mask). Bits:
 * 1 the RMS norms, 2 the head norms, RoPE and KV stores, 4 attention, 8
 * QKV, 16 attn_output, 32 the FFN's gate/up pair, 64 its down, 128 the
 * output matrix. A producer left out sets q8_of as its launch would have,
 * so that its consumer's launch is the same. */
static bool bound_skips(struct cuda_state *s, const struct graph *g, int i)
{
    const struct node *n = &g->node[i];
    const int from = n->src[0] >= 0 ? (int)g->node[n->src[0]].op : -1;
    int bit = 0;
    switch (n->op) {
    case OP_RMS_NORM: case OP_RMS_NORM_Q8: case OP_RMS_NORM_ADD: bit = 1; break;
    case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE: case OP_KV_STORE: bit = 2; break;
    case OP_ATTENTION: bit = 4; break;
    case OP_MATMUL_QKV: bit = 8; break;
    case OP_FFN_GLU: bit = 32; break;
    case OP_MATMUL: case OP_MATMUL_ADD: bit = from == OP_ATTENTION ? 16 : from == OP_FFN_GLU ? 64 : n->layer < 0 ? 128 : 0; break;
    default: break;
    }
    if (!(s->bound_skip & bit))
        return false;
    s->q8_of = writes_q8(g, i, s->q8_of == n->src[0]) ? i : -1;
    return true;
}

static int run_node(struct cuda_state *s, const struct graph *g, int i, struct error *e)
{
    if (s->bound_skip && bound_skips(s, g, i))
        return 0;
    const struct node *n = &g->node[i];
    const struct node *a = n->src[0] >= 0 ? &g->node[n->src[0]] : NULL;
    float *y = (float *)data(s, g, i);
    const float *x = a ? (const float *)(s->arena + a->offset) : NULL;
    void *st = s->stream;
    switch (n->op) {
    case OP_TOKENS: case OP_POSITIONS: case OP_KV_LEN: case OP_HEADS: case OP_OUTPUTS: case OP_PART:
        return 0;
    case OP_EMBED:
        return cuda_embed(n->p.w[0]->type, dev_of(s, n->p.w[0]), n->ne[0], (const int32_t *)x, n->ne[1], y, st, e);
    case OP_RMS_NORM: case OP_RMS_NORM_Q8: case OP_RMS_NORM_ADD:
        return cuda_rms_norm(x, dev_of(s, n->p.w[0]), n->p.eps, n->ne[0], n->ne[1],
                             n->op == OP_RMS_NORM_ADD ? (const float *)data(s, g, n->src[1]) : NULL, n->dtype == ACT_Q8_1 ? NULL : y,
                             n->dtype == ACT_Q8_1 ? (void *)y : NULL, st, e);
    case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE:
        return run_heads(s, g, i, e);
    case OP_ADD: case OP_MUL: case OP_SILU: case OP_GELU: case OP_SCALE: case OP_GLU: case OP_ADD_BIAS: {
        const bool gelu = n->p.glu == GLU_GELU;
        enum cuda_elementwise_op op = n->op == OP_ADD ? CUDA_EW_ADD : n->op == OP_MUL ? CUDA_EW_MUL
                                      : n->op == OP_SILU ? CUDA_EW_SILU : n->op == OP_GELU ? CUDA_EW_GELU
                                      : n->op == OP_SCALE ? CUDA_EW_SCALE : n->op == OP_ADD_BIAS ? CUDA_EW_ADD_BIAS
                                      : gelu ? CUDA_EW_GEGLU : CUDA_EW_SWIGLU;
        const float *b = n->op == OP_ADD_BIAS ? (const float *)dev_of(s, n->p.bias[0])
                         : op_n_src(n->op) > 1  ? (const float *)data(s, g, n->src[1]) : NULL;
        return cuda_elementwise(op, x, b, n->ne[0] * n->ne[1] * n->ne[2], n->ne[0], n->p.scale, y, st, e);
    }
    case OP_MATMUL: case OP_MATMUL_ADD: case OP_MATMUL_QKV: case OP_FFN_GLU:
        return run_matmul(s, g, i, e);
    case OP_KV_STORE: {
        const struct node *k = a;
        size_t at = (size_t)n->layer * s->kv_layer_bytes;
        return cuda_kv_store(s->kv_type, s->kv_k + at, s->kv_v + at, x, (const float *)data(s, g, n->src[1]),
                             (const int32_t *)data(s, g, n->src[2]), k->ne[0], k->ne[1], k->ne[2], s->n_ctx, st, e);
    }
    case OP_ATTENTION: {
        size_t at = (size_t)n->layer * s->kv_layer_bytes;
        bool q8 = writes_q8(g, i, false);
        if (cuda_attention(s->kv_type, s->kv_k + at, s->kv_v + at, x, (const int32_t *)data(s, g, n->src[2]), a->ne[0],
                           a->ne[1], s->n_head_kv, a->ne[2], s->n_ctx, s->chunk, s->span, n->p.window, s->att, y,
                           q8 ? s->q8[1] : NULL, st, e))
            return -1;
        s->q8_of = q8 ? i : -1;
        return 0;
    }
    default:
        return fail(e, "the CUDA backend has no kernel for %s", graph_op_name(n->op));
    }
}

static int launch_all(struct cuda_state *s, const struct graph *g, struct error *e)
{
    s->q8_of = -1;
    s->skip[0] = s->skip[1] = -1;
    s->n_rot = 0;
    for (int i = 0; i < g->n; i++)
        if (i != s->skip[0] && i != s->skip[1] && run_node(s, g, i, e))
            return fail_prefix(e, "%s:%d: %s%s", g->source, g->node[i].line, graph_op_name(g->node[i].op),
                               g->node[i].layer >= 0 ? " (a layer's)" : "");
    return 0;
}

/* The step's attention span: kv_len (every position is below it) rounded
 * up to a power of two chunks, at most the cache's. Attention launches
 * have CTAs for the span's chunks only, so a short context in a long
 * cache does not pay for the empty rest (the 8B's tg128 in a cache of 513
 * positions x0.992 of one of 129); a graph is captured once a span. */
static void set_span(struct cuda_state *s, int64_t kv_len)
{
    int64_t span = s->chunk;
    while (span < kv_len && span < s->n_ctx)
        span *= 2;
    s->span = s->spans_off || span > s->n_ctx ? s->n_ctx : span;
}

/* The capture slot of g at the step's span: its own, else the one asked
 * for least lately (a free one first), reused. */
static struct capture *capture_of(struct cuda_state *s, const struct graph *g)
{
    struct capture *c = &s->cap[0];
    for (int i = 0; i < CAPTURES; i++) {
        if (s->cap[i].g == g && s->cap[i].span == s->span) {
            s->cap[i].used = ++s->capture_asks;
            return &s->cap[i];
        }
        if (s->cap[i].used < c->used)
            c = &s->cap[i];
    }
    cuda_graph_destroy(c->exec);
    *c = (struct capture){ g, g->generation, s->span, ++s->capture_asks, 0, NULL };
    return c;
}

/* MINFER_TIMELINE=PATH, with a measuring build (timeline.cuh): the
 * TIMELINE_REPLAY-th and the next replay's CTAs, when each entered and
 * when its wait returned, and what ran between them (the argmax, then the
 * next graph's launch; without execute_argmax, the host's turn and the
 * next step's input copies too), written to PATH (tools/timeline.py reads
 * them). */
#define TIMELINE_REPLAY 64
static int replay(struct cuda_state *s, void *exec, struct error *e)
{
    const bool first = s->replays == TIMELINE_REPLAY, second = s->replays == TIMELINE_REPLAY + 1;
    const char *path = first || second ? getenv("MINFER_TIMELINE") : NULL;
    if (!path)
        return cuda_graph_launch(exec, s->stream, e);
    if ((first && cuda_timeline_begin(s->stream, e)) || cuda_graph_launch(exec, s->stream, e) ||
        (second && cuda_timeline_end(s->stream, path, e)))
        return -1;
    if (second)
        fprintf(stderr, "minfer: replays %d and %d's timeline written to %s\n", TIMELINE_REPLAY, TIMELINE_REPLAY + 1, path);
    return 0;
}

/* Graphs are captured after WARMUP_RUNS direct runs and replayed: the
 * decode step's every step, a prompt chunk's from the third chunk of its
 * shape on (a long prompt, a prompt again); their inputs live in the
 * arena, so one capture serves every position. The warm-up runs also make
 * every first launch (the prompt matmuls' shared-memory opt-in) happen
 * outside a capture. A failed capture turns graphs off for the session,
 * loudly, and the step runs directly. */
static int cuda_execute(void *state, const struct graph *g, struct error *e)
{
    struct cuda_state *s = state;
    if (!s->graphs)
        return launch_all(s, g, e);
    struct capture *c = capture_of(s, g);
    if (c->generation != g->generation) { /* the slot's graph was rebuilt since */
        cuda_graph_destroy(c->exec);
        *c = (struct capture){ g, g->generation, s->span, c->used, 0, NULL };
    }
    if (c->exec) {
        s->replays++;
        return replay(s, c->exec, e);
    }
    if (c->runs++ < WARMUP_RUNS)
        return launch_all(s, g, e);
    struct error why;
    if (cuda_capture_begin(s->stream, &why) == 0) {
        if (launch_all(s, g, &why) == 0 && cuda_capture_end(s->stream, &c->exec, &why) == 0) {
            s->captures++;
            return cuda_graph_launch(c->exec, s->stream, e);
        }
        cuda_capture_abort(s->stream);
    }
    fprintf(stderr, "minfer: CUDA graph capture failed (%s); CUDA graphs are off for this session\n", why.msg);
    s->graphs = false;
    return launch_all(s, g, e);
}

static int cuda_write_input(void *state, const struct graph *g, int node, const void *src, size_t bytes,
                            struct error *e)
{
    struct cuda_state *s = state;
    const struct node *n = &g->node[node];
    int k = n->op == OP_TOKENS ? 0 : n->op == OP_POSITIONS ? 1 : 2;
    if (n->offset + bytes > s->arena_bytes || bytes > s->staging_region)
        return fail(e, "input %s of %zu bytes does not fit the arena", graph_op_name(n->op), bytes);
    if (s->staged[k]) { /* its last copy may not have happened yet */
        if (cuda_stream_sync(s->stream, "staging an input", e))
            return -1;
        s->staged[0] = s->staged[1] = s->staged[2] = false;
    }
    uint8_t *slot = s->staging + (size_t)k * s->staging_region;
    memcpy(slot, src, bytes);
    if (k == 1) { /* the positions: the step's span */
        int32_t last = 0;
        for (size_t i = 0; i < bytes / sizeof last; i++)
            last = ((const int32_t *)src)[i] > last ? ((const int32_t *)src)[i] : last;
        set_span(s, (int64_t)last + 1);
    }
    s->staged[k] = true;
    return cuda_upload_async(s->arena + n->offset, slot, bytes, s->stream, e);
}

static int cuda_read_output(void *state, const struct graph *g, int node, int64_t first, size_t count, float *out,
                            struct error *e)
{
    struct cuda_state *s = state;
    const struct node *x = &g->node[node];
    size_t at = x->offset + (size_t)first * (size_t)x->row_stride;
    if (x->dtype != ACT_F32 || at + count * sizeof *out > s->arena_bytes)
        return fail(e, "cannot read %zu floats of %s from column %lld", count, graph_op_name(x->op), (long long)first);
    if (cuda_download_async(out, s->arena + at, count * sizeof *out, s->stream, e) ||
        cuda_stream_sync(s->stream, "reading the logits", e))
        return -1;
    s->staged[0] = s->staged[1] = s->staged[2] = false; /* the stream has passed every copy */
    return 0;
}

/* The logits of node's last column in g. */
static const float *last_column(const struct cuda_state *s, const struct graph *g, int node)
{
    const struct node *x = &g->node[node];
    return (const float *)(s->arena + x->offset + (size_t)(x->ne[1] - 1) * (size_t)x->row_stride);
}

static int token_of(struct cuda_state *s, const struct graph *g, int node, int32_t *out, struct error *e)
{
    *out = *s->token;
    if (*out < 0 && s->bound_skip) /* a bound's wrong numbers: the device fed token 0 */
        *out = 0;
    if (*out < 0)
        return fail(e, "argmax: every one of the %lld logits is NaN", (long long)g->node[node].ne[0]);
    return 0;
}

static int cuda_read_argmax(void *state, const struct graph *g, int node, int32_t *out, struct error *e)
{
    struct cuda_state *s = state;
    if (cuda_argmax(last_column(s, g, node), g->node[node].ne[0], s->token_dev, NULL, s->argmax, s->stream, e) ||
        cuda_stream_sync(s->stream, "argmax", e))
        return -1;
    s->staged[0] = s->staged[1] = s->staged[2] = false;
    return token_of(s, g, node, out, e);
}

/* The argmax writes next's inputs itself, then next is launched behind it;
 * the host waits only for the argmax (next still runs when this returns). */
static int cuda_execute_argmax(void *state, const struct graph *g, int node, const struct graph *next, int32_t pos,
                               int32_t kv_len, int32_t *out, struct error *e)
{
    struct cuda_state *s = state;
    int32_t *in[3] = { NULL, NULL, NULL };
    for (int k = 0; k < 3; k++)
        if (next->input[k] >= 0)
            in[k] = (int32_t *)(s->arena + next->node[next->input[k]].offset);
    if (!in[0])
        return fail(e, "execute_argmax: the next graph has no token input");
    const struct cuda_argmax_feed feed = { in[0], in[1], in[2], pos, kv_len };
    set_span(s, kv_len);
    if (cuda_argmax(last_column(s, g, node), g->node[node].ne[0], s->token_dev, &feed, s->argmax, s->stream, e) ||
        cuda_event_record(s->token_ready, s->stream, e) || cuda_execute(s, next, e) ||
        cuda_event_sync(s->token_ready, "argmax", e))
        return -1;
    return token_of(s, g, node, out, e);
}

static void cuda_describe(void *state, char *buf, size_t n)
{
    struct cuda_state *s = state;
    snprintf(buf, n, "%s, sm_%d%d, %d SMs, %.0f GiB%s", s->info.name, s->info.sm_major, s->info.sm_minor,
             s->info.sm_count, (double)s->info.total_bytes / 1073741824.0, s->graphs ? ", CUDA graphs" : "");
}

long cuda_backend_replays(const void *state) { return ((const struct cuda_state *)state)->replays; }
long cuda_backend_captures(const void *state) { return ((const struct cuda_state *)state)->captures; }
long cuda_backend_rotations_read(const void *state) { return ((const struct cuda_state *)state)->rot_reads; }

const struct backend cuda_backend = {
    .name = "cuda",
    .q8_activations = true,
    .available = cuda_available,
    .supports = cuda_supports,
    .init = cuda_init,
    .free = cuda_free_state,
    .write_input = cuda_write_input,
    .execute = cuda_execute,
    .read_output = cuda_read_output,
    .read_argmax = cuda_read_argmax,
    .execute_argmax = cuda_execute_argmax,
    .describe = cuda_describe,
};
