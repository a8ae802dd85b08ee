/* cpu_pool.c: the CPU backend's worker threads (see cpu.h): made once per
 * engine, woken for each batch of jobs, so a matmul costs no thread
 * creation. Worker i runs job i + 1 of a batch; the caller runs job 0 and
 * any job past the workers, then waits for the batch to finish. Both sides
 * spin a little before sleeping on a condition variable: a decode step
 * hands out a hundred batches, and a wake-up through the kernel can cost
 * as much as a small matmul. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define RELAX() _mm_pause()
#else
#define RELAX() ((void)0)
#endif

#define SPINS 20000 /* polls (pause instructions) before sleeping: some tens of microseconds */

#include "cpu/cpu.h"

struct cpu_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t th[CPU_MAX_THREADS];
    int n_workers;
    unsigned batch;      /* batches handed out so far (atomic: polled without the lock) */
    int pending;         /* workers not yet through the current batch (atomic) */
    bool stop;
    char *jobs;          /* the current batch: n jobs of size bytes, run by fn */
    size_t size;
    int n;
    void *(*fn)(void *);
};

struct worker {
    struct cpu_pool *p;
    int index;
};

/* Whether *v changes from old within SPINS polls. */
static bool spin_until_changed(const unsigned *v, unsigned old)
{
    for (int i = 0; i < SPINS; i++) {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) != old)
            return true;
        RELAX();
    }
    return false;
}

static void *worker_main(void *arg)
{
    struct cpu_pool *p = ((struct worker *)arg)->p;
    int job = ((struct worker *)arg)->index + 1;
    free(arg);
    for (unsigned seen = 0;;) {
        if (!spin_until_changed(&p->batch, seen)) {
            pthread_mutex_lock(&p->mu);
            while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE) && __atomic_load_n(&p->batch, __ATOMIC_ACQUIRE) == seen)
                pthread_cond_wait(&p->work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
            break;
        seen = __atomic_load_n(&p->batch, __ATOMIC_ACQUIRE); /* the batch's fields were written before it */
        if (job < p->n)
            p->fn(p->jobs + (size_t)job * p->size);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

void cpu_pool_free(struct cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->stop, true, __ATOMIC_RELEASE);
    __atomic_add_fetch(&p->batch, 1, __ATOMIC_RELEASE); /* a spinning worker sees a change, then the stop */
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int cpu_pool_new(struct cpu_pool **out, int n_threads, struct error *e)
{
    struct cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return fail(e, "out of memory for a thread pool");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    *out = p;
    for (; p->n_workers < n_threads - 1; p->n_workers++) {
        struct worker *w = malloc(sizeof *w);
        if (w)
            *w = (struct worker){ p, p->n_workers };
        if (!w || pthread_create(&p->th[p->n_workers], NULL, worker_main, w) != 0) {
            free(w);
            int made = p->n_workers;
            cpu_pool_free(p);
            *out = NULL;
            return fail(e, "cannot start CPU thread %d of %d", made + 2, n_threads);
        }
    }
    return 0;
}

void cpu_run_jobs(struct cpu_pool *p, void *jobs, size_t size, int n, void *(*fn)(void *))
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&p->mu);
    p->jobs = jobs;
    p->size = size;
    p->n = n;
    p->fn = fn;
    __atomic_store_n(&p->pending, p->n_workers, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->batch, 1, __ATOMIC_RELEASE); /* publishes the fields above */
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    fn(jobs);
    for (int j = p->n_workers + 1; j < n; j++) /* more jobs than workers: the rest here */
        fn((char *)jobs + (size_t)j * size);
    for (int i = 0; i < SPINS && __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0; i++)
        RELAX();
    if (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_lock(&p->mu);
        while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
