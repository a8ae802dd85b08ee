/* graph_ops.h: the op table, the single source of minfer's graph
 * vocabulary. The compiler (symbolic shapes, fusion, emission) and the
 * runtime (recording constructors, executor, backends) both expand it.
 *
 * Columns: NAME, sources, weight slots, fused (1 = produced by the fusion
 * pass, never written in a description), and what the op computes. Shapes
 * are ggml-style: ne[0] is the contiguous dimension, nt the token count. */
#ifndef MINFER_GRAPH_OPS_H
#define MINFER_GRAPH_OPS_H

/*        NAME            src w fused  meaning */
#define GRAPH_OPS(X) \
    X(TOKENS,          0, 0, 0, "token ids [nt] (i32), the graph's input") \
    X(EMBED,           1, 1, 0, "rows of w[n_embd, n_vocab] for each token: [n_embd, nt]") \
    X(RMS_NORM,        1, 1, 0, "x / sqrt(mean(x^2) + eps) * w, per column") \
    X(MATMUL,          1, 2, 0, "w^T x (+ bias if w[1]): x[K, nt], w[K, N] -> [N, nt]") \
    X(ADD,             2, 0, 0, "a + b, equal shapes") \
    X(MUL,             2, 0, 0, "a * b, equal shapes") \
    X(ADD_BIAS,        1, 1, 0, "x + w per column, in place; an absent optional w records no node") \
    X(SILU,            1, 0, 0, "x * sigmoid(x)") \
    X(HEADS,           1, 0, 0, "view [d*h, nt] as [d, h, nt] (d given)") \
    X(HEAD_NORM,       1, 1, 0, "RMS norm of each d-vector of [d, h, nt], times w[d]") \
    X(ROPE,            1, 0, 0, "rotary embedding of [d, h, nt] at the tokens' positions (style: enum rope_style)") \
    X(KV_STORE,        2, 0, 0, "k, v [d, h_kv, nt] into the layer's KV cache at the positions") \
    X(ATTENTION,       2, 0, 0, "causal GQA of q [d, h, nt] over the layer's cache (src1: its KV_STORE) -> [d*h, nt]") \
    X(OUTPUTS,         1, 0, 0, "view of the last n_out columns, the tokens whose logits are wanted: [ne0, n_out]") \
    X(SWIGLU,          2, 0, 1, "silu(a) * b") \
    X(RMS_NORM_Q8,     1, 1, 1, "RMS_NORM that writes its output as Q8_1 blocks for the matmuls reading it") \
    X(MATMUL_QKV,      1, 6, 1, "three matmuls (w0..w2, biases w3..w5) of one input: out q, PART 1 k, PART 2 v") \
    X(FFN_SWIGLU,      1, 2, 1, "silu(w0^T x) * (w1^T x): gate and up as one paired matmul") \
    X(MATMUL_ADD,      2, 2, 1, "w^T x (+ bias) + src1: the residual add as the matmul's epilogue") \
    X(HEAD_NORM_ROPE,  1, 1, 1, "HEAD_NORM then ROPE in one pass") \
    X(PART,            1, 0, 1, "secondary output i of a multi-output fused node (written by src0)")

enum op {
#define GRAPH_OP_ENUM(name, nsrc, nw, fused, doc) OP_##name,
    GRAPH_OPS(GRAPH_OP_ENUM)
#undef GRAPH_OP_ENUM
    OP_COUNT
};

/* How ROPE pairs the dimensions of a head. */
enum rope_style {
    ROPE_NEOX,   /* i with i + d/2 (Qwen2, Qwen3) */
    ROPE_NORMAL, /* 2i with 2i + 1 (Llama as GGUF stores it) */
};

/* Element types of activations. */
enum act_type {
    ACT_F32,  /* 4 bytes per element */
    ACT_I32,  /* token ids */
    ACT_Q8_1, /* 36 bytes per 32 elements along ne0 */
    ACT_NONE, /* ops with no output buffer (KV_STORE) */
};

#endif
