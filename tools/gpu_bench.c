/* gpu_bench.c: the decode GEMV (cuda_matmul, one column) on the GPU at Qwen3-8B's shapes, against the
 * memory-bandwidth floor measured in the same run (a device-to-device copy), then a decode step's
 * small kernels (norm, RoPE, attention) at two models' shapes, attention after 4096 and 16384
 * positions (its cache read against the same floor), then what one dependency costs
 * (gpu_bench_sync.cu).
 * Each GEMV streams its weights from DRAM (copies beyond the L2, used in turn).
 * Prints a table. usage: minfer-gpu-bench [REPS [SHAPE]] (SHAPE: one row of the table, from 0), or
 * minfer-gpu-bench prompt [REPS]: a prompt's matmuls at the same shapes (prompt_matmuls). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"
#include "cuda/weight_layout.h"
#include "gpu_bench.h"
#include "graph_ops.h"
#include "kv_cache.h"
#include "quant/quant.h"
#include "rng.h"

#define L2_FLUSH_BYTES ((size_t)256 << 20) /* a GEMV's weights, counted over its copies */

static int fail_line(const struct error *e) { return fprintf(stderr, "gpu-bench: %s\n", e->msg), 1; }


/* The small kernels of a decode step, each launched reps times back to
 * back (each launch waits for the one before, as in a step): us per launch,
 * at Qwen3-8B's and Qwen2.5-0.5B's shapes, at a context of 128 positions. */
#define SMALL_LAUNCHES 100 /* a graph's launches of one small kernel */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int gpu_bench_replayed_us(gpu_bench_launch fn, const void *ctx, int n, int reps, double *us, struct error *e)
{
    void *st, *exec = NULL;
    if (cuda_stream_create(&st, e) || cuda_capture_begin(st, e))
        return -1;
    for (int i = 0; i < n; i++)
        if (fn(ctx, i, st, e))
            return cuda_capture_abort(st), -1;
    if (cuda_capture_end(st, &exec, e) || cuda_graph_launch(exec, st, e) || cuda_stream_sync(st, "warm-up", e))
        return -1;
    const double t0 = now_seconds(); /* a graph of n launches: the GPU, not the host, sets the pace */
    for (int i = 0; i < reps; i++)
        if (cuda_graph_launch(exec, st, e))
            return -1;
    if (cuda_stream_sync(st, "replayed launches", e))
        return -1;
    *us = (now_seconds() - t0) * 1e6 / reps / n;
    cuda_graph_destroy(exec);
    cuda_stream_destroy(st);
    return 0;
}

/* A decode step's small kernels at one model's shapes: kind 0 the norm, 1
 * the heads, 2 attention, 3 the heads reading the step's rotation (formed
 * by the graph's first launch, as by a step's first layer). */
struct small {
    int kind;
    int64_t d, h, hk, hd, n_ctx, chunk;
    void *x, *w, *q8, *q, *kl, *vl, *att, *y, *pos, *rot;
    struct cuda_heads parts[2];
    struct cuda_kv_dest store;
};

static int small_launch(const void *ctx, int i, void *st, struct error *e)
{
    const struct small *m = ctx;
    const struct cuda_rotation rot = { m->rot, i > 0 };
    if (m->kind == 0)
        return cuda_rms_norm(m->x, m->w, 1e-6f, m->d, 1, NULL, NULL, m->q8, st, e);
    if (m->kind == 1 || m->kind == 3)
        return cuda_head_norm_rope_parts(m->parts, 2, 1e-6f, 1e6f, 0, ROPE_NEOX, m->pos, m->hd, 1, &m->store,
                                         m->kind == 3 ? &rot : NULL, st, e);
    return cuda_attention(KV_F16, m->kl, m->vl, m->q, m->pos, m->hd, m->h, m->hk, 1, m->n_ctx, m->chunk, m->n_ctx, 0, m->att, m->y,
                          m->q8, st, e);
}

