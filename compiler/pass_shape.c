/* pass_shape.c: shape and type inference (see pass_shape.h). */
#include "pass_shape.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct ctx {
    struct ir *ir;
    struct error *e;
    const char *names[EXPR_SYMBOLS];
    char storage[EXPR_SYMBOLS][48];
};

static const char *lower_op(int op, char *buf)
{
    const char *n = ir_op_name(op);
    size_t i = 0;
    for (; n[i] && i < 31; i++)
        buf[i] = (char)tolower((unsigned char)n[i]);
    buf[i] = 0;
    return buf;
}

/* Fails with "file:line: g.op: message". */
static int nfail(struct ctx *c, const struct ir_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int nfail(struct ctx *c, const struct ir_node *n, const char *fmt, ...)
{
    char op[32], msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(c->e, "%s:%d: g.%s: %s", c->ir->file, n->line, lower_op(n->op, op), msg);
}

static void text(struct ctx *c, const struct expr *x, char *buf, size_t n)
{
    if (expr_to_c(x, c->names, buf, n) < 0)
        snprintf(buf, n, "(too long)");
}

static void shape_text(struct ctx *c, int n_dims, const struct expr *ne, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < n_dims && len < n; d++) {
        if (d)
            len += (size_t)snprintf(buf + len, n - len, ", ");
        text(c, &ne[d], buf + len, n - len);
        len = strlen(buf);
    }
    if (len < n)
        snprintf(buf + len, n - len, "]");
}

static void set_shape(struct ir_node *n, int dims, struct expr a, struct expr b, struct expr c, int dtype)
{
    n->n_dims = dims;
    n->ne[0] = a;
    n->ne[1] = b;
    n->ne[2] = c;
    n->ne[3] = expr_const(1);
    n->dtype = dtype;
}

static void copy_shape(struct ir_node *n, const struct ir_node *from)
{
    n->n_dims = from->n_dims;
    memcpy(n->ne, from->ne, sizeof n->ne);
    n->dtype = from->dtype;
}

static bool same_shape(const struct ir_node *a, const struct ir_node *b)
{
    if (a->n_dims != b->n_dims)
        return false;
    for (int d = 0; d < a->n_dims; d++)
        if (!expr_eq(&a->ne[d], &b->ne[d]))
            return false;
    return true;
}

static int want_dims(struct ctx *c, const struct ir_node *n, const struct ir_node *s, int dims, const char *what)
{
    if (s->n_dims == dims && s->dtype == ACT_F32)
        return 0;
    if (s->n_dims == dims && op_is_matmul(n->op) && s->dtype == ACT_Q8_1)
        return 0;
    char got[200], want[64];
    shape_text(c, s->n_dims, s->ne, got, sizeof got);
    snprintf(want, sizeof want, "%s: a %d-D f32 value", what, dims);
    return nfail(c, n, "%s expected, got %s", want, s->dtype == ACT_I32 ? "token ids" : s->dtype == ACT_NONE ? "kv_store result" : got);
}

/* The weight's dimension d must equal x; says which tensor and what differs. */
static int want_weight_dim(struct ctx *c, const struct ir_node *n, int w, int d, const struct expr *x, const char *what)
{
    const struct ir_tensor *t = &c->ir->t[w];
    if (d < t->n_dims && expr_eq(&t->ne[d], x))
        return 0;
    char have[200];
    text(c, x, have, sizeof have);
    return nfail(c, n, "%s is %s, but tensor '%s' (%s) has %s there", what, have, t->field, t->pattern,
                 d < t->n_dims ? t->ne_text[d] : "no such dimension");
}

static int want_1d_weight(struct ctx *c, const struct ir_node *n, int w, const struct expr *len, const char *what)
{
    if (c->ir->t[w].n_dims != 1)
        return nfail(c, n, "tensor '%s' must be 1-D for %s", c->ir->t[w].field, what);
    return want_weight_dim(c, n, w, 0, len, what);
}

static int matmul_shape(struct ctx *c, struct ir_node *n, int w, int bias, const struct ir_node *x)
{
    if (want_dims(c, n, x, 2, "input"))
        return -1;
    if (c->ir->t[w].n_dims != 2)
        return nfail(c, n, "tensor '%s' must be 2-D to multiply by, it has %s", c->ir->t[w].field,
                     c->ir->t[w].n_dims == 1 ? "1 dimension" : "more than 2");
    if (want_weight_dim(c, n, w, 0, &x->ne[0], "the input's row length"))
        return -1;
    if (bias >= 0 && want_1d_weight(c, n, bias, &c->ir->t[w].ne[1], "a bias"))
        return -1;
    set_shape(n, 2, c->ir->t[w].ne[1], x->ne[1], expr_const(1), ACT_F32);
    return 0;
}

