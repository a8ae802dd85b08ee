/* device_weights.c: each model's weights on the device, one copy shared by
 * its engines (device_weights.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda/device.h"
#include "cuda/device_weights.h"
#include "cuda/weight_layout.h"
#include "quant/quant.h"

struct device_weights {
    const struct model *m;
    void **dev;
    int engines;          /* engines using it; freed at 0 */
    struct device_weights *next;
};

static struct device_weights *registry; /* every model with engines on the device */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

void device_weights_lock(void) { pthread_mutex_lock(&registry_lock); }
void device_weights_unlock(void) { pthread_mutex_unlock(&registry_lock); }

struct device_weights *device_weights_find(const struct model *m)
{
    for (struct device_weights *w = registry; w; w = w->next)
        if (w->m == m) {
            w->engines++;
            return w;
        }
    return NULL;
}

/* A weight's device bytes: vectors as f32, matrices in weight_layout.h's rows. */
static size_t weight_bytes(const struct weight *w)
{
    const int64_t rows = w->ne[1] * w->ne[2] * w->ne[3];
    return w->n_dims == 1 ? (size_t)w->ne[0] * sizeof(float) : (size_t)rows * cuda_row_bytes(w->type, w->ne[0]);
}

size_t device_weights_bytes(const struct model *m)
{
    size_t total = 0;
    for (int i = 0; i < m->n_w; i++)
        total += weight_bytes(&m->w[i]);
    return total;
}

#define UPLOAD_CHUNK ((size_t)16 << 20) /* host bytes packed at a time */

/* A matrix's rows, packed into the GPU's layout a chunk at a time. */
static int upload_matrix(void *dev, const struct weight *w, struct error *e)
{
    const int64_t k = w->ne[0], rows = w->ne[1] * w->ne[2] * w->ne[3];
    const size_t in_row = type_bytes(w->type, (uint64_t)k), out_row = cuda_row_bytes(w->type, k);
    if (!cuda_planes_of(w->type).n)
        return cuda_upload(dev, w->data, (size_t)rows * out_row, e);
    const int64_t per = (int64_t)(UPLOAD_CHUNK / out_row) > 0 ? (int64_t)(UPLOAD_CHUNK / out_row) : 1;
    uint8_t *buf = malloc((size_t)per * out_row);
    int rc = buf ? 0 : fail(e, "out of memory");
    for (int64_t r = 0; !rc && r < rows; r += per) {
        const int64_t n = rows - r < per ? rows - r : per;
        cuda_rows_pack(w->type, k, n, (const uint8_t *)w->data + (size_t)r * in_row, buf);
        rc = cuda_upload((uint8_t *)dev + (size_t)r * out_row, buf, (size_t)n * out_row, e);
    }
    free(buf);
    return rc;
}

/* One weight into its device copy at dev. */
static int upload_weight(void *dev, const struct weight *w, size_t bytes, struct error *e)
{
    if (w->n_dims != 1)
        return upload_matrix(dev, w, e);
    float *f = malloc(bytes);
    int rc = !f ? fail(e, "out of memory") : dequantize_row(w->type, w->data, f, w->ne[0]) ? fail(e, "type %s", type_name(w->type)) : 0;
    rc = rc || cuda_upload(dev, f, bytes, e);
    free(f);
    return rc;
}

/* Each weight of m once into dev, with a progress bar on a terminal. */
static int upload_all(const struct model *m, void **dev, struct error *e)
{
    const size_t total = device_weights_bytes(m);
    size_t done = 0;
    bool tty = isatty(2);
    int shown = -1;
    for (int i = 0; i < m->n_w; i++) {
        const struct weight *w = &m->w[i];
        size_t bytes = weight_bytes(w);
        if (cuda_alloc(&dev[i], bytes ? bytes : 1, "a weight", e) || upload_weight(dev[i], w, bytes, e))
            return fail_prefix(e, "weight '%.*s'", (int)w->name_len, w->name);
        done += bytes;
        int pct = (int)(done * 100 / (total ? total : 1));
        if (tty && (pct != shown || i == m->n_w - 1)) {
            shown = pct;
            fprintf(stderr, "\ruploading [%-40.*s] %3d%%", pct * 40 / 100, "========================================", pct);
        }
    }
    if (tty)
        fputc('\n', stderr);
    return 0;
}

static void free_copy(struct device_weights *w)
{
    for (int i = 0; w->dev && i < w->m->n_w; i++)
        cuda_free(w->dev[i]);
    free(w->dev);
    free(w);
}

struct device_weights *device_weights_upload(const struct model *m, struct error *e)
{
    struct device_weights *w = calloc(1, sizeof *w);
    if (w && !(w->dev = calloc((size_t)m->n_w, sizeof *w->dev)))
        free(w), w = NULL;
    if (!w) {
        fail(e, "out of memory");
        return NULL;
    }
    w->m = m;
    if (upload_all(m, w->dev, e)) {
        free_copy(w);
        return NULL;
    }
    w->engines = 1;
    w->next = registry;
    return registry = w;
}

void device_weights_release(struct device_weights *w)
{
    if (!w)
        return;
    device_weights_lock();
    if (--w->engines == 0) {
        for (struct device_weights **p = &registry; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
        free_copy(w);
    }
    device_weights_unlock();
}

int device_weights_engines(const struct device_weights *w)
{
    device_weights_lock();
    int n = w->engines;
    device_weights_unlock();
    return n;
}

void **device_weights_dev(const struct device_weights *w) { return w->dev; }
