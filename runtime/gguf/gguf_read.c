/* gguf_read.c: the validating GGUF parser (see gguf.h).
 *
 * Hostile input is the normal case here: every count and length is compared
 * with the bytes that remain before anything is allocated or dereferenced,
 * every product and sum is overflow-checked, and each refusal is one line that
 * names the field and the value. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/tensor_type.h"

struct cursor {
    const uint8_t *base, *p, *end;
    struct error *e;
};

static size_t left(const struct cursor *c) { return (size_t)(c->end - c->p); }

static int need(struct cursor *c, uint64_t n, const char *what)
{
    if (n > left(c))
        return fail(c->e, "truncated file: %s needs %llu bytes at offset %zu, %zu remain", what,
                    (unsigned long long)n, (size_t)(c->p - c->base), left(c));
    return 0;
}

static uint64_t load_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int read_u32(struct cursor *c, uint32_t *out, const char *what)
{
    if (need(c, 4, what))
        return -1;
    *out = (uint32_t)load_le(c->p, 4);
    c->p += 4;
    return 0;
}

static int read_u64(struct cursor *c, uint64_t *out, const char *what)
{
    if (need(c, 8, what))
        return -1;
    *out = load_le(c->p, 8);
    c->p += 8;
    return 0;
}

static int read_str(struct cursor *c, struct gguf_str *out, const char *what)
{
    uint64_t n;
    if (read_u64(c, &n, what))
        return -1;
    if (n > left(c))
        return fail(c->e, "%s: string length %llu exceeds the %zu bytes left in the file", what,
                    (unsigned long long)n, left(c));
    out->p = (const char *)c->p;
    out->n = n;
    c->p += n;
    return 0;
}

unsigned gguf_scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static int64_t sign_extend(uint64_t v, unsigned bytes)
{
    unsigned shift = 64 - 8 * bytes;
    return (int64_t)(v << shift) >> shift;
}

/* Decodes one scalar whose bytes are known to be present. */
static void decode_scalar(uint32_t t, const uint8_t *p, struct gguf_value *v)
{
    unsigned n = gguf_scalar_size(t);
    uint64_t raw = load_le(p, (int)n);
    v->type = t;
    switch (t) {
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
        v->i = sign_extend(raw, n);
        break;
    case GGUF_FLOAT32: {
        uint32_t b = (uint32_t)raw;
        float f;
        memcpy(&f, &b, 4);
        v->f = f;
        break;
    }
    case GGUF_FLOAT64:
        memcpy(&v->f, &raw, 8);
        break;
    default:
        v->u = raw;
    }
}

static int parse_value(struct cursor *c, uint32_t type, struct gguf_value *v, int depth, const char *what);

static int parse_array(struct cursor *c, struct gguf_arr *a, int depth, const char *what)
{
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail(c->e, "%s: arrays nested deeper than %d", what, GGUF_MAX_ARRAY_DEPTH);
    if (read_u32(c, &a->type, what) || read_u64(c, &a->n, what))
        return -1;
    if (a->type >= GGUF_NVTYPES)
        return fail(c->e, "%s: unknown array element type %u", what, a->type);
    a->data = c->p;
    unsigned es = gguf_scalar_size(a->type);
    if (es) {
        if (a->n > left(c) / es)
            return fail(c->e, "%s: array of %llu %s elements exceeds the %zu bytes left in the file", what,
                        (unsigned long long)a->n, gguf_vtype_name(a->type), left(c));
        c->p += a->n * es;
    } else {
        /* Strings take at least 8 bytes and arrays 12, so a count beyond that
         * is refused before the loop can spin on it. */
        uint64_t min = a->type == GGUF_STRING ? 8 : 12;
        if (a->n > left(c) / min)
            return fail(c->e, "%s: array of %llu %s elements exceeds the %zu bytes left in the file", what,
                        (unsigned long long)a->n, gguf_vtype_name(a->type), left(c));
        for (uint64_t i = 0; i < a->n; i++) {
            struct gguf_value elem;
            if (parse_value(c, a->type, &elem, depth + 1, what))
                return -1;
        }
    }
    a->nbytes = (uint64_t)(c->p - a->data);
    return 0;
}

static int parse_value(struct cursor *c, uint32_t type, struct gguf_value *v, int depth, const char *what)
{
    v->type = type;
    if (type == GGUF_STRING)
        return read_str(c, &v->s, what);
    if (type == GGUF_ARRAY)
        return parse_array(c, &v->a, depth, what);
    unsigned n = gguf_scalar_size(type);
    if (n == 0)
        return fail(c->e, "%s: unknown value type %u", what, type);
    if (need(c, n, what))
        return -1;
    decode_scalar(type, c->p, v);
    if (type == GGUF_BOOL && v->u > 1)
        return fail(c->e, "%s: bool value %llu is neither 0 nor 1", what, (unsigned long long)v->u);
    c->p += n;
    return 0;
}

