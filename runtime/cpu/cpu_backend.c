/* cpu_backend.c: the CPU as a backend (see backend.h): the arena and the KV
 * cache in host memory, weights read where the file maps them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/cpu.h"
#include "cpu/cpu_dot.h"
#include "cpu/cpu_qdot.h"

struct cpu_state {
    uint8_t *arena;
    size_t arena_bytes;
    struct kv_cache kv;
    struct cpu_scratch scratch;
    struct cpu_run run;
};

static bool cpu_available(struct error *e)
{
    (void)e;
    return true;
}

/* Every op of the table has a CPU kernel, and the CPU reads every tensor
 * type the loader accepts; an op added to the table without one is refused
 * here by name. */
static bool cpu_supports_node(const struct graph *g, int i, struct error *e)
{
    switch (g->node[i].op) {
#define CPU_HAS(name, kind, nsrc, nw, nb, fused, mm, sh, doc) case OP_##name:
        GRAPH_OPS(CPU_HAS)
#undef CPU_HAS
        return true;
    default:
        return fail(e, "%s:%d: the CPU backend has no kernel for %s", g->source, g->node[i].line,
                    graph_op_name(g->node[i].op)) == 0;
    }
}

static void cpu_free(void *state)
{
    struct cpu_state *s = state;
    if (!s)
        return;
    kv_free(&s->kv);
    cpu_scratch_free(&s->scratch);
    free(s->arena);
    free(s);
}

static int cpu_init(void **state, const struct model *m, const struct backend_sizes *z, struct error *e)
{
    struct cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return fail(e, "out of memory");
    *state = s;
    s->arena_bytes = (z->arena_bytes + 255) & ~(size_t)255;
    s->arena = aligned_alloc(256, s->arena_bytes);
    if (!s->arena) {
        cpu_free(s);
        return fail(e, "out of memory for activations (%.1f MiB)", (double)z->arena_bytes / 1048576.0);
    }
    struct cpu_sizes sizes = { z->k_max, z->n_ctx, z->n_head / z->n_head_kv, z->head_dim, z->n_threads, z->n_batch };
    if (kv_init(&s->kv, z->kv_type, z->n_layer, z->n_ctx, z->n_head_kv, z->head_dim, e) ||
        cpu_scratch_init(&s->scratch, &sizes, e)) {
        cpu_free(s);
        return -1;
    }
    s->run = (struct cpu_run){ s->arena, &s->kv, &s->scratch, NULL, 0, false };
    for (int t = 0; t < cpu_kernel_table_count; t++) /* the build's instantiations for this architecture */
        if (strcmp(cpu_kernel_tables[t].arch, m->arch->name) == 0)
            for (s->run.kernels = cpu_kernel_tables[t].kernels; s->run.kernels[s->run.n_kernels].dot;)
                s->run.n_kernels++;
    return 0;
}

/* The fast path: the same state, matmuls of quantized weights on Q8_1 activations. */
static int cpu_fast_init(void **state, const struct model *m, const struct backend_sizes *z, struct error *e)
{
    const char *unit = getenv("MINFER_CPU_UNIT"); /* for measurements: a vector unit below the best */
    if (unit && cpu_qdot_use(unit) != 0)
        return fail(e, "MINFER_CPU_UNIT=%s: not a vector unit this processor has (avx512-vnni, avx2, scalar, best)", unit);
    if (cpu_init(state, m, z, e))
        return -1;
    ((struct cpu_state *)*state)->run.q8 = true;
    return 0;
}

static int cpu_write_input(void *state, const struct graph *g, int node, const void *data, size_t bytes,
                           struct error *e)
{
    struct cpu_state *s = state;
    const struct node *n = &g->node[node];
    if (n->offset + bytes > s->arena_bytes)
        return fail(e, "input %s of %zu bytes does not fit the arena", graph_op_name(n->op), bytes);
    memcpy(s->arena + n->offset, data, bytes);
    return 0;
}

static int cpu_execute_graph(void *state, const struct graph *g, struct error *e)
{
    struct cpu_state *s = state;
    return cpu_execute(g, &s->run, e);
}

static int cpu_read_output(void *state, const struct graph *g, int node, int64_t first, size_t n, float *out,
                           struct error *e)
{
    struct cpu_state *s = state;
    const struct node *x = &g->node[node];
    size_t at = x->offset + (size_t)first * (size_t)x->row_stride;
    if (x->dtype != ACT_F32 || at + n * sizeof *out > s->arena_bytes)
        return fail(e, "cannot read %zu floats of %s from column %lld", n, graph_op_name(x->op), (long long)first);
    memcpy(out, s->arena + at, n * sizeof *out);
    return 0;
}

static int cpu_read_argmax(void *state, const struct graph *g, int node, int32_t *out, struct error *e)
{
    struct cpu_state *s = state;
    const struct node *x = &g->node[node];
    if (x->dtype != ACT_F32 || x->n_dims != 2)
        return fail(e, "argmax of %s, which is not a 2-D f32 value", graph_op_name(x->op));
    const float *v = (const float *)(s->arena + x->offset + (size_t)(x->ne[1] - 1) * (size_t)x->row_stride);
    int32_t best = -1;
    for (int64_t i = 0; i < x->ne[0]; i++)
        if (!isnan(v[i]) && (best < 0 || v[i] > v[best]))
            best = (int32_t)i;
    if (best < 0)
        return fail(e, "argmax: every one of the %lld logits is NaN", (long long)x->ne[0]);
    *out = best;
    return 0;
}

static void cpu_describe(void *state, char *buf, size_t n)
{
    struct cpu_state *s = state;
    snprintf(buf, n, "%d thread%s%s%s", s->scratch.n_threads, s->scratch.n_threads == 1 ? "" : "s",
             s->run.q8 ? ", Q8_1 integer dots on " : "", s->run.q8 ? cpu_qdot_unit() : "");
}

/* The reference and the fast path differ only in their name and init. */
#define CPU_BACKEND(NAME, INIT)                                                                            \
    {                                                                                                      \
        .name = NAME, .available = cpu_available, .supports = cpu_supports_node, .init = INIT,             \
        .free = cpu_free, .write_input = cpu_write_input, .execute = cpu_execute_graph,                    \
        .read_output = cpu_read_output, .read_argmax = cpu_read_argmax, .describe = cpu_describe,          \
    }

const struct backend cpu_backend = CPU_BACKEND("cpu", cpu_init);
const struct backend cpu_fast_backend = CPU_BACKEND("cpu-fast", cpu_fast_init);
