/* cmd_synth.c: `minfer synth`: writes a GGUF of a compiled architecture with
 * random weights of realistic scale (matrices ~N(0, 0.02), norm weights
 * near 1, biases small), full metadata and a placeholder tokenizer, in any
 * type or mix `quantize` knows. Benchmarks and tests get real shapes
 * (Qwen3-8B, Qwen2.5-0.5B, ...) without downloading weights. The data is a
 * function of the seed alone, whatever the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch_def.h"
#include "tokenizer/byte_level.h"
#include "cli/cli.h"
#include "gguf/gguf_write.h"
#include "presets.h"
#include "quant/quant.h"
#include "quant/quantize_recipe.h"

#define MAX_HP 48
#define ROWS_PER_CHUNK 16

struct options {
    const char *arch, *preset, *hparams, *out;
    const struct recipe *recipe;
    uint64_t seed;
    int threads;
    int tied; /* -1: from the preset (default untied) */
};

static const char usage[] =
    "usage: minfer synth (--preset P | --arch NAME --hparams k=v,...) [--hparams k=v,...] [--type T]\n"
    "                    [--tied | --untied] [--seed N] [--threads N] -o FILE.gguf\n"
    "  presets: %s\n  types: %s\n";

static int parse_options(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    o->recipe = recipe_find("f16");
    o->seed = 1;
    o->tied = -1;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = n > 0 && n < 256 ? (int)n : 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool has = v != NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf(usage, preset_names(), recipe_names());
            exit(0);
        } else if (strcmp(a, "--tied") == 0 || strcmp(a, "--untied") == 0)
            o->tied = a[2] == 't';
        else if (!has && a[0] == '-')
            return die("synth: %s needs a value", a);
        else if (strcmp(a, "--arch") == 0)
            o->arch = argv[++i];
        else if (strcmp(a, "--preset") == 0)
            o->preset = argv[++i];
        else if (strcmp(a, "--hparams") == 0)
            o->hparams = argv[++i];
        else if (strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0)
            o->out = argv[++i];
        else if (strcmp(a, "--type") == 0) {
            if (!(o->recipe = recipe_find(argv[++i])))
                return die("synth: unknown type '%s' (one of: %s)", argv[i], recipe_names());
        } else if (strcmp(a, "--seed") == 0 || strcmp(a, "--threads") == 0) {
            char *end;
            unsigned long long x = strtoull(argv[++i], &end, 10);
            if (*end || !*argv[i] || (a[2] == 't' && (x < 1 || x > 256)))
                return die("synth: %s wants %s, got '%s'", a, a[2] == 't' ? "1..256" : "a number", argv[i]);
            if (a[2] == 't')
                o->threads = (int)x;
            else
                o->seed = x;
        } else
            return die("synth: unknown argument '%s'", a);
    }
    if (!o->out)
        return die("synth: -o FILE.gguf is required");
    if (!o->preset && !o->arch)
        return die("synth: give --preset (one of: %s) or --arch with --hparams", preset_names());
    return 0;
}

/* ---- hyperparameter values ---- */

struct values {
    double v[MAX_HP];
    bool set[MAX_HP];
};

static int spec_index(const struct arch_def *a, const char *name)
{
    for (int i = 0; i < a->n_hparams; i++)
        if (strcmp(a->hparams[i].name, name) == 0)
            return i;
    return -1;
}

static int set_value(const struct arch_def *a, struct values *vals, const char *name, double v, struct error *e)
{
    int i = spec_index(a, name);
    if (i < 0) {
        char known[512] = "";
        for (int k = 0; k < a->n_hparams; k++)
            if (a->hparams[k].source != HPARAM_DERIVED)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "",
                         a->hparams[k].name);
        return fail(e, "%s has no hyperparameter '%s' (settable: %s)", a->name, name, known);
    }
    const struct hparam_spec *h = &a->hparams[i];
    if (h->source == HPARAM_DERIVED)
        return fail(e, "hyperparameter '%s' is derived by %s; set what it derives from", name, a->source);
    if (!h->is_float && (v != floor(v) || v < 1 || v > 4294967295.0))
        return fail(e, "hyperparameter '%s' must be a positive integer below 2^32, got %g", name, v);
    vals->v[i] = v;
    vals->set[i] = true;
    return 0;
}

