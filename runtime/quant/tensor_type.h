/* tensor_type.h: the GGML tensor element types as GGUF numbers them, with the
 * block geometry of each. One table is the single source: the enum, the
 * names and the sizes all expand from TENSOR_TYPES. */
#ifndef MINFER_TENSOR_TYPE_H
#define MINFER_TENSOR_TYPE_H

#include <stddef.h>
#include <stdint.h>

/*         NAME     id  elems/block  bytes/block  layout of one block */
#define TENSOR_TYPES(X) \
    X(F32,      0,   1,   4) /* IEEE binary32 */                                   \
    X(F16,      1,   1,   2) /* IEEE binary16 */                                   \
    X(Q4_0,     2,  32,  18) /* f16 d; 16 B nibbles; x = d*(q-8) */                \
    X(Q4_1,     3,  32,  20) /* f16 d, m; 16 B nibbles; x = d*q + m */             \
    X(Q5_0,     6,  32,  22) /* f16 d; u32 high bits; 16 B nibbles; d*(q-16) */    \
    X(Q5_1,     7,  32,  24) /* f16 d, m; u32 high bits; 16 B nibbles */           \
    X(Q8_0,     8,  32,  34) /* f16 d; 32 x i8; x = d*q */                         \
    X(Q8_1,     9,  32,  36) /* f16 d, f16 s = d*sum(q); 32 x i8 */                \
    X(Q2_K,    10, 256,  84) /* 16 B scales/mins; 64 B 2-bit; f16 d, dmin */       \
    X(Q3_K,    11, 256, 110) /* 32 B hmask; 64 B 2-bit; 12 B scales; f16 d */      \
    X(Q4_K,    12, 256, 144) /* f16 d, dmin; 12 B 6-bit scales/mins; 128 B */      \
    X(Q5_K,    13, 256, 176) /* as Q4_K plus 32 B high bits */                     \
    X(Q6_K,    14, 256, 210) /* 128 B low 4; 64 B high 2; 16 x i8 scales; f16 */  \
    X(Q8_K,    15, 256, 292) /* f32 d; 256 x i8; 16 x i16 sums */                  \
    X(IQ2_XXS, 16, 256,  66)                                                       \
    X(IQ2_XS,  17, 256,  74)                                                       \
    X(IQ3_XXS, 18, 256,  98)                                                       \
    X(IQ1_S,   19, 256,  50)                                                       \
    X(IQ4_NL,  20,  32,  18)                                                       \
    X(IQ3_S,   21, 256, 110)                                                       \
    X(IQ2_S,   22, 256,  82)                                                       \
    X(IQ4_XS,  23, 256, 136)                                                       \
    X(I8,      24,   1,   1)                                                       \
    X(I16,     25,   1,   2)                                                       \
    X(I32,     26,   1,   4)                                                       \
    X(I64,     27,   1,   8)                                                       \
    X(F64,     28,   1,   8)                                                       \
    X(IQ1_M,   29, 256,  56)                                                       \
    X(BF16,    30,   1,   2) /* top 16 bits of binary32 */                         \
    X(TQ1_0,   34, 256,  54)                                                       \
    X(TQ2_0,   35, 256,  66)                                                       \
    X(MXFP4,   39,  32,  17)

enum tensor_type {
#define TT_ENUM(name, id, blk, bytes) TYPE_##name = id,
    TENSOR_TYPES(TT_ENUM)
#undef TT_ENUM
};

#define QK_K 256 /* elements in one K-quant superblock */

#ifdef __cplusplus
extern "C" {
#endif

struct type_info {
    const char *name;     /* "Q4_K" */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
};

/* Returns the row for a GGUF type id, or NULL for an id GGUF does not define. */
const struct type_info *type_info(uint32_t id);

/* The type's name, or "type#<id>" (static buffer) for an unknown id. */
const char *type_name(uint32_t id);

/* Parses a type name, case-insensitive ("q4_k", "F16"). Returns 0 and sets
 * *out, or -1 for a name that is not in the table. */
int type_from_name(const char *name, enum tensor_type *out);

/* Bytes of n elements of type t; n must be a multiple of the block size. */
size_t type_bytes(enum tensor_type t, uint64_t n);

/* Whether dequantize_row handles t. */
int type_can_dequantize(enum tensor_type t);

/* Whether quantize_row handles t. */
int type_can_quantize(enum tensor_type t);

#ifdef __cplusplus
}
#endif

#endif
