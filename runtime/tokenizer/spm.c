/* spm.c: SentencePiece-style merging by token score (see spm.h): the
 * characters form a linked list; a max-heap holds the adjacent pairs whose
 * joined text is a token, best score first. A pair whose sides changed
 * since it was queued is skipped when it comes up. */
#include "tokenizer/spm.h"

#include <stdlib.h>

struct symbol {
    size_t at, n;   /* bytes [at, at + n) of the text */
    int prev, next; /* neighbours in the list, -1 at the ends */
};

struct pair {
    int left, right;
    float score;
    size_t n;       /* the joined length when queued: stale if the sides changed */
};

struct heap {
    struct pair *p;
    size_t n, cap;
};

/* Whether a comes out before b: the higher score, then the leftmost. */
static int before(const struct pair *a, const struct pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(struct heap *h, struct pair v)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        struct pair *p = realloc(h->p, cap * sizeof *p);
        if (!p)
            return -1;
        h->p = p, h->cap = cap;
    }
    size_t i = h->n++;
    for (; i > 0 && before(&v, &h->p[(i - 1) / 2]); i = (i - 1) / 2)
        h->p[i] = h->p[(i - 1) / 2];
    h->p[i] = v;
    return 0;
}

static struct pair heap_pop(struct heap *h)
{
    struct pair top = h->p[0], last = h->p[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->p[c + 1], &h->p[c]))
            c++;
        if (!before(&h->p[c], &last))
            break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (h->n)
        h->p[i] = last;
    return top;
}

/* Queues the pair (left, right) if their joined text is a token. */
static int try_pair(const struct tokenizer *t, const char *s, const struct symbol *sym, int left, int right,
                    struct heap *h)
{
    if (left < 0 || right < 0)
        return 0;
    size_t n = sym[left].n + sym[right].n;
    int32_t id = tokenizer_find(t, s + sym[left].at, n);
    if (id < 0)
        return 0;
    return heap_push(h, (struct pair){ left, right, t->scores[id], n });
}

/* The bytes of a piece that is not a token, each as its byte token. */
static int push_bytes(const struct tokenizer *t, const char *s, size_t n, int32_t **out, size_t *n_out, size_t *cap,
                      struct error *e)
{
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(uint8_t)s[i]] >= 0 ? t->byte_id[(uint8_t)s[i]] : t->unk;
        if (id < 0)
            return fail(e, "the vocabulary has no token for byte 0x%02x and no unknown token", (uint8_t)s[i]);
        if (tokens_append(out, n_out, cap, &id, 1, e))
            return -1;
    }
    return 0;
}

int spm_encode(const struct tokenizer *t, const char *s, size_t n, int32_t **out, size_t *n_out, size_t *cap,
               struct error *e)
{
    if (n == 0)
        return 0;
    struct symbol *sym = malloc(n * sizeof *sym);
    struct heap h = { NULL, 0, 0 };
    if (!sym)
        return fail(e, "out of memory");
    int count = 0;
    for (size_t at = 0; at < n; count++) { /* a character's length from its first byte, as much as is left */
        unsigned char c = (unsigned char)s[at];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        len = len < n - at ? len : n - at;
        sym[count] = (struct symbol){ at, len, count - 1, at + len < n ? count + 1 : -1 };
        at += len;
    }
    int rc = 0;
    for (int i = 1; i < count && !rc; i++)
        rc = try_pair(t, s, sym, i - 1, i, &h);
    while (!rc && h.n) {
        struct pair p = heap_pop(&h);
        struct symbol *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.n)
            continue; /* a side was merged elsewhere since */
        l->n += r->n, r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = p.left;
        rc = try_pair(t, s, sym, l->prev, p.left, &h) || try_pair(t, s, sym, p.left, l->next, &h);
    }
    if (rc)
        rc = fail(e, "out of memory");
    for (int i = 0; !rc && i >= 0; i = sym[i].next) {
        int32_t id = tokenizer_find(t, s + sym[i].at, sym[i].n);
        rc = id >= 0 ? tokens_append(out, n_out, cap, &id, 1, e) : push_bytes(t, s + sym[i].at, sym[i].n, out, n_out, cap, e);
    }
    free(h.p);
    free(sym);
    return rc;
}
