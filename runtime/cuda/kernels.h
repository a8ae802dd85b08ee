/* kernels.h: the CUDA kernels as the CUDA backend calls them, one family
 * per file. Every pointer is device memory; stream is the engine's
 * cudaStream_t. Each launcher checks its arguments and its launch (the
 * discipline of device.h) and returns 0, or -1 with e naming the kernel and
 * the values it refused. Activations are [ne0, columns], column after
 * column; the KV cache is [layer][head_kv][n_ctx][head_dim] as on the CPU. */
#ifndef MINFER_CUDA_KERNELS_H
#define MINFER_CUDA_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "graph_ops.h"
#include "kv_cache.h"
#include "quant/tensor_type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches of more columns (queries) than this take the prompt kernels:
 * matmuls on int8 tensor cores (mmq.cu), attention on f16 ones
 * (attention_prefill.cu). Smaller batches keep the decode kernels, and so
 * the bits of single steps (DESIGN.md: nt <= 8); 16 leaves the kernel
 * tests' batch of 9 there too. */
#define CUDA_PROMPT_MIN_COLUMNS 16
/* Parts (1 or 4) a prompt matmul splits the row length k of a matrix of
 * rows rows into, each part summed by its own warps, then the parts in
 * order (few rows: too few tiles to fill the GPU). By rows and k alone, so
 * no column's bits depend on the batch. */
int cuda_mmq_splits(int64_t rows, int64_t k);
/* Whether a prompt matmul of rows rows of type t runs on the f16 tensor
 * cores (weights decoded to f16; mmq_f16.cu) rather than the int8 ones:
 * many rows (a launch of them fills the GPU with tiles of 64 rows), by
 * type and rows alone, as the splits. */
bool cuda_mmq_f16(enum tensor_type t, int64_t rows);
/* Whether those launches run on the wgmma kernel (mmq_wgmma.cu: sm_90,
 * Q4_K and Q6_K, unless MINFER_NO_WGMMA=1). */
bool cuda_mmq_wgmma(enum tensor_type t, int64_t rows);
/* The stream scratch (cuda_stream_scratch) a prompt of nt columns through
 * matrices of rows up to k long needs: the wgmma kernel's f16 columns, or
 * 0 where it does not run. */
size_t cuda_prompt_scratch_bytes(int64_t nt, int64_t k);

/* Whether the kernels can read weights of type t: as matmul weights,
 * embedding rows, and (decoded to f32 at registration) norm weights and biases. */
bool cuda_weight_type_ok(enum tensor_type t);
/* Whether a matmul with weights of type t takes Q8_1 activations (the
 * quantized types) or f32 ones (F32, F16, BF16). */
bool cuda_matmul_takes_q8(enum tensor_type t);
/* Whether a gate/up pair of type t over nt columns that feeds a matmul
 * should write its product as Q8_1 too (cuda_matmul_multi's q8_out), or
 * leave the quantization to that matmul's own launch. */
bool cuda_pair_writes_q8(enum tensor_type t, int64_t nt);

/* embed.cu: y[:, c] = row ids[c] of w (n_embd x n_vocab, type t), decoded. */
int cuda_embed(enum tensor_type t, const void *w, int64_t n_embd, const int32_t *ids, int64_t nt, float *y, void *stream,
               struct error *e);

/* norm.cu: RMS norm of each of nt columns of d values, times w (plus res,
 * if not NULL): into y (f32), or into q8 (d/32 Q8_1 blocks per column)
 * when q8 is not NULL. */
int cuda_rms_norm(const float *x, const float *w, float eps, int64_t d, int64_t nt, const float *res, float *y, void *q8,
                  void *stream, struct error *e);
/* Per head vector of [d, h, nt]: an RMS norm times w (if w), then RoPE at
 * pos[column] (if rope_base > 0; over rope_factor when that is > 0, linear
 * scaling), in the given style (enum rope_style). */
int cuda_head_norm_rope(const float *x, const float *w, float eps, float rope_base, float rope_factor, int rope_style,
                        const int32_t *pos, int64_t d, int64_t h, int64_t nt, float *y, void *stream, struct error *e);
/* The same over one or two tensors of heads in one launch (Q's and K's). */
struct cuda_heads {
    const float *x, *w; /* w: NULL for no norm */
    float *y;
    int64_t h;
};
/* With store, the launch also writes the last tensor's heads (K, after its
 * norm and RoPE) and store->v into positions pos[c] of one layer's caches,
 * as cuda_kv_store does (the last tensor has h_kv heads). */
