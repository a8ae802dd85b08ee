/* cmd_bench.c: `minfer bench`: prompt processing (a batch of -p tokens) and
 * generation (-n tokens one at a time) speed, -r times each, after -d
 * tokens of context, as a table like llama-bench's, or JSON. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/session.h"

static const char usage[] = "usage: minfer bench -m FILE [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [-c N] [-b N] [--cache-type T] [--device D] [--json]\n"
                            "  -d N: N tokens already in the cache before each measurement (untimed), as llama-bench's -d\n"
                            "  -c N: the cache's positions (default: -d plus the longer of -p and -n, plus 1)\n"
                            "  -b N: the batch (default: -p, or else -d's tokens up to 2048; at most -c)\n";

struct result {
    char test[32];
    int64_t n;
    double mean, sd;
};

static double stddev(const double *x, int64_t n, double mean)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (x[i] - mean) * (x[i] - mean);
    return n > 1 ? sqrt(s / (double)(n - 1)) : 0.0;
}

/* Tokens/s for n tokens as one batch (pp) or one at a time (tg). A batch
 * ends with the next token's id in hand (engine_argmax); tg is greedy
 * generation as the CLI runs it: each step's token is the argmax of the
 * step before (engine_eval_next: on a GPU, fed on the device while the
 * host reads it), and the time ends with the last step's argmax in hand,
 * so the time is what a user waits, not what was queued.
 * Untimed runs go first, as llama-bench's warm-up does: the first run of a
 * shape also builds its graph and loads its kernels (a GPU's modules load
 * at their first launch), and the CUDA backend captures a shape's graph at
 * its third run (cuda_backend.c's WARMUP_RUNS + 1), one-time costs a served
 * model pays once. So three warm-ups: the timed runs are the steady state
 * (the capture inside the timed runs cost the 0.5B's pp512 ~7%, BENCHMARKS.md). */
#define BENCH_WARMUPS 3
static int measure(struct session *s, int64_t n, int64_t depth, bool batch, int64_t reps, struct result *r,
                   struct error *e)
{
    double *tps = calloc((size_t)reps, sizeof *tps);
    int32_t *ids = malloc((size_t)(depth + n + 1) * sizeof *ids), next;
    int rc = !tps || !ids ? fail(e, "out of memory") : 0;
    for (int64_t i = 0; i < depth + n && !rc; i++)
        ids[i] = (int32_t)((i * 7919 + 13) % s->engine.n_vocab);
    const int32_t *tok = ids + depth;
    for (int64_t k = -BENCH_WARMUPS; k < reps && !rc; k++) { /* k < 0: the warm-ups */
        engine_truncate(&s->engine, 0);
        if (depth > 0 && (rc = engine_eval(&s->engine, ids, depth, e) || engine_argmax(&s->engine, &next, e)))
            break; /* the context, untimed; argmax waits for it */
        double t0 = session_now();
        if (batch)
            rc = engine_eval(&s->engine, tok, n, e) || engine_argmax(&s->engine, &next, e);
        else
            rc = engine_eval(&s->engine, tok, 1, e);
        for (int64_t i = 1; !batch && i < n && !rc; i++)
            rc = engine_eval_next(&s->engine, &next, e);
        if (!batch && !rc)
            rc = engine_argmax(&s->engine, &next, e);
        if (k >= 0)
            tps[k] = (double)n / (session_now() - t0);
    }
    double mean = 0;
    for (int64_t k = 0; k < reps; k++)
        mean += tps[k] / (double)reps;
    r->n = n;
    r->mean = mean;
    r->sd = stddev(tps, reps, mean);
    if (depth > 0) /* llama-bench's name for it */
        snprintf(r->test, sizeof r->test, "%s%lld @ d%lld", batch ? "pp" : "tg", (long long)n, (long long)depth);
    else
        snprintf(r->test, sizeof r->test, "%s%lld", batch ? "pp" : "tg", (long long)n);
    free(tps);
    free(ids);
    return rc;
}

static void model_summary(const struct session *s, char *desc, size_t n, double *mib, double *params)
{
    uint64_t bytes = 0, count = 0;
    for (uint64_t i = 0; i < s->model.gguf.n_tensors; i++) {
        bytes += s->model.gguf.tensors[i].nbytes;
        count += s->model.gguf.tensors[i].n_elems;
    }
    *mib = (double)bytes / 1048576.0;
    *params = (double)count;
    snprintf(desc, n, "%s %.2fB %.2f bpw", s->model.arch->gguf_name, (double)count / 1e9,
             count ? 8.0 * (double)bytes / (double)count : 0.0);
}

int cmd_bench(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return fputs(usage, stdout), 0;
    struct session_options o;
    if (session_parse("bench", argc, argv, &o))
        return 1;
    if (o.engine.n_ctx <= 0)
        o.engine.n_ctx = o.bench_depth + (o.bench_pp > o.bench_tg ? o.bench_pp : o.bench_tg) + 1;
    if (o.engine.n_batch <= 0) { /* the prompt in one batch; else the context (-d) in batches of up to 2048, not a step a token */
        int64_t b = o.bench_pp > 0 ? o.bench_pp : o.bench_depth > 0 ? (o.bench_depth < 2048 ? o.bench_depth : 2048) : 1;
        o.engine.n_batch = b < o.engine.n_ctx ? b : o.engine.n_ctx; /* a -c too short is the run's error, said below */
    }
    struct session s;
    struct error e;
    if (session_open(&s, &o, &e))
        return die("%s", e.msg);
    session_announce(&s, &o);
    char backend[16];
    size_t k = 0;
    for (; s.engine.be->name[k] && k + 1 < sizeof backend; k++) /* "CPU", "CUDA", as llama-bench writes them */
        backend[k] = (char)toupper((unsigned char)s.engine.be->name[k]);
    backend[k] = 0;
    struct result res[2];
    int n_res = 0, rc = 0;
    if (o.bench_pp > 0 && !(rc = measure(&s, o.bench_pp, o.bench_depth, true, o.bench_reps, &res[n_res], &e)))
        n_res++;
    if (!rc && o.bench_tg > 0 && !(rc = measure(&s, o.bench_tg, o.bench_depth, false, o.bench_reps, &res[n_res], &e)))
        n_res++;
    char desc[128];
    double mib, params;
    model_summary(&s, desc, sizeof desc, &mib, &params);
    for (int i = 0; !rc && i < n_res; i++) {
        if (o.json)
            printf("%s{\"model\": \"%s\", \"size_mib\": %.2f, \"params\": %.0f, \"backend\": \"%s\", \"threads\": %d, "
                   "\"n_batch\": %lld, \"test\": \"%s\", \"tokens\": %lld, \"reps\": %lld, \"tokens_per_second\": %.3f, \"stddev\": %.3f}%s\n",
                   i ? "  " : "[\n  ", desc, mib, params, backend, s.engine.cfg.n_threads, (long long)s.engine.cfg.n_batch,
                   res[i].test, (long long)res[i].n, (long long)o.bench_reps, res[i].mean, res[i].sd, i + 1 < n_res ? "," : "\n]");
        else {
            if (i == 0)
                printf("| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
            printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %.2f ± %.2f |\n", desc, mib, params / 1e6, backend,
                   s.engine.cfg.n_threads, res[i].test, res[i].mean, res[i].sd);
        }
    }
    session_close(&s);
    return rc ? die("bench: %s", e.msg) : 0;
}
