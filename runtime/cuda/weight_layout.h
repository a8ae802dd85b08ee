/* weight_layout.h: how the GPU stores a matrix's rows. A type whose block
 * is a multiple of 16 bytes (Q4_K, Q5_K) or a plain number (F32, F16, BF16)
 * keeps its GGUF rows. The others (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: 18 to 34
 * bytes; Q6_K: 210) are stored with each row's blocks split into planes,
 * one per field of the block, codes first:
 *   Q4_0 [qs 16][d 2]        Q4_1 [qs 16][d,m 4]        Q8_0 [qs 32][d 2]
 *   Q5_0 [qs 16][qh 4][d 2]  Q5_1 [qs 16][qh 4][d,m 4]
 *   Q6_K [ql 128][qh 64][scales 16][d 2]
 * (plane p holds field p of block 0, 1, ..., nb - 1), the row padded to a
 * multiple of 16 bytes. Every code load of a GPU lane is then a 16-byte
 * aligned one, where the GGUF blocks allow only 2 or 4 (an aligned load per
 * 4 bytes and a shift). Lossless: the fields are moved, never changed
 * (tests/test_weight_layout.c unpacks every packed row to its GGUF bytes).
 * Plain C: the host packs at upload, the kernels (common.cuh) read it. */
#ifndef MINFER_CUDA_WEIGHT_LAYOUT_H
#define MINFER_CUDA_WEIGHT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "quant/tensor_type.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_PLANES_MAX 4

/* The fields of one block of type t, in plane order: byte offset in the
 * GGUF block and size. n == 0: rows stay as in GGUF. */
struct cuda_planes {
    int n;
    int off[CUDA_PLANES_MAX], size[CUDA_PLANES_MAX];
};
#ifdef __CUDACC__
#define CUDA_HOST_DEVICE __host__ __device__
#else
#define CUDA_HOST_DEVICE
#endif
static inline CUDA_HOST_DEVICE struct cuda_planes cuda_planes_of(enum tensor_type t)
{
    struct cuda_planes p = { 0, { 0 }, { 0 } };
    switch (t) {
    case TYPE_Q4_0: p = (struct cuda_planes){ 2, { 2, 0 }, { 16, 2 } }; break;
    case TYPE_Q4_1: p = (struct cuda_planes){ 2, { 4, 0 }, { 16, 4 } }; break;
    case TYPE_Q5_0: p = (struct cuda_planes){ 3, { 6, 2, 0 }, { 16, 4, 2 } }; break;
    case TYPE_Q5_1: p = (struct cuda_planes){ 3, { 8, 4, 0 }, { 16, 4, 4 } }; break;
    case TYPE_Q8_0: p = (struct cuda_planes){ 2, { 2, 0 }, { 32, 2 } }; break;
    case TYPE_Q6_K: p = (struct cuda_planes){ 4, { 0, 128, 192, 208 }, { 128, 64, 16, 2 } }; break;
    default: break;
    }
    return p;
}

/* Bytes of one stored row of k values of type t (k a multiple of the block). */
size_t cuda_row_bytes(enum tensor_type t, int64_t k);
/* rows rows of k values: GGUF bytes at src into the stored layout at dst
 * (rows * cuda_row_bytes bytes, padding zeroed), and back. */
void cuda_rows_pack(enum tensor_type t, int64_t k, int64_t rows, const void *src, void *dst);
void cuda_rows_unpack(enum tensor_type t, int64_t k, int64_t rows, const void *src, void *dst);

#ifdef __cplusplus
}
#endif

#endif
