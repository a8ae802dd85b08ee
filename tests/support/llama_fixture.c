/* llama_fixture.c: reading a real model's reference records and the
 * teacher-forced comparison against them (llama_fixture.h). */
#include "llama_fixture.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static int bad(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *msg, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* One "prompt NAME LEN N" record: the text, the tokens, then at each
 * position the log-sum-exp and the best 20 (id, logit). */
static int read_prompt(FILE *in, struct fixture_prompt *p, const char *path, char *msg, size_t n)
{
    int len, positions;
    if (fscanf(in, "%31s %d %d", p->name, &len, &positions) != 3 || len < 0 || positions != FIXTURE_POSITIONS ||
        fgetc(in) != '\n')
        return bad(msg, n, "%s: a prompt record's header (want %d positions)", path, FIXTURE_POSITIONS);
    p->text = calloc((size_t)len + 1, 1);
    if (!p->text || fread(p->text, 1, (size_t)len, in) != (size_t)len)
        return bad(msg, n, "%s: prompt %s's text of %d bytes", path, p->name, len);
    for (int i = 0; i < FIXTURE_POSITIONS; i++)
        if (fscanf(in, "%d", &p->ids[i]) != 1)
            return bad(msg, n, "%s: prompt %s's token %d", path, p->name, i);
    for (int i = 0; i < FIXTURE_POSITIONS; i++) {
        if (fscanf(in, "%f", &p->lse[i]) != 1)
            return bad(msg, n, "%s: prompt %s's log-sum-exp at %d", path, p->name, i);
        for (int k = 0; k < FIXTURE_TOP; k++)
            if (fscanf(in, "%d %f", &p->top[i][k].id, &p->top[i][k].logit) != 2)
                return bad(msg, n, "%s: prompt %s's top %d at %d", path, p->name, k, i);
    }
    return 0;
}

static int read_greedy(FILE *in, struct fixture *f, const char *path, char *msg, size_t n)
{
    if (fscanf(in, "%d", &f->n_greedy_prompt) != 1 || f->n_greedy_prompt < 0 || f->n_greedy_prompt > 512)
        return bad(msg, n, "%s: the greedy record's prompt length", path);
    for (int i = 0; i < f->n_greedy_prompt; i++)
        if (fscanf(in, "%d", &f->greedy_prompt[i]) != 1)
            return bad(msg, n, "%s: the greedy prompt's token %d", path, i);
    if (fscanf(in, "%d", &f->n_greedy) != 1 || f->n_greedy < 0 || f->n_greedy > 64)
        return bad(msg, n, "%s: the greedy record's length", path);
    for (int i = 0; i < f->n_greedy; i++)
        if (fscanf(in, "%d", &f->greedy[i]) != 1)
            return bad(msg, n, "%s: greedy token %d", path, i);
    return 0;
}

static int read_records(FILE *in, struct fixture *f, const char *path, char *msg, size_t n)
{
    char line[512], kv[8] = "f16", word[32];
    if (!fgets(line, sizeof line, in) || sscanf(line, "model %255s %lld %*s kv %7s", f->model, &f->bytes, kv) < 2)
        return bad(msg, n, "%s: the model line", path);
    if (strcmp(kv, "f16") != 0 && strcmp(kv, "f32") != 0)
        return bad(msg, n, "%s: KV cache type %s", path, kv);
    f->kv = strcmp(kv, "f32") == 0 ? KV_F32 : KV_F16;
    while (fscanf(in, "%31s", word) == 1) {
        if (strcmp(word, "prompt") == 0) {
            if (f->n_prompts == FIXTURE_PROMPTS)
                return bad(msg, n, "%s: more than %d prompts", path, FIXTURE_PROMPTS);
            if (read_prompt(in, &f->p[f->n_prompts++], path, msg, n))
                return -1;
        } else if (strcmp(word, "greedy") == 0) {
            if (read_greedy(in, f, path, msg, n))
                return -1;
        } else if (strcmp(word, "perplexity") == 0) {
            if (fscanf(in, "%*s %d %d %lf %lf", &f->ppl_ctx, &f->ppl_windows, &f->ppl, &f->ppl_err) != 4 ||
                f->ppl_windows < 1 || f->ppl_windows > FIXTURE_WINDOWS)
                return bad(msg, n, "%s: the perplexity record", path);
            for (int w = 0; w < f->ppl_windows; w++)
                if (fscanf(in, "%lf", &f->ppl_running[w]) != 1)
                    return bad(msg, n, "%s: the perplexity after window %d", path, w + 1);
            if (f->ppl_running[f->ppl_windows - 1] != f->ppl)
                return bad(msg, n, "%s: the last window's perplexity is not the record's", path);
        } else {
            return bad(msg, n, "%s: unknown record '%s'", path, word);
        }
    }
    if (f->n_prompts != FIXTURE_PROMPTS)
        return bad(msg, n, "%s: %d prompts, want %d", path, f->n_prompts, FIXTURE_PROMPTS);
    return 0;
}

