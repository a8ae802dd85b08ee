/* tokenizer.c: byte-level BPE (see tokenizer.h). */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm.h"

struct merge_entry {
    uint64_t key;   /* left << 32 | right, + 1 so 0 marks an empty slot */
    int32_t rank;
    int32_t result;
};

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

void tokenizer_end_ids(const struct tokenizer *t, int32_t out[TOKENIZER_END_IDS])
{
    static const char *const ends[TOKENIZER_END_IDS - 1] = { "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>" };
    out[0] = t->eos;
    for (int i = 0; i < TOKENIZER_END_IDS - 1; i++)
        out[i + 1] = tokenizer_find(t, ends[i], strlen(ends[i]));
}

int32_t tokenizer_find(const struct tokenizer *t, const char *s, size_t n)
{
    for (uint64_t h = hash_bytes(s, n) & t->index_mask;; h = (h + 1) & t->index_mask) {
        int32_t id = t->index[h] - 1;
        if (id < 0)
            return -1;
        if (t->len[id] == n && memcmp(t->text[id], s, n) == 0)
            return id;
    }
}

static const struct merge_entry *find_merge(const struct tokenizer *t, int32_t left, int32_t right)
{
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (uint64_t h = hash_u64(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        if (t->merges[h].key == key)
            return &t->merges[h];
        if (t->merges[h].key == 0)
            return NULL;
    }
}

static uint32_t table_size(uint64_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

static int load_tokens(struct tokenizer *t, const struct gguf_kv *kv, struct error *e)
{
    if (kv->value.type != GGUF_ARRAY || kv->value.a.type != GGUF_STRING || kv->value.a.n == 0 ||
        kv->value.a.n > INT32_MAX / 2)
        return fail(e, "metadata 'tokenizer.ggml.tokens' must be a non-empty array of strings");
    t->n_vocab = (int32_t)kv->value.a.n;
    t->text = calloc((size_t)t->n_vocab, sizeof *t->text);
    t->len = calloc((size_t)t->n_vocab, sizeof *t->len);
    t->type = calloc((size_t)t->n_vocab, sizeof *t->type);
    uint32_t cap = table_size((uint64_t)t->n_vocab);
    t->index = calloc(cap, sizeof *t->index);
    if (!t->text || !t->len || !t->type || !t->index)
        return fail(e, "out of memory for a vocabulary of %d tokens", t->n_vocab);
    t->index_mask = cap - 1;
    struct gguf_arr_iter it;
    struct gguf_value v;
    gguf_arr_begin(&it, &kv->value.a);
    for (int32_t id = 0; gguf_arr_next(&it, &v); id++) {
        if (v.s.n > UINT32_MAX)
            return fail(e, "token %d is too long", id);
        t->text[id] = v.s.p;
        t->len[id] = (uint32_t)v.s.n;
        t->type[id] = 1;
        uint64_t h = hash_bytes(v.s.p, v.s.n) & t->index_mask;
        while (t->index[h])
            h = (h + 1) & t->index_mask;
        t->index[h] = id + 1; /* a repeated string keeps its first id, as lookups expect */
    }
    return 0;
}

static int load_types(struct tokenizer *t, const struct gguf *g, struct error *e)
{
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.token_type");
    if (!kv)
        return 0;
    if (kv->value.type != GGUF_ARRAY || kv->value.a.type != GGUF_INT32 || kv->value.a.n != (uint64_t)t->n_vocab)
        return fail(e, "metadata 'tokenizer.ggml.token_type' must be %d int32 values", t->n_vocab);
    struct gguf_arr_iter it;
    struct gguf_value v;
    gguf_arr_begin(&it, &kv->value.a);
    for (int32_t id = 0; gguf_arr_next(&it, &v); id++)
        t->type[id] = (int32_t)v.i;
    return 0;
}

static int load_merges(struct tokenizer *t, const struct gguf *g, struct error *e)
{
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.merges");
    if (!kv || kv->value.type != GGUF_ARRAY || kv->value.a.type != GGUF_STRING)
        return fail(e, "metadata 'tokenizer.ggml.merges' (an array of strings) is missing");
    uint32_t cap = table_size(kv->value.a.n);
    t->merges = calloc(cap, sizeof *t->merges);
    if (!t->merges)
        return fail(e, "out of memory for %llu merges", (unsigned long long)kv->value.a.n);
    t->merge_mask = cap - 1;
    struct gguf_arr_iter it;
    struct gguf_value v;
    gguf_arr_begin(&it, &kv->value.a);
    char joined[1024];
    for (int32_t rank = 0; gguf_arr_next(&it, &v); rank++) {
        const char *sp = memchr(v.s.p, ' ', v.s.n);
        size_t nl = sp ? (size_t)(sp - v.s.p) : 0, nr = sp ? v.s.n - nl - 1 : 0;
        int32_t l = sp ? tokenizer_find(t, v.s.p, nl) : -1, r = sp ? tokenizer_find(t, sp + 1, nr) : -1;
        if (l < 0 || r < 0 || nl + nr > sizeof joined)
            return fail(e, "merge %d ('%.*s') does not name two tokens", rank, (int)(v.s.n > 60 ? 60 : v.s.n), v.s.p);
        memcpy(joined, v.s.p, nl);
        memcpy(joined + nl, sp + 1, nr);
        int32_t result = tokenizer_find(t, joined, nl + nr);
        if (result < 0)
            return fail(e, "merge %d ('%.*s') makes a string that is not a token", rank, (int)(v.s.n > 60 ? 60 : v.s.n),
                        v.s.p);
        uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1;
        uint64_t h = hash_u64(key) & t->merge_mask;
        while (t->merges[h].key && t->merges[h].key != key)
            h = (h + 1) & t->merge_mask;
        if (!t->merges[h].key) /* the first (lowest-ranked) merge of a pair wins */
            t->merges[h] = (struct merge_entry){ key, rank, result };
    }
    return 0;
}

struct special_key {
    uint8_t first;
    uint32_t len;
    int32_t id;
};

/* By first byte, then longest first (so "<|im_start|>" wins over a prefix
 * of it), then by id. */
static int special_order(const void *a, const void *b)
{
    const struct special_key *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Control and user-defined tokens, grouped by first byte so the encoder
 * tries only those that can match where it stands (Gemma has 6,414). */
static int load_special(struct tokenizer *t, struct error *e)
{
    struct special_key *keys = malloc((size_t)t->n_vocab * sizeof *keys);
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return fail(e, "out of memory");
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if ((t->type[id] == 3 || t->type[id] == 4) && t->len[id] > 0)
            keys[t->n_special++] = (struct special_key){ (uint8_t)t->text[id][0], t->len[id], id };
    qsort(keys, (size_t)t->n_special, sizeof *keys, special_order);
    for (int i = 0, b = 0; b <= 256; b++) {
        while (i < t->n_special && keys[i].first < b)
            i++;
        t->special_from[b] = i; /* the first special whose first byte is >= b */
    }
    for (int i = 0; i < t->n_special; i++)
        t->special[i] = keys[i].id;
    free(keys);
    return 0;
}

/* SPM: each token's score, the merge priority */
static int load_scores(struct tokenizer *t, const struct gguf *g, struct error *e)
{
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.ggml.scores");
    if (!kv || kv->value.type != GGUF_ARRAY || kv->value.a.type != GGUF_FLOAT32 || kv->value.a.n != (uint64_t)t->n_vocab)
        return fail(e, "metadata 'tokenizer.ggml.scores' must be %d float32 values", t->n_vocab);
    if (!(t->scores = malloc((size_t)t->n_vocab * sizeof *t->scores)))
        return fail(e, "out of memory");
    struct gguf_arr_iter it;
    struct gguf_value v;
    gguf_arr_begin(&it, &kv->value.a);
    for (int32_t id = 0; gguf_arr_next(&it, &v); id++)
        t->scores[id] = (float)v.f;
    return 0;
}

/* The token of each byte: BPE's byte alphabet (every byte must have one),
 * or SPM's <0xXX> byte-fallback tokens (-1 where the vocabulary has none). */
static int load_bytes(struct tokenizer *t, struct error *e)
{
    for (int b = 0; b < 256; b++) {
        char ch[8];
        int n = t->model == TOKENIZER_SPM ? snprintf(ch, sizeof ch, "<0x%02X>", b) : byte_level_utf8(byte_level_char(b), ch);
        if ((t->byte_id[b] = tokenizer_find(t, ch, (size_t)n)) < 0 && t->model == TOKENIZER_BPE)
            return fail(e, "the vocabulary has no token for byte 0x%02x", b);
    }
    return 0;
}

static int32_t optional_id(const struct gguf *g, const char *key, int32_t n_vocab)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->value.type != GGUF_UINT32 || kv->value.u >= (uint64_t)n_vocab)
        return -1;
    return (int32_t)kv->value.u;
}

static bool optional_bool(const struct gguf *g, const char *key, bool otherwise)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    return kv && kv->value.type == GGUF_BOOL ? kv->value.u != 0 : otherwise;
}

