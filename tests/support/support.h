/* support.h: helpers shared by the test files: a byte builder for crafting
 * (deliberately broken) GGUF files, temporary files, seeded random data, and
 * running the built binaries. */
#ifndef MINFER_TEST_SUPPORT_H
#define MINFER_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

struct buf {
    uint8_t *p;
    size_t n, cap;
};

void buf_put(struct buf *b, const void *data, size_t n);
void buf_u8(struct buf *b, uint8_t v);
void buf_u32(struct buf *b, uint32_t v);
void buf_u64(struct buf *b, uint64_t v);
void buf_str(struct buf *b, const char *s);       /* u64 length + bytes */
void buf_pad(struct buf *b, size_t alignment);    /* zero bytes up to a multiple */
void buf_free(struct buf *b);

/* A fresh path under $TMPDIR (or /tmp) with the given suffix. The helper
 * owns it: at exit the file (if made) is removed and the string freed. */
const char *temp_path(const char *suffix);
/* Writes n bytes to a fresh temporary file and returns its path. */
const char *write_temp(const void *data, size_t n, const char *suffix);

#include "rng.h" /* deterministic N(0, 1) samples for test data */

/* Runs a shell command; returns its exit status and, if out is non-NULL, its
 * stdout+stderr (NUL-terminated, caller frees). */
int run_cmd(const char *cmd, char **out);

/* The index of the largest of n values, the lowest on ties (greedy decoding's pick). */
int32_t argmax(const float *x, int64_t n);

/* Paths handed in by `ninja test` (see build.ninja.in). */
const char *minfer_bin(void);
const char *src_dir(void);
const char *compile_bin(void);     /* an absolute path: tests run it from src_dir */

#endif
