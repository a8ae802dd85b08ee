/* test_quant.c: encoders and decoders on their own: error bounds on N(0,1)
 * data, lossless round trips where the format allows them, edge-case blocks,
 * and the K-quant scale search against plain min/max scaling. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"
#include "support.h"

#define N (QK_K * 64)

static float *normal_data(uint64_t seed, int64_t n)
{
    struct rng r;
    rng_seed(&r, seed);
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_normal(&r);
    return x;
}

static double rmse_of(enum tensor_type t, const float *x, int64_t n)
{
    uint8_t *q = malloc(type_bytes(t, (uint64_t)n));
    float *y = malloc((size_t)n * sizeof *y);
    cr_assert_eq(quantize_row(t, x, q, n), 0);
    cr_assert_eq(dequantize_row(t, q, y, n), 0);
    double e = 0;
    for (int64_t i = 0; i < n; i++)
        e += (double)(x[i] - y[i]) * (x[i] - y[i]);
    free(q);
    free(y);
    return sqrt(e / (double)n);
}

struct bound {
    enum tensor_type type;
    double max_rmse; /* on N(0,1); measured values are in BENCHMARKS.md */
};

static struct bound bounds[] = {
    { TYPE_F16, 0.00025 }, { TYPE_BF16, 0.0018 }, { TYPE_Q8_0, 0.0056 }, { TYPE_Q8_1, 0.0056 },
    { TYPE_Q4_0, 0.090 },  { TYPE_Q4_1, 0.082 },  { TYPE_Q5_0, 0.045 },  { TYPE_Q5_1, 0.040 },
    { TYPE_Q4_K, 0.075 },  { TYPE_Q5_K, 0.038 },  { TYPE_Q6_K, 0.019 },
};

ParameterizedTestParameters(quant, rmse_on_normal_data)
{
    return cr_make_param_array(struct bound, bounds, sizeof bounds / sizeof bounds[0]);
}

ParameterizedTest(struct bound *b, quant, rmse_on_normal_data)
{
    float *x = normal_data(42, N);
    double r = rmse_of(b->type, x, N);
    cr_assert_leq(r, b->max_rmse, "%s rmse %.6f > %.6f", type_name(b->type), r, b->max_rmse);
    cr_assert_gt(r, 0.0, "%s: exact on random data is suspicious", type_name(b->type));
    free(x);
}

static enum tensor_type all_encodable[] = { TYPE_F16,  TYPE_BF16, TYPE_Q8_0, TYPE_Q8_1, TYPE_Q4_0, TYPE_Q4_1,
                                            TYPE_Q5_0, TYPE_Q5_1, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };

ParameterizedTestParameters(quant, zeros_stay_zero)
{
    return cr_make_param_array(enum tensor_type, all_encodable, sizeof all_encodable / sizeof all_encodable[0]);
}

ParameterizedTest(enum tensor_type *t, quant, zeros_stay_zero)
{
    static float x[QK_K], y[QK_K];
    static uint8_t q[QK_K * 4];
    memset(y, 0x7f, sizeof y);
    cr_assert_eq(quantize_row(*t, x, q, QK_K), 0);
    cr_assert_eq(dequantize_row(*t, q, y, QK_K), 0);
    for (int i = 0; i < QK_K; i++)
        cr_assert_eq(y[i], 0.0f, "%s element %d = %g", type_name(*t), i, (double)y[i]);
}

ParameterizedTestParameters(quant, large_and_constant_blocks_stay_finite)
{
    return cr_make_param_array(enum tensor_type, all_encodable, sizeof all_encodable / sizeof all_encodable[0]);
}

