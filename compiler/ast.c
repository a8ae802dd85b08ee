/* ast.c: parser and evaluators for description arithmetic (see ast.h). */
#include "ast.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

struct parser {
    const char *p;
    ast_lookup lookup;
    void *ctx;
    struct ast *a;
    char *err;
    size_t errn;
    int failed;
};

static int perr(struct parser *ps, const char *msg, const char *at)
{
    if (!ps->failed)
        snprintf(ps->err, ps->errn, "%s at '%s'", msg, *at ? at : "end of text");
    ps->failed = 1;
    return -1;
}

static void skip_space(struct parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int new_node(struct parser *ps, char kind)
{
    if (ps->a->n == AST_NODES)
        return perr(ps, "expression too long", ps->p);
    struct ast_node *n = &ps->a->node[ps->a->n];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->left = n->right = -1;
    return ps->a->n++;
}

static int parse_compare(struct parser *ps);

static int parse_factor(struct parser *ps)
{
    skip_space(ps);
    const char *start = ps->p;
    if (*ps->p == '(') {
        ps->p++;
        int inner = parse_compare(ps);
        skip_space(ps);
        if (inner < 0)
            return -1;
        if (*ps->p != ')')
            return perr(ps, "expected ')'", ps->p);
        ps->p++;
        return inner;
    }
    if (isdigit((unsigned char)*ps->p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*ps->p)) {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps->p - '0', &v))
                return perr(ps, "number too large", start);
            ps->p++;
        }
        int n = new_node(ps, 'n');
        if (n >= 0)
            ps->a->node[n].num = v;
        return n;
    }
    if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
        char name[64];
        size_t len = 0;
        while (isalnum((unsigned char)*ps->p) || *ps->p == '_') {
            if (len + 1 < sizeof name)
                name[len++] = *ps->p;
            ps->p++;
        }
        name[len] = 0;
        skip_space(ps);
        if (strcmp(name, "sqrt") == 0 && *ps->p == '(') { /* the one function: f32 values only */
            int arg = parse_factor(ps), n = arg < 0 ? -1 : new_node(ps, 'q');
            if (n >= 0)
                ps->a->node[n].left = arg;
            return n;
        }
        int sym = ps->lookup(name, ps->ctx);
        if (sym < 0) {
            if (!ps->failed)
                snprintf(ps->err, ps->errn, "unknown name '%s'", name);
            ps->failed = 1;
            return -1;
        }
        int n = new_node(ps, 's');
        if (n >= 0)
            ps->a->node[n].sym = sym;
        return n;
    }
    return perr(ps, "expected a number, a name or '('", start);
}

static int parse_binary(struct parser *ps, const char *ops, int (*operand)(struct parser *))
{
    int left = operand(ps);
    for (;;) {
        if (left < 0)
            return -1;
        skip_space(ps);
        if (!*ps->p || !strchr(ops, *ps->p))
            return left;
        char op = *ps->p++;
        int right = operand(ps);
        if (right < 0)
            return -1;
        int n = new_node(ps, op);
        if (n < 0)
            return -1;
        ps->a->node[n].left = left;
        ps->a->node[n].right = right;
        left = n;
    }
}

static int parse_product(struct parser *ps) { return parse_binary(ps, "*/%", parse_factor); }
static int parse_sum(struct parser *ps) { return parse_binary(ps, "+-", parse_product); }

/* One comparison at most: a == b, a != b, a < b, a <= b, a > b, a >= b
 * (kinds '=', '!', '<', 'l', '>', 'g'), 1 when it holds, else 0. */
static int parse_compare(struct parser *ps)
{
    int left = parse_sum(ps);
    skip_space(ps);
    static const struct { const char *text; char kind; } ops[] = {
        { "==", '=' }, { "!=", '!' }, { "<=", 'l' }, { ">=", 'g' }, { "<", '<' }, { ">", '>' },
    };
    if (left < 0)
        return -1;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t len = strlen(ops[i].text);
        if (strncmp(ps->p, ops[i].text, len) != 0)
            continue;
        ps->p += len;
        int right = parse_sum(ps), n = right < 0 ? -1 : new_node(ps, ops[i].kind);
        if (n >= 0) {
            ps->a->node[n].left = left;
            ps->a->node[n].right = right;
        }
        return n;
    }
    return left;
}

int ast_parse(const char *text, ast_lookup lookup, void *ctx, struct ast *out, char *err, size_t errn)
{
    struct parser ps = { text, lookup, ctx, out, err, errn, 0 };
    out->n = 0;
    out->root = parse_compare(&ps);
    skip_space(&ps);
    if (out->root >= 0 && *ps.p)
        return perr(&ps, "unexpected text", ps.p);
    return out->root < 0 ? -1 : 0;
}

