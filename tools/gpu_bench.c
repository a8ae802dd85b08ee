/* gpu_bench.c: the decode GEMV (cuda_matmul, one column) on the GPU at Qwen3-8B's shapes, against the
 * memory-bandwidth floor measured in the same run (a device-to-device copy).
 * Prints a table. usage: minfer-gpu-bench [REPS] */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"
#include "quant/quant.h"
#include "rng.h"

static int fail_line(const struct error *e) { return fprintf(stderr, "gpu-bench: %s\n", e->msg), 1; }

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 200, n_dev = 0;
    struct error e;
    if (reps < 1 || cuda_device_count(&n_dev, &e) || n_dev == 0)
        return fprintf(stderr, "gpu-bench: no CUDA device (or bad REPS)\n"), 1;
    struct cuda_device_info info;
    if (cuda_device_query(0, &info, &e))
        return fail_line(&e);
    /* the yardstick: copy 1 GiB device to device, bytes read + written */
    size_t big = 1u << 30;
    void *a, *b;
    struct cuda_timer *t;
    float ms;
    if (cuda_alloc(&a, big, "copy source", &e) || cuda_alloc(&b, big, "copy target", &e))
        return fail_line(&e);
    cuda_copy(b, a, big, &e);
    if (cuda_timer_start(&t, &e))
        return fail_line(&e);
    for (int i = 0; i < 10; i++)
        cuda_copy(b, a, big, &e);
    if (cuda_timer_stop(t, &ms, &e))
        return fail_line(&e);
    double floor_gbs = 2.0 * (double)big * 10 / (ms * 1e-3) / 1e9;
    cuda_free(a), cuda_free(b);
    printf("%s, %d SMs; device-to-device copy: %.0f GB/s (read + write)\n\n", info.name, info.sm_count, floor_gbs);
    printf("| weights | k | n | MiB | us per GEMV | GB/s | of copy bandwidth |\n|---|---:|---:|---:|---:|---:|---:|\n");
    static const struct {
        enum tensor_type t;
        int64_t k, n;
        const char *what;
    } shapes[] = { { TYPE_Q4_K, 4096, 4096, "Q4_K (attn_q, attn_output)" }, { TYPE_Q4_K, 4096, 12288, "Q4_K (ffn_gate/up)" },
                   { TYPE_Q6_K, 12288, 4096, "Q6_K (ffn_down)" }, { TYPE_Q6_K, 4096, 151936, "Q6_K (output)" },
                   { TYPE_Q8_0, 4096, 4096, "Q8_0" } };
    struct rng r;
    rng_seed(&r, 1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t k = shapes[s].k, n = shapes[s].n;
        size_t wbytes = type_bytes(shapes[s].t, (uint64_t)(k * n));
        uint8_t *wq = malloc(wbytes);
        float *row = malloc((size_t)k * sizeof *row);
        size_t row_bytes = wbytes / (size_t)n;
        for (int64_t i = 0; i < k; i++) /* one random row, repeated: content does not change the traffic */
            row[i] = 0.02f * rng_normal(&r);
        quantize_row(shapes[s].t, row, wq, k);
        for (int64_t j = 1; j < n; j++)
            for (size_t b2 = 0; b2 < row_bytes; b2++)
                wq[(size_t)j * row_bytes + b2] = wq[b2];
        void *dw, *dx, *dxf, *dy;
        if (cuda_alloc(&dw, wbytes, "weights", &e) || cuda_alloc(&dxf, (size_t)k * 4, "x", &e) ||
            cuda_alloc(&dx, (size_t)(k / 32) * 36, "x q8_1", &e) || cuda_alloc(&dy, (size_t)n * 4, "y", &e) ||
            cuda_upload(dw, wq, wbytes, &e) || cuda_upload(dxf, row, (size_t)k * 4, &e) ||
            cuda_quantize_q8_1(dxf, dx, k, NULL, &e) || cuda_matmul(shapes[s].t, dw, k, n, dx, 1, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e) ||
            cuda_timer_start(&t, &e))
            return fail_line(&e);
        for (int i = 0; i < reps; i++)
            if (cuda_matmul(shapes[s].t, dw, k, n, dx, 1, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e))
                return fail_line(&e);
        if (cuda_timer_stop(t, &ms, &e))
            return fail_line(&e);
        double us = ms * 1e3 / reps, gbs = (double)wbytes / (us * 1e-6) / 1e9;
        printf("| %s | %lld | %lld | %.1f | %.1f | %.0f | %.0f%% |\n", shapes[s].what, (long long)k, (long long)n,
               (double)wbytes / 1048576.0, us, gbs, 100.0 * gbs / floor_gbs);
        cuda_free(dw), cuda_free(dx), cuda_free(dxf), cuda_free(dy);
        free(wq), free(row);
    }
    return 0;
}
