/* emit.c: the C emitter (see emit.h). Statements for graph nodes are built
 * here; the files' structure lives in the templates. */
#include "emit.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "template.h"

/* Generated code states the graph ABI it was made for (runtime/graph.h). */
#include "graph.h"
#include "quant/tensor_type.h"
#define GRAPH_ABI_VERSION_FOR_EMIT GRAPH_ABI_VERSION

struct names {
    const char *v[EXPR_SYMBOLS];
    char storage[EXPR_SYMBOLS][48];
};

static void code_names(const struct ir *ir, struct names *nm) { ir_code_names(ir, nm->v, nm->storage); }

static int expr_code(const struct names *nm, const struct expr *x, char *buf, size_t n)
{
    return expr_to_c(x, nm->v, buf, n) < 0 ? -1 : 0;
}

/* ---- files ---- */

static int mkdirs(const char *path, struct error *e)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return fail(e, "%s: cannot create: %s", tmp, strerror(errno));
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return fail(e, "%s: cannot create: %s", tmp, strerror(errno));
    return 0;
}

/* Writes text unless the file already holds exactly it (so ninja sees no change). */
static int write_if_changed(const char *path, const char *text, struct error *e)
{
    size_t n = strlen(text);
    FILE *f = fopen(path, "rb");
    if (f) {
        char *old = malloc(n + 1);
        size_t got = old ? fread(old, 1, n + 1, f) : 0;
        fclose(f);
        bool same = old && got == n && memcmp(old, text, n) == 0;
        free(old);
        if (same)
            return 0;
    }
    f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n || fclose(f) != 0)
        return fail(e, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

#define LINE_RESET "#line RESET"

/* Code from a description line is attributed to it with #line; each such
 * statement ends with LINE_RESET, which becomes a #line giving the
 * generated file's own numbering back (as "generated/<prefix>/<file>", the
 * same in the build and in the committed copy). */
static int reset_lines(char **text, const char *name, struct error *e)
{
    size_t n = strlen(*text), extra = 0, resets = 0;
    for (const char *at = *text; (at = strstr(at, LINE_RESET)); at++)
        resets++;
    extra = resets * (strlen(name) + 32);
    char *out = malloc(n + extra + 1), *o = out;
    if (!out)
        return fail(e, "out of memory");
    int line = 1;
    for (const char *p = *text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
        if (len >= strlen(LINE_RESET) && memcmp(p, LINE_RESET, strlen(LINE_RESET)) == 0)
            o += sprintf(o, "#line %d \"%s\"\n", line + 1, name);
        else
            memcpy(o, p, len), o += len;
        p += len;
        line++;
    }
    *o = 0;
    free(*text);
    *text = out;
    return 0;
}

static int render_to(const char *templates, const char *name, struct tscope *s, const char *outdir, const char *file,
                     const char *prefix, struct error *e)
{
    char tpath[512], opath[512], gname[256], *text;
    snprintf(tpath, sizeof tpath, "%s/%s", templates, name);
    snprintf(opath, sizeof opath, "%s/%s", outdir, file);
    snprintf(gname, sizeof gname, "generated/%s/%s", prefix, file);
    if (template_render(tpath, s, &text, e) || reset_lines(&text, gname, e))
        return -1;
    int rc = write_if_changed(opath, text, e);
    free(text);
    return rc;
}

/* ---- arch.h and model.c ---- */

static void shape_doc(const struct ir_tensor *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", d ? ", " : "", t->ne_text[d]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
}

static void add_tensors(const struct ir *ir, const struct names *nm, struct tscope *root)
{
    for (int i = 0; i < ir->n_t; i++) {
        const struct ir_tensor *t = &ir->t[i];
        char doc[256], note[96] = "", code[1024];
        shape_doc(t, doc, sizeof doc);
        if (t->optional)
            snprintf(note, sizeof note, ", optional");
        else if (t->fallback >= 0)
            snprintf(note, sizeof note, ", else %s", ir->t[t->fallback].field);
        struct tscope *s = tscope_add(root, t->per_layer ? "layer_tensors" : "model_tensors");
        tscope_set(s, "field", "%s", t->field);
        tscope_set(s, "pattern", "%s", t->pattern);
        tscope_set(s, "shape", "%s", doc);
        tscope_set(s, "note", "%s", note);
        struct tscope *r = tscope_add(root, "tensors");
        tscope_set(r, "index", "%d", i);
        tscope_set(r, "field", "%s", t->field);
        tscope_set(r, "pattern", "%s", t->pattern);
        tscope_set(r, "per_layer", "%s", t->per_layer ? "true" : "false");
        tscope_set(r, "optional", "%s", t->optional ? "true" : "false");
        tscope_set(r, "fallback", "%d", t->fallback);
        tscope_set(r, "n_dims", "%d", t->n_dims);
        tscope_set(r, "container", "%s", t->per_layer ? "layer" : "weights");
        size_t len = 0;
        for (int d = 0; d < t->n_dims; d++) {
            char x[256];
            expr_code(nm, &t->ne[d], x, sizeof x);
            len += (size_t)snprintf(code + len, sizeof code - len, "ne[%d] = %s;%s", d, x, d + 1 < t->n_dims ? " " : "");
        }
        tscope_set(r, "shape_code", "%s", code);
    }
}

/* The statements that read hyperparameter i (and check it when fixed). */
static void read_code(const struct ir *ir, int i, const char *preset, struct tscope *root)
{
    const struct ir_hparam *h = &ir->hp[i];
    char line[1024];
    struct names dn; /* defaults refer to values already read, never to constants */
    ir_symbol_names(ir, dn.v, "hp->", dn.storage);
#define LINE(...) (snprintf(line, sizeof line, __VA_ARGS__), tscope_set(tscope_add(root, "reads"), "code", "%s", line))
    if (h->kind == HP_FLOAT && h->source == HP_DERIVED) {
        char def[512];
        ast_to_c(&h->def, dn.v, "HP_DIV", def, sizeof def);
        LINE("    hp->%s = (float)%s; /* %s */", h->name, def, h->def_text);
        return;
    }
    if (h->kind == HP_FLOAT) {
        if (h->has_default)
            LINE("    if ((rc = hp_float(&r, \"%s\", false, &hp->%s)) < 0)\n        return -1;\n    if (rc == 0)\n"
                 "        hp->%s = (float)%.17g;", h->key, h->name, h->name, h->fdef);
        else
            LINE("    if (hp_float(&r, \"%s\", true, &hp->%s) < 0)\n        return -1;", h->key, h->name);
        return;
    }
    char def[512] = "";
    if (h->has_default)
        ast_to_c(&h->def, dn.v, "HP_DIV", def, sizeof def);
    if (h->source == HP_DERIVED)
        LINE("    hp->%s = %s; /* %s */", h->name, def, h->def_text);
    else if (h->source == HP_ARRAY_LENGTH)
        LINE("    if (hp_array_length(&r, \"%s\", &hp->%s) < 0)\n        return -1;", h->key, h->name);
    else if (h->has_default)
        LINE("    if ((rc = hp_int(&r, \"%s\", false, &hp->%s)) < 0)\n        return -1;\n    if (rc == 0)\n"
             "        hp->%s = %s; /* default: %s */", h->key, h->name, h->name, def, h->def_text);
    else
        LINE("    if (hp_int(&r, \"%s\", true, &hp->%s) < 0)\n        return -1;", h->key, h->name);
    const char *key = h->source == HP_DERIVED ? h->def_text : h->key;
    LINE("    if (hp_positive(&r, \"%s\", \"%s\", hp->%s))\n        return -1;", h->name, key, h->name);
    if (h->fixed)
        LINE("    if (hp_expect(&r, \"%s\", \"%s\", \"%s\", hp->%s, %lld))\n        return -1;", preset, h->name, key,
             h->name, (long long)h->value);
#undef LINE
}

static void add_hparams(const struct ir *ir, const char *preset, struct tscope *root)
{
    for (int i = 0; i < ir->n_hp; i++) {
        const struct ir_hparam *h = &ir->hp[i];
        if (h->source == HP_LAYER) /* not in the file: the builder's loop forms it (layer_values) */
            continue;
        struct tscope *s = tscope_add(root, "hparams");
        tscope_set(s, "ctype", "%s", h->kind == HP_FLOAT ? "float" : "int64_t");
        tscope_set(s, "key", "%s", h->key);
        tscope_set(s, "is_float", "%s", h->kind == HP_FLOAT ? "true" : "false");
        tscope_set(s, "source", "%s", h->source == HP_GGUF ? "HPARAM_GGUF" : h->source == HP_DERIVED ? "HPARAM_DERIVED"
                                                                                                       : "HPARAM_ARRAY_LENGTH");
        tscope_set(s, "has_default", "%s", h->has_default ? "true" : "false");
        tscope_set(s, "name", "%s", h->name);
        if (h->source == HP_DERIVED)
            tscope_set(s, "doc", "= %s", h->def_text);
        else
            tscope_set(s, "doc", "%s%s%s%s", h->source == HP_ARRAY_LENGTH ? "length of " : "", h->key,
                       h->has_default ? ", default " : "", h->has_default ? (h->kind == HP_FLOAT ? "given" : h->def_text) : "");
        read_code(ir, i, preset, root);
    }
}

/* ---- graph.c ---- */

static void value_name(const struct ir *ir, int id, enum region from, char *buf, size_t n)
{
    const struct ir_node *x = &ir->node[id];
    if (x->op == IR_OP_CARRY) {
        snprintf(buf, n, "c%d", x->carry);
        return;
    }
    for (int c = 0; c < ir->n_carried; c++) {
        if ((from == REGION_POST && ir->carried_out[c] == id)) {
            snprintf(buf, n, "c%d", c);
            return;
        }
    }
    snprintf(buf, n, "n%d", id);
}

static bool needs_variable(const struct ir *ir, int id)
{
    int r[1];
    return ir_consumers(ir, id, r, 1) > 0 || ir_external_uses(ir, id) > 0;
}

static void weight_code(const struct ir *ir, int t, char *buf, size_t n)
{
    if (t < 0)
        snprintf(buf, n, "NULL");
    else
        snprintf(buf, n, "%s->%s", ir->t[t].per_layer ? "L" : "w", ir->t[t].field);
}

/* A parameter's value in the builder: the hyperparameter, or the
 * per-layer value's local variable. */
static const char *value_code(const struct ir *ir, int i, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", ir->hp[i].source == HP_LAYER ? "" : "hp->", ir->hp[i].name);
    return buf;
}

/* The declarations of the per-layer values at the top of the loop body:
 * `const float layer_value0 = (cond) ? a : b;` */
static int add_layer_values(const struct ir *ir, const struct names *nm, struct tscope *root)
{
    for (int i = 0; i < ir->n_hp; i++) {
        const struct ir_hparam *h = &ir->hp[i];
        bool used = false;
        for (int j = 0; j < ir->n_node; j++) {
            const struct ir_node *x = &ir->node[j];
            used = used || (!x->dead && ir_node_reads_hparam(x, i));
        }
        if (h->source != HP_LAYER || !used)
            continue;
        char cond[512], c[2][96];
        if (ast_to_c(&h->def, nm->v, "", cond, sizeof cond) < 0)
            return -1;
        for (int k = 0; k < 2; k++) {
            if (h->choice_hp[k] >= 0)
                value_code(ir, h->choice_hp[k], c[k], sizeof c[k]);
            else if (h->kind == HP_FLOAT)
                snprintf(c[k], sizeof c[k], "(float)%.17g", h->choice_c[k]);
            else
                snprintf(c[k], sizeof c[k], "INT64_C(%lld)", (long long)h->choice_c[k]);
        }
        tscope_set(tscope_add(root, "layer_values"), "code",
                   "#line %d \"%s\"\n        const %s %s = %s ? %s : %s; /* %s */\n" LINE_RESET, h->line, ir->file,
                   h->kind == HP_FLOAT ? "float" : "int64_t", h->name, cond, c[0], c[1], h->def_text);
    }
    return 0;
}

/* Appends ", .name = value" to buf. */
#define PARAM(...) (len += (size_t)snprintf(p + len, sizeof p - len, __VA_ARGS__))

/* The node's parameters as a designated initializer naming only what the
 * op uses (its row of the op table says which). */
static int params_code(const struct ir *ir, const struct names *nm, const struct ir_node *x, char *out, size_t n)
{
    char p[1024] = "", a[64], b[64], c[64], v[48];
    size_t len = 0;
    const struct op_info *info = op_info(x->op);
    if (info->n_w) {
        weight_code(ir, x->weight[0], a, sizeof a), weight_code(ir, x->weight[1], b, sizeof b);
        weight_code(ir, x->weight[2], c, sizeof c);
        PARAM(info->n_w == 1 ? ".w = { %s }, " : info->n_w == 2 ? ".w = { %s, %s }, " : ".w = { %s, %s, %s }, ", a, b, c);
    }
    if (info->n_bias) {
        weight_code(ir, x->bias[0], a, sizeof a), weight_code(ir, x->bias[1], b, sizeof b);
        weight_code(ir, x->bias[2], c, sizeof c);
        PARAM(info->n_bias == 1 ? ".bias = { %s }, " : ".bias = { %s, %s, %s }, ", a, b, c);
    }
    if (x->eps >= 0)
        PARAM(".eps = %s, ", value_code(ir, x->eps, v, sizeof v));
    if (x->rope_base >= 0)
        PARAM(".rope_base = %s, .rope_style = %s, ", value_code(ir, x->rope_base, v, sizeof v),
              x->rope_style == ROPE_NORMAL ? "ROPE_NORMAL" : "ROPE_NEOX");
    if (x->rope_factor >= 0)
        PARAM(".rope_factor = %s, ", value_code(ir, x->rope_factor, v, sizeof v));
    if (x->scale >= 0)
        PARAM(".scale = %s, ", value_code(ir, x->scale, v, sizeof v));
    if (x->window >= 0)
        PARAM(".window = %s, ", value_code(ir, x->window, v, sizeof v));
    if ((x->op == OP_GLU || x->op == OP_FFN_GLU) && x->glu == GLU_GELU)
        PARAM(".glu = GLU_GELU, ");
    if (x->op == OP_HEADS) {
        char d[256];
        if (expr_code(nm, &x->head_dim, d, sizeof d))
            return -1;
        PARAM(".head_dim = %s, ", d);
    }
    if (x->op == OP_PART)
        PARAM(".part = %d, ", x->part);
    if (len >= 2)
        p[len - 2] = 0;
    int w = len ? snprintf(out, n, ".p = { %s }, ", p) : snprintf(out, n, "%s", "");
    return w < 0 || (size_t)w >= n ? -1 : 0;
}
#undef PARAM

static int node_code(const struct ir *ir, const struct names *nm, int id, char *buf, size_t n)
{
    const struct ir_node *x = &ir->node[id];
    char src[GRAPH_MAX_SRC][32], params[1024], off[32] = "0", ne[3][256] = { "0", "0", "0" };
    for (int s = 0; s < GRAPH_MAX_SRC; s++)
        snprintf(src[s], sizeof src[s], "-1");
    for (int s = 0; s < x->n_src; s++)
        value_name(ir, x->src[s], x->region, src[s], sizeof src[s]);
    if (params_code(ir, nm, x, params, sizeof params))
        return -1;
    for (int d = 0; d < x->n_dims && d < 3; d++) /* the shape, for graph_add to check its own rule against */
        if (expr_code(nm, &x->ne[d], ne[d], sizeof ne[d]))
            return -1;
    if (x->slot >= 0)
        snprintf(off, sizeof off, "off[%d]", x->slot);
    const char *indent = x->region == REGION_BODY ? "        " : "    ";
    char lhs[32] = "";
    if (needs_variable(ir, id))
        snprintf(lhs, sizeof lhs, "int n%d = ", id);
    int len = snprintf(buf, n, "#line %d \"%s\"\n%s%sgraph_add(g, &(struct node_desc){ .op = OP_%s, .line = %d, "
                       ".src = { %s, %s, %s, %s },\n%s    %s.offset = %s, .ne = { %s, %s, %s } });\n" LINE_RESET,
                       x->line, ir->file, indent, lhs, ir_op_name(x->op), x->line, src[0], src[1], src[2], src[3], indent,
                       params, off, ne[0], ne[1], ne[2]);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

static int add_graph(const struct ir *ir, const struct plan *p, const struct names *nm, struct tscope *root,
                     struct error *e)
{
    int counts[3] = { 0, 0, 0 };
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *x = &ir->node[i];
        if (x->dead || x->op == IR_OP_CARRY)
            continue;
        char code[2048];
        if (node_code(ir, nm, i, code, sizeof code))
            return fail(e, "%s:%d: generated statement too long", ir->file, x->line);
        static const char *const list[] = { "pre", "body", "post" };
        tscope_set(tscope_add(root, list[x->region]), "code", "%s", code);
        counts[x->region]++;
        /* carried values: start from the pre-loop value, advance at the end of each layer */
        for (int c = 0; c < ir->n_carried; c++) {
            if (ir->carried_init[c] == i)
                tscope_set(tscope_add(root, "pre"), "code", "    int c%d = n%d;", c, i);
        }
    }
    for (int c = 0; c < ir->n_carried; c++)
        tscope_set(tscope_add(root, "body"), "code", "        c%d = n%d;", c, ir->carried_out[c]);
    tscope_set(root, "n_pre", "%d", counts[0]);
    tscope_set(root, "n_body", "%d", counts[1]);
    tscope_set(root, "n_post", "%d", counts[2]);
    char result[32];
    value_name(ir, ir->result, REGION_POST, result, sizeof result);
    tscope_set(root, "result", "%s", result);
    tscope_set(root, "n_slots", "%d", p->n_slots);
    for (int s = 0; s < p->n_slots; s++)
        tscope_set(tscope_add(root, "slots"), "size", "%s", p->size[s]);
    return 0;
}

/* ---- kernels_cpu.c and kernels.cu ---- */

static int64_t fixed_value(const struct ir *ir, const struct expr *x)
{
    int64_t values[EXPR_SYMBOLS] = { 0 }, v;
    bool known[EXPR_SYMBOLS] = { false };
    for (int i = 0; i < ir->n_hp; i++) {
        values[i] = ir->hp[i].value;
        known[i] = ir->hp[i].fixed;
    }
    return expr_eval(x, values, known, &v) == 0 ? v : 0;
}

/* The kernel instantiations fixed by row length: one (op, k, n) entry per
 * matmul-family node whose row length the build fixes, and one
 * instantiation per length; the CPU's always ("dots", "kernels"), the
 * GPU's ("gpu_dots", "gpu_kernels") only where the build does not know the
 * weight types. Where it does, its typed launches run the model, and a
 * file of other types takes the generic kernels: every type at each row
 * length was 84% of a per-model kernels.cu's compile (Gemma 3 270M on
 * sm_90: 167 of 198 s), for a file the build was not made for. */
static void add_row_kernels(const struct ir *ir, struct tscope *root)
{
    struct kernel { int op; int64_t k, n; } seen[IR_MAX_NODES];
    int count = 0;
    for (int i = 0; i < ir->n_node; i++) {
        const struct ir_node *x = &ir->node[i];
        if (x->dead || x->op == IR_OP_CARRY || !op_is_matmul(x->op))
            continue;
        struct kernel k = { x->op, fixed_value(ir, &ir->node[x->src[0]].ne[0]), fixed_value(ir, &x->ne[0]) };
        bool dup = k.k == 0, new_k = true;
        for (int j = 0; j < count; j++) {
            dup = dup || (seen[j].op == k.op && seen[j].k == k.k && seen[j].n == k.n);
            new_k = new_k && seen[j].k != k.k;
        }
        if (dup)
            continue;
        seen[count++] = k;
        for (int gpu = 0; gpu < (ir->typed ? 1 : 2); gpu++) {
            if (new_k)
                tscope_set(tscope_add(root, gpu ? "gpu_dots" : "dots"), "k", "%lld", (long long)k.k);
            struct tscope *s = tscope_add(root, gpu ? "gpu_kernels" : "kernels");
            tscope_set(s, "op", "%s", ir_op_name(k.op));
            tscope_set(s, "k", "%lld", (long long)k.k);
            tscope_set(s, "n", "%lld", (long long)k.n);
        }
    }
}

/* A per-model build's typed decode launches (ir->typed): one entry per
 * distinct (op, k, the launch's row sets, their types) over the layers. A
 * pair's one row set is the gate's, of the gate's and up's types. The
 * launch's type is theirs when they agree, else TYPE_MIXED. */
struct typed_launch {
    int op;
    int64_t k, n[3];
    int t[3];
};

static void add_typed(struct tscope *root, const struct typed_launch *l, int id)
{
    struct tscope *s = tscope_add(root, "typed");
    tscope_set(s, "id", "%d", id);
    tscope_set(s, "op", "%s", ir_op_name(l->op));
    tscope_set(s, "k", "%lld", (long long)l->k);
    bool same = true;
    for (int j = 0; j < 3; j++) {
        static const char *const nf[3] = { "n0", "n1", "n2" }, *const tf[3] = { "t0", "t1", "t2" };
        tscope_set(s, nf[j], "%lld", (long long)l->n[j]);
        if (l->t[j] < 0)
            tscope_set(s, tf[j], "-1");
        else
            tscope_set(s, tf[j], "TYPE_%s", type_name((uint32_t)l->t[j]));
        same = same && (l->t[j] < 0 || l->t[j] == l->t[0]);
    }
    tscope_set(s, "t", same ? "TYPE_%s" : "TYPE_MIXED", type_name((uint32_t)l->t[0]));
}

static bool same_launch(const struct typed_launch *a, const struct typed_launch *b)
{
    bool same = a->op == b->op && a->k == b->k;
    for (int j = 0; j < 3; j++)
        same = same && a->n[j] == b->n[j] && a->t[j] == b->t[j];
    return same;
}

static void add_typed_kernels(const struct ir *ir, struct tscope *root)
{
    struct typed_launch seen[IR_MAX_NODES];
    int count = 0;
    const int64_t n_layer = ir->hp[ir->n_layer_hp].value;
    for (int i = 0; ir->typed && i < ir->n_node; i++) {
        const struct ir_node *x = &ir->node[i];
        if (x->dead || x->op == IR_OP_CARRY || !op_is_matmul(x->op))
            continue;
        const int n_w = op_info(x->op)->n_w;
        bool per_layer = false;
        for (int j = 0; j < n_w; j++)
            per_layer = per_layer || ir->t[x->weight[j]].per_layer;
        for (int64_t l = 0; l < (per_layer ? n_layer : 1); l++) {
            struct typed_launch t = { x->op, fixed_value(ir, &ir->node[x->src[0]].ne[0]), { 0, 0, 0 }, { -1, -1, -1 } };
            for (int j = 0; j < n_w; j++) {
                const struct ir_tensor *w = &ir->t[x->weight[j]];
                t.t[j] = w->type[w->per_layer ? l : 0];
                if (x->op != OP_FFN_GLU || j == 0)
                    t.n[j] = fixed_value(ir, &w->ne[1]);
            }
            bool dup = t.k <= 0 || t.t[0] < 0;
            for (int j = 0; !dup && j < count; j++)
                dup = same_launch(&seen[j], &t);
            if (!dup && count < IR_MAX_NODES) {
                seen[count] = t;
                add_typed(root, &t, count++);
            }
        }
    }
}

static void upper(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++)
        out[i] = (char)toupper((unsigned char)in[i]);
    out[i] = 0;
}