static int parse_hparams(const struct arch_def *a, const char *text, struct values *vals, struct error *e)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return fail(e, "--hparams: '%s' is not key=value", kv);
        *eq = 0;
        char *end;
        double v = strtod(eq + 1, &end);
        if (*end || end == eq + 1)
            return fail(e, "--hparams: %s=%s is not a number", kv, eq + 1);
        if (set_value(a, vals, kv, v, e))
            return -1;
    }
    return 0;
}

/* ---- metadata ---- */

static int set_tokenizer(struct gguf_writer *w, int64_t n_vocab, struct error *e)
{
    static const char *const specials[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
    if (n_vocab < 256 + 3)
        return fail(e, "n_vocab must be at least 259 (256 byte tokens and 3 special ones), got %lld", (long long)n_vocab);
    char **tok = malloc((size_t)n_vocab * sizeof *tok);
    int32_t *type = malloc((size_t)n_vocab * sizeof *type);
    char *text = malloc((size_t)n_vocab * 24);
    if (!tok || !type || !text) {
        free(tok), free(type), free(text);
        return fail(e, "out of memory for a %lld-token vocabulary", (long long)n_vocab);
    }
    for (int64_t i = 0; i < n_vocab; i++) {
        tok[i] = text + i * 24;
        type[i] = 1; /* normal */
        if (i < 256)
            tok[i][byte_level_utf8(byte_level_char((int)i), tok[i])] = 0;
        else if (i >= n_vocab - 3) {
            snprintf(tok[i], 24, "%s", specials[i - (n_vocab - 3)]);
            type[i] = 3; /* control */
        } else
            snprintf(tok[i], 24, "tok%lld", (long long)i);
    }
    int rc = gguf_set_str(w, "tokenizer.ggml.model", "gpt2") || gguf_set_str(w, "tokenizer.ggml.pre", "qwen2") ||
             gguf_set_str_arr(w, "tokenizer.ggml.tokens", (uint64_t)n_vocab, (const char *const *)tok) ||
             gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, (uint64_t)n_vocab, type) ||
             gguf_set_str_arr(w, "tokenizer.ggml.merges", 0, NULL) ||
             gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(n_vocab - 1)) ||
             gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(n_vocab - 3)) ||
             gguf_set_str(w, "tokenizer.chat_template", /* ChatML, as Qwen's files carry it */
                          "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                          "{% endif %}");
    free(tok), free(type), free(text);
    return rc ? fail(e, "out of memory writing the tokenizer") : 0;
}

static int set_metadata(const struct arch_def *a, const struct values *vals, const struct options *o,
                        struct gguf_writer *w, struct error *e)
{
    char name[128];
    snprintf(name, sizeof name, "minfer synth %s", o->preset ? o->preset : a->name);
    if (gguf_set_str(w, "general.architecture", a->gguf_name) || gguf_set_str(w, "general.name", name) ||
        gguf_set_u32(w, "general.file_type", o->recipe->file_type) || gguf_set_u32(w, "general.quantization_version", 2))
        return fail(e, "out of memory");
    for (int i = 0; i < a->n_hparams; i++) {
        const struct hparam_spec *h = &a->hparams[i];
        if (h->source == HPARAM_DERIVED)
            continue;
        if (!vals->set[i]) {
            if (h->has_default)
                continue;
            return fail(e, "hyperparameter '%s' (%s) is required: give it with --hparams", h->name, h->key);
        }
        int rc = h->source == HPARAM_ARRAY_LENGTH ? set_tokenizer(w, (int64_t)vals->v[i], e)
                 : h->is_float ? gguf_set_f32(w, h->key, (float)vals->v[i])
                               : gguf_set_u32(w, h->key, (uint32_t)vals->v[i]);
        if (rc)
            return e->msg[0] ? -1 : fail(e, "out of memory");
    }
    return 0;
}

/* The hyperparameters as the generated reader computes them (defaults and
 * derivations included): write the metadata alone, read it back. */
