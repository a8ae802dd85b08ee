/* runner.h: the GPU test runner's shared parts (a plain runner, not
 * Criterion: the GPU machine has no Criterion, and CUDA must be used in the
 * process that initialized it). A test is a void function; CHECK records a
 * failed expectation with its place and returns whether it held, and a
 * test returns when the rest depends on it. */
#ifndef MINFER_TESTS_CUDA_RUNNER_H
#define MINFER_TESTS_CUDA_RUNNER_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "quant/tensor_type.h"
#include "rng.h"

extern int failures_in_test;
extern struct rng test_rng;

bool check_at(bool ok, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define CHECK(cond, ...) check_at((cond), __FILE__, __LINE__, #cond, __VA_ARGS__)
/* Reports the running test skipped, saying why (it then returns), unless
 * an expectation failed. */
void test_skip(const char *why);

static inline float normal(void) { return rng_normal(&test_rng); }

/* Device data for the kernel tests (device_data.c); a failure ends the run. */
void *up(const void *src, size_t bytes);                                /* a device copy of bytes at src (NULL: uninitialized) */
void *up_rows(enum tensor_type t, int64_t k, int64_t rows, const void *gguf); /* GGUF rows in the GPU's row layout */
void down(void *dst, const void *src, size_t bytes);                   /* after the device is idle */
float *randoms(int64_t n, float sd);                                    /* n normal values of deviation sd */
float *pair_scratch_up(int64_t n);                                     /* n floats, every bit set: a decode pair's Q8_1 scratch */

/* The gates in double, for references. */
static inline double silu_d(double v) { return v / (1 + exp(-v)); }
static inline double gelu_d(double v) { return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }

/* The tests, by file. */
void test_matmul_matches_the_reference(void);
void test_matmul_per_model_gives_the_generic_bits(void);
void test_kernels_embed(void);
void test_kernels_norms(void);
void test_kernels_attention(void);
void test_kernels_elementwise(void);
void test_kernels_argmax(void);
void test_mmq_matches_the_reference(void);
void test_mmq_float_weights(void);
void test_mmq_wide_columns(void);
void test_backend_matches_the_cpu(void);
void test_backend_prompt_kernels_match_the_cpu(void);
void test_backend_is_bitwise_reproducible(void);
void test_backend_rotation_changes_no_bits(void);
void test_backend_spans_change_no_bits(void);
void test_backend_feeds_greedy_tokens(void);
void test_backend_batches_equal_single_steps(void);
void test_backend_two_engines_run_concurrently(void);
void test_backend_engines_share_weights(void);
void test_backend_refuses_what_it_cannot_run(void);
void test_backend_bounds_only_in_a_measuring_build(void);
void test_backend_transformers_fixtures(void);
void test_real_qwen_agrees_with_llama_cpp(void);
void test_real_gemma_agrees_with_llama_cpp(void);

#endif
