/* device.h: the CUDA device layer, callable from C. device.cu is the only
 * file that calls the CUDA runtime API; every call is checked where it is
 * made and a failure names the site, the CUDA error and the values. */
#ifndef MINFER_CUDA_DEVICE_H
#define MINFER_CUDA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cuda_device_info {
    int id;
    char name[256];
    int sm_major, sm_minor;   /* compute capability */
    int sm_count;
    size_t total_bytes, free_bytes;
    size_t smem_optin_bytes;  /* opt-in shared memory per block */
};

/* Number of usable devices; 0 (and success) when there is no driver or GPU,
 * so callers can report "skipped" rather than fail. */
int cuda_device_count(int *n, struct error *e);
int cuda_device_query(int id, struct cuda_device_info *info, struct error *e);

/* Device memory. An allocation failure is an error naming `what` and the
 * size, never a crash. */
int cuda_alloc(void **p, size_t bytes, const char *what, struct error *e);
void cuda_free(void *p);
int cuda_upload(void *dst, const void *src, size_t bytes, struct error *e);
int cuda_download(void *dst, const void *src, size_t bytes, struct error *e);
int cuda_sync(struct error *e);

/* Device-to-device copy (the bandwidth yardstick benchmarks compare with). */
int cuda_copy(void *dst, const void *src, size_t bytes, struct error *e);

/* Wall time of GPU work on the default stream, from events: start, do the
 * work, stop (which waits for it) and read milliseconds. */
struct cuda_timer;
int cuda_timer_start(struct cuda_timer **t, struct error *e);
int cuda_timer_stop(struct cuda_timer *t, float *ms, struct error *e); /* frees t */

/* Streams: each engine issues everything on its own non-blocking stream
 * (a cudaStream_t, here a void *). */
int cuda_stream_create(void **stream, struct error *e);
void cuda_stream_destroy(void *stream);
int cuda_stream_sync(void *stream, const char *site, struct error *e);
/* Device memory for the temporaries of work on stream (NULL: the default
 * stream), at least bytes: kept with the stream and grown on demand (after
 * the stream's work, which may read the old buffer, is done), never inside
 * a capture (an error: size it first), freed by cuda_stream_destroy. */
int cuda_stream_scratch(void *stream, size_t bytes, void **p, struct error *e);
int cuda_upload_async(void *dst, const void *src, size_t bytes, void *stream, struct error *e);
int cuda_download_async(void *dst, const void *src, size_t bytes, void *stream, struct error *e);
int cuda_memset_async(void *dst, int value, size_t bytes, void *stream, struct error *e);

/* Page-locked host memory, for copies that must be asynchronous. */
int cuda_host_alloc(void **p, size_t bytes, const char *what, struct error *e);
void cuda_host_free(void *p);
/* The device's address of page-locked host memory (kernels write it
 * directly: no copy in the stream). */
int cuda_host_device_pointer(void *host, void **dev, struct error *e);

/* Events: a point in a stream that the host can wait for without waiting
 * for what was queued after it. */
int cuda_event_create(void **event, struct error *e);
void cuda_event_destroy(void *event);
int cuda_event_record(void *event, void *stream, struct error *e);
int cuda_event_sync(void *event, const char *site, struct error *e);

/* Free and total device memory now. */
int cuda_mem_info(size_t *free_bytes, size_t *total_bytes, struct error *e);

/* CUDA Graphs: a capture window on a stream (thread-local mode, so another
 * thread's calls cannot join or spoil it), its instantiation, its replay.
 * end_capture returns the instantiated graph in *exec; abort_capture ends a
 * window without instantiating (after an error inside it). */
int cuda_capture_begin(void *stream, struct error *e);
int cuda_capture_end(void *stream, void **exec, struct error *e);
void cuda_capture_abort(void *stream);
int cuda_graph_launch(void *exec, void *stream, struct error *e);
void cuda_graph_destroy(void *exec);

/* Launch discipline: call launch_begin before a <<<>>> launch (it reports an
 * error latched by an earlier call as latched, not as this kernel's), and
 * launch_end right after it (which reports the launch's own failure). */
int cuda_launch_begin(const char *site, struct error *e);
int cuda_launch_end(const char *site, struct error *e);

/* A measuring build's timeline of decode steps (timeline.cuh): each CTA's
 * entry and the return of its grid dependency wait (ns of the GPU's
 * global timer), a region of records for each SM. */
#define CUDA_TIMELINE_SMS 256
struct cuda_timeline_record {
    unsigned long long enter, waited;
    unsigned ctas, threads; /* the CTA's launch */
    unsigned tag, line;     /* its kernel's file (four letters) and line of grid_begin */
    unsigned block;         /* the CTA's index in its grid */
    unsigned in_ns, done_ns; /* timeline_mark's: its data in, its work done (ns after entry; 0: not marked) */
    unsigned pad;
};
struct cuda_timeline {
    unsigned next[CUDA_TIMELINE_SMS]; /* records taken on each SM (its region: cap / CUDA_TIMELINE_SMS) */
    unsigned cap;
    struct cuda_timeline_record rec[];
};
/* Each measuring translation unit's log address (returns how many so far). */
int cuda_timeline_register(const void *symbol);
/* Arms the log on stream (an error where no kernel records: a plain
 * build), before a step's launches; end waits for them and writes the
 * records to path, one line each. */
int cuda_timeline_begin(void *stream, struct error *e);
int cuda_timeline_end(void *stream, const char *path, struct error *e);

/* A measuring build's bound (tools/build-variant.sh bounds
 * runtime/cuda/device.cu -DMINFER_BOUNDS): MINFER_SKIP's mask of the
 * launch classes a step leaves out (cuda_backend.c: bound_skips), so that
 * a step's time without them can be measured; its numbers are wrong. 0
 * where unset; an error where set in any other build, or not a mask of 0
 * to 255. */
int cuda_bound_skip_mask(struct error *e);

#ifdef __cplusplus
}
#endif

#endif
