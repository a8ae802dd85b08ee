/* template.re: lexer (re2c) and renderer for the template language (see
 * template.h). Build with: re2c --no-generation-date -W -o template.c template.re */
#include "template.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ---- */

struct tentry {
    char *name;
    char *str;               /* a value, or NULL for a list */
    struct tscope **items;   /* list items */
    int n_items, cap_items;
};

struct tscope {
    struct tscope *parent;
    struct tentry *e;
    int n, cap;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fputs("minfer-compile: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

struct tscope *tscope_new(void) { return xrealloc(calloc(1, sizeof(struct tscope)), sizeof(struct tscope)); }

static struct tentry *entry(struct tscope *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->e[i].name, name) == 0)
            return &s->e[i];
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->e = xrealloc(s->e, (size_t)s->cap * sizeof *s->e);
    }
    struct tentry *t = &s->e[s->n++];
    memset(t, 0, sizeof *t);
    t->name = xrealloc(NULL, strlen(name) + 1);
    strcpy(t->name, name);
    return t;
}

void tscope_set(struct tscope *s, const char *name, const char *fmt, ...)
{
    struct tentry *t = entry(s, name);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(t->str);
    t->str = xrealloc(NULL, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(t->str, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

struct tscope *tscope_add(struct tscope *s, const char *name)
{
    struct tentry *t = entry(s, name);
    if (t->n_items == t->cap_items) {
        t->cap_items = t->cap_items ? 2 * t->cap_items : 8;
        t->items = xrealloc(t->items, (size_t)t->cap_items * sizeof *t->items);
    }
    struct tscope *item = tscope_new();
    item->parent = s;
    t->items[t->n_items++] = item;
    return item;
}

void tscope_free(struct tscope *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        for (int k = 0; k < s->e[i].n_items; k++)
            tscope_free(s->e[i].items[k]);
        free(s->e[i].items);
        free(s->e[i].name);
        free(s->e[i].str);
    }
    free(s->e);
    free(s);
}

static const struct tentry *lookup(const struct tscope *s, const char *name, size_t n)
{
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (strlen(s->e[i].name) == n && memcmp(s->e[i].name, name, n) == 0)
                return &s->e[i];
    return NULL;
}

/* ---- lexer ---- */

enum tok_kind { TOK_TEXT, TOK_VAR, TOK_EACH, TOK_IF, TOK_END_EACH, TOK_END_IF, TOK_EOF, TOK_BAD };

struct tok {
    enum tok_kind kind;
    const char *p; /* text, or the tag's name */
    size_t n;
    int line;
};

static void tag_name(struct tok *t, const char *start, const char *end, size_t skip)
{
    const char *p = start + skip;
    while (*p == ' ')
        p++;
    const char *q = p;
    while (q < end && (q[0] == '_' || (q[0] >= 'a' && q[0] <= 'z') || (q[0] >= 'A' && q[0] <= 'Z') ||
                       (q[0] >= '0' && q[0] <= '9')))
        q++;
    t->p = p;
    t->n = (size_t)(q - p);
}

static int count_lines(const char *p, const char *end)
{
    int n = 0;
    for (; p < end; p++)
        n += *p == '\n';
    return n;
}

/* Lexes one token at *cursor (the buffer ends with a NUL sentinel). */
static struct tok lex(const char **cursor, const char *limit, int *line)
{
    const char *YYCURSOR = *cursor, *YYMARKER = NULL;
    const char *start = YYCURSOR;
    struct tok t = { TOK_BAD, start, 0, *line };
    (void)YYMARKER;
    /*!re2c
        re2c:define:YYCTYPE = char;
        re2c:yyfill:enable = 0;

        name = [a-zA-Z_][a-zA-Z0-9_]*;
        sp = [ ]*;

        "{{" sp name sp "}}"               { t.kind = TOK_VAR; tag_name(&t, start, YYCURSOR, 2); goto done; }
        "{{#each" [ ]+ name sp "}}" "\n"?  { t.kind = TOK_EACH; tag_name(&t, start, YYCURSOR, 7); goto done; }
        "{{#if" [ ]+ name sp "}}" "\n"?    { t.kind = TOK_IF; tag_name(&t, start, YYCURSOR, 5); goto done; }
        "{{/each}}" "\n"?                  { t.kind = TOK_END_EACH; goto done; }
        "{{/if}}" "\n"?                    { t.kind = TOK_END_IF; goto done; }
        "{{"                               { t.kind = TOK_BAD; goto done; }
        "\x00"                             { t.kind = YYCURSOR - 1 == limit ? TOK_EOF : TOK_BAD; goto done; }
        [^{\x00]+ | "{"                    { t.kind = TOK_TEXT; t.n = (size_t)(YYCURSOR - start); goto done; }
    */
done:
    *line += count_lines(start, YYCURSOR);
    *cursor = YYCURSOR;
    return t;
}

/* ---- renderer ---- */

struct out {
    char *p;
    size_t n, cap;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        o->cap = (o->n + n + 1) * 2;
        o->p = xrealloc(o->p, o->cap);
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

struct render {
    struct tok *toks;
    int n;
    const char *path;
    struct error *e;
};

/* Moves *i past the end tag that closes the block starting at *i. */
static int skip_block(struct render *r, int *i, enum tok_kind until, int line)
{
    int depth = 0;
    while (*i < r->n) {
        enum tok_kind k = r->toks[(*i)++].kind;
        if (k == TOK_EACH || k == TOK_IF)
            depth++;
        else if ((k == TOK_END_EACH || k == TOK_END_IF) && depth > 0)
            depth--;
        else if (k == until)
            return 0;
        else if (k == TOK_EOF || k == TOK_BAD || k == TOK_END_EACH || k == TOK_END_IF)
            break;
    }
    return fail(r->e, "%s:%d: a block is not closed", r->path, line);
}

/* Renders toks[*i..] until the matching end tag (or EOF at depth 0). */
static int render_block(struct render *r, int *i, const struct tscope *s, struct out *o, enum tok_kind until)
{
    while (*i < r->n) {
        struct tok *t = &r->toks[(*i)++];
        switch (t->kind) {
        case TOK_TEXT:
            put(o, t->p, t->n);
            break;
        case TOK_VAR: {
            const struct tentry *v = lookup(s, t->p, t->n);
            if (!v || !v->str)
                return fail(r->e, "%s:%d: {{%.*s}}: %s", r->path, t->line, (int)t->n, t->p,
                            v ? "is a list, not a value" : "no such value");
            put(o, v->str, strlen(v->str));
            break;
        }
        case TOK_EACH:
        case TOK_IF: {
            const struct tentry *v = lookup(s, t->p, t->n);
            if (t->kind == TOK_EACH && v && v->str)
                return fail(r->e, "%s:%d: {{#each %.*s}}: not a list", r->path, t->line, (int)t->n, t->p);
            int body = *i, items = !v ? 0 : t->kind == TOK_IF ? ((v->str && *v->str) || v->n_items > 0) : v->n_items;
            enum tok_kind end = t->kind == TOK_EACH ? TOK_END_EACH : TOK_END_IF;
            if (items == 0 && skip_block(r, i, end, t->line))
                return -1;
            for (int k = 0; k < items; k++) {
                *i = body;
                if (render_block(r, i, t->kind == TOK_EACH ? v->items[k] : s, o, end))
                    return -1;
            }
            break;
        }
        case TOK_END_EACH:
        case TOK_END_IF:
            if (t->kind != until)
                return fail(r->e, "%s:%d: unexpected {{/%s}}", r->path, t->line, t->kind == TOK_END_IF ? "if" : "each");
            return 0;
        case TOK_EOF:
            if (until != TOK_EOF)
                return fail(r->e, "%s:%d: a block is not closed", r->path, t->line);
            return 0;
        case TOK_BAD:
            return fail(r->e, "%s:%d: malformed tag", r->path, t->line);
        }
    }
    return until == TOK_EOF ? 0 : fail(r->e, "%s: a block is not closed", r->path);
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n + 4096 + 1 > cap) {
            cap = (*n + 4096 + 1) * 2;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + *n, 1, 4096, f);
        *n += got;
        if (got < 4096)
            break;
    }
    fclose(f);
    buf[*n] = 0;
    return buf;
}

int template_render(const char *path, struct tscope *root, char **out, struct error *e)
{
    size_t n;
    char *text = read_file(path, &n);
    if (!text)
        return fail(e, "%s: cannot read the template", path);
    if (strlen(text) != n) {
        free(text);
        return fail(e, "%s: the template contains a NUL byte", path);
    }
    struct render r = { NULL, 0, path, e };
    int cap = 0, line = 1;
    const char *cursor = text;
    for (;;) {
        if (r.n == cap) {
            cap = cap ? 2 * cap : 256;
            r.toks = xrealloc(r.toks, (size_t)cap * sizeof *r.toks);
        }
        struct tok t = lex(&cursor, text + n, &line);
        r.toks[r.n++] = t;
        if (t.kind == TOK_EOF || t.kind == TOK_BAD)
            break;
    }
    struct out o = { 0 };
    put(&o, "", 0);
    int i = 0, rc = render_block(&r, &i, root, &o, TOK_EOF);
    free(r.toks);
    free(text);
    if (rc) {
        free(o.p);
        return -1;
    }
    *out = o.p;
    return 0;
}