int tokenizer_load(struct tokenizer *t, const struct gguf *g, struct error *e)
{
    memset(t, 0, sizeof *t);
    struct gguf_str model;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, e))
        return -1;
    if (gguf_str_eq(model, "llama"))
        t->model = TOKENIZER_SPM;
    else if (!gguf_str_eq(model, "gpt2"))
        return fail(e, "tokenizer model '%.*s' is not supported (minfer reads byte-level BPE, 'gpt2', and "
                       "SentencePiece, 'llama')", (int)model.n, model.p);
    struct gguf_str pre;
    if (t->model == TOKENIZER_SPM)
        ; /* SentencePiece splits nothing before merging */
    else if (gguf_get_str(g, "tokenizer.ggml.pre", &pre, e))
        return -1;
    else if (gguf_str_eq(pre, "qwen2"))
        t->pre = PRE_QWEN2;
    else if (gguf_str_eq(pre, "llama-bpe"))
        t->pre = PRE_LLAMA3;
    else
        return fail(e, "pre-tokenizer '%.*s' is not supported (minfer has qwen2 and llama-bpe)", (int)pre.n, pre.p);
    const struct gguf_kv *tokens = gguf_find(g, "tokenizer.ggml.tokens");
    if (!tokens)
        return fail(e, "metadata 'tokenizer.ggml.tokens' is missing");
    int rc = load_tokens(t, tokens, e) || load_types(t, g, e) ||
             (t->model == TOKENIZER_SPM ? load_scores(t, g, e) : load_merges(t, g, e)) || load_special(t, e) ||
             load_bytes(t, e);
    if (rc) {
        tokenizer_free(t);
        return -1;
    }
    t->bos = optional_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab);
    t->eos = optional_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab);
    t->unk = optional_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab);
    /* as llama.cpp: SentencePiece and Llama 3 vocabularies start a text
     * with BOS, and SentencePiece's with a space, unless the file says otherwise */
    t->add_bos = t->bos >= 0 && optional_bool(g, "tokenizer.ggml.add_bos_token",
                                              t->model == TOKENIZER_SPM || t->pre == PRE_LLAMA3);
    t->add_space_prefix = t->model == TOKENIZER_SPM && optional_bool(g, "tokenizer.ggml.add_space_prefix", true);
    return 0;
}

