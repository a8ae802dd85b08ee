/* cuda_backend.c: the GPU as a backend (see backend.h). Per engine: its own
 * non-blocking stream, the activation arena, the KV cache and the model's
 * weights in device memory (uploaded once, at init, after checking they
 * fit), and the decode graph captured as a CUDA graph after two warm-up
 * runs and replayed every step. Only the device layer (device.cu) calls the
 * CUDA runtime; this file walks graphs and calls kernel launchers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"
#include "quant/quant.h"

#define WARMUP_RUNS 2   /* direct runs of a graph before it is captured */
#define CAPTURES 4      /* graphs kept captured at once */

struct capture {
    const struct graph *g;
    unsigned generation;  /* of g when captured: a rebuilt graph is captured again */
    int runs;             /* direct runs so far */
    void *exec;           /* the instantiated CUDA graph, once captured */
};

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
    void **dev;           /* the device copy of each model weight (m->w order); 1-D ones as f32 */
    void *q8;             /* a matmul's input quantized, when its producer gave f32 */
    size_t q8_bytes;
    float *att;           /* attention partials */
    int32_t *argmax;      /* one int on the device */
    bool graphs;          /* capture decode graphs; off with --no-graphs or after a failed capture */
    long replays;         /* captured graphs launched (cuda_backend.h) */
    struct capture cap[CAPTURES];
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
    if ((n->op == OP_ROPE || n->op == OP_HEAD_NORM || n->op == OP_HEAD_NORM_ROPE) && (n->ne[0] % 2 || n->ne[0] > 4096))
        return refuse(g, i, e, "head size must be even and at most 4096");
    if (n->op == OP_ATTENTION) {
        const struct node *q = &g->node[n->src[0]], *k = &g->node[g->node[n->src[1]].src[0]];
        if (q->ne[1] % k->ne[1])
            return refuse(g, i, e, "query heads must be a multiple of the KV heads");
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
    if (s->dev)
        for (int i = 0; i < s->m->n_w; i++)
            cuda_free(s->dev[i]);
    free(s->dev);
    cuda_free(s->arena);
    cuda_free(s->kv_k);
    cuda_free(s->kv_v);
    cuda_free(s->q8);
    cuda_free(s->att);
    cuda_free(s->argmax);
    cuda_stream_destroy(s->stream);
    free(s);
}

static size_t weight_bytes(const struct weight *w)
{
    uint64_t n = (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]);
    return w->n_dims == 1 ? (size_t)n * sizeof(float) : type_bytes(w->type, n);
}

/* Each weight once: matrices as stored, vectors (norms, biases) as f32. */
static int upload_weights(struct cuda_state *s, struct error *e)
{
    const struct model *m = s->m;
    size_t total = 0, done = 0;
    for (int i = 0; i < m->n_w; i++)
        total += weight_bytes(&m->w[i]);
    bool tty = isatty(2);
    int shown = -1;
    for (int i = 0; i < m->n_w; i++) {
        const struct weight *w = &m->w[i];
        size_t bytes = weight_bytes(w);
        if (cuda_alloc(&s->dev[i], bytes ? bytes : 1, "a weight", e))
            return fail_prefix(e, "weight '%.*s'", (int)w->name_len, w->name);
        if (w->n_dims == 1) {
            float *f = malloc(bytes);
            int rc = !f ? fail(e, "out of memory") : dequantize_row(w->type, w->data, f, w->ne[0]) ? fail(e, "type %s", type_name(w->type)) : 0;
            rc = rc || cuda_upload(s->dev[i], f, bytes, e);
            free(f);
            if (rc)
                return fail_prefix(e, "weight '%.*s'", (int)w->name_len, w->name);
        } else if (cuda_upload(s->dev[i], w->data, bytes, e)) {
            return fail_prefix(e, "weight '%.*s'", (int)w->name_len, w->name);
        }
        done += bytes;
        int pct = (int)(done * 100 / (total ? total : 1));
        if (tty && (pct != shown || i == m->n_w - 1)) {
            shown = pct;
            fprintf(stderr, "\ruploading [%-40.*s] %3d%%", pct * 40 / 100, "========================================", pct);
        }
    }
    if (tty)
        fputc('\n', stderr);
    return 0;
}

