/* slots.c: the server's engines and their queue, and generation on a slot
 * (see slots.h). */
#include "server/slots.h"

#include <stdlib.h>
#include <string.h>

#include "cli/session.h" /* session_now */

int slot_pool_init(struct slot_pool *p, const struct model *m, const struct engine_config *cfg, int n, int queue_max,
                   struct error *e)
{
    memset(p, 0, sizeof *p);
    p->slot = calloc((size_t)n, sizeof *p->slot);
    if (!p->slot)
        return fail(e, "out of memory for %d slots", n);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->queue_max = queue_max;
    for (; p->n < n; p->n++)
        if (engine_init(&p->slot[p->n].engine, m, cfg, e)) {
            slot_pool_free(p);
            return fail_prefix(e, "slot %d", p->n);
        }
    return 0;
}

void slot_pool_free(struct slot_pool *p)
{
    for (int i = 0; i < p->n; i++) {
        engine_free(&p->slot[i].engine);
        free(p->slot[i].history);
    }
    free(p->slot);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->freed);
    memset(p, 0, sizeof *p);
}

static size_t common_prefix(const struct slot *s, const int32_t *tokens, size_t n)
{
    size_t k = 0;
    while (k < n && k < s->n_history && s->history[k] == tokens[k])
        k++;
    return k;
}

/* The free slot with the longest shared prefix (the first on ties), or NULL. */
static struct slot *best_free(struct slot_pool *p, const int32_t *tokens, size_t n)
{
    struct slot *best = NULL;
    size_t best_k = 0;
    for (int i = 0; i < p->n; i++) {
        struct slot *s = &p->slot[i];
        if (s->busy)
            continue;
        size_t k = common_prefix(s, tokens, n);
        if (!best || k > best_k)
            best = s, best_k = k;
    }
    return best;
}

struct slot *slot_acquire(struct slot_pool *p, const int32_t *tokens, size_t n)
{
    pthread_mutex_lock(&p->mu);
    struct slot *s = best_free(p, tokens, n);
    if (!s && p->waiting < p->queue_max) {
        p->waiting++;
        while (!(s = best_free(p, tokens, n)))
            pthread_cond_wait(&p->freed, &p->mu);
        p->waiting--;
    }
    if (s)
        s->busy = true;
    pthread_mutex_unlock(&p->mu);
    return s;
}

void slot_release(struct slot_pool *p, struct slot *s)
{
    pthread_mutex_lock(&p->mu);
    s->busy = false;
    pthread_cond_broadcast(&p->freed);
    pthread_mutex_unlock(&p->mu);
}

/* After a failed evaluation what the cache holds is no longer known: the
 * slot starts over (-1, for the caller's error). */
static int forget_cache(struct slot *s)
{
    s->n_history = 0;
    engine_truncate(&s->engine, 0);
    return -1;
}

static int remember(struct slot *s, const int32_t *ids, size_t n, struct error *e)
{
    return tokens_append(&s->history, &s->n_history, &s->cap_history, ids, n, e);
}

int generation_start(struct generation *g, struct slot *s, const struct tokenizer *tok, const int32_t *tokens, size_t n,
                     const struct sampler_params *sp, struct error *e)
{
    memset(g, 0, sizeof *g);
    g->slot = s, g->tok = tok, g->max_tokens = -1, g->t_start = session_now();
    tokenizer_end_ids(tok, g->stop_ids);
    if (sampler_init(&g->sampler, sp, s->engine.n_vocab))
        return fail(e, "out of memory for the sampler");
    /* keep what the cache shares with the prompt, but evaluate at least the
     * prompt's last token: its logits are the first choice's */
    size_t keep = common_prefix(s, tokens, n);
    keep = keep == n ? n - 1 : keep;
    engine_truncate(&s->engine, (int64_t)keep);
    s->n_history = keep;
    for (size_t i = 0; i < n; i++)
        sampler_accept(&g->sampler, tokens[i]);
    g->n_prompt = (int64_t)n, g->n_cached = (int64_t)keep;
    if (engine_eval(&s->engine, tokens + keep, (int64_t)(n - keep), e) || remember(s, tokens + keep, n - keep, e)) {
        return forget_cache(s);
    }
    g->t_prompt = session_now();
    return 0;
}

