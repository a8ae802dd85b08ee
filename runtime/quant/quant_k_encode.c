/* quant_k_encode.c: encoders for Q4_K, Q5_K and Q6_K.
 *
 * Min/max scaling wastes codes whenever a sub-block's extremes are outliers,
 * so each sub-block instead tries a small fan of scales around the min/max
 * one, fits scale (and offset) to the codes each produces by weighted least
 * squares, and keeps the fit with the least weighted squared error. Weights
 * are rms(x) + |x|, which favours getting the large values right. The
 * sub-block scales are then quantized to the superblock's 6- or 8-bit grid
 * and the codes recomputed against the scales actually stored. */
#include <math.h>
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"

#define FAN_STEPS 10     /* candidates on each side of the min/max scale */
#define FAN_DELTA 0.1f   /* candidate spacing, in code units */

static void importance(const float *x, int n, float *w)
{
    float sum2 = 0;
    for (int i = 0; i < n; i++)
        sum2 += x[i] * x[i];
    const float rms = sqrtf(sum2 / (float)n);
    for (int i = 0; i < n; i++)
        w[i] = rms + fabsf(x[i]);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Weighted least squares for x ~ scale*q + off over fixed codes q, with the
 * offset held <= 0 (the formats store it as a non-negative min to subtract).
 * Returns the weighted squared error. */
static float fit_affine(const float *x, const float *w, const int *q, int n, float *scale, float *off)
{
    float sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; i++) {
        sw += w[i];
        sq += w[i] * (float)q[i];
        sqq += w[i] * (float)q[i] * (float)q[i];
        sx += w[i] * x[i];
        sqx += w[i] * (float)q[i] * x[i];
    }
    const float det = sw * sqq - sq * sq;
    *scale = 0;
    *off = 0;
    if (det > 0) {
        *scale = (sw * sqx - sx * sq) / det;
        *off = (sqq * sx - sq * sqx) / det;
    }
    if (*off > 0 || det <= 0) {
        *off = 0;
        *scale = sqq > 0 ? sqx / sqq : 0;
    }
    float err = 0;
    for (int i = 0; i < n; i++) {
        const float r = *scale * (float)q[i] + *off - x[i];
        err += w[i] * r * r;
    }
    return err;
}

/* Best (scale, min) for one sub-block of 32 with codes 0..nmax; the value
 * represented is scale*q - min. */
static void search_scale_min(const float *x, int nmax, float *scale, float *min)
{
    float w[32], lo = x[0], hi = x[0];
    importance(x, 32, w);
    for (int i = 1; i < 32; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    lo = lo > 0 ? 0 : lo;
    *scale = 0;
    *min = -lo;
    if (hi == lo)
        return;
    float best = INFINITY;
    for (int step = -FAN_STEPS; step <= FAN_STEPS; step++) {
        const float iscale = ((float)nmax + FAN_DELTA * (float)step) / (hi - lo);
        int q[32];
        for (int i = 0; i < 32; i++)
            q[i] = clampi((int)lrintf(iscale * (x[i] - lo)), 0, nmax);
        float s, off;
        const float err = fit_affine(x, w, q, 32, &s, &off);
        if (err < best && s > 0) {
            best = err;
            *scale = s;
            *min = -off;
        }
    }
}

/* Best scale for one sub-block of 16 with signed codes -nmax..nmax-1. */
static float search_scale_signed(const float *x, int nmax)
{
    float w[16], amax = 0, max = 0;
    importance(x, 16, w);
    for (int i = 0; i < 16; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax == 0)
        return 0;
    float best_scale = 0, best_num = 0, best_den = 1;
    for (int step = -FAN_STEPS; step <= FAN_STEPS; step++) {
        const float iscale = -((float)nmax + FAN_DELTA * (float)step) / max;
        float num = 0, den = 0;
        for (int i = 0; i < 16; i++) {
            const int q = clampi((int)lrintf(iscale * x[i]), -nmax, nmax - 1);
            num += w[i] * (float)q * x[i];
            den += w[i] * (float)q * (float)q;
        }
        /* The least-squares error is sum(w x^2) - num^2/den: maximize num^2/den. */
        if (den > 0 && num * num * best_den > best_num * best_num * den) {
            best_num = num;
            best_den = den;
            best_scale = num / den;
        }
    }
    return best_scale;
}

/* Quantizes eight non-negative values to 6 bits against one f16 step. */
static float quantize_scales6(const float *v, uint8_t *out)
{
    float max = 0;
    for (int j = 0; j < 8; j++)
        max = v[j] > max ? v[j] : max;
    const float inv = max > 0 ? 63.0f / max : 0.0f;
    for (int j = 0; j < 8; j++)
        out[j] = (uint8_t)clampi((int)lrintf(inv * v[j]), 0, 63);
    return max / 63.0f;
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fills d, dmin, the packed
 * scales and the 256 codes. */
static void encode_kx(const float *x, int nmax, uint8_t *hdr, int *codes)
{
    float scales[8], mins[8];
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++)
        search_scale_min(x + 32 * j, nmax, &scales[j], &mins[j]);
    store_f16(hdr, quantize_scales6(scales, sc));
    store_f16(hdr + 2, quantize_scales6(mins, mn));
    k_scales_pack(sc, mn, hdr + 4);
    const float d = load_f16(hdr), dmin = load_f16(hdr + 2);
    for (int j = 0; j < 8; j++) {
        const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
        for (int l = 0; l < 32; l++) {
            const int i = 32 * j + l;
            codes[i] = dl > 0 ? clampi((int)lrintf((x[i] + ml) / dl), 0, nmax) : 0;
        }
    }
}

void quant_q4_k(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K, dst += 144) {
        int q[QK_K];
        encode_kx(src, 15, dst, q);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                dst[16 + 32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

void quant_q5_k(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K, dst += 176) {
        int q[QK_K];
        encode_kx(src, 31, dst, q);
        uint8_t *qh = dst + 16, *qs = dst + 48;
        memset(qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 0xf) | (q[64 * c + 32 + l] & 0xf) << 4);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++)
                qh[l] |= (uint8_t)((q[32 * j + l] >> 4) << j);
    }
}

void quant_q6_k(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K, dst += 210) {
        float scales[16], amax = 0, max = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = search_scale_signed(src + 16 * j, 32);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max = scales[j];
            }
        }
        uint8_t *ql = dst, *qh = dst + 128;
        int8_t *sc = (int8_t *)(dst + 192);
        memset(dst, 0, 210);
        const float iscale = amax > 0 ? -128.0f / max : 0.0f;
        for (int j = 0; j < 16; j++)
            sc[j] = (int8_t)clampi((int)lrintf(iscale * scales[j]), -128, 127);
        store_f16(dst + 208, amax > 0 ? 1.0f / iscale : 0.0f);
        const float d = load_f16(dst + 208);
        for (int e = 0; e < QK_K; e++) {
            const float dl = d * (float)sc[e / 16];
            const int q = (dl != 0 ? clampi((int)lrintf(src[e] / dl), -32, 31) : 0) + 32;
            const int h = e / 128, r = e % 128;
            ql[64 * h + r % 64] |= (uint8_t)((q & 0xf) << (4 * (r / 64)));
            qh[32 * h + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
        }
    }
}
