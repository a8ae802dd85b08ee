/* kv_cache.h: the per-layer key/value cache. Layout per layer and per K or
 * V: [head_kv][n_ctx][head_dim], head_dim contiguous, so one head's history
 * is one run of memory. Elements are f32, f16 or Q8_0 blocks (head_dim must
 * then be a multiple of 32), chosen per engine. */
#ifndef MINFER_KV_CACHE_H
#define MINFER_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kv_type { KV_F32, KV_F16, KV_Q8_0 };

struct kv_cache {
    enum kv_type type;
    int n_layer;
    int64_t n_ctx, n_head_kv, head_dim;
    size_t row_bytes;   /* one position of one head */
    uint8_t *k, *v;     /* n_layer * n_head_kv * n_ctx rows each */
};

/* Parses "f32", "f16" or "q8_0". */
int kv_type_from_name(const char *name, enum kv_type *out);
const char *kv_type_name(enum kv_type t);

int kv_init(struct kv_cache *c, enum kv_type type, int n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim,
            struct error *e);
void kv_free(struct kv_cache *c);

/* Stores one position's head vector (head_dim floats), and reads one back. */
void kv_store_row(const struct kv_cache *c, uint8_t *base, int layer, int64_t head, int64_t pos, const float *x);
void kv_load_row(const struct kv_cache *c, const uint8_t *base, int layer, int64_t head, int64_t pos, float *out);

/* Bytes both caches take. */
size_t kv_bytes(const struct kv_cache *c);
/* Bytes of one cached row (one position of one head) of head_dim elements. */
size_t kv_row_bytes(enum kv_type type, int64_t head_dim);

#ifdef __cplusplus
}
#endif

#endif
