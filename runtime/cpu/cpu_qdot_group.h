/* cpu_qdot_group.h: the fast path's row kernels for a prompt's full group
 * of CPU_QDOT_COLS columns, their activations grouped (cpu_q8_quantize:
 * each 32-byte row holds the same four codes of eight blocks), included by
 * cpu_qdot.c after cpu_qdot_rows.h, with the same macros. Eight blocks at
 * a time: their codes are unpacked and transposed once for all the columns
 * (transpose8: vector t holds the t-th four codes of each block), so eight
 * QD_ACCs into one register leave block b's whole integer sum in lane b,
 * with no horizontal adds; the float terms are the same as cpu_qdot_rows.h's. */

/* s[c] lane b: block b's integer sum for column c over code rows t0 .. t1 - 1
 * (activations a, col bytes apart; the group at block j0). With QD_REGS32
 * (AVX-512VL's 32 vector registers) the columns' products are interleaved:
 * eight independent accumulator chains in flight rather than one, which
 * the scheduler could not find across the columns' whole sequences.
 * Without (the AVX2 unit, whose QD_ACC is three operations), up to k16 rows'
 * pair sums are added as int16 before one widening: codes below 2^b give
 * pair sums of at most 2 (2^b - 1) 127, so k16 = 8 for 4-bit codes, 4 for
 * 5-bit, 2 for 6-bit stays below 32767: the same integers. */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(group_sums_cols, QD_UNIT)(const __m256i qt[8], const uint8_t *a, size_t col,
                                                                           int nc, int64_t j0, int t0, int t1, int k16,
                                                                           __m256i s[CPU_QDOT_COLS])
{
#pragma GCC unroll 8
    COLS s[c] = _mm256_setzero_si256();
    if (QD_REGS32) {
#pragma GCC unroll 8
        for (int t = t0; t < t1; t++) {
#pragma GCC unroll 8
            COLS s[c] = QD_ACC(s[c], qt[t], _mm256_loadu_si256((const __m256i *)(group_of(a + (size_t)c * col, j0) + 32 * t)));
        }
    } else {
#pragma GCC unroll 8
        COLS {
            const uint8_t *ag = group_of(a + (size_t)c * col, j0);
#pragma GCC unroll 8
            for (int t = t0; t < t1; t += k16) {
                __m256i w = _mm256_maddubs_epi16(qt[t], _mm256_loadu_si256((const __m256i *)(ag + 32 * t)));
                const int te = t + k16 < t1 ? t + k16 : t1;
#pragma GCC unroll 8
                for (int u = t + 1; u < te; u++)
                    w = _mm256_add_epi16(w, _mm256_maddubs_epi16(qt[u], _mm256_loadu_si256((const __m256i *)(ag + 32 * u))));
                s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(w, _mm256_set1_epi16(1)));
            }
        }
    }
}

/* Legacy types: blocks j0 .. j0 + nb - 1 (nb <= 8; the missing ones
 * repeat block j0 and their lanes are not added) against the columns. */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(legacy_blocks8, QD_UNIT)(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col,
                                                                          int nc, int64_t k, int64_t j0, int nb, __m256 acc[CPU_QDOT_COLS])
{
    const int bytes = t == TYPE_Q4_0 ? 18 : t == TYPE_Q4_1 ? 20 : t == TYPE_Q5_0 ? 22 : 24;
    const bool has_m = t == TYPE_Q4_1 || t == TYPE_Q5_1;
    const __m256 d = halves(w + j0 * bytes, bytes, nb), m = has_m ? halves(w + j0 * bytes + 2, bytes, nb) : _mm256_setzero_ps();
    __m256i q[8];
#pragma GCC unroll 8
    for (int b = 0; b < 8; b++)
        q[b] = QD_CAT(legacy_codes, QD_UNIT)(t, w + (j0 + (b < nb ? b : 0)) * bytes);
    transpose8(q);
    __m256i s[CPU_QDOT_COLS];
    QD_CAT(group_sums_cols, QD_UNIT)(q, a, col, nc, j0, 0, 8, t == TYPE_Q4_0 || t == TYPE_Q4_1 ? 8 : 4, s);
#pragma GCC unroll 8
    COLS {
        const uint8_t *ac = a + (size_t)c * col;
        acc[c] = add_lanes(acc[c], QD_CAT(legacy_terms, QD_UNIT)(t, d, m, s[c], floats(d_of(ac, k) + j0, nb), floats(s_of(ac, k) + j0, nb)), nb);
    }
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(legacy_group, QD_UNIT)(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col,
                                                                        int nc, int64_t k, float *out)
{
    __m256 acc[CPU_QDOT_COLS];
#pragma GCC unroll 8
    COLS acc[c] = _mm256_setzero_ps();
    int64_t j0 = 0;
    for (; j0 + 8 <= k / 32; j0 += 8)
        QD_CAT(legacy_blocks8, QD_UNIT)(t, w, a, col, nc, k, j0, 8, acc);
    if (j0 < k / 32)
        QD_CAT(legacy_blocks8, QD_UNIT)(t, w, a, col, nc, k, j0, (int)(k / 32 - j0), acc);
#pragma GCC unroll 8
    COLS out[c] = finish(acc[c]);
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(q8_0_group, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                                                                      float *out)
{
    __m256 acc[CPU_QDOT_COLS];
#pragma GCC unroll 8
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        const __m256 d = halves(w + j0 * 34, 34, nb);
        __m256i q[8], u[8];
#pragma GCC unroll 8
        for (int b = 0; b < 8; b++)
            q[b] = _mm256_loadu_si256((const __m256i *)(w + (j0 + (b < nb ? b : 0)) * 34 + 2));
        transpose8(q);
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++)
            u[t] = _mm256_sign_epi8(q[t], q[t]); /* |q| unsigned, against a with q's sign: the same products */
#pragma GCC unroll 8
        COLS {
            const uint8_t *ac = a + (size_t)c * col, *ag = group_of(ac, j0);
            __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++)
                s = QD_ACC(s, u[t], _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ag + 32 * t)), q[t]));
            const __m256 xd = floats(d_of(ac, k) + j0, nb);
            acc[c] = add_lanes(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(s)), nb); /* d * x.d * s */
        }
    }
