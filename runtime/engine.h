/* engine.h: one inference session over a bound model: the KV cache, the
 * activation arena (allocated once, for the largest batch), the graph for
 * the current batch size, and the logits of the last token evaluated. Each
 * engine owns its memory; two engines in one process do not interact. */
#ifndef MINFER_ENGINE_H
#define MINFER_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "graph.h"
#include "kv_cache.h"
#include "model.h"

struct engine_config {
    int64_t n_ctx;         /* positions the KV cache holds; 0: the model's training context, capped so its
                              KV cache takes at most a quarter of the memory */
    int64_t n_batch;       /* tokens per graph when processing a prompt (default 512) */
    enum kv_type kv_type;
    int n_threads;         /* CPU threads for matmuls; 0: all cores */
    bool logits_all;       /* size the arena so every token of a batch can get logits (engine_eval_logits) */
};

struct engine {
    const struct model *m;
    struct engine_config cfg;
    struct kv_cache kv;
    struct graph g;
    int64_t graph_nt;      /* the batch size g was built for, 0 for none */
    int64_t graph_n_out;   /* and how many of its tokens get logits */
    uint8_t *arena;
    size_t arena_bytes;
    struct cpu_scratch scratch;
    int64_t *pos;          /* n_batch positions */
    int64_t n_past;        /* positions filled in the KV cache */
    int64_t n_vocab;
    int64_t n_ctx_train;   /* the model's context when n_ctx defaulted to it (then possibly capped), else 0 */
    float *logits;         /* n_vocab, of the last token evaluated */
};

int engine_init(struct engine *en, const struct model *m, const struct engine_config *cfg, struct error *e);
void engine_free(struct engine *en);

/* Appends n tokens at the current position, in batches of n_batch; leaves
 * the logits of the last one. Running past n_ctx is an error naming both. */
int engine_eval(struct engine *en, const int32_t *tokens, int64_t n, struct error *e);

/* As engine_eval, and writes the logits of every one of the n tokens to
 * out (n * n_vocab floats, token by token). Needs cfg.logits_all. */
int engine_eval_logits(struct engine *en, const int32_t *tokens, int64_t n, float *out, struct error *e);

/* Forgets positions from n_past on (0 starts over). */
void engine_truncate(struct engine *en, int64_t n_past);

#endif
