/* cuda_tests.c: the GPU test suite's runner and the device layer's tests
 * (the kernels' and the backend's are in test_kernels.c, test_backend.c).
 * Without a GPU every test reports skipped, and a test may report itself
 * skipped (test_skip: a real model not carried along). Last line: "cuda: N
 * passed, N failed, N skipped". */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/quantize_q8_1.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "rng.h"
#include "runner.h"

int failures_in_test;
char test_skip_reason[256];
struct rng test_rng = { 0x2545f4914f6cdd1dull };

void test_skip(const char *why) { snprintf(test_skip_reason, sizeof test_skip_reason, "%s", why); }

/* Records a failed expectation and says where; returns whether it held.
 * Call sites return themselves when the rest of a test depends on it. */
bool check_at(bool ok, const char *file, int line, const char *cond, const char *fmt, ...)
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

static const struct {
    const char *name;
    void (*run)(void);
} tests[] = {
    { "device_is_described", device_is_described },
    { "upload_download_round_trip", upload_download_round_trip },
    { "out_of_memory_is_an_error", out_of_memory_is_an_error },
    { "quantize_q8_1_matches_cpu", quantize_q8_1_matches_cpu },
    { "quantize_q8_1_refuses_ragged_length", quantize_q8_1_refuses_ragged_length },
    { "matmul_matches_the_reference", test_matmul_matches_the_reference },
    { "per_model_matmul_gives_the_generic_bits", test_matmul_per_model_gives_the_generic_bits },
    { "prompt_matmul_on_tensor_cores", test_mmq_matches_the_reference },
    { "prompt_matmul_of_f16_and_bf16_weights", test_mmq_float_weights },
    { "prompt_matmul_of_wide_ranging_columns", test_mmq_wide_columns },
    { "embed_is_the_cpu_decoder", test_kernels_embed },
    { "norms_and_rope_match_the_cpu", test_kernels_norms },
    { "kv_store_and_attention_match_the_cpu", test_kernels_attention },
    { "elementwise", test_kernels_elementwise },
    { "argmax", test_kernels_argmax },
    { "backend_matches_the_cpu", test_backend_matches_the_cpu },
    { "backend_prompt_kernels_match_the_cpu", test_backend_prompt_kernels_match_the_cpu },
    { "backend_is_bitwise_reproducible", test_backend_is_bitwise_reproducible },
    { "backend_rotation_changes_no_bits", test_backend_rotation_changes_no_bits },
    { "backend_spans_change_no_bits", test_backend_spans_change_no_bits },
    { "backend_feeds_greedy_tokens", test_backend_feeds_greedy_tokens },
    { "backend_batches_equal_single_steps", test_backend_batches_equal_single_steps },
    { "backend_two_engines_run_concurrently", test_backend_two_engines_run_concurrently },
    { "backend_engines_share_weights", test_backend_engines_share_weights },
    { "backend_refuses_what_it_cannot_run", test_backend_refuses_what_it_cannot_run },
    { "backend_bounds_only_in_a_measuring_build", test_backend_bounds_only_in_a_measuring_build },
    { "backend_gives_transformers_greedy_tokens", test_backend_transformers_fixtures },
    { "real_qwen_agrees_with_llama_cpp", test_real_qwen_agrees_with_llama_cpp },
    { "real_gemma_agrees_with_llama_cpp", test_real_gemma_agrees_with_llama_cpp },
};

/* usage: minfer-cuda-tests [NAME]: every test, or those whose names hold NAME (the others are not run, nor counted) */
int main(int argc, char **argv)
{
    int n_dev = 0, passed = 0, failed = 0, skipped = 0;
    struct error e;
    if (cuda_device_count(&n_dev, &e)) {
        printf("cuda: %s\n", e.msg);
        n_dev = 0;
        failed++;
    }
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1]))
            continue;
        if (n_dev == 0) {
            printf("[SKIP] cuda::%s (no CUDA device)\n", tests[i].name);
            skipped++;
            continue;
        }
        failures_in_test = 0;
        test_skip_reason[0] = 0;
        tests[i].run();
        if (test_skip_reason[0] && !failures_in_test) {
            printf("[SKIP] cuda::%s (%s)\n", tests[i].name, test_skip_reason);
            skipped++;
            continue;
        }
        printf("[%s] cuda::%s\n", failures_in_test ? "FAIL" : "PASS", tests[i].name);
        failures_in_test ? failed++ : passed++;
    }
    printf("cuda: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