static int append_text(struct generation *g, const char *p, size_t n, struct error *e)
{
    if (g->n_text + n + 1 > g->cap_text) {
        size_t cap = (g->n_text + n + 1) * 2;
        char *t = realloc(g->text, cap);
        if (!t)
            return fail(e, "out of memory");
        g->text = t, g->cap_text = cap;
    }
    memcpy(g->text + g->n_text, p, n);
    g->n_text += n;
    g->text[g->n_text] = 0;
    return 0;
}

/* Cuts the text at the first stop string that the bytes from `from` on
 * complete; true when one did. */
static bool cut_at_stop(struct generation *g, size_t from)
{
    size_t at = g->n_text + 1;
    for (int k = 0; k < g->n_stop; k++) {
        size_t len = strlen(g->stop[k]);
        size_t start = from + 1 > len ? from + 1 - len : 0;
        for (size_t i = start; i + len <= g->n_text && i < at; i++)
            if (memcmp(g->text + i, g->stop[k], len) == 0) {
                at = i;
                break;
            }
    }
    if (at > g->n_text)
        return false;
    g->n_text = at;
    g->text[at] = 0;
    return true;
}

/* Ends the generation; the bytes the detokenizer still holds (a character
 * never finished) go out too, unless a stop string cut the text before them. */
static void finish(struct generation *g, const char *why, bool cut)
{
    char tail[16];
    size_t len = detokenize_flush(&g->d, tail, sizeof tail);
    struct error e;
    if (!cut)
        (void)append_text(g, tail, len, &e); /* out of memory for these few bytes: they are dropped */
    g->done = true, g->finish = why, g->t_end = session_now();
}

/* A generation's step; a greedy one with room for its token evaluates it
 * as the engine finds it (engine_eval_next: on a GPU the step runs while
 * the token's text is made here), and forgets it again where it ends the
 * generation instead (a stop, the token limit). */
int generation_step(struct generation *g, struct error *e)
{
    struct slot *s = g->slot;
    if (g->done)
        return 0;
    if (g->max_tokens >= 0 && g->n_made >= g->max_tokens) {
        finish(g, "length", false);
        return 0;
    }
    int32_t id;
    const bool ahead = sampler_is_greedy(&g->sampler) && (int64_t)s->n_history < s->engine.cfg.n_ctx;
    if (ahead ? engine_eval_next(&s->engine, &id, e) : engine_sample(&s->engine, &g->sampler, &id, e)) {
        return forget_cache(s);
    }
    g->n_made++;
    const char *why = NULL;
    bool cut = false;
    for (int k = 0; k < TOKENIZER_END_IDS; k++)
        if (id >= 0 && id == g->stop_ids[k])
            why = "stop";
    if (!why) {
        char piece[1024];
        size_t len = detokenize_push(&g->d, g->tok, id, piece, sizeof piece), from = g->n_text;
        if (append_text(g, piece, len, e))
            return -1;
        if ((cut = cut_at_stop(g, from)))
            why = "stop";
        else if ((g->max_tokens >= 0 && g->n_made >= g->max_tokens) || (int64_t)s->n_history >= s->engine.cfg.n_ctx)
            why = "length"; /* (ahead: there was room for it) */
    }
    if (why) { /* the last token need not be evaluated: forgotten if it was */
        if (ahead)
            engine_truncate(&s->engine, s->engine.n_past - 1);
        finish(g, why, cut);
        return 0;
    }
    sampler_accept(&g->sampler, id);
    if ((!ahead && engine_eval(&s->engine, &id, 1, e)) || remember(s, &id, 1, e)) {
        return forget_cache(s);
    }
    return 0;
}

size_t generation_ready(const struct generation *g)
{
    size_t hold = 0;
    for (int k = 0; !g->done && k < g->n_stop; k++) { /* a stop string's start at the end may yet complete */
        size_t len = strlen(g->stop[k]);
        for (size_t h = len - 1; h > hold; h--)
            if (h <= g->n_text && memcmp(g->text + g->n_text - h, g->stop[k], h) == 0) {
                hold = h;
                break;
            }
    }
    size_t end = g->n_text - hold;
    return end > g->sent ? end - g->sent : 0;
}

void generation_free(struct generation *g)
{
    sampler_free(&g->sampler);
    free(g->text);
    memset(g, 0, sizeof *g);
}