static int read_back(const struct arch_def *a, struct gguf_writer *w, const char *out, void *hp, struct error *e)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.hparams.%ld", out, (long)getpid());
    struct gguf g;
    int rc = gguf_write_file(w, tmp, e);
    if (!rc && gguf_open(&g, tmp, e) == 0) {
        rc = a->read_hparams(&g, hp, e);
        gguf_free(&g);
    } else
        rc = -1;
    remove(tmp);
    return rc;
}

/* Writes the hyperparameters the file would otherwise leave to defaults, so
 * it carries full metadata: their values are what the reader computed. */
static int complete_metadata(const struct arch_def *a, const struct values *vals, const void *hp,
                             struct gguf_writer *w, struct error *e)
{
    for (int i = 0; i < a->n_hparams; i++) {
        const struct hparam_spec *h = &a->hparams[i];
        if (h->source != HPARAM_GGUF || vals->set[i])
            continue;
        const char *field = (const char *)hp + h->offset;
        int rc = h->is_float ? gguf_set_f32(w, h->key, *(const float *)field)
                             : gguf_set_u32(w, h->key, (uint32_t)*(const int64_t *)field);
        if (rc)
            return fail(e, "out of memory");
    }
    return 0;
}

/* ---- tensors ---- */

struct job {
    const struct weight *t; /* name, shape, type of the tensor being made */
    uint8_t *out;
    float mean, sd;
    uint64_t seed;
    int64_t next_chunk, n_chunks;
    pthread_mutex_t lock;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(mix(*s) >> 11) + 0.5) / 9007199254740992.0;
}

static void *worker(void *arg)
{
    struct job *j = arg;
    int64_t ne0 = j->t->ne[0], rows = j->t->ne[1] * j->t->ne[2] * j->t->ne[3];
    size_t row_bytes = type_bytes(j->t->type, (uint64_t)ne0);
    float *x = malloc((size_t)ne0 * sizeof *x);
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int64_t c = j->next_chunk++;
        pthread_mutex_unlock(&j->lock);
        if (c >= j->n_chunks || !x)
            break;
        uint64_t s = mix(j->seed ^ mix((uint64_t)c + 1));
        for (int64_t r = c * ROWS_PER_CHUNK; r < (c + 1) * ROWS_PER_CHUNK && r < rows; r++) {
            for (int64_t i = 0; i < ne0; i++) {
                double u1 = uniform(&s), u2 = uniform(&s);
                x[i] = j->mean + j->sd * (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
            }
            quantize_row(j->t->type, x, j->out + (size_t)r * row_bytes, ne0);
        }
    }
    free(x);
    return NULL;
}

