/* tests/fuzz/fuzz_vxt.c - fuzz target: vc_tensor_load_memory on a CPU context created once.
 * Each input is loaded as given, then again with its header and payload CRC-32s made to
 * match (a copy), so that mutations reach the checks behind the checksums. Built with
 * libFuzzer (clang) or with the replay-and-mutate driver tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_mem.h"
#include "src/io/io.h"
#include "voxconv.h"

static void load(vc_context *ctx, const uint8_t *data, size_t size)
{
    vc_tensor *t = NULL;
    if (vc_tensor_load_memory(ctx, data, size, &t) == VC_OK) vc_tensor_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static vc_context *ctx;
    if (!ctx) {
        vc_context_desc d = VC_CONTEXT_DESC_INIT;
        d.backend = VC_BACKEND_CPU;
        if (vc_context_create(&d, &ctx) != VC_OK) return 0;
    }
    fuzz_mem_begin();
    load(ctx, data, size);
    uint32_t hsize = size >= 64 ? vc_ld_u32(data + 8) : 0;
    uint8_t *fixed = hsize >= 64 && hsize <= size ? malloc(size) : NULL;
    if (fixed) {
        memcpy(fixed, data, size);
        vc_st_u32(fixed + 56, vc_crc32(0, fixed + hsize, size - hsize));
        vc_st_u32(fixed + 60, vc_crc32(vc_crc32(0, fixed, 60), fixed + 64, hsize - 64));
        load(ctx, fixed, size);
        free(fixed);
    }
    fuzz_mem_end(size);
    return 0;
}
