/* cuda_tests.c: the GPU test suite. A plain runner rather than Criterion
 * because the GPU machine has no Criterion, and because CUDA must be
 * initialized in the process that uses it. Without a GPU every test reports
 * skipped. Last line: "cuda: N passed, N failed, N skipped". */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/quantize_q8_1.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "rng.h"

static int failures_in_test;

/* Records a failed expectation and says where; returns whether it held.
 * Call sites return themselves when the rest of a test depends on it. */
static bool check_at(bool ok, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static bool check_at(bool ok, const char *file, int line, const char *cond, const char *fmt, ...)
{
    if (ok)
        return true;
    printf("    %s:%d: %s: ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    failures_in_test++;
    return false;
}

#define CHECK(cond, ...) check_at((cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

static struct rng rng = { 0x2545f4914f6cdd1dull };

static float normal(void) { return rng_normal(&rng); }

static void device_is_described(void)
{
    struct cuda_device_info info;
    struct error e;
    if (!CHECK(cuda_device_query(0, &info, &e) == 0, "%s", e.msg))
        return;
    printf("    %s: sm_%d%d, %d SMs, %.1f GiB (%.1f free), %zu KiB opt-in smem\n", info.name, info.sm_major,
           info.sm_minor, info.sm_count, (double)info.total_bytes / 1073741824.0,
           (double)info.free_bytes / 1073741824.0, info.smem_optin_bytes / 1024);
    if (!CHECK(info.name[0] && info.sm_count > 0 && info.sm_major >= 7, "implausible device"))
        return;
}

static void upload_download_round_trip(void)
{
    size_t n = 1 << 20;
    uint8_t *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)(i * 2654435761u >> 13);
    void *d;
    struct error e;
    if (!CHECK(cuda_alloc(&d, n, "round trip", &e) == 0, "%s", e.msg))
        return;
    int ok = cuda_upload(d, a, n, &e) == 0 && cuda_download(b, d, n, &e) == 0;
    cuda_free(d);
    if (!CHECK(ok, "%s", e.msg))
        return;
    if (!CHECK(memcmp(a, b, n) == 0, "bytes differ after the round trip"))
        return;
    free(a);
    free(b);
}

static void out_of_memory_is_an_error(void)
{
    void *d;
    struct error e;
    if (!CHECK(cuda_alloc(&d, (size_t)1 << 50, "huge", &e) == -1, "a 1 PiB allocation succeeded"))
        return;
    if (!CHECK(strstr(e.msg, "out of device memory allocating 'huge' (1125899906842624 bytes;"), "%s", e.msg))
        return;
    /* The failure must not be left latched for the next launch to take. */
    if (!CHECK(cuda_launch_begin("next kernel", &e) == 0, "%s", e.msg))
        return;
}

/* GPU Q8_1 against the CPU reference, byte for byte, at the model widths
 * the kernels will see and at extreme scales. */
static void quantize_q8_1_matches_cpu(void)
{
    static const int64_t sizes[] = { 32, 896, 4096, 4864, 12288, 151936 };
    static const float scales[] = { 1.0f, 1e-4f, 3e3f, 0.0f };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++) {
            int64_t n = sizes[si];
            size_t qbytes = (size_t)(n / 32) * 36;
            float *x = malloc((size_t)n * sizeof *x);
            uint8_t *cpu = malloc(qbytes), *gpu = malloc(qbytes);
            for (int64_t i = 0; i < n; i++)
                x[i] = normal() * scales[sc];
            quant_q8_1(x, cpu, n);
            void *dx, *dy;
            struct error e;
            if (!CHECK(cuda_alloc(&dx, (size_t)n * 4, "x", &e) == 0 && cuda_alloc(&dy, qbytes, "y", &e) == 0, "%s",
                  e.msg))
                return;
            int ok = cuda_upload(dx, x, (size_t)n * 4, &e) == 0 && cuda_quantize_q8_1(dx, dy, n, NULL, &e) == 0 &&
                     cuda_sync(&e) == 0 && cuda_download(gpu, dy, qbytes, &e) == 0;
            cuda_free(dx);
            cuda_free(dy);
            if (!CHECK(ok, "%s", e.msg))
                return;
            size_t first = qbytes;
            for (size_t i = 0; i < qbytes && first == qbytes; i++)
                if (cpu[i] != gpu[i])
                    first = i;
            if (first != qbytes) {
                const uint8_t *c = cpu + first / 36 * 36, *g = gpu + first / 36 * 36;
                printf("    block %zu: cpu d=%g s=%g codes", first / 36, (double)load_f16(c), (double)load_f16(c + 2));
                for (int j = 0; j < 32; j++)
                    printf(" %d", (int8_t)c[4 + j]);
                printf("\n    block %zu: gpu d=%g s=%g codes", first / 36, (double)load_f16(g), (double)load_f16(g + 2));
                for (int j = 0; j < 32; j++)
                    printf(" %d", (int8_t)g[4 + j]);
                printf("\n");
            }
            if (!CHECK(first == qbytes, "n=%lld scale=%g: first differing byte %zu", (long long)n, (double)scales[sc],
                  first))
                return;
            free(x);
            free(cpu);
            free(gpu);
        }
    }
}

static void quantize_q8_1_refuses_ragged_length(void)
{
    struct error e;
    if (!CHECK(cuda_quantize_q8_1(NULL, NULL, 33, NULL, &e) == -1, "accepted n=33"))
        return;
    if (!CHECK(strcmp(e.msg, "quantize_q8_1: length 33 is not a positive multiple of 32") == 0, "%s", e.msg))
        return;
}

