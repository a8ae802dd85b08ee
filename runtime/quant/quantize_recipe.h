/* quantize_recipe.h: which type each tensor gets when a model is quantized.
 * The mixes follow llama.cpp's well-known recipes (docs/quantization.md has
 * the table); a plain type name quantizes every matrix to that type. */
#ifndef MINFER_QUANTIZE_RECIPE_H
#define MINFER_QUANTIZE_RECIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/tensor_type.h"

struct recipe {
    const char *name;          /* "q4_k_m" */
    enum tensor_type base;     /* the type of an ordinary matrix */
    uint32_t file_type;        /* general.file_type (llama.cpp's LLAMA_FTYPE_* number) */
    bool k_mix;                /* _M mixes: attn_v/ffn_down get Q6_K in some layers */
    bool output_q6k;           /* output.weight (or the tied token_embd) gets Q6_K */
};

/* Looks a recipe up by name (case-insensitive); NULL when unknown. */
const struct recipe *recipe_find(const char *name);

/* The names of every recipe, comma-separated, for help and error texts. */
const char *recipe_names(void);

struct tensor_desc {
    const char *name;
    uint32_t n_dims;
    const uint64_t *ne;
    int layer;         /* from "blk.N.", or -1 */
    int n_layer;       /* the model's block count */
    bool has_output;   /* the model has its own output.weight */
};

/* The type a tensor is stored as. 1-D tensors stay F32; a K-quant whose row
 * length is not a multiple of 256 falls back as llama.cpp does (Q4_K->Q5_0,
 * Q5_K->Q5_1, Q6_K->Q8_0), and a row that fits no block of the type at all
 * is kept at F16. `pure` disables the mix adjustments. */
enum tensor_type recipe_type(const struct recipe *r, const struct tensor_desc *t, bool pure);

#endif
