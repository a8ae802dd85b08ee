/* device_weights.h: a model's weights in device memory, one copy per model
 * shared by every engine over it (a server's slots): uploaded by the first
 * engine, freed with the last. Matrices in weight_layout.h's rows, vectors
 * (norms, biases) as f32. */
#ifndef MINFER_CUDA_DEVICE_WEIGHTS_H
#define MINFER_CUDA_DEVICE_WEIGHTS_H

#include <stddef.h>

#include "error.h"
#include "model.h"

struct device_weights;

/* An engine finds its model's copy, checks the memory and uploads a new
 * one as one step under this lock, so two engines starting at once upload
 * once. */
void device_weights_lock(void);
void device_weights_unlock(void);

/* Under the lock: m's copy with one more engine counted, or NULL. */
struct device_weights *device_weights_find(const struct model *m);

/* The device bytes a copy of m's weights takes. */
size_t device_weights_bytes(const struct model *m);

/* Under the lock: a new copy of m's weights, uploaded and registered for
 * one engine; NULL with e set if it fails (nothing is left allocated). */
struct device_weights *device_weights_upload(const struct model *m, struct error *e);

/* One engine less on w (NULL: none); freed at none. Takes the lock. */
void device_weights_release(struct device_weights *w);

/* The engines on w (takes the lock), and the device copy of each weight
 * (m->w order). */
int device_weights_engines(const struct device_weights *w);
void **device_weights_dev(const struct device_weights *w);

#endif
