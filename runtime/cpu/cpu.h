/* cpu.h: the CPU backend, minfer's reference: scalar kernels over the GGUF
 * block layout, every reduction in a fixed order, so the same input gives the
 * same bits on every run and a batch of tokens gives the same bits as the
 * tokens one at a time. Activations stay f32 throughout: a matmul decodes
 * each weight row once and takes its dot product with every column, so the
 * result is the weights' exact values applied in f32 (the oracle the GPU's
 * Q8_1-activation kernels are measured against). The fast path (cpu-fast)
 * runs the same graphs with one change: a matmul of quantized weights
 * quantizes its input to Q8_1 and takes integer dot products (cpu_qdot.h),
 * as the GPU does, in its own fixed order. */
#ifndef MINFER_CPU_H
#define MINFER_CPU_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graph.h"
#include "kv_cache.h"

#define CPU_ROW_BLOCK 16 /* weight rows a matmul thread decodes at once (a multiple of 4) */
#define CPU_COL_BLOCK 32 /* activation columns it dots them with at once */
#define CPU_ATT_BLOCK 16 /* query tokens an attention job takes at once */
#define CPU_ATT_ROWS 4   /* cached positions whose scores it forms at once */
#define CPU_MAX_THREADS 64

/* What the scratch is sized for. */
struct cpu_sizes {
    int64_t k_max;     /* the longest weight row */
    int64_t n_ctx;     /* KV cache positions */
    int64_t group;     /* query heads per KV head */
    int64_t head_dim;
    int n_threads;
    int64_t n_batch;   /* the most columns a matmul takes */
};

/* Work memory a graph needs beyond the arena, sized once per engine. */
struct cpu_scratch {
    float *row;        /* k_max floats: one dequantized norm weight or bias */
    float *rows;       /* n_threads * CPU_ROW_BLOCK * k_max floats: each matmul thread's weight rows */
    float *tiles;      /* n_threads * CPU_ROW_BLOCK * CPU_COL_BLOCK floats: their dot products */
    float *att;        /* n_threads * att_floats: each attention job's scores, sums, sums of values, two KV rows,
                          transposed queries and running dot products (cpu_attention.c) */
    size_t att_floats;
    int n_threads;     /* matmuls and attention are split among this many threads */
    int64_t k_max;
    struct cpu_pool *pool; /* n_threads - 1 workers */
    uint8_t *xq;       /* the fast path's Q8_1 input: n_batch columns (cpu_q8_bytes each) */
    double *rope_freq; /* head_dim / 2: RoPE's base^(-2i/d), once a launch */
    float *rope_cs;    /* head_dim: a token's cosines, then its sines (shared by its heads) */
    int64_t head_dim;
};

int cpu_scratch_init(struct cpu_scratch *s, const struct cpu_sizes *z, struct error *e);
void cpu_scratch_free(struct cpu_scratch *s);

/* cpu_pool.c: worker threads made once per engine. run_jobs runs fn on each
 * of n jobs (size bytes apart), one thread each, the first on the calling
 * thread, and returns when all are done. */
struct cpu_pool;
int cpu_pool_new(struct cpu_pool **p, int n_threads, struct error *e);
void cpu_pool_free(struct cpu_pool *p);
void cpu_run_jobs(struct cpu_pool *p, void *jobs, size_t size, int n, void *(*fn)(void *));

struct cpu_kernel;

struct cpu_run {
    uint8_t *arena;           /* the graph's activations, its inputs among them */
    struct kv_cache *kv;
    struct cpu_scratch *s;
    const struct cpu_kernel *kernels; /* the build's instantiations for this architecture */
    int n_kernels;
    bool q8;                  /* the fast path: quantized weights against Q8_1 activations (cpu_qdot.h) */
};

/* Runs every node of g in order (the CPU backend's execute). An op the
 * backend cannot do, or a weight type it cannot read, is an error naming
 * the node. */
int cpu_execute(const struct graph *g, struct cpu_run *r, struct error *e);

/* The op families (cpu_ops.c, cpu_matmul.c), each on one node. */
int cpu_matmul_node(const struct graph *g, const struct node *n, struct cpu_run *r, struct error *e);
void cpu_embed(const struct graph *g, const struct node *n, struct cpu_run *r);
void cpu_rms_norm(const struct graph *g, const struct node *n, struct cpu_run *r);
void cpu_head_norm_rope(const struct graph *g, const struct node *n, struct cpu_run *r);
void cpu_elementwise(const struct graph *g, const struct node *n, struct cpu_run *r);
void cpu_kv_store(const struct graph *g, const struct node *n, struct cpu_run *r);
void cpu_attention(const struct graph *g, const struct node *n, struct cpu_run *r);

/* SiLU and GELU (tanh approximation, as Gemma's gelu_pytorch_tanh), in one
 * place: fused and unfused GLUs must round the same way. GELU's
 * x/2 (1 + tanh(u)) is written as x / (1 + e^-2u), the same function: one
 * expf instead of tanhf (which costs an expm1f and more: 15% of a Gemma
 * prompt), and no cancellation in 1 + tanh(u) for negative x. */
static inline float cpu_silu(float v) { return v / (1.0f + expf(-v)); }
static inline float cpu_gelu(float v)
{
    return v / (1.0f + expf(-1.59576912160573f * (v + 0.044715f * v * v * v)));
}
static inline float cpu_glu_gate(enum glu_gate gate, float v) { return gate == GLU_GELU ? cpu_gelu(v) : cpu_silu(v); }

/* The data of node i. */
static inline uint8_t *cpu_data(const struct graph *g, const struct cpu_run *r, int i)
{
    return r->arena + g->node[i].offset;
}

#endif
