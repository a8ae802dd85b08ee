/* kv_cache.c: the KV cache (see kv_cache.h). */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quant/half.h"
#include "quant/quant.h"

int kv_type_from_name(const char *name, enum kv_type *out)
{
    static const char *const names[] = { "f32", "f16", "q8_0" };
    for (int i = 0; i < 3; i++)
        if (strcmp(name, names[i]) == 0)
            return *out = (enum kv_type)i, 0;
    return -1;
}

const char *kv_type_name(enum kv_type t) { return t == KV_F32 ? "f32" : t == KV_F16 ? "f16" : "q8_0"; }

size_t kv_bytes(const struct kv_cache *c)
{
    return 2 * (size_t)c->n_layer * (size_t)c->n_head_kv * (size_t)c->n_ctx * c->row_bytes;
}

int kv_init(struct kv_cache *c, enum kv_type type, int n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim,
            struct error *e)
{
    memset(c, 0, sizeof *c);
    if (type == KV_Q8_0 && head_dim % 32)
        return fail(e, "a q8_0 KV cache needs head_dim to be a multiple of 32, it is %lld", (long long)head_dim);
    c->type = type;
    c->n_layer = n_layer;
    c->n_ctx = n_ctx;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->row_bytes = kv_row_bytes(type, head_dim);
    size_t half = kv_bytes(c) / 2;
    c->k = calloc(1, half);
    c->v = calloc(1, half);
    if (!c->k || !c->v) {
        kv_free(c);
        return fail(e, "out of memory for a %s KV cache of %lld positions (%.1f MiB)", kv_type_name(type),
                    (long long)n_ctx, (double)(2 * half) / 1048576.0);
    }
    return 0;
}

void kv_free(struct kv_cache *c)
{
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

static uint8_t *row(const struct kv_cache *c, const uint8_t *base, int layer, int64_t head, int64_t pos)
{
    size_t index = ((size_t)layer * (size_t)c->n_head_kv + (size_t)head) * (size_t)c->n_ctx + (size_t)pos;
    return (uint8_t *)base + index * c->row_bytes;
}

void kv_store_row(const struct kv_cache *c, uint8_t *base, int layer, int64_t head, int64_t pos, const float *x)
{
    uint8_t *r = row(c, base, layer, head, pos);
    switch (c->type) {
    case KV_F32: memcpy(r, x, 4 * (size_t)c->head_dim); break;
    case KV_F16:
        for (int64_t i = 0; i < c->head_dim; i++)
            store_f16(r + 2 * i, x[i]);
        break;
    case KV_Q8_0: quant_q8_0(x, r, c->head_dim); break;
    }
}

void kv_load_row(const struct kv_cache *c, const uint8_t *base, int layer, int64_t head, int64_t pos, float *out)
{
    const uint8_t *r = row(c, base, layer, head, pos);
    switch (c->type) {
    case KV_F32: memcpy(out, r, 4 * (size_t)c->head_dim); break;
    case KV_F16:
        for (int64_t i = 0; i < c->head_dim; i++)
            out[i] = load_f16(r + 2 * i);
        break;
    case KV_Q8_0: dequant_q8_0(r, out, c->head_dim); break;
    }
}

size_t kv_row_bytes(enum kv_type type, int64_t head_dim)
{
    return type == KV_F32 ? 4 * (size_t)head_dim : type == KV_F16 ? 2 * (size_t)head_dim : (size_t)head_dim / 32 * 34;
}
