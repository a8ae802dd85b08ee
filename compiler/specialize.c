/* specialize.c: binds hyperparameters to one model (see specialize.h). Only
 * the hyperparameters that appear in a shape (and the layer count) are
 * fixed: a context length or a norm epsilon stays a value read at load.
 * The weights' types are recorded too where the model gives them: a GGUF
 * file's own, or a preset's under a quant mix (PRESET:MIX, the types
 * `minfer quantize` and `minfer synth` give it). */
#include "specialize.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "hparams.h"
#include "presets.h"
#include "quant/quantize_recipe.h"

static bool is_gguf(const char *what)
{
    size_t n = strlen(what);
    return n > 5 && strcmp(what + n - 5, ".gguf") == 0;
}

static uint64_t shape_symbols(const struct ir *ir)
{
    uint64_t set = 1ull << ir->n_layer_hp;
    for (int t = 0; t < ir->n_t; t++)
        for (int d = 0; d < ir->t[t].n_dims; d++)
            for (int k = 0; k < ir->t[t].ne[d].n; k++)
                for (int f = 0; f < ir->t[t].ne[d].t[k].deg; f++)
                    set |= 1ull << ir->t[t].ne[d].t[k].sym[f];
    for (int i = 0; i < ir->n_node; i++)
        for (int k = 0; k < ir->node[i].head_dim.n; k++)
            for (int f = 0; f < ir->node[i].head_dim.t[k].deg; f++)
                set |= 1ull << ir->node[i].head_dim.t[k].sym[f];
    return set & ~(1ull << IR_SYM_NT) & ~(1ull << IR_SYM_NOUT);
}

static int from_preset(struct ir *ir, const struct preset *p, int64_t *values, bool *known, struct error *e)
{
    if (strcmp(p->arch, ir->name) != 0)
        return fail(e, "preset %s is for architecture %s, not %s", p->name, p->arch, ir->name);
    for (int k = 0; k < p->n; k++) {
        int i = ir_find_hparam(ir, p->v[k].name);
        if (i < 0)
            return fail(e, "preset %s sets '%s', which %s does not declare", p->name, p->v[k].name, ir->file);
        if (ir->hp[i].kind == HP_INT) {
            values[i] = (int64_t)p->v[k].value;
            known[i] = true;
        }
    }
    return 0;
}

static int from_gguf(struct ir *ir, const char *path, int64_t *values, bool *known, struct error *e)
{
    struct gguf g;
    if (gguf_open(&g, path, e))
        return -1;
    struct hp_reader r = { &g, e, false };
    int rc = 0;
    for (int i = 0; i < ir->n_hp && rc >= 0; i++) {
        const struct ir_hparam *h = &ir->hp[i];
        if (h->kind != HP_INT || h->source == HP_DERIVED)
            continue;
        rc = h->source == HP_ARRAY_LENGTH ? hp_array_length(&r, h->key, &values[i]) : hp_int(&r, h->key, !h->has_default, &values[i]);
        known[i] = rc == 1;
    }
    gguf_free(&g);
    return rc < 0 ? fail_prefix(e, "%s", path) : 0;
}

/* A preset name (what, up to a ':') and its quant mix (after it, or NULL). */
static const struct preset *preset_of(const char *what, const struct recipe **mix, struct error *e)
{
    char name[64];
    const char *colon = strchr(what, ':');
    snprintf(name, sizeof name, "%.*s", colon ? (int)(colon - what) : (int)strlen(what), what);
    const struct preset *p = preset_find(name);
    if (!p)
        return fail(e, "unknown preset '%s' (known: %s; or give a .gguf file)", name, preset_names()), NULL;
    *mix = colon ? recipe_find(colon + 1) : NULL;
    if (colon && !*mix)
        return fail(e, "%s: unknown quant mix '%s' (known: %s)", what, colon + 1, recipe_names()), NULL;
    return p;
}

/* The GGUF name of tensor t in layer l. */
static void tensor_name(const struct ir_tensor *t, int l, char *out, size_t n)
{
    if (t->per_layer)
        snprintf(out, n, t->pattern, l);
    else
        snprintf(out, n, "%s", t->pattern);
}

/* Each tensor's type in each layer: from the file g, or from the mix for
 * the preset p (tensors of ne evaluated from values); an absent optional
 * tensor takes its fallback's. */
