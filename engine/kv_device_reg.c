/* kv_device_reg: the device backends compiled into this program (as ggml's
 * backend registry lists its backends). The one place that knows whether
 * this build has CUDA: it is built into the kvlab program, not into
 * libkvengine, so the engine and its tests link without the CUDA backend. */
#include "kv_device.h"

#ifdef KVLAB_HAVE_CUDA
#include "kv_cuda.h"
#endif

const kv_device_driver *kv_device_gpu_driver(void)
{
#ifdef KVLAB_HAVE_CUDA
    return kv_cuda_driver();
#else
    return NULL;
#endif
}
