/* device.cu: the CUDA device layer (see device.h). */
#include "cuda/device.h"

#include <cuda_runtime.h>
#include <atomic>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether device 0 has compute capability major.minor (exactly: minor >= 0;
 * or later: minor < 0) and the environment does not set off=1: decided
 * once per process into *once (-1 until then). */
static bool decided_once(std::atomic<int> *once, int major, int minor, const char *off)
{
    int v = once->load(std::memory_order_relaxed);
    if (v < 0) {
        int ma = 0, mi = 0;
        const char *no = getenv(off);
        if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
            cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
            cudaGetLastError(), ma = 0; /* no device: launches will report it */
        v = (minor < 0 ? ma >= major : ma == major && mi == minor) && !(no && strcmp(no, "1") == 0);
        once->store(v, std::memory_order_relaxed);
    }
    return v != 0;
}

/* Programmatic dependent launch (common.cuh): on sm_90 and later, unless
 * MINFER_NO_PDL=1. */
extern "C" bool cuda_pdl_enabled(void)
{
    static std::atomic<int> on{ -1 };
    return decided_once(&on, 9, -1, "MINFER_NO_PDL");
}

/* The wgmma prompt kernel (mmq_wgmma.cu): built for sm_90a, whose code
 * runs on compute capability 9.0 only; off with MINFER_NO_WGMMA=1 (for
 * measurements). */
extern "C" bool cuda_wgmma_enabled(void)
{
    static std::atomic<int> on{ -1 };
    return decided_once(&on, 9, 0, "MINFER_NO_WGMMA");
}

/* Decode matmuls whose weights the TMA unit copies into shared memory
 * (matmul_launch.cuh: stage_bytes): on sm_90 and later, unless MINFER_NO_STAGE=1. */
extern "C" bool cuda_stage_enabled(void)
{
    static std::atomic<int> on{ -1 };
    return decided_once(&on, 9, -1, "MINFER_NO_STAGE");
}

/* The multiprocessors of device 0 (0 when unknown): launches that size
 * their tiles to fill the GPU ask. Decided once per process. */
extern "C" int cuda_sm_count(void)
{
    static std::atomic<int> n{ -1 };
    int v = n.load(std::memory_order_relaxed);
    if (v < 0) {
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess)
            cudaGetLastError(), v = 0;
        n.store(v, std::memory_order_relaxed);
    }
    return v;
}

/* The shared memory of one multiprocessor of device 0, in bytes (0 when
 * unknown): launches that size their CTAs to share it ask. Decided once. */
extern "C" size_t cuda_sm_shared_bytes(void)
{
    static std::atomic<long long> n{ -1 };
    long long v = n.load(std::memory_order_relaxed);
    if (v < 0) {
        int b = 0;
        if (cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0) != cudaSuccess)
            cudaGetLastError(), b = 0;
        n.store(v = b, std::memory_order_relaxed);
    }
    return (size_t)v;
}

/* Lets kernel (a __global__ function) use bytes of dynamic shared memory,
 * past the default 48 KiB. Not checked here: a refusal makes the kernel's
 * launch fail, and its cuda_launch_end reports it, naming the kernel. */
