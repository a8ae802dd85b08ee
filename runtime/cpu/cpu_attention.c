/* cpu_attention.c: causal GQA attention on the CPU. Each query head attends
 * over its KV head's positions 0..pos (pos - window + 1..pos with a
 * sliding window): scores scaled by 1/sqrt(d), a
 * max-subtracted softmax, then the weighted sum of values, all in position
 * order. The work is cut into jobs of one KV head and up to CPU_ATT_BLOCK
 * query tokens, run on the scratch's threads: a job reads each cached row
 * once for all its queries (the heads sharing that KV head and the tokens of
 * the block), while every score, sum and weighted value is formed exactly
 * as for one query alone, so the bits depend neither on the block nor on
 * the batch size nor on the thread count. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_dot.h"

struct att_job {
    const struct graph *g;
    const struct node *n;
    const struct cpu_run *r;
    int64_t kvh, c0, nc; /* the KV head and the query tokens [c0, c0 + nc) */
    float *work;         /* this thread's cpu_scratch.att share */
};

/* The first position a query at pos sees. */
static inline int64_t start_of(const struct node *n, int64_t pos)
{
    return n->p.window > 0 && pos >= n->p.window ? pos - n->p.window + 1 : 0;
}

CPU_SIMD static void *attend(void *arg)
{
    const struct att_job *j = arg;
    const struct node *q = &j->g->node[j->n->src[0]];
    const struct cpu_run *r = j->r;
    const float *qd = (const float *)cpu_data(j->g, r, j->n->src[0]);
    const int32_t *pos = (const int32_t *)cpu_data(j->g, r, j->n->src[2]);
    float *y = (float *)cpu_data(j->g, r, (int)(j->n - j->g->node));
    int64_t d = q->ne[0], h = q->ne[1], group = h / r->kv->n_head_kv, n_ctx = r->kv->n_ctx, nq = j->nc * group;
    const float scale = 1.0f / sqrtf((float)d);
    /* per query (token ct of the block, head hg of the group) at t = ct * group + hg:
     * scores[t * n_ctx + p], sums[t], acc[t * d + i]; the queries transposed,
     * qt[i * nq + t], so one key element meets every query in one vector */
    float *scores = j->work, *sums = scores + nq * n_ctx, *acc = sums + nq, *row = acc + nq * d; /* row: CPU_ATT_ROWS of d */
    int64_t nq8 = (nq + 7) / 8 * 8; /* whole vectors of queries; the padding queries are zero */
    float *qt = row + CPU_ATT_ROWS * d, *s = qt + nq8 * d; /* s: CPU_ATT_ROWS of nq8 */
    int64_t last = 0, first = INT64_MAX;
    for (int64_t c = j->c0; c < j->c0 + j->nc; c++) {
        last = pos[c] > last ? pos[c] : last;
        first = start_of(j->n, pos[c]) < first ? start_of(j->n, pos[c]) : first;
    }
    memset(qt, 0, (size_t)(nq8 * d) * sizeof *qt);
    for (int64_t t = 0; t < nq; t++) {
        const float *qi = qd + ((j->c0 + t / group) * h + j->kvh * group + t % group) * d;
        for (int64_t i = 0; i < d; i++)
            qt[i * nq8 + t] = qi[i];
    }
    /* scores past a query's position are made and never read; four
     * positions at a time, so four chains of adds run at once, sharing each
     * query load (the queries of a head of 256 outgrow L1) */
    for (int64_t p = first; p <= last; p += CPU_ATT_ROWS) {
        const int64_t np = last - p + 1 < CPU_ATT_ROWS ? last - p + 1 : CPU_ATT_ROWS;
        for (int64_t u = 0; u < np; u++)
            kv_load_row(r->kv, r->kv->k, j->n->layer, j->kvh, p + u, row + u * d);
        const float *rw[CPU_ATT_ROWS]; /* past the last position: the first row again, its scores dropped */
        for (int u = 0; u < CPU_ATT_ROWS; u++)
            rw[u] = row + (u < np ? u : 0) * d;
        for (int64_t t = 0; t < nq8; t += 8) { /* eight queries' dot products, each in element order */
            cpu_v8 sum0 = { 0 }, sum1 = { 0 }, sum2 = { 0 }, sum3 = { 0 }, qv;
            for (int64_t i = 0; i < d; i++) {
                CPU_V8_LOAD(qv, qt + i * nq8 + t);
                sum0 += qv * rw[0][i];
                sum1 += qv * rw[1][i];
                sum2 += qv * rw[2][i];
                sum3 += qv * rw[3][i];
            }
            memcpy(s + t, &sum0, sizeof sum0);
            memcpy(s + nq8 + t, &sum1, sizeof sum1);
            memcpy(s + 2 * nq8 + t, &sum2, sizeof sum2);
            memcpy(s + 3 * nq8 + t, &sum3, sizeof sum3);
        }
        for (int64_t u = 0; u < np; u++)
            for (int64_t t = 0; t < nq; t++)
                scores[t * n_ctx + p + u] = s[u * nq8 + t] * scale;
    }
    for (int64_t t = 0; t < nq; t++) {
        int64_t at = pos[j->c0 + t / group], lo = start_of(j->n, at);
        float *sc = scores + t * n_ctx, max = -INFINITY, sum = 0;
        for (int64_t p = lo; p <= at; p++)
            max = sc[p] > max ? sc[p] : max;
        for (int64_t p = lo; p <= at; p++) {
            sc[p] = expf(sc[p] - max);
            sum += sc[p];
        }
        sums[t] = sum;
    }
    memset(acc, 0, (size_t)(nq * d) * sizeof *acc);
    for (int64_t p = first; p <= last; p++) {
        kv_load_row(r->kv, r->kv->v, j->n->layer, j->kvh, p, row);
        for (int64_t t = 0; t < nq; t++) {
            const int64_t at = pos[j->c0 + t / group];
            if (p > at || p < start_of(j->n, at))
                continue;
            const float wgt = scores[t * n_ctx + p] / sums[t];
            float *a = acc + t * d;
            int64_t i = 0;
            for (; i + 8 <= d; i += 8) { /* by hand: the compiler cannot tell a from row */
                cpu_v8 av, rv;
                CPU_V8_LOAD(av, a + i), CPU_V8_LOAD(rv, row + i);
                av += wgt * rv;
                memcpy(a + i, &av, sizeof av);
            }
            for (; i < d; i++)
                a[i] += wgt * row[i];
        }
    }
    for (int64_t t = 0; t < nq; t++) {
        int64_t c = j->c0 + t / group, head = j->kvh * group + t % group;
        memcpy(y + (c * h + head) * d, acc + t * d, (size_t)d * sizeof *acc);
    }
    return NULL;
}

void cpu_attention(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const struct node *q = &g->node[n->src[0]];
    int64_t nt = q->ne[2], h_kv = r->kv->n_head_kv, blocks = (nt + CPU_ATT_BLOCK - 1) / CPU_ATT_BLOCK;
    struct cpu_scratch *s = r->s;
    struct att_job jobs[CPU_MAX_THREADS];
    int64_t next = 0, total = h_kv * blocks;
    while (next < total) { /* rounds of at most one job per thread */
        int count = 0;
        for (; count < s->n_threads && next < total; count++, next++) {
            int64_t b = next % blocks, c0 = b * CPU_ATT_BLOCK;
            jobs[count] = (struct att_job){ g, n, r, next / blocks, c0, nt - c0 < CPU_ATT_BLOCK ? nt - c0 : CPU_ATT_BLOCK,
                                            s->att + (size_t)count * s->att_floats };
        }
        cpu_run_jobs(s->pool, jobs, sizeof jobs[0], count, attend);
    }
}
