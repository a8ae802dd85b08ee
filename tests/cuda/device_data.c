/* device_data.c: device copies of test data for the CUDA kernel tests
 * (runner.h): made and freed in one place; a failure ends the run. */
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/weight_layout.h"
#include "quant/quant.h"
#include "runner.h"

/* Device copies made and freed in one place. */
void *up(const void *src, size_t bytes)
{
    void *d;
    struct error e;
    if (cuda_alloc(&d, bytes ? bytes : 4, "test data", &e) || (src && cuda_upload(d, src, bytes, &e))) {
        printf("    %s\n", e.msg);
        exit(1);
    }
    return d;
}

/* rows rows of k values of type t (GGUF bytes) on the device, in the GPU's
 * row layout (weight_layout.h), as the backend uploads them. */
void *up_rows(enum tensor_type t, int64_t k, int64_t rows, const void *gguf)
{
    size_t bytes = (size_t)rows * cuda_row_bytes(t, k);
    uint8_t *packed = malloc(bytes);
    cuda_rows_pack(t, k, rows, gguf, packed);
    void *d = up(packed, bytes);
    free(packed);
    return d;
}

/* n floats with every bit set: a decode pair's scratch for its Q8_1 product */
float *pair_scratch_up(int64_t n)
{
    void *full = malloc((size_t)n * 4), *d;
    memset(full, 0xff, (size_t)n * 4);
    d = up(full, (size_t)n * 4);
    free(full);
    return d;
}

void down(void *dst, const void *src, size_t bytes)
{
    struct error e;
    if (cuda_sync(&e) || cuda_download(dst, src, bytes, &e)) {
        printf("    %s\n", e.msg);
        exit(1);
    }
}

float *randoms(int64_t n, float sd)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = sd * normal();
    return x;
}
