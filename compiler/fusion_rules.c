/* fusion_rules.c: minfer's fusion patterns (see fusion_rules.h). The order
 * of the table is the order of application: later rules see the ops earlier
 * ones made (the Q8 norm, last, needs to know every matmul-family reader). */
#include "fusion_rules.h"

#include <string.h>

#define MAX_READERS 8

/* Whether node id has exactly one reader, which is `reader`, and no
 * reference from outside the node list. */
static bool only_read_by(const struct ir *ir, int id, int reader)
{
    int r[MAX_READERS];
    return ir_consumers(ir, id, r, MAX_READERS) == 1 && r[0] == reader && ir_external_uses(ir, id) == 0;
}

static struct ir_node *N(struct ir *ir, int id) { return &ir->node[id]; }

static void absorb(struct ir *ir, int id, const char *rule, int into)
{
    N(ir, id)->dead = true;
    N(ir, into)->fused_by = rule;
}

/* ADD_BIAS(MATMUL(x, w), b) -> MATMUL(x, w, bias b) */
static bool matmul_bias(struct ir *ir, int i)
{
    struct ir_node *n = N(ir, i);
    int m = n->src[0];
    if (N(ir, m)->op != OP_MATMUL || N(ir, m)->bias[0] >= 0 || !only_read_by(ir, m, i))
        return false;
    n->op = OP_MATMUL;
    n->src[0] = N(ir, m)->src[0];
    n->weight[0] = N(ir, m)->weight[0]; /* the bias stays in bias[0] */
    n->alias = -1;
    absorb(ir, m, "matmul_bias", i);
    return true;
}

/* MUL(SILU(a), b) or MUL(b, SILU(a)) -> GLU(a, b; SiLU), and the same
 * for GELU */
static bool gate_mul(struct ir *ir, int i)
{
    struct ir_node *n = N(ir, i);
    for (int side = 0; side < 2; side++) {
        int s = n->src[side], other = n->src[1 - side], op = N(ir, s)->op;
        if ((op == OP_SILU || op == OP_GELU) && only_read_by(ir, s, i)) {
            n->op = OP_GLU;
            n->glu = op == OP_SILU ? GLU_SILU : GLU_GELU;
            n->src[0] = N(ir, s)->src[0];
            n->src[1] = other;
            absorb(ir, s, "gate_mul", i);
            return true;
        }
    }
    return false;
}

/* GLU(MATMUL(x, wg), MATMUL(x, wu)) -> FFN_GLU(x; wg, wu), the same gate */
static bool gate_up_pair(struct ir *ir, int i)
{
    struct ir_node *n = N(ir, i);
    int g = n->src[0], u = n->src[1];
    const struct ir_node *gn = N(ir, g), *un = N(ir, u);
    if (gn->op != OP_MATMUL || un->op != OP_MATMUL || gn->src[0] != un->src[0] || gn->bias[0] >= 0 ||
        un->bias[0] >= 0 || !only_read_by(ir, g, i) || !only_read_by(ir, u, i))
        return false;
    n->op = OP_FFN_GLU;
    n->n_src = 1;
    n->src[0] = gn->src[0];
    n->weight[0] = gn->weight[0];
    n->weight[1] = un->weight[0];
    absorb(ir, g, "gate_up_pair", i);
    absorb(ir, u, "gate_up_pair", i);
    return true;
}

/* ROPE(HEAD_NORM(x, w, eps), positions; base) -> HEAD_NORM_ROPE(x, positions; w, eps, base) */
static bool head_norm_rope(struct ir *ir, int i)
{
    struct ir_node *n = N(ir, i);
    int h = n->src[0];
    if (N(ir, h)->op != OP_HEAD_NORM || !only_read_by(ir, h, i))
        return false;
    n->op = OP_HEAD_NORM_ROPE;
    n->eps = N(ir, h)->eps;
    n->weight[0] = N(ir, h)->weight[0];
    n->src[0] = N(ir, h)->src[0];
    absorb(ir, h, "head_norm_rope", i);
    return true;
}

/* ADD(P(x), r) or ADD(r, P(x)), P read only by the add -> F(x, r) with P's
 * weight, bias and epsilon: the residual add as the producer's epilogue. */
