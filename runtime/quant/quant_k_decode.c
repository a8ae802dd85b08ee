/* quant_k_decode.c: decoders for the 256-element K-quant superblocks Q2_K,
 * Q3_K, Q4_K, Q5_K and Q6_K, in the GGUF byte layout. Each computes
 * (d * scale) first and then multiplies by the code, the order the formats
 * define, so results are bit-identical to other faithful decoders. */
#include "quant/half.h"
#include "quant/quant.h"

void k_scales_unpack(const uint8_t p[12], uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = p[j] & 63;
        mn[j] = p[j + 4] & 63;
        sc[j + 4] = (uint8_t)((p[j + 8] & 0xf) | (p[j] >> 6) << 4);
        mn[j + 4] = (uint8_t)((p[j + 8] >> 4) | (p[j + 4] >> 6) << 4);
    }
}

void k_scales_pack(const uint8_t sc[8], const uint8_t mn[8], uint8_t p[12])
{
    for (int j = 0; j < 4; j++) {
        p[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        p[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        p[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
    }
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
 * Element e = 128h + 32s + l holds bits 2s..2s+1 of qs[32h + l]. */
void dequant_q2_k(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += 84, dst += QK_K) {
        const uint8_t *scales = src, *qs = src + 16;
        const float d = load_f16(src + 80), dmin = load_f16(src + 82);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            uint8_t sc = scales[e / 16];
            float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
            dst[e] = dl * (float)((qs[32 * h + l] >> (2 * s)) & 3) - ml;
        }
    }
}

/* Q3_K: hmask[32], qs[64], 12 bytes of sixteen 6-bit signed scales, d.
 * The high bit of a code is stored inverted: a set hmask bit means no -4. */
void dequant_q3_k(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += 110, dst += QK_K) {
        const uint8_t *hmask = src, *qs = src + 32, *sp = src + 96;
        const float d = load_f16(src + 108);
        float dl[16];
        for (int i = 0; i < 16; i++) {
            int lo = (i < 8 ? sp[i] : sp[i - 8] >> 4) & 0xf;
            int hi = (sp[8 + i % 4] >> (2 * (i / 4))) & 3;
            dl[i] = d * (float)((lo | hi << 4) - 32);
        }
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            int q = (qs[32 * h + l] >> (2 * s)) & 3;
            int high = (hmask[l] >> (e / 32)) & 1;
            dst[e] = dl[e / 16] * (float)(q - (high ? 0 : 4));
        }
    }
}

/* Q4_K: d, dmin, packed scales, qs[128]; sub-block j = 2c + s takes nibble s
 * of qs[32c + l]. */
void dequant_q4_k(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += 144, dst += QK_K) {
        const float d = load_f16(src), dmin = load_f16(src + 2);
        const uint8_t *qs = src + 16;
        uint8_t sc[8], mn[8];
        k_scales_unpack(src + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
            for (int l = 0; l < 32; l++)
                dst[32 * j + l] = dl * (float)((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf) - ml;
        }
    }
}

/* Q5_K: as Q4_K with qh[32] between scales and qs; bit j of qh[l] is bit 4
 * of element l of sub-block j. */
void dequant_q5_k(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += 176, dst += QK_K) {
        const float d = load_f16(src), dmin = load_f16(src + 2);
        const uint8_t *qh = src + 16, *qs = src + 48;
        uint8_t sc[8], mn[8];
        k_scales_unpack(src + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
            for (int l = 0; l < 32; l++) {
                int q = ((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf) | ((qh[l] >> j) & 1) << 4;
                dst[32 * j + l] = dl * (float)q - ml;
            }
        }
    }
}

/* Q6_K: ql[128], qh[64], int8 scales[16], d. Element e = 128h + r takes
 * nibble r/64 of ql[64h + r%64] and bit pair r/32 of qh[32h + r%32]. */
void dequant_q6_k(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, src += 210, dst += QK_K) {
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *scales = (const int8_t *)(src + 192);
        const float d = load_f16(src + 208);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, r = e % 128;
            int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
            int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            dst[e] = d * (float)scales[e / 16] * (float)((lo | hi << 4) - 32);
        }
    }
}
