/* pass_plan.c: slot assignment by linear scan (see pass_plan.h). */
#include "pass_plan.h"

#include <stdio.h>
#include <string.h>

int plan_root(const struct ir *ir, int n)
{
    for (;;) {
        const struct ir_node *x = &ir->node[n];
        if (x->op == IR_OP_CARRY)
            n = ir->carried_init[x->carry];
        else if (x->alias >= 0)
            n = x->alias;
        else
            return n;
    }
}

static bool owns_buffer(const struct ir_node *n)
{
    return !n->dead && n->op != IR_OP_CARRY && n->alias < 0 && n->dtype != ACT_NONE;
}

/* A PART is written when its MATMUL_QKV runs. */
static int def_pos(const struct ir *ir, int n) { return ir->node[n].op == OP_PART ? ir->node[n].src[0] : n; }

static int body_end(const struct ir *ir)
{
    int end = -1;
    for (int i = 0; i < ir->n_node; i++)
        if (ir->node[i].region == REGION_BODY)
            end = i;
    return end;
}

/* Last position at which the buffer of root r is read. */
static void last_uses(const struct ir *ir, int *last)
{
    int bend = body_end(ir);
    for (int i = 0; i < ir->n_node; i++)
        last[i] = def_pos(ir, i);
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *n = &ir->node[i];
        if (n->dead)
            continue;
        for (int s = 0; s < n->n_src; s++) {
            int r = plan_root(ir, n->src[s]);
            int at = i;
            if (n->region == REGION_BODY && ir->node[r].region == REGION_PRE)
                at = bend; /* read by every layer */
            last[r] = at > last[r] ? at : last[r];
        }
    }
    if (ir->result >= 0) {
        int r = plan_root(ir, ir->result);
        last[r] = ir->n_node; /* the logits are read after the graph */
    }
    /* a node that may share a launch with the next (graph_ops.h) keeps its
     * sources through that node */
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *n = &ir->node[i];
        if (n->dead || n->op == IR_OP_CARRY || !op_shares_launch(n->op))
            continue;
        int k = i + 1;
        while (k < ir->n_node && (ir->node[k].dead || (ir->node[k].op != IR_OP_CARRY && op_is_passive(ir->node[k].op))))
            k++;
        if (k == ir->n_node || ir->node[k].op != n->op)
            continue;
        for (int s = 0; s < n->n_src; s++) {
            int r = plan_root(ir, n->src[s]);
            last[r] = k > last[r] ? k : last[r];
        }
    }
}

static int size_expr(const struct ir *ir, const struct ir_node *n, char *buf, size_t size)
{
    const char *names[EXPR_SYMBOLS];
    static char storage[EXPR_SYMBOLS][48];
    ir_code_names(ir, names, storage);
    char dims[4][256];
    for (int d = 0; d < n->n_dims; d++)
        if (expr_to_c(&n->ne[d], names, dims[d], sizeof dims[d]) < 0)
            return -1;
    /* Every buffer is sized for f32: a Q8_1 producer writes f32 instead when
     * a reader's weights are not quantized (the runtime decides at load). */
    int w = snprintf(buf, size, "(size_t)%s * 4", dims[0]);
    for (int d = 1; d < n->n_dims && w > 0 && (size_t)w < size; d++)
        w += snprintf(buf + w, size - (size_t)w, " * (size_t)%s", dims[d]);
    return w < 0 || (size_t)w >= size ? -1 : 0;
}

/* The carried value may overwrite the layer's input only once nothing reads
 * the input any more (or the writer itself reads it element by element). */