int emit_arch(const struct ir *ir, const struct plan *plan, const char *prefix, const char *preset,
              const char *templates, const char *outdir, struct error *e)
{
    if (mkdirs(outdir, e))
        return -1;
    struct names nm;
    code_names(ir, &nm);
    struct tscope *root = tscope_new();
    char up[64];
    upper(prefix, up, sizeof up);
    tscope_set(root, "prefix", "%s", prefix);
    tscope_set(root, "upper", "%s", up);
    tscope_set(root, "source", "%s", ir->file);
    tscope_set(root, "gguf_name", "%s", ir->gguf_arch);
    tscope_set(root, "abi", "%d", GRAPH_ABI_VERSION_FOR_EMIT);
    tscope_set(root, "n_layer", "%s", ir->hp[ir->n_layer_hp].name);
    tscope_set(root, "n_ctx", "%s", ir->hp[ir->n_ctx_hp].name);
    if (preset)
        tscope_set(root, "preset", "\"%s\"", preset);
    else
        tscope_set(root, "preset", "NULL");
    tscope_set(root, "fixed", "%s", preset ? "sizes fixed for this model" : "generic build");
    add_hparams(ir, preset, root);
    add_tensors(ir, &nm, root);
    add_row_kernels(ir, root);
    add_typed_kernels(ir, root);
    int rc = add_graph(ir, plan, &nm, root, e);
    if (!rc && add_layer_values(ir, &nm, root))
        rc = fail(e, "%s: a per-layer value's code is too long", ir->file);
    if (!rc)
        rc = render_to(templates, "arch.h.tmpl", root, outdir, "arch.h", prefix, e) ||
             render_to(templates, "model.c.tmpl", root, outdir, "model.c", prefix, e) ||
             render_to(templates, "graph.c.tmpl", root, outdir, "graph.c", prefix, e) ||
             render_to(templates, "kernels_cpu.c.tmpl", root, outdir, "kernels_cpu.c", prefix, e) ||
             render_to(templates, "kernels.cu.tmpl", root, outdir, "kernels.cu", prefix, e);
    tscope_free(root);
    return rc ? -1 : 0;
}

int emit_registry(const char *const *prefixes, int n, const char *templates, const char *outfile, struct error *e)
{
    struct tscope *root = tscope_new();
    for (int i = 0; i < n; i++)
        tscope_set(tscope_add(root, "archs"), "prefix", "%s", prefixes[i]);
    tscope_set(root, "n_archs", "%d", n);
    char tpath[512], *text;
    snprintf(tpath, sizeof tpath, "%s/registry.c.tmpl", templates);
    int rc = template_render(tpath, root, &text, e);
    tscope_free(root);
    if (rc)
        return -1;
    rc = write_if_changed(outfile, text, e);
    free(text);
    return rc;
}
