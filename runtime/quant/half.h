/* half.h: exact conversions between binary32 and the 16-bit float formats.
 * f16 rounding is round-to-nearest-even with subnormals and overflow to
 * infinity, as IEEE and numpy do; bf16 is the round-to-nearest-even cast with
 * NaN forced quiet, as ggml and the gguf package do. */
#ifndef MINFER_HALF_H
#define MINFER_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) /* inf / nan */
        return f32_from_bits(sign | 0x7f800000 | (man << 13));
    if (exp == 0) { /* zero / subnormal: man * 2^-24 is exact in binary32 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/* Rounds m >> shift to nearest, ties to even (shift >= 1). */
static inline uint32_t shift_rne(uint32_t m, int shift)
{
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

static inline uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax > 0x7f800000) { /* nan: keep the top payload bits; never let it become inf */
        uint32_t payload = (ax & 0x7fffff) >> 13;
        return (uint16_t)(sign | 0x7c00 | (payload ? payload : 1));
    }
    if (ax >= 0x477ff000) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00);
    if (ax >= 0x38800000) /* normal: rebias the exponent by 112 and round 13 bits off */
        return (uint16_t)(sign | shift_rne(ax - 0x38000000, 13));
    if (ax < 0x33000000) /* below half the smallest subnormal */
        return (uint16_t)sign;
    int e = (int)(ax >> 23); /* 102..112: value = m * 2^(e-150), result = m * 2^(e-126) */
    return (uint16_t)(sign | shift_rne((ax & 0x7fffff) | 0x800000, 126 - e));
}

static inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* Little-endian loads and stores of the f16 fields inside quant blocks. */
static inline float load_f16(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline void store_f16(uint8_t *p, float f)
{
    uint16_t h = f32_to_f16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

#endif