static int small_kernels(int reps)
{
    static const struct {
        const char *model;
        int64_t d_model, h, h_kv, hd;
        bool qk_norm;
    } models[] = { { "Qwen3-8B", 4096, 32, 8, 128, true }, { "Qwen2.5-0.5B", 896, 14, 2, 64, false } };
    const int64_t n_ctx = 640, chunk = cuda_attention_chunk(n_ctx);
    struct error e;
    printf("\n| kernel (one decode step's launch) | model | us per launch |\n|---|---|---:|\n");
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        const int64_t d = models[mi].d_model, h = models[mi].h, hk = models[mi].h_kv, hd = models[mi].hd;
        const size_t cache = (size_t)hk * (size_t)n_ctx * kv_row_bytes(KV_F16, hd);
        const size_t scratch = cuda_attention_scratch_floats(hd, h, n_ctx, chunk) * sizeof(float);
        void *x, *w, *q8, *q, *k, *v, *kl, *vl, *att, *y, *pos, *rot;
        const int32_t p = 127;
        if (cuda_alloc(&x, (size_t)d * 4, "x", &e) || cuda_alloc(&w, (size_t)d * 4, "w", &e) ||
            cuda_alloc(&q8, (size_t)(d / 32) * 36, "q8", &e) || cuda_alloc(&q, (size_t)(h * hd) * 4, "q", &e) ||
            cuda_alloc(&k, (size_t)(hk * hd) * 4, "k", &e) || cuda_alloc(&v, (size_t)(hk * hd) * 4, "v", &e) ||
            cuda_alloc(&kl, cache, "K cache", &e) || cuda_alloc(&vl, cache, "V cache", &e) ||
            cuda_alloc(&att, scratch, "attention scratch", &e) || cuda_alloc(&y, (size_t)(h * hd) * 4, "y", &e) ||
            cuda_alloc(&pos, sizeof p, "pos", &e) || cuda_upload(pos, &p, sizeof p, &e) ||
            cuda_alloc(&rot, (size_t)hd * 4, "rotation", &e) ||
            cuda_memset_async(x, 0, (size_t)d * 4, NULL, &e) || cuda_memset_async(w, 0, (size_t)d * 4, NULL, &e) ||
            cuda_memset_async(q, 0, (size_t)(h * hd) * 4, NULL, &e) || cuda_memset_async(k, 0, (size_t)(hk * hd) * 4, NULL, &e) ||
            cuda_memset_async(v, 0, (size_t)(hk * hd) * 4, NULL, &e) || cuda_memset_async(kl, 0, cache, NULL, &e) ||
            cuda_memset_async(vl, 0, cache, NULL, &e) || cuda_memset_async(att, 0, scratch, NULL, &e) ||
            cuda_sync(&e)) /* the zeros in before the graph's stream reads them */
            return fail_line(&e);
        struct small m = { 0, d, h, hk, hd, n_ctx, chunk, x, w, q8, q, kl, vl, att, y, pos, rot,
                           { { q, models[mi].qk_norm ? w : NULL, q, h }, { k, models[mi].qk_norm ? w : NULL, k, hk } },
                           { KV_F16, kl, vl, v, n_ctx } };
        for (m.kind = 0; m.kind < 4; m.kind++) {
            static const char *what[] = { "rms_norm, Q8_1 out", "Q/K head norm + RoPE + KV store (f16)",
                                          "attention over 128 positions (f16 KV), Q8_1 out",
                                          "the heads' launch reading the step's rotation" };
            double us;
            if (gpu_bench_replayed_us(small_launch, &m, SMALL_LAUNCHES, reps, &us, &e))
                return fail_line(&e);
            printf("| %s | %s | %.2f |\n", what[m.kind], models[mi].model, us);
        }
        void *all[] = { x, w, q8, q, k, v, kl, vl, att, y, pos, rot };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            cuda_free(all[i]);
    }
    return 0;
}

/* Decode attention after a long context: the query at position depth + 63
 * (the middle of bench's tg128 after -d depth, in the context bench sizes
 * for it, so the same chunks), its cache in copies used in turn that
 * overflow the L2 as a model's layers do. */
#define LONG_COPIES_MAX 64

struct long_att {
    int64_t h, hk, hd, n_ctx, chunk;
    int copies;
    void *kl[LONG_COPIES_MAX], *vl[LONG_COPIES_MAX], *q, *pos, *att, *y, *q8;
};

static int long_launch(const void *ctx, int i, void *st, struct error *e)
{
    const struct long_att *a = ctx;
    return cuda_attention(KV_F16, a->kl[i % a->copies], a->vl[i % a->copies], a->q, a->pos, a->hd, a->h, a->hk, 1,
                          a->n_ctx, a->chunk, a->n_ctx, 0, a->att, a->y, a->q8, st, e);
}

