/* bench/bench_util.h - what the GPU benchmark programs (bench_kmap, bench_gemm, bench_conv)
 * share: die-on-error checks (a benchmark has nothing to report past a failed call) and the
 * median of the timed runs. Include after <cuda_runtime_api.h>. Not for the tests, which count
 * failures instead (testutil.h). */
#ifndef VC_TESTS_GPU_BENCH_UTIL_H
#define VC_TESTS_GPU_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#define DIE_IF(cond, ...)                                                                      \
    do {                                                                                       \
        if (cond) {                                                                            \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        DIE_IF(e_ != cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                    \
    } while (0)

static inline int vc_bench_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median of n timings (sorts v in place). */
static inline float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, vc_bench_cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef VC_CONV_KMAP_GPU_H
/* The map builds' A/B switch from the environment (bench_kmap, bench_conv), set in *o and
 * printed when set: VC_BENCH_DENSE=-1 / 0 / 1, the new-output maps' output path
 * (vc_engine_options.kmap_dense). */
static inline void vc_bench_map_switches(vc_engine_options *o)
{
    const char *dn = getenv("VC_BENCH_DENSE");
    if (dn && *dn) {
        o->kmap_dense = atoi(dn);
        printf("VC_BENCH_DENSE=%d: kmap_dense %d\n", atoi(dn), atoi(dn));
    }
}
#endif

#endif