static int cuda_init(void **state, const struct model *m, const struct backend_sizes *z, struct error *e)
{
    struct cuda_state *s = calloc(1, sizeof *s);
    if (!s)
        return fail(e, "out of memory");
    *state = s;
    s->m = m;
    s->graphs = z->graphs;
    s->kv_type = z->kv_type;
    s->n_ctx = z->n_ctx;
    s->n_head_kv = z->n_head_kv;
    s->head_dim = z->head_dim;
    s->chunk = cuda_attention_chunk(z->n_ctx);
    size_t row = z->kv_type == KV_F32 ? 4 * (size_t)z->head_dim : z->kv_type == KV_F16 ? 2 * (size_t)z->head_dim
                                                                                       : (size_t)z->head_dim / 32 * 34;
    s->kv_layer_bytes = (size_t)z->n_head_kv * (size_t)z->n_ctx * row;
    s->q8_bytes = (size_t)(z->k_max / 32 + 1) * 36 * (size_t)z->n_batch;
    size_t att = cuda_attention_scratch_floats(z->head_dim, z->n_head, z->n_ctx, s->chunk) * sizeof(float);
    size_t weights = 0;
    for (int i = 0; i < m->n_w; i++)
        weights += weight_bytes(&m->w[i]);
    size_t kv = 2 * (size_t)z->n_layer * s->kv_layer_bytes, need = weights + kv + z->arena_bytes + s->q8_bytes + att;
    size_t free_b = 0, total_b = 0, smem = (size_t)(z->head_dim + s->chunk) * sizeof(float);
    if (smem > 48 * 1024) {
        fail(e, "cuda: a context of %lld positions is too long for the attention kernel (chunks of %lld positions "
                "need %zu bytes of shared memory, 49152 are available)", (long long)z->n_ctx, (long long)s->chunk, smem);
        free(s);
        *state = NULL;
        return -1;
    }
    int rc = cuda_device_query(0, &s->info, e) || cuda_mem_info(&free_b, &total_b, e);
    if (!rc && need > free_b)
        rc = fail(e, "cuda: the model needs %.1f MiB of device memory (weights %.1f, KV cache %.1f, activations %.1f, "
                     "scratch %.1f) and %.1f MiB are free", (double)need / 1048576, (double)weights / 1048576,
                  (double)kv / 1048576, (double)z->arena_bytes / 1048576, (double)(s->q8_bytes + att) / 1048576,
                  (double)free_b / 1048576);
    if (!rc && !(s->dev = calloc((size_t)m->n_w, sizeof *s->dev)))
        rc = fail(e, "out of memory");
    if (!rc)
        rc = cuda_stream_create(&s->stream, e) || cuda_alloc((void **)&s->arena, z->arena_bytes, "the activation arena", e) ||
             cuda_alloc((void **)&s->kv_k, kv / 2, "the K cache", e) || cuda_alloc((void **)&s->kv_v, kv / 2, "the V cache", e) ||
             cuda_alloc(&s->q8, s->q8_bytes, "Q8_1 scratch", e) || cuda_alloc((void **)&s->att, att, "attention scratch", e) ||
             cuda_alloc((void **)&s->argmax, sizeof(int32_t), "argmax", e) ||
             cuda_memset_async(s->kv_k, 0, kv / 2, s->stream, e) || cuda_memset_async(s->kv_v, 0, kv / 2, s->stream, e) ||
             upload_weights(s, e);
    if (rc) {
        cuda_free_state(s);
        *state = NULL;
        return -1;
    }
    s->arena_bytes = z->arena_bytes;
    return 0;
}

/* ---- execution ---- */

/* The matmul's input as its weights want it: Q8_1 (the producer's, or
 * quantized here into scratch) or f32. */
static const void *matmul_input(struct cuda_state *s, const struct graph *g, const struct node *n, struct error *e)
{
    const struct node *x = &g->node[n->src[0]];
    if (!cuda_matmul_takes_q8(n->p.w[0]->type) || x->dtype == ACT_Q8_1)
        return s->arena + x->offset;
    if (cuda_quantize_q8_1((const float *)(s->arena + x->offset), s->q8, x->ne[0] * x->ne[1], s->stream, e))
        return NULL;
    return s->q8;
}

