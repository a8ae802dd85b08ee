/* graph_ops.h: the op table, the single source of minfer's graph
 * vocabulary. The compiler (symbolic shapes, fusion, emission) and the
 * runtime (recording constructors, executor, backends) both expand it, and
 * every property of an op that code asks about is a column here, read
 * through the op_* functions below.
 *
 * Columns: NAME; kind (enum op_kind); sources; weight slots (w[]); bias
 * slots (bias[]); fused (1 = made by the fusion pass, never written in a
 * description); matmul (1 = a product of weights with src0, which it may
 * read as Q8_1 blocks); shares (1 = a backend may compute it in one
 * launch with the active node after it when that has the same op, as CUDA
 * does Q's and K's heads: the planner keeps its sources alive through that
 * node, whose output another CTA of the launch may write while this one
 * still reads); what the op computes. Shapes are ggml-style: ne[0]
 * is the contiguous dimension, nt the token count. The inputs are the
 * graph's own: the engine writes them into the arena before each run, so
 * one recorded graph serves every step. */
#ifndef MINFER_GRAPH_OPS_H
#define MINFER_GRAPH_OPS_H

#include <stdbool.h>

/* What a node is, as planners and executors see it. */
enum op_kind {
    OPK_INPUT,   /* written by the engine before a run */
    OPK_VIEW,    /* another node's buffer seen with another shape: nothing to compute */
    OPK_PART,    /* a secondary output, written when its producer (src0) runs */
    OPK_INPLACE, /* computed into its source's buffer */
    OPK_COMPUTE, /* computed into a buffer of its own (KV_STORE: into the KV cache) */
};

/*        NAME            kind         src w  bias fused matmul shares  meaning */
#define GRAPH_OPS(X) \
    X(TOKENS,         OPK_INPUT,   0, 0, 0, 0, 0, 0, "token ids [nt] (i32)") \
    X(POSITIONS,      OPK_INPUT,   0, 0, 0, 0, 0, 0, "each token's position in the sequence [nt] (i32)") \
    X(KV_LEN,         OPK_INPUT,   0, 0, 0, 0, 0, 0, "positions the KV cache holds once this batch is stored [1] (i32)") \
    X(EMBED,          OPK_COMPUTE, 1, 1, 0, 0, 0, 0, "rows of w[n_embd, n_vocab] for each token: [n_embd, nt]") \
    X(RMS_NORM,       OPK_COMPUTE, 1, 1, 0, 0, 0, 0, "x / sqrt(mean(x^2) + eps) * w, per column") \
    X(MATMUL,         OPK_COMPUTE, 1, 1, 1, 0, 1, 0, "w^T x (+ bias): x[K, nt], w[K, N] -> [N, nt]") \
    X(ADD,            OPK_COMPUTE, 2, 0, 0, 0, 0, 0, "a + b, equal shapes") \
    X(MUL,            OPK_COMPUTE, 2, 0, 0, 0, 0, 0, "a * b, equal shapes") \
    X(ADD_BIAS,       OPK_INPLACE, 1, 0, 1, 0, 0, 0, "x + bias per column, in place; an absent optional bias records no node") \
    X(SILU,           OPK_COMPUTE, 1, 0, 0, 0, 0, 0, "x * sigmoid(x)") \
    X(GELU,           OPK_COMPUTE, 1, 0, 0, 0, 0, 0, "x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GELU, tanh approximation") \
    X(SCALE,          OPK_COMPUTE, 1, 0, 0, 0, 0, 0, "x * scale, a float parameter (Gemma's embedding times sqrt(n_embd))") \
    X(HEADS,          OPK_VIEW,    1, 0, 0, 0, 0, 0, "view [d*h, nt] as [d, h, nt] (d = head_dim)") \
    X(HEAD_NORM,      OPK_COMPUTE, 1, 1, 0, 0, 0, 1, "RMS norm of each d-vector of [d, h, nt], times w[d]") \
    X(ROPE,           OPK_COMPUTE, 2, 0, 0, 0, 0, 1, "rotary embedding of [d, h, nt] at the positions (src1) (divided by rope_factor when set), in rope_style") \
    X(KV_STORE,       OPK_COMPUTE, 3, 0, 0, 0, 0, 0, "k, v [d, h_kv, nt] into the layer's KV cache at the positions (src2)") \
    X(ATTENTION,      OPK_COMPUTE, 4, 0, 0, 0, 0, 0, "causal GQA of q [d, h, nt] over the cache its KV_STORE (src1) filled, " \
                                                   "at the positions (src2), up to KV_LEN (src3), over the last `window` positions " \
                                                   "when window > 0 -> [d*h, nt]") \
    X(OUTPUTS,        OPK_VIEW,    1, 0, 0, 0, 0, 0, "the last n_out columns, the tokens whose logits are wanted: [ne0, n_out]") \
    X(GLU,            OPK_COMPUTE, 2, 0, 0, 1, 0, 0, "gate(a) * b, gate SiLU (SwiGLU) or GELU (GeGLU) as p.glu says") \
    X(RMS_NORM_Q8,    OPK_COMPUTE, 1, 1, 0, 1, 0, 0, "RMS_NORM that writes Q8_1 blocks for the matmuls reading it") \
    X(RMS_NORM_ADD,   OPK_COMPUTE, 2, 1, 0, 1, 0, 0, "RMS_NORM of src0 plus src1: a block's output norm and its residual add") \
    X(MATMUL_QKV,     OPK_COMPUTE, 1, 3, 3, 1, 1, 0, "three matmuls of one input: out w0 (q), PART 1 w1 (k), PART 2 w2 (v)") \
    X(FFN_GLU,        OPK_COMPUTE, 1, 2, 0, 1, 1, 0, "gate(w0^T x) * (w1^T x) (GLU's gate): gate and up as one paired matmul") \
    X(MATMUL_ADD,     OPK_COMPUTE, 2, 1, 1, 1, 1, 0, "w^T x (+ bias) + src1: the residual add as the matmul's epilogue") \
    X(HEAD_NORM_ROPE, OPK_COMPUTE, 2, 1, 0, 1, 0, 1, "HEAD_NORM then ROPE at the positions (src1), in one pass") \
    X(PART,           OPK_PART,    1, 0, 0, 1, 0, 0, "secondary output `part` of a multi-output fused node (src0)")

