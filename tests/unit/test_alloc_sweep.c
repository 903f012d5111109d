/* tests/unit/test_alloc_sweep.c - every bulk allocation of the CPU engine goes through the
 * context's allocator: a sweep fails each of its requests in turn over a voxelize, map builds
 * of every type, convolutions, a pool and a global pool (tests/common/alloc_sweep.h); each
 * failure is VC_ERR_OUT_OF_MEMORY with a message, leaks nothing, and the context then runs the
 * whole sequence again with the reference's bits. */
#include "alloc_sweep.h"

int main(void)
{
    sweep_alloc a;
    memset(&a, 0, sizeof a);
    a.counted = VC_MEMORY_HOST;
    /* Requests each stage makes at least on the CPU, counted from the sources: a map build is
     * 2 hash tables + out_in + 7 in vc_kmap_finish_cpu (+ output coordinates and their sort
     * keys for the new-output types), an INVERSE out_in + 7; a conv 3 scratch arrays + its
     * output tensor; the voxelizer 2 per point, a hash table, 8 per voxel, the result (2),
     * then the set and tensor; the global pool 2 sums + its output. */
    const int64_t min_calls[SW_STAGES] = {
        [SW_VOXELIZE] = 14, [SW_CONV_SUBM] = 14, [SW_CONV_STRIDED] = 16,
        [SW_MAP_DOWNSAMPLE] = 12, [SW_POOL] = 1, [SW_CONV_INVERSE] = 12,
        [SW_CONV_TRANSPOSED] = 16, [SW_GLOBAL_POOL] = 2, [SW_READ_BACK] = 0};
    int64_t points = sweep_run(VC_BACKEND_CPU, &a, min_calls, 400);
    CHECK_MSG(points >= 60, "only %lld allocation points swept", (long long)points);
    TEST_END();
}
