/* cpu_qdot.c: a weight row in its GGUF layout against Q8_1 activations on
 * the CPU's vector unit (see cpu_qdot.h). Eight blocks at a time: each
 * block's code products are summed as integers (AVX2 u8 x s8 maddubs, madd,
 * then one joint reduction for the eight: exact in any order), the eight
 * float terms are quant_dot.c's expressions evaluated lane by lane (the same
 * roundings, no FMA), and block j's term goes into lane j % 8, the lanes
 * combined in a fixed tree at the end. Without AVX2 the same terms and the
 * same order are formed from quant_dot.c's dot_q8_1_terms, so the bits do
 * not depend on the machine. */
#include "cpu/cpu_qdot.h"

#include <stdbool.h>
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"

bool cpu_qdot_takes(enum tensor_type t)
{
    return t == TYPE_Q4_0 || t == TYPE_Q4_1 || t == TYPE_Q5_0 || t == TYPE_Q5_1 || t == TYPE_Q8_0 || t == TYPE_Q4_K ||
           t == TYPE_Q5_K || t == TYPE_Q6_K;
}

/* The split layout: n codes, then n / 32 scales d, then n / 32 sums s. */
size_t cpu_q8_bytes(int64_t n) { return (size_t)n + (size_t)(n / 32) * 2 * sizeof(float); }

static const int8_t *codes_of(const uint8_t *a) { return (const int8_t *)a; }
static const float *d_of(const uint8_t *a, int64_t n) { return (const float *)(a + n); }
static const float *s_of(const uint8_t *a, int64_t n) { return (const float *)(a + n) + n / 32; }

void cpu_q8_quantize(const float *x, int64_t n, void *out)
{
    uint8_t *o = out, blk[36];
    float *d = (float *)(o + n), *s = d + n / 32;
    for (int64_t b = 0; b < n / 32; b++) {
        quant_q8_1(x + b * 32, blk, 32);
        memcpy(o + b * 32, blk + 4, 32);
        d[b] = load_f16(blk);
        s[b] = load_f16(blk + 2);
    }
}

/* Block j of the split activations as a standard Q8_1 block (for quant_dot.c). */
static void q8_1_block_of(const uint8_t *a, int64_t n, int64_t j, uint8_t out[36])
{
    store_f16(out, d_of(a, n)[j]); /* widened from f16: narrowing back is exact */
    store_f16(out + 2, s_of(a, n)[j]);
    memcpy(out + 4, codes_of(a) + j * 32, 32);
}

/* The lanes' fixed tree: (l0 + l4) + (l2 + l6), then + ((l1 + l5) + (l3 + l7)). */
static float lanes_sum(const float l[8])
{
    const float s4[4] = { l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7] };
    const float s2[2] = { s4[0] + s4[2], s4[1] + s4[3] };
    return s2[0] + s2[1];
}

/* The reference order from quant_dot.c's terms, eight blocks (one
 * superblock of a K-quant, or eight 32-element blocks) at a time. */
static float row_terms(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t k)
{
    const struct type_info *ti = type_info(t);
    float lanes[8] = { 0 };
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        uint8_t blocks[8 * 36];
        float terms[8];
        for (int b = 0; b < nb; b++)
            q8_1_block_of(a, k, j0 + b, blocks + b * 36);
        dot_q8_1_terms(t, w + (size_t)(j0 * 32 / ti->block_elems) * ti->block_bytes, blocks, (int64_t)nb * 32, terms);
        for (int b = 0; b < nb; b++)
            lanes[b] += terms[b];
    }
    return lanes_sum(lanes);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

