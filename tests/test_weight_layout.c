/* test_weight_layout.c: the GPU's row layout (runtime/cuda/weight_layout.h)
 * is lossless: every type's random rows, packed and unpacked, are their
 * GGUF bytes again; the split types really move their fields, into rows of
 * whole 16-byte units whose code plane starts each row. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/weight_layout.h"

static const enum tensor_type types[] = { TYPE_F32,  TYPE_F16,  TYPE_BF16, TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0,
                                          TYPE_Q5_1, TYPE_Q8_0, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };

Test(weight_layout, rows_round_trip_byte_exact)
{
    srand(7);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum tensor_type t = types[i];
        const struct type_info *ti = type_info(t);
        /* 19 blocks: Qwen2.5-0.5B's 4864-wide Q6_K rows, whose 3990 bytes need padding */
        static const int64_t blocks[] = { 1, 19, 28, 128 };
        for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
            const int64_t k = blocks[b] * ti->block_elems, rows = 5;
            const size_t gguf = type_bytes(t, (uint64_t)k), stored = cuda_row_bytes(t, k);
            uint8_t *src = malloc((size_t)rows * gguf), *packed = malloc((size_t)rows * stored), *back = malloc((size_t)rows * gguf);
            for (size_t j = 0; j < (size_t)rows * gguf; j++)
                src[j] = (uint8_t)rand();
            cuda_rows_pack(t, k, rows, src, packed);
            cuda_rows_unpack(t, k, rows, packed, back);
            cr_assert(memcmp(src, back, (size_t)rows * gguf) == 0, "%s, %lld blocks a row: unpacked bytes differ",
                      ti->name, (long long)blocks[b]);
            const struct cuda_planes pl = cuda_planes_of(t);
            if (pl.n) {
                cr_assert_eq(stored % 16, 0, "%s: a stored row of %zu bytes", ti->name, stored);
                cr_assert(stored >= gguf && stored < gguf + 16, "%s: %zu stored bytes for %zu", ti->name, stored, gguf);
                cr_assert(blocks[b] == 1 || memcmp(src, packed, gguf) != 0, "%s: packing left the row as it was", ti->name);
                cr_assert_eq(pl.size[0] % 16, 0, "%s: the code plane's fields are not 16-byte units", ti->name);
                int sum = 0;
                for (int f = 0; f < pl.n; f++)
                    sum += pl.size[f];
                cr_assert_eq(sum, (int)ti->block_bytes, "%s: planes of %d bytes for a %u-byte block", ti->name, sum,
                             ti->block_bytes);
                for (int64_t r = 0; r < rows; r++)
                    for (size_t j = gguf; j < stored; j++)
                        cr_assert_eq(packed[(size_t)r * stored + j], 0, "%s: padding byte %zu of row %lld", ti->name, j,
                                     (long long)r);
            } else {
                cr_assert_eq(stored, gguf, "%s keeps its GGUF rows", ti->name);
            }
            free(src), free(packed), free(back);
        }
    }
}

Test(weight_layout, fields_land_in_their_planes)
{
    /* Q8_0, two blocks: d0 q0[32] d1 q1[32] -> q0 q1 d0 d1 */
    uint8_t src[68], packed[80];
    for (int j = 0; j < 68; j++)
        src[j] = (uint8_t)j;
    cr_assert_eq(cuda_row_bytes(TYPE_Q8_0, 64), 80);
    cuda_rows_pack(TYPE_Q8_0, 64, 1, src, packed);
    cr_assert(memcmp(packed, src + 2, 32) == 0 && memcmp(packed + 32, src + 36, 32) == 0, "the code plane");
    cr_assert(packed[64] == 0 && packed[65] == 1 && packed[66] == 34 && packed[67] == 35, "the scale plane");
}
