/* llama_fixture.h: a real model's reference records (tests/ref/
 * llama_reference.py: llama.cpp, by llama-cpp-python; or transformers for
 * Gemma), read from tests/fixtures/data, and the teacher-forced comparison
 * against them; shared by the CPU suite (test_real_model.c) and the GPU
 * runner (tests/cuda), which has no Criterion. */
#ifndef MINFER_TEST_LLAMA_FIXTURE_H
#define MINFER_TEST_LLAMA_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "kv_cache.h"

#define FIXTURE_POSITIONS 64 /* teacher-forced positions a text */
#define FIXTURE_TOP 20       /* the reference's best logits kept at each */
#define FIXTURE_PROMPTS 4
#define FIXTURE_WINDOWS 64   /* perplexity windows a record may hold */

struct fixture_top {
    int32_t id;
    float logit;
};

struct fixture_prompt {
    char name[32];
    char *text;
    int32_t ids[FIXTURE_POSITIONS];
    float lse[FIXTURE_POSITIONS];                                  /* log-sum-exp of the reference's logits */
    struct fixture_top top[FIXTURE_POSITIONS][FIXTURE_TOP];        /* the reference's best 20, best first */
};

struct fixture {
    char model[256]; /* the model file's name (under models/) */
    long long bytes; /* and its size */
    enum kv_type kv; /* the KV cache the reference had (f16 unless the model line says) */
    struct fixture_prompt p[FIXTURE_PROMPTS];
    int n_prompts;
    int32_t greedy_prompt[512], greedy[64]; /* greedy tokens after a chat prompt (n_greedy 0: none) */
    int n_greedy_prompt, n_greedy;
    int ppl_ctx, ppl_windows; /* the perplexity over the GPL-3 text (ppl 0: none) */
    double ppl, ppl_err;
    double ppl_running[FIXTURE_WINDOWS]; /* [w]: the perplexity over the first w + 1 windows */
};

/* Reads the fixture at path into f (zeroed first); 0, or -1 with msg
 * saying what is wrong. fixture_free releases its texts. */
int fixture_read(const char *path, struct fixture *f, char *msg, size_t msg_size);
void fixture_free(struct fixture *f);

/* Teacher forcing over the reference's tokens: where the argmax agrees,
 * where it disagrees although the reference's best leads its second by at
 * least margin, and KL(reference || minfer) over the reference's top 20
 * (each term p log p/q, both sides normalized over the whole vocabulary). */
struct fixture_agreement {
    int agree, total;                   /* positions whose argmax agrees */
    int prompt_agree[FIXTURE_PROMPTS];
    double prompt_kl[FIXTURE_PROMPTS];  /* the mean KL of each text */
    double kl_mean, kl_max;
    int beyond_margin;                  /* disagreements where the reference led by margin or more */
    char first_beyond[160];             /* the first of them, described */
};
int fixture_teacher_forced(struct engine *en, const struct fixture *f, double margin, struct fixture_agreement *out,
                           struct error *e);

#endif