/* lane b = the sum of v[b]'s eight lanes (integers: exact in any order). */
AVX2 static inline __m256i hsum8(const __m256i v[8])
{
    const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* The 32 code products of a block, as eight int32 partial sums: u unsigned (at most 128), a signed. */
AVX2 static inline __m256i products(__m256i u, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

/* 16 bytes of packed nibbles as 32 codes: low nibbles are codes 0..15, high 16..31. */
AVX2 static inline __m256i nibbles(const uint8_t *p)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* 0x10 in byte i where bit i of the 32-bit word at p is set (Q5 high bits). */
AVX2 static inline __m256i fifth_bits(const uint8_t *p)
{
    uint32_t h;
    memcpy(&h, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                                                2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

/* n (at most 8) f16 values 'stride' bytes apart, widened, the rest 0.
 * Gathered in a register: eight halves stored and read back as one vector
 * stall on store forwarding. */
static inline short half_bits(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return (short)h;
}

AVX2 static inline __m256 halves(const uint8_t *p, int stride, int n)
{
#define H(b) ((b) < n ? half_bits(p + (b) * stride) : (short)0)
    return _mm256_cvtph_ps(_mm_setr_epi16(H(0), H(1), H(2), H(3), H(4), H(5), H(6), H(7)));
#undef H
}

/* n (at most 8) floats from p, the rest 0. */
AVX2 static inline __m256 floats(const float *p, int n)
{
    if (n == 8)
        return _mm256_loadu_ps(p);
    float f[8] = { 0 };
    memcpy(f, p, (size_t)n * sizeof *f);
    return _mm256_loadu_ps(f);
}

/* acc's lanes below n take term added; the others stay as they are. */
AVX2 static inline __m256 add_lanes(__m256 acc, __m256 term, int n)
{
    if (n == 8)
        return _mm256_add_ps(acc, term);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
    return _mm256_blendv_ps(acc, _mm256_add_ps(acc, term), keep);
}

AVX2 static inline float finish(__m256 acc)
{
    float l[8];
    _mm256_storeu_ps(l, acc);
    return lanes_sum(l);
}

/* Each function below: one row against nc (at most CPU_QDOT_COLS) columns
 * of activations, col bytes apart; the row's codes are unpacked once per
 * block for all of them. */
#define COLS for (int c = 0; c < nc; c++)

/* The 32 codes of a legacy block (before any offset). */
AVX2 static inline __m256i legacy_codes(enum tensor_type t, const uint8_t *blk)
{
    __m256i q = nibbles(blk + (t == TYPE_Q4_0 ? 2 : t == TYPE_Q4_1 ? 4 : t == TYPE_Q5_0 ? 6 : 8));
    if (t == TYPE_Q5_0 || t == TYPE_Q5_1)
        q = _mm256_or_si256(q, fifth_bits(blk + (t == TYPE_Q5_0 ? 2 : 4)));
    return q;
}

/* Eight legacy blocks' terms: d * (x.d * s - 8 or 16 * x.s), or d * x.d * s + m * x.s. */
AVX2 static inline __m256 legacy_terms(enum tensor_type t, __m256 d, __m256 m, __m256i isum, __m256 xd, __m256 xs)
{
    const __m256 s = _mm256_cvtepi32_ps(isum);
    if (t == TYPE_Q4_0 || t == TYPE_Q5_0)
        return _mm256_mul_ps(d, _mm256_sub_ps(_mm256_mul_ps(xd, s), _mm256_mul_ps(_mm256_set1_ps(t == TYPE_Q4_0 ? 8.0f : 16.0f), xs)));
    return _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(d, xd), s), _mm256_mul_ps(m, xs));
}

AVX2 static void row_legacy(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                            float *out)
{
    const int bytes = t == TYPE_Q4_0 ? 18 : t == TYPE_Q4_1 ? 20 : t == TYPE_Q5_0 ? 22 : 24;
    const bool has_m = t == TYPE_Q4_1 || t == TYPE_Q5_1;
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        const __m256 d = halves(w + j0 * bytes, bytes, nb), m = has_m ? halves(w + j0 * bytes + 2, bytes, nb) : _mm256_setzero_ps();
        __m256i p[8];
        if (nc == 1) { /* a decode step: each block's codes used once, straight away (fewer live registers) */
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++) {
                const int64_t j = j0 + (b < nb ? b : 0);
                p[b] = products(legacy_codes(t, w + j * bytes), _mm256_loadu_si256((const __m256i *)(a + j * 32)));
            }
            acc[0] = add_lanes(acc[0], legacy_terms(t, d, m, hsum8(p), floats(d_of(a, k) + j0, nb), floats(s_of(a, k) + j0, nb)), nb);
            continue;
        }
        __m256i q[8];
#pragma GCC unroll 8
        for (int b = 0; b < 8; b++)
            q[b] = legacy_codes(t, w + (j0 + (b < nb ? b : 0)) * bytes);
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++)
                p[b] = products(q[b], _mm256_loadu_si256((const __m256i *)(ac + (j0 + (b < nb ? b : 0)) * 32)));
            acc[c] = add_lanes(acc[c], legacy_terms(t, d, m, hsum8(p), floats(d_of(ac, k) + j0, nb), floats(s_of(ac, k) + j0, nb)), nb);
        }
    }
    COLS out[c] = finish(acc[c]);
}

