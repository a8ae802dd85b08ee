/* cmd_info.c: `minfer info FILE [--json]`: architecture, hyperparameters
 * (the "<arch>.*" metadata), the rest of the metadata, a tensor table and
 * totals. Text output abbreviates long arrays; JSON prints every value. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#ifdef MINFER_CUDA
#include "cuda/cuda_backend.h"
#endif
#include "gguf/gguf.h"
#include "model.h"
#include "quant/tensor_type.h"

#define TEXT_ARRAY_ITEMS 8 /* array elements shown before "..." in text mode */

/* JSON string body with escapes; invalid UTF-8 bytes become U+FFFD. */
static void json_str(FILE *f, const char *p, uint64_t n)
{
    fputc('"', f);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, f);
        else {
            int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            bool ok = len > 0 && i + (uint64_t)len <= n;
            for (int k = 1; ok && k < len; k++)
                ok = ((unsigned char)p[i + (uint64_t)k] & 0xc0) == 0x80;
            if (ok) {
                fwrite(p + i, 1, (size_t)len, f);
                i += (uint64_t)len - 1;
            } else
                fputs("\\ufffd", f);
        }
    }
    fputc('"', f);
}

static void print_float(FILE *f, uint32_t type, double v, bool json)
{
    if (json && !isfinite(v))
        fprintf(f, "\"%s\"", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    else
        fprintf(f, type == GGUF_FLOAT32 ? "%.9g" : "%.17g", v);
}

static void print_value(FILE *f, const struct gguf_value *v, bool json);

static void print_array(FILE *f, const struct gguf_arr *a, bool json)
{
    struct gguf_arr_iter it;
    struct gguf_value elem;
    gguf_arr_begin(&it, a);
    if (!json)
        fprintf(f, "%s[%" PRIu64 "] ", gguf_vtype_name(a->type), a->n);
    fputc('[', f);
    for (uint64_t i = 0; gguf_arr_next(&it, &elem); i++) {
        if (!json && i == TEXT_ARRAY_ITEMS) {
            fputs(", ...", f);
            break;
        }
        if (i)
            fputs(", ", f);
        print_value(f, &elem, json);
    }
    fputc(']', f);
}

static void print_value(FILE *f, const struct gguf_value *v, bool json)
{
    switch (v->type) {
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
        fprintf(f, "%" PRId64, v->i);
        break;
    case GGUF_FLOAT32: case GGUF_FLOAT64:
        print_float(f, v->type, v->f, json);
        break;
    case GGUF_BOOL:
        fputs(v->u ? "true" : "false", f);
        break;
    case GGUF_STRING:
        json_str(f, v->s.p, v->s.n);
        break;
    case GGUF_ARRAY:
        print_array(f, &v->a, json);
        break;
    default:
        fprintf(f, "%" PRIu64, v->u);
    }
}

struct totals {
    uint64_t params, bytes;
};

static struct totals sum_tensors(const struct gguf *g)
{
    struct totals t = { 0, 0 };
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        t.params += g->tensors[i].n_elems;
        t.bytes += g->tensors[i].nbytes;
    }
    return t;
}

static bool is_hparam(const struct gguf_kv *kv, struct gguf_str arch)
{
    return arch.n && kv->key.n > arch.n && memcmp(kv->key.p, arch.p, arch.n) == 0 && kv->key.p[arch.n] == '.';
}

static void print_shape(FILE *f, const struct gguf_tensor *t, bool json)
{
    for (uint32_t d = 0; d < t->n_dims; d++)
        fprintf(f, d ? (json ? ", %" PRIu64 : " x %" PRIu64) : "%" PRIu64, t->ne[d]);
}

/* Whether the file's architecture is compiled in, and if so whether the
 * file binds to it: the answer a user of `info` wants before running it. */
struct model_check {
    bool compiled, ok;
    const char *arch_name, *preset, *source;
    int n_tensors, n_nodes;
    size_t arena_1, arena_512; /* activation arena for 1 and 512 tokens */
    int typed, by_length, launches; /* a per-model build's decode matmul launches: its typed kernels', its
                                       kernels' for their row length, all (the rest: the generic ones) */
    struct error e;
};

/* Builds the forward graph for one token and for a 512-token batch: the
 * generated builder's own check that the file fits it. */