static int long_attention(int reps, double floor_gbs)
{
    static const struct {
        const char *model;
        int64_t h, h_kv, hd;
    } models[] = { { "Qwen3-8B", 32, 8, 128 }, { "Qwen2.5-0.5B", 14, 2, 64 } };
    static const int64_t depths[] = { 4096, 16384 };
    struct error e;
    printf("\n| attention after a context (f16 KV), Q8_1 out | model | chunk | us per launch | cache GB/s | of copy "
           "bandwidth |\n|---|---|---:|---:|---:|---:|\n");
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            struct long_att a = { models[mi].h, models[mi].h_kv, models[mi].hd, depths[di] + 129, 0, 0, { 0 }, { 0 },
                                  NULL, NULL, NULL, NULL, NULL };
            a.chunk = cuda_attention_chunk(a.n_ctx);
            const int32_t p = (int32_t)(depths[di] + 63);
            const size_t rb = kv_row_bytes(KV_F16, a.hd), cache = (size_t)a.hk * (size_t)a.n_ctx * rb;
            const size_t scratch = cuda_attention_scratch_floats(a.hd, a.h, a.n_ctx, a.chunk) * sizeof(float);
            const size_t qbytes = (size_t)(a.h * a.hd) * 4;
            a.copies = (int)((L2_FLUSH_BYTES + 2 * cache - 1) / (2 * cache));
            a.copies = a.copies < 2 ? 2 : a.copies > LONG_COPIES_MAX ? LONG_COPIES_MAX : a.copies;
            for (int c = 0; c < a.copies; c++)
                if (cuda_alloc(&a.kl[c], cache, "K cache", &e) || cuda_alloc(&a.vl[c], cache, "V cache", &e) ||
                    cuda_memset_async(a.kl[c], 0, cache, NULL, &e) || cuda_memset_async(a.vl[c], 0, cache, NULL, &e))
                    return fail_line(&e);
            if (cuda_alloc(&a.q, qbytes, "q", &e) || cuda_alloc(&a.y, qbytes, "y", &e) ||
                cuda_alloc(&a.q8, (size_t)(a.h * a.hd / 32) * 36, "q8", &e) ||
                cuda_alloc(&a.att, scratch, "attention scratch", &e) || cuda_alloc(&a.pos, sizeof p, "pos", &e) ||
                cuda_upload(a.pos, &p, sizeof p, &e) || cuda_memset_async(a.q, 0, qbytes, NULL, &e) ||
                cuda_memset_async(a.att, 0, scratch, NULL, &e) || cuda_sync(&e)) /* the zeros in before the graph's stream reads them */
                return fail_line(&e);
            double us;
            if (gpu_bench_replayed_us(long_launch, &a, SMALL_LAUNCHES, reps, &us, &e))
                return fail_line(&e);
            const double gbs = 2.0 * (double)(p + 1) * (double)rb * (double)a.hk / (us * 1e-6) / 1e9; /* K and V rows read */
            printf("| after %lld positions | %s | %lld | %.2f | %.0f | %.0f%% |\n", (long long)depths[di], models[mi].model,
                   (long long)a.chunk, us, gbs, 100.0 * gbs / floor_gbs);
            for (int c = 0; c < a.copies; c++)
                cuda_free(a.kl[c]), cuda_free(a.vl[c]);
            cuda_free(a.q), cuda_free(a.y), cuda_free(a.q8), cuda_free(a.att), cuda_free(a.pos);
        }
    return 0;
}

/* The device copy of a k x n matrix of type t: one random row, repeated
 * (the content does not change the work). NULL on failure (e says why). */
static void *matrix_up(enum tensor_type t, int64_t k, int64_t n, struct rng *r, struct error *e)
{
    const size_t row_bytes = type_bytes(t, (uint64_t)k), stored = (size_t)n * cuda_row_bytes(t, k);
    float *row = malloc((size_t)k * sizeof *row);
    uint8_t *wq = malloc(row_bytes * (size_t)n), *packed = malloc(stored);
    void *dw = NULL;
    if (row && wq && packed) {
        for (int64_t i = 0; i < k; i++)
            row[i] = 0.02f * rng_normal(r);
        quantize_row(t, row, wq, k);
        for (int64_t j = 1; j < n; j++)
            memcpy(wq + (size_t)j * row_bytes, wq, row_bytes);
        cuda_rows_pack(t, k, n, wq, packed);
        if (cuda_alloc(&dw, stored, "weights", e) == 0 && cuda_upload(dw, packed, stored, e))
            cuda_free(dw), dw = NULL;
    } else {
        fail(e, "out of memory");
    }
    free(row), free(wq), free(packed);
    return dw;
}

