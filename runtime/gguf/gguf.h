/* gguf.h: the GGUF container (v2 and v3), read and written.
 *
 * A parsed file keeps pointers into the caller's bytes (usually a read-only
 * mmap): strings are length-counted and not NUL-terminated, array payloads and
 * tensor data are never copied. Parsing validates everything first (counts,
 * lengths, dimension products and offsets, with overflow-safe arithmetic
 * against the buffer size), so after gguf_parse succeeds every pointer in the
 * struct is inside the buffer. */
#ifndef MINFER_GGUF_H
#define MINFER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GGUF_MAGIC 0x46554747u   /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4          /* ggml tensors have at most four dimensions */
#define GGUF_MAX_TENSOR_NAME 64  /* bytes, as the GGUF spec states */
#define GGUF_MAX_KEY 65535       /* bytes */
#define GGUF_MAX_ARRAY_DEPTH 8   /* arrays of arrays nest at most this deep */

/* Metadata value types, numbered as in the file. */
#define GGUF_VALUE_TYPES(X) \
    X(UINT8, 0, "uint8")   X(INT8, 1, "int8")     X(UINT16, 2, "uint16") \
    X(INT16, 3, "int16")   X(UINT32, 4, "uint32") X(INT32, 5, "int32")   \
    X(FLOAT32, 6, "float32") X(BOOL, 7, "bool")   X(STRING, 8, "string") \
    X(ARRAY, 9, "array")   X(UINT64, 10, "uint64") X(INT64, 11, "int64") \
    X(FLOAT64, 12, "float64")

enum gguf_vtype {
#define GV_ENUM(name, id, str) GGUF_##name = id,
    GGUF_VALUE_TYPES(GV_ENUM)
#undef GV_ENUM
    GGUF_NVTYPES
};

struct gguf_str {
    const char *p; /* n bytes, not NUL-terminated */
    uint64_t n;
};

struct gguf_arr {
    uint32_t type;       /* element type */
    uint64_t n;          /* element count */
    const uint8_t *data; /* first element's encoding */
    uint64_t nbytes;     /* bytes of all elements' encodings */
};

struct gguf_value {
    uint32_t type; /* enum gguf_vtype */
    union {
        uint64_t u;        /* UINT8..UINT64 and BOOL */
        int64_t i;         /* INT8..INT64 */
        double f;          /* FLOAT32, FLOAT64 */
        struct gguf_str s; /* STRING */
        struct gguf_arr a; /* ARRAY */
    };
};

struct gguf_kv {
    struct gguf_str key;
    struct gguf_value value;
};

struct gguf_tensor {
    struct gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length (contiguous); unused dims are 1 */
    uint32_t type;              /* enum tensor_type */
    uint64_t offset;            /* from the start of the data section */
    uint64_t n_elems;
    uint64_t nbytes;
    const uint8_t *data;        /* base + data_offset + offset */
};

struct gguf {
    const uint8_t *base;  /* the whole file */
    size_t size;
    void *map;            /* non-NULL when gguf_open mapped the file */
    uint32_t version;     /* 2 or 3 */
    uint32_t alignment;   /* general.alignment, or 32 */
    uint64_t n_kv;
    struct gguf_kv *kv;   /* in file order */
    uint64_t n_tensors;
    struct gguf_tensor *tensors; /* in file order */
    uint64_t data_offset; /* start of the data section */
    uint32_t *kv_index, *tensor_index; /* open-addressing hash of names -> index+1 */
    uint64_t index_mask;
};

/* Parses size bytes at data. The struct borrows data; gguf_free releases only
 * what parsing allocated. On failure *g is left empty and e says why. */
int gguf_parse(struct gguf *g, const void *data, size_t size, struct error *e);

/* Maps path read-only and parses it; errors are prefixed with the path. */
int gguf_open(struct gguf *g, const char *path, struct error *e);

/* Releases the parse result and, for gguf_open, the mapping. */
void gguf_free(struct gguf *g);

/* Lookups by name; NULL when absent. */
const struct gguf_kv *gguf_find(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);

/* The value type's name ("uint32"), or "type#N". */
const char *gguf_vtype_name(uint32_t type);

/* Encoded size of one scalar of the value type, or 0 for STRING, ARRAY and
 * unknown types. */
unsigned gguf_scalar_size(uint32_t type);

/* Typed getters: fail (naming the key, the expected and the actual type) when
 * the key is absent or of another type. */
int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out, struct error *e);
int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out, struct error *e);

/* Walks an array's elements in order: each call fills *out and advances.
 * Returns false after the last element. Nested arrays come out as ARRAY
 * values whose payload can be walked the same way. */
struct gguf_arr_iter {
    struct gguf_arr arr;
    uint64_t i;
    const uint8_t *p;
};
void gguf_arr_begin(struct gguf_arr_iter *it, const struct gguf_arr *a);
bool gguf_arr_next(struct gguf_arr_iter *it, struct gguf_value *out);

/* Whether a string equals the NUL-terminated s. */
bool gguf_str_eq(struct gguf_str a, const char *s);

#endif
