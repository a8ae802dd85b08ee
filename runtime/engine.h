/* engine.h: one inference session over a bound model: a backend chosen at
 * load (which holds the KV cache and the activation arena), the graphs for
 * the batch shapes in use kept side by side, and the logits of the last
 * token evaluated. A graph carries its inputs (token ids, positions, KV
 * length) in the arena, so the decode graph, recorded once, serves every
 * step at every position. Each engine owns its memory; two engines in one
 * process do not interact. */
#ifndef MINFER_ENGINE_H
#define MINFER_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "graph.h"
#include "kv_cache.h"
#include "model.h"

struct engine_config {
    int64_t n_ctx;         /* positions the KV cache holds; 0: the model's training context, capped so its
                              KV cache takes at most a quarter of the memory */
    int64_t n_batch;       /* tokens per graph when processing a prompt, at most n_ctx (an error past it);
                              0: 512, or n_ctx if less */
    enum kv_type kv_type;
    int n_threads;         /* CPU threads; 0: all cores */
    bool logits_all;       /* size the arena so every token of a batch can get logits (engine_eval_logits) */
    const char *device;    /* "cpu", "cpu-fast", "cuda" or "auto" (NULL: auto) */
    bool no_graphs;        /* never capture graphs (--no-graphs, for comparison) */
};

/* A graph the engine keeps, for one (nt, n_out) shape; nt = 0 when empty. */
struct engine_graph {
    struct graph g;
    int64_t nt, n_out;
};

enum { ENGINE_DECODE, ENGINE_BATCH, ENGINE_OTHER, ENGINE_GRAPHS };

struct engine {
    const struct model *m;
    struct engine_config cfg;
    const struct backend *be;
    void *bs;              /* the backend's state for this engine */
    /* one token; a full batch of n_batch; the last other shape (a prompt's tail, logits for all) */
    struct engine_graph graphs[ENGINE_GRAPHS];
    int last;              /* the graph of the last batch evaluated, -1 before any */
    int32_t *pos;          /* n_batch positions, the POSITIONS input */
    int64_t n_past;        /* positions filled in the KV cache */
    int64_t n_vocab;
    int64_t n_ctx_train;   /* the model's context when n_ctx defaulted to it (then possibly capped), else 0 */
    float *logits;         /* n_vocab: the last token's logits, once engine_logits read them */
    bool logits_read;      /* whether logits holds the last evaluation's */
    char note[600];        /* why --device auto passed over a backend, or "" */
};

int engine_init(struct engine *en, const struct model *m, const struct engine_config *cfg, struct error *e);
void engine_free(struct engine *en);

/* Appends n tokens at the current position, in batches of n_batch; leaves
 * the logits of the last one. Running past n_ctx is an error naming both. */
int engine_eval(struct engine *en, const int32_t *tokens, int64_t n, struct error *e);

/* As engine_eval, and writes the logits of every one of the n tokens to
 * out (n * n_vocab floats, token by token). Needs cfg.logits_all. */
int engine_eval_logits(struct engine *en, const int32_t *tokens, int64_t n, float *out, struct error *e);

/* The last token's logits, read from the backend on first ask after an
 * evaluation (so a greedy decode on a GPU never copies them); NULL with e
 * set on failure. */
const float *engine_logits(struct engine *en, struct error *e);

/* The highest of the last logits (lowest index on ties), found by the
 * backend where they were computed. */
int engine_argmax(struct engine *en, int32_t *out, struct error *e);

/* Appends the greedy choice of the last logits (engine_argmax's) and
 * evaluates it; *out gets its id. Where the backend can (the CUDA one),
 * the choice is fed to the step on the device and the step is launched
 * before the id reaches the host, so the caller handles each token while
 * the next step already runs (a caller that stops on it truncates it
 * away). Running past n_ctx is an error, as for engine_eval. */
int engine_eval_next(struct engine *en, int32_t *out, struct error *e);

struct sampler;
/* The next token by smp's rule from the last logits: a greedy choice is
 * the backend's argmax (no logits copied), else smp samples them. */
int engine_sample(struct engine *en, struct sampler *smp, int32_t *out, struct error *e);

/* Forgets positions from n_past on (0 starts over). */
void engine_truncate(struct engine *en, int64_t n_past);

/* "cpu (2 threads)": the backend and what it runs on. */
void engine_describe(const struct engine *en, char *buf, size_t n);

#endif
