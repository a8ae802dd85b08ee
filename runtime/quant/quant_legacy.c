/* quant_legacy.c: the 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * and Q8_1. Encoders follow the reference rounding exactly (truncation after
 * adding the offset for the 4/5-bit formats, round-half-away for Q8), which
 * is what makes minfer's bytes equal the gguf package's. */
#include <math.h>
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"

#define QK 32

/* The signed value of largest magnitude (first one on ties), as Q4_0/Q5_0
 * scale by it so the extreme code lands on -8 / -16 exactly. */
static float signed_absmax(const float *x)
{
    float amax = 0, max = 0;
    for (int i = 0; i < QK; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    return max;
}

static void min_max(const float *x, float *mn, float *mx)
{
    *mn = x[0];
    *mx = x[0];
    for (int i = 1; i < QK; i++) {
        *mn = x[i] < *mn ? x[i] : *mn;
        *mx = x[i] > *mx ? x[i] : *mx;
    }
}

static uint32_t load_u32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static void store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int clamp_code(float v, int hi)
{
    int q = (int)v; /* v >= 0 here: truncation is the format's rounding */
    return q > hi ? hi : q;
}

void quant_q4_0(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 18) {
        const float d = signed_absmax(src) / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        store_f16(dst, d);
        for (int j = 0; j < QK / 2; j++) {
            int lo = clamp_code(src[j] * id + 8.5f, 15), hi = clamp_code(src[j + QK / 2] * id + 8.5f, 15);
            dst[2 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

void dequant_q4_0(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 18, dst += QK) {
        const float d = load_f16(src);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)((src[2 + j] & 0xf) - 8);
            dst[j + QK / 2] = d * (float)((src[2 + j] >> 4) - 8);
        }
    }
}

void quant_q4_1(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 20) {
        float mn, mx;
        min_max(src, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        store_f16(dst, d);
        store_f16(dst + 2, mn);
        for (int j = 0; j < QK / 2; j++) {
            int lo = clamp_code((src[j] - mn) * id + 0.5f, 15);
            int hi = clamp_code((src[j + QK / 2] - mn) * id + 0.5f, 15);
            dst[4 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

void dequant_q4_1(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 20, dst += QK) {
        const float d = load_f16(src), m = load_f16(src + 2);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)(src[4 + j] & 0xf) + m;
            dst[j + QK / 2] = d * (float)(src[4 + j] >> 4) + m;
        }
    }
}

/* Q5 stores the low nibbles like Q4 and bit 4 of code i in bit i of qh. */
static void pack_q5(const int *q, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | (q[j + QK / 2] & 0xf) << 4);
        h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + QK / 2] >> 4) << (j + QK / 2);
    }
    store_u32(qh, h);
}

static void unpack_q5(const uint8_t *qh, const uint8_t *qs, int *q)
{
    uint32_t h = load_u32(qh);
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (qs[j] & 0xf) | (int)((h >> j) & 1) << 4;
        q[j + QK / 2] = (qs[j] >> 4) | (int)((h >> (j + QK / 2)) & 1) << 4;
    }
}

void quant_q5_0(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 22) {
        const float d = signed_absmax(src) / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int q[QK];
        for (int j = 0; j < QK; j++)
            q[j] = clamp_code(src[j] * id + 16.5f, 31);
        store_f16(dst, d);
        pack_q5(q, dst + 2, dst + 6);
    }
}

void dequant_q5_0(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 22, dst += QK) {
        const float d = load_f16(src);
        int q[QK];
        unpack_q5(src + 2, src + 6, q);
        for (int j = 0; j < QK; j++)
            dst[j] = d * (float)(q[j] - 16);
    }
}

void quant_q5_1(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 24) {
        float mn, mx;
        min_max(src, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int q[QK];
        for (int j = 0; j < QK; j++)
            q[j] = clamp_code((src[j] - mn) * id + 0.5f, 31);
        store_f16(dst, d);
        store_f16(dst + 2, mn);
        pack_q5(q, dst + 4, dst + 8);
    }
}

void dequant_q5_1(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 24, dst += QK) {
        const float d = load_f16(src), m = load_f16(src + 2);
        int q[QK];
        unpack_q5(src + 4, src + 8, q);
        for (int j = 0; j < QK; j++)
            dst[j] = d * (float)q[j] + m;
    }
}

/* Q8_0 and Q8_1 share the code computation; Q8_1 adds s = d * sum(codes),
 * which lets a dot product with an offset format apply the offset once per
 * block instead of once per element. */
/* roundf(v) for |v| < 2^23 (here |v| <= 127 and a rounding): half away
 * from zero, exactly, without a call into libm (a prompt quantizes every
 * activation: the calls were 2% of its time on the CPU fast path). */
static inline int round_half_away(float v)
{
    const int i = (int)v;        /* toward zero */
    const float r = v - (float)i; /* exact: the fraction of v */
    return i + (r >= 0.5f) - (r <= -0.5f);
}

static float quant_q8_block(const float *x, int8_t *qs)
{
    float amax = 0;
    for (int j = 0; j < QK; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++)
        qs[j] = (int8_t)round_half_away(x[j] * id);
    return d;
}

void quant_q8_0(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 34)
        store_f16(dst, quant_q8_block(src, (int8_t *)(dst + 2)));
}

void dequant_q8_0(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 34, dst += QK) {
        const float d = load_f16(src);
        for (int j = 0; j < QK; j++)
            dst[j] = d * (float)(int8_t)src[2 + j];
    }
}

void quant_q8_1(const float *src, uint8_t *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += QK, dst += 36) {
        const int8_t *qs = (const int8_t *)(dst + 4);
        const float d = quant_q8_block(src, (int8_t *)(dst + 4));
        int sum = 0;
        for (int j = 0; j < QK; j++)
            sum += qs[j];
        store_f16(dst, d);
        store_f16(dst + 2, d * (float)sum);
    }
}

void dequant_q8_1(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK; b++, src += 36, dst += QK) {
        const float d = load_f16(src);
        for (int j = 0; j < QK; j++)
            dst[j] = d * (float)(int8_t)src[4 + j];
    }
}
