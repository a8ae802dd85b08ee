/* model.h: a GGUF file bound to a compiled architecture: its hyperparameters
 * read and checked, every tensor the description names found, type- and
 * shape-checked, and linked into the generated weights struct. */
#ifndef MINFER_MODEL_H
#define MINFER_MODEL_H

#include "arch_def.h"
#include "error.h"
#include "gguf/gguf.h"
#include "weights.h"

struct model {
    const struct arch_def *arch;
    struct gguf gguf;       /* owns the mapping the weights point into */
    void *hp;               /* struct <arch>_hparams */
    void *weights;          /* struct <arch>_weights */
    void *layers;           /* struct <arch>_layer[n_layer] */
    struct weight *w;       /* every bound tensor */
    int n_w;
    int64_t n_layer;
};

/* Opens path, finds its architecture among the compiled ones, binds it.
 * Every failure is one line naming the file and the tensor or key. */
int model_open(struct model *m, const char *path, struct error *e);

/* Binds an already parsed file (m->gguf is taken over). */
int model_bind(struct model *m, const struct arch_def *arch, struct error *e);

void model_close(struct model *m);

#endif