/* A prompt's matmuls at Qwen3-8B's shapes (PROMPT_COLUMNS columns of Q8_1
 * activations, y = W x; a pair silu(gate x) up x), each launched reps times
 * back to back: us per launch and tera-operations a second (2 k n
 * columns, a pair twice). MINFER_NO_WGMMA=1 in the environment measures
 * the mma.sync kernel where the wgmma one would run. */
#define PROMPT_COLUMNS 512
static int prompt_matmuls(int reps)
{
    static const struct {
        enum tensor_type t;
        int64_t k, n;
        bool pair;
        const char *what;
    } shapes[] = { { TYPE_Q4_K, 4096, 4096, false, "Q4_K attn_q, attn_output" },
                   { TYPE_Q4_K, 4096, 12288, true, "Q4_K gate + up pair" },
                   { TYPE_Q4_K, 12288, 4096, false, "Q4_K ffn_down" },
                   { TYPE_Q6_K, 12288, 4096, false, "Q6_K ffn_down" } };
    struct error e;
    struct rng r;
    rng_seed(&r, 2);
    const int64_t nt = PROMPT_COLUMNS;
    printf("\n%d-column prompt matmuls%s\n\n| weights | k | n | us per launch | TOP/s |\n|---|---:|---:|---:|---:|\n", PROMPT_COLUMNS,
           getenv("MINFER_NO_WGMMA") ? " (MINFER_NO_WGMMA set)" : "");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t k = shapes[s].k, n = shapes[s].n;
        float *x = malloc((size_t)(k * nt) * sizeof *x);
        uint8_t *xq = malloc((size_t)(k / 32) * 36 * (size_t)nt);
        if (!x || !xq)
            return free(x), free(xq), fprintf(stderr, "gpu-bench: out of memory\n"), 1;
        for (int64_t i = 0; i < k * nt; i++)
            x[i] = rng_normal(&r);
        for (int64_t c = 0; c < nt; c++)
            quant_q8_1(x + c * k, xq + (size_t)(c * (k / 32)) * 36, k);
        void *gate = matrix_up(shapes[s].t, k, n, &r, &e), *up = shapes[s].pair ? matrix_up(shapes[s].t, k, n, &r, &e) : NULL;
        void *dx = NULL, *dy = NULL;
        struct cuda_timer *t;
        float ms;
        if (!gate || (shapes[s].pair && !up) || cuda_alloc(&dx, (size_t)(k / 32) * 36 * (size_t)nt, "x q8_1", &e) ||
            cuda_upload(dx, xq, (size_t)(k / 32) * 36 * (size_t)nt, &e) || cuda_alloc(&dy, (size_t)(n * nt) * 4, "y", &e))
            return fail_line(&e);
        const struct cuda_matrix m[2] = { { shapes[s].t, gate, n, NULL, dy }, { shapes[s].t, up, n, NULL, NULL } };
        for (int i = 0; i <= reps; i++) {
            if (i == 1 && cuda_timer_start(&t, &e)) /* the first launch warms up */
                return fail_line(&e);
            if (cuda_matmul_multi(m, shapes[s].pair ? 2 : 1, k, dx, NULL, nt, NULL, shapes[s].pair ? CUDA_EPI_PAIR : CUDA_EPI_NONE,
                                  NULL, NULL, NULL, NULL, &e))
                return fail_line(&e);
        }
        if (cuda_timer_stop(t, &ms, &e))
            return fail_line(&e);
        const double us = ms * 1e3 / reps, ops = 2.0 * (double)k * (double)n * (double)nt * (shapes[s].pair ? 2 : 1);
        printf("| %s | %lld | %lld | %.1f | %.1f |\n", shapes[s].what, (long long)k, (long long)n, us, ops / (us * 1e-6) / 1e12);
        cuda_free(gate), cuda_free(up), cuda_free(dx), cuda_free(dy);
        free(x), free(xq);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "prompt") == 0)
        return prompt_matmuls(argc > 2 ? atoi(argv[2]) : 20);
    int reps = argc > 1 ? atoi(argv[1]) : 200, only = argc > 2 ? atoi(argv[2]) : -1, n_dev = 0;
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
        int pair; /* a SwiGLU pair (two such matrices): 1 with the Q8_1 product out, 2 the f32 product only */
    } shapes[] = { { TYPE_Q4_K, 4096, 4096, "Q4_K (attn_q, attn_output)", 0 },
                   { TYPE_Q4_K, 4096, 12288, "Q4_K (ffn_gate/up)", 0 },
                   { TYPE_Q4_K, 4096, 12288, "Q4_K gate + up pair, Q8_1 out", 1 },
                   { TYPE_Q4_K, 4096, 12288, "Q4_K gate + up pair, f32 out", 2 },
                   { TYPE_Q6_K, 12288, 4096, "Q6_K (ffn_down)", 0 },
                   { TYPE_Q6_K, 4096, 151936, "Q6_K (output)", 0 },
                   { TYPE_Q8_0, 4096, 4096, "Q8_0", 0 },
                   { TYPE_Q8_0, 4096, 12288, "Q8_0 gate + up pair, Q8_1 out", 1 },
                   { TYPE_Q8_0, 12288, 4096, "Q8_0 (ffn_down)", 0 },
                   { TYPE_Q8_0, 4096, 151936, "Q8_0 (output)", 0 } };
    struct rng r;
    rng_seed(&r, 1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only >= 0 && (size_t)only != s)
            continue;
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
        /* copies enough to overflow the 60 MB L2, used in turn, so each GEMV streams from DRAM as in a model */
        enum { COPIES_MAX = 32 };
        int copies = (int)(wbytes >= L2_FLUSH_BYTES / 2 ? 2 : (L2_FLUSH_BYTES + wbytes - 1) / wbytes);
        copies = copies > COPIES_MAX ? COPIES_MAX : copies; /* a matrix under 8 MiB: some L2 hits remain */
        void *dw[COPIES_MAX], *dx, *dxf, *dy, *dq;
        float *dt;
        uint8_t *full = malloc((size_t)n * 4);
        memset(full, 0xff, (size_t)n * 4);
        const size_t stored = (size_t)n * cuda_row_bytes(shapes[s].t, k); /* the GPU's row layout */
        uint8_t *packed = malloc(stored);
        cuda_rows_pack(shapes[s].t, k, n, wq, packed);
        for (int c = 0; c < copies; c++)
            if (cuda_alloc(&dw[c], stored, "weights", &e) || cuda_upload(dw[c], packed, stored, &e))
                return fail_line(&e);
        free(packed);
        if (cuda_alloc(&dq, (size_t)(n / 32) * 36, "product q8_1", &e) ||
            cuda_alloc((void **)&dt, (size_t)n * 4, "the pair's rows", &e) ||
            cuda_upload(dt, full, (size_t)n * 4, &e) || cuda_alloc(&dxf, (size_t)k * 4, "x", &e) ||
            cuda_alloc(&dx, (size_t)(k / 32) * 36, "x q8_1", &e) || cuda_alloc(&dy, (size_t)n * 4, "y", &e) ||
            cuda_upload(dxf, row, (size_t)k * 4, &e) || cuda_quantize_q8_1(dxf, dx, k, NULL, &e) ||
            cuda_matmul(shapes[s].t, dw[0], k, n, dx, 1, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e) || cuda_timer_start(&t, &e))
            return fail_line(&e);
        for (int i = 0; i < reps; i++) {
            /* a pair's gate and up: two copies */
            const struct cuda_matrix pair[2] = { { shapes[s].t, dw[i % copies], n, NULL, dy },
                                                 { shapes[s].t, dw[(i + 1) % copies], n, NULL, NULL } };
            if (shapes[s].pair ? cuda_matmul_multi(pair, 2, k, dx, NULL, 1, NULL, CUDA_EPI_PAIR, shapes[s].pair == 1 ? dq : NULL, dt, NULL, NULL, &e)
                               : cuda_matmul(shapes[s].t, dw[i % copies], k, n, dx, 1, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e))
                return fail_line(&e);
        }
        if (cuda_timer_stop(t, &ms, &e))
            return fail_line(&e);
        wbytes *= shapes[s].pair ? 2 : 1;
        double us = ms * 1e3 / reps, gbs = (double)wbytes / (us * 1e-6) / 1e9;
        printf("| %s | %lld | %lld | %.1f | %.1f | %.0f | %.0f%% |\n", shapes[s].what, (long long)k, (long long)n,
               (double)wbytes / 1048576.0, us, gbs, 100.0 * gbs / floor_gbs);
        for (int c = 0; c < copies; c++)
            cuda_free(dw[c]);
        cuda_free(dq), cuda_free(dt), cuda_free(dx), cuda_free(dxf), cuda_free(dy);
        free(wq), free(row), free(full);
    }
    if (only >= 0)
        return 0;
    if (small_kernels(reps) || long_attention(reps, floor_gbs))
        return 1;
    return gpu_bench_sync(reps, &e) ? fail_line(&e) : 0;
}
