/* cpu_qdot_rows.h: the fast path's row kernels for activations in block
 * order (a decode step's column, or a prompt's last few), included by
 * cpu_qdot.c once per vector unit with QD_UNIT (the name suffix), QD_TARGET
 * (the function attribute), QD_ACC(s, u, a) (s plus the products of u's
 * unsigned and a's signed bytes, four adjacent ones summed into each int32
 * lane, exact) and QD_FIFTH(p) (0x10 in byte i where bit i of the word at p
 * is set) defined. Each function: one row against nc (fewer than
 * CPU_QDOT_COLS) columns of activations, col bytes apart, eight blocks at a
 * time, each block's products summed across lanes (hsum8) into lane b. */

#define QD_PRODUCTS(u, a) QD_ACC(_mm256_setzero_si256(), u, a)


/* The 32 codes of a legacy block (before any offset). */
QD_TARGET static inline __m256i QD_CAT(legacy_codes, QD_UNIT)(enum tensor_type t, const uint8_t *blk)
{
    __m256i q = QD_NIBBLES(blk + (t == TYPE_Q4_0 ? 2 : t == TYPE_Q4_1 ? 4 : t == TYPE_Q5_0 ? 6 : 8));
    if (t == TYPE_Q5_0 || t == TYPE_Q5_1)
        q = _mm256_or_si256(q, QD_FIFTH(blk + (t == TYPE_Q5_0 ? 2 : 4)));
    return q;
}

/* Eight legacy blocks' terms: d * (x.d * s - 8 or 16 * x.s), or d * x.d * s + m * x.s. */
QD_TARGET static inline __m256 QD_CAT(legacy_terms, QD_UNIT)(enum tensor_type t, __m256 d, __m256 m, __m256i isum, __m256 xd, __m256 xs)
{
    const __m256 s = _mm256_cvtepi32_ps(isum);
    if (t == TYPE_Q4_0 || t == TYPE_Q5_0)
        return _mm256_mul_ps(d, _mm256_sub_ps(_mm256_mul_ps(xd, s), _mm256_mul_ps(_mm256_set1_ps(t == TYPE_Q4_0 ? 8.0f : 16.0f), xs)));
    return _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(d, xd), s), _mm256_mul_ps(m, xs));
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(legacy_rows, QD_UNIT)(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                            float *out)
{
    const int bytes = t == TYPE_Q4_0 ? 18 : t == TYPE_Q4_1 ? 20 : t == TYPE_Q5_0 ? 22 : 24;
    const bool has_m = t == TYPE_Q4_1 || t == TYPE_Q5_1;
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < k / 32; j0 += 8) {
        const int nb = k / 32 - j0 < 8 ? (int)(k / 32 - j0) : 8;
        const __m256 d = halves(w + j0 * bytes, bytes, nb), m = has_m ? halves(w + j0 * bytes + 2, bytes, nb) : _mm256_setzero_ps();
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            __m256i p[8];
#pragma GCC unroll 8
            for (int b = 0; b < 8; b++) {
                const int64_t j = j0 + (b < nb ? b : 0);
                p[b] = QD_PRODUCTS(QD_CAT(legacy_codes, QD_UNIT)(t, w + j * bytes), _mm256_loadu_si256((const __m256i *)(ac + j * 32)));
            }
            acc[c] = add_lanes(acc[c], QD_CAT(legacy_terms, QD_UNIT)(t, d, m, hsum8(p), floats(d_of(ac, k) + j0, nb), floats(s_of(ac, k) + j0, nb)), nb);
        }
    }
    COLS out[c] = finish(acc[c]);
}


/* A Q8_0 block's products with a: |q| unsigned against a with q's sign, the same products. */
QD_TARGET static inline __m256i QD_CAT(q8_products, QD_UNIT)(__m256i q, __m256i a)
{
    return QD_PRODUCTS(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(q8_0_rows, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
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
                p[b] = QD_CAT(q8_products, QD_UNIT)(_mm256_loadu_si256((const __m256i *)(w + j * 34 + 2)),
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
                p[b] = QD_CAT(q8_products, QD_UNIT)(q[b], _mm256_loadu_si256((const __m256i *)(ac + (j0 + (b < nb ? b : 0)) * 32)));
            const __m256 xd = floats(d_of(ac, k) + j0, nb);
            acc[c] = add_lanes(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(hsum8(p))), nb);
        }
    }
    COLS out[c] = finish(acc[c]);
}

/* A Q4_K/Q5_K superblock unpacked: each sub-block's 32 codes (q[sb]), and
 * d * scale and dmin * min per sub-block (lane sb). */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(kx_unpack, QD_UNIT)(enum tensor_type t, const uint8_t *blk, __m256i q[8],
                                                                       __m256 *dsc, __m256 *dmn)
{
    const uint8_t *qh = blk + 16, *qs = blk + (t == TYPE_Q4_K ? 16 : 48);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    uint8_t sc8[8], mn8[8];
    k_scales_unpack(blk + 4, sc8, mn8);
    *dsc = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc8))));
    *dmn = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn8))));
    const __m256i high = t == TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
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
}

