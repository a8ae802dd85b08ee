/* embed.cu: the embedding gather: each token's row of the table, decoded
 * from its type to f32 with the CPU's arithmetic (bit-identical). */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define EMBED_THREADS 256

/* One CTA per token; thread i decodes elements i, i + 256, ... of its row
 * (the GPU's layout, weight_layout.h). */
template <int T>
__global__ void embed_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t nb, int64_t d,
                             const int32_t *__restrict__ ids, float *__restrict__ y)
{
    grid_begin();
    const uint8_t *row = w + (size_t)ids[blockIdx.x] * row_bytes;
    float *out = y + (size_t)blockIdx.x * (size_t)d;
    for (int64_t i = threadIdx.x; i < d; i += EMBED_THREADS)
        out[i] = decode_at<T>(row, nb, i);
}

bool cuda_weight_type_ok(enum tensor_type t)
{
    switch (t) {
    case TYPE_F32: case TYPE_F16: case TYPE_BF16: case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1:
    case TYPE_Q8_0: case TYPE_Q4_K: case TYPE_Q5_K: case TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

#define EMBED_CASE(T)                                                                                        \
    case T:                                                                                                  \
        launch(embed_kernel<T>, (unsigned)nt, EMBED_THREADS, 0, s, (const uint8_t *)w, row_bytes,            \
               (int64_t)(n_embd / ti->block_elems), n_embd, ids, y);                                        \
        break;

extern "C" int cuda_embed(enum tensor_type t, const void *w, int64_t n_embd, const int32_t *ids, int64_t nt, float *y,
                          void *stream, struct error *e)
{
    const struct type_info *ti = type_info(t);
    if (!cuda_weight_type_ok(t))
        return fail(e, "embed: no GPU decoder for type %s", type_name(t));
    if (n_embd <= 0 || nt <= 0 || n_embd % ti->block_elems)
        return fail(e, "embed: rows of %lld %s values", (long long)n_embd, ti->name);
    const size_t row_bytes = cuda_row_bytes(t, n_embd);
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("embed_kernel", e))
        return -1;
    switch (t) {
        EMBED_CASE(TYPE_F32) EMBED_CASE(TYPE_F16) EMBED_CASE(TYPE_BF16) EMBED_CASE(TYPE_Q4_0) EMBED_CASE(TYPE_Q4_1)
        EMBED_CASE(TYPE_Q5_0) EMBED_CASE(TYPE_Q5_1) EMBED_CASE(TYPE_Q8_0) EMBED_CASE(TYPE_Q4_K) EMBED_CASE(TYPE_Q5_K)
        EMBED_CASE(TYPE_Q6_K)
    default: break;
    }
    return cuda_launch_end("embed_kernel", e);
}
