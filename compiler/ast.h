/* ast.h: the small arithmetic language of hyperparameter defaults, tensor
 * shapes and per-layer conditions in architecture descriptions: integers,
 * names, + - * / % and parentheses, one comparison (== != < <= > >=, giving
 * 1 or 0) and sqrt(...) (f32 values only). A parsed text becomes a polynomial (shapes; division only by
 * constants that divide exactly) or C code (defaults, where "/" is an exact
 * integer division checked at load time), or is evaluated directly. */
#ifndef MINFER_COMPILER_AST_H
#define MINFER_COMPILER_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "expr.h"

#define AST_NODES 64

struct ast_node {
    char kind;        /* 'n' number, 's' symbol, 'q' sqrt (of left), one of + - * / %, or a
                         comparison: '=' ==, '!' !=, '<', 'l' <=, '>', 'g' >= */
    int64_t num;      /* 'n' */
    int sym;          /* 's': symbol id */
    int left, right;  /* operands of an operator */
};

struct ast {
    struct ast_node node[AST_NODES];
    int n, root;
};

/* Resolves a name to a symbol id (>= 0), or -1 if the name is unknown. */
typedef int (*ast_lookup)(const char *name, void *ctx);

/* Parses text. On failure writes "what went wrong" to err and returns -1. */
int ast_parse(const char *text, ast_lookup lookup, void *ctx, struct ast *out, char *err, size_t errn);

int ast_to_expr(const struct ast *a, struct expr *out, char *err, size_t errn);

/* C text; symbol i is names[i]; "a / b" becomes div(a, b) with div the
 * given function-like name (an exact division that reports failure). */
int ast_to_c(const struct ast *a, const char *const *names, const char *div, char *buf, size_t n);

/* Evaluates with concrete values; -1 on an unknown value, division by zero,
 * an inexact division or overflow (err says which). */
int ast_eval(const struct ast *a, const int64_t *values, const bool *known, int64_t *out, char *err, size_t errn);

/* The operator as written ("<=" for 'l'). */
const char *ast_kind_text(char kind);

/* Whether any node's kind is one of kinds. */
bool ast_has(const struct ast *a, const char *kinds);

/* Every symbol the text names, as a bit set over symbol ids. */
uint64_t ast_symbols(const struct ast *a);

#endif
