/* bench/bench_util.c - timing and reporting helpers of the benchmark programs (bench_util.h). */
#include "bench_util.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

int bench_have_device(const char *prog)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("%s: no CUDA device\n", prog);
        return 0;
    }
    return 1;
}

void bench_print_device(void)
{
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, mem_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
    printf("device: %s, %d SMs, L2 %d MB, max SM clock %d MHz, memory clock %d MHz", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, clock_khz / 1000, mem_khz / 1000);
}

void bench_timer_init(bench_timer *t, cudaStream_t stream)
{
    CUDA_CHECK(cudaEventCreate(&t->start));
    CUDA_CHECK(cudaEventCreate(&t->stop));
    t->stream = stream;
}

void bench_timer_start(const bench_timer *t) { CUDA_CHECK(cudaEventRecord(t->start, t->stream)); }

float bench_timer_stop(const bench_timer *t, float *ms)
{
    float v = 0.f;
    CUDA_CHECK(cudaEventRecord(t->stop, t->stream));
    CUDA_CHECK(cudaEventSynchronize(t->stop));
    CUDA_CHECK(cudaEventElapsedTime(&v, t->start, t->stop));
    if (ms) *ms = v;
    return v;
}

void bench_timer_free(bench_timer *t)
{
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->stop);
}

static void *g_flush;
static const size_t kFlushBytes = (size_t)256 << 20;

void bench_flush_l2_init(void) { CUDA_CHECK(cudaMalloc(&g_flush, kFlushBytes)); }

void bench_flush_l2(cudaStream_t stream)
{
    CUDA_CHECK(cudaMemsetAsync(g_flush, (int)(rand() & 0xff), kFlushBytes, stream));
}

void bench_flush_l2_free(void)
{
    cudaFree(g_flush);
    g_flush = NULL;
}
