/* expr.h: symbolic integer expressions for shapes: polynomials with integer
 * coefficients over symbols (the architecture's integer hyperparameters and
 * nt, the token count). Kept in a canonical form (sorted terms of sorted
 * factors, no zero coefficients), so two shapes are equal exactly when their
 * expressions are. Fixed size, so expressions are plain values. */
#ifndef MINFER_COMPILER_EXPR_H
#define MINFER_COMPILER_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXPR_TERMS 8
#define EXPR_DEGREE 4
#define EXPR_SYMBOLS 64

struct term {
    int64_t coef;
    uint8_t deg;               /* number of factors */
    uint8_t sym[EXPR_DEGREE];  /* symbol ids, ascending */
};

struct expr {
    uint8_t n;                 /* number of terms; 0 is the constant 0 */
    struct term t[EXPR_TERMS];
};

struct expr expr_const(int64_t c);
struct expr expr_sym(int id);

/* Arithmetic; each returns 0, or -1 when the result does not fit (more than
 * EXPR_TERMS terms or EXPR_DEGREE factors) or, for division, when the
 * divisor is not a non-zero constant dividing every coefficient. */
int expr_add(struct expr a, struct expr b, struct expr *out);
int expr_sub(struct expr a, struct expr b, struct expr *out);
int expr_mul(struct expr a, struct expr b, struct expr *out);
int expr_div(struct expr a, struct expr b, struct expr *out);

/* Divides by a single term (such as head_dim or 2 * n_head): every term of
 * a must contain its factors and be divisible by its coefficient. */
int expr_div_term(struct expr a, struct expr b, struct expr *out);

bool expr_eq(const struct expr *a, const struct expr *b);
bool expr_is_const(const struct expr *e, int64_t *value);

/* Writes e as a C expression, naming symbol i by names[i] (for example
 * "hp->n_embd" or "nt"); the text is parenthesized when it is not atomic.
 * Returns the length, or -1 if it does not fit in n bytes. */
int expr_to_c(const struct expr *e, const char *const *names, char *buf, size_t n);

/* Value with concrete symbol values; -1 if a symbol has no value or the
 * result overflows int64. */
int expr_eval(const struct expr *e, const int64_t *values, const bool *known, int64_t *out);

#endif