enum op {
#define GRAPH_OP_ENUM(name, kind, nsrc, nw, nb, fused, mm, sh, doc) OP_##name,
    GRAPH_OPS(GRAPH_OP_ENUM)
#undef GRAPH_OP_ENUM
    OP_COUNT
};

#define GRAPH_MAX_SRC 4  /* the most sources an op has */
#define GRAPH_MAX_W 3    /* weight slots, and bias slots */

/* One row of the table. */
struct op_info {
    const char *name;
    enum op_kind kind;
    int n_src, n_w, n_bias;
    bool fused, matmul, shares;
    const char *doc;
};

static const struct op_info op_table[OP_COUNT] = {
#define GRAPH_OP_INFO(name, kind, nsrc, nw, nb, fused, mm, sh, doc) { #name, kind, nsrc, nw, nb, fused, mm, sh, doc },
    GRAPH_OPS(GRAPH_OP_INFO)
#undef GRAPH_OP_INFO
};

static inline const struct op_info *op_info(int op) { return &op_table[op]; }
static inline enum op_kind op_kind(int op) { return op_table[op].kind; }
static inline int op_n_src(int op) { return op_table[op].n_src; }
static inline bool op_is_fused(int op) { return op_table[op].fused; }
/* A product of weights with src0 (the family that may read Q8_1 activations). */
static inline bool op_is_matmul(int op) { return op_table[op].matmul; }
/* Nothing to compute: inputs the engine writes, views, parts their producer writes. */
static inline bool op_is_passive(int op)
{
    return op_table[op].kind == OPK_INPUT || op_table[op].kind == OPK_VIEW || op_table[op].kind == OPK_PART;
}
/* May share a launch with the next active node of the same op (see the columns). */
static inline bool op_shares_launch(int op) { return op_table[op].shares; }
static inline bool op_is_view(int op) { return op_table[op].kind == OPK_VIEW; }

/* How ROPE pairs the dimensions of a head. */
enum rope_style {
    ROPE_NEOX,   /* i with i + d/2 (Qwen2, Qwen3) */
    ROPE_NORMAL, /* 2i with 2i + 1 (Llama as GGUF stores it) */
};

/* The gate of GLU and FFN_GLU. */
enum glu_gate {
    GLU_SILU, /* SwiGLU (Qwen, Llama) */
    GLU_GELU, /* GeGLU with GELU's tanh approximation (Gemma) */
};

/* Element types of activations. */
enum act_type {
    ACT_F32,  /* 4 bytes per element */
    ACT_I32,  /* token ids, positions */
    ACT_Q8_1, /* 36 bytes per 32 elements along ne0 */
    ACT_NONE, /* ops with no output buffer (KV_STORE) */
};

#endif
