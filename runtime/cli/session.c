/* session.c: common flags, model opening and generation (see session.h). */
#include "cli/session.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

double session_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A range bound as people write it: 4194304, not 4.1943e+06. */
static const char *bound(double x, char *buf, size_t n)
{
    snprintf(buf, n, x == (double)(int64_t)x && fabs(x) < 1e15 ? "%.0f" : "%g", x);
    return buf;
}

/* A count (whole) or a real number in [lo, hi]; a fraction for a count is
 * an error, not truncated. */
static int number(const char *cmd, const char *flag, const char *v, double lo, double hi, bool real, double *out)
{
    char *end, a[32], b[32];
    double x = v ? strtod(v, &end) : 0;
    if (!v || *end || end == v || x < lo || x > hi || (!real && x != floor(x)))
        return die("%s: %s wants a %s in [%s, %s], got '%s'", cmd, flag, real ? "number" : "whole number",
                   bound(lo, a, sizeof a), bound(hi, b, sizeof b), v ? v : "nothing");
    *out = x;
    return 0;
}

/* The flags that take a number: where each goes, its range, who takes it. */
enum flag_use { ALL, BENCH, NOT_BENCH, PERPLEXITY, SERVE, RUN_CHAT };

struct number_flag {
    const char *name, *alias;
    double lo, hi;
    enum flag_use use;
    bool real;          /* takes fractions; the others are counts */
};

static const struct number_flag number_flags[] = {
    { "-c", "--ctx-size", 1, 1 << 22, ALL, false },   { "-b", "--batch-size", 1, 1 << 16, ALL, false },
    { "-t", "--threads", 1, 64, ALL, false },         { "-n", NULL, -1, 1 << 24, ALL, false },
    { "-p", NULL, 0, 1 << 20, BENCH, false },         { "-r", NULL, 1, 1000, BENCH, false },
    { "-d", "--depth", 0, 1 << 22, BENCH, false },
    { "--keep", NULL, 0, 1 << 22, RUN_CHAT, false }, { "--temp", NULL, 0, 100, NOT_BENCH, true },
    { "--top-k", NULL, 0, 1 << 24, NOT_BENCH, false }, { "--top-p", NULL, 0, 1, NOT_BENCH, true },
    { "--min-p", NULL, 0, 1, NOT_BENCH, true },      { "--repeat-penalty", NULL, 0.01, 100, NOT_BENCH, true },
    { "--repeat-last-n", NULL, 0, 1 << 16, NOT_BENCH, false }, { "--seed", NULL, 0, 1e18, NOT_BENCH, false },
    { "--chunks", NULL, 1, 1 << 24, PERPLEXITY, false },
    { "--port", NULL, 0, 65535, SERVE, false },       { "--parallel", "-np", 1, 64, SERVE, false },
    { "--queue", NULL, 0, 4096, SERVE, false },
};

static void set_number(struct session_options *o, const char *name, double x, bool bench)
{
    if (strcmp(name, "-c") == 0)
        o->engine.n_ctx = (int64_t)x;
    else if (strcmp(name, "-b") == 0)
        o->engine.n_batch = (int64_t)x;
    else if (strcmp(name, "-t") == 0)
        o->engine.n_threads = (int)x;
    else if (strcmp(name, "-n") == 0 && bench)
        o->bench_tg = (int64_t)x;
    else if (strcmp(name, "-n") == 0)
        o->n_predict = (int64_t)x;
    else if (strcmp(name, "-p") == 0)
        o->bench_pp = (int64_t)x;
    else if (strcmp(name, "-r") == 0)
        o->bench_reps = (int64_t)x;
    else if (strcmp(name, "-d") == 0)
        o->bench_depth = (int64_t)x;
    else if (strcmp(name, "--keep") == 0)
        o->n_keep = (int64_t)x;
    else if (strcmp(name, "--temp") == 0)
        o->sampling.temp = (float)x;
    else if (strcmp(name, "--top-k") == 0)
        o->sampling.top_k = (int)x;
    else if (strcmp(name, "--top-p") == 0)
        o->sampling.top_p = (float)x;
    else if (strcmp(name, "--min-p") == 0)
        o->sampling.min_p = (float)x;
    else if (strcmp(name, "--repeat-penalty") == 0)
        o->sampling.repeat_penalty = (float)x;
    else if (strcmp(name, "--repeat-last-n") == 0)
        o->sampling.repeat_last_n = (int)x;
    else if (strcmp(name, "--seed") == 0)
        o->sampling.seed = (uint64_t)x;
    else if (strcmp(name, "--chunks") == 0)
        o->n_chunks = (int64_t)x;
    else if (strcmp(name, "--port") == 0)
        o->port = (int)x;
    else if (strcmp(name, "--parallel") == 0)
        o->parallel = (int)x;
    else if (strcmp(name, "--queue") == 0)
        o->queue = (int)x;
}

