/* timeline.cuh: a measuring build's record of when each CTA of a step
 * entered its kernel and when its grid dependency wait returned, by the
 * GPU's global timer (one clock for all SMs), every kernel compiled with
 * -DMINFER_TIMELINE (tools/build-variant.sh timeline all
 * -DMINFER_TIMELINE). Why: under programmatic dependent launch the
 * kernels of a step overlap, so neither ncu (which serializes them) nor a
 * kernel alone says what each one costs the step; the wait's return is
 * the moment the kernel before has finished. A kernel may also mark when
 * its first warp's staged data was in and when that warp was done
 * (timeline_mark: the matmul kernels), which splits a CTA's life into
 * waiting for memory and computing; the small kernels mark their CTAs'
 * ends, which splits a launch's cost into its own work and what its
 * grid's completion takes to reach the next launch. device.cu's cuda_timeline_begin and
 * _end arm the log and write it out; elsewhere grid_begin is the plain
 * wait of common.cuh and timeline_mark nothing. */
#ifndef MINFER_CUDA_TIMELINE_CUH
#define MINFER_CUDA_TIMELINE_CUH

#include "cuda/device.h"

#ifdef MINFER_TIMELINE
/* Each translation unit has its own copy of the log's address (no
 * relocatable device code): it gives device.cu its address to set. */
static __device__ struct cuda_timeline *timeline_log;
static const int timeline_registered __attribute__((unused)) = cuda_timeline_register((const void *)&timeline_log);

/* Four letters of the file's name (its first four): the kernel's family. */
__host__ __device__ constexpr unsigned timeline_tag(const char *f)
{
    int b = 0;
    for (int i = 0; f[i]; i++)
        if (f[i] == '/')
            b = i + 1;
    unsigned t = 0;
    for (int i = 0; i < 4 && f[b + i]; i++)
        t |= (unsigned)(unsigned char)f[b + i] << (8 * i);
    return t;
}

__device__ static inline unsigned long long timeline_now(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The CTA's record (thread 0's), or NULL. */
__device__ static inline struct cuda_timeline_record *&timeline_record(void)
{
    __shared__ struct cuda_timeline_record *r;
    return r;
}

/* Thread 0 of each CTA counts it in on its SM's counter (one counter for
 * all serialized an 8B step's 282,081 CTAs: the instrumented step 2505 us,
 * 2310 per SM, slowed most the launches of most CTAs) and stamps its
 * entry, then the wait's return. */
__device__ static inline void grid_begin_at(unsigned tag, unsigned line)
{
    struct cuda_timeline *log = timeline_log;
    const bool first = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
    struct cuda_timeline_record *r = NULL;
    if (log && first) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const unsigned per_sm = log->cap / CUDA_TIMELINE_SMS;
        const unsigned slot = sm < CUDA_TIMELINE_SMS ? atomicAdd(&log->next[sm], 1u) : per_sm;
        if (slot < per_sm) {
            r = &log->rec[sm * per_sm + slot];
            r->enter = timeline_now();
            r->ctas = gridDim.x * gridDim.y * gridDim.z;
            r->threads = blockDim.x * blockDim.y * blockDim.z;
            r->tag = tag;
            r->line = line;
            r->block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
            r->in_ns = r->done_ns = 0;
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if (first)
        timeline_record() = r;
    if (r)
        r->waited = timeline_now();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Thread 0: its CTA's data in (TIMELINE_IN) or its work done
 * (TIMELINE_DONE), in ns after its entry. */
#define TIMELINE_IN 0
#define TIMELINE_DONE 1
__device__ static inline void timeline_mark(int what)
{
    struct cuda_timeline_record *r = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 ? timeline_record() : NULL;
    if (r)
        (what == TIMELINE_IN ? r->in_ns : r->done_ns) = (unsigned)(timeline_now() - r->enter);
}

#define grid_begin() \
    do { \
        constexpr unsigned timeline_tag_ = timeline_tag(__FILE__); \
        grid_begin_at(timeline_tag_, __LINE__); \
    } while (0)
#else
#define TIMELINE_IN 0
#define TIMELINE_DONE 1
__device__ static inline void timeline_mark(int) {}
#endif

#endif
