/* arch_def.h: what the compiler generates for each architecture, as the
 * runtime sees it. Everything architecture-specific reaches the runtime
 * through one struct arch_def; the runtime holds no per-architecture code. */
#ifndef MINFER_ARCH_DEF_H
#define MINFER_ARCH_DEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf/gguf.h"
#include "graph.h"

struct tensor_spec {
    const char *field;    /* member name in the weights (or layer) struct */
    const char *pattern;  /* GGUF name; "%d" is the layer number */
    bool per_layer;
    bool optional;        /* may be absent: its slot stays NULL */
    int fallback;         /* spec bound instead when absent, or -1 */
    int n_dims;
    size_t offset;        /* offsetof the member */
};

/* How a hyperparameter is read (for tools that write model files). */
enum hparam_source { HPARAM_GGUF, HPARAM_ARRAY_LENGTH, HPARAM_DERIVED };

struct hparam_spec {
    const char *name;     /* member name in the hparams struct */
    const char *key;      /* GGUF key (GGUF, ARRAY_LENGTH) */
    bool is_float;        /* float, else int64_t */
    enum hparam_source source;
    bool has_default;     /* may be absent from the file */
    size_t offset;        /* offsetof the member */
};

struct arch_def {
    int abi;                      /* GRAPH_ABI_VERSION it was generated for */
    const char *name;             /* "qwen3", or "qwen3_8b" when specialized */
    const char *gguf_name;        /* general.architecture */
    const char *source;           /* the description file */
    const char *preset;           /* specialized: the model it was built for, else NULL */
    size_t hparams_size, weights_size, layer_size;
    size_t layers_offset;         /* offsetof the weights struct's layer array pointer */
    /* Reads and checks the hyperparameters (a specialized build also checks
     * they equal the ones it was built for). */
    int (*read_hparams)(const struct gguf *g, void *hp, struct error *e);
    const struct hparam_spec *hparams;
    int n_hparams;
    int64_t (*n_layer)(const void *hp);
    int64_t (*n_ctx)(const void *hp);  /* the model's training context */
    const struct tensor_spec *tensors;
    int n_tensors;
    void (*tensor_shape)(const void *hp, int tensor, int64_t ne[4]);
    int (*max_nodes)(const void *hp);
    /* Activation bytes of the graph for nt tokens, n_out of them with logits. */
    size_t (*arena_bytes)(const void *hp, int64_t nt, int64_t n_out);
    /* Records the forward graph for nt tokens whose last n_out (1..nt) get
     * logits; returns the logits node ([n_vocab, n_out]) or -1. */
    int (*build)(struct graph *g, const void *hp, const void *weights, int64_t nt, int64_t n_out);
};

static inline size_t arena_max(size_t a, size_t b) { return a > b ? a : b; }
static inline size_t arena_align(size_t n) { return (n + 255) & ~(size_t)255; }

/* The architectures compiled into this binary (generated registry). */
extern const struct arch_def *const arch_registry[];
extern const int arch_registry_count;

/* Finds an architecture by general.architecture; NULL if none. */
const struct arch_def *arch_find(const char *gguf_name, size_t len);

#endif
