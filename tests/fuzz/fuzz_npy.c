/* tests/fuzz/fuzz_npy.c - fuzz target: vc_npy_read_memory, and the same bytes as a point
 * cloud (.npy float [N, D >= 3]). Built with libFuzzer (clang) or tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mem.h"
#include "voxconv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_array a;
    fuzz_mem_begin();
    if (vc_npy_read_memory(NULL, data, size, &a) == VC_OK) vc_array_free(&a);
    vc_cloud c;
    if (vc_cloud_read_memory(NULL, data, size, VC_FORMAT_NPY, &c) == VC_OK) vc_cloud_free(&c);
    fuzz_mem_end(size);
    return 0;
}