/* A Q8_0 block's products with a: |q| unsigned against a with q's sign, the same products. */
AVX2 static inline __m256i q8_products(__m256i q, __m256i a)
{
    return products(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
}

AVX2 static void row_q8_0(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        const __m256 d = halves(w + j0 * 34, 34, nb);
        __m256i p[8];
        if (nc == 1) { /* a decode step: each block's codes used once, straight away */
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++) {
                const int64_t j = j0 + (b < nb ? b : 0);
                p[b] = q8_products(_mm256_loadu_si256((const __m256i *)(w + j * 34 + 2)),
                                   _mm256_loadu_si256((const __m256i *)(a + j * 32)));
            }
            const __m256 xd = floats(d_of(a, k) + j0, nb);
            acc[0] = add_lanes(acc[0], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(hsum8(p))), nb); /* d * x.d * s */
            continue;
        }
        __m256i q[8];
#pragma GCC unroll 8
        for (int b = 0; b < 8; b++)
            q[b] = _mm256_loadu_si256((const __m256i *)(w + (j0 + (b < nb ? b : 0)) * 34 + 2));
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++)
                p[b] = q8_products(q[b], _mm256_loadu_si256((const __m256i *)(ac + (j0 + (b < nb ? b : 0)) * 32)));
            const __m256 xd = floats(d_of(ac, k) + j0, nb);
            acc[c] = add_lanes(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(hsum8(p))), nb);
        }
    }
    COLS out[c] = finish(acc[c]);
}

/* Q4_K/Q5_K: a superblock's eight sub-blocks are the eight lanes. */
AVX2 static void row_kx(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                        float *out)
{
    const int bytes = t == TYPE_Q4_K ? 144 : 176;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        const uint8_t *blk = w + sb0 * bytes, *qh = blk + 16, *qs = blk + (t == TYPE_Q4_K ? 16 : 48);
        uint8_t sc8[8], mn8[8];
        k_scales_unpack(blk + 4, sc8, mn8);
        const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc8))));
        const __m256 dmn = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn8))));
        const __m256i high = t == TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        __m256i q[8];
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * (sb / 2)));
            q[sb] = _mm256_and_si256(sb % 2 ? _mm256_srli_epi16(raw, 4) : raw, m4);
            if (t == TYPE_Q5_K) { /* bit sb of qh[l] is code l's fifth bit */
                const __m256i bit = _mm256_set1_epi8((char)(1 << sb));
                q[sb] = _mm256_or_si256(q[sb], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bit), bit),
                                                                _mm256_set1_epi8(0x10)));
            }
        }
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            __m256i p[8];
#pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++)
                p[sb] = products(q[sb], _mm256_loadu_si256((const __m256i *)(ac + (sb0 * 8 + sb) * 32)));
            const __m256 s = _mm256_cvtepi32_ps(hsum8(p));
            const __m256 xd = _mm256_loadu_ps(d_of(ac, k) + sb0 * 8), xs = _mm256_loadu_ps(s_of(ac, k) + sb0 * 8);
            /* d * sc * x.d * s - dmin * mn * x.s */
            acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dsc, xd), s), _mm256_mul_ps(dmn, xs)));
        }
    }
    COLS out[c] = finish(acc[c]);
}

