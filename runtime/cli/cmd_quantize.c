/* cmd_quantize.c: `minfer quantize IN OUT --type T`: rewrites a GGUF with
 * its matrices in another type or one of the usual mixes. Metadata is copied
 * unchanged apart from general.file_type; tensor order is kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "quant/quant.h"
#include "quant/quantize_recipe.h"

struct options {
    const char *in, *out;
    const struct recipe *recipe;
    bool pure, allow_requantize;
};

static const char usage[] =
    "usage: minfer quantize IN.gguf OUT.gguf --type T [--pure] [--allow-requantize]\n"
    "  --type T            one of: %s\n"
    "  --pure              no mix adjustments: every matrix gets the base type\n"
    "  --allow-requantize  accept an already quantized input (quality suffers)\n";

static int parse_options(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf(usage, recipe_names());
            exit(0);
        } else if (strcmp(a, "--type") == 0) {
            if (i + 1 >= argc)
                return die("quantize: --type needs a value (one of: %s)", recipe_names());
            o->recipe = recipe_find(argv[++i]);
            if (!o->recipe)
                return die("quantize: unknown type '%s' (one of: %s)", argv[i], recipe_names());
        } else if (strcmp(a, "--pure") == 0)
            o->pure = true;
        else if (strcmp(a, "--allow-requantize") == 0)
            o->allow_requantize = true;
        else if (a[0] == '-')
            return die("quantize: unknown option '%s'", a);
        else if (!o->in)
            o->in = a;
        else if (!o->out)
            o->out = a;
        else
            return die("quantize: unexpected argument '%s'", a);
    }
    if (!o->in || !o->out)
        return die("quantize: need an input and an output file (usage: minfer quantize IN OUT --type T)");
    if (!o->recipe)
        return die("quantize: --type is required (one of: %s)", recipe_names());
    return 0;
}

static int layer_of(struct gguf_str name)
{
    int layer = -1, used = 0;
    char buf[GGUF_MAX_TENSOR_NAME + 1];
    memcpy(buf, name.p, name.n);
    buf[name.n] = 0;
    if (sscanf(buf, "blk.%d.%n", &layer, &used) == 1 && used > 0)
        return layer;
    return -1;
}

/* The block count from "<arch>.block_count", else one past the highest blk.N. */
static int count_layers(const struct gguf *g)
{
    const struct gguf_kv *arch = gguf_find(g, "general.architecture");
    if (arch && arch->value.type == GGUF_STRING && arch->value.s.n < 200) {
        char key[256];
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch->value.s.n, arch->value.s.p);
        const struct gguf_kv *kv = gguf_find(g, key);
        if (kv && kv->value.type == GGUF_UINT32)
            return (int)kv->value.u;
    }
    int n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int l = layer_of(g->tensors[i].name);
        n = l + 1 > n ? l + 1 : n;
    }
    return n;
}

static bool is_float_type(uint32_t t) { return t == TYPE_F32 || t == TYPE_F16 || t == TYPE_BF16; }

/* Chooses every tensor's type and declares it; fills types[]. */
static int plan(const struct gguf *g, const struct options *o, struct gguf_writer *w, enum tensor_type *types,
                struct error *e)
{
    int n_layer = count_layers(g);
    bool has_output = gguf_find_tensor(g, "output.weight") != NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        char name[GGUF_MAX_TENSOR_NAME + 1];
        memcpy(name, t->name.p, t->name.n);
        name[t->name.n] = 0;
        if (!type_can_dequantize(t->type))
            return fail(e, "tensor '%s': cannot read type %s", name, type_name(t->type));
        struct tensor_desc d = { name, t->n_dims, t->ne, layer_of(t->name), n_layer, has_output };
        types[i] = recipe_type(o->recipe, &d, o->pure);
        if (!is_float_type(t->type) && types[i] != t->type && !o->allow_requantize)
            return fail(e, "tensor '%s' is already %s; requantizing loses quality (pass --allow-requantize)", name,
                        type_name(t->type));
        if (gguf_add_tensor(w, name, types[i], t->n_dims, t->ne, NULL, e))
            return -1;
    }
    return 0;
}

