/* cpu_qdot.c: a weight row in its GGUF layout against Q8_1 activations on
 * the CPU's vector unit (see cpu_qdot.h). Each 32-element block's code
 * products are summed as integers with AVX2 (exact in any order: u8 x s8
 * pairs stay inside int16, maddubs then madd), and the float term of each
 * block is quant_dot.c's expression, added left to right; so a row's result
 * is dot_q8_1's, bit for bit, on every machine. Without AVX2 the row goes
 * to dot_q8_1 itself. */
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

AVX2 static inline float half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The 32 activation codes of Q8_1 block j, and its d and s. */
struct act {
    __m256i q;
    float d, s;
};

AVX2 static inline struct act act_at(const uint8_t *a, int64_t j)
{
    const uint8_t *p = a + j * 36;
    return (struct act){ _mm256_loadu_si256((const __m256i *)(p + 4)), half(p), half(p + 2) };
}

/* The sum of u[i] * a[i] over 32 bytes: u unsigned (at most 127), a signed. */
AVX2 static inline int32_t usum(__m256i u, __m256i a)
{
    const __m256i pairs = _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
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

/* Each function below: one row against nc (at most CPU_QDOT_COLS) columns
 * of activations, a column's blocks col bytes apart from the last; the
 * row's codes are unpacked once per block for all of them, and each
 * column's sum runs in the single-column order. */
#define COLS for (int c = 0; c < nc; c++)

AVX2 static void row_legacy(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                            float *sum)
{
    const int bytes = t == TYPE_Q4_0 ? 18 : t == TYPE_Q4_1 ? 20 : t == TYPE_Q5_0 ? 22 : 24;
    const int qs = t == TYPE_Q4_0 ? 2 : t == TYPE_Q4_1 ? 4 : t == TYPE_Q5_0 ? 6 : 8;
    COLS sum[c] = 0;
    for (int64_t j = 0; j < k / 32; j++) {
        const uint8_t *blk = w + j * bytes;
        __m256i q = nibbles(blk + qs);
        if (t == TYPE_Q5_0 || t == TYPE_Q5_1)
            q = _mm256_or_si256(q, fifth_bits(blk + (t == TYPE_Q5_0 ? 2 : 4)));
        const float d = half(blk), m = t == TYPE_Q4_1 || t == TYPE_Q5_1 ? half(blk + 2) : 0.0f;
        COLS {
            const struct act x = act_at(a + (size_t)c * col, j);
            const int32_t si = usum(q, x.q);
            if (t == TYPE_Q4_0)
                sum[c] += d * (x.d * (float)si - 8.0f * x.s);
            else if (t == TYPE_Q5_0)
                sum[c] += d * (x.d * (float)si - 16.0f * x.s);
            else
                sum[c] += d * x.d * (float)si + m * x.s;
        }
    }
}

AVX2 static void row_q8_0(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *sum)
{
    COLS sum[c] = 0;
    for (int64_t j = 0; j < k / 32; j++) {
        const uint8_t *blk = w + j * 34;
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2)), uq = _mm256_sign_epi8(q, q);
        const float d = half(blk);
        COLS {
            const struct act x = act_at(a + (size_t)c * col, j);
            /* |q| unsigned against a with q's sign: the same products */
            const int32_t si = usum(uq, _mm256_sign_epi8(x.q, q));
            sum[c] += d * x.d * (float)si;
        }
    }
}

AVX2 static void row_kx(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                        float *sum)
{
    const int bytes = t == TYPE_Q4_K ? 144 : 176;
    COLS sum[c] = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = w + b * bytes, *qh = blk + 16, *qs = blk + (t == TYPE_Q4_K ? 16 : 48);
        const float d = half(blk), dmin = half(blk + 2);
        uint8_t sc[8], mn[8];
        k_scales_unpack(blk + 4, sc, mn);
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        const __m256i high = t == TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
        for (int sb = 0; sb < 8; sb++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * (sb / 2)));
            __m256i q = _mm256_and_si256(sb % 2 ? _mm256_srli_epi16(raw, 4) : raw, m4);
            if (t == TYPE_Q5_K) { /* bit sb of qh[l] is code l's fifth bit */
                const __m256i bit = _mm256_set1_epi8((char)(1 << sb));
                q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bit), bit),
                                                        _mm256_set1_epi8(0x10)));
            }
            COLS {
                const struct act x = act_at(a + (size_t)c * col, b * 8 + sb);
                const int32_t si = usum(q, x.q);
                sum[c] += d * (float)sc[sb] * x.d * (float)si - dmin * (float)mn[sb] * x.s;
            }
        }
    }
}

