/* expr.c: canonical polynomial arithmetic (see expr.h). */
#include "expr.h"

#include <stdio.h>
#include <string.h>

struct expr expr_const(int64_t c)
{
    struct expr e = { 0 };
    if (c) {
        e.n = 1;
        e.t[0].coef = c;
    }
    return e;
}

struct expr expr_sym(int id)
{
    struct expr e = { 0 };
    e.n = 1;
    e.t[0].coef = 1;
    e.t[0].deg = 1;
    e.t[0].sym[0] = (uint8_t)id;
    return e;
}

/* Terms are ordered by degree, then factors; equal factor lists merge. */
static int term_cmp(const struct term *a, const struct term *b)
{
    if (a->deg != b->deg)
        return a->deg < b->deg ? -1 : 1;
    return memcmp(a->sym, b->sym, a->deg);
}

/* Adds coef * factors into e, keeping the order. */
static int add_term(struct expr *e, const struct term *t)
{
    if (t->coef == 0)
        return 0;
    int i = 0;
    while (i < e->n && term_cmp(&e->t[i], t) < 0)
        i++;
    if (i < e->n && term_cmp(&e->t[i], t) == 0) {
        if (__builtin_add_overflow(e->t[i].coef, t->coef, &e->t[i].coef))
            return -1;
        if (e->t[i].coef == 0) {
            memmove(&e->t[i], &e->t[i + 1], (size_t)(e->n - i - 1) * sizeof e->t[0]);
            e->n--;
        }
        return 0;
    }
    if (e->n == EXPR_TERMS)
        return -1;
    memmove(&e->t[i + 1], &e->t[i], (size_t)(e->n - i) * sizeof e->t[0]);
    e->t[i] = *t;
    e->n++;
    return 0;
}

int expr_add(struct expr a, struct expr b, struct expr *out)
{
    for (int i = 0; i < b.n; i++)
        if (add_term(&a, &b.t[i]))
            return -1;
    *out = a;
    return 0;
}

int expr_sub(struct expr a, struct expr b, struct expr *out)
{
    for (int i = 0; i < b.n; i++)
        b.t[i].coef = -b.t[i].coef;
    return expr_add(a, b, out);
}

static int term_mul(const struct term *a, const struct term *b, struct term *out)
{
    if (a->deg + b->deg > EXPR_DEGREE || __builtin_mul_overflow(a->coef, b->coef, &out->coef))
        return -1;
    int i = 0, j = 0, k = 0;
    while (i < a->deg || j < b->deg)
        out->sym[k++] = (j >= b->deg || (i < a->deg && a->sym[i] <= b->sym[j])) ? a->sym[i++] : b->sym[j++];
    out->deg = (uint8_t)k;
    return 0;
}

int expr_mul(struct expr a, struct expr b, struct expr *out)
{
    struct expr r = { 0 };
    for (int i = 0; i < a.n; i++) {
        for (int j = 0; j < b.n; j++) {
            struct term t;
            if (term_mul(&a.t[i], &b.t[j], &t) || add_term(&r, &t))
                return -1;
        }
    }
    *out = r;
    return 0;
}

int expr_div(struct expr a, struct expr b, struct expr *out)
{
    int64_t d;
    if (!expr_is_const(&b, &d) || d == 0)
        return -1;
    for (int i = 0; i < a.n; i++) {
        if (a.t[i].coef % d)
            return -1;
        a.t[i].coef /= d;
    }
    *out = a;
    return 0;
}

/* Removes b's factors from t (a multiset difference); -1 if one is missing. */
static int remove_factors(struct term *t, const struct term *b)
{
    for (int k = 0; k < b->deg; k++) {
        int at = -1;
        for (int i = 0; i < t->deg && at < 0; i++)
            if (t->sym[i] == b->sym[k])
                at = i;
        if (at < 0)
            return -1;
        memmove(&t->sym[at], &t->sym[at + 1], (size_t)(t->deg - at - 1));
        t->deg--;
    }
    return 0;
}

int expr_div_term(struct expr a, struct expr b, struct expr *out)
{
    if (b.n != 1 || b.t[0].coef == 0)
        return -1;
    struct expr r = { 0 };
    for (int i = 0; i < a.n; i++) {
        struct term t = a.t[i];
        if (t.coef % b.t[0].coef || remove_factors(&t, &b.t[0]))
            return -1;
        t.coef /= b.t[0].coef;
        if (add_term(&r, &t))
            return -1;
    }
    *out = r;
    return 0;
}

bool expr_eq(const struct expr *a, const struct expr *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (a->t[i].coef != b->t[i].coef || term_cmp(&a->t[i], &b->t[i]) != 0)
            return false;
    return true;
}

bool expr_is_const(const struct expr *e, int64_t *value)
{
    if (e->n == 0) {
        *value = 0;
        return true;
    }
    if (e->n == 1 && e->t[0].deg == 0) {
        *value = e->t[0].coef;
        return true;
    }
    return false;
}

int expr_to_c(const struct expr *e, const char *const *names, char *buf, size_t n)
{
    size_t len = 0;
#define PUT(...)                                                     \
    do {                                                             \
        int w = snprintf(buf + len, n - len, __VA_ARGS__);           \
        if (w < 0 || (size_t)w >= n - len)                           \
            return -1;                                               \
        len += (size_t)w;                                            \
    } while (0)
    if (e->n == 0) {
        PUT("0");
        return (int)len;
    }
    bool atomic = e->n == 1 && (e->t[0].deg == 0 || (e->t[0].deg == 1 && e->t[0].coef == 1));
    if (!atomic)
        PUT("(");
    for (int i = 0; i < e->n; i++) {
        const struct term *t = &e->t[i];
        int64_t c = t->coef;
        if (i > 0)
            PUT(c < 0 ? " - " : " + ");
        else if (c < 0)
            PUT("-");
        int64_t mag = c < 0 ? -c : c;
        if (t->deg == 0 || mag != 1)
            PUT("%lld", (long long)mag);
        for (int k = 0; k < t->deg; k++)
            PUT("%s%s", (k > 0 || t->deg == 0 || mag != 1) ? " * " : "", names[t->sym[k]]);
    }
    if (!atomic)
        PUT(")");
#undef PUT
    return (int)len;
}

int expr_eval(const struct expr *e, const int64_t *values, const bool *known, int64_t *out)
{
    int64_t sum = 0;
    for (int i = 0; i < e->n; i++) {
        int64_t v = e->t[i].coef;
        for (int k = 0; k < e->t[i].deg; k++) {
            if (!known[e->t[i].sym[k]] || __builtin_mul_overflow(v, values[e->t[i].sym[k]], &v))
                return -1;
        }
        if (__builtin_add_overflow(sum, v, &sum))
            return -1;
    }
    *out = sum;
    return 0;
}
