/* cpu_qdot.c: a weight row in its GGUF layout against Q8_1 activations on
 * the CPU's vector unit (see cpu_qdot.h). Eight blocks at a time: each
 * block's code products are summed as integers (AVX2 u8 x s8 maddubs and
 * madd, or VNNI vpdpbusd), block b's sum in lane b: the activations hold
 * the same four codes of eight blocks in each 32-byte row and the weight
 * codes are transposed to match (exact in any order), the eight
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

/* The split layout: the codes (their bytes rounded up to 256), then the
 * n / 32 scales d, then the n / 32 sums s. The codes are in block order,
 * or grouped: in groups of eight blocks, the first four codes of each of
 * the eight, then the next four of each, ... (one 32-byte row holds the
 * same four codes of eight blocks); the last group padded with zeros. */
static size_t codes_bytes(int64_t n) { return ((size_t)n + 255) / 256 * 256; }

size_t cpu_q8_bytes(int64_t n) { return codes_bytes(n) + (size_t)(n / 32) * (2 * sizeof(float) + 2 * sizeof(int32_t)); }

/* Where code i of block j is. */
static size_t code_at(int64_t j, int i, bool grouped)
{
    return grouped ? (size_t)(j / 8) * 256 + (size_t)(i / 4) * 32 + (size_t)(j % 8) * 4 + (size_t)(i % 4) : (size_t)(j * 32 + i);
}

static const uint8_t *group_of(const uint8_t *a, int64_t j0) { return a + (size_t)j0 * 32; } /* j0 a multiple of 8 */
static const float *d_of(const uint8_t *a, int64_t n) { return (const float *)(a + codes_bytes(n)); }
static const float *s_of(const uint8_t *a, int64_t n) { return (const float *)(a + codes_bytes(n)) + n / 32; }
/* 32 times the sum of each block's first 16 codes (n / 32 of them), then of its last 16: Q6_K's -32 offset */
static const int32_t *h_of(const uint8_t *a, int64_t n) { return (const int32_t *)(s_of(a, n) + n / 32); }

static bool vector_quantize(const float *x, int64_t n, uint8_t *out, bool grouped);

void cpu_q8_quantize(const float *x, int64_t n, void *out, bool grouped)
{
    if (vector_quantize(x, n, out, grouped))
        return;
    uint8_t *o = out, blk[36];
    float *d = (float *)(o + codes_bytes(n)), *s = d + n / 32;
    int32_t *h = (int32_t *)(s + n / 32);
    memset(o, 0, codes_bytes(n));
    for (int64_t b = 0; b < n / 32; b++) {
        quant_q8_1(x + b * 32, blk, 32);
        int32_t half[2] = { 0, 0 };
        for (int i = 0; i < 32; i++) {
            o[code_at(b, i, grouped)] = blk[4 + i];
            half[i / 16] += (int8_t)blk[4 + i];
        }
        d[b] = load_f16(blk);
        s[b] = load_f16(blk + 2);
        h[b] = 32 * half[0], h[n / 32 + b] = 32 * half[1];
    }
}

/* Block j of the split activations as a standard Q8_1 block (for quant_dot.c). */
static void q8_1_block_of(const uint8_t *a, int64_t n, int64_t j, bool grouped, uint8_t out[36])
{
    store_f16(out, d_of(a, n)[j]); /* widened from f16: narrowing back is exact */
    store_f16(out + 2, s_of(a, n)[j]);
    for (int i = 0; i < 32; i++)
        out[4 + i] = a[code_at(j, i, grouped)];
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
static float row_terms(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t k, bool grouped)
{
    const struct type_info *ti = type_info(t);
    float lanes[8] = { 0 };
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        uint8_t blocks[8 * 36];
        float terms[8];
        for (int b = 0; b < nb; b++)
            q8_1_block_of(a, k, j0 + b, grouped, blocks + b * 36);
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

/* An 8 x 8 transpose of int32 lanes: afterwards v[t] lane b is what v[b]
 * lane t was (eight blocks' codes, four at a time, as the activations are
 * laid out). */
AVX2 static inline void transpose8(__m256i v[8])
{
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);     /* a0 b0 c0 d0 | a4 b4 c4 d4 */
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]); /* a1 .. d1 | a5 .. d5 */
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
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

