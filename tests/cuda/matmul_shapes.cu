/* matmul_shapes.cu: the decode matmul fixed by row length alone, as a
 * per-model build that does not know its weight types has it (the
 * compiler's CUDA_MATMUL_INSTANCE, every type at each row length), at one
 * row length of Qwen2.5-0.5B's (its n_ff, a whole number of blocks of
 * every type): for test_matmul.c to check against the generic kernel.
 * The per-model builds the tests make know their types, so they carry
 * none of these. */
#include "cuda/matmul_launch.cuh"
#include "graph_ops.h"

CUDA_MATMUL_INSTANCE(4864)

extern "C" const struct cuda_kernel test_row_length_kernels[] = {
    { OP_MATMUL_ADD, 4864, 896, cuda_matmul_k4864, { 0, 0, 0 }, { -1, -1, -1 } },
    { OP_COUNT, 0, 0, NULL, { 0, 0, 0 }, { -1, -1, -1 } }, /* the end */
};
