/* matmul.cu: the matmul family on the GPU. One launch multiplies one input
 * by up to three matrices (Q, K and V share their input's read and its
 * quantization, whatever their types), or by a gate and an up matrix at once, writing
 * silu(gate) * up (and, on request, that product already as the Q8_1
 * blocks the next matmul reads). Quantized weights meet Q8_1 activations in
 * integer dot products per 32-element block (__dp4a, quant_dot.c's
 * formulas); F32, F16 and BF16 weights meet f32 activations. One warp per
 * output row: lane i takes the row's blocks i, i + 32, ... (K-quants: its
 * groups of blocks whose codes share bytes, two for Q4_K and Q5_K, four
 * for Q6_K, so each byte is read once) and keeps one sum per column, and
 * the warp adds the 32 sums in a butterfly, every rounding explicit, so a
 * column's result is the same whichever launch computes it (a batch gives
 * the bits of single steps). The weights are read in their GGUF layout,
 * in the GPU's row layout (weight_layout.h: GGUF's blocks, or their fields
 * in planes), with 16-byte loads of the codes. */
#include <string.h>

#include "cuda/device.h"
#include "cuda/matmul_launch.cuh"
#include "cuda/mmq.cuh"
#include "cuda/quantize_q8_1.h"

bool cuda_matmul_takes_q8(enum tensor_type t) { return t != TYPE_F32 && t != TYPE_F16 && t != TYPE_BF16; }

/* A decode step's pair writes its product as Q8_1 itself (its first CTAs
 * quantize each 32-row block as its rows come in: pair_spin) only for
 * Q8_0 weights, where it replaced tickets (tg128 8B Q8_0 x1.055); for the
 * others the next matmul's own quantize launch is as short or shorter
 * (8B Q4_K x1.005, 0.5B Q5_0 pair x0.925: BENCHMARKS, twenty-second
 * session). A batch's 32-warp CTAs quantize their own blocks. */
bool cuda_pair_writes_q8(enum tensor_type t, int64_t nt) { return nt > 1 || t == TYPE_Q8_0; }

/* Which tensor-core kernel a prompt's matrix of type t, n rows of k,
 * takes: none unless its rows are whole stages (mmf.cu: 32 values; the
 * quantized kernels: four 32-element blocks). */
enum prompt_kernel { PROMPT_NONE, PROMPT_INT8, PROMPT_F16, PROMPT_BF16 };
static enum prompt_kernel prompt_kernel(int t, int64_t n, int64_t k)
{
    if (cuda_mmf_type(t))
        return k % 32 ? PROMPT_NONE : PROMPT_BF16;
    if (!cuda_mmq_type(t) || k % 128)
        return PROMPT_NONE;
    return cuda_mmq_f16((enum tensor_type)t, n) ? PROMPT_F16 : PROMPT_INT8;
}

/* A prompt's launch on the tensor cores (mmq.cu on int8; mmq_f16.cu on
 * f16: cuda_mmq_f16, or on sm_90 mmq_wgmma.cu for Q4_K and Q6_K, after
 * one preparation of the columns a call; mmf.cu for F16 and BF16
 * weights): neighbouring
 * matrices of one type, kernel and split in one launch (Q, K and V; Q and
 * K when V's type differs; gate and up as a pair), and the pair's Q8_1
 * product quantized from its f32 one (the CPU's quantizer, as the decode
 * path's). 1 when a matrix is not theirs (prompt_kernel), else 0 or -1
 * (e says why). */