void tokenizer_free(struct tokenizer *t)
{
    free(t->text);
    free(t->len);
    free(t->type);
    free(t->index);
    free(t->merges);
    free(t->scores);
    free(t->special);
    memset(t, 0, sizeof *t);
}

int tokens_append(int32_t **out, size_t *n, size_t *cap, const int32_t *ids, size_t k, struct error *e)
{
    if (*n + k > *cap) {
        size_t c = 2 * (*n + k) > 64 ? 2 * (*n + k) : 64;
        int32_t *p = realloc(*out, c * sizeof *p);
        if (!p)
            return fail(e, "out of memory for %zu tokens", c);
        *out = p;
        *cap = c;
    }
    memcpy(*out + *n, ids, k * sizeof *ids);
    *n += k;
    return 0;
}

static int push(int32_t id, int32_t **out, size_t *n, size_t *cap, struct error *e)
{
    return tokens_append(out, n, cap, &id, 1, e);
}

int tokenizer_push_bos(const struct tokenizer *t, int32_t **out, size_t *n_out, size_t *cap, struct error *e)
{
    if (t->bos < 0)
        return fail(e, "the vocabulary names no BOS token");
    return push(t->bos, out, n_out, cap, e);
}

/* BPE over one piece: start from its bytes' tokens and apply the
 * lowest-ranked merge among neighbours until none applies. */