/* The GEMV against quant_dot.c's Q8_1 reference, row by row, at model
 * widths; and twice in a row for the same bits. */
static void gemv_matches_the_q8_1_reference(void)
{
    static const struct {
        enum tensor_type t;
        int64_t k, n;
    } cases[] = { { TYPE_Q8_0, 4096, 64 }, { TYPE_Q8_0, 896, 40 },  { TYPE_Q4_K, 4096, 64 },
                  { TYPE_Q4_K, 12288, 24 }, { TYPE_Q6_K, 4096, 48 }, { TYPE_Q6_K, 4864, 16 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        enum tensor_type t = cases[c].t;
        int64_t k = cases[c].k, n = cases[c].n;
        size_t wbytes = type_bytes(t, (uint64_t)(k * n)), xbytes = (size_t)(k / 32) * 36;
        float *wf = malloc((size_t)(k * n) * sizeof *wf), *xf = malloc((size_t)k * sizeof *xf);
        float *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got),
              *again = malloc((size_t)n * sizeof *again);
        uint8_t *wq = malloc(wbytes), *xq = malloc(xbytes);
        for (int64_t i = 0; i < k * n; i++)
            wf[i] = 0.02f * normal();
        for (int64_t i = 0; i < k; i++)
            xf[i] = normal();
        quantize_row(t, wf, wq, k * n);
        quant_q8_1(xf, xq, k);
        size_t row_bytes = wbytes / (size_t)n;
        for (int64_t r = 0; r < n; r++)
            dot_q8_1(t, wq + (size_t)r * row_bytes, xq, k, &ref[r]);
        void *dw, *dx, *dy;
        struct error e;
        if (!CHECK(cuda_alloc(&dw, wbytes, "w", &e) == 0 && cuda_alloc(&dx, xbytes, "x", &e) == 0 &&
              cuda_alloc(&dy, (size_t)n * 4, "y", &e) == 0, "%s", e.msg))
            return;
        int ok = cuda_upload(dw, wq, wbytes, &e) == 0 && cuda_upload(dx, xq, xbytes, &e) == 0 &&
                 cuda_gemv_q8_1(t, dw, dx, dy, k, n, NULL, &e) == 0 && cuda_download(got, dy, (size_t)n * 4, &e) == 0 &&
                 cuda_gemv_q8_1(t, dw, dx, dy, k, n, NULL, &e) == 0 && cuda_download(again, dy, (size_t)n * 4, &e) == 0;
        cuda_free(dw), cuda_free(dx), cuda_free(dy);
        if (!CHECK(ok, "%s", e.msg))
            return;
        for (int64_t r = 0; r < n; r++)
            if (!CHECK(fabsf(got[r] - ref[r]) <= 1e-4f * (fabsf(ref[r]) + 1.0f), "%s k=%lld row %lld: gpu %g, reference %g",
                  type_name(t), (long long)k, (long long)r, (double)got[r], (double)ref[r]))
                return;
        if (!CHECK(memcmp(got, again, (size_t)n * 4) == 0, "%s: two runs differ", type_name(t)))
            return;
        free(wf), free(xf), free(ref), free(got), free(again), free(wq), free(xq);
    }
}

static void gemv_refuses_what_it_cannot_do(void)
{
    struct error e;
    if (!CHECK(cuda_gemv_q8_1(TYPE_Q5_1, NULL, NULL, NULL, 4096, 1, NULL, &e) == -1, "Q5_1 accepted"))
        return;
    if (!CHECK(strcmp(e.msg, "gemv: no GPU kernel for weight type Q5_1 (Q8_0, Q4_K, Q6_K)") == 0, "%s", e.msg))
        return;
    if (!CHECK(cuda_gemv_q8_1(TYPE_Q4_K, NULL, NULL, NULL, 896, 1, NULL, &e) == -1, "896 accepted for Q4_K"))
        return;
    if (!CHECK(strcmp(e.msg, "gemv: Q4_K rows of 896 are not a positive multiple of 256") == 0, "%s", e.msg))
        return;
}

static const struct {
    const char *name;
    void (*run)(void);
} tests[] = {
    { "device_is_described", device_is_described },
    { "upload_download_round_trip", upload_download_round_trip },
    { "out_of_memory_is_an_error", out_of_memory_is_an_error },
    { "quantize_q8_1_matches_cpu", quantize_q8_1_matches_cpu },
    { "quantize_q8_1_refuses_ragged_length", quantize_q8_1_refuses_ragged_length },
    { "gemv_matches_the_q8_1_reference", gemv_matches_the_q8_1_reference },
    { "gemv_refuses_what_it_cannot_do", gemv_refuses_what_it_cannot_do },
};

int main(void)
{
    int n_dev = 0, passed = 0, failed = 0, skipped = 0;
    struct error e;
    if (cuda_device_count(&n_dev, &e)) {
        printf("cuda: %s\n", e.msg);
        n_dev = 0;
        failed++;
    }
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (n_dev == 0) {
            printf("[SKIP] cuda::%s (no CUDA device)\n", tests[i].name);
            skipped++;
            continue;
        }
        failures_in_test = 0;
        tests[i].run();
        printf("[%s] cuda::%s\n", failures_in_test ? "FAIL" : "PASS", tests[i].name);
        failures_in_test ? failed++ : passed++;
    }
    printf("cuda: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