/* Names go into a hash of index+1 (0 = empty); a name already there fails. */
static uint64_t hash_str(const char *p, uint64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static uint32_t *index_slot(uint32_t *index, uint64_t mask, struct gguf_str s,
                            struct gguf_str (*name_of)(const struct gguf *, uint32_t), const struct gguf *g)
{
    for (uint64_t h = hash_str(s.p, s.n) & mask;; h = (h + 1) & mask) {
        if (!index[h])
            return &index[h];
        struct gguf_str o = name_of(g, index[h] - 1);
        if (o.n == s.n && memcmp(o.p, s.p, s.n) == 0)
            return &index[h];
    }
}

static struct gguf_str kv_name(const struct gguf *g, uint32_t i) { return g->kv[i].key; }
static struct gguf_str tensor_name(const struct gguf *g, uint32_t i) { return g->tensors[i].name; }

static bool has_nul(struct gguf_str s) { return memchr(s.p, 0, s.n) != NULL; }

static int parse_kv(struct gguf *g, struct cursor *c, uint64_t i)
{
    struct gguf_kv *kv = &g->kv[i];
    char what[96];
    snprintf(what, sizeof what, "metadata entry %llu", (unsigned long long)i);
    if (read_str(c, &kv->key, what))
        return -1;
    if (kv->key.n == 0)
        return fail(c->e, "%s: empty key", what);
    if (kv->key.n > GGUF_MAX_KEY)
        return fail(c->e, "%s: key length %llu exceeds %d", what, (unsigned long long)kv->key.n, GGUF_MAX_KEY);
    if (has_nul(kv->key))
        return fail(c->e, "%s: key contains a NUL byte", what);
    snprintf(what, sizeof what, "metadata '%.*s'", (int)(kv->key.n > 64 ? 64 : kv->key.n), kv->key.p);
    uint32_t *slot = index_slot(g->kv_index, g->index_mask, kv->key, kv_name, g);
    if (*slot)
        return fail(c->e, "%s: duplicate key", what);
    uint32_t type;
    if (read_u32(c, &type, what))
        return -1;
    if (type >= GGUF_NVTYPES)
        return fail(c->e, "%s: unknown value type %u", what, type);
    if (parse_value(c, type, &kv->value, 0, what))
        return -1;
    *slot = (uint32_t)i + 1;
    return 0;
}

static int check_alignment(struct gguf *g, struct error *e)
{
    const struct gguf_kv *kv = gguf_find(g, "general.alignment");
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!kv)
        return 0;
    if (kv->value.type != GGUF_UINT32)
        return fail(e, "metadata 'general.alignment': expected uint32, got %s", gguf_vtype_name(kv->value.type));
    uint64_t a = kv->value.u;
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(e, "metadata 'general.alignment': %llu is not a power of two", (unsigned long long)a);
    g->alignment = (uint32_t)a;
    return 0;
}

static int parse_tensor_info(struct gguf *g, struct cursor *c, uint64_t i)
{
    struct gguf_tensor *t = &g->tensors[i];
    char what[128];
    snprintf(what, sizeof what, "tensor %llu", (unsigned long long)i);
    if (read_str(c, &t->name, what))
        return -1;
    if (t->name.n == 0)
        return fail(c->e, "%s: empty name", what);
    if (t->name.n > GGUF_MAX_TENSOR_NAME)
        return fail(c->e, "%s: name length %llu exceeds %d", what, (unsigned long long)t->name.n, GGUF_MAX_TENSOR_NAME);
    if (has_nul(t->name))
        return fail(c->e, "%s: name contains a NUL byte", what);
    snprintf(what, sizeof what, "tensor '%.*s'", (int)t->name.n, t->name.p);
    uint32_t *slot = index_slot(g->tensor_index, g->index_mask, t->name, tensor_name, g);
    if (*slot)
        return fail(c->e, "%s: duplicate tensor name", what);
    if (read_u32(c, &t->n_dims, what))
        return -1;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return fail(c->e, "%s: %u dimensions (must be 1..%d)", what, t->n_dims, GGUF_MAX_DIMS);
    t->n_elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && read_u64(c, &t->ne[d], what))
            return -1;
        if (t->ne[d] == 0)
            return fail(c->e, "%s: dimension %u is zero", what, d);
        if (t->ne[d] > (uint64_t)INT64_MAX / t->n_elems)
            return fail(c->e, "%s: element count overflows at dimension %u (%llu)", what, d,
                        (unsigned long long)t->ne[d]);
        t->n_elems *= t->ne[d];
    }
    if (read_u32(c, &t->type, what) || read_u64(c, &t->offset, what))
        return -1;
    const struct type_info *ti = type_info(t->type);
    if (!ti)
        return fail(c->e, "%s: unknown tensor type id %u", what, t->type);
    if (t->ne[0] % ti->block_elems)
        return fail(c->e, "%s: row length %llu is not a multiple of the %s block size %u", what,
                    (unsigned long long)t->ne[0], ti->name, ti->block_elems);
    uint64_t blocks = t->n_elems / ti->block_elems;
    if (blocks > UINT64_MAX / ti->block_bytes)
        return fail(c->e, "%s: byte size overflows", what);
    t->nbytes = blocks * ti->block_bytes;
    if (t->offset % g->alignment)
        return fail(c->e, "%s: data offset %llu is not a multiple of the alignment %u", what,
                    (unsigned long long)t->offset, g->alignment);
    *slot = (uint32_t)i + 1;
    return 0;
}