struct cuda_kv_dest {
    enum kv_type kt;
    void *kl, *vl;     /* the layer's first byte */
    const float *v;    /* [d, h_kv, nt] */
    int64_t n_ctx;
};
/* A decode step's rotation (RoPE's cos and sin of each of the d/2 pairs at
 * the column's position, float pairs in rot): formed, sines and cosines in
 * double precision, by the step's first head launch of its RoPE and read
 * by the others (formed: already there), so they form none. */
struct cuda_rotation {
    float *rot;
    bool formed;
};
int cuda_head_norm_rope_parts(const struct cuda_heads *parts, int n_part, float eps, float rope_base, float rope_factor,
                              int rope_style, const int32_t *pos, int64_t d, int64_t nt, const struct cuda_kv_dest *store,
                              const struct cuda_rotation *rot, void *stream, struct error *e);
/* (quantize_q8_1.h quantizes an f32 activation for a matmul that did not get Q8_1 from its producer) */

/* elementwise.cu */
enum cuda_elementwise_op {
    CUDA_EW_ADD, CUDA_EW_MUL, CUDA_EW_SILU, CUDA_EW_GELU, CUDA_EW_SWIGLU, CUDA_EW_GEGLU, CUDA_EW_ADD_BIAS, CUDA_EW_SCALE
};
/* y = a op b over n values; ADD_BIAS: b has d values, added to each
 * column; SCALE: y = a * c. */
int cuda_elementwise(enum cuda_elementwise_op op, const float *a, const float *b, int64_t n, int64_t d, float c,
                     float *y, void *stream, struct error *e);

/* argmax.cu */
/* The next decode step's inputs, written on the device with the token:
 * token (one id), pos (its position: pos_value) and kv_len (kv_value);
 * pos and kv_len may be NULL (a graph without them). */
struct cuda_argmax_feed {
    int32_t *token, *pos, *kv_len;
    int32_t pos_value, kv_value;
};
/* *out = the index of the largest of n values (lowest on ties, NaNs
 * ignored; -1 if all are NaN); out may be mapped host memory. With feed,
 * also its inputs (token 0 for -1: a valid row; the host reports the -1).
 * scratch: cuda_argmax_scratch_bytes(), zeroed once, then reused by
 * launches on one stream. */
int cuda_argmax(const float *x, int64_t n, int32_t *out, const struct cuda_argmax_feed *feed, void *scratch,
                void *stream, struct error *e);
size_t cuda_argmax_scratch_bytes(void);

/* matmul.cu: for each matrix, y[c * n + r] = sum_i w[r][i] x[c][i]
 * (+ bias[r]) over nt columns, then the epilogue: ADD adds res[c * n + r]
 * (one matrix); PAIR (two matrices, gate and up) writes silu(gate) * up
 * (PAIR_GELU: gelu(gate) * up) into
 * the gate's y, and, if q8_out, that product as Q8_1 blocks too. Matrices
 * of different types share the launch as well. The input
 * is read as Q8_1 (xq, k/32 blocks per column) by quantized matrices and as
 * f32 (xf) by F32/F16/BF16 ones. A column's result does not depend on how
 * many columns a launch has. */
enum cuda_epilogue {
    CUDA_EPI_NONE,
    CUDA_EPI_ADD,   /* + res (one matrix) */
    CUDA_EPI_PAIR,  /* two matrices, gate and up: silu(gate) * up into the gate's y */
    CUDA_EPI_PAIR_GELU, /* the same with gelu(gate) */
};
struct cuda_matrix {
    enum tensor_type t;
    const void *w;      /* n rows of k */
    int64_t n;
    const float *bias;  /* n, or NULL */
    float *y;           /* n per column */
};
/* A per-model build's decode matmuls (generated kernels.cu): the kernel
 * with the model's row lengths fixed at compile time, one entry per
 * (op, k, n) the graph has; before them, where the build knows the
 * model's weight types, one entry per launch it makes with its row sets
 * and their types fixed too (a pair's one row set is the gate's, its
 * types the gate's and the up's); up to an entry whose matmul is NULL.
 * The bits are the generic kernel's (tests/cuda). */