static int bpe(const struct tokenizer *t, const char *s, size_t n, int32_t **out, size_t *n_out, size_t *cap,
               struct error *e)
{
    int32_t stack[64], *sym = n <= 64 ? stack : malloc(n * sizeof *sym);
    if (!sym)
        return fail(e, "out of memory");
    size_t count = n;
    for (size_t i = 0; i < n; i++)
        sym[i] = t->byte_id[(uint8_t)s[i]];
    for (;;) {
        int32_t best_rank = INT32_MAX;
        size_t at = 0;
        int32_t result = -1;
        for (size_t i = 0; i + 1 < count; i++) {
            const struct merge_entry *m = find_merge(t, sym[i], sym[i + 1]);
            if (m && m->rank < best_rank) {
                best_rank = m->rank;
                at = i;
                result = m->result;
            }
        }
        if (result < 0)
            break;
        sym[at] = result;
        memmove(&sym[at + 1], &sym[at + 2], (count - at - 2) * sizeof *sym);
        count--;
    }
    int rc = 0;
    for (size_t i = 0; i < count && !rc; i++)
        rc = push(sym[i], out, n_out, cap, e);
    if (sym != stack)
        free(sym);
    return rc;
}

static int encode_plain(const struct tokenizer *t, const char *s, size_t n, int32_t **out, size_t *n_out, size_t *cap,
                        struct error *e)
{
    /* the pre-tokenizer reads up to a NUL sentinel, so give it a copy that has one */
    char *copy = malloc(n + 1);
    if (!copy)
        return fail(e, "out of memory");
    memcpy(copy, s, n);
    copy[n] = 0;
    int rc = 0;
    for (size_t at = 0; at < n && !rc;) {
        size_t len = pretokenize_next(t->pre, copy + at, copy + n);
        if (len > n - at)
            len = n - at;
        rc = bpe(t, copy + at, len, out, n_out, cap, e);
        at += len;
    }
    free(copy);
    return rc;
}

/* SPM: the text with a leading space where asked, every space as U+2581 */
static int encode_spm(const struct tokenizer *t, const char *s, size_t n, bool space_first, int32_t **out,
                      size_t *n_out, size_t *cap, struct error *e)
{
    char *esc = malloc(3 * (n + 1)), *w = esc;
    if (!esc)
        return fail(e, "out of memory");
    if (space_first)
        memcpy(w, "\xe2\x96\x81", 3), w += 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            memcpy(w, "\xe2\x96\x81", 3), w += 3;
        else
            *w++ = s[i];
    }
    int rc = spm_encode(t, esc, (size_t)(w - esc), out, n_out, cap, e);
    free(esc);
    return rc;
}

/* Text between special tokens; after_special: it starts the input or follows one. */
static int encode_text(const struct tokenizer *t, const char *s, size_t n, bool after_special, int32_t **out,
                       size_t *n_out, size_t *cap, struct error *e)
{
    if (n == 0)
        return 0;
    if (t->model == TOKENIZER_SPM)
        return encode_spm(t, s, n, t->add_space_prefix && after_special, out, n_out, cap, e);
    return encode_plain(t, s, n, out, n_out, cap, e);
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t n, bool parse_special, int32_t **out,
                     size_t *n_out, size_t *cap, struct error *e)
{
    size_t start = 0;
    bool after_special = true;
    for (size_t at = 0; at < n; at++) {
        const uint8_t first = (uint8_t)text[at];
        for (int k = t->special_from[first]; k < t->special_from[first + 1]; k++) {
            int32_t id = t->special[k];
            if (t->type[id] == 3 && !parse_special) /* control tokens only when asked; user-defined always */
                continue;
            if (t->len[id] <= n - at && memcmp(text + at, t->text[id], t->len[id]) == 0) {
                if (encode_text(t, text + start, at - start, after_special, out, n_out, cap, e) ||
                    push(id, out, n_out, cap, e))
                    return -1;
                after_special = true;
                at += t->len[id];
                start = at;
                at--; /* the loop's increment */
                break;
            }
        }
    }
    return encode_text(t, text + start, n - start, after_special, out, n_out, cap, e);
}

