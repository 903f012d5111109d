/* bench/bench_util.h - what the GPU benchmark programs (bench_kmap, bench_gemm, bench_conv)
 * share: die-on-error checks (a benchmark has nothing to report past a failed call), CUDA-event
 * timers, the median of the timed runs, the L2 flush and the device line of the reports
 * (bench_util.c). Not for the tests, which count failures instead (tests/common/testutil.h). */
#ifndef VC_BENCH_UTIL_H
#define VC_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

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

/* Median of n timings (sorts v in place). */
float median(float *v, int n);

/* Whether a CUDA device is usable; if not, prints "PROG: no CUDA device" (the caller then exits
 * 77, ctest's skip code). */
int bench_have_device(const char *prog);

/* Prints "device: NAME, N SMs, L2 N MB, max SM clock N MHz, memory clock N MHz" (no newline) for
 * device 0: the first line of a report. */
void bench_print_device(void);

/* Two events on one stream: bench_timer_start records the first, bench_timer_stop the second,
 * waits for it and returns the milliseconds between (also stored in *ms unless ms is NULL, as a
 * warm-up run passes). What is timed is the stream's time between the two records, host work
 * between them included where it keeps the GPU waiting. */
typedef struct bench_timer {
    cudaEvent_t start, stop;
    cudaStream_t stream;
} bench_timer;

void bench_timer_init(bench_timer *t, cudaStream_t stream);
void bench_timer_start(const bench_timer *t);
float bench_timer_stop(const bench_timer *t, float *ms);
void bench_timer_free(bench_timer *t);

/* The L2 flush before a timed run: a memset of 256 MB (more than any L2) queued on `stream`,
 * with a new byte value each time (rand()). init allocates the buffer (before the data of the
 * runs, so that their addresses do not depend on the flush). */
void bench_flush_l2_init(void);
void bench_flush_l2(cudaStream_t stream);
void bench_flush_l2_free(void);

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
