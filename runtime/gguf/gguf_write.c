/* gguf_write.c: the GGUF v3 writer (see gguf_write.h). Every value is kept
 * in its file encoding, so copying metadata from a parsed file is a byte copy. */
#include "gguf/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/tensor_type.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "gguf_set_arr copies host scalars as little-endian");

struct bytes {
    uint8_t *p;
    size_t n, cap;
};

static int bytes_put(struct bytes *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

static int put_le(struct bytes *b, uint64_t v, int n)
{
    uint8_t tmp[8];
    for (int i = 0; i < n; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    return bytes_put(b, tmp, (size_t)n);
}

static int put_str(struct bytes *b, const char *s, size_t n) { return put_le(b, n, 8) || bytes_put(b, s, n); }

struct wkv {
    char *key;
    struct bytes enc; /* u32 type + payload */
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
    const void *data;
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    FILE *f;
    char *tmp_path, *path;
    size_t next_tensor; /* streaming: the tensor whose data comes next */
};

struct gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(struct gguf_writer)); }

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].enc.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    if (w->f) {
        fclose(w->f);
        unlink(w->tmp_path);
    }
    free(w->kv);
    free(w->t);
    free(w->tmp_path);
    free(w->path);
    free(w);
}

/* Returns the (emptied) encoding buffer for key, adding the key if new. */
static struct bytes *slot(struct gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            w->kv[i].enc.n = 0;
            return &w->kv[i].enc;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv)
            return NULL;
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k)
        return NULL;
    w->kv[w->n_kv] = (struct wkv){ .key = k };
    return &w->kv[w->n_kv++].enc;
}

static int set_scalar(struct gguf_writer *w, const char *key, uint32_t type, uint64_t bits, int n)
{
    struct bytes *b = slot(w, key);
    return !b || put_le(b, type, 4) || put_le(b, bits, n) ? -1 : 0;
}

int gguf_set_u8(struct gguf_writer *w, const char *k, uint8_t v) { return set_scalar(w, k, GGUF_UINT8, v, 1); }
int gguf_set_i8(struct gguf_writer *w, const char *k, int8_t v) { return set_scalar(w, k, GGUF_INT8, (uint8_t)v, 1); }
int gguf_set_u16(struct gguf_writer *w, const char *k, uint16_t v) { return set_scalar(w, k, GGUF_UINT16, v, 2); }
int gguf_set_i16(struct gguf_writer *w, const char *k, int16_t v) { return set_scalar(w, k, GGUF_INT16, (uint16_t)v, 2); }
int gguf_set_u32(struct gguf_writer *w, const char *k, uint32_t v) { return set_scalar(w, k, GGUF_UINT32, v, 4); }
int gguf_set_i32(struct gguf_writer *w, const char *k, int32_t v) { return set_scalar(w, k, GGUF_INT32, (uint32_t)v, 4); }
int gguf_set_u64(struct gguf_writer *w, const char *k, uint64_t v) { return set_scalar(w, k, GGUF_UINT64, v, 8); }
int gguf_set_i64(struct gguf_writer *w, const char *k, int64_t v) { return set_scalar(w, k, GGUF_INT64, (uint64_t)v, 8); }
int gguf_set_bool(struct gguf_writer *w, const char *k, bool v) { return set_scalar(w, k, GGUF_BOOL, v, 1); }

int gguf_set_f32(struct gguf_writer *w, const char *k, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return set_scalar(w, k, GGUF_FLOAT32, bits, 4);
}

int gguf_set_f64(struct gguf_writer *w, const char *k, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return set_scalar(w, k, GGUF_FLOAT64, bits, 8);
}

int gguf_set_str(struct gguf_writer *w, const char *key, const char *v)
{
    struct bytes *b = slot(w, key);
    return !b || put_le(b, GGUF_STRING, 4) || put_str(b, v, strlen(v)) ? -1 : 0;
}

