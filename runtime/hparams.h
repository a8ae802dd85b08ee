/* hparams.h: reading hyperparameters from GGUF metadata, for the generated
 * read_hparams functions. Each reports the key, what it expected and what
 * the file has; the first failure is latched in the reader. */
#ifndef MINFER_HPARAMS_H
#define MINFER_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "gguf/gguf.h"

struct hp_reader {
    const struct gguf *g;
    struct error *e;
    bool failed;
};

/* Integer metadata (any integer type, non-negative). Returns 1 if read, 0 if
 * absent and not required, -1 on error. */
int hp_int(struct hp_reader *r, const char *key, bool required, int64_t *out);

/* float32/float64 metadata; same returns. */
int hp_float(struct hp_reader *r, const char *key, bool required, float *out);

/* The element count of an array (e.g. the tokenizer's token list). */
int hp_array_length(struct hp_reader *r, const char *key, int64_t *out);

/* a / b for a derived value; a zero divisor or a remainder is an error
 * naming what. Returns 0 after latching an error. */
int64_t hp_div(struct hp_reader *r, const char *what, int64_t a, int64_t b);

/* A dimension or count must be positive. */
int hp_positive(struct hp_reader *r, const char *name, const char *key, int64_t v);

/* A specialized binary's check: the file's value must be the built-in one. */
int hp_expect(struct hp_reader *r, const char *preset, const char *name, const char *key, int64_t got, int64_t want);

#endif