static int record_types(struct ir *ir, const struct gguf *g, const struct recipe *mix, const struct preset *p,
                        const int64_t *values, const bool *known, struct error *e)
{
    const int64_t n_layer = values[ir->n_layer_hp];
    if (n_layer > IR_MAX_TYPED_LAYERS)
        return fail(e, "%lld layers: a specialized build records the types of at most %d", (long long)n_layer,
                    IR_MAX_TYPED_LAYERS);
    for (int i = 0; i < ir->n_t; i++) {
        struct ir_tensor *t = &ir->t[i];
        memset(t->type, -1, sizeof t->type);
        for (int l = 0; l < (t->per_layer ? n_layer : 1); l++) {
            char name[96];
            tensor_name(t, l, name, sizeof name);
            if (g) {
                const struct gguf_tensor *gt = gguf_find_tensor(g, name);
                if (gt)
                    t->type[l] = (signed char)gt->type;
                else if (t->fallback >= 0)
                    t->type[l] = ir->t[t->fallback].type[l];
                else if (!t->optional)
                    return fail(e, "tensor '%s' is not in the file", name);
                continue;
            }
            if (t->fallback >= 0 && p->tied) { /* not stored (the tied output): the fallback's */
                t->type[l] = ir->t[t->fallback].type[l];
                continue;
            }
            uint64_t ne[4] = { 1, 1, 1, 1 };
            for (int d = 0; d < t->n_dims; d++) {
                int64_t v;
                if (expr_eval(&t->ne[d], values, known, &v))
                    return fail(e, "tensor '%s': its shape is not fixed by the preset", name);
                ne[d] = (uint64_t)v;
            }
            const struct tensor_desc desc = { name, (uint32_t)t->n_dims, ne, t->per_layer ? l : -1, (int)n_layer, !p->tied };
            t->type[l] = (signed char)recipe_type(mix, &desc, false);
        }
    }
    ir->typed = true;
    return 0;
}

int specialize(struct ir *ir, const char *what, struct error *e)
{
    int64_t values[EXPR_SYMBOLS] = { 0 };
    bool known[EXPR_SYMBOLS] = { false };
    const struct recipe *mix = NULL;
    const struct preset *p = is_gguf(what) ? NULL : preset_of(what, &mix, e);
    if (!p && !is_gguf(what))
        return -1;
    if (p ? from_preset(ir, p, values, known, e) : from_gguf(ir, what, values, known, e))
        return -1;
    /* Defaults and derivations, in declaration order (they only look back). */
    for (int i = 0; i < ir->n_hp; i++) {
        struct ir_hparam *h = &ir->hp[i];
        if (h->kind != HP_INT || h->source == HP_LAYER || (known[i] && h->source != HP_DERIVED))
            continue; /* a per-layer value is the builder's, per layer */
        char err[160];
        int64_t v;
        if (!h->has_default || ast_eval(&h->def, values, known, &v, err, sizeof err))
            return fail(e, "%s: no value for hyperparameter '%s'%s%s", what, h->name, h->has_default ? ": " : "",
                        h->has_default ? err : "");
        if (known[i] && values[i] != v)
            return fail(e, "%s: '%s' is %lld but %s gives %lld", what, h->name, (long long)values[i], h->def_text,
                        (long long)v);
        values[i] = v;
        known[i] = true;
    }
    uint64_t shaped = shape_symbols(ir);
    for (int i = 0; i < ir->n_hp; i++) {
        if (!(shaped & (1ull << i)))
            continue;
        if (values[i] <= 0)
            return fail(e, "%s: hyperparameter '%s' is %lld; it must be positive", what, ir->hp[i].name,
                        (long long)values[i]);
        ir->hp[i].fixed = true;
        ir->hp[i].value = values[i];
    }
    if (p && !mix)
        return 0; /* shapes only: the types stay the file's, at load */
    struct gguf g;
    if (!p && gguf_open(&g, what, e))
        return -1;
    int rc = record_types(ir, p ? NULL : &g, mix, p, values, known, e);
    if (!p)
        gguf_free(&g);
    return rc ? fail_prefix(e, "%s", what) : 0;
}

void specialize_label(const char *what, char *out, size_t n)
{
    const char *from = strrchr(what, '/') ? strrchr(what, '/') + 1 : what;
    const char *colon = is_gguf(what) ? NULL : strchr(from, ':');
    snprintf(out, n, "%.*s", colon ? (int)(colon - from) : (int)strlen(from), from);
}

int specialize_arch(const char *what, char *arch, size_t n, struct error *e)
{
    if (!is_gguf(what)) {
        const struct recipe *mix;
        const struct preset *p = preset_of(what, &mix, e);
        if (!p)
            return -1;
        snprintf(arch, n, "%s", p->arch);
        return 0;
    }
    struct gguf g;
    struct gguf_str s;
    if (gguf_open(&g, what, e))
        return -1;
    int rc = gguf_get_str(&g, "general.architecture", &s, e);
    if (!rc)
        snprintf(arch, n, "%.*s", (int)s.n, s.p);
    gguf_free(&g);
    return rc ? fail_prefix(e, "%s", what) : 0;
}
