/* backend.c: choosing a backend for --device (see backend.h). */
#include "backend.h"

#include <string.h>

#ifdef MINFER_CUDA
#include "cuda/device.h"
#endif

/* Why whole models cannot run on CUDA in this build and on this machine. */
static void why_not_cuda(struct error *e)
{
#ifdef MINFER_CUDA
    int n = 0;
    struct error de;
    if (cuda_device_count(&n, &de))
        fail(e, "--device cuda: %s", de.msg);
    else if (n == 0)
        fail(e, "--device cuda: this machine has no CUDA device");
    else
        fail(e, "--device cuda: minfer's CUDA backend does not run whole models yet (this build has the device "
                "layer and its first kernels); use --device cpu");
#else
    fail(e, "--device cuda: this build has no CUDA (configure found no nvcc); use --device cpu");
#endif
}

const struct backend *backend_choose(const char *device, struct error *e)
{
    if (!device || strcmp(device, "auto") == 0 || strcmp(device, "cpu") == 0)
        return &cpu_backend; /* auto: the CPU until a CUDA backend exists to prefer */
    if (strcmp(device, "cuda") == 0) {
        why_not_cuda(e);
        return NULL;
    }
    fail(e, "unknown device '%s' (cpu, cuda or auto)", device);
    return NULL;
}
