/* gguf_write.h: building GGUF v3 files. Declare metadata and tensor infos,
 * then write, either all at once (tensor data given up front) or streamed
 * (begin, one data call per tensor in declaration order, end). The file is
 * written under a temporary name and renamed on success, so a failed write
 * never leaves a half file at the destination. */
#ifndef MINFER_GGUF_WRITE_H
#define MINFER_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf/gguf.h"

struct gguf_writer;

struct gguf_writer *gguf_writer_new(void); /* NULL when out of memory */
void gguf_writer_free(struct gguf_writer *w);

/* Metadata setters. Setting an existing key replaces its value in place.
 * Each returns 0, or -1 when out of memory. */
int gguf_set_u8(struct gguf_writer *w, const char *key, uint8_t v);
int gguf_set_i8(struct gguf_writer *w, const char *key, int8_t v);
int gguf_set_u16(struct gguf_writer *w, const char *key, uint16_t v);
int gguf_set_i16(struct gguf_writer *w, const char *key, int16_t v);
int gguf_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_set_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_set_i64(struct gguf_writer *w, const char *key, int64_t v);
int gguf_set_f32(struct gguf_writer *w, const char *key, float v);
int gguf_set_f64(struct gguf_writer *w, const char *key, double v);
int gguf_set_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_set_str(struct gguf_writer *w, const char *key, const char *v);
/* An array of n scalars of elem_type, given as native little-endian values. */
int gguf_set_arr(struct gguf_writer *w, const char *key, uint32_t elem_type, uint64_t n, const void *data);
int gguf_set_str_arr(struct gguf_writer *w, const char *key, uint64_t n, const char *const *strs);
/* A value read from another file (any type, nested arrays included). */
int gguf_set_value(struct gguf_writer *w, const char *key, const struct gguf_value *v);
/* The raw encoding of one value (type id + payload), for building arrays of
 * arrays and for tests. */
int gguf_set_encoded(struct gguf_writer *w, const char *key, uint32_t type, const void *payload, size_t n);

/* Declares a tensor; data (nbytes of it, borrowed until the write) may be
 * NULL when the data will be streamed. Fails on a bad name, shape or type. */
int gguf_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                    const uint64_t *ne, const void *data, struct error *e);

/* Writes the whole file; every tensor must have been given data. */
int gguf_write_file(struct gguf_writer *w, const char *path, struct error *e);

/* Streaming: header and infos, then each tensor's bytes in order, then end. */
int gguf_write_begin(struct gguf_writer *w, const char *path, struct error *e);
int gguf_write_data(struct gguf_writer *w, const void *data, size_t nbytes, struct error *e);
int gguf_write_end(struct gguf_writer *w, struct error *e);

#endif