extern "C" void cuda_smem_opt_in(const void *kernel, size_t bytes)
{
    (void)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

static int check(cudaError_t rc, const char *site, struct error *e)
{
    if (rc == cudaSuccess)
        return 0;
    return fail(e, "cuda: %s: %s (%s)", site, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

int cuda_device_count(int *n, struct error *e)
{
    *n = 0;
    cudaError_t rc = cudaGetDeviceCount(n);
    if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
        cudaGetLastError(); /* not an error for the caller: there is simply no GPU */
        *n = 0;
        return 0;
    }
    return check(rc, "cudaGetDeviceCount", e);
}

int cuda_device_query(int id, struct cuda_device_info *info, struct error *e)
{
    cudaDeviceProp p;
    memset(info, 0, sizeof *info);
    if (check(cudaGetDeviceProperties(&p, id), "cudaGetDeviceProperties", e) ||
        check(cudaSetDevice(id), "cudaSetDevice", e) ||
        check(cudaMemGetInfo(&info->free_bytes, &info->total_bytes), "cudaMemGetInfo", e))
        return -1;
    info->id = id;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->sm_major = p.major;
    info->sm_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->smem_optin_bytes = p.sharedMemPerBlockOptin;
    return 0;
}

int cuda_alloc(void **p, size_t bytes, const char *what, struct error *e)
{
    *p = NULL;
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* clear, so the next launch is not blamed for it */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return fail(e, "cuda: out of device memory allocating '%s' (%zu bytes; %zu of %zu free)", what, bytes,
                    free_b, total_b);
    }
    if (rc != cudaSuccess)
        return fail(e, "cuda: cudaMalloc '%s' (%zu bytes): %s", what, bytes, cudaGetErrorName(rc));
    return 0;
}

void cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

int cuda_upload(void *dst, const void *src, size_t bytes, struct error *e)
{
    return check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device", e);
}

int cuda_download(void *dst, const void *src, size_t bytes, struct error *e)
{
    return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host", e);
}

int cuda_copy(void *dst, const void *src, size_t bytes, struct error *e)
{
    return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device", e);
}

struct cuda_timer {
    cudaEvent_t start, stop;
};

int cuda_timer_start(struct cuda_timer **out, struct error *e)
{
    struct cuda_timer *t = (struct cuda_timer *)malloc(sizeof *t);
    if (!t)
        return fail(e, "out of memory");
    if (check(cudaEventCreate(&t->start), "cudaEventCreate", e) || check(cudaEventCreate(&t->stop), "cudaEventCreate", e) ||
        check(cudaEventRecord(t->start, 0), "cudaEventRecord", e)) {
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int cuda_timer_stop(struct cuda_timer *t, float *ms, struct error *e)
{
    int rc = check(cudaEventRecord(t->stop, 0), "cudaEventRecord", e) ||
             check(cudaEventSynchronize(t->stop), "cudaEventSynchronize", e) ||
             check(cudaEventElapsedTime(ms, t->start, t->stop), "cudaEventElapsedTime", e);
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->stop);
    free(t);
    return rc ? -1 : 0;
}

int cuda_sync(struct error *e) { return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", e); }

int cuda_launch_begin(const char *site, struct error *e)
{
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return fail(e, "cuda: before launching %s: an earlier call left %s latched (not caused by %s)", site,
                    cudaGetErrorName(rc), site);
    return 0;
}

int cuda_launch_end(const char *site, struct error *e)
{
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return fail(e, "cuda: launch of %s failed: %s (%s)", site, cudaGetErrorName(rc), cudaGetErrorString(rc));
    return 0;
}

int cuda_stream_create(void **stream, struct error *e)
{
    cudaStream_t s;
    if (check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", e))
        return -1;
    *stream = s;
    return 0;
}

/* Each stream's scratch (cuda_stream_scratch): a few entries, found by
 * stream, under a lock (engines on other threads own other streams). */
#define SCRATCH_STREAMS 64
static struct {
    void *stream, *p;
    size_t bytes;
} scratch[SCRATCH_STREAMS];
static std::mutex scratch_lock;

int cuda_stream_scratch(void *stream, size_t bytes, void **p, struct error *e)
{
    std::lock_guard<std::mutex> hold(scratch_lock);
    int at = -1, free_slot = -1;
    for (int i = 0; i < SCRATCH_STREAMS && at < 0; i++)
        if (scratch[i].p && scratch[i].stream == stream)
            at = i;
        else if (!scratch[i].p && free_slot < 0)
            free_slot = i;
    if (at >= 0 && scratch[at].bytes >= bytes)
        return *p = scratch[at].p, 0;
    if (at < 0 && free_slot < 0)
        return fail(e, "cuda: scratch for more than %d streams at once", SCRATCH_STREAMS);
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (check(cudaStreamIsCapturing((cudaStream_t)stream, &cap), "cudaStreamIsCapturing", e))
        return -1;
    if (cap != cudaStreamCaptureStatusNone)
        return fail(e, "cuda: a stream's scratch would grow to %zu bytes inside a capture (size it before capturing)", bytes);
    if (at >= 0) { /* the smaller buffer may still be read by the stream's work */
        if (check(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize (scratch)", e))
            return -1;
        cudaFree(scratch[at].p);
        scratch[at].p = NULL;
        free_slot = at;
    }
    void *q = NULL;
    if (cuda_alloc(&q, bytes, "stream scratch", e))
        return -1;
    scratch[free_slot].stream = stream, scratch[free_slot].p = q, scratch[free_slot].bytes = bytes;
    return *p = q, 0;
}

void cuda_stream_destroy(void *stream)
{
    if (!stream)
        return;
    cudaStreamSynchronize((cudaStream_t)stream);
    {
        std::lock_guard<std::mutex> hold(scratch_lock);
        for (int i = 0; i < SCRATCH_STREAMS; i++)
            if (scratch[i].p && scratch[i].stream == stream)
                cudaFree(scratch[i].p), scratch[i].p = NULL;
    }
    cudaStreamDestroy((cudaStream_t)stream);
}

int cuda_stream_sync(void *stream, const char *site, struct error *e)
{
    cudaError_t rc = cudaStreamSynchronize((cudaStream_t)stream);
    if (rc == cudaSuccess)
        return 0;
    /* an error from a kernel surfaces here; the site names the step that waited, not a kernel */
    return fail(e, "cuda: %s: the stream reported %s (%s)", site, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

int cuda_upload_async(void *dst, const void *src, size_t bytes, void *stream, struct error *e)
{
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream),
                 "cudaMemcpyAsync host to device", e);
}

int cuda_download_async(void *dst, const void *src, size_t bytes, void *stream, struct error *e)
{
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream),
                 "cudaMemcpyAsync device to host", e);
}

int cuda_memset_async(void *dst, int value, size_t bytes, void *stream, struct error *e)
{
    return check(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream), "cudaMemsetAsync", e);
}

int cuda_host_alloc(void **p, size_t bytes, const char *what, struct error *e)
{
    *p = NULL;
    cudaError_t rc = cudaMallocHost(p, bytes);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        return fail(e, "cuda: cudaMallocHost '%s' (%zu bytes): %s", what, bytes, cudaGetErrorName(rc));
    }
    return 0;
}

void cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

int cuda_host_device_pointer(void *host, void **dev, struct error *e)
{
    return check(cudaHostGetDevicePointer(dev, host, 0), "cudaHostGetDevicePointer", e);
}

int cuda_event_create(void **event, struct error *e)
{
    cudaEvent_t ev = NULL;
    *event = NULL;
    if (check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags", e))
        return -1;
    *event = ev;
    return 0;
}

void cuda_event_destroy(void *event)
{
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
}

int cuda_event_record(void *event, void *stream, struct error *e)
{
    return check(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cudaEventRecord", e);
}

int cuda_event_sync(void *event, const char *site, struct error *e)
{
    cudaError_t rc = cudaEventSynchronize((cudaEvent_t)event);
    if (rc == cudaSuccess)
        return 0;
    return fail(e, "cuda: %s: the stream reported %s (%s)", site, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

int cuda_mem_info(size_t *free_bytes, size_t *total_bytes, struct error *e)
{
    return check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo", e);
}

int cuda_capture_begin(void *stream, struct error *e)
{
    return check(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture", e);
}

int cuda_capture_end(void *stream, void **exec, struct error *e)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t x = NULL;
    *exec = NULL;
    if (check(cudaStreamEndCapture((cudaStream_t)stream, &graph), "cudaStreamEndCapture", e))
        return -1;
    int rc = check(cudaGraphInstantiate(&x, graph, 0), "cudaGraphInstantiate", e);
    cudaGraphDestroy(graph);
    if (rc)
        return -1;
    *exec = x;
    return 0;
}

void cuda_capture_abort(void *stream)
{
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture((cudaStream_t)stream, &graph) == cudaSuccess && graph)
        cudaGraphDestroy(graph);
    cudaGetLastError(); /* the window's failure was reported where it happened */
}

int cuda_graph_launch(void *exec, void *stream, struct error *e)
{
    return check(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream), "cudaGraphLaunch", e);
}

void cuda_graph_destroy(void *exec)
{
    if (exec)
        cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

/* ---- a measuring build's timeline (timeline.cuh) ---- */

#define TIMELINE_UNITS 64          /* translation units that record */
#define TIMELINE_RECORDS (1 << 21) /* CTAs a step (the 8B Q4_K_M: 282,081; 8192 an SM) */
static const void *timeline_symbols[TIMELINE_UNITS]; /* constant-initialized: set before any constructor runs */
static int timeline_units;
static struct cuda_timeline *timeline_log_dev;

extern "C" int cuda_bound_skip_mask(struct error *e)
{
    const char *v = getenv("MINFER_SKIP");
    if (!v)
        return 0;
#ifdef MINFER_BOUNDS
    char *end;
    const long m = strtol(v, &end, 0);
    if (*v == '\0' || *end != '\0' || m < 0 || m > 255)
        return fail(e, "MINFER_SKIP=%s: not a mask of 0 to 255", v);
    return (int)m;
#else
    return fail(e, "MINFER_SKIP: this build leaves no launch out (tools/build-variant.sh bounds runtime/cuda/device.cu -DMINFER_BOUNDS makes one)");
#endif
}

extern "C" int cuda_timeline_register(const void *symbol)
{
    if (timeline_units < TIMELINE_UNITS)
        timeline_symbols[timeline_units++] = symbol;
    return timeline_units;
}

extern "C" int cuda_timeline_begin(void *stream, struct error *e)
{
    if (timeline_units == 0)
        return fail(e, "this build records no timeline (tools/build-variant.sh timeline all -DMINFER_TIMELINE makes one)");
    if (!timeline_log_dev) {
        const size_t bytes = sizeof(struct cuda_timeline) + TIMELINE_RECORDS * sizeof(struct cuda_timeline_record);
        const unsigned cap = TIMELINE_RECORDS;
        if (cuda_alloc((void **)&timeline_log_dev, bytes, "the timeline", e) ||
            check(cudaMemcpy(&timeline_log_dev->cap, &cap, sizeof cap, cudaMemcpyHostToDevice), "timeline: its size", e))
            return -1;
        for (int i = 0; i < timeline_units; i++)
            if (check(cudaMemcpyToSymbol(timeline_symbols[i], &timeline_log_dev, sizeof timeline_log_dev),
                      "timeline: a unit's log", e))
                return -1;
    }
    return cuda_memset_async(timeline_log_dev->next, 0, sizeof timeline_log_dev->next, stream, e);
}

/* Writes the records, SM by SM, one line each (tools/timeline.py orders them by time). */
extern "C" int cuda_timeline_end(void *stream, const char *path, struct error *e)
{
    if (!timeline_log_dev)
        return fail(e, "timeline: ended before it began");
    const unsigned per_sm = TIMELINE_RECORDS / CUDA_TIMELINE_SMS;
    unsigned next[CUDA_TIMELINE_SMS];
    struct cuda_timeline_record *r = (struct cuda_timeline_record *)malloc(TIMELINE_RECORDS * sizeof *r);
    if (!r)
        return fail(e, "timeline: out of memory for %u records", TIMELINE_RECORDS);
    int rc = cuda_stream_sync(stream, "the timeline's step", e);
    if (rc == 0)
        rc = check(cudaMemcpy(next, timeline_log_dev->next, sizeof next, cudaMemcpyDeviceToHost), "timeline: its counts", e);
    if (rc == 0)
        rc = check(cudaMemcpy(r, timeline_log_dev->rec, TIMELINE_RECORDS * sizeof *r, cudaMemcpyDeviceToHost),
                   "timeline: records", e);
    for (unsigned sm = 0; rc == 0 && sm < CUDA_TIMELINE_SMS; sm++)
        if (next[sm] > per_sm)
            rc = fail(e, "timeline: %u CTAs on SM %u, room for %u", next[sm], sm, per_sm);
    FILE *f = NULL;
    if (rc == 0 && !(f = fopen(path, "w")))
        rc = fail(e, "timeline: cannot write %s", path);
    if (f) {
        fprintf(f, "# sm enter_ns waited_ns ctas threads file line block in_ns done_ns\n");
        for (unsigned sm = 0; sm < CUDA_TIMELINE_SMS; sm++)
            for (unsigned i = 0; i < next[sm]; i++) {
                const struct cuda_timeline_record *x = &r[sm * per_sm + i];
                const unsigned t = x->tag;
                fprintf(f, "%u %llu %llu %u %u %c%c%c%c %u %u %u %u\n", sm, x->enter, x->waited, x->ctas, x->threads, t & 0xff,
                        t >> 8 & 0xff, t >> 16 & 0xff, t >> 24 & 0xff, x->line, x->block, x->in_ns, x->done_ns);
            }
        if (fclose(f))
            rc = fail(e, "timeline: writing %s failed", path);
    }
    free(r);
    return rc;
}