static int mmq_matmul(const struct mm_args &a, int n_mat, void *q8_out, cudaStream_t s, struct error *e)
{
    const bool pair = a.epi == CUDA_EPI_PAIR;
    if ((uintptr_t)a.xq % 16 || (uintptr_t)a.xf % 16) /* copied 16 bytes at a time */
        return 1;
    for (int i = 0; i < n_mat; i++)
        if (prompt_kernel(a.m[i].type, a.m[i].n, a.k) == PROMPT_NONE || (pair && a.m[i].type != a.m[0].type))
            return 1;
    const void *xh = NULL; /* the wgmma kernel's f16 columns, made once for all its launches */
    const float *xs = NULL;
    for (int i = 0, run; i < n_mat; i += run) {
        struct mmq_args m;
        memset(&m, 0, sizeof m);
        const enum tensor_type t = (enum tensor_type)a.m[i].type;
        const enum prompt_kernel kernel = prompt_kernel(t, a.m[i].n, a.k);
        for (run = 1; !pair && i + run < n_mat && a.m[i + run].type == t && prompt_kernel(t, a.m[i + run].n, a.k) == kernel &&
                      cuda_mmq_splits(a.m[i + run].n, a.k) == cuda_mmq_splits(a.m[i].n, a.k);)
            run++;
        run = pair ? n_mat : run;
        m.n_mat = pair ? 1 : run;
        for (int j = 0; j < run; j++) {
            const struct mm_mat &w = a.m[i + j];
            m.m[j] = (struct mmq_mat){ w.w, w.row_bytes, w.n, w.bias, w.y };
        }
        m.k = a.k, m.nt = a.nt, m.xq = a.xq, m.xf = a.xf, m.res = a.epi == CUDA_EPI_ADD ? a.res : NULL, m.glu = a.glu;
        if (kernel == PROMPT_BF16)
            cuda_mmf_launch(t, m, pair, s);
        else if (kernel == PROMPT_F16 && cuda_mmw_type(t)) {
            if (!xh) {
                void *scratch;
                if (cuda_stream_scratch(s, cuda_mmw_scratch_bytes(a.nt, a.k), &scratch, e))
                    return -1;
                cuda_mmw_prepare(m, scratch, s);
                xh = m.xh, xs = m.xs;
            }
            m.xh = xh, m.xs = xs;
            cuda_mmw_launch(t, m, pair, s);
        } else if (kernel == PROMPT_F16)
            cuda_mmq_f16_launch(t, m, pair, s);
        else
            cuda_mmq_launch(t, m, pair, s);
    }
    if (cuda_launch_end("mmq_kernel", e))
        return -1;
    return q8_out ? cuda_quantize_q8_1(a.m[0].y, q8_out, a.m[0].n * a.nt, s, e) : 0;
}

/* Whether special's typed entry e is the launch of a (n_mat matrices; a
 * pair's row set is the gate's): its row sets and types, exactly. */
static bool typed_match(const struct cuda_kernel &e, const struct mm_args &a, int n_mat)
{
    const bool pair = a.epi == CUDA_EPI_PAIR;
    for (int i = 0; i < 3; i++) {
        const bool has = i < n_mat;
        const int64_t n = has && !(pair && i > 0) ? a.m[i].n : 0;
        if (e.rows[i] != n || e.types[i] != (has ? a.m[i].type : -1))
            return false;
    }
    return true;
}

/* special's typed entry for a (its row sets and types), or NULL. */
static cuda_matmul_fn typed_for(const struct cuda_kernel *special, const struct mm_args &a, int n_mat)
{
    for (int i = 0; special && special[i].matmul; i++)
        if (special[i].types[0] >= 0 && special[i].k == a.k && typed_match(special[i], a, n_mat))
            return special[i].matmul;
    return NULL;
}

/* special's entry for a's row length (any types), or NULL. */
static cuda_matmul_fn length_for(const struct cuda_kernel *special, const struct mm_args &a)
{
    for (int i = 0; special && special[i].matmul; i++)
        if (special[i].types[0] < 0 && special[i].k == a.k)
            return special[i].matmul;
    return NULL;
}

extern "C" enum cuda_fixed cuda_matmul_fixed(const struct cuda_kernel *special, const struct cuda_matrix *m, int n_mat,
                                             int64_t k, bool pair)
{
    struct mm_args a;
    memset(&a, 0, sizeof a);
    a.k = k;
    a.epi = pair ? CUDA_EPI_PAIR : CUDA_EPI_NONE;
    a.n_mat = n_mat;
    for (int i = 0; i < n_mat && i < 3; i++)
        a.m[i].type = m[i].t, a.m[i].n = m[i].n;
    if (n_mat >= 1 && n_mat <= 3 && typed_for(special, a, n_mat))
        return CUDA_FIXED_TYPED;
    return length_for(special, a) ? CUDA_FIXED_LENGTH : CUDA_FIXED_NONE;
}

/* The generated decode matmul for a in special: the typed entry of its
 * row sets and types, else the entry for its row length, else NULL. */
static cuda_matmul_fn special_for(const struct cuda_kernel *special, const struct mm_args &a, int n_mat)
{
    cuda_matmul_fn typed = typed_for(special, a, n_mat);
    return typed ? typed : length_for(special, a);
}

