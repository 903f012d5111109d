/* tests/fuzz/fuzz_vxt.c - fuzz target: vc_tensor_load_memory on a CPU context created once.
 * Built with libFuzzer (clang) or with the replay-and-mutate driver tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mem.h"
#include "voxconv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static vc_context *ctx;
    if (!ctx) {
        vc_context_desc d = VC_CONTEXT_DESC_INIT;
        d.backend = VC_BACKEND_CPU;
        if (vc_context_create(&d, &ctx) != VC_OK) return 0;
    }
    vc_tensor *t = NULL;
    fuzz_mem_begin();
    if (vc_tensor_load_memory(ctx, data, size, &t) == VC_OK) vc_tensor_destroy(t);
    fuzz_mem_end(size);
    return 0;
}