static int infer(struct ctx *c, struct ir_node *n)
{
    struct ir *ir = c->ir;
    const struct ir_node *s0 = n->n_src > 0 ? &ir->node[n->src[0]] : NULL;
    const struct ir_node *s1 = n->n_src > 1 ? &ir->node[n->src[1]] : NULL;
    switch (n->op) {
    case OP_TOKENS:
    case OP_POSITIONS:
        set_shape(n, 1, expr_sym(IR_SYM_NT), expr_const(1), expr_const(1), ACT_I32);
        return 0;
    case OP_KV_LEN:
        set_shape(n, 1, expr_const(1), expr_const(1), expr_const(1), ACT_I32);
        return 0;
    case IR_OP_CARRY:
        copy_shape(n, s0);
        return 0;
    case OP_EMBED:
        if (s0->dtype != ACT_I32)
            return nfail(c, n, "the second argument must be g.tokens()");
        if (ir->t[n->weight[0]].n_dims != 2)
            return nfail(c, n, "tensor '%s' must be 2-D [n_embd, n_vocab]", ir->t[n->weight[0]].field);
        set_shape(n, 2, ir->t[n->weight[0]].ne[0], s0->ne[0], expr_const(1), ACT_F32);
        return 0;
    case OP_RMS_NORM:
    case OP_RMS_NORM_Q8:
        if (want_dims(c, n, s0, 2, "input") || want_1d_weight(c, n, n->weight[0], &s0->ne[0], "the row length"))
            return -1;
        copy_shape(n, s0);
        n->dtype = n->op == OP_RMS_NORM_Q8 ? ACT_Q8_1 : ACT_F32;
        return 0;
    case OP_HEAD_NORM:
    case OP_HEAD_NORM_ROPE:
    case OP_ROPE:
        if (want_dims(c, n, s0, 3, "heads (use g.heads first)"))
            return -1;
        if (n->op != OP_ROPE && want_1d_weight(c, n, n->weight[0], &s0->ne[0], "the head size"))
            return -1;
        copy_shape(n, s0);
        return 0;
    case OP_MATMUL:
        return matmul_shape(c, n, n->weight[0], n->bias[0], s0);
    case OP_RMS_NORM_ADD:
        if (want_dims(c, n, s0, 2, "input") || want_1d_weight(c, n, n->weight[0], &s0->ne[0], "the row length"))
            return -1;
        if (!same_shape(s0, s1))
            return nfail(c, n, "the residual's shape differs from the norm's");
        copy_shape(n, s0);
        return 0;
    case OP_MATMUL_ADD:
        if (matmul_shape(c, n, n->weight[0], n->bias[0], s0))
            return -1;
        if (!same_shape(n, s1))
            return nfail(c, n, "the residual's shape differs from the product's");
        return 0;
    case OP_MATMUL_QKV:
        return matmul_shape(c, n, n->weight[0], n->bias[0], s0);
    case OP_FFN_GLU:
        if (matmul_shape(c, n, n->weight[0], -1, s0))
            return -1;
        return want_weight_dim(c, n, n->weight[1], 1, &n->ne[0], "the gate's output size");
    case OP_PART:
        return 0; /* set by the fusion that made it */
    case OP_ADD:
    case OP_MUL:
    case OP_GLU: {
        if (want_dims(c, n, s0, s0->n_dims ? s0->n_dims : 1, "a") || want_dims(c, n, s1, s0->n_dims, "b"))
            return -1;
        if (!same_shape(s0, s1)) {
            char a[200], b[200];
            shape_text(c, s0->n_dims, s0->ne, a, sizeof a);
            shape_text(c, s1->n_dims, s1->ne, b, sizeof b);
            return nfail(c, n, "shapes differ: %s and %s", a, b);
        }
        copy_shape(n, s0);
        return 0;
    }
    case OP_ADD_BIAS: {
        if (want_dims(c, n, s0, 2, "input") || want_1d_weight(c, n, n->bias[0], &s0->ne[0], "the row length"))
            return -1;
        int readers[2];
        if (ir_consumers(ir, n->src[0], readers, 2) != 1 || ir_external_uses(ir, n->src[0]))
            return nfail(c, n, "the bias is added in place, so its input may have no other use");
        copy_shape(n, s0);
        n->alias = n->src[0];
        return 0;
    }
    case OP_SILU:
    case OP_GELU:
    case OP_SCALE:
        if (want_dims(c, n, s0, s0->n_dims ? s0->n_dims : 1, "input"))
            return -1;
        copy_shape(n, s0);
        return 0;
    case OP_HEADS: {
        if (want_dims(c, n, s0, 2, "input"))
            return -1;
        struct expr h;
        if (expr_div_term(s0->ne[0], n->head_dim, &h)) {
            char a[200], d[100];
            text(c, &s0->ne[0], a, sizeof a);
            text(c, &n->head_dim, d, sizeof d);
            return nfail(c, n, "the row length %s is not a multiple of the head size %s", a, d);
        }
        set_shape(n, 3, n->head_dim, h, s0->ne[1], ACT_F32);
        n->alias = n->src[0];
        return 0;
    }
    case OP_KV_STORE:
        if (want_dims(c, n, s0, 3, "k (use g.heads first)") || want_dims(c, n, s1, 3, "v (use g.heads first)"))
            return -1;
        if (!same_shape(s0, s1))
            return nfail(c, n, "k and v must have the same shape");
        n->n_dims = 0;
        n->dtype = ACT_NONE;
        return 0;
    case OP_ATTENTION: {
        const struct ir_node *k = &ir->node[s1->src[0]];
        if (want_dims(c, n, s0, 3, "q (use g.heads first)"))
            return -1;
        if (!expr_eq(&s0->ne[0], &k->ne[0]) || !expr_eq(&s0->ne[2], &k->ne[2]))
            return nfail(c, n, "q and the stored k differ in head size or token count");
        struct expr flat;
        if (expr_mul(s0->ne[0], s0->ne[1], &flat))
            return nfail(c, n, "output size too complex");
        set_shape(n, 2, flat, s0->ne[2], expr_const(1), ACT_F32);
        return 0;
    }
    case OP_OUTPUTS: {
        struct expr nt = expr_sym(IR_SYM_NT);
        if (want_dims(c, n, s0, 2, "input"))
            return -1;
        if (!expr_eq(&s0->ne[1], &nt))
            return nfail(c, n, "outputs wants one column per token of the batch");
        set_shape(n, 2, s0->ne[0], expr_sym(IR_SYM_NOUT), expr_const(1), ACT_F32);
        n->alias = n->src[0];
        return 0;
    }
    }
    return nfail(c, n, "no shape rule for op %s", ir_op_name(n->op));
}

