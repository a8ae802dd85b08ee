/* support.c: test helpers (see support.h). */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void buf_put(struct buf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

void buf_u8(struct buf *b, uint8_t v) { buf_put(b, &v, 1); }
void buf_u32(struct buf *b, uint32_t v) { buf_put(b, &v, 4); }
void buf_u64(struct buf *b, uint64_t v) { buf_put(b, &v, 8); }

void buf_str(struct buf *b, const char *s)
{
    buf_u64(b, strlen(s));
    buf_put(b, s, strlen(s));
}

void buf_pad(struct buf *b, size_t alignment)
{
    while (b->n % alignment)
        buf_u8(b, 0);
}

void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

#define MAX_TEMPS 256

static char *temps[MAX_TEMPS];
static unsigned n_temps;

static void remove_temps(void)
{
    for (unsigned i = 0; i < n_temps; i++) {
        char side[4096];
        remove(temps[i]);
        /* Tests derive a few names from a temp path by appending to it. */
        static const char *suffixes[] = { ".again", ".pure" };
        for (int k = 0; k < 2; k++) {
            snprintf(side, sizeof side, "%s%s", temps[i], suffixes[k]);
            remove(side);
        }
        free(temps[i]);
    }
    n_temps = 0;
}

const char *temp_path(const char *suffix)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (n_temps == MAX_TEMPS)
        abort();
    if (n_temps == 0)
        atexit(remove_temps);
    char *p = malloc(strlen(dir) + strlen(suffix) + 64);
    sprintf(p, "%s/minfer-test-%ld-%u%s", dir, (long)getpid(), n_temps, suffix);
    temps[n_temps++] = p;
    return p;
}

const char *write_temp(const void *data, size_t n, const char *suffix)
{
    const char *p = temp_path(suffix);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
        abort();
    return p;
}

int run_cmd(const char *cmd, char **out)
{
    char *full = malloc(strlen(cmd) + 16);
    sprintf(full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t n = 0, cap = 4096;
    char *text = malloc(cap);
    size_t got;
    while ((got = fread(text + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2) {
            cap *= 2;
            text = realloc(text, cap);
        }
    }
    text[n] = 0;
    int status = pclose(p);
    if (out)
        *out = text;
    else
        free(text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

const char *minfer_bin(void) { return env_or("MINFER_BIN", "./minfer"); }
const char *src_dir(void) { return env_or("MINFER_SRC", ".."); }
const char *compile_bin(void) { return env_or("MINFER_COMPILE", "minfer-compile"); }

int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}
