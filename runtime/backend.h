/* backend.h: what the engine asks of a backend. A backend is a table of
 * operations chosen once, at load; the engine never names a backend's
 * internals. The backend owns the engine's device memory: the activation
 * arena the graphs are planned into and the KV cache. Placement is decided
 * before anything runs, node by node (supports), for every graph the engine
 * keeps; there is no fallback in the middle of a run. */
#ifndef MINFER_BACKEND_H
#define MINFER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graph.h"
#include "kv_cache.h"
#include "model.h"

/* What a backend's per-engine state is sized for. */
struct backend_sizes {
    size_t arena_bytes;   /* the largest graph's plan */
    enum kv_type kv_type;
    int n_layer;
    int64_t n_ctx, n_head_kv, head_dim;
    int64_t n_head;       /* query heads */
    int64_t k_max;        /* the longest weight row */
    int64_t n_batch;      /* the most tokens a graph has */
    int n_threads;        /* CPU threads (the CPU backend) */
    bool graphs;          /* may capture graphs and replay them (the CUDA backend; --no-graphs) */
};

struct backend {
    const char *name;     /* "cpu", "cuda" */
    bool q8_activations;  /* takes Q8_1 activations where a graph offers them (RMS_NORM_Q8) */
    /* Whether this build and machine can run it at all; if not, e says why. */
    bool (*available)(struct error *e);
    /* Whether it can run node i of g, judged on the whole node (op, shapes,
     * weight types); if not, e names what it refuses. */
    bool (*supports)(const struct graph *g, int i, struct error *e);
    /* Its state for one engine: arena, KV cache, scratch; the model's weights
     * registered (uploaded, repacked) once. */
    int (*init)(void **state, const struct model *m, const struct backend_sizes *z, struct error *e);
    void (*free)(void *state);
    /* Writes an input node's data (token ids, positions, KV length) before a run. */
    int (*write_input)(void *state, const struct graph *g, int node, const void *data, size_t bytes, struct error *e);
    /* Runs every node of g. */
    int (*execute)(void *state, const struct graph *g, struct error *e);
    /* Reads n floats of node's output, from column first on. */
    int (*read_output)(void *state, const struct graph *g, int node, int64_t first, size_t n, float *out,
                       struct error *e);
    /* The index of the largest of the last column of node's output (lowest on ties, NaNs ignored). */
    int (*read_argmax)(void *state, const struct graph *g, int node, int32_t *out, struct error *e);
    /* Greedy decoding without the host in between: runs next (one token)
     * on the argmax of node's last column in g as its token, at position
     * pos with KV length kv_len, found and written into next's inputs
     * where the logits are; *out gets the token id as soon as it is known,
     * while next may still run. NULL where nothing is gained (the CPU):
     * the engine reads the argmax, then writes the inputs and executes. */
    int (*execute_argmax)(void *state, const struct graph *g, int node, const struct graph *next, int32_t pos,
                          int32_t kv_len, int32_t *out, struct error *e);
    /* A line describing what it runs on, for the user ("2 threads", "NVIDIA H200"). */
    void (*describe)(void *state, char *buf, size_t n);
};

extern const struct backend cpu_backend;      /* the f32 reference */
extern const struct backend cpu_fast_backend; /* Q8_1 activations, integer dots (cpu.h) */
#ifdef MINFER_CUDA
extern const struct backend cuda_backend;
#endif

/* The backends a --device name asks for, in the order to try them: "cpu",
 * "cpu-fast", "cuda", or "auto" (CUDA where this build has it and a device
 * exists, then the CPU's fast path; the reference only when named). Returns
 * how many (0 with e set when the named one cannot run here, saying why). */
int backend_choose(const char *device, const struct backend *out[2], struct error *e);

#endif