#pragma GCC unroll 8
    COLS out[c] = finish(acc[c]);
}

/* Q4_K/Q5_K: a superblock's eight sub-blocks are the eight lanes. */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(kx_group, QD_UNIT)(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col,
                                                                    int nc, int64_t k, float *out)
{
    const int bytes = t == TYPE_Q4_K ? 144 : 176;
    __m256 acc[CPU_QDOT_COLS];
#pragma GCC unroll 8
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        __m256i q[8];
        __m256 dsc, dmn;
        QD_CAT(kx_unpack, QD_UNIT)(t, w + sb0 * bytes, q, &dsc, &dmn);
        transpose8(q);
        __m256i si[CPU_QDOT_COLS];
        QD_CAT(group_sums_cols, QD_UNIT)(q, a, col, nc, sb0 * 8, 0, 8, t == TYPE_Q4_K ? 8 : 4, si);
#pragma GCC unroll 8
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            const __m256 s = _mm256_cvtepi32_ps(si[c]);
            const __m256 xd = _mm256_loadu_ps(d_of(ac, k) + sb0 * 8), xs = _mm256_loadu_ps(s_of(ac, k) + sb0 * 8);
            /* d * sc * x.d * s - dmin * mn * x.s */
            acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dsc, xd), s), _mm256_mul_ps(dmn, xs)));
        }
    }
#pragma GCC unroll 8
    COLS out[c] = finish(acc[c]);
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(q6_k_group, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                                                                      float *out)
{
    __m256 acc[CPU_QDOT_COLS];
#pragma GCC unroll 8
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        const uint8_t *blk = w + sb0 * 210;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const __m256 d = _mm256_set1_ps(load_f16(blk + 208));
        /* lane b: sub-block b's two scales, of its first and second 16 codes */
        const __m256i sc_lo = _mm256_setr_epi32(sc[0], sc[2], sc[4], sc[6], sc[8], sc[10], sc[12], sc[14]);
        const __m256i sc_hi = _mm256_setr_epi32(sc[1], sc[3], sc[5], sc[7], sc[9], sc[11], sc[13], sc[15]);
        __m256i q[8];
        QD_CAT(q6_k_unpack, QD_UNIT)(blk, q);
        transpose8(q);
        /* (q - 32) a as q a - 32 a, over each sub-block's first 16 codes (t < 4) and its second; 32 a from h_of */
        __m256i lo[CPU_QDOT_COLS], hi[CPU_QDOT_COLS];
        QD_CAT(group_sums_cols, QD_UNIT)(q, a, col, nc, sb0 * 8, 0, 4, 2, lo);
        QD_CAT(group_sums_cols, QD_UNIT)(q, a, col, nc, sb0 * 8, 4, 8, 2, hi);
#pragma GCC unroll 8
        COLS {
            const int32_t *h = h_of(a + (size_t)c * col, k) + sb0 * 8;
            const __m256i h0 = _mm256_sub_epi32(lo[c], _mm256_loadu_si256((const __m256i *)h));
            const __m256i h1 = _mm256_sub_epi32(hi[c], _mm256_loadu_si256((const __m256i *)(h + k / 32)));
            const __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(h0, sc_lo), _mm256_mullo_epi32(h1, sc_hi));
            const __m256 xd = _mm256_loadu_ps(d_of(a + (size_t)c * col, k) + sb0 * 8);
            acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(s))); /* d * x.d * (sc0 s0 + sc1 s1) */
        }
    }
#pragma GCC unroll 8
    COLS out[c] = finish(acc[c]);
}

/* The kernels with the type fixed (QD_KERNELS) and the column count a
 * constant: the column loops unroll and the accumulators stay in registers. */
#define QD_GROUP(NAME, FAMILY, ...) \
    QD_TARGET static void QD_CAT(group_##NAME, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int64_t k, float *out) \
    { \
        QD_CAT(FAMILY##_group, QD_UNIT)(__VA_ARGS__ w, a, col, CPU_QDOT_COLS, k, out); \
    }
QD_KERNELS(QD_GROUP)
#undef QD_GROUP
