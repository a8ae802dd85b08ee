/* sampler.h: choosing the next token from logits, with the usual knobs:
 * repetition penalty, temperature, top-k, top-p, min-p. Temperature 0 is
 * greedy (the highest logit, the lowest id on ties). With the same seed the
 * same logits give the same choices. */
#ifndef MINFER_SAMPLER_H
#define MINFER_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "rng.h"

struct sampler_params {
    float temp;            /* 0: greedy */
    int top_k;             /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    int repeat_last_n;     /* tokens the penalty looks back over */
    uint64_t seed;
};

struct sampler_params sampler_defaults(void);

struct candidate {
    int32_t id;
    float logit, p;
};

struct sampler {
    struct sampler_params p;
    struct rng rng;
    struct candidate *cand; /* n_vocab */
    int64_t n_vocab;
    int32_t *recent;        /* ring of the last repeat_last_n tokens */
    int n_recent, at;
};

int sampler_init(struct sampler *s, const struct sampler_params *p, int64_t n_vocab);
void sampler_free(struct sampler *s);

/* Whether the choice is the plain argmax of the logits (temperature 0, no
 * repetition penalty), which a backend can find without copying them. */
bool sampler_is_greedy(const struct sampler *s);

/* Picks a token from logits (not modified). */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* Records a token of the context (prompt or generated) for the penalty. */
void sampler_accept(struct sampler *s, int32_t id);

#endif
