/* demo_gguf.c: writes a small Qwen2-shaped F32 GGUF with random weights, so
 * the build has a model to run `minfer info` and `minfer quantize` on before
 * real models or `minfer synth` exist. n_embd 384 is deliberately not a
 * multiple of 256 (like Qwen2.5-0.5B's 896), so K-quant mixes show their
 * fallback types; embeddings are tied, as in the small Qwen2.5 models.
 *
 * usage: demo-gguf OUT.gguf [SEED] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "rng.h"
#include "tensor_type.h"

enum { N_EMBD = 384, N_HEAD = 6, N_HEAD_KV = 2, HEAD_DIM = 64, N_FF = 1024, N_VOCAB = 2048, N_LAYER = 2 };

static struct rng rng;

static float normal(void) { return rng_normal(&rng); }

struct model {
    struct gguf_writer *w;
    float *data[64];
    int n;
};

static int add(struct model *m, const char *name, uint64_t ne0, uint64_t ne1, float mean, float sd,
               struct error *e)
{
    uint64_t ne[2] = { ne0, ne1 }, n = ne0 * ne1;
    float *x = malloc(n * sizeof *x);
    if (!x)
        return fail(e, "out of memory for '%s'", name);
    for (uint64_t i = 0; i < n; i++)
        x[i] = mean + sd * normal();
    m->data[m->n++] = x;
    return gguf_add_tensor(m->w, name, TYPE_F32, ne1 > 1 ? 2 : 1, ne, x, e);
}

static int add_layer(struct model *m, int il, struct error *e)
{
    static const struct { const char *name; uint64_t ne0, ne1; float mean, sd; } t[] = {
        { "attn_norm.weight", N_EMBD, 1, 1, 0.1f },
        { "attn_q.weight", N_EMBD, N_HEAD * HEAD_DIM, 0, 0.02f },
        { "attn_q.bias", N_HEAD * HEAD_DIM, 1, 0, 0.02f },
        { "attn_k.weight", N_EMBD, N_HEAD_KV * HEAD_DIM, 0, 0.02f },
        { "attn_k.bias", N_HEAD_KV * HEAD_DIM, 1, 0, 0.02f },
        { "attn_v.weight", N_EMBD, N_HEAD_KV * HEAD_DIM, 0, 0.02f },
        { "attn_v.bias", N_HEAD_KV * HEAD_DIM, 1, 0, 0.02f },
        { "attn_output.weight", N_HEAD * HEAD_DIM, N_EMBD, 0, 0.02f },
        { "ffn_norm.weight", N_EMBD, 1, 1, 0.1f },
        { "ffn_gate.weight", N_EMBD, N_FF, 0, 0.02f },
        { "ffn_up.weight", N_EMBD, N_FF, 0, 0.02f },
        { "ffn_down.weight", N_FF, N_EMBD, 0, 0.02f },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", il, t[i].name);
        if (add(m, name, t[i].ne0, t[i].ne1, t[i].mean, t[i].sd, e))
            return -1;
    }
    return 0;
}

static int set_metadata(struct gguf_writer *w)
{
    static char vocab[N_VOCAB][16];
    static const char *tokens[N_VOCAB];
    static int32_t token_type[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) {
        snprintf(vocab[i], sizeof vocab[i], i < 256 ? "<0x%02X>" : "tok%d", i);
        tokens[i] = vocab[i];
        token_type[i] = i < 256 ? 6 : 1; /* byte tokens, then normal ones */
    }
    return gguf_set_str(w, "general.architecture", "qwen2") || gguf_set_str(w, "general.name", "minfer demo") ||
           gguf_set_u32(w, "general.file_type", 0) || gguf_set_u32(w, "qwen2.block_count", N_LAYER) ||
           gguf_set_u32(w, "qwen2.context_length", 4096) || gguf_set_u32(w, "qwen2.embedding_length", N_EMBD) ||
           gguf_set_u32(w, "qwen2.feed_forward_length", N_FF) ||
           gguf_set_u32(w, "qwen2.attention.head_count", N_HEAD) ||
           gguf_set_u32(w, "qwen2.attention.head_count_kv", N_HEAD_KV) ||
           gguf_set_f32(w, "qwen2.rope.freq_base", 1000000.0f) ||
           gguf_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f) ||
           gguf_set_str(w, "tokenizer.ggml.model", "gpt2") || gguf_set_str(w, "tokenizer.ggml.pre", "qwen2") ||
           gguf_set_str_arr(w, "tokenizer.ggml.tokens", N_VOCAB, tokens) ||
           gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, N_VOCAB, token_type) ||
           gguf_set_u32(w, "tokenizer.ggml.eos_token_id", N_VOCAB - 1);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3)
        return fprintf(stderr, "usage: demo-gguf OUT.gguf [SEED]\n"), 1;
    rng_seed(&rng, argc == 3 ? strtoull(argv[2], NULL, 10) : 0x5eed);
    struct model m = { .w = gguf_writer_new() };
    struct error e = { "out of memory" };
    int rc = !m.w || set_metadata(m.w) || add(&m, "token_embd.weight", N_EMBD, N_VOCAB, 0, 0.02f, &e);
    for (int il = 0; il < N_LAYER && !rc; il++)
        rc = add_layer(&m, il, &e);
    rc = rc || add(&m, "output_norm.weight", N_EMBD, 1, 1, 0.1f, &e) || gguf_write_file(m.w, argv[1], &e);
    for (int i = 0; i < m.n; i++)
        free(m.data[i]);
    gguf_writer_free(m.w);
    if (rc)
        fprintf(stderr, "demo-gguf: %s\n", e.msg);
    return rc ? 1 : 0;
}