ParameterizedTest(enum tensor_type *t, quant, large_and_constant_blocks_stay_finite)
{
    static float x[QK_K], y[QK_K];
    static uint8_t q[QK_K * 4];
    for (int i = 0; i < QK_K; i++)
        x[i] = i < 128 ? 3.0f : -1000.0f * (float)(i % 7) + 0.5f;
    cr_assert_eq(quantize_row(*t, x, q, QK_K), 0);
    cr_assert_eq(dequantize_row(*t, q, y, QK_K), 0);
    /* The blocks past the first 128 values span [-5999.5, 0.5]. Each format's
     * worst error there is half a step of its code grid over that block:
     * the grid's step for a span of 6000 (amax 6000 for the symmetric ones),
     * with 2% for the scale's own rounding (f16, or 6-bit sub-block scales). */
    double step = 0;
    switch (*t) {
    case TYPE_F16: step = 2 * 6000.0 / 2048; break;  /* a 10-bit mantissa: an ulp is 4 at 4096..8192 */
    case TYPE_BF16: step = 2 * 6000.0 / 256; break;  /* a 7-bit mantissa: 32 */
    case TYPE_Q8_0: case TYPE_Q8_1: step = 6000.0 / 127; break;
    case TYPE_Q6_K: step = 6000.0 / 32; break;       /* codes -32..31 times amax/32 */
    case TYPE_Q5_1: case TYPE_Q5_K: step = 6000.0 / 31; break;
    case TYPE_Q5_0: step = 6000.0 / 16; break;       /* codes -16..15 times amax/16 */
    case TYPE_Q4_1: case TYPE_Q4_K: step = 6000.0 / 15; break;
    case TYPE_Q4_0: step = 6000.0 / 8; break;        /* codes -8..7 times amax/8 */
    default: cr_assert_fail("no step for %s", type_name(*t));
    }
    double worst = 0;
    for (int i = 0; i < QK_K; i++) {
        cr_assert(isfinite(y[i]), "%s element %d not finite", type_name(*t), i);
        worst = fmax(worst, fabs((double)y[i] - x[i]));
    }
    cr_log_info("%s: worst error %.3f, half a step %.3f", type_name(*t), worst, step / 2);
    cr_assert_leq(worst, 0.51 * step, "%s: an error of %g, more than half a step (%g)", type_name(*t), worst, step / 2);
}

Test(quant, f16_and_bf16_bytes_round_trip)
{
    struct rng r;
    rng_seed(&r, 7);
    uint8_t in[512], out[512];
    float f[256];
    for (int i = 0; i < 256; i++) {
        uint16_t h;
        do
            h = (uint16_t)(rng_uniform(&r) * 65536);
        while ((h & 0x7c00) == 0x7c00 || (h & 0x7f80) == 0x7f80); /* no inf/nan in either format */
        in[2 * i] = (uint8_t)h;
        in[2 * i + 1] = (uint8_t)(h >> 8);
    }
    for (int k = 0; k < 2; k++) {
        enum tensor_type t = k ? TYPE_BF16 : TYPE_F16;
        dequantize_row(t, in, f, 256);
        quantize_row(t, f, out, 256);
        cr_assert_eq(memcmp(in, out, sizeof in), 0, "%s bytes changed", type_name(t));
    }
}

Test(quant, q8_1_sum_is_scale_times_code_sum)
{
    float *x = normal_data(3, 64);
    uint8_t q[72];
    quant_q8_1(x, q, 64);
    for (int b = 0; b < 2; b++) {
        const uint8_t *blk = q + 36 * b;
        int sum = 0;
        for (int j = 0; j < 32; j++)
            sum += (int8_t)blk[4 + j];
        cr_assert_eq(load_f16(blk + 2), f16_to_f32(f32_to_f16(load_f16(blk) * (float)sum)));
    }
    free(x);
}

/* Q8_0 codes round half away from zero, as roundf does: a block whose
 * largest value is 127 has scale 1, so the values themselves are rounded,
 * ties and near-ties included. */