static int cmp_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a, *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every tensor's bytes lie inside the file and no two tensors share a byte. */
static int check_tensor_data(struct gguf *g, struct error *e)
{
    uint64_t room = g->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        if (t->offset > room || t->nbytes > room - t->offset)
            return fail(e, "tensor '%.*s': data [%llu, +%llu) extends past the end of the file (%llu data bytes)",
                        (int)t->name.n, t->name.p, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)room);
        t->data = g->base + g->data_offset + t->offset;
    }
    const struct gguf_tensor **by_offset = malloc(g->n_tensors * sizeof *by_offset);
    if (!by_offset)
        return fail(e, "out of memory sorting %llu tensors", (unsigned long long)g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        by_offset[i] = &g->tensors[i];
    qsort(by_offset, g->n_tensors, sizeof *by_offset, cmp_offset);
    int rc = 0;
    for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++) {
        const struct gguf_tensor *a = by_offset[i - 1], *b = by_offset[i];
        if (a->offset + a->nbytes > b->offset)
            rc = fail(e, "tensor '%.*s': data at offset %llu overlaps tensor '%.*s' [%llu, +%llu)", (int)b->name.n,
                      b->name.p, (unsigned long long)b->offset, (int)a->name.n, a->name.p,
                      (unsigned long long)a->offset, (unsigned long long)a->nbytes);
    }
    free(by_offset);
    return rc;
}

static int parse_header(struct gguf *g, struct cursor *c)
{
    uint32_t magic;
    if (left(c) < 4)
        return fail(c->e, "truncated file: %zu bytes is too short for a GGUF header", left(c));
    if (read_u32(c, &magic, "magic"))
        return -1;
    if (magic != GGUF_MAGIC)
        return fail(c->e, "not a GGUF file: magic is 0x%08x, expected 0x%08x (\"GGUF\")", magic, GGUF_MAGIC);
    if (read_u32(c, &g->version, "version"))
        return -1;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(c->e, "big-endian GGUF (version 0x%08x) is not supported", g->version);
    if (g->version != 2 && g->version != 3)
        return fail(c->e, "unsupported GGUF version %u (supported: 2, 3)", g->version);
    if (read_u64(c, &g->n_tensors, "tensor count") || read_u64(c, &g->n_kv, "metadata count"))
        return -1;
    /* A metadata entry takes at least 14 bytes and a tensor info 33. */
    if (g->n_kv > left(c) / 14)
        return fail(c->e, "metadata count %llu is impossible in %zu remaining bytes", (unsigned long long)g->n_kv,
                    left(c));
    if (g->n_tensors > left(c) / 33)
        return fail(c->e, "tensor count %llu is impossible in %zu remaining bytes",
                    (unsigned long long)g->n_tensors, left(c));
    return 0;
}

static int alloc_tables(struct gguf *g, struct error *e)
{
    uint64_t most = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    uint64_t cap = 16;
    while (cap < 2 * most)
        cap *= 2;
    g->index_mask = cap - 1;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->kv_index = calloc(cap, sizeof *g->kv_index);
    g->tensor_index = calloc(cap, sizeof *g->tensor_index);
    if (!g->kv || !g->tensors || !g->kv_index || !g->tensor_index)
        return fail(e, "out of memory for %llu metadata entries and %llu tensors", (unsigned long long)g->n_kv,
                    (unsigned long long)g->n_tensors);
    return 0;
}

