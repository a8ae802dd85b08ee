/* test_recipe.c: which type each tensor gets, on the real shapes of
 * Qwen2.5-0.5B (n_embd 896, 24 layers, tied output) and Qwen3-8B (4096, 36
 * layers), following llama.cpp's recipes. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "quant/quantize_recipe.h"

static enum tensor_type pick(const char *mix, const char *name, uint64_t ne0, uint64_t ne1, int n_layer,
                             bool has_output)
{
    uint64_t ne[2] = { ne0, ne1 };
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    struct tensor_desc d = { name, ne1 > 1 ? 2u : 1u, ne, layer, n_layer, has_output };
    const struct recipe *r = recipe_find(mix);
    cr_assert_not_null(r, "mix %s", mix);
    return recipe_type(r, &d, false);
}

#define EXPECT(mix, name, ne0, ne1, nl, out, want)                                                        \
    cr_assert_eq(pick(mix, name, ne0, ne1, nl, out), want, "%s %s: got %s, want %s", mix, name,           \
                 type_name(pick(mix, name, ne0, ne1, nl, out)), type_name(want))

Test(recipe, qwen2_5_0_5b_q4_k_m_falls_back_for_896_rows)
{
    /* 896 % 256 != 0: Q4_K -> Q5_0, Q6_K -> Q8_0; ffn_down rows are 4864 = 19 * 256. */
    EXPECT("q4_k_m", "token_embd.weight", 896, 151936, 24, false, TYPE_Q8_0); /* tied: output rule */
    EXPECT("q4_k_m", "blk.5.attn_q.weight", 896, 896, 24, false, TYPE_Q5_0);
    EXPECT("q4_k_m", "blk.0.attn_v.weight", 896, 128, 24, false, TYPE_Q8_0);  /* more bits, falls back */
    EXPECT("q4_k_m", "blk.4.attn_v.weight", 896, 128, 24, false, TYPE_Q5_0);
    EXPECT("q4_k_m", "blk.0.ffn_down.weight", 4864, 896, 24, false, TYPE_Q6_K);
    EXPECT("q4_k_m", "blk.4.ffn_down.weight", 4864, 896, 24, false, TYPE_Q4_K);
    EXPECT("q4_k_m", "blk.5.ffn_down.weight", 4864, 896, 24, false, TYPE_Q6_K); /* (5-3)%3 == 2 */
    EXPECT("q4_k_m", "blk.21.ffn_down.weight", 4864, 896, 24, false, TYPE_Q6_K); /* last eighth */
    EXPECT("q4_k_m", "blk.3.attn_norm.weight", 896, 1, 24, false, TYPE_F32);
    EXPECT("q4_k_m", "blk.3.attn_q.bias", 896, 1, 24, false, TYPE_F32);
}

Test(recipe, qwen3_8b_q4_k_m)
{
    EXPECT("q4_k_m", "token_embd.weight", 4096, 151936, 36, true, TYPE_Q4_K);
    EXPECT("q4_k_m", "output.weight", 4096, 151936, 36, true, TYPE_Q6_K);
    EXPECT("q4_k_m", "blk.0.attn_q.weight", 4096, 4096, 36, true, TYPE_Q4_K);
    EXPECT("q4_k_m", "blk.6.attn_v.weight", 4096, 1024, 36, true, TYPE_Q6_K); /* (6-4)%3 == 2 */
    EXPECT("q4_k_m", "blk.7.attn_v.weight", 4096, 1024, 36, true, TYPE_Q4_K);
    EXPECT("q4_k_m", "blk.32.ffn_down.weight", 12288, 4096, 36, true, TYPE_Q6_K);
    EXPECT("q4_k_m", "blk.10.ffn_gate.weight", 4096, 12288, 36, true, TYPE_Q4_K);
    EXPECT("q5_k_m", "blk.10.ffn_gate.weight", 4096, 12288, 36, true, TYPE_Q5_K);
    EXPECT("q5_k_m", "blk.0.attn_v.weight", 4096, 1024, 36, true, TYPE_Q6_K);
}

Test(recipe, plain_types)
{
    EXPECT("q8_0", "output.weight", 4096, 151936, 36, true, TYPE_Q8_0);
    EXPECT("q4_0", "output.weight", 4096, 151936, 36, true, TYPE_Q6_K);
    EXPECT("q4_0", "blk.0.attn_v.weight", 4096, 1024, 36, true, TYPE_Q4_0);
    EXPECT("q6_k", "blk.0.attn_q.weight", 896, 896, 24, false, TYPE_Q8_0);
    EXPECT("f16", "output.weight", 4096, 151936, 36, true, TYPE_F16);
    EXPECT("bf16", "blk.0.ffn_norm.weight", 4096, 1, 36, true, TYPE_F32);
    EXPECT("q4_k", "blk.0.attn_q.weight", 48, 48, 1, true, TYPE_F16); /* fits no block at all */
    cr_assert_null(recipe_find("q4_k_xl"));
    cr_assert_not_null(recipe_find("Q4_K_M"));
}

Test(recipe, pure_disables_the_mix)
{
    uint64_t ne[2] = { 4096, 1024 };
    struct tensor_desc d = { "blk.0.attn_v.weight", 2, ne, 0, 36, true };
    cr_assert_eq(recipe_type(recipe_find("q4_k_m"), &d, true), TYPE_Q4_K);
    cr_assert_eq(recipe_type(recipe_find("q4_k_m"), &d, false), TYPE_Q6_K);
}