/* Decodes one UTF-8 character of s (n bytes left); returns its length, or 0. */
static int utf8_char(const unsigned char *s, size_t n, int *cp)
{
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || (size_t)len > n)
        return 0;
    int v = len == 1 ? s[0] : s[0] & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    *cp = v;
    return len;
}

/* SPM: a byte token is its byte; elsewhere U+2581 is a space. */
static size_t spm_piece(const struct tokenizer *t, int32_t id, char *buf, size_t cap)
{
    const char *s = t->text[id];
    size_t n = t->len[id], len = 0;
    unsigned byte;
    if (t->type[id] == 6 && n == 6 && sscanf(s, "<0x%2X>", &byte) == 1) {
        if (cap)
            buf[0] = (char)byte;
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        bool space = i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0;
        if (len < cap)
            buf[len] = space ? ' ' : s[i];
        len++;
        i += space ? 2 : 0;
    }
    return len;
}

size_t tokenizer_piece(const struct tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab)
        return 0;
    const unsigned char *s = (const unsigned char *)t->text[id];
    size_t n = t->len[id], len = 0;
    if (t->type[id] == 3 || t->type[id] == 4) { /* special tokens are their text */
        memcpy(buf, s, n < cap ? n : cap);
        return n;
    }
    if (t->model == TOKENIZER_SPM)
        return spm_piece(t, id, buf, cap);
    for (size_t i = 0; i < n;) {
        int cp, k = utf8_char(s + i, n - i, &cp);
        int b = k ? byte_level_byte(cp) : -1;
        if (b < 0) { /* not in the byte alphabet: pass the bytes through */
            b = s[i];
            k = 1;
        }
        if (len < cap)
            buf[len] = (char)b;
        len++;
        i += (size_t)k;
    }
    return len;
}

/* Bytes of the complete UTF-8 characters at the front of s (n bytes): an
 * unfinished sequence at the end is held back; invalid bytes pass. */
static size_t complete_prefix(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int need = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 : (s[i] & 0xf8) == 0xf0 ? 4 : 1;
        if (i + (size_t)need > n) {
            bool valid_so_far = true;
            for (size_t k = i + 1; k < n; k++)
                valid_so_far = valid_so_far && (s[k] & 0xc0) == 0x80;
            return valid_so_far ? i : n;
        }
        i += (size_t)need;
    }
    return n;
}

size_t detokenize_push(struct detokenizer *d, const struct tokenizer *t, int32_t id, char *out, size_t cap)
{
    char buf[512];
    size_t n = tokenizer_piece(t, id, buf, sizeof buf);
    if (n > sizeof buf)
        n = sizeof buf;
    char all[sizeof buf + sizeof d->pending];
    memcpy(all, d->pending, (size_t)d->n_pending);
    memcpy(all + d->n_pending, buf, n);
    size_t total = (size_t)d->n_pending + n;
    size_t done = complete_prefix((const unsigned char *)all, total);
    size_t emit = done < cap ? done : cap;
    memcpy(out, all, emit);
    d->n_pending = (int)(total - done);
    memcpy(d->pending, all + done, (size_t)d->n_pending);
    return emit;
}

size_t detokenize_flush(struct detokenizer *d, char *out, size_t cap)
{
    size_t n = (size_t)d->n_pending < cap ? (size_t)d->n_pending : cap;
    memcpy(out, d->pending, n);
    d->n_pending = 0;
    return n;
}