int gguf_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type, uint64_t n, const void *data)
{
    unsigned es = gguf_scalar_size(elem_type);
    struct bytes *b = es ? slot(w, key) : NULL;
    if (!b || put_le(b, GGUF_ARRAY, 4) || put_le(b, elem_type, 4) || put_le(b, n, 8))
        return -1;
    const uint8_t *p = data;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = 0;
        memcpy(&v, p + i * es, es); /* host is little-endian (checked at build) */
        if (put_le(b, v, (int)es))
            return -1;
    }
    return 0;
}

int gguf_set_str_arr(struct gguf_writer *w, const char *key, uint64_t n, const char *const *strs)
{
    struct bytes *b = slot(w, key);
    if (!b || put_le(b, GGUF_ARRAY, 4) || put_le(b, GGUF_STRING, 4) || put_le(b, n, 8))
        return -1;
    for (uint64_t i = 0; i < n; i++)
        if (put_str(b, strs[i], strlen(strs[i])))
            return -1;
    return 0;
}

int gguf_set_encoded(struct gguf_writer *w, const char *key, uint32_t type, const void *payload, size_t n)
{
    struct bytes *b = slot(w, key);
    return !b || put_le(b, type, 4) || bytes_put(b, payload, n) ? -1 : 0;
}

int gguf_set_value(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_STRING: {
        struct bytes *b = slot(w, key);
        return !b || put_le(b, GGUF_STRING, 4) || put_str(b, v->s.p, v->s.n) ? -1 : 0;
    }
    case GGUF_ARRAY: {
        struct bytes *b = slot(w, key);
        return !b || put_le(b, GGUF_ARRAY, 4) || put_le(b, v->a.type, 4) || put_le(b, v->a.n, 8) ||
                       bytes_put(b, v->a.data, v->a.nbytes)
                   ? -1
                   : 0;
    }
    case GGUF_FLOAT32: return gguf_set_f32(w, key, (float)v->f);
    case GGUF_FLOAT64: return gguf_set_f64(w, key, v->f);
    default: {
        unsigned n = gguf_scalar_size(v->type);
        return n ? set_scalar(w, key, v->type, v->u, (int)n) : -1;
    }
    }
}

int gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                    const void *data, struct error *e)
{
    const struct type_info *ti = type_info(type);
    size_t len = strlen(name);
    if (len == 0 || len > GGUF_MAX_TENSOR_NAME)
        return fail(e, "tensor '%s': name length %zu is not in 1..%d", name, len, GGUF_MAX_TENSOR_NAME);
    if (!ti)
        return fail(e, "tensor '%s': unknown type id %u", name, type);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return fail(e, "tensor '%s': %u dimensions (must be 1..%d)", name, n_dims, GGUF_MAX_DIMS);
    if (ne[0] % ti->block_elems)
        return fail(e, "tensor '%s': row length %llu is not a multiple of the %s block size %u", name,
                    (unsigned long long)ne[0], ti->name, ti->block_elems);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return fail(e, "tensor '%s': declared twice", name);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        n *= ne[d];
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t)
            return fail(e, "out of memory declaring tensor '%s'", name);
        w->t = t;
        w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    *t = (struct wtensor){ .name = strdup(name), .type = type, .n_dims = n_dims, .data = data };
    if (!t->name)
        return fail(e, "out of memory declaring tensor '%s'", name);
    for (uint32_t d = 0; d < n_dims; d++)
        t->ne[d] = ne[d];
    t->nbytes = n / ti->block_elems * ti->block_bytes;
    w->n_t++;
    return 0;
}

static uint32_t alignment_of(const struct gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct bytes *b = &w->kv[i].enc;
        if (strcmp(w->kv[i].key, "general.alignment") == 0 && b->n == 8 && b->p[0] == GGUF_UINT32)
            return (uint32_t)(b->p[4] | b->p[5] << 8 | b->p[6] << 16 | (uint32_t)b->p[7] << 24);
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

static int write_bytes(struct gguf_writer *w, const void *p, size_t n, struct error *e)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        return fail(e, "%s: write failed: %s", w->tmp_path, strerror(errno));
    return 0;
}