static int check_carried(struct ctx *c);

int pass_shape(struct ir *ir, struct error *e)
{
    static struct ctx c;
    c.ir = ir;
    c.e = e;
    ir_symbol_names(ir, c.names, "", c.storage);
    bool carried_checked = false;
    for (int i = 0; i < ir->n_node; i++) {
        struct ir_node *n = &ir->node[i];
        if (n->region == REGION_POST && !carried_checked) {
            if (check_carried(&c))
                return -1;
            carried_checked = true;
        }
        if (!n->dead && infer(&c, n))
            return -1;
    }
    if (!carried_checked && check_carried(&c))
        return -1;
    const struct ir_node *r = &ir->node[ir->result];
    if (r->dtype != ACT_F32 || r->n_dims != 2)
        return nfail(&c, r, "forward must return a 2-D f32 value (the logits)");
    return 0;
}

/* What each layer returns must look like what entered the first one. */
static int check_carried(struct ctx *cx)
{
    struct ctx c = *cx;
    struct ir *ir = c.ir;
    for (int i = 0; i < ir->n_carried; i++) {
        const struct ir_node *in = &ir->node[ir->carried_init[i]], *out = &ir->node[ir->carried_out[i]];
        if (!same_shape(in, out) || in->dtype != out->dtype) {
            char a[200], b[200];
            shape_text(&c, in->n_dims, in->ne, a, sizeof a);
            shape_text(&c, out->n_dims, out->ne, b, sizeof b);
            return nfail(&c, out, "the layer function returns %s for a value that entered the layers as %s", b, a);
        }
    }
    return 0;
}
