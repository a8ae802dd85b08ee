/* model.c: binding a GGUF file to an architecture (see model.h). */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

static void clear(struct model *m)
{
    free(m->hp);
    free(m->weights);
    free(m->layers);
    free(m->w);
    m->hp = m->weights = m->layers = NULL;
    m->w = NULL;
}

static int check_shape(const struct gguf_tensor *t, const int64_t want[4], int want_dims, struct error *e)
{
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        int64_t w = d < want_dims ? want[d] : 1;
        if ((int64_t)t->ne[d] != w) {
            char got[96], exp[96];
            snprintf(got, sizeof got, "[%lld, %lld, %lld, %lld]", (long long)t->ne[0], (long long)t->ne[1],
                     (long long)t->ne[2], (long long)t->ne[3]);
            snprintf(exp, sizeof exp, "[%lld, %lld, %lld, %lld]", (long long)want[0],
                     (long long)(want_dims > 1 ? want[1] : 1), (long long)(want_dims > 2 ? want[2] : 1),
                     (long long)(want_dims > 3 ? want[3] : 1));
            return fail(e, "tensor '%.*s' has shape %s, the description expects %s", (int)t->name.n, t->name.p, got,
                        exp);
        }
    }
    return 0;
}

static int bind_one(struct model *m, int spec, int layer, void *container, struct error *e)
{
    const struct arch_def *a = m->arch;
    const struct tensor_spec *s = &a->tensors[spec];
    char name[GGUF_MAX_TENSOR_NAME + 16];
    if (s->per_layer)
        snprintf(name, sizeof name, s->pattern, layer);
    else
        snprintf(name, sizeof name, "%s", s->pattern);
    const struct weight **slot = (const struct weight **)((char *)container + s->offset);
    const struct gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    if (!t) {
        if (s->fallback >= 0) {
            *slot = *(const struct weight **)((char *)container + a->tensors[s->fallback].offset);
            return 0;
        }
        if (s->optional) {
            *slot = NULL;
            return 0;
        }
        return fail(e, "tensor '%s' is missing (%s declares it as %s)", name, a->source, s->field);
    }
    int64_t want[4];
    a->tensor_shape(m->hp, spec, want);
    if (check_shape(t, want, s->n_dims, e))
        return -1;
    if (!type_can_dequantize(t->type))
        return fail(e, "tensor '%s' has type %s, which minfer cannot compute with", name, type_name(t->type));
    struct weight *w = &m->w[m->n_w++];
    *w = (struct weight){ .name = t->name.p, .name_len = (uint32_t)t->name.n, .type = t->type,
                          .n_dims = (int)t->n_dims, .data = t->data };
    for (int d = 0; d < 4; d++)
        w->ne[d] = (int64_t)t->ne[d];
    *slot = w;
    return 0;
}

int model_bind(struct model *m, const struct arch_def *a, struct error *e)
{
    m->arch = a;
    if (a->abi != GRAPH_ABI_VERSION)
        return fail(e, "%s: generated for graph ABI %d, the runtime is %d", a->name, a->abi, GRAPH_ABI_VERSION);
    m->hp = calloc(1, a->hparams_size);
    m->weights = calloc(1, a->weights_size);
    if (!m->hp || !m->weights)
        return fail(e, "out of memory");
    if (a->read_hparams(&m->gguf, m->hp, e))
        return -1;
    m->n_layer = a->n_layer(m->hp);
    int per_layer = 0, global = 0;
    for (int i = 0; i < a->n_tensors; i++)
        a->tensors[i].per_layer ? per_layer++ : global++;
    m->layers = calloc((size_t)m->n_layer ? (size_t)m->n_layer : 1, a->layer_size);
    m->w = calloc((size_t)(global + per_layer * m->n_layer) + 1, sizeof *m->w);
    if (!m->layers || !m->w)
        return fail(e, "out of memory for %lld layers", (long long)m->n_layer);
    *(void **)((char *)m->weights + a->layers_offset) = m->layers;
    for (int i = 0; i < a->n_tensors; i++)
        if (!a->tensors[i].per_layer && bind_one(m, i, -1, m->weights, e))
            return -1;
    for (int64_t il = 0; il < m->n_layer; il++)
        for (int i = 0; i < a->n_tensors; i++)
            if (a->tensors[i].per_layer && bind_one(m, i, (int)il, (char *)m->layers + il * (int64_t)a->layer_size, e))
                return -1;
    return 0;
}

int model_open(struct model *m, const char *path, struct error *e)
{
    memset(m, 0, sizeof *m);
    if (gguf_open(&m->gguf, path, e))
        return -1;
    struct gguf_str arch;
    int rc = gguf_get_str(&m->gguf, "general.architecture", &arch, e);
    const struct arch_def *a = rc ? NULL : arch_find(arch.p, arch.n);
    if (!rc && !a) {
        char known[256] = "";
        for (int i = 0; i < arch_registry_count; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     arch_registry[i]->gguf_name);
        rc = fail(e, "architecture '%.*s' is not compiled into this binary (it has: %s)", (int)arch.n, arch.p, known);
    }
    if (rc || model_bind(m, a, e)) {
        model_close(m);
        return fail_prefix(e, "%s", path);
    }
    return 0;
}

void model_close(struct model *m)
{
    clear(m);
    gguf_free(&m->gguf);
    memset(m, 0, sizeof *m);
}