static int build_graphs(const struct model *m, struct model_check *c)
{
    struct graph g;
    if (graph_init(&g, m->arch->max_nodes(m->hp), m->arch->source, &c->e))
        return -1;
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        if (m->arch->build(&g, m->hp, m->weights, k ? 512 : 1, 1) < 0)
            rc = fail(&c->e, "%s", g.err.msg);
        *(k ? &c->arena_512 : &c->arena_1) = g.arena_bytes;
        c->n_nodes = g.n;
#ifdef MINFER_CUDA
        if (!rc && k == 0 && c->preset) {
            const struct cuda_launches n = cuda_backend_fixed_launches(m, &g);
            c->typed = n.typed, c->by_length = n.by_length, c->launches = n.typed + n.by_length + n.generic;
        }
#endif
    }
    graph_free(&g);
    return rc;
}

#define NO_TENSORS "the file has no tensors (a vocabulary or metadata only), so run cannot load it"

/* Binds the file as a model of its architecture and builds its graphs. A
 * file without tensors (a vocabulary, metadata) is described, not judged. */
static void check_model(const struct gguf *g, const char *path, struct gguf_str arch, struct model_check *c)
{
    memset(c, 0, sizeof *c);
    const struct arch_def *a = arch.p ? arch_find(arch.p, arch.n) : NULL;
    if (!a || g->n_tensors == 0)
        return;
    c->compiled = true;
    c->arch_name = a->name;
    c->preset = a->preset;
    c->source = a->source;
    struct model m;
    c->ok = model_open(&m, path, &c->e) == 0;
    if (c->ok) {
        c->n_tensors = m.n_w;
        c->ok = build_graphs(&m, c) == 0;
        model_close(&m);
    }
}

static void print_json(const struct gguf *g, const char *path, struct gguf_str arch, const struct model_check *c)
{
    FILE *f = stdout;
    struct totals tot = sum_tensors(g);
    fprintf(f, "{\n  \"file\": ");
    json_str(f, path, strlen(path));
    fprintf(f, ",\n  \"version\": %u,\n  \"alignment\": %u,\n  \"architecture\": ", g->version, g->alignment);
    if (arch.p)
        json_str(f, arch.p, arch.n);
    else
        fputs("null", f);
    for (int pass = 0; pass < 2; pass++) {
        fprintf(f, ",\n  \"%s\": {", pass ? "metadata" : "hyperparameters");
        bool first = true;
        for (uint64_t i = 0; i < g->n_kv; i++) {
            if (pass == 0 && !is_hparam(&g->kv[i], arch))
                continue;
            fputs(first ? "\n    " : ",\n    ", f);
            first = false;
            json_str(f, g->kv[i].key.p, g->kv[i].key.n);
            fprintf(f, ": {\"type\": \"%s\", \"value\": ", gguf_vtype_name(g->kv[i].value.type));
            print_value(f, &g->kv[i].value, true);
            fputc('}', f);
        }
        fputs(first ? "}" : "\n  }", f);
    }
    fputs(",\n  \"tensors\": [", f);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        json_str(f, t->name.p, t->name.n);
        fprintf(f, ", \"type\": \"%s\", \"shape\": [", type_name(t->type));
        print_shape(f, t, true);
        fprintf(f, "], \"bytes\": %" PRIu64 ", \"offset\": %" PRIu64 "}", t->nbytes, g->data_offset + t->offset);
    }
    fprintf(f, "%s],\n  \"model\": {\"compiled\": %s, \"ok\": %s, \"error\": ", g->n_tensors ? "\n  " : "",
            c->compiled ? "true" : "false", c->ok ? "true" : "false");
    if (c->compiled && !c->ok)
        json_str(f, c->e.msg, strlen(c->e.msg));
    else if (g->n_tensors == 0)
        json_str(f, NO_TENSORS, strlen(NO_TENSORS));
    else
        fputs("null", f);
    if (c->ok && c->launches) /* a per-model build's: see print_text */
        fprintf(f, ", \"typed_launches\": %d, \"row_length_launches\": %d, \"launches\": %d", c->typed, c->by_length,
                c->launches);
    fprintf(f, "},\n  \"totals\": {\"tensors\": %" PRIu64 ", \"parameters\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"bits_per_weight\": %.4f}\n}\n",
            g->n_tensors, tot.params, tot.bytes, tot.params ? 8.0 * (double)tot.bytes / (double)tot.params : 0.0);
}

