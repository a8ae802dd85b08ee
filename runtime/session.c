/* session.c: common flags, model opening and generation (see session.h). */
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

double session_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int number(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = v ? strtod(v, &end) : 0;
    if (!v || *end || end == v || x < lo || x > hi)
        return die("%s: %s wants a number in [%g, %g], got '%s'", cmd, flag, lo, hi, v ? v : "nothing");
    *out = x;
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
    bool bench = strcmp(cmd, "bench") == 0, chat = strcmp(cmd, "chat") == 0, ppl = strcmp(cmd, "perplexity") == 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        int rc = 0;
        if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0)
            o->model = v, i++, rc = v ? 0 : die("%s: %s needs a file", cmd, a);
        else if ((strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) && !bench)
            o->prompt = v, i++, rc = v ? 0 : die("%s: %s needs text", cmd, a);
        else if ((strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) && !bench)
            o->prompt_file = v, i++, rc = v ? 0 : die("%s: %s needs a file", cmd, a);
        else if (strcmp(a, "--chat-template") == 0 && chat)
            o->chat_template = v, i++, rc = v ? 0 : die("%s: %s needs chatml or llama3", cmd, a);
        else if (strcmp(a, "--chunks") == 0 && ppl)
            rc = number(cmd, a, v, 1, 1 << 24, &x), o->n_chunks = (int64_t)x, i++;
        else if (strcmp(a, "--system") == 0 && chat)
            o->system = v, i++, rc = v ? 0 : die("%s: %s needs text", cmd, a);
        else if (strcmp(a, "-p") == 0 && bench)
            rc = number(cmd, a, v, 0, 1 << 20, &x), o->bench_pp = (int64_t)x, i++;
        else if (strcmp(a, "-n") == 0)
            rc = number(cmd, a, v, bench ? 0 : -1, 1 << 24, &x), o->n_predict = (int64_t)x, o->bench_tg = (int64_t)x, i++;
        else if (strcmp(a, "-r") == 0 && bench)
            rc = number(cmd, a, v, 1, 1000, &x), o->bench_reps = (int64_t)x, i++;
        else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx-size") == 0)
            rc = number(cmd, a, v, 1, 1 << 22, &x), o->engine.n_ctx = (int64_t)x, i++;
        else if (strcmp(a, "-b") == 0 || strcmp(a, "--batch-size") == 0)
            rc = number(cmd, a, v, 1, 1 << 16, &x), o->engine.n_batch = (int64_t)x, i++;
        else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0)
            rc = number(cmd, a, v, 1, 64, &x), o->engine.n_threads = (int)x, i++;
        else if (strcmp(a, "--keep") == 0)
            rc = number(cmd, a, v, 0, 1 << 22, &x), o->n_keep = (int64_t)x, i++;
        else if (strcmp(a, "--temp") == 0)
            rc = number(cmd, a, v, 0, 100, &x), o->sampling.temp = (float)x, i++;
        else if (strcmp(a, "--top-k") == 0)
            rc = number(cmd, a, v, 0, 1 << 24, &x), o->sampling.top_k = (int)x, i++;
        else if (strcmp(a, "--top-p") == 0)
            rc = number(cmd, a, v, 0, 1, &x), o->sampling.top_p = (float)x, i++;
        else if (strcmp(a, "--min-p") == 0)
            rc = number(cmd, a, v, 0, 1, &x), o->sampling.min_p = (float)x, i++;
        else if (strcmp(a, "--repeat-penalty") == 0)
            rc = number(cmd, a, v, 0.01, 100, &x), o->sampling.repeat_penalty = (float)x, i++;
        else if (strcmp(a, "--repeat-last-n") == 0)
            rc = number(cmd, a, v, 0, 1 << 16, &x), o->sampling.repeat_last_n = (int)x, i++;
        else if (strcmp(a, "--seed") == 0)
            rc = number(cmd, a, v, 0, 1e18, &x), o->sampling.seed = (uint64_t)x, i++;
        else if (strcmp(a, "--cache-type") == 0 || strcmp(a, "-ctk") == 0) {
            if (!v || kv_type_from_name(v, &o->engine.kv_type))
                rc = die("%s: --cache-type wants f32, f16 or q8_0, got '%s'", cmd, v ? v : "nothing");
            i++;
        } else if (strcmp(a, "--logits-out") == 0 && !bench)
            o->logits_out = v, i++, rc = v ? 0 : die("%s: %s needs a file", cmd, a);
        else if (strcmp(a, "--context-shift") == 0)
            o->context_shift = true;
        else if (strcmp(a, "--json") == 0 && bench)
            o->json = true;
        else
            rc = die("%s: unknown option '%s' (try minfer %s --help)", cmd, a, cmd);
        if (rc)
            return -1;
    }
    if (!o->model)
        return die("%s: -m FILE is required", cmd);
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
    if (engine_init(&s->engine, &s->model, &o->engine, e) ||
        sampler_init(&s->sampler, &o->sampling, s->engine.n_vocab)) {
        tokenizer_free(&s->tok);
        model_close(&s->model);
        return e->msg[0] ? -1 : fail(e, "out of memory for the sampler");
    }
    if (s->engine.n_ctx_train > s->engine.cfg.n_ctx)
        fprintf(stderr, "%s: context %lld (the model's %lld would need a KV cache over a quarter of this machine's "
                        "memory; -c sets it)\n", o->command, (long long)s->engine.cfg.n_ctx,
                (long long)s->engine.n_ctx_train);
    s->stop[0] = s->tok.eos;
    s->stop[1] = tokenizer_find(&s->tok, "<|im_end|>", 10);
    s->stop[2] = tokenizer_find(&s->tok, "<|endoftext|>", 13);
    s->stop[3] = tokenizer_find(&s->tok, "<|eot_id|>", 10);
    return 0;
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
    if (s->n_history + n > s->cap_history) {
        size_t cap = (s->n_history + n) * 2;
        int32_t *p = realloc(s->history, cap * sizeof *p);
        if (!p)
            return fail(e, "out of memory");
        s->history = p;
        s->cap_history = cap;
    }
    memcpy(s->history + s->n_history, ids, n * sizeof *ids);
    s->n_history += n;
    return 0;
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

static bool is_stop(const struct session *s, int32_t id)
{
    for (int k = 0; k < 4; k++)
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
        int32_t id = sampler_sample(&s->sampler, s->engine.logits);
        if (append(s, o, &id, 1, e))
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
