/* cpu_exec.c: walks a graph on the CPU (see cpu.h). */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

int cpu_scratch_init(struct cpu_scratch *s, int64_t k_max, int64_t n_batch, int64_t n_ctx, int n_threads,
                     struct error *e)
{
    memset(s, 0, sizeof *s);
    s->n_threads = n_threads > 0 ? n_threads : 1;
    s->rows = malloc((size_t)s->n_threads * (size_t)k_max * sizeof *s->rows);
    s->k_max = k_max;
    s->n_batch = n_batch;
    s->n_ctx = n_ctx;
    s->row = malloc((size_t)k_max * sizeof *s->row);
    s->row2 = malloc((size_t)k_max * sizeof *s->row2);
    s->scores = malloc((size_t)n_ctx * sizeof *s->scores);
    if (!s->row || !s->row2 || !s->scores || !s->rows) {
        cpu_scratch_free(s);
        return fail(e, "out of memory for CPU scratch (rows of %lld, batch %lld, context %lld)", (long long)k_max,
                    (long long)n_batch, (long long)n_ctx);
    }
    return 0;
}

void cpu_scratch_free(struct cpu_scratch *s)
{
    free(s->row);
    free(s->row2);
    free(s->scores);
    free(s->rows);
    memset(s, 0, sizeof *s);
}

bool cpu_supports(enum op op)
{
    switch (op) {
    case OP_TOKENS: case OP_HEADS: case OP_OUTPUTS: case OP_PART: case OP_EMBED: case OP_RMS_NORM:
    case OP_RMS_NORM_Q8: case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE: case OP_ADD: case OP_MUL:
    case OP_SILU: case OP_SWIGLU: case OP_ADD_BIAS: case OP_KV_STORE: case OP_ATTENTION: case OP_MATMUL:
    case OP_MATMUL_ADD: case OP_MATMUL_QKV: case OP_FFN_SWIGLU:
        return true;
    default:
        return false;
    }
}

int cpu_execute(const struct graph *g, struct cpu_run *r, struct error *e)
{
    for (int i = 0; i < g->n; i++) {
        const struct node *n = &g->node[i];
        switch (n->op) {
        case OP_TOKENS: case OP_HEADS: case OP_OUTPUTS: case OP_PART:
            break; /* inputs, views, and outputs their producer writes */
        case OP_EMBED: cpu_embed(g, n, r); break;
        case OP_RMS_NORM: case OP_RMS_NORM_Q8: cpu_rms_norm(g, n, r); break;
        case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE: cpu_head_norm_rope(g, n, r); break;
        case OP_ADD: case OP_MUL: case OP_SILU: case OP_SWIGLU: case OP_ADD_BIAS: cpu_elementwise(g, n, r); break;
        case OP_KV_STORE: cpu_kv_store(g, n, r); break;
        case OP_ATTENTION: cpu_attention(g, n, r); break;
        case OP_MATMUL: case OP_MATMUL_ADD: case OP_MATMUL_QKV: case OP_FFN_SWIGLU:
            if (cpu_matmul_node(g, n, r, e))
                return fail_prefix(e, "%s:%d", g->source, n->line);
            break;
        default:
            return fail(e, "%s:%d: the CPU backend has no kernel for %s", g->source, n->line, graph_op_name(n->op));
        }
    }
    return 0;
}