extern "C" int cuda_matmul_multi(const struct cuda_matrix *m, int n_mat, int64_t k, const void *xq, const float *xf,
                                 int64_t nt, const float *res, enum cuda_epilogue epi, void *q8_out, float *scratch,
                                 const struct cuda_kernel *special, void *stream, struct error *e)
{
    struct mm_args a;
    memset(&a, 0, sizeof a);
    a.glu = epi == CUDA_EPI_PAIR_GELU ? GLU_GELU : GLU_SILU;
    epi = epi == CUDA_EPI_PAIR_GELU ? CUDA_EPI_PAIR : epi; /* the kernel's pair reads the gate from a.glu */
    if (n_mat < 1 || n_mat > 3 || (epi == CUDA_EPI_PAIR && n_mat != 2) ||
        (epi == CUDA_EPI_ADD && (n_mat != 1 || !res)))
        return fail(e, "matmul: %d matrices with epilogue %d", n_mat, (int)epi);
    for (int i = 0; i < n_mat; i++) {
        const struct type_info *ti = type_info(m[i].t);
        bool q8 = cuda_matmul_takes_q8(m[i].t);
        if (!cuda_weight_type_ok(m[i].t))
            return fail(e, "matmul: no GPU kernel for weight type %s", type_name(m[i].t));
        if (k <= 0 || m[i].n <= 0 || nt <= 0 || k % ti->block_elems || (q8 && (k % QK8 || !xq)) || (!q8 && !xf))
            return fail(e, "matmul: %s rows of %lld are not a positive multiple of %u (or %lld rows, %lld columns, "
                           "or no input of the kind the type reads)", ti->name, (long long)k, ti->block_elems,
                        (long long)m[i].n, (long long)nt);
        if (q8 && ti->block_elems == 256 && (uintptr_t)xq % 16)
            return fail(e, "matmul: a Q8_1 input at %p for %s rows, which read it 16 bytes at a time, is not 16-byte aligned",
                        xq, ti->name);
        if ((uintptr_t)m[i].w % 16)
            return fail(e, "matmul: %s weights at %p are not 16-byte aligned (as uploaded: weight_layout.h)", ti->name, m[i].w);
        a.m[i] = (struct mm_mat){ (int)m[i].t, (const uint8_t *)m[i].w, cuda_row_bytes(m[i].t, k), m[i].n, m[i].bias, m[i].y };
    }
    if (epi == CUDA_EPI_PAIR && m[1].n != m[0].n)
        return fail(e, "matmul: a gate of %lld rows and an up of %lld", (long long)m[0].n, (long long)m[1].n);
    if (q8_out && (m[0].n % 32 || epi != CUDA_EPI_PAIR || (nt == 1 && !scratch)))
        return fail(e, "matmul: a Q8_1 product needs a gated (pair) epilogue, rows in multiples of 32 (not %lld) and, "
                       "for one column, a scratch", (long long)m[0].n);
    if (nt > 65535 * 8)
        return fail(e, "matmul: %lld columns", (long long)nt);
    a.xq = (const uint8_t *)xq;
    a.xf = xf;
    a.k = k;
    a.nt = nt;
    a.res = res;
    a.epi = epi;
    a.q8_out = (uint8_t *)q8_out;
    if (q8_out && nt == 1) /* the rows into the scratch, the f32 product by the quantizing CTAs (pair_spin) */
        a.spin_y = a.m[0].y = scratch, a.spin_out = m[0].y;
    cudaStream_t s = (cudaStream_t)stream;
    /* one launch: a pair (its rows are the gate's), or every matrix, of one type or mixed */
    int64_t rows = 0;
    int type = a.m[0].type;
    for (int i = 0; i < n_mat; i++) {
        rows += epi == CUDA_EPI_PAIR && i > 0 ? 0 : a.m[i].n;
        type = a.m[i].type == type ? type : TYPE_MIXED;
    }
    a.n_mat = epi == CUDA_EPI_PAIR ? 1 : n_mat;
    if (cuda_launch_begin("matmul_kernel", e))
        return -1;
    if (nt > CUDA_PROMPT_MIN_COLUMNS) {
        const int rc = mmq_matmul(a, n_mat, q8_out, s, e);
        if (rc <= 0)
            return rc;
    }
    const cuda_matmul_fn fixed = nt == 1 ? special_for(special, a, n_mat) : NULL;
    if (fixed)
        fixed(type, &a, rows, s);
    else if (nt == 1)
        launch_shape<0, false>(type, a, rows, s);
    else
        launch_shape<0, true>(type, a, rows, s);
    return cuda_launch_end("matmul_kernel", e);
}

extern "C" int cuda_matmul(enum tensor_type t, const void *w, int64_t k, int64_t n, const void *x, int64_t nt,
                           const float *bias, const float *res, enum cuda_epilogue epi, float *y, void *stream,
                           struct error *e)
{
    const struct cuda_matrix m = { t, w, n, bias, y };
    bool q8 = cuda_matmul_takes_q8(t);
    return cuda_matmul_multi(&m, 1, k, q8 ? x : NULL, q8 ? NULL : (const float *)x, nt, res, epi, NULL, NULL, NULL, stream, e);
}
