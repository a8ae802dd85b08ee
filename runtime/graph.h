/* graph.h: the compute graph the generated builders fill and the executor
 * walks. Nodes are recorded, never computed, by graph_add; each carries its
 * concrete shape, its place in the activation arena (from the compiler's
 * memory plan) and the description line that made it, for messages. */
#ifndef MINFER_GRAPH_H
#define MINFER_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graph_ops.h"
#include "weights.h"

#define GRAPH_ABI_VERSION 4 /* generated code states the version it was made for */

/* An op's parameters; which ones it reads is its row in the op table. */
struct op_params {
    const struct weight *w[GRAPH_MAX_W];    /* weights (w0 of MATMUL, the gate and up of FFN_GLU, ...) */
    const struct weight *bias[GRAPH_MAX_W]; /* the matching biases, NULL when absent */
    float eps;                    /* norms */
    float rope_base;              /* ROPE, HEAD_NORM_ROPE */
    float rope_factor;            /* ROPE, HEAD_NORM_ROPE: linear scaling, positions / factor (0: none) */
    enum rope_style rope_style;   /* ROPE, HEAD_NORM_ROPE */
    int64_t head_dim;             /* HEADS */
    float scale;                  /* SCALE */
    int64_t window;               /* ATTENTION: positions each query sees, 0 = all (causal) */
    enum glu_gate glu;            /* GLU, FFN_GLU */
    int part;                     /* PART: which output of its producer (1, 2) */
};

/* What a generated builder passes for one node. */
struct node_desc {
    enum op op;
    int line;                     /* description line */
    int src[GRAPH_MAX_SRC];       /* node indices, -1 when unused */
    struct op_params p;
    size_t offset;                /* arena byte offset for nodes that own a buffer */
    int64_t ne[3];                /* the shape the compiler derived, checked against the runtime's (0: unchecked) */
};

struct node {
    enum op op;
    enum act_type dtype;
    int n_dims;
    int64_t ne[4];
    int src[GRAPH_MAX_SRC];
    struct op_params p;
    int layer;                    /* layer index for nodes inside the layer loop, else -1 */
    int line;
    size_t offset;                /* where the data starts in the arena (views: inside their root) */
    size_t bytes;                 /* bytes this node writes, 0 for views and KV_STORE */
    int view_of;                  /* views: the node whose buffer they read, else -1 */
    int part[2];                  /* MATMUL_QKV: its PART nodes (k, v), else -1 */
    int64_t row_stride;           /* bytes between columns (views keep their root's) */
};

struct graph {
    struct node *node;
    int n, cap;
    unsigned generation;          /* bumped by each graph_reset: a backend's copy of the graph can tell it is stale */
    int64_t nt;                   /* tokens in this graph */
    int64_t n_out;                /* the last n_out of them get logits (OUTPUTS) */
    int layer;                    /* current layer while building, -1 outside the loop */
    size_t arena_bytes;           /* from the memory plan */
    const char *source;           /* the description file, for messages */
    struct error err;             /* first error while building */
    bool failed;
    int result;                   /* the logits node */
    bool q8_activations;          /* the backend takes Q8_1 activations where the graph offers them */
    int input[3];                 /* the TOKENS, POSITIONS and KV_LEN nodes, -1 until recorded */
};

int graph_init(struct graph *g, int cap, const char *source, struct error *e);
void graph_free(struct graph *g);
void graph_reset(struct graph *g, int64_t nt, int64_t n_out);

/* Records one node; returns its index, or -1 after latching an error that
 * names the op, the description line and the offending values. ADD_BIAS
 * with an absent bias records nothing and returns its source. */
int graph_add(struct graph *g, const struct node_desc *d);

/* Bytes of an activation of the given type and shape. */
size_t graph_act_bytes(enum act_type t, const int64_t ne[4]);

const char *graph_op_name(enum op op);

#endif
