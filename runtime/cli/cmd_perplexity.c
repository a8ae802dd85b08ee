/* cmd_perplexity.c: `minfer perplexity`, with llama.cpp's method so the
 * two can be compared: the text is cut into non-overlapping windows of -c
 * tokens, each window is evaluated from an empty cache (its first token
 * replaced by BOS where the vocabulary starts texts with one), and only the
 * second half of each window is scored, so every scored token has at least
 * c/2 tokens of context. Prints the running estimate after each window and
 * the final PPL with its standard error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/session.h"

static const char usage[] =
    "usage: minfer perplexity -m FILE -f TEXT [-c 512] [-b N] [-t N] [--chunks N] [--cache-type f32|f16|q8_0]\n"
    "                         [--device cpu|cpu-fast|cuda|auto]\n"
    "  -c N        window size in tokens (default 512); the second half of each window is scored\n"
    "  -b N        tokens per graph, at most the window (default: 512, or the window if less)\n"
    "  --chunks N  score only the first N windows\n";

struct score {
    double nll, nll2; /* sums of -log p and of (log p)^2 */
    int64_t count;
};

/* -log softmax(logits)[target], in double, as llama.cpp accumulates it. */
static double neg_log_prob(const float *logits, int64_t n_vocab, int32_t target)
{
    float max = logits[0];
    for (int64_t i = 1; i < n_vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - max));
    return -((double)(logits[target] - max) - log(sum));
}

/* One window: the first half only fills the cache; the second half's logits
 * score the tokens that follow them. */
static int window(struct session *s, int32_t *tok, int64_t n_ctx, float *logits, struct score *sc, struct error *e)
{
    int64_t first = n_ctx / 2, n_vocab = s->engine.n_vocab;
    int32_t saved = tok[0];
    if (s->tok.add_bos)
        tok[0] = s->tok.bos;
    engine_truncate(&s->engine, 0);
    int rc = engine_eval(&s->engine, tok, first, e) ||
             engine_eval_logits(&s->engine, tok + first, n_ctx - first, logits, e);
    tok[0] = saved;
    if (rc)
        return -1;
    for (int64_t i = 0; i < n_ctx - first - 1; i++) {
        double v = neg_log_prob(logits + i * n_vocab, n_vocab, tok[first + 1 + i]);
        sc->nll += v;
        sc->nll2 += v * v;
        sc->count++;
    }
    return 0;
}

int cmd_perplexity(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return fputs(usage, stdout), 0;
    struct session_options o;
    if (session_parse("perplexity", argc, argv, &o))
        return 1;
    if (o.prompt || !o.prompt_file)
        return die("perplexity: the text comes from -f FILE");
    if (o.engine.n_ctx == 0)
        o.engine.n_ctx = 512;
    if (o.engine.n_ctx < 4)
        return die("perplexity: -c %lld is too small a window", (long long)o.engine.n_ctx);
    o.engine.logits_all = true;
    struct error e;
    char *text;
    if (read_text_file(o.prompt_file, &text, &e))
        return die("perplexity: %s", e.msg);
    struct session s;
    if (session_open(&s, &o, &e)) {
        free(text);
        return die("perplexity: %s", e.msg);
    }
    int32_t *tok = NULL;
    size_t n_tok = 0, cap = 0;
    int rc = s.tok.add_bos ? tokenizer_push_bos(&s.tok, &tok, &n_tok, &cap, &e) : 0;
    if (!rc)
        rc = tokenizer_encode(&s.tok, text, strlen(text), true, &tok, &n_tok, &cap, &e);
    free(text);
    int64_t n_ctx = s.engine.cfg.n_ctx, n_chunks = (int64_t)n_tok / n_ctx;
    if (!rc && (int64_t)n_tok < 2 * n_ctx)
        rc = fail(&e, "%s has %zu tokens; a window of %lld needs at least %lld", o.prompt_file, n_tok,
                  (long long)n_ctx, (long long)(2 * n_ctx));
    /* more windows than the text holds is an error, not a quiet clamp */
    if (!rc && o.n_chunks > n_chunks)
        rc = fail(&e, "--chunks %lld: %s holds %lld windows of %lld tokens", (long long)o.n_chunks, o.prompt_file,
                  (long long)n_chunks, (long long)n_ctx);
    if (o.n_chunks > 0)
        n_chunks = o.n_chunks;
    float *logits = rc ? NULL : malloc((size_t)(n_ctx - n_ctx / 2) * (size_t)s.engine.n_vocab * sizeof *logits);
    if (!rc && !logits)
        rc = fail(&e, "out of memory for %lld positions of logits", (long long)(n_ctx - n_ctx / 2));
    if (!rc)
        session_announce(&s, &o);
    if (!rc)
        fprintf(stderr, "perplexity: %zu tokens, %lld windows of %lld, batches of %lld, %d threads\n", n_tok,
                (long long)n_chunks, (long long)n_ctx, (long long)s.engine.cfg.n_batch, s.engine.cfg.n_threads);
    struct score sc = { 0, 0, 0 };
    double t0 = session_now();
    for (int64_t c = 0; c < n_chunks && !rc; c++) {
        rc = window(&s, tok + c * n_ctx, n_ctx, logits, &sc, &e);
        if (!rc) {
            printf("[%lld]%.4f,", (long long)c + 1, exp(sc.nll / (double)sc.count));
            fflush(stdout);
        }
        if (!rc && c == 0)
            fprintf(stderr, "perplexity: %.2f s per window, about %.1f minutes in all\n", session_now() - t0,
                    (session_now() - t0) * (double)n_chunks / 60);
    }
    if (!rc) {
        double mean = sc.nll / (double)sc.count, var = sc.nll2 / (double)sc.count - mean * mean;
        double ppl = exp(mean), err = var > 0 && sc.count > 1 ? sqrt(var / (double)(sc.count - 1)) * ppl : 0;
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
        fprintf(stderr, "perplexity: %lld tokens scored in %.1f s\n", (long long)sc.count, session_now() - t0);
    }
    free(logits);
    free(tok);
    session_close(&s);
    return rc ? die("perplexity: %s", e.msg) : 0;
}