/* A flag with a text value: 0 when taken, -1 after saying what is wrong,
 * 1 when a is not one of them. */
static int text_flag(const char *cmd, const char *a, const char *v, struct session_options *o)
{
    bool bench = strcmp(cmd, "bench") == 0, serve = strcmp(cmd, "serve") == 0;
    bool chat = strcmp(cmd, "chat") == 0 || serve;
    const char **to = NULL, *what = "text";
    if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0)
        to = &o->model, what = "a file";
    else if ((strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) && !bench && !serve)
        to = &o->prompt;
    else if ((strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) && !bench && !serve)
        to = &o->prompt_file, what = "a file";
    else if (strcmp(a, "--host") == 0 && serve)
        to = &o->host, what = "an IPv4 address";
    else if (strcmp(a, "--api-key") == 0 && serve)
        to = &o->api_key, what = "a key";
    else if (strcmp(a, "--system") == 0 && strcmp(cmd, "chat") == 0)
        to = &o->system;
    else if (strcmp(a, "--chat-template") == 0 && chat)
        to = &o->chat_template, what = "chatml, llama3 or gemma";
    else if (strcmp(a, "--logits-out") == 0 && !bench && !serve)
        to = &o->logits_out, what = "a file";
    else if (strcmp(a, "--device") == 0)
        to = &o->engine.device, what = "cpu, cpu-fast, cuda or auto";
    else
        return 1;
    if (!v) {
        die("%s: %s needs %s", cmd, a, what);
        return -1;
    }
    *to = v;
    return 0;
}

int session_parse(const char *cmd, int argc, char **argv, struct session_options *o)
{
    memset(o, 0, sizeof *o);
    o->command = cmd;
    o->n_predict = -1;
    o->engine.kv_type = KV_F16;
    o->sampling = sampler_defaults();
    o->bench_pp = 512;
    o->bench_tg = 128;
    o->bench_reps = 5;
    o->n_chunks = -1;
    o->host = "127.0.0.1", o->port = 8080, o->parallel = 1, o->queue = 16;
    bool bench = strcmp(cmd, "bench") == 0, ppl = strcmp(cmd, "perplexity") == 0, serve = strcmp(cmd, "serve") == 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = text_flag(cmd, a, v, o);
        if (rc <= 0) {
            if (rc < 0)
                return -1;
            i++;
            continue;
        }
        const struct number_flag *f = NULL;
        for (size_t k = 0; k < sizeof number_flags / sizeof number_flags[0] && !f; k++) {
            const struct number_flag *c = &number_flags[k];
            bool named = strcmp(a, c->name) == 0 || (c->alias && strcmp(a, c->alias) == 0);
            bool taken = c->use == ALL || (c->use == BENCH && bench) || (c->use == NOT_BENCH && !bench && !ppl) ||
                         (c->use == PERPLEXITY && ppl) || (c->use == SERVE && serve) ||
                         (c->use == RUN_CHAT && !bench && !ppl && !serve);
            if (named && taken)
                f = c;
        }
        double x = 0;
        if (f) {
            /* bench counts tokens from 0; -n elsewhere allows -1, "until the end" */
            double lo = bench && strcmp(f->name, "-n") == 0 ? 0 : f->lo;
            if (number(cmd, a, v, lo, f->hi, f->real, &x))
                return -1;
            set_number(o, f->name, x, bench);
            i++;
        } else if (strcmp(a, "--cache-type") == 0 || strcmp(a, "-ctk") == 0) {
            if (!v || kv_type_from_name(v, &o->engine.kv_type))
                return die("%s: --cache-type wants f32, f16 or q8_0, got '%s'", cmd, v ? v : "nothing");
            i++;
        } else if (strcmp(a, "--context-shift") == 0 && !bench && !ppl && !serve) {
            o->context_shift = true;
        } else if (strcmp(a, "--no-graphs") == 0) {
            o->engine.no_graphs = true;
        } else if (strcmp(a, "--json") == 0 && bench) {
            o->json = true;
        } else {
            return die("%s: unknown option '%s' (try minfer %s --help)", cmd, a, cmd);
        }
    }
    if (!o->model)
        return die("%s: -m FILE is required", cmd);
    return 0;
}

