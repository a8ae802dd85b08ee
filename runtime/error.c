/* error.c: formatting for struct error (see error.h). */
#include "error.h"

#include <stdio.h>
#include <string.h>

int fail(struct error *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int fail_prefix(struct error *e, const char *fmt, ...)
{
    if (e) {
        char prefix[256], old[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        /* Truncation is acceptable: the message stays one bounded line. */
        size_t n = strlen(prefix);
        if (n > sizeof e->msg - 3)
            n = sizeof e->msg - 3;
        memcpy(e->msg, prefix, n);
        memcpy(e->msg + n, ": ", 2);
        size_t m = strnlen(old, sizeof old - 1);
        if (m > sizeof e->msg - n - 3)
            m = sizeof e->msg - n - 3;
        memcpy(e->msg + n + 2, old, m);
        e->msg[n + 2 + m] = 0;
    }
    return -1;
}