static int copy_metadata(const struct gguf *g, const struct recipe *r, struct gguf_writer *w, struct error *e)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        char key[GGUF_MAX_KEY + 1];
        memcpy(key, g->kv[i].key.p, g->kv[i].key.n);
        key[g->kv[i].key.n] = 0;
        if (gguf_set_value(w, key, &g->kv[i].value))
            return fail(e, "out of memory copying metadata '%s'", key);
    }
    if (gguf_set_u32(w, "general.file_type", r->file_type) || gguf_set_u32(w, "general.quantization_version", 2))
        return fail(e, "out of memory setting general.file_type");
    return 0;
}

/* Converts one tensor row by row into out (nbytes of the new type). */
static int convert(const struct gguf_tensor *t, enum tensor_type to, uint8_t *out, float *row)
{
    uint64_t rows = t->n_elems / t->ne[0];
    size_t in_row = type_bytes(t->type, t->ne[0]), out_row = type_bytes(to, t->ne[0]);
    for (uint64_t r = 0; r < rows; r++) {
        if (dequantize_row(t->type, t->data + r * in_row, row, (int64_t)t->ne[0]) ||
            quantize_row(to, row, out + r * out_row, (int64_t)t->ne[0]))
            return -1;
    }
    return 0;
}

static int write_tensors(const struct gguf *g, const enum tensor_type *types, struct gguf_writer *w,
                         uint64_t *out_bytes, struct error *e)
{
    bool tty = isatty(2);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        size_t nbytes = type_bytes(types[i], t->n_elems);
        uint8_t *out = malloc(nbytes ? nbytes : 1);
        float *row = malloc(t->ne[0] * sizeof *row);
        if (tty)
            fprintf(stderr, "\r[%4llu/%4llu] %-40.*s %-5s -> %-5s", (unsigned long long)i + 1,
                    (unsigned long long)g->n_tensors, (int)t->name.n, t->name.p, type_name(t->type),
                    type_name(types[i]));
        int rc = !out || !row ? fail(e, "out of memory converting tensor '%.*s' (%zu bytes)", (int)t->name.n,
                                     t->name.p, nbytes)
                 : convert(t, types[i], out, row)
                     ? fail(e, "tensor '%.*s': cannot convert %s to %s", (int)t->name.n, t->name.p,
                            type_name(t->type), type_name(types[i]))
                     : gguf_write_data(w, out, nbytes, e);
        free(out);
        free(row);
        if (rc)
            return -1;
        *out_bytes += nbytes;
    }
    if (tty)
        fputc('\n', stderr);
    return 0;
}

static int run(const struct options *o, struct error *e)
{
    struct gguf g;
    if (gguf_open(&g, o->in, e))
        return -1;
    struct gguf_writer *w = gguf_writer_new();
    enum tensor_type *types = calloc(g.n_tensors ? g.n_tensors : 1, sizeof *types);
    uint64_t out_bytes = 0;
    int rc = !w || !types ? fail(e, "out of memory") : 0;
    if (!rc)
        rc = copy_metadata(&g, o->recipe, w, e) || plan(&g, o, w, types, e) || gguf_write_begin(w, o->out, e) ||
             write_tensors(&g, types, w, &out_bytes, e) || gguf_write_end(w, e);
    if (!rc) {
        uint64_t params = 0, in_bytes = 0;
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            params += g.tensors[i].n_elems;
            in_bytes += g.tensors[i].nbytes;
        }
        fprintf(stderr, "quantize: %s: %llu tensors, %.2f MiB -> %.2f MiB (%.2f bits per weight)\n", o->recipe->name,
                (unsigned long long)g.n_tensors, (double)in_bytes / 1048576.0, (double)out_bytes / 1048576.0,
                params ? 8.0 * (double)out_bytes / (double)params : 0.0);
    }
    free(types);
    gguf_writer_free(w);
    gguf_free(&g);
    return rc ? -1 : 0;
}

int cmd_quantize(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o))
        return 1;
    struct error e;
    if (run(&o, &e))
        return die("quantize: %s", e.msg);
    return 0;
}