int read_text_file(const char *path, char **out, struct error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(e, "%s: cannot open: %s", path, strerror(errno));
    char *text = NULL;
    size_t n = 0, got;
    char buf[65536];
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        char *p = realloc(text, n + got + 1);
        if (!p) {
            free(text);
            fclose(f);
            return fail(e, "%s: out of memory after %zu bytes", path, n);
        }
        text = p;
        memcpy(text + n, buf, got);
        n += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return fail(e, "%s: read error", path);
    }
    *out = text ? text : calloc(1, 1);
    if (!*out)
        return fail(e, "out of memory");
    (*out)[n] = 0;
    return 0;
}

/* Reads every weight byte once, with a progress bar, so the first token
 * does not pay for page faults (only when stderr is a terminal). */
static void prefetch(const struct model *m)
{
    if (!isatty(2))
        return;
    size_t total = 0, done = 0, step = 0;
    for (int i = 0; i < m->n_w; i++)
        total += type_bytes(m->w[i].type, (uint64_t)(m->w[i].ne[0] * m->w[i].ne[1] * m->w[i].ne[2] * m->w[i].ne[3]));
    volatile uint8_t sink = 0;
    for (int i = 0; i < m->n_w; i++) {
        const struct weight *w = &m->w[i];
        size_t n = type_bytes(w->type, (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]));
        for (size_t k = 0; k < n; k += 4096)
            sink ^= ((const uint8_t *)w->data)[k];
        done += n;
        if (done * 40 / (total ? total : 1) != step || i == m->n_w - 1) {
            step = done * 40 / (total ? total : 1);
            fprintf(stderr, "\rloading [%-40.*s] %3d%%", (int)step, "========================================",
                    (int)(done * 100 / (total ? total : 1)));
        }
    }
    fprintf(stderr, "\n");
    (void)sink;
}

int session_open(struct session *s, const struct session_options *o, struct error *e)
{
    memset(s, 0, sizeof *s);
    if (model_open(&s->model, o->model, e))
        return -1;
    if (tokenizer_load(&s->tok, &s->model.gguf, e)) {
        model_close(&s->model);
        return fail_prefix(e, "%s", o->model);
    }
    prefetch(&s->model);
    if (engine_init(&s->engine, &s->model, &o->engine, e)) {
        tokenizer_free(&s->tok);
        model_close(&s->model);
        return -1;
    }
    if (sampler_init(&s->sampler, &o->sampling, s->engine.n_vocab)) {
        session_close(s);
        return fail(e, "out of memory for the sampler");
    }

    if (s->engine.n_ctx_train > s->engine.cfg.n_ctx)
        fprintf(stderr, "%s: context %lld (the model's %lld would need a KV cache over a quarter of this machine's "
                        "memory; -c sets it)\n", o->command, (long long)s->engine.cfg.n_ctx,
                (long long)s->engine.n_ctx_train);
    tokenizer_end_ids(&s->tok, s->stop);
    return 0;
}

void session_announce(const struct session *s, const struct session_options *o)
{
    char device[160];
    engine_describe(&s->engine, device, sizeof device);
    if (s->engine.note[0])
        fprintf(stderr, "%s: %s\n", o->command, s->engine.note);
    fprintf(stderr, "%s: backend %s%s\n", o->command, device,
            o->engine.device && strcmp(o->engine.device, "auto") != 0 ? "" : ", chosen by --device auto");
}

void session_close(struct session *s)
{
    sampler_free(&s->sampler);
    engine_free(&s->engine);
    tokenizer_free(&s->tok);
    model_close(&s->model);
    free(s->history);
    memset(s, 0, sizeof *s);
}

static int remember(struct session *s, const int32_t *ids, size_t n, struct error *e)
{
    return tokens_append(&s->history, &s->n_history, &s->cap_history, ids, n, e);
}

