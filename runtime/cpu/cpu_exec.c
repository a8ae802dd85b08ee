/* cpu_exec.c: walks a graph on the CPU (see cpu.h). */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_qdot.h"

int cpu_scratch_init(struct cpu_scratch *s, const struct cpu_sizes *z, struct error *e)
{
    memset(s, 0, sizeof *s);
    if (z->n_threads < 1 || z->n_threads > CPU_MAX_THREADS)
        return fail(e, "%d CPU threads (1 to %d)", z->n_threads, CPU_MAX_THREADS);
    s->n_threads = z->n_threads;
    s->k_max = z->k_max;
    size_t threads = (size_t)s->n_threads, q = CPU_ATT_BLOCK * (size_t)z->group, q8 = (q + 7) / 8 * 8;
    s->att_floats = q * (size_t)z->n_ctx + q + q * (size_t)z->head_dim + CPU_ATT_ROWS * (size_t)z->head_dim +
                    q8 * (size_t)z->head_dim + CPU_ATT_ROWS * q8;
    s->row = malloc((size_t)z->k_max * sizeof *s->row);
    /* zeroed: a block's rows past a multiple of four are read (and their results dropped) */
    s->rows = calloc(threads * CPU_ROW_BLOCK * (size_t)z->k_max, sizeof *s->rows);
    s->tiles = malloc(threads * CPU_ROW_BLOCK * CPU_COL_BLOCK * sizeof *s->tiles);
    s->att = malloc(threads * s->att_floats * sizeof *s->att);
    s->xq = malloc(cpu_q8_bytes(z->k_max + 32) * (size_t)(z->n_batch > 0 ? z->n_batch : 1));
    s->head_dim = z->head_dim;
    s->rope_freq = malloc((size_t)(z->head_dim / 2 + 1) * sizeof *s->rope_freq);
    s->rope_cs = malloc((size_t)(z->head_dim + 1) * sizeof *s->rope_cs);
    if (!s->row || !s->rows || !s->tiles || !s->att || !s->xq || !s->rope_freq || !s->rope_cs) {
        cpu_scratch_free(s);
        return fail(e, "out of memory for CPU scratch (rows of %lld, context %lld, %d threads)", (long long)z->k_max,
                    (long long)z->n_ctx, (int)threads);
    }
    if (cpu_pool_new(&s->pool, s->n_threads, e)) {
        cpu_scratch_free(s);
        return -1;
    }
    return 0;
}

void cpu_scratch_free(struct cpu_scratch *s)
{
    free(s->row);
    free(s->rows);
    free(s->rope_freq);
    free(s->rope_cs);
    free(s->tiles);
    free(s->att);
    free(s->xq);
    cpu_pool_free(s->pool);
    memset(s, 0, sizeof *s);
}

int cpu_execute(const struct graph *g, struct cpu_run *r, struct error *e)
{
    for (int i = 0; i < g->n; i++) {
        const struct node *n = &g->node[i];
        switch (n->op) {
        case OP_TOKENS: case OP_POSITIONS: case OP_KV_LEN: case OP_HEADS: case OP_OUTPUTS: case OP_PART:
            break; /* inputs, views, and outputs their producer writes */
        case OP_EMBED: cpu_embed(g, n, r); break;
        case OP_RMS_NORM: case OP_RMS_NORM_Q8: case OP_RMS_NORM_ADD: cpu_rms_norm(g, n, r); break;
        case OP_HEAD_NORM: case OP_ROPE: case OP_HEAD_NORM_ROPE:
            if (n->op != OP_HEAD_NORM && n->ne[0] > r->s->head_dim) /* the angles' scratch holds a head of head_dim */
                return fail(e, "%s:%d: %s over heads of %lld, wider than the model's head size %lld", g->source, n->line,
                            graph_op_name(n->op), (long long)n->ne[0], (long long)r->s->head_dim);
            cpu_head_norm_rope(g, n, r);
            break;
        case OP_ADD: case OP_MUL: case OP_SILU: case OP_GELU: case OP_SCALE: case OP_GLU: case OP_ADD_BIAS:
            cpu_elementwise(g, n, r);
            break;
        case OP_KV_STORE: cpu_kv_store(g, n, r); break;
        case OP_ATTENTION: cpu_attention(g, n, r); break;
        case OP_MATMUL: case OP_MATMUL_ADD: case OP_MATMUL_QKV: case OP_FFN_GLU:
            if (cpu_matmul_node(g, n, r, e))
                return fail_prefix(e, "%s:%d", g->source, n->line);
            break;
        default:
            return fail(e, "%s:%d: the CPU backend has no kernel for %s", g->source, n->line, graph_op_name(n->op));
        }
    }
    return 0;
}
