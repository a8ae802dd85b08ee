/* dump.c: IR listings and Graphviz output (see dump.h). */
#include "dump.h"

#include <string.h>

static const char *region_name(enum region r) { return r == REGION_PRE ? "pre" : r == REGION_BODY ? "layer" : "post"; }

static const char *dtype_name(int t)
{
    return t == ACT_F32 ? "f32" : t == ACT_I32 ? "i32" : t == ACT_Q8_1 ? "q8_1" : "-";
}

static void node_args(FILE *f, const struct ir *ir, const struct ir_node *n)
{
    for (int i = 0; i < n->n_src; i++)
        fprintf(f, "%s%%%d", i ? ", " : "", n->src[i]);
    bool first = n->n_src == 0;
    for (int i = 0; i < 2 * GRAPH_MAX_W; i++) { /* the weights, then the biases */
        int t = i < GRAPH_MAX_W ? n->weight[i] : n->bias[i - GRAPH_MAX_W];
        if (t >= 0)
            fprintf(f, "%s%s", first ? "" : ", ", ir->t[t].field), first = false;
    }
    if (n->eps >= 0)
        fprintf(f, ", %s", ir->hp[n->eps].name);
    if (n->rope_base >= 0)
        fprintf(f, ", %s", ir->hp[n->rope_base].name);
    if (n->rope_factor >= 0)
        fprintf(f, ", positions / %s", ir->hp[n->rope_factor].name);
    if (n->scale >= 0)
        fprintf(f, ", %s", ir->hp[n->scale].name);
    if (n->window >= 0)
        fprintf(f, ", window %s", ir->hp[n->window].name);
    if (n->op == OP_GLU || n->op == OP_FFN_GLU)
        fprintf(f, ", %s", n->glu == GLU_GELU ? "gelu" : "silu");
}

void dump_ir(FILE *f, const struct ir *ir, const char *title)
{
    fprintf(f, "== %s: %s (%s)\n", title, ir->name, ir->file);
    int live = 0;
    for (int i = 0; i < ir->n_node; i++)
        live += !ir->node[i].dead;
    fprintf(f, "nodes: %d live of %d recorded; layer loop over %s carrying %d value%s\n", live, ir->n_node,
            ir->n_layer_hp >= 0 ? ir->hp[ir->n_layer_hp].name : "?", ir->n_carried, ir->n_carried == 1 ? "" : "s");
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *n = &ir->node[i];
        if (n->dead)
            continue;
        char shape[256];
        ir_shape_text(ir, n, shape, sizeof shape);
        fprintf(f, "%%%-3d %-5s %-14s %-5s %-36s (", i, region_name(n->region), ir_op_name(n->op), dtype_name(n->dtype),
                n->n_dims ? shape : "-");
        node_args(f, ir, n);
        fprintf(f, ")");
        if (n->alias >= 0)
            fprintf(f, " alias %%%d", n->alias);
        if (n->slot >= 0)
            fprintf(f, " slot %d", n->slot);
        if (n->fused_by)
            fprintf(f, " [%s]", n->fused_by);
        fprintf(f, " line %d\n", n->line);
    }
    for (int i = 0; i < ir->n_carried; i++)
        fprintf(f, "carried %d: %%%d -> %%%d each layer\n", i, ir->carried_init[i], ir->carried_out[i]);
    for (int i = 0; i < ir->n_hp; i++) {
        const struct ir_hparam *h = &ir->hp[i];
        char a[48], b[48];
        if (h->source != HP_LAYER)
            continue;
        for (int k = 0; k < 2; k++) {
            if (h->choice_hp[k] >= 0)
                snprintf(k ? b : a, 48, "%s", ir->hp[h->choice_hp[k]].name);
            else
                snprintf(k ? b : a, 48, "%.17g", h->choice_c[k]);
        }
        fprintf(f, "%s: %s where %s, else %s (line %d)\n", h->name, a, h->def_text, b, h->line);
    }
    fprintf(f, "result: %%%d\n", ir->result);
}

void dump_dot_begin(FILE *f, const struct ir *ir)
{
    fprintf(f, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n", ir->name);
}

void dump_dot_layer(FILE *f, const struct ir *ir, const char *title, int cluster)
{
    fprintf(f, "  subgraph cluster_%d {\n    label=\"%s\";\n", cluster, title);
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *n = &ir->node[i];
        if (n->dead || n->region != REGION_BODY)
            continue;
        char shape[256];
        ir_shape_text(ir, n, shape, sizeof shape);
        fprintf(f, "    c%d_n%d [label=\"%s\\n%s", cluster, i, ir_op_name(n->op), n->n_dims ? shape : "");
        for (int w = 0; w < 2 * GRAPH_MAX_W; w++) {
            int t = w < GRAPH_MAX_W ? n->weight[w] : n->bias[w - GRAPH_MAX_W];
            if (t >= 0)
                fprintf(f, "\\n%s", ir->t[t].field);
        }
        fprintf(f, "\"%s];\n", n->fused_by ? ", style=filled, fillcolor=\"#dde8ff\"" : "");
        for (int s = 0; s < n->n_src; s++)
            if (ir->node[n->src[s]].region == REGION_BODY)
                fprintf(f, "    c%d_n%d -> c%d_n%d;\n", cluster, n->src[s], cluster, i);
    }
    fprintf(f, "  }\n");
}

void dump_dot_end(FILE *f) { fprintf(f, "}\n"); }
