/* quant_dot.c: reference weight x Q8_1 activation dot products (see
 * quant_dot.h). Sums run in a fixed order: integer code products within a
 * 32-element block (exact), then one float term per block, left to right. */
#include "quant/quant_dot.h"

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

static float dot_legacy(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t n)
{
    const struct type_info *ti = type_info(t);
    float sum = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *blk = w + b * ti->block_bytes;
        const struct q8_1 x = act(a, b);
        int q[QK];
        legacy_codes(t, blk, q);
        const float d = load_f16(blk);
        const int si = isum(q, x.q, QK);
        switch (t) {
        case TYPE_Q4_0: sum += d * (x.d * (float)si - 8.0f * x.s); break;
        case TYPE_Q5_0: sum += d * (x.d * (float)si - 16.0f * x.s); break;
        default: /* Q4_1, Q5_1: + m per element, so + m * s per block */
            sum += d * x.d * (float)si + load_f16(blk + 2) * x.s;
        }
    }
    return sum;
}

static float dot_q8_0_act(const uint8_t *w, const uint8_t *a, int64_t n)
{
    float sum = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *blk = w + b * 34;
        const struct q8_1 x = act(a, b);
        int q[QK];
        for (int i = 0; i < QK; i++)
            q[i] = (int8_t)blk[2 + i];
        sum += load_f16(blk) * x.d * (float)isum(q, x.q, QK);
    }
    return sum;
}

/* Q4_K/Q5_K: each 32-element sub-block lines up with one Q8_1 block. */
static float dot_kx(enum tensor_type t, const uint8_t *w, const uint8_t *a, int64_t n)
{
    const int bytes = t == TYPE_Q4_K ? 144 : 176;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *blk = w + b * bytes;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        const uint8_t *qh = blk + 16, *qs = blk + (t == TYPE_Q4_K ? 16 : 48);
        uint8_t sc[8], mn[8];
        k_scales_unpack(blk + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const struct q8_1 x = act(a, b * 8 + j);
            int q[QK];
            for (int l = 0; l < QK; l++) {
                q[l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
                if (t == TYPE_Q5_K)
                    q[l] |= ((qh[l] >> j) & 1) << 4;
            }
            sum += d * (float)sc[j] * x.d * (float)isum(q, x.q, QK) - dmin * (float)mn[j] * x.s;
        }
    }
    return sum;
}

/* Q6_K: sub-blocks of 16, two per Q8_1 block; codes are signed (q - 32). */
static float dot_q6_k(const uint8_t *w, const uint8_t *a, int64_t n)
{
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *blk = w + b * 210, *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const float d = load_f16(blk + 208);
        for (int j = 0; j < 8; j++) {
            const struct q8_1 x = act(a, b * 8 + j);
            int q[QK];
            for (int l = 0; l < QK; l++) {
                const int e = 32 * j + l, h = e / 128, r = e % 128;
                const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
                const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                q[l] = (lo | hi << 4) - 32;
            }
            const int s0 = isum(q, x.q, 16), s1 = isum(q + 16, x.q + 16, 16);
            sum += d * x.d * (float)(sc[2 * j] * s0 + sc[2 * j + 1] * s1);
        }
    }
    return sum;
}

int dot_q8_1(enum tensor_type wt, const void *w, const void *a, int64_t n, float *out)
{
    switch (wt) {
    case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1:
        *out = dot_legacy(wt, w, a, n);
        return 0;
    case TYPE_Q8_0: *out = dot_q8_0_act(w, a, n); return 0;
    case TYPE_Q4_K: case TYPE_Q5_K: *out = dot_kx(wt, w, a, n); return 0;
    case TYPE_Q6_K: *out = dot_q6_k(w, a, n); return 0;
    default: return -1;
    }
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