AVX2 static void row_q6_k(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), c32 = _mm256_set1_epi8(32);
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        const uint8_t *blk = w + sb0 * 210, *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const __m256 d = _mm256_set1_ps(load_f16(blk + 208));
        __m256i q[8], scale[8];
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            /* element 32 sb + l: low bits in ql[64 h + 32 (sb % 2) + l] >> 4 ((sb % 4) / 2), high in qh[32 h + l] >> 2 (sb % 4) */
            const __m256i lo = _mm256_loadu_si256((const __m256i *)(ql + 64 * (sb / 4) + 32 * (sb % 2)));
            const __m256i hi = _mm256_loadu_si256((const __m256i *)(qh + 32 * (sb / 4)));
            q[sb] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * ((sb % 4) / 2))), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * (sb % 4))), m2), 4));
            /* the first 16 codes' partial sums are lanes 0..3, the second's 4..7 */
            scale[sb] = _mm256_setr_epi32(sc[2 * sb], sc[2 * sb], sc[2 * sb], sc[2 * sb], sc[2 * sb + 1], sc[2 * sb + 1],
                                          sc[2 * sb + 1], sc[2 * sb + 1]);
        }
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            __m256i p[8];
#pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(ac + (sb0 * 8 + sb) * 32));
                /* (q - 32) a in pairs, then each half times its scale: sc0 s0 + sc1 s1 once summed */
                const __m256i pairs = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q[sb], x), _mm256_maddubs_epi16(c32, x)),
                                                        _mm256_set1_epi16(1));
                p[sb] = _mm256_mullo_epi32(pairs, scale[sb]);
            }
            const __m256 s = _mm256_cvtepi32_ps(hsum8(p)), xd = _mm256_loadu_ps(d_of(ac, k) + sb0 * 8);
            acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), s)); /* d * x.d * (sc0 s0 + sc1 s1) */
        }
    }
    COLS out[c] = finish(acc[c]);
}

static bool have_avx2(void)
{
    static int known = -1; /* threads that race here store the same value */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

static bool vector_row(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    if (!have_avx2())
        return false;
    switch (t) {
    case TYPE_Q8_0: row_q8_0(w, a, col, nc, k, out); break;
    case TYPE_Q4_K: case TYPE_Q5_K: row_kx(t, w, a, col, nc, k, out); break;
    case TYPE_Q6_K: row_q6_k(w, a, col, nc, k, out); break;
    default: row_legacy(t, w, a, col, nc, k, out); break;
    }
    return true;
}

const char *cpu_qdot_unit(void) { return have_avx2() ? "avx2" : "scalar"; }

#else

static bool vector_row(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    (void)t, (void)w, (void)a, (void)col, (void)nc, (void)k, (void)out;
    return false;
}

const char *cpu_qdot_unit(void) { return "scalar"; }

#endif

int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out)
{
    if (!cpu_qdot_takes(t) || nc < 1 || nc > CPU_QDOT_COLS || k % 32)
        return -1;
    if (!vector_row(t, w, a, col_bytes, nc, k, out))
        for (int c = 0; c < nc; c++)
            out[c] = row_terms(t, w, (const uint8_t *)a + (size_t)c * col_bytes, k);
    return 0;
}

int cpu_qdot(enum tensor_type t, const void *w, const void *a, int64_t k, float *out)
{
    return cpu_qdot_cols(t, w, a, 0, 1, k, out);
}

float cpu_qdot_reference(enum tensor_type t, const void *w, const void *a, int64_t k)
{
    return row_terms(t, w, a, k);
}