static void print_text(const struct gguf *g, const char *path, struct gguf_str arch, const struct model_check *c)
{
    FILE *f = stdout;
    struct totals tot = sum_tensors(g);
    fprintf(f, "file:          %s (GGUF v%u, %zu bytes, alignment %u)\n", path, g->version, g->size, g->alignment);
    fprintf(f, "architecture:  %.*s\n", arch.p ? (int)arch.n : 6, arch.p ? arch.p : "(none)");
    for (int pass = 0; pass < 2; pass++) {
        fprintf(f, "%s\n", pass ? "metadata:" : "hyperparameters:");
        for (uint64_t i = 0; i < g->n_kv; i++) {
            if (is_hparam(&g->kv[i], arch) == (pass == 1))
                continue;
            fprintf(f, "  %-44.*s ", (int)g->kv[i].key.n, g->kv[i].key.p);
            print_value(f, &g->kv[i].value, false);
            fputc('\n', f);
        }
    }
    fprintf(f, "tensors: %" PRIu64 "\n  %-5s %-40s %-8s %-24s %14s %14s\n", g->n_tensors, "#", "name", "type",
            "shape", "bytes", "offset");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        char shape[96];
        FILE *s = fmemopen(shape, sizeof shape, "w");
        if (s) {
            print_shape(s, t, false);
            fclose(s);
        } else
            strcpy(shape, "?");
        fprintf(f, "  %-5" PRIu64 " %-40.*s %-8s %-24s %14" PRIu64 " %14" PRIu64 "\n", i, (int)t->name.n, t->name.p,
                type_name(t->type), shape, t->nbytes, g->data_offset + t->offset);
    }
    fprintf(f, "totals: %" PRIu64 " parameters (%.2f M), %" PRIu64 " bytes (%.2f MiB), %.4f bits per weight\n",
            tot.params, (double)tot.params / 1e6, tot.bytes, (double)tot.bytes / (1024.0 * 1024.0),
            tot.params ? 8.0 * (double)tot.bytes / (double)tot.params : 0.0);
    if (g->n_tensors == 0)
        fprintf(f, "model: none: %s\n", NO_TENSORS);
    else if (!c->compiled)
        fprintf(f, "model: architecture '%.*s' is not compiled into this binary\n", arch.p ? (int)arch.n : 6,
                arch.p ? arch.p : "(none)");
    else if (c->ok)
        fprintf(f, "model: %s (%s%s, %s): hyperparameters and %d tensors check out; graph of %d nodes, "
                   "activations %.2f MiB for 1 token, %.2f MiB for 512\n", c->arch_name,
                c->preset ? "specialized for " : "generic build", c->preset ? c->preset : "", c->source, c->n_tensors,
                c->n_nodes, (double)c->arena_1 / 1048576.0, (double)c->arena_512 / 1048576.0);
    if (c->ok && c->launches) {
        fprintf(f, "kernels: %d of a token's %d matmul launches on the GPU take this build's typed kernels (its rows "
                   "and types)", c->typed, c->launches);
        if (c->typed < c->launches)
            fprintf(f, "; %d its kernels for their row length, %d the generic ones", c->by_length,
                    c->launches - c->typed - c->by_length);
        fputc('\n', f);
    }
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return puts("usage: minfer info FILE [--json]"), 0;
        else if (argv[i][0] == '-')
            return die("info: unknown option '%s'", argv[i]);
        else if (path)
            return die("info: more than one file given ('%s' and '%s')", path, argv[i]);
        else
            path = argv[i];
    }
    if (!path)
        return die("info: no file given (usage: minfer info FILE [--json])");
    struct gguf g;
    struct error e;
    if (gguf_open(&g, path, &e))
        return die("%s", e.msg);
    struct gguf_str arch = { NULL, 0 };
    const struct gguf_kv *a = gguf_find(&g, "general.architecture");
    if (a && a->value.type == GGUF_STRING)
        arch = a->value.s;
    struct model_check c;
    check_model(&g, path, arch, &c);
    if (json)
        print_json(&g, path, arch, &c);
    else
        print_text(&g, path, arch, &c);
    gguf_free(&g);
    if (fflush(stdout) != 0)
        return die("info: cannot write output");
    return c.compiled && !c.ok ? die("%s", c.e.msg) : 0;
}