static bool fold_into_add(struct ir *ir, int i, int producer, int fused, const char *rule)
{
    struct ir_node *n = N(ir, i);
    for (int side = 0; side < 2; side++) {
        int m = n->src[side], r = n->src[1 - side];
        if (N(ir, m)->op == producer && only_read_by(ir, m, i)) {
            n->op = fused;
            n->src[0] = N(ir, m)->src[0];
            n->src[1] = r;
            n->weight[0] = N(ir, m)->weight[0];
            n->bias[0] = N(ir, m)->bias[0];
            n->eps = N(ir, m)->eps;
            absorb(ir, m, rule, i);
            return true;
        }
    }
    return false;
}

/* ADD(MATMUL(x, w), r) -> MATMUL_ADD(x, r; w) */
static bool residual_epilogue(struct ir *ir, int i)
{
    return fold_into_add(ir, i, OP_MATMUL, OP_MATMUL_ADD, "residual_epilogue");
}

/* ADD(RMS_NORM(a, w, eps), r) -> RMS_NORM_ADD(a, r; w, eps): a norm on a
 * block's output (Gemma's post-attention and post-feed-forward norms) and
 * the residual add in one pass */
static bool norm_residual(struct ir *ir, int i)
{
    return fold_into_add(ir, i, OP_RMS_NORM, OP_RMS_NORM_ADD, "norm_residual");
}

/* Three MATMULs of one input -> MATMUL_QKV writing q (this node) and two
 * PART outputs (the other two nodes, which keep their ids and readers). */
static bool qkv(struct ir *ir, int i)
{
    struct ir_node *n = N(ir, i);
    int readers[MAX_READERS], mm[3], k = 0;
    int c = ir_consumers(ir, n->src[0], readers, MAX_READERS);
    for (int r = 0; r < c && r < MAX_READERS; r++)
        if (N(ir, readers[r])->op == OP_MATMUL && k < 3)
            mm[k++] = readers[r];
        else if (N(ir, readers[r])->op == OP_MATMUL)
            return false; /* more than three */
    if (k != 3 || mm[0] != i)
        return false;
    for (int j = 0; j < 3; j++) {
        n->weight[j] = N(ir, mm[j])->weight[0];
        n->bias[j] = N(ir, mm[j])->bias[0];
    }
    n->op = OP_MATMUL_QKV;
    n->fused_by = "qkv";
    for (int j = 1; j < 3; j++) {
        struct ir_node *p = N(ir, mm[j]);
        p->op = OP_PART;
        p->src[0] = i;
        p->part = j;
        for (int w = 0; w < GRAPH_MAX_W; w++)
            p->weight[w] = p->bias[w] = -1;
        p->fused_by = "qkv";
    }
    return true;
}

/* RMS_NORM read only as the input (src 0) of matmuls -> RMS_NORM_Q8, which
 * quantizes once for all of them. */
static bool norm_q8(struct ir *ir, int i)
{
    int readers[MAX_READERS];
    int c = ir_consumers(ir, i, readers, MAX_READERS);
    if (c == 0 || c > MAX_READERS || ir_external_uses(ir, i))
        return false;
    for (int r = 0; r < c; r++) {
        const struct ir_node *rd = N(ir, readers[r]);
        if (!op_is_matmul(rd->op) || rd->src[0] != i || (rd->n_src > 1 && rd->src[1] == i))
            return false;
    }
    N(ir, i)->op = OP_RMS_NORM_Q8;
    N(ir, i)->fused_by = "norm_q8";
    return true;
}

const struct fusion_rule fusion_rules[] = {
    { "matmul_bias", OP_ADD_BIAS, matmul_bias, "bias add becomes the matmul's epilogue" },
    { "gate_mul", OP_MUL, gate_mul, "silu(a) * b or gelu(a) * b becomes one GLU" },
    { "gate_up_pair", OP_GLU, gate_up_pair, "gate and up matmuls of one input and their GLU: one paired matmul" },
    { "head_norm_rope", OP_ROPE, head_norm_rope, "per-head norm then RoPE in one op" },
    { "residual_epilogue", OP_ADD, residual_epilogue, "matmul followed by the residual add: the add is its epilogue" },
    { "norm_residual", OP_ADD, norm_residual, "a norm of a block's output and the residual add: one pass" },
    { "qkv", OP_MATMUL, qkv, "Q, K and V matmuls of one input: one op, one read of the input" },
    { "norm_q8", OP_RMS_NORM, norm_q8, "a norm read only by matmuls emits the Q8_1 activation they consume" },
};

const int fusion_rule_count = sizeof fusion_rules / sizeof fusion_rules[0];