static int to_expr(const struct ast *a, int i, struct expr *out, char *err, size_t errn)
{
    const struct ast_node *n = &a->node[i];
    if (n->kind == 'n') {
        *out = expr_const(n->num);
        return 0;
    }
    if (n->kind == 's') {
        *out = expr_sym(n->sym);
        return 0;
    }
    if (!strchr("+-*/", n->kind)) {
        snprintf(err, errn, "a shape uses only + - * / (no %s)", ast_kind_text(n->kind));
        return -1;
    }
    struct expr l, r;
    if (to_expr(a, n->left, &l, err, errn) || to_expr(a, n->right, &r, err, errn))
        return -1;
    int rc = n->kind == '+' ? expr_add(l, r, out) : n->kind == '-' ? expr_sub(l, r, out)
           : n->kind == '*' ? expr_mul(l, r, out) : expr_div(l, r, out);
    if (rc)
        snprintf(err, errn, n->kind == '/' ? "a shape may only be divided by a constant that divides it exactly"
                                           : "expression too large for a shape");
    return rc;
}

int ast_to_expr(const struct ast *a, struct expr *out, char *err, size_t errn)
{
    return to_expr(a, a->root, out, err, errn);
}

static int to_c(const struct ast *a, int i, const char *const *names, const char *div, char *buf, size_t n)
{
    const struct ast_node *nd = &a->node[i];
    if (nd->kind == 'n')
        return snprintf(buf, n, "%lld", (long long)nd->num);
    if (nd->kind == 's')
        return snprintf(buf, n, "%s", names[nd->sym]);
    char l[512], r[512] = "";
    if (to_c(a, nd->left, names, div, l, sizeof l) < 0 || (nd->right >= 0 && to_c(a, nd->right, names, div, r, sizeof r) < 0))
        return -1;
    int w = nd->kind == '/' ? snprintf(buf, n, "%s(%s, %s)", div, l, r)
          : nd->kind == 'q' ? snprintf(buf, n, "sqrt((double)%s)", l)
                            : snprintf(buf, n, "(%s %s %s)", l, ast_kind_text(nd->kind), r);
    return w < 0 || (size_t)w >= n ? -1 : w;
}

int ast_to_c(const struct ast *a, const char *const *names, const char *div, char *buf, size_t n)
{
    return to_c(a, a->root, names, div, buf, n);
}

static int eval(const struct ast *a, int i, const int64_t *values, const bool *known, int64_t *out, char *err,
                size_t errn)
{
    const struct ast_node *n = &a->node[i];
    if (n->kind == 'n') {
        *out = n->num;
        return 0;
    }
    if (n->kind == 's') {
        if (!known[n->sym]) {
            snprintf(err, errn, "a value it needs is not known");
            return -1;
        }
        *out = values[n->sym];
        return 0;
    }
    if (n->kind == 'q') {
        snprintf(err, errn, "sqrt gives an f32 value, not an integer");
        return -1;
    }
    int64_t l, r;
    if (eval(a, n->left, values, known, &l, err, errn) || eval(a, n->right, values, known, &r, err, errn))
        return -1;
    bool bad = false;
    switch (n->kind) {
    case '+': bad = __builtin_add_overflow(l, r, out); break;
    case '-': bad = __builtin_sub_overflow(l, r, out); break;
    case '*': bad = __builtin_mul_overflow(l, r, out); break;
    case '=': *out = l == r; break;
    case '!': *out = l != r; break;
    case '<': *out = l < r; break;
    case 'l': *out = l <= r; break;
    case '>': *out = l > r; break;
    case 'g': *out = l >= r; break;
    case '%':
        if (r <= 0) {
            snprintf(err, errn, "%lld %% %lld: the divisor must be positive", (long long)l, (long long)r);
            return -1;
        }
        *out = l % r;
        break;
    default:
        if (r == 0 || l % r) {
            snprintf(err, errn, "%lld / %lld is not an exact integer division", (long long)l, (long long)r);
            return -1;
        }
        *out = l / r;
    }
    if (bad)
        snprintf(err, errn, "overflow");
    return bad ? -1 : 0;
}

int ast_eval(const struct ast *a, const int64_t *values, const bool *known, int64_t *out, char *err, size_t errn)
{
    return eval(a, a->root, values, known, out, err, errn);
}

const char *ast_kind_text(char kind)
{
    switch (kind) {
    case '=': return "==";
    case '!': return "!=";
    case 'l': return "<=";
    case 'g': return ">=";
    case '<': return "<";
    case '>': return ">";
    case '%': return "%";
    case 'q': return "sqrt";
    case '+': return "+";
    case '-': return "-";
    case '*': return "*";
    default: return "/";
    }
}

bool ast_has(const struct ast *a, const char *kinds)
{
    for (int i = 0; i < a->n; i++)
        if (strchr(kinds, a->node[i].kind))
            return true;
    return false;
}

uint64_t ast_symbols(const struct ast *a)
{
    uint64_t set = 0;
    for (int i = 0; i < a->n; i++)
        if (a->node[i].kind == 's')
            set |= 1ull << a->node[i].sym;
    return set;
}