static int run_matmul(struct cuda_state *s, const struct graph *g, const struct node *n, struct error *e)
{
    const void *x = matmul_input(s, g, n, e);
    if (!x)
        return -1;
    int64_t k = g->node[n->src[0]].ne[0], nt = g->node[n->src[0]].ne[1];
    float *y = (float *)data(s, g, (int)(n - g->node));
    const struct weight *const *w = n->p.w;
#define MM(W, BIAS, RES, EPI, Y) \
    cuda_matmul((W)->type, dev_of(s, W), k, (W)->ne[1], x, nt, (const float *)dev_of(s, BIAS), RES, EPI, Y, s->stream, e)
    switch (n->op) {
    case OP_MATMUL: return MM(w[0], n->p.bias[0], NULL, CUDA_EPI_NONE, y);
    case OP_MATMUL_ADD: return MM(w[0], n->p.bias[0], (const float *)data(s, g, n->src[1]), CUDA_EPI_ADD, y);
    case OP_FFN_SWIGLU: return MM(w[0], NULL, NULL, CUDA_EPI_NONE, y) || MM(w[1], NULL, NULL, CUDA_EPI_SWIGLU_UP, y);
    case OP_MATMUL_QKV:
        return MM(w[0], n->p.bias[0], NULL, CUDA_EPI_NONE, y) ||
               MM(w[1], n->p.bias[1], NULL, CUDA_EPI_NONE, (float *)data(s, g, n->part[0])) ||
               MM(w[2], n->p.bias[2], NULL, CUDA_EPI_NONE, (float *)data(s, g, n->part[1]));
    default: return fail(e, "not a matmul: %s", graph_op_name(n->op));
    }
#undef MM
}

static int run_node(struct cuda_state *s, const struct graph *g, int i, struct error *e)
{
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
    case OP_RMS_NORM: case OP_RMS_NORM_Q8:
        return cuda_rms_norm(x, dev_of(s, n->p.w[0]), n->p.eps, n->ne[0], n->ne[1], n->dtype == ACT_Q8_1 ? NULL : y,
                             n->dtype == ACT_Q8_1 ? (void *)y : NULL, st, e);
    case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE:
        return cuda_head_norm_rope(x, n->op == OP_ROPE ? NULL : dev_of(s, n->p.w[0]), n->p.eps,
                                   n->op == OP_HEAD_NORM ? 0.0f : n->p.rope_base, n->p.rope_style,
                                   n->op == OP_HEAD_NORM ? NULL : (const int32_t *)data(s, g, n->src[1]), n->ne[0],
                                   n->ne[1], n->ne[2], y, st, e);
    case OP_ADD: case OP_MUL: case OP_SILU: case OP_SWIGLU: case OP_ADD_BIAS: {
        enum cuda_elementwise_op op = n->op == OP_ADD ? CUDA_EW_ADD : n->op == OP_MUL ? CUDA_EW_MUL : n->op == OP_SILU ? CUDA_EW_SILU
                                      : n->op == OP_SWIGLU ? CUDA_EW_SWIGLU : CUDA_EW_ADD_BIAS;
        const float *b = n->op == OP_ADD_BIAS ? (const float *)dev_of(s, n->p.bias[0])
                         : op_n_src(n->op) > 1  ? (const float *)data(s, g, n->src[1]) : NULL;
        return cuda_elementwise(op, x, b, n->ne[0] * n->ne[1] * n->ne[2], n->ne[0], y, st, e);
    }
    case OP_MATMUL: case OP_MATMUL_ADD: case OP_MATMUL_QKV: case OP_FFN_SWIGLU:
        return run_matmul(s, g, n, e);
    case OP_KV_STORE: {
        const struct node *k = a;
        size_t at = (size_t)n->layer * s->kv_layer_bytes;
        return cuda_kv_store(s->kv_type, s->kv_k + at, s->kv_v + at, x, (const float *)data(s, g, n->src[1]),
                             (const int32_t *)data(s, g, n->src[2]), k->ne[0], k->ne[1], k->ne[2], s->n_ctx, st, e);
    }
    case OP_ATTENTION: {
        size_t at = (size_t)n->layer * s->kv_layer_bytes;
        return cuda_attention(s->kv_type, s->kv_k + at, s->kv_v + at, x, (const int32_t *)data(s, g, n->src[2]), a->ne[0],
                              a->ne[1], s->n_head_kv, a->ne[2], s->n_ctx, s->chunk, s->att, y, st, e);
    }
    default:
        return fail(e, "the CUDA backend has no kernel for %s", graph_op_name(n->op));
    }
}

