/* quantize_recipe.c: per-tensor type choice (see quantize_recipe.h). */
#include "quant/quantize_recipe.h"

#include <string.h>
#include <strings.h>

static const struct recipe recipes[] = {
    /* name      base        ftype k_mix  output_q6k */
    { "f32",    TYPE_F32,    0,  false, false },
    { "f16",    TYPE_F16,    1,  false, false },
    { "bf16",   TYPE_BF16,   32, false, false },
    { "q8_0",   TYPE_Q8_0,   7,  false, false },
    { "q4_0",   TYPE_Q4_0,   2,  false, true },
    { "q4_1",   TYPE_Q4_1,   3,  false, true },
    { "q5_0",   TYPE_Q5_0,   8,  false, true },
    { "q5_1",   TYPE_Q5_1,   9,  false, true },
    { "q4_k",   TYPE_Q4_K,   14, false, true },
    { "q5_k",   TYPE_Q5_K,   16, false, true },
    { "q6_k",   TYPE_Q6_K,   18, false, true },
    { "q4_k_m", TYPE_Q4_K,   15, true,  true },
    { "q5_k_m", TYPE_Q5_K,   17, true,  true },
};

const struct recipe *recipe_find(const char *name)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (strcasecmp(recipes[i].name, name) == 0)
            return &recipes[i];
    return NULL;
}

const char *recipe_names(void)
{
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m";
}

/* llama.cpp's layer pattern for the _M mixes: the first and last eighth of
 * the layers, and every third layer in between. */
static bool use_more_bits(int layer, int n_layer)
{
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static enum tensor_type fallback(enum tensor_type t, uint64_t row)
{
    if (row % QK_K != 0) {
        switch (t) {
        case TYPE_Q4_K: t = TYPE_Q5_0; break;
        case TYPE_Q5_K: t = TYPE_Q5_1; break;
        case TYPE_Q6_K: t = TYPE_Q8_0; break;
        default: break;
        }
    }
    /* Rows that fit no 32-element block either are kept at F16. */
    return row % type_info(t)->block_elems ? TYPE_F16 : t;
}

enum tensor_type recipe_type(const struct recipe *r, const struct tensor_desc *t, bool pure)
{
    if (t->n_dims < 2 || !ends_with(t->name, ".weight"))
        return TYPE_F32;
    enum tensor_type type = r->base;
    bool is_output = strcmp(t->name, "output.weight") == 0 ||
                     (!t->has_output && strcmp(t->name, "token_embd.weight") == 0);
    if (!pure && is_output && r->output_q6k)
        type = TYPE_Q6_K;
    else if (!pure && r->k_mix && t->layer >= 0 &&
             (ends_with(t->name, ".attn_v.weight") || ends_with(t->name, ".ffn_down.weight")) &&
             use_more_bits(t->layer, t->n_layer))
        type = TYPE_Q6_K;
    return fallback(type, t->ne[0]);
}
