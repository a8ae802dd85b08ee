/* sampler.c: token sampling (see sampler.h). The chain, in order: repetition
 * penalty, greedy exit, temperature, top-k, softmax, top-p, min-p, draw. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sampler_params sampler_defaults(void)
{
    return (struct sampler_params){ .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                    .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0x5eed };
}

int sampler_init(struct sampler *s, const struct sampler_params *p, int64_t n_vocab)
{
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    rng_seed(&s->rng, p->seed);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    int n = p->repeat_last_n > 0 ? p->repeat_last_n : 1;
    s->recent = malloc((size_t)n * sizeof *s->recent);
    return s->cand && s->recent ? 0 : -1;
}

void sampler_free(struct sampler *s)
{
    free(s->cand);
    free(s->recent);
    memset(s, 0, sizeof *s);
}

void sampler_accept(struct sampler *s, int32_t id)
{
    if (s->p.repeat_last_n <= 0)
        return;
    s->recent[s->at] = id;
    s->at = (s->at + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n)
        s->n_recent++;
}

/* Higher logit first; equal logits by lower id, so the order is total. */
static int by_logit(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void penalize(struct sampler *s)
{
    if (s->p.repeat_penalty == 1.0f)
        return;
    for (int i = 0; i < s->n_recent; i++) {
        struct candidate *c = &s->cand[s->recent[i]];
        if (c->p == 0) { /* p marks "already penalized" until the softmax */
            c->logit = c->logit > 0 ? c->logit / s->p.repeat_penalty : c->logit * s->p.repeat_penalty;
            c->p = 1;
        }
    }
}

bool sampler_is_greedy(const struct sampler *s) { return s->p.temp <= 0 && s->p.repeat_penalty == 1.0f; }

int32_t sampler_sample(struct sampler *s, const float *logits)
{
    int64_t n = s->n_vocab;
    for (int64_t i = 0; i < n; i++)
        s->cand[i] = (struct candidate){ (int32_t)i, logits[i], 0 };
    penalize(s);
    if (s->p.temp <= 0) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (s->cand[i].logit > s->cand[best].logit)
                best = i;
        return s->cand[best].id;
    }
    for (int64_t i = 0; i < n; i++)
        s->cand[i].logit /= s->p.temp;
    qsort(s->cand, (size_t)n, sizeof *s->cand, by_logit);
    if (s->p.top_k > 0 && s->p.top_k < n)
        n = s->p.top_k;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        s->cand[i].p = expf(s->cand[i].logit - s->cand[0].logit);
        sum += s->cand[i].p;
    }
    double kept = 0;
    int64_t keep = n;
    for (int64_t i = 0; i < n; i++) {
        s->cand[i].p = (float)(s->cand[i].p / sum);
        if (s->p.min_p > 0 && s->cand[i].p < s->p.min_p * s->cand[0].p && i > 0 && keep == n)
            keep = i;
    }
    n = keep;
    for (int64_t i = 0; i < n; i++) {
        kept += s->cand[i].p;
        if (s->p.top_p < 1.0f && kept >= s->p.top_p) {
            n = i + 1;
            break;
        }
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++)
        total += s->cand[i].p;
    double r = rng_uniform(&s->rng) * total, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += s->cand[i].p;
        if (r < acc)
            return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
