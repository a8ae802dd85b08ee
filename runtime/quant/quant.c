/* quant.c: dispatch from a tensor type to its row encoder and decoder. */
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"

int dequantize_row(enum tensor_type t, const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    switch (t) {
    case TYPE_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
        return 0;
    case TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = bf16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
        return 0;
    case TYPE_Q4_0: dequant_q4_0(s, dst, n); return 0;
    case TYPE_Q4_1: dequant_q4_1(s, dst, n); return 0;
    case TYPE_Q5_0: dequant_q5_0(s, dst, n); return 0;
    case TYPE_Q5_1: dequant_q5_1(s, dst, n); return 0;
    case TYPE_Q8_0: dequant_q8_0(s, dst, n); return 0;
    case TYPE_Q8_1: dequant_q8_1(s, dst, n); return 0;
    case TYPE_Q2_K: dequant_q2_k(s, dst, n); return 0;
    case TYPE_Q3_K: dequant_q3_k(s, dst, n); return 0;
    case TYPE_Q4_K: dequant_q4_k(s, dst, n); return 0;
    case TYPE_Q5_K: dequant_q5_k(s, dst, n); return 0;
    case TYPE_Q6_K: dequant_q6_k(s, dst, n); return 0;
    default: return -1;
    }
}

int quantize_row(enum tensor_type t, const float *src, void *dst, int64_t n)
{
    uint8_t *d = dst;
    switch (t) {
    case TYPE_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = f32_to_f16(src[i]);
            d[2 * i] = (uint8_t)h;
            d[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return 0;
    case TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = f32_to_bf16(src[i]);
            d[2 * i] = (uint8_t)h;
            d[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return 0;
    case TYPE_Q4_0: quant_q4_0(src, d, n); return 0;
    case TYPE_Q4_1: quant_q4_1(src, d, n); return 0;
    case TYPE_Q5_0: quant_q5_0(src, d, n); return 0;
    case TYPE_Q5_1: quant_q5_1(src, d, n); return 0;
    case TYPE_Q8_0: quant_q8_0(src, d, n); return 0;
    case TYPE_Q8_1: quant_q8_1(src, d, n); return 0;
    case TYPE_Q4_K: quant_q4_k(src, d, n); return 0;
    case TYPE_Q5_K: quant_q5_k(src, d, n); return 0;
    case TYPE_Q6_K: quant_q6_k(src, d, n); return 0;
    default: return -1;
    }
}
