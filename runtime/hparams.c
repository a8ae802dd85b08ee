/* hparams.c: typed metadata reads for hyperparameters (see hparams.h). */
#include "hparams.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int rfail(struct hp_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rfail(struct hp_reader *r, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        char msg[sizeof r->e->msg];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fail(r->e, "%s", msg);
    }
    r->failed = true;
    return -1;
}

static const struct gguf_kv *find(struct hp_reader *r, const char *key, bool required, int *rc)
{
    const struct gguf_kv *kv = gguf_find(r->g, key);
    *rc = kv ? 1 : required ? rfail(r, "metadata '%s' is missing", key) : 0;
    return kv;
}

int hp_int(struct hp_reader *r, const char *key, bool required, int64_t *out)
{
    int rc;
    const struct gguf_kv *kv = find(r, key, required, &rc);
    if (!kv)
        return rc;
    switch (kv->value.type) {
    case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT32: case GGUF_UINT64:
        if (kv->value.u > INT64_MAX)
            return rfail(r, "metadata '%s': %" PRIu64 " is too large", key, kv->value.u);
        *out = (int64_t)kv->value.u;
        return 1;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
        if (kv->value.i < 0)
            return rfail(r, "metadata '%s': %" PRId64 " is negative", key, kv->value.i);
        *out = kv->value.i;
        return 1;
    default:
        return rfail(r, "metadata '%s': expected an integer, got %s", key, gguf_vtype_name(kv->value.type));
    }
}

int hp_float(struct hp_reader *r, const char *key, bool required, float *out)
{
    int rc;
    const struct gguf_kv *kv = find(r, key, required, &rc);
    if (!kv)
        return rc;
    if (kv->value.type != GGUF_FLOAT32 && kv->value.type != GGUF_FLOAT64)
        return rfail(r, "metadata '%s': expected a float, got %s", key, gguf_vtype_name(kv->value.type));
    *out = (float)kv->value.f;
    return 1;
}

int hp_array_length(struct hp_reader *r, const char *key, int64_t *out)
{
    int rc;
    const struct gguf_kv *kv = find(r, key, true, &rc);
    if (!kv)
        return rc;
    if (kv->value.type != GGUF_ARRAY)
        return rfail(r, "metadata '%s': expected an array, got %s", key, gguf_vtype_name(kv->value.type));
    *out = (int64_t)kv->value.a.n;
    return 1;
}

int64_t hp_div(struct hp_reader *r, const char *what, int64_t a, int64_t b)
{
    if (b == 0 || a % b) {
        rfail(r, "%s: %" PRId64 " / %" PRId64 " is not an exact division", what, a, b);
        return 0;
    }
    return a / b;
}

int hp_positive(struct hp_reader *r, const char *name, const char *key, int64_t v)
{
    if (v > 0)
        return 0;
    return rfail(r, "hyperparameter %s (%s) is %" PRId64 "; it must be positive", name, key, v);
}

int hp_expect(struct hp_reader *r, const char *preset, const char *name, const char *key, int64_t got, int64_t want)
{
    if (got == want)
        return 0;
    return rfail(r, "this binary is built for %s: %s (%s) must be %" PRId64 ", the file has %" PRId64, preset, name,
                 key, want, got);
}