AVX2 static void row_q6_k(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *sum)
{
    COLS sum[c] = 0;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), c32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = w + b * 210, *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const float d = half(blk + 208);
        for (int sb = 0; sb < 8; sb++) {
            /* element 32 sb + l: low bits in ql[64 h + 32 (sb % 2) + l] >> 4 ((sb % 4) / 2), high in qh[32 h + l] >> 2 (sb % 4) */
            const __m256i lo = _mm256_loadu_si256((const __m256i *)(ql + 64 * (sb / 4) + 32 * (sb % 2)));
            const __m256i hi = _mm256_loadu_si256((const __m256i *)(qh + 32 * (sb / 4)));
            const __m256i q = _mm256_or_si256(
                _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * ((sb % 4) / 2))), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * (sb % 4))), m2), 4));
            COLS {
                const struct act x = act_at(a + (size_t)c * col, b * 8 + sb);
                /* (q - 32) a in pairs: q a - 32 a, each inside int16 */
                const __m256i pairs = _mm256_madd_epi16(
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q, x.q), _mm256_maddubs_epi16(c32, x.q)), _mm256_set1_epi16(1));
                __m128i h0 = _mm256_castsi256_si128(pairs), h1 = _mm256_extracti128_si256(pairs, 1);
                h0 = _mm_add_epi32(h0, _mm_shuffle_epi32(h0, 0x4e));
                h0 = _mm_add_epi32(h0, _mm_shuffle_epi32(h0, 0xb1));
                h1 = _mm_add_epi32(h1, _mm_shuffle_epi32(h1, 0x4e));
                h1 = _mm_add_epi32(h1, _mm_shuffle_epi32(h1, 0xb1));
                const int s0 = _mm_cvtsi128_si32(h0), s1 = _mm_cvtsi128_si32(h1);
                sum[c] += d * x.d * (float)(sc[2 * sb] * s0 + sc[2 * sb + 1] * s1);
            }
        }
    }
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

int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out)
{
    if (!cpu_qdot_takes(t) || nc < 1 || nc > CPU_QDOT_COLS)
        return -1;
    if (!have_avx2()) {
        for (int c = 0; c < nc; c++)
            dot_q8_1(t, w, (const uint8_t *)a + (size_t)c * col_bytes, k, &out[c]);
        return 0;
    }
    switch (t) {
    case TYPE_Q8_0: row_q8_0(w, a, col_bytes, nc, k, out); break;
    case TYPE_Q4_K: case TYPE_Q5_K: row_kx(t, w, a, col_bytes, nc, k, out); break;
    case TYPE_Q6_K: row_q6_k(w, a, col_bytes, nc, k, out); break;
    default: row_legacy(t, w, a, col_bytes, nc, k, out); break;
    }
    return 0;
}

const char *cpu_qdot_unit(void) { return have_avx2() ? "avx2" : "scalar"; }

#else

int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out)
{
    if (!cpu_qdot_takes(t) || nc < 1 || nc > CPU_QDOT_COLS)
        return -1;
    for (int c = 0; c < nc; c++)
        dot_q8_1(t, w, (const uint8_t *)a + (size_t)c * col_bytes, k, &out[c]);
    return 0;
}

const char *cpu_qdot_unit(void) { return "scalar"; }

#endif

int cpu_qdot(enum tensor_type t, const void *w, const void *a, int64_t k, float *out)
{
    return cpu_qdot_cols(t, w, a, 0, 1, k, out);
}