static int parse_all(struct gguf *g, struct error *e)
{
    struct cursor c = { g->base, g->base, g->base + g->size, e };
    if (parse_header(g, &c) || alloc_tables(g, e))
        return -1;
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (parse_kv(g, &c, i))
            return -1;
    if (check_alignment(g, e))
        return -1;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(g, &c, i))
            return -1;
    uint64_t end = (uint64_t)(c.p - g->base);
    g->data_offset = (end + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors == 0)
        return 0;
    if (g->data_offset > g->size)
        return fail(e, "truncated file: data section starts at %llu, past the end (%zu bytes)",
                    (unsigned long long)g->data_offset, g->size);
    return check_tensor_data(g, e);
}

int gguf_parse(struct gguf *g, const void *data, size_t size, struct error *e)
{
    memset(g, 0, sizeof *g);
    g->base = data;
    g->size = size;
    if (parse_all(g, e)) {
        gguf_free(g);
        return -1;
    }
    return 0;
}

int gguf_open(struct gguf *g, const char *path, struct error *e)
{
    memset(g, 0, sizeof *g);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(e, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int err = errno;
            close(fd);
            return fail(e, "%s: cannot map %zu bytes: %s", path, size, strerror(err));
        }
    }
    close(fd);
    static const uint8_t empty[1];
    if (gguf_parse(g, map ? map : empty, size, e)) {
        if (map)
            munmap(map, size);
        return fail_prefix(e, "%s", path);
    }
    g->map = map;
    return 0;
}

void gguf_free(struct gguf *g)
{
    free(g->kv);
    free(g->tensors);
    free(g->kv_index);
    free(g->tensor_index);
    if (g->map)
        munmap(g->map, g->size);
    memset(g, 0, sizeof *g);
}

static const uint32_t *lookup(const struct gguf *g, const uint32_t *index, const char *name,
                              struct gguf_str (*name_of)(const struct gguf *, uint32_t))
{
    if (!index)
        return NULL;
    struct gguf_str s = { name, strlen(name) };
    const uint32_t *slot = index_slot((uint32_t *)index, g->index_mask, s, name_of, g);
    return *slot ? slot : NULL;
}

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key)
{
    const uint32_t *slot = lookup(g, g->kv_index, key, kv_name);
    return slot ? &g->kv[*slot - 1] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name)
{
    const uint32_t *slot = lookup(g, g->tensor_index, name, tensor_name);
    return slot ? &g->tensors[*slot - 1] : NULL;
}

const char *gguf_vtype_name(uint32_t type)
{
    static _Thread_local char unknown[24];
    switch (type) {
#define GV_NAME(name, id, str) case id: return str;
        GGUF_VALUE_TYPES(GV_NAME)
#undef GV_NAME
    }
    snprintf(unknown, sizeof unknown, "type#%u", type);
    return unknown;
}

static const struct gguf_kv *get_typed(const struct gguf *g, const char *key, uint32_t type, struct error *e)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv) {
        fail(e, "metadata '%s' is missing", key);
        return NULL;
    }
    if (kv->value.type != type) {
        fail(e, "metadata '%s': expected %s, got %s", key, gguf_vtype_name(type), gguf_vtype_name(kv->value.type));
        return NULL;
    }
    return kv;
}

int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out, struct error *e)
{
    const struct gguf_kv *kv = get_typed(g, key, GGUF_UINT32, e);
    if (!kv)
        return -1;
    *out = (uint32_t)kv->value.u;
    return 0;
}

int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out, struct error *e)
{
    const struct gguf_kv *kv = get_typed(g, key, GGUF_STRING, e);
    if (!kv)
        return -1;
    *out = kv->value.s;
    return 0;
}

void gguf_arr_begin(struct gguf_arr_iter *it, const struct gguf_arr *a)
{
    it->arr = *a;
    it->i = 0;
    it->p = a->data;
}

/* Elements were validated by gguf_parse, so only the encoding is walked here. */
bool gguf_arr_next(struct gguf_arr_iter *it, struct gguf_value *out)
{
    if (it->i >= it->arr.n)
        return false;
    const uint8_t *end = it->arr.data + it->arr.nbytes;
    struct error ignored;
    struct cursor c = { it->arr.data, it->p, end, &ignored };
    if (parse_value(&c, it->arr.type, out, 1, "array element"))
        return false;
    it->p = c.p;
    it->i++;
    return true;
}

bool gguf_str_eq(struct gguf_str a, const char *s)
{
    size_t n = strlen(s);
    return a.n == n && memcmp(a.p, s, n) == 0;
}
