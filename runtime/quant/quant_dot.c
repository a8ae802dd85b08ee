/* quant_dot.c: reference weight x Q8_1 activation dot products (see
 * quant_dot.h). Sums run in a fixed order: integer code products within a
 * 32-element block (exact), then one float term per block (its scales in a
 * fixed order, which the GPU kernels repeat), left to right. */
#include "quant/quant_dot.h"

#include <stdbool.h>

#include "quant/half.h"
#include "quant/quant.h"

#define QK 32

struct q8_1 {
    float d, s;          /* scale and d * sum(codes) */
    const int8_t *q;     /* 32 codes */
};

static struct q8_1 act(const uint8_t *a, int64_t block)
{
    const uint8_t *p = a + block * 36;
    return (struct q8_1){ load_f16(p), load_f16(p + 2), (const int8_t *)(p + 4) };
}

static int isum(const int *w, const int8_t *a, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += w[i] * a[i];
    return s;
}

/* Unpacks the 32 codes of one legacy block (before any offset). */
static void legacy_codes(enum tensor_type t, const uint8_t *blk, int *q)
{
    const uint8_t *qs = blk + (t == TYPE_Q4_0 ? 2 : t == TYPE_Q4_1 ? 4 : t == TYPE_Q5_0 ? 6 : 8);
    uint32_t qh = 0;
    if (t == TYPE_Q5_0 || t == TYPE_Q5_1) {
        const uint8_t *h = blk + (t == TYPE_Q5_0 ? 2 : 4);
        qh = h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24;
    }
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
        q[j + QK / 2] = (qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
    }
}

/* The float term of 32-element block j of a row (for K-quants, sub-block
 * j % 8 of superblock j / 8) against activation block j: the code products
 * summed as integers, the scales applied in one fixed order. */
static float term_legacy(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t j)
{
    const uint8_t *blk = w + j * type_info(t)->block_bytes;
    const struct q8_1 x = act(a, j);
    int q[QK];
    legacy_codes(t, blk, q);
    const float d = load_f16(blk);
    const int si = isum(q, x.q, QK);
    switch (t) {
    case TYPE_Q4_0: return d * (x.d * (float)si - 8.0f * x.s);
    case TYPE_Q5_0: return d * (x.d * (float)si - 16.0f * x.s);
    default: /* Q4_1, Q5_1: + m per element, so + m * s per block */
        return d * x.d * (float)si + load_f16(blk + 2) * x.s;
    }
}

static float term_q8_0(const uint8_t *w, const uint8_t *a, int64_t j)
{
    const uint8_t *blk = w + j * 34;
    const struct q8_1 x = act(a, j);
    int q[QK];
    for (int i = 0; i < QK; i++)
        q[i] = (int8_t)blk[2 + i];
    return load_f16(blk) * x.d * (float)isum(q, x.q, QK);
}

/* Q4_K/Q5_K: each 32-element sub-block lines up with one Q8_1 block. */
static float term_kx(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t j)
{
    const uint8_t *blk = w + j / 8 * (t == TYPE_Q4_K ? 144 : 176);
    const int sb = (int)(j % 8);
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    const uint8_t *qh = blk + 16, *qs = blk + (t == TYPE_Q4_K ? 16 : 48);
    uint8_t sc[8], mn[8];
    k_scales_unpack(blk + 4, sc, mn);
    const struct q8_1 x = act(a, j);
    int q[QK];
    for (int l = 0; l < QK; l++) {
        q[l] = (qs[32 * (sb / 2) + l] >> (4 * (sb % 2))) & 0xf;
        if (t == TYPE_Q5_K)
            q[l] |= ((qh[l] >> sb) & 1) << 4;
    }
    return d * (float)sc[sb] * x.d * (float)isum(q, x.q, QK) - dmin * (float)mn[sb] * x.s;
}

/* Q6_K: sub-blocks of 16, two per Q8_1 block; codes are signed (q - 32). */
static float term_q6_k(const uint8_t *w, const uint8_t *a, int64_t j)
{
    const uint8_t *blk = w + j / 8 * 210, *ql = blk, *qh = blk + 128;
    const int sb = (int)(j % 8);
    const int8_t *sc = (const int8_t *)(blk + 192);
    const float d = load_f16(blk + 208);
    const struct q8_1 x = act(a, j);
    int q[QK];
    for (int l = 0; l < QK; l++) {
        const int e = 32 * sb + l, h = e / 128, r = e % 128;
        const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
        const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        q[l] = (lo | hi << 4) - 32;
    }
    const int s0 = isum(q, x.q, 16), s1 = isum(q + 16, x.q + 16, 16);
    return d * x.d * (float)(sc[2 * sb] * s0 + sc[2 * sb + 1] * s1);
}

static bool has_term(enum tensor_type t)
{
    return t == TYPE_Q4_0 || t == TYPE_Q4_1 || t == TYPE_Q5_0 || t == TYPE_Q5_1 || t == TYPE_Q8_0 || t == TYPE_Q4_K ||
           t == TYPE_Q5_K || t == TYPE_Q6_K;
}

static float term(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t j)
{
    switch (t) {
    case TYPE_Q8_0: return term_q8_0(w, a, j);
    case TYPE_Q4_K: case TYPE_Q5_K: return term_kx(t, w, a, j);
    case TYPE_Q6_K: return term_q6_k(w, a, j);
    default: return term_legacy(t, w, a, j);
    }
}

int dot_q8_1_terms(enum tensor_type wt, const void *w, const void *a, int64_t n, float *terms)
{
    if (!has_term(wt))
        return -1;
    for (int64_t j = 0; j < n / QK; j++)
        terms[j] = term(wt, w, a, j);
    return 0;
}

int dot_q8_1(enum tensor_type wt, const void *w, const void *a, int64_t n, float *out)
{
    if (!has_term(wt))
        return -1;
    float sum = 0;
    for (int64_t j = 0; j < n / QK; j++)
        sum += term(wt, w, a, j);
    *out = sum;
    return 0;
}

float dot_q8_0_q8_0(const void *w, const void *a, int64_t n)
{
    const uint8_t *pw = w, *pa = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        int s = 0;
        for (int i = 0; i < QK; i++)
            s += (int8_t)pw[34 * b + 2 + i] * (int8_t)pa[34 * b + 2 + i];
        sum += load_f16(pw + 34 * b) * load_f16(pa + 34 * b) * (float)s;
    }
    return sum;
}