Test(quant, q8_codes_round_half_away_from_zero)
{
    static const float v[32] = { 127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 126.5f, -126.5f, 0.49999997f,
                                 -0.49999997f, 0.50000006f, 3.4999998f, -3.5000002f, 0, -0.0f, 64.5f, -64.5f, 10.25f,
                                 -10.75f, 99.5f, -99.5f, 7.5f, -7.5f, 0.25f, -0.75f, 120.5f, -120.5f, 1e-8f, -1e-8f,
                                 33.5f, -127.0f };
    uint8_t q[34];
    quant_q8_0(v, q, 32);
    cr_assert_eq(load_f16(q), 1.0f);
    for (int j = 0; j < 32; j++)
        cr_assert_eq((int8_t)q[2 + j], (int)roundf(v[j]), "value %.9g: code %d, roundf %g", (double)v[j], (int8_t)q[2 + j],
                     (double)roundf(v[j]));
}

Test(quant, unsupported_types_are_refused)
{
    float x[256] = { 0 };
    uint8_t q[1024];
    cr_assert_eq(quantize_row(TYPE_Q2_K, x, q, 256), -1);
    cr_assert_eq(dequantize_row(TYPE_IQ2_XXS, q, x, 256), -1);
    cr_assert_eq(type_can_dequantize(TYPE_Q3_K), 1);
    cr_assert_eq(type_can_quantize(TYPE_Q3_K), 0);
}

/* Plain min/max scaling per 32 (Q4_K/Q5_K) or 16 (Q6_K) elements with
 * unquantized float scales: the baseline the search must beat even though
 * the search's own scales are squeezed into 6/8 bits. */
static double naive_rmse(const float *x, int64_t n, int nmax, bool symmetric)
{
    int group = symmetric ? 16 : 32;
    double e = 0;
    for (int64_t g = 0; g < n; g += group) {
        float lo = x[g], hi = x[g], amax = 0;
        for (int i = 0; i < group; i++) {
            lo = fminf(lo, x[g + i]);
            hi = fmaxf(hi, x[g + i]);
            amax = fmaxf(amax, fabsf(x[g + i]));
        }
        lo = fminf(lo, 0);
        for (int i = 0; i < group; i++) {
            float v = x[g + i], y;
            if (symmetric) {
                float d = amax / (float)(nmax - 1);
                y = d * fminf(fmaxf(roundf(v / d), (float)-nmax), (float)(nmax - 1));
            } else {
                float d = (hi - lo) / (float)nmax;
                y = d * roundf((v - lo) / d) + lo;
            }
            e += (double)(v - y) * (v - y);
        }
    }
    return sqrt(e / (double)n);
}

Test(quant, k_quant_search_beats_min_max)
{
    float *x = normal_data(11, N);
    struct {
        enum tensor_type t;
        int nmax;
        bool symmetric;
    } k[] = { { TYPE_Q4_K, 15, false }, { TYPE_Q5_K, 31, false }, { TYPE_Q6_K, 32, true } };
    for (int i = 0; i < 3; i++) {
        double searched = rmse_of(k[i].t, x, N), naive = naive_rmse(x, N, k[i].nmax, k[i].symmetric);
        cr_assert_lt(searched, 0.97 * naive, "%s: search %.5f vs min/max %.5f", type_name(k[i].t), searched, naive);
    }
    free(x);
}

Test(quant, k_scale_packing_round_trips)
{
    uint8_t sc[8], mn[8], p[12], sc2[8], mn2[8];
    for (int trial = 0; trial < 64; trial++) {
        for (int j = 0; j < 8; j++) {
            sc[j] = (uint8_t)((trial * 7 + j * 13) & 63);
            mn[j] = (uint8_t)((trial * 5 + j * 29 + 3) & 63);
        }
        k_scales_pack(sc, mn, p);
        k_scales_unpack(p, sc2, mn2);
        cr_assert(memcmp(sc, sc2, 8) == 0 && memcmp(mn, mn2, 8) == 0);
    }
}