int fixture_read(const char *path, struct fixture *f, char *msg, size_t msg_size)
{
    memset(f, 0, sizeof *f);
    FILE *in = fopen(path, "rb");
    if (!in)
        return bad(msg, msg_size, "%s: cannot open", path);
    const int rc = read_records(in, f, path, msg, msg_size);
    fclose(in);
    if (rc)
        fixture_free(f);
    return rc;
}

void fixture_free(struct fixture *f)
{
    for (int k = 0; k < FIXTURE_PROMPTS; k++) {
        free(f->p[k].text);
        f->p[k].text = NULL;
    }
}

static double log_sum_exp(const float *x, int64_t n)
{
    float max = x[0];
    for (int64_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp((double)(x[i] - max));
    return max + log(s);
}

/* One text's positions, teacher-forced, into out. */
static void compare_prompt(const float *logits, int64_t nv, const struct fixture_prompt *p, int k, double margin,
                           struct fixture_agreement *out)
{
    for (int i = 0; i < FIXTURE_POSITIONS; i++) {
        const float *row = logits + (size_t)i * (size_t)nv;
        const int32_t best = argmax(row, nv);
        const double lead = p->top[i][0].logit - p->top[i][1].logit;
        out->prompt_agree[k] += best == p->top[i][0].id;
        if (best != p->top[i][0].id && lead >= margin && out->beyond_margin++ == 0)
            snprintf(out->first_beyond, sizeof out->first_beyond,
                     "%s position %d: argmax %d, the reference's %d leads its second by %.3f", p->name, i, best,
                     p->top[i][0].id, lead);
        const double lse = log_sum_exp(row, nv);
        double kl = 0;
        for (int t = 0; t < FIXTURE_TOP; t++) {
            const double lp = p->top[i][t].logit - p->lse[i], lq = row[p->top[i][t].id] - lse;
            kl += exp(lp) * (lp - lq);
        }
        out->prompt_kl[k] += kl / FIXTURE_POSITIONS;
        out->kl_max = fmax(out->kl_max, kl);
    }
}

int fixture_teacher_forced(struct engine *en, const struct fixture *f, double margin, struct fixture_agreement *out,
                           struct error *e)
{
    memset(out, 0, sizeof *out);
    const int64_t nv = en->n_vocab;
    float *logits = malloc((size_t)(FIXTURE_POSITIONS * nv) * sizeof *logits);
    if (!logits)
        return fail(e, "teacher forcing: out of memory for %d x %lld logits", FIXTURE_POSITIONS, (long long)nv);
    double kl_sum = 0;
    for (int k = 0; k < f->n_prompts; k++) {
        engine_truncate(en, 0);
        if (engine_eval_logits(en, f->p[k].ids, FIXTURE_POSITIONS, logits, e)) {
            free(logits);
            return -1;
        }
        compare_prompt(logits, nv, &f->p[k], k, margin, out);
        out->agree += out->prompt_agree[k];
        out->total += FIXTURE_POSITIONS;
        kl_sum += out->prompt_kl[k];
    }
    out->kl_mean = kl_sum / f->n_prompts;
    free(logits);
    return 0;
}
