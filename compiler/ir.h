/* ir.h: the compiler's picture of one architecture: its hyperparameters and
 * tensors (from the description's tables) and the traced forward pass as a
 * list of nodes in execution order. Passes annotate and rewrite it in place;
 * the emitter turns it into C. */
#ifndef MINFER_COMPILER_IR_H
#define MINFER_COMPILER_IR_H

#include <stdbool.h>

#include "ast.h"
#include "expr.h"
#include "graph_ops.h"

#define IR_MAX_HPARAMS 48
#define IR_MAX_TENSORS 64
#define IR_MAX_NODES 512
#define IR_MAX_CARRIED 4
#define IR_MAX_TYPED_LAYERS 256 /* layers whose weight types a specialized build records */
#define IR_SYM_NT (EXPR_SYMBOLS - 1)   /* the token count: a shape symbol that is not a hyperparameter */
#define IR_SYM_NOUT (EXPR_SYMBOLS - 2) /* the tokens whose logits are wanted (1 while generating, nt for perplexity) */
#define IR_SYM_LAYER (EXPR_SYMBOLS - 3) /* the layer's index, in per-layer conditions only */

/* Compiler-only pseudo-op: a loop body's view of a carried value. */
#define IR_OP_CARRY OP_COUNT

enum hp_kind { HP_INT, HP_FLOAT };
enum hp_source { HP_GGUF, HP_ARRAY_LENGTH, HP_DERIVED, HP_LAYER };
enum region { REGION_PRE, REGION_BODY, REGION_POST };

struct ir_hparam {
    char name[32];
    enum hp_kind kind;
    enum hp_source source;
    char key[128];      /* GGUF key with {arch} substituted (HP_GGUF, HP_ARRAY_LENGTH) */
    bool has_default;   /* absent key: use def / fdef */
    struct ast def;     /* integer default or derivation (HP_LAYER: the condition) */
    char def_text[96];
    double fdef;        /* float default */
    int line;
    /* HP_LAYER (g.per_layer, not read from the file): choice 0 on the layers
     * where the condition holds, choice 1 on the others; each a
     * hyperparameter (choice_hp >= 0) or the constant choice_c */
    int choice_hp[2];
    double choice_c[2];
    /* specialization: a concrete value, when compiling for one model */
    bool fixed;
    int64_t value;
    double fvalue;
};

struct ir_tensor {
    char field[32];      /* member name in the generated weights struct */
    char pattern[64];    /* GGUF name; "%d" is the layer number */
    bool per_layer, optional;
    int fallback;        /* tensor bound when this one is absent, or -1 */
    int n_dims;
    struct expr ne[4];
    char ne_text[4][96]; /* as written */
    int line;
    /* specialization with weight types (a GGUF file, or a preset's quant
     * mix): the type in each layer (index 0 when not per layer), -1 unknown */
    signed char type[IR_MAX_TYPED_LAYERS];
};

struct ir_node {
    int op;               /* enum op, or IR_OP_CARRY */
    int n_src;
    int src[GRAPH_MAX_SRC];  /* node indices */
    int weight[GRAPH_MAX_W]; /* tensor indices, -1 when unused (the op table's w slots) */
    int bias[GRAPH_MAX_W];   /* and its bias slots */
    int n_dims;
    struct expr ne[4];
    int dtype;            /* enum act_type */
    int eps, rope_base;   /* float hyperparameters, or -1 */
    int rope_factor;      /* ROPE: linear position scaling, a float hyperparameter, or -1 */
    int scale;            /* SCALE: a float hyperparameter */
    int window;           /* ATTENTION: an integer hyperparameter, or -1 (all positions) */
    int glu;              /* GLU, FFN_GLU: enum glu_gate */
    struct expr head_dim; /* HEADS */
    int rope_style;       /* ROPE, HEAD_NORM_ROPE: enum rope_style */
    int part;             /* PART: which output of its producer */
    int carry;            /* IR_OP_CARRY: which carried value */
    enum region region;
    int line;             /* description line that created it */
    bool dead;            /* folded into another node by fusion */
    int alias;            /* shares this node's buffer (views, in-place ops), or -1 */
    int slot;             /* memory plan: arena slot, -1 for none */
    const char *fused_by; /* name of the fusion rule that made it */
};

struct ir {
    char file[256];       /* the description, as named on the command line */
    char name[32];        /* architecture name (file stem) */
    char gguf_arch[32];   /* general.architecture value */
    struct ir_hparam hp[IR_MAX_HPARAMS];
    int n_hp;
    struct ir_tensor t[IR_MAX_TENSORS];
    int n_t;
    struct ir_node node[IR_MAX_NODES];
    int n_node;
    int n_layer_hp;       /* hparam giving the layer loop's count */
    bool typed;           /* specialized with weight types: ir_tensor.type holds them */
    int n_ctx_hp;         /* hparam giving the model's training context */
    int n_carried;
    int carried_init[IR_MAX_CARRIED];  /* value entering the loop */
    int carried_param[IR_MAX_CARRIED]; /* IR_OP_CARRY node in the body */
    int carried_out[IR_MAX_CARRIED];   /* value leaving each iteration */
    int result;                        /* the forward's return value */
    int positions, kv_len;             /* the graph inputs recorded before the description's nodes */
    bool traced_loop;
};

/* Live nodes reading node id (sources only), up to max, in order; returns
 * how many there are. ir_external_uses counts references from the loop's
 * carried values and the forward's result. */
int ir_consumers(const struct ir *ir, int id, int *out, int max);
int ir_external_uses(const struct ir *ir, int id);

/* Whether node n takes hyperparameter (or per-layer value) hp as one of
 * its parameters (eps, RoPE base and factor, scale, window). */
bool ir_node_reads_hparam(const struct ir_node *n, int hp);

/* Descriptive names for messages and dumps. */
const char *ir_op_name(int op);

/* Symbol names for expr_to_c / dumps: hparams by name, nt as "nt". */
void ir_symbol_names(const struct ir *ir, const char *names[EXPR_SYMBOLS], const char *prefix, char storage[][48]);

/* Formats a node's shape as "[a, b, c]" into buf. */
void ir_shape_text(const struct ir *ir, const struct ir_node *n, char *buf, size_t size);

/* Names for generated code: hp->x, or INT64_C(value) for a hyperparameter
 * fixed by specialization. */
void ir_code_names(const struct ir *ir, const char *names[EXPR_SYMBOLS], char storage[][48]);

/* The symbol id of hparam i is i; expressions index hparams directly. */
int ir_find_hparam(const struct ir *ir, const char *name);
int ir_find_tensor(const struct ir *ir, const char *field);

#endif
