/* tests/fuzz/fuzz_kitti.c - fuzz target: vc_cloud_read_memory with VC_FORMAT_KITTI. Built with libFuzzer
 * (clang) or with the replay-and-mutate driver tests/fuzz/driver.c (other compilers). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mem.h"
#include "voxconv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_cloud c;
    fuzz_mem_begin();
    if (vc_cloud_read_memory(NULL, data, size, VC_FORMAT_KITTI, &c) == VC_OK) vc_cloud_free(&c);
    fuzz_mem_end(size);
    return 0;
}
