/* error.h: errors as values. A failing function fills a struct error with one
 * line that names the thing and the offending value, and returns -1; the
 * caller decides whether to print it, wrap it or recover. */
#ifndef MINFER_ERROR_H
#define MINFER_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

struct error {
    char msg[512]; /* one line, no trailing newline; "" when no error */
};

/* Formats msg into e (if e is non-NULL) and returns -1, so callers can write
 * `return fail(e, "...", ...);`. */
int fail(struct error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message: "prefix: old message". Returns -1. */
int fail_prefix(struct error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
