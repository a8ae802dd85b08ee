/* presets.c: the model shapes minfer knows by name (see presets.h). Values
 * are the published configurations; derived values (head_dim = n_embd /
 * n_head for Qwen2) are left to the description. */
#include "presets.h"

#include <string.h>

static const struct preset presets[] = {
    { "qwen3-8b", "qwen3", "Qwen3-8B", false,
      { { "n_embd", 4096 }, { "n_layer", 36 }, { "n_head", 32 }, { "n_head_kv", 8 }, { "head_dim", 128 },
        { "n_ff", 12288 }, { "n_vocab", 151936 }, { "n_ctx", 40960 }, { "eps", 1e-6 }, { "rope_base", 1000000 } },
      10 },
    { "qwen3-0.6b", "qwen3", "Qwen3-0.6B (tied embeddings)", true,
      { { "n_embd", 1024 }, { "n_layer", 28 }, { "n_head", 16 }, { "n_head_kv", 8 }, { "head_dim", 128 },
        { "n_ff", 3072 }, { "n_vocab", 151936 }, { "n_ctx", 40960 }, { "eps", 1e-6 }, { "rope_base", 1000000 } },
      10 },
    { "qwen2.5-0.5b", "qwen2", "Qwen2.5-0.5B (tied embeddings, QKV biases)", true,
      { { "n_embd", 896 }, { "n_layer", 24 }, { "n_head", 14 }, { "n_head_kv", 2 }, { "n_ff", 4864 },
        { "n_vocab", 151936 }, { "n_ctx", 32768 }, { "eps", 1e-6 }, { "rope_base", 1000000 } },
      9 },
    { "qwen2.5-7b", "qwen2", "Qwen2.5-7B", false,
      { { "n_embd", 3584 }, { "n_layer", 28 }, { "n_head", 28 }, { "n_head_kv", 4 }, { "n_ff", 18944 },
        { "n_vocab", 152064 }, { "n_ctx", 32768 }, { "eps", 1e-6 }, { "rope_base", 1000000 } },
      9 },
    { "llama3-8b", "llama", "Llama 3 8B", false,
      { { "n_embd", 4096 }, { "n_layer", 32 }, { "n_head", 32 }, { "n_head_kv", 8 }, { "head_dim", 128 },
        { "n_ff", 14336 }, { "n_vocab", 128256 }, { "n_ctx", 8192 }, { "eps", 1e-5 }, { "rope_base", 500000 } },
      10 },
    { "smollm2-135m", "llama", "SmolLM2-135M (tied embeddings)", true,
      { { "n_embd", 576 }, { "n_layer", 30 }, { "n_head", 9 }, { "n_head_kv", 3 }, { "head_dim", 64 },
        { "n_ff", 1536 }, { "n_vocab", 49152 }, { "n_ctx", 8192 }, { "eps", 1e-5 }, { "rope_base", 100000 } },
      10 },
    { "gemma3-270m", "gemma3", "Gemma 3 270M (tied embeddings, a 512-token window on 5 layers of 6)", true,
      { { "n_embd", 640 }, { "n_layer", 18 }, { "n_head", 4 }, { "n_head_kv", 1 }, { "head_dim", 256 },
        { "n_ff", 2048 }, { "n_vocab", 262144 }, { "n_ctx", 32768 }, { "eps", 1e-6 }, { "rope_base", 1000000 },
        { "sliding_window", 512 } },
      11 },
    { "gemma3-1b", "gemma3", "Gemma 3 1B (tied embeddings, a 512-token window on 5 layers of 6)", true,
      { { "n_embd", 1152 }, { "n_layer", 26 }, { "n_head", 4 }, { "n_head_kv", 1 }, { "head_dim", 256 },
        { "n_ff", 6912 }, { "n_vocab", 262144 }, { "n_ctx", 32768 }, { "eps", 1e-6 }, { "rope_base", 1000000 },
        { "sliding_window", 512 } },
      11 },
};

const struct preset *preset_find(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *preset_names(void)
{
    return "qwen3-8b, qwen3-0.6b, qwen2.5-0.5b, qwen2.5-7b, llama3-8b, smollm2-135m, gemma3-270m, gemma3-1b";
}