static int make_tensor(const struct options *o, const struct weight *t, uint64_t index, uint8_t *out)
{
    bool is_norm = strstr(t->name, "norm") != NULL, is_bias = strstr(t->name, ".bias") != NULL;
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    struct job j = { .t = t, .out = out, .mean = is_norm ? 1.0f : 0.0f, .sd = is_bias || !is_norm ? 0.02f : 0.1f,
                     .seed = mix(o->seed * 0x9e3779b97f4a7c15ull + index), .n_chunks = (rows + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK };
    pthread_mutex_init(&j.lock, NULL);
    int n = o->threads < j.n_chunks ? o->threads : (int)j.n_chunks;
    pthread_t th[256];
    int started = 0;
    for (; started < n - 1; started++)
        if (pthread_create(&th[started], NULL, worker, &j) != 0)
            break;
    worker(&j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&j.lock);
    return 0;
}

struct planned {
    struct weight t;
    char name[GGUF_MAX_TENSOR_NAME + 1];
};

static int plan_tensors(const struct arch_def *a, const void *hp, const struct options *o, bool tied,
                        struct planned **out, int *count, struct error *e)
{
    int64_t n_layer = a->n_layer(hp);
    int per_layer = 0;
    for (int i = 0; i < a->n_tensors; i++)
        per_layer += a->tensors[i].per_layer;
    struct planned *p = calloc((size_t)(a->n_tensors + per_layer * n_layer), sizeof *p);
    if (!p)
        return fail(e, "out of memory");
    int n = 0;
    for (int64_t il = -1; il < n_layer; il++) {
        for (int i = 0; i < a->n_tensors; i++) {
            const struct tensor_spec *s = &a->tensors[i];
            if (s->per_layer != (il >= 0) || (s->fallback >= 0 && tied))
                continue;
            struct planned *t = &p[n++];
            if (s->per_layer)
                snprintf(t->name, sizeof t->name, s->pattern, (int)il);
            else
                snprintf(t->name, sizeof t->name, "%s", s->pattern);
            t->t.name = t->name;
            t->t.n_dims = s->n_dims;
            a->tensor_shape(hp, i, t->t.ne);
            struct tensor_desc d = { t->name, (uint32_t)s->n_dims, (const uint64_t *)t->t.ne, (int)il, (int)n_layer, !tied };
            t->t.type = recipe_type(o->recipe, &d, false);
        }
    }
    *out = p;
    *count = n;
    return 0;
}

static int write_model(const struct arch_def *a, const struct options *o, struct gguf_writer *w, void *hp, bool tied,
                       struct error *e)
{
    struct planned *p = NULL;
    int n = 0;
    if (plan_tensors(a, hp, o, tied, &p, &n, e))
        return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = gguf_add_tensor(w, p[i].name, p[i].t.type, (uint32_t)p[i].t.n_dims, (const uint64_t *)p[i].t.ne, NULL, e);
    rc = rc || gguf_write_begin(w, o->out, e);
    bool tty = isatty(2);
    uint64_t total = 0;
    for (int i = 0; i < n && !rc; i++) {
        size_t bytes = type_bytes(p[i].t.type, (uint64_t)(p[i].t.ne[0] * p[i].t.ne[1] * p[i].t.ne[2] * p[i].t.ne[3]));
        uint8_t *buf = malloc(bytes ? bytes : 1);
        if (!buf)
            rc = fail(e, "out of memory for tensor '%s' (%zu bytes)", p[i].name, bytes);
        if (tty)
            fprintf(stderr, "\r[%4d/%4d] %-40s %-5s", i + 1, n, p[i].name, type_name(p[i].t.type));
        rc = rc || make_tensor(o, &p[i].t, (uint64_t)i, buf) || gguf_write_data(w, buf, bytes, e);
        total += bytes;
        free(buf);
    }
    rc = rc || gguf_write_end(w, e);
    if (tty)
        fputc('\n', stderr);
    if (!rc)
        fprintf(stderr, "synth: %s: %d tensors, %.2f MiB, %s\n", o->out, n, (double)total / 1048576.0, o->recipe->name);
    free(p);
    return rc ? -1 : 0;
}

static int run(const struct options *o, struct error *e)
{
    const struct preset *pr = o->preset ? preset_find(o->preset) : NULL;
    if (o->preset && !pr)
        return fail(e, "unknown preset '%s' (known: %s)", o->preset, preset_names());
    const char *arch_name = o->arch ? o->arch : pr->arch;
    const struct arch_def *a = arch_find(arch_name, strlen(arch_name));
    if (!a)
        return fail(e, "architecture '%s' is not compiled into this binary", arch_name);
    if (pr && strcmp(pr->arch, a->name) != 0 && strcmp(pr->arch, a->gguf_name) != 0)
        return fail(e, "preset %s is a %s model, not %s", pr->name, pr->arch, a->name);
    if (a->n_hparams > MAX_HP)
        return fail(e, "%s has too many hyperparameters", a->name);
    struct values vals = { 0 };
    for (int k = 0; pr && k < pr->n; k++)
        if (set_value(a, &vals, pr->v[k].name, pr->v[k].value, e))
            return fail_prefix(e, "preset %s", pr->name);
    if (o->hparams && parse_hparams(a, o->hparams, &vals, e))
        return -1;
    bool tied = o->tied >= 0 ? o->tied : pr ? pr->tied : false;
    struct gguf_writer *w = gguf_writer_new();
    void *hp = calloc(1, a->hparams_size);
    int rc = !w || !hp ? fail(e, "out of memory") : 0;
    rc = rc || set_metadata(a, &vals, o, w, e) || read_back(a, w, o->out, hp, e) ||
         complete_metadata(a, &vals, hp, w, e) || write_model(a, o, w, hp, tied, e);
    gguf_writer_free(w);
    free(hp);
    return rc ? -1 : 0;
}

int cmd_synth(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o))
        return 1;
    struct error e;
    if (run(&o, &e))
        return die("synth: %s", e.msg);
    return 0;
}
