/* weights.h: a model tensor as the graph refers to it, bound by name from a
 * GGUF file by the loader. */
#ifndef MINFER_WEIGHTS_H
#define MINFER_WEIGHTS_H

#include <stdint.h>

#include "quant/tensor_type.h"

struct weight {
    const char *name;      /* GGUF tensor name (points into the file) */
    uint32_t name_len;
    enum tensor_type type;
    int n_dims;
    int64_t ne[4];         /* ne[0] is the row length; unused dims are 1 */
    const void *data;      /* the GGUF bytes (mapped) */
    void *device;          /* a backend's copy, once registered */
};

#endif