/* n (at most 8) floats from p, the rest 0 (a masked load: nothing past p + n is touched). */
AVX2 static inline __m256 floats(const float *p, int n)
{
    if (n == 8)
        return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
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

#define COLS for (int c = 0; c < nc; c++)

/* The types with kernels, as the row headers make them: (name, kernel
 * family, the family's type argument if it takes one). */
#define QD_KERNELS(X) \
    X(q4_0, legacy, TYPE_Q4_0, ) X(q4_1, legacy, TYPE_Q4_1, ) X(q5_0, legacy, TYPE_Q5_0, ) X(q5_1, legacy, TYPE_Q5_1, ) \
    X(q8_0, q8_0) X(q4_k, kx, TYPE_Q4_K, ) X(q5_k, kx, TYPE_Q5_K, ) X(q6_k, q6_k)
#define QD_CAT2(a, b) a##_##b
#define QD_CAT(a, b) QD_CAT2(a, b)

/* The row kernels twice: with AVX2's maddubs and madd (u8 x s8 pairs inside
 * int16, then int32), and with AVX-512 VNNI's vpdpbusd (four products
 * straight into int32) where the processor has it: the same integer sums,
 * so the same bits. */
#define QD_UNIT avx2
#define QD_TARGET AVX2
#define QD_ACC(s, u, a) _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)))
#define QD_FIFTH(p) fifth_bits(p)
#define QD_NIBBLES(p) nibbles(p)
#define QD_REGS32 0
#include "cpu/cpu_qdot_rows.h"
#include "cpu/cpu_qdot_group.h"
#undef QD_UNIT
#undef QD_TARGET
#undef QD_ACC
#undef QD_FIFTH
#undef QD_NIBBLES
#undef QD_REGS32

#define VNNI __attribute__((target("avx2,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

/* fifth_bits with AVX-512BW: the word is the byte mask itself. */
VNNI static inline __m256i fifth_bits_bw(const uint8_t *p)
{
    uint32_t h;
    memcpy(&h, p, 4);
    return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(0x10));
}

/* nibbles with AVX-512BW: the 16 bytes in both halves, the upper half's
 * words shifted by 4, then one mask (three operations instead of five). */
VNNI static inline __m256i nibbles_bw(const uint8_t *p)
{
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    const __m256i by = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    return _mm256_and_si256(_mm256_srlv_epi16(b, by), _mm256_set1_epi8(0x0f));
}

#define QD_UNIT vnni
#define QD_TARGET VNNI
#define QD_ACC(s, u, a) _mm256_dpbusd_epi32(s, u, a)
#define QD_FIFTH(p) fifth_bits_bw(p)
#define QD_NIBBLES(p) nibbles_bw(p)
#define QD_REGS32 1
#include "cpu/cpu_qdot_rows.h"
#include "cpu/cpu_qdot_group.h"
#undef QD_UNIT
#undef QD_TARGET
#undef QD_ACC
#undef QD_FIFTH
#undef QD_NIBBLES
#undef QD_REGS32

enum unit { SCALAR, UNIT_AVX2, UNIT_VNNI };
static const char *const unit_names[] = { "scalar", "avx2", "avx512-vnni" };

/* The best unit here, found once. */
static int best_unit(void)
{
    static int known = -1; /* threads that race here store the same value */
    int u = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (u < 0) {
        __builtin_cpu_init();
        u = !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) ? SCALAR
            : __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")
                ? UNIT_VNNI
                                                                                           : UNIT_AVX2;
        __atomic_store_n(&known, u, __ATOMIC_RELAXED);
    }
    return u;
}

static int chosen = -1; /* cpu_qdot_use's choice, else the best */

static int unit(void)
{
    int u = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    return u >= 0 ? u : best_unit();
}

/* The sum of v's eight lanes (integers: exact in any order). */
AVX2 static inline int32_t hsum_epi32(__m256i v)
{
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* quant_q8_1's block, eight lanes at a time: the same amax (a max is exact
 * in any order; a NaN is passed over as the scalar comparison does), the
 * same d and 1/d (scalar), each product rounded once, half away from zero
 * as quant_legacy.c's round_half_away (truncate, then the exact fraction
 * against 1/2), the same integer sum: the same bytes. */
AVX2 static void q8_quantize_avx2(const float *x, int64_t n, uint8_t *o, bool grouped)
{
    float *d = (float *)(o + codes_bytes(n)), *s = d + n / 32;
    int32_t *h = (int32_t *)(s + n / 32);
    memset(o, 0, codes_bytes(n));
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
    for (int64_t b = 0; b < n / 32; b++) {
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int u = 0; u < 4; u++) {
            v[u] = _mm256_loadu_ps(x + b * 32 + 8 * u);
            amax = _mm256_max_ps(_mm256_andnot_ps(sign, v[u]), amax); /* a NaN lane keeps amax */
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float dq = _mm_cvtss_f32(m4) / 127, id = dq != 0 ? 1.0f / dq : 0.0f;
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int u = 0; u < 4; u++) {
            const __m256 p = _mm256_mul_ps(v[u], idv);
            const __m256i i = _mm256_cvttps_epi32(p);
            const __m256 r = _mm256_sub_ps(p, _mm256_cvtepi32_ps(i)); /* exact */
            q[u] = _mm256_add_epi32(_mm256_sub_epi32(i, _mm256_castps_si256(_mm256_cmp_ps(r, half, _CMP_GE_OQ))),
                                    _mm256_castps_si256(_mm256_cmp_ps(r, mhalf, _CMP_LE_OQ)));
            sum = _mm256_add_epi32(sum, q[u]);
        }
        /* int32 -> int8 in order: the packs interleave 128-bit halves, the permute restores them */
        const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
        const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        if (grouped) {
            uint32_t words[8];
            _mm256_storeu_si256((__m256i *)words, bytes);
            for (int t = 0; t < 8; t++) /* codes 4t .. 4t + 3 of block b: row t of its group, lane b % 8 */
                memcpy(o + code_at(b, 4 * t, true), &words[t], 4);
        } else {
            _mm256_storeu_si256((__m256i *)(o + b * 32), bytes);
        }
        /* d and s as quant_q8_1 stores them (f16), widened back exactly */
        d[b] = f16_to_f32(f32_to_f16(dq));
        s[b] = f16_to_f32(f32_to_f16(dq * (float)hsum_epi32(sum)));
        h[b] = 32 * hsum_epi32(_mm256_add_epi32(q[0], q[1])), h[n / 32 + b] = 32 * hsum_epi32(_mm256_add_epi32(q[2], q[3]));
    }
}