static int launch_all(struct cuda_state *s, const struct graph *g, struct error *e)
{
    for (int i = 0; i < g->n; i++)
        if (run_node(s, g, i, e))
            return fail_prefix(e, "%s:%d: %s%s", g->source, g->node[i].line, graph_op_name(g->node[i].op),
                               g->node[i].layer >= 0 ? " (a layer's)" : "");
    return 0;
}

/* The capture slot of g: its own, else a free one, else the oldest reused. */
static struct capture *capture_of(struct cuda_state *s, const struct graph *g)
{
    struct capture *free_slot = NULL;
    for (int c = 0; c < CAPTURES; c++) {
        if (s->cap[c].g == g)
            return &s->cap[c];
        if (!s->cap[c].g && !free_slot)
            free_slot = &s->cap[c];
    }
    struct capture *c = free_slot ? free_slot : &s->cap[0];
    cuda_graph_destroy(c->exec);
    *c = (struct capture){ g, g->generation, 0, NULL };
    return c;
}

/* Decode graphs (one token) are captured after WARMUP_RUNS direct runs and
 * replayed; their inputs live in the arena, so one capture serves every
 * position. A failed capture turns graphs off for the session, loudly, and
 * the step runs directly. */
static int cuda_execute(void *state, const struct graph *g, struct error *e)
{
    struct cuda_state *s = state;
    if (!s->graphs || g->nt != 1)
        return launch_all(s, g, e);
    struct capture *c = capture_of(s, g);
    if (c->generation != g->generation) { /* the slot's graph was rebuilt since */
        cuda_graph_destroy(c->exec);
        *c = (struct capture){ g, g->generation, 0, NULL };
    }
    if (c->exec) {
        s->replays++;
        return cuda_graph_launch(c->exec, s->stream, e);
    }
    if (c->runs++ < WARMUP_RUNS)
        return launch_all(s, g, e);
    struct error why;
    if (cuda_capture_begin(s->stream, &why) == 0) {
        if (launch_all(s, g, &why) == 0 && cuda_capture_end(s->stream, &c->exec, &why) == 0)
            return cuda_graph_launch(c->exec, s->stream, e);
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
    if (n->offset + bytes > s->arena_bytes)
        return fail(e, "input %s of %zu bytes does not fit the arena", graph_op_name(n->op), bytes);
    return cuda_upload_async(s->arena + n->offset, src, bytes, s->stream, e);
}

static int cuda_read_output(void *state, const struct graph *g, int node, int64_t first, size_t count, float *out,
                            struct error *e)
{
    struct cuda_state *s = state;
    const struct node *x = &g->node[node];
    size_t at = x->offset + (size_t)first * (size_t)x->row_stride;
    if (x->dtype != ACT_F32 || at + count * sizeof *out > s->arena_bytes)
        return fail(e, "cannot read %zu floats of %s from column %lld", count, graph_op_name(x->op), (long long)first);
    return cuda_download_async(out, s->arena + at, count * sizeof *out, s->stream, e) ||
                   cuda_stream_sync(s->stream, "reading the logits", e)
               ? -1
               : 0;
}

static int cuda_read_argmax(void *state, const struct graph *g, int node, int32_t *out, struct error *e)
{
    struct cuda_state *s = state;
    const struct node *x = &g->node[node];
    const float *last = (const float *)(s->arena + x->offset + (size_t)(x->ne[1] - 1) * (size_t)x->row_stride);
    if (cuda_argmax(last, x->ne[0], s->argmax, s->stream, e) ||
        cuda_download_async(out, s->argmax, sizeof *out, s->stream, e) || cuda_stream_sync(s->stream, "argmax", e))
        return -1;
    if (*out < 0)
        return fail(e, "argmax: every one of the %lld logits is NaN", (long long)x->ne[0]);
    return 0;
}

static void cuda_describe(void *state, char *buf, size_t n)
{
    struct cuda_state *s = state;
    snprintf(buf, n, "%s, sm_%d%d, %d SMs, %.0f GiB%s", s->info.name, s->info.sm_major, s->info.sm_minor,
             s->info.sm_count, (double)s->info.total_bytes / 1073741824.0, s->graphs ? ", CUDA graphs" : "");
}

long cuda_backend_replays(const void *state) { return ((const struct cuda_state *)state)->replays; }

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
    .describe = cuda_describe,
};