/* On overflow with --context-shift: keep the first n_keep tokens and the
 * newest half of the rest, and process them again (the cache holds rotated
 * keys, so moving them would need re-rotation; re-processing is simpler and
 * exact). */
static int shift(struct session *s, const struct session_options *o, size_t incoming, struct error *e)
{
    int64_t n_ctx = s->engine.cfg.n_ctx;
    if ((int64_t)(s->n_history + incoming) <= n_ctx)
        return 0;
    if (!o->context_shift)
        return fail(e, "context overflow: %zu tokens in context plus %zu new exceed -c %lld (use a larger -c, or "
                       "--context-shift)", s->n_history, incoming, (long long)n_ctx);
    size_t keep = (size_t)o->n_keep < s->n_history ? (size_t)o->n_keep : s->n_history;
    size_t rest = s->n_history - keep, kept_rest = rest / 2;
    if ((int64_t)(keep + kept_rest + incoming) > n_ctx)
        return fail(e, "context overflow even after a shift: %zu kept plus %zu new exceed -c %lld", keep + kept_rest,
                    incoming, (long long)n_ctx);
    memmove(s->history + keep, s->history + keep + (rest - kept_rest), kept_rest * sizeof *s->history);
    s->n_history = keep + kept_rest;
    engine_truncate(&s->engine, 0);
    return engine_eval(&s->engine, s->history, (int64_t)s->n_history, e);
}

static int append(struct session *s, const struct session_options *o, const int32_t *ids, size_t n, struct error *e)
{
    if (shift(s, o, n, e) || engine_eval(&s->engine, ids, (int64_t)n, e) || remember(s, ids, n, e))
        return -1;
    for (size_t i = 0; i < n; i++)
        sampler_accept(&s->sampler, ids[i]);
    return 0;
}

int session_feed(struct session *s, const struct session_options *o, const char *text, struct error *e)
{
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (s->n_history == 0 && s->tok.add_bos) /* a text starts with BOS where the vocabulary asks for it */
        rc = tokenizer_push_bos(&s->tok, &ids, &n, &cap, e);
    if (!rc)
        rc = tokenizer_encode(&s->tok, text, strlen(text), true, &ids, &n, &cap, e);
    if (!rc && n == 0)
        rc = fail(e, "the prompt is empty");
    if (!rc)
        rc = append(s, o, ids, n, e);
    free(ids);
    return rc;
}

/* Whether the next token can be the argmax fed on the device
 * (engine_eval_next): a greedy sampler and room for it without a shift. */
static bool greedy_ahead(const struct session *s)
{
    return sampler_is_greedy(&s->sampler) && (int64_t)s->n_history < s->engine.cfg.n_ctx;
}

/* append for the greedy choice, which the engine evaluates as it finds it. */
static int append_next(struct session *s, int32_t *id, struct error *e)
{
    if (engine_eval_next(&s->engine, id, e) || remember(s, id, 1, e))
        return -1;
    sampler_accept(&s->sampler, *id);
    return 0;
}

static bool is_stop(const struct session *s, int32_t id)
{
    for (int k = 0; k < TOKENIZER_END_IDS; k++)
        if (id >= 0 && id == s->stop[k])
            return true;
    return false;
}

int session_generate(struct session *s, const struct session_options *o, int64_t n, FILE *out, int64_t *n_out,
                     struct error *e)
{
    struct detokenizer d = { .n_pending = 0 };
    char text[1024];
    *n_out = 0;
    for (int64_t i = 0; n < 0 || i < n; i++) {
        int32_t id;
        if (greedy_ahead(s) ? append_next(s, &id, e) : engine_sample(&s->engine, &s->sampler, &id, e) || append(s, o, &id, 1, e))
            return -1;
        ++*n_out;
        if (is_stop(s, id))
            break;
        size_t len = detokenize_push(&d, &s->tok, id, text, sizeof text);
        fwrite(text, 1, len, out);
        fflush(out);
        if ((n < 0 || i + 1 < n) && (int64_t)s->n_history >= s->engine.cfg.n_ctx && !o->context_shift) {
            fprintf(stderr, "\n%s: stopped at the context size (-c %lld); --context-shift goes on\n",
                    o->command ? o->command : "minfer", (long long)s->engine.cfg.n_ctx);
            break;
        }
    }
    size_t len = detokenize_flush(&d, text, sizeof text);
    fwrite(text, 1, len, out);
    fflush(out);
    return 0;
}