static bool vector_quantize(const float *x, int64_t n, uint8_t *out, bool grouped)
{
    if (unit() == SCALAR)
        return false;
    q8_quantize_avx2(x, n, out, grouped);
    return true;
}

int cpu_qdot_use(const char *name)
{
    if (strcmp(name, "best") == 0) {
        __atomic_store_n(&chosen, -1, __ATOMIC_RELAXED);
        return 0;
    }
    for (int u = SCALAR; u <= UNIT_VNNI; u++)
        if (strcmp(name, unit_names[u]) == 0 && u <= best_unit()) {
            __atomic_store_n(&chosen, u, __ATOMIC_RELAXED);
            return 0;
        }
    return -1;
}

static bool vector_row(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    const int u = unit();
    if (u == SCALAR)
        return false;
    const bool vnni = u == UNIT_VNNI;
#define QD_PICK(NAME) (vnni ? NAME##_vnni : NAME##_avx2)
    if (nc == CPU_QDOT_COLS) { /* a prompt's full group, its columns grouped */
        switch (t) {
        case TYPE_Q4_0: QD_PICK(group_q4_0)(w, a, col, k, out); break;
        case TYPE_Q4_1: QD_PICK(group_q4_1)(w, a, col, k, out); break;
        case TYPE_Q5_0: QD_PICK(group_q5_0)(w, a, col, k, out); break;
        case TYPE_Q5_1: QD_PICK(group_q5_1)(w, a, col, k, out); break;
        case TYPE_Q8_0: QD_PICK(group_q8_0)(w, a, col, k, out); break;
        case TYPE_Q4_K: QD_PICK(group_q4_k)(w, a, col, k, out); break;
        case TYPE_Q5_K: QD_PICK(group_q5_k)(w, a, col, k, out); break;
        default: QD_PICK(group_q6_k)(w, a, col, k, out); break;
        }
        return true;
    }
    switch (t) {
    case TYPE_Q4_0: QD_PICK(row_q4_0)(w, a, col, nc, k, out); break;
    case TYPE_Q4_1: QD_PICK(row_q4_1)(w, a, col, nc, k, out); break;
    case TYPE_Q5_0: QD_PICK(row_q5_0)(w, a, col, nc, k, out); break;
    case TYPE_Q5_1: QD_PICK(row_q5_1)(w, a, col, nc, k, out); break;
    case TYPE_Q8_0: QD_PICK(row_q8_0)(w, a, col, nc, k, out); break;
    case TYPE_Q4_K: QD_PICK(row_q4_k)(w, a, col, nc, k, out); break;
    case TYPE_Q5_K: QD_PICK(row_q5_k)(w, a, col, nc, k, out); break;
    default: QD_PICK(row_q6_k)(w, a, col, nc, k, out); break;
    }
#undef QD_PICK
    return true;
}

const char *cpu_qdot_unit(void) { return unit_names[unit()]; }

#else

static bool vector_row(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    (void)t, (void)w, (void)a, (void)col, (void)nc, (void)k, (void)out;
    return false;
}

static bool vector_quantize(const float *x, int64_t n, uint8_t *out, bool grouped)
{
    (void)x, (void)n, (void)out, (void)grouped;
    return false;
}

int cpu_qdot_use(const char *name) { return strcmp(name, "scalar") == 0 || strcmp(name, "best") == 0 ? 0 : -1; }

const char *cpu_qdot_unit(void) { return "scalar"; }

#endif

int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out)
{
    if (!cpu_qdot_takes(t) || nc < 1 || nc > CPU_QDOT_COLS || k % 32)
        return -1;
    if (!vector_row(t, w, a, col_bytes, nc, k, out))
        for (int c = 0; c < nc; c++)
            out[c] = row_terms(t, w, (const uint8_t *)a + (size_t)c * col_bytes, k, nc == CPU_QDOT_COLS);
    return 0;
}

int cpu_qdot(enum tensor_type t, const void *w, const void *a, int64_t k, float *out)
{
    return cpu_qdot_cols(t, w, a, 0, 1, k, out);
}

float cpu_qdot_reference(enum tensor_type t, const void *w, const void *a, int64_t k, bool grouped)
{
    return row_terms(t, w, a, k, grouped);
}
