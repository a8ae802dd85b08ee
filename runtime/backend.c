/* backend.c: choosing backends for --device (see backend.h). */
#include "backend.h"

#include <string.h>

int backend_choose(const char *device, const struct backend *out[2], struct error *e)
{
    bool autodev = !device || strcmp(device, "auto") == 0;
    if (!autodev && strcmp(device, "cpu") != 0 && strcmp(device, "cpu-fast") != 0 && strcmp(device, "cuda") != 0) {
        fail(e, "unknown device '%s' (cpu, cpu-fast, cuda or auto)", device);
        return 0;
    }
    if (!autodev && strcmp(device, "cpu-fast") == 0) {
        out[0] = &cpu_fast_backend;
        return 1;
    }
    int n = 0;
    if (autodev || strcmp(device, "cuda") == 0) {
#ifdef MINFER_CUDA
        struct error why;
        if (cuda_backend.available(&why))
            out[n++] = &cuda_backend;
        else if (!autodev) {
            fail(e, "--device cuda: %s", why.msg);
            return 0;
        }
#else
        if (!autodev) {
            fail(e, "--device cuda: this build has no CUDA (configure found no nvcc); use --device cpu");
            return 0;
        }
#endif
    }
    if (autodev) /* the CPU's fast path: checked against llama.cpp and the reference, and faster at both phases */
        out[n++] = &cpu_fast_backend;
    else if (strcmp(device, "cpu") == 0)
        out[n++] = &cpu_backend;
    return n;
}
