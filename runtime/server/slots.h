/* slots.h: the server's engines ("slots") over one model and tokenizer,
 * the bounded queue of requests waiting for one, and a generation on a
 * slot: the prompt after the part of it the slot's KV cache already holds,
 * then tokens one at a time, with stop strings. */
#ifndef MINFER_SERVER_SLOTS_H
#define MINFER_SERVER_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "sampler.h"
#include "tokenizer/tokenizer.h"

struct slot {
    struct engine engine;
    int32_t *history;        /* the tokens in the engine's KV cache, in order */
    size_t n_history, cap_history;
    bool busy;
};

struct slot_pool {
    struct slot *slot;
    int n;
    int waiting, queue_max;  /* requests waiting for a slot, and how many may */
    pthread_mutex_t mu;
    pthread_cond_t freed;
};

/* n engines over m (weights registered once per backend: see backend.h). */
int slot_pool_init(struct slot_pool *p, const struct model *m, const struct engine_config *cfg, int n, int queue_max,
                   struct error *e);
void slot_pool_free(struct slot_pool *p);

/* The free slot whose cache shares the longest prefix with tokens, waiting
 * in the queue while none is free; NULL at once when the queue is full. */
struct slot *slot_acquire(struct slot_pool *p, const int32_t *tokens, size_t n);
void slot_release(struct slot_pool *p, struct slot *s);

#define GEN_MAX_STOP 4

struct generation {
    struct slot *slot;
    const struct tokenizer *tok;
    struct sampler sampler;
    int32_t stop_ids[TOKENIZER_END_IDS]; /* end-of-text tokens */
    const char *stop[GEN_MAX_STOP]; /* stop strings (not owned) */
    int n_stop;
    int64_t max_tokens;      /* -1: until a stop or the context's end */
    struct detokenizer d;
    char *text;              /* the reply so far (a stop string and what follows it cut off) */
    size_t n_text, cap_text, sent;
    int64_t n_prompt, n_cached, n_made;
    double t_start, t_prompt, t_end;
    bool done;
    const char *finish;      /* "stop" or "length", once done */
};

/* Starts a generation of tokens' continuation on slot s: the slot keeps
 * the longest prefix its cache shares with tokens and evaluates the rest. */
int generation_start(struct generation *g, struct slot *s, const struct tokenizer *tok, const int32_t *tokens, size_t n,
                     const struct sampler_params *sp, struct error *e);

/* One more token (or done). */
int generation_step(struct generation *g, struct error *e);

/* Bytes of text from g->sent on that no stop string can still take back. */
size_t generation_ready(const struct generation *g);

void generation_free(struct generation *g);

#endif
