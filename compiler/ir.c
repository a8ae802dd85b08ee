/* ir.c: small shared helpers over the IR (see ir.h). */
#include "ir.h"

#include <stdio.h>
#include <string.h>

const char *ir_op_name(int op)
{
    if (op == IR_OP_CARRY)
        return "CARRY";
    return op >= 0 && op < OP_COUNT ? op_info(op)->name : "?";
}


bool ir_node_reads_hparam(const struct ir_node *n, int hp)
{
    return n->eps == hp || n->rope_base == hp || n->rope_factor == hp || n->scale == hp || n->window == hp;
}

void ir_symbol_names(const struct ir *ir, const char *names[EXPR_SYMBOLS], const char *prefix, char storage[][48])
{
    for (int i = 0; i < EXPR_SYMBOLS; i++) {
        if (i < ir->n_hp)
            snprintf(storage[i], 48, "%s%s", prefix, ir->hp[i].name);
        else
            snprintf(storage[i], 48, i == IR_SYM_NT ? "nt" : i == IR_SYM_NOUT ? "n_out" : i == IR_SYM_LAYER ? "layer" : "sym%d", i);
        names[i] = storage[i];
    }
}

void ir_code_names(const struct ir *ir, const char *names[EXPR_SYMBOLS], char storage[][48])
{
    ir_symbol_names(ir, names, "hp->", storage);
    for (int i = 0; i < ir->n_hp; i++)
        if (ir->hp[i].fixed)
            snprintf(storage[i], 48, "INT64_C(%lld)", (long long)ir->hp[i].value);
    snprintf(storage[IR_SYM_LAYER], 48, "(int64_t)il"); /* the builder's loop variable */
}

void ir_shape_text(const struct ir *ir, const struct ir_node *n, char *buf, size_t size)
{
    const char *names[EXPR_SYMBOLS];
    char storage[EXPR_SYMBOLS][48];
    ir_symbol_names(ir, names, "", storage);
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < n->n_dims && len < size; d++) {
        if (d)
            len += (size_t)snprintf(buf + len, size - len, ", ");
        int w = expr_to_c(&n->ne[d], names, buf + len, size - len);
        if (w < 0)
            return;
        len += (size_t)w;
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

int ir_find_hparam(const struct ir *ir, const char *name)
{
    for (int i = 0; i < ir->n_hp; i++)
        if (strcmp(ir->hp[i].name, name) == 0)
            return i;
    return -1;
}

int ir_find_tensor(const struct ir *ir, const char *field)
{
    for (int i = 0; i < ir->n_t; i++)
        if (strcmp(ir->t[i].field, field) == 0)
            return i;
    return -1;
}

int ir_consumers(const struct ir *ir, int id, int *out, int max)
{
    int n = 0;
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *c = &ir->node[i];
        if (c->dead)
            continue;
        for (int s = 0; s < c->n_src; s++) {
            if (c->src[s] == id) {
                if (n < max)
                    out[n] = i;
                n++;
                break;
            }
        }
    }
    return n;
}

int ir_external_uses(const struct ir *ir, int id)
{
    int n = ir->result == id;
    for (int i = 0; i < ir->n_carried; i++)
        n += ir->carried_out[i] == id || ir->carried_init[i] == id;
    return n;
}
