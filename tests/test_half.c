/* test_half.c: binary16 and bfloat16 conversions, exhaustively where the
 * space is small enough. */
#include <criterion/criterion.h>
#include <math.h>

#include "quant/half.h"

Test(half, every_f16_round_trips)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        cr_assert_eq(f32_to_f16(f), h, "f16 0x%04x -> %g -> 0x%04x", h, (double)f, f32_to_f16(f));
    }
}

Test(half, f16_midpoints_round_to_even)
{
    /* Between neighbouring positive finite halves a < b, the midpoint is exact
     * in binary32 and must round to whichever of a, b has an even mantissa. */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float a = f16_to_f32((uint16_t)h), b = f16_to_f32((uint16_t)(h + 1));
        float mid = (a + b) / 2;
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        cr_assert_eq(f32_to_f16(mid), want, "midpoint after 0x%04x", h);
        cr_assert_eq(f32_to_f16(nextafterf(mid, 0)), h);
        cr_assert_eq(f32_to_f16(nextafterf(mid, INFINITY)), h + 1);
    }
}

Test(half, f16_overflow_and_specials)
{
    cr_assert_eq(f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(f32_to_f16(65519.99f), 0x7bff);
    cr_assert_eq(f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(f32_to_f16(-1e30f), 0xfc00);
    cr_assert_eq(f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie to even: 0 */
    cr_assert_eq(f32_to_f16(nextafterf(ldexpf(1, -25), 1)), 0x0001);
    uint16_t n = f32_to_f16(NAN);
    cr_assert((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0, "nan became 0x%04x", n);
}

Test(half, bf16_rounds_to_nearest_even_and_keeps_nan)
{
    cr_assert_eq(f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80); /* tie, even stays */
    cr_assert_eq(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82); /* tie, odd rounds up */
    cr_assert_eq(f32_to_bf16(f32_from_bits(0x3f808001)), 0x3f81);
    cr_assert_eq(f32_to_bf16(f32_from_bits(0x7f800001)), 0x7fc0); /* signalling nan made quiet */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            cr_assert_eq(f32_to_bf16(f), h);
    }
}