static int check_carry(const struct ir *ir, struct error *e)
{
    for (int c = 0; c < ir->n_carried; c++) {
        int out = ir->carried_out[c], param = ir->carried_param[c];
        for (int i = 0; i < ir->n_node; i++) {
            const struct ir_node *n = &ir->node[i];
            if (n->dead || n->region != REGION_BODY)
                continue;
            for (int s = 0; s < n->n_src; s++) {
                if (plan_root(ir, n->src[s]) != plan_root(ir, param))
                    continue;
                bool in_place_ok = i == out && (n->op == OP_ADD || (n->op == OP_MATMUL_ADD && s == 1));
                if (i > out || (i == out && !in_place_ok))
                    return fail(e, "%s:%d: the layer's input is read after the layer's output is computed; "
                                   "compute the carried value last", ir->file, n->line);
            }
        }
        int init_root = plan_root(ir, ir->carried_init[c]);
        for (int i = 0; i < ir->n_node; i++) {
            const struct ir_node *n = &ir->node[i];
            for (int s = 0; !n->dead && n->region == REGION_POST && s < n->n_src; s++)
                if (plan_root(ir, n->src[s]) == init_root)
                    return fail(e, "%s:%d: this reads the value that entered g.layers, which the layers overwrite; "
                                   "use what g.layers returns", ir->file, n->line);
        }
        if (ir->node[out].op == IR_OP_CARRY || ir->node[out].alias >= 0)
            return fail(e, "%s:%d: the g.layers function must return a newly computed value, not its input or a view",
                        ir->file, ir->node[out].line);
    }
    return 0;
}

int pass_plan(struct ir *ir, struct plan *p, struct error *e)
{
    static int last[IR_MAX_NODES];
    int slot_free_after[PLAN_MAX_SLOTS];
    bool reserved[PLAN_MAX_SLOTS] = { false };
    memset(p, 0, sizeof *p);
    if (check_carry(ir, e))
        return -1;
    last_uses(ir, last);
    int bend = body_end(ir);
    for (int i = 0; i < ir->n_node; i++) {
        struct ir_node *n = &ir->node[i];
        n->slot = -1;
        if (!owns_buffer(n))
            continue;
        char sz[1024];
        if (size_expr(ir, n, sz, sizeof sz))
            return fail(e, "%s:%d: size expression too long", ir->file, n->line);
        int carried = -1;
        for (int c = 0; c < ir->n_carried; c++)
            if (ir->carried_out[c] == i)
                carried = c;
        int slot = -1, pos = def_pos(ir, i);
        if (carried >= 0) {
            slot = ir->node[plan_root(ir, ir->carried_init[carried])].slot;
        } else {
            for (int s = 0; s < p->n_slots && slot < 0; s++) /* a free slot of the same size first */
                if (!reserved[s] && slot_free_after[s] < pos && strcmp(p->size[s], sz) == 0)
                    slot = s;
            for (int s = 0; s < p->n_slots && slot < 0; s++)
                if (!reserved[s] && slot_free_after[s] < pos)
                    slot = s;
            if (slot < 0) {
                if (p->n_slots == PLAN_MAX_SLOTS)
                    return fail(e, "%s:%d: the plan needs more than %d arena slots", ir->file, n->line, PLAN_MAX_SLOTS);
                slot = p->n_slots++;
                p->size[slot][0] = 0;
                slot_free_after[slot] = -1;
            }
        }
        if (p->size[slot][0] == 0)
            snprintf(p->size[slot], sizeof p->size[slot], "%s", sz);
        else if (strcmp(p->size[slot], sz) != 0) {
            char merged[1024];
            if (snprintf(merged, sizeof merged, "arena_max(%s, %s)", p->size[slot], sz) >= (int)sizeof merged)
                return fail(e, "%s:%d: slot size expression too long", ir->file, n->line);
            memcpy(p->size[slot], merged, sizeof merged);
        }
        n->slot = slot;
        int until = last[i];
        for (int c = 0; c < ir->n_carried; c++) {
            if (plan_root(ir, ir->carried_init[c]) == i) {
                reserved[slot] = true; /* the carried slot belongs to the loop */
                until = until > bend ? until : bend;
            }
        }
        if (carried >= 0)
            reserved[slot] = false, until = until > last[plan_root(ir, ir->carried_init[carried])] ? until : last[plan_root(ir, ir->carried_init[carried])];
        slot_free_after[slot] = until > slot_free_after[slot] ? until : slot_free_after[slot];
    }
    return 0;
}