/* A Q6_K superblock's eight sub-blocks' 32 codes each (0..63, before the -32). */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(q6_k_unpack, QD_UNIT)(const uint8_t *blk, __m256i q[8])
{
    const uint8_t *ql = blk, *qh = blk + 128;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
#pragma GCC unroll 8
    for (int sb = 0; sb < 8; sb++) {
        /* element 32 sb + l: low bits in ql[64 h + 32 (sb % 2) + l] >> 4 ((sb % 4) / 2), high in qh[32 h + l] >> 2 (sb % 4) */
        const __m256i lo = _mm256_loadu_si256((const __m256i *)(ql + 64 * (sb / 4) + 32 * (sb % 2)));
        const __m256i hi = _mm256_loadu_si256((const __m256i *)(qh + 32 * (sb / 4)));
        q[sb] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * ((sb % 4) / 2))), m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * (sb % 4))), m2), 4));
    }
}

/* Q4_K/Q5_K: a superblock's eight sub-blocks are the eight lanes. */
QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(kx_rows, QD_UNIT)(enum tensor_type t, const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k,
                        float *out)
{
    const int bytes = t == TYPE_Q4_K ? 144 : 176;
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        __m256i q[8];
        __m256 dsc, dmn;
        QD_CAT(kx_unpack, QD_UNIT)(t, w + sb0 * bytes, q, &dsc, &dmn);
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            __m256i p[8];
#pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++)
                p[sb] = QD_PRODUCTS(q[sb], _mm256_loadu_si256((const __m256i *)(ac + (sb0 * 8 + sb) * 32)));
            const __m256 s = _mm256_cvtepi32_ps(hsum8(p));
            const __m256 xd = _mm256_loadu_ps(d_of(ac, k) + sb0 * 8), xs = _mm256_loadu_ps(s_of(ac, k) + sb0 * 8);
            /* d * sc * x.d * s - dmin * mn * x.s */
            acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dsc, xd), s), _mm256_mul_ps(dmn, xs)));
        }
    }
    COLS out[c] = finish(acc[c]);
}

QD_TARGET static inline __attribute__((always_inline)) void QD_CAT(q6_k_rows, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out)
{
    const __m256i c32 = _mm256_set1_epi8(32);
    __m256 acc[CPU_QDOT_COLS];
    COLS acc[c] = _mm256_setzero_ps();
    for (int64_t sb0 = 0; sb0 < k / QK_K; sb0++) {
        const uint8_t *blk = w + sb0 * 210;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const __m256 d = _mm256_set1_ps(load_f16(blk + 208));
        __m256i q[8], scale[8];
        QD_CAT(q6_k_unpack, QD_UNIT)(blk, q);
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) /* the first 16 codes' partial sums are lanes 0..3, the second's 4..7 */
            scale[sb] = _mm256_setr_epi32(sc[2 * sb], sc[2 * sb], sc[2 * sb], sc[2 * sb], sc[2 * sb + 1], sc[2 * sb + 1],
                                          sc[2 * sb + 1], sc[2 * sb + 1]);
        COLS {
            const uint8_t *ac = a + (size_t)c * col;
            __m256i p[8];
#pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(ac + (sb0 * 8 + sb) * 32));
                /* (q - 32) a as q a - 32 a, then each half times its scale: sc0 s0 + sc1 s1 once summed */
                const __m256i pairs = _mm256_sub_epi32(QD_PRODUCTS(q[sb], x), QD_PRODUCTS(c32, x));
                p[sb] = _mm256_mullo_epi32(pairs, scale[sb]);
            }
            const __m256 s = _mm256_cvtepi32_ps(hsum8(p)), xd = _mm256_loadu_ps(d_of(ac, k) + sb0 * 8);
            acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_mul_ps(d, xd), s)); /* d * x.d * (sc0 s0 + sc1 s1) */
        }
    }
    COLS out[c] = finish(acc[c]);
}



/* The kernels with the type fixed (QD_KERNELS), and for a decode step's one
 * column the count a constant (its accumulator in a register, not an array). */
#define QD_ROW(NAME, FAMILY, ...) \
    QD_TARGET static void QD_CAT(row_##NAME, QD_UNIT)(const uint8_t *w, const uint8_t *a, size_t col, int nc, int64_t k, float *out) \
    { \
        if (nc == 1) \
            QD_CAT(FAMILY##_rows, QD_UNIT)(__VA_ARGS__ w, a, col, 1, k, out); \
        else \
            QD_CAT(FAMILY##_rows, QD_UNIT)(__VA_ARGS__ w, a, col, nc, k, out); \
    }
QD_KERNELS(QD_ROW)
#undef QD_ROW
#undef QD_PRODUCTS