static int write_padding(struct gguf_writer *w, uint64_t pos, struct error *e)
{
    static const uint8_t zeros[256];
    uint32_t a = alignment_of(w);
    uint64_t pad = (a - pos % a) % a;
    while (pad) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        if (write_bytes(w, zeros, n, e))
            return -1;
        pad -= n;
    }
    return 0;
}

static int encode_header(struct gguf_writer *w, struct bytes *h)
{
    uint32_t a = alignment_of(w);
    if (put_le(h, GGUF_MAGIC, 4) || put_le(h, 3, 4) || put_le(h, w->n_t, 8) || put_le(h, w->n_kv, 8))
        return -1;
    for (size_t i = 0; i < w->n_kv; i++)
        if (put_str(h, w->kv[i].key, strlen(w->kv[i].key)) || bytes_put(h, w->kv[i].enc.p, w->kv[i].enc.n))
            return -1;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        t->offset = off;
        if (put_str(h, t->name, strlen(t->name)) || put_le(h, t->n_dims, 4))
            return -1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (put_le(h, t->ne[d], 8))
                return -1;
        if (put_le(h, t->type, 4) || put_le(h, off, 8))
            return -1;
        off += (t->nbytes + a - 1) / a * a;
    }
    return 0;
}

int gguf_write_begin(struct gguf_writer *w, const char *path, struct error *e)
{
    uint32_t a = alignment_of(w);
    if (a == 0 || (a & (a - 1)))
        return fail(e, "%s: general.alignment %u is not a power of two", path, a);
    size_t n = strlen(path) + 32;
    if (w->f)
        return fail(e, "%s: a write is already in progress", path);
    free(w->tmp_path); /* a writer may write more than one file */
    free(w->path);
    w->tmp_path = malloc(n);
    w->path = strdup(path);
    if (!w->tmp_path || !w->path)
        return fail(e, "%s: out of memory", path);
    snprintf(w->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    w->f = fopen(w->tmp_path, "wb");
    if (!w->f)
        return fail(e, "%s: cannot create: %s", path, strerror(errno));
    struct bytes h = { 0 };
    if (encode_header(w, &h)) {
        free(h.p);
        return fail(e, "%s: out of memory encoding the header", path);
    }
    int rc = write_bytes(w, h.p, h.n, e) || write_padding(w, h.n, e) ? -1 : 0;
    free(h.p);
    w->next_tensor = 0;
    return rc;
}

int gguf_write_data(struct gguf_writer *w, const void *data, size_t nbytes, struct error *e)
{
    if (!w->f || w->next_tensor >= w->n_t)
        return fail(e, "gguf writer: data for a tensor that was not declared");
    struct wtensor *t = &w->t[w->next_tensor];
    if (nbytes != t->nbytes)
        return fail(e, "tensor '%s': %zu data bytes given, %llu expected", t->name, nbytes,
                    (unsigned long long)t->nbytes);
    if (write_bytes(w, data, nbytes, e) || write_padding(w, nbytes, e))
        return -1;
    w->next_tensor++;
    return 0;
}

int gguf_write_end(struct gguf_writer *w, struct error *e)
{
    if (w->next_tensor != w->n_t)
        return fail(e, "%s: %zu of %zu tensors were written", w->path, w->next_tensor, w->n_t);
    FILE *f = w->f;
    w->f = NULL;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        int err = errno;
        fclose(f);
        unlink(w->tmp_path);
        return fail(e, "%s: write failed: %s", w->tmp_path, strerror(err));
    }
    if (fclose(f) != 0 || rename(w->tmp_path, w->path) != 0) {
        int err = errno;
        unlink(w->tmp_path);
        return fail(e, "%s: cannot finish: %s", w->path, strerror(err));
    }
    return 0;
}

int gguf_write_file(struct gguf_writer *w, const char *path, struct error *e)
{
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data)
            return fail(e, "tensor '%s': no data given", w->t[i].name);
    if (gguf_write_begin(w, path, e))
        return -1;
    for (size_t i = 0; i < w->n_t; i++)
        if (gguf_write_data(w, w->t[i].data, w->t[i].nbytes, e))
            return -1;
    return gguf_write_end(w, e);
}