struct mm_args; /* matmul_kernel.cuh */
typedef void (*cuda_matmul_fn)(int type, const struct mm_args *a, int64_t rows, void *stream);
struct cuda_kernel {
    int op;
    int64_t k, n;
    cuda_matmul_fn matmul;
    int64_t rows[3]; /* a typed entry's row sets (0: none) */
    int types[3];    /* and their types; -1: an entry for any types */
};
/* Each compiled architecture's table, listed by the generated registry. */
struct cuda_kernel_table {
    const char *arch; /* arch_def.name */
    const struct cuda_kernel *kernels;
};
extern const struct cuda_kernel_table cuda_kernel_tables[];
extern const int cuda_kernel_table_count;

/* special: a table whose entry for row length k runs a decode step (nt 1),
 * or NULL for the generic kernel throughout. With q8_out at one column,
 * scratch holds m[0].n floats with every bit set (every launch leaves
 * them so): the launch's rows go there as they are computed, and its
 * first CTAs, polling, quantize each 32-row block once all its rows are in
 * (matmul_kernel.cuh: pair_spin), with no ticket or fence. */
int cuda_matmul_multi(const struct cuda_matrix *m, int n_mat, int64_t k, const void *xq, const float *xf, int64_t nt,
                      const float *res, enum cuda_epilogue epi, void *q8_out, float *scratch,
                      const struct cuda_kernel *special, void *stream, struct error *e);
/* Which of special's kernels cuda_matmul_multi runs a decode launch of
 * these n_mat matrices of row length k with (pair: a SwiGLU/GeGLU pair's
 * gate and up): a typed entry's (rows and types fixed), an entry's for the
 * row length, or none (the generic kernel). */
enum cuda_fixed { CUDA_FIXED_NONE, CUDA_FIXED_LENGTH, CUDA_FIXED_TYPED };
enum cuda_fixed cuda_matmul_fixed(const struct cuda_kernel *special, const struct cuda_matrix *m, int n_mat, int64_t k,
                                  bool pair);
/* One matrix: x as its type reads it. */
int cuda_matmul(enum tensor_type t, const void *w, int64_t k, int64_t n, const void *x, int64_t nt, const float *bias,
                const float *res, enum cuda_epilogue epi, float *y, void *stream, struct error *e);

/* attention.cu: k and v columns ([d, h_kv] each) into positions pos[c] of
 * one layer's caches (kl, vl: that layer's first byte). */
int cuda_kv_store(enum kv_type kt, void *kl, void *vl, const float *k, const float *v, const int32_t *pos, int64_t d,
                  int64_t h_kv, int64_t nt, int64_t n_ctx, void *stream, struct error *e);
/* Causal attention of q [d, h, nt] over positions 0..pos[c] of one layer's
 * caches (pos[c] - window + 1..pos[c] when window > 0), into y [d*h, nt]. Split-K: positions are cut into chunks of
 * `chunk` (fixed for an engine, so results never depend on timing or on
 * the batch), each chunk's softmax partials go to scratch
 * (cuda_attention_scratch_floats), and the last CTA of each head to finish
 * combines them in chunk order, in the same launch; it also writes y as
 * Q8_1 blocks into q8 when q8 is not NULL (d a multiple of 32), for the
 * matmul that reads it. scratch must be all zero bits before its first use
 * (its tickets: every launch leaves them so). Every pos[c] is below span
 * (at most n_ctx): the launch has CTAs for the chunks before span only,
 * the cut unchanged, so the same bits with fewer CTAs. */
int cuda_attention(enum kv_type kt, const void *kl, const void *vl, const float *q, const int32_t *pos, int64_t d,
                   int64_t h, int64_t h_kv, int64_t nt, int64_t n_ctx, int64_t chunk, int64_t span, int64_t window,
                   float *scratch, float *y, void *q8, void *stream, struct error *e);
/* Whether a launch of more than CUDA_PROMPT_MIN_COLUMNS queries with heads
 * of d values goes to the tensor-core prompt kernel (attention_prefill.cu);
 * other heads take the split-K kernel above, a query at a time. */
bool cuda_attention_prefill_fits(int64_t d);
/* The chunk length for a cache of n_ctx positions, and the scratch it needs. */
int64_t cuda_attention_chunk(int64_t n_ctx);
size_t cuda_attention_scratch_floats(int64_t d, int64_t h, int64_t n_ctx, int64_t chunk);

#ifdef __cplusplus
}
#endif

#endif
