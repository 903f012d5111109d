// bench/host_api_probe.cu - the host's cost of the CUDA calls a regular map build makes before
// its first kernel runs and after its last (docs/benchmarks.md, "What a call adds to the graph
// replay"): stream-ordered pool allocations and frees, kernel launches with and without the
// programmatic-serialization attribute, an event record, and the round trip of a one-thread
// kernel read back by cudaStreamSynchronize or by polling a mapped word. Medians of host
// nanoseconds (CLOCK_MONOTONIC) over many calls, the stream drained between batches so that
// no call waits for queue space. Standalone (no library):
//   nvcc -O2 -arch=sm_90 -o /tmp/host_api_probe bench/host_api_probe.cu && /tmp/host_api_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <vector>

namespace {

const int kReps = 2000, kBatch = 50; // calls timed; calls between two drains of the stream

double now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

__global__ void empty_kernel(int *p)
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (p && threadIdx.x == 1000) *p = 1; // never taken: keeps the kernel from being empty
}

__global__ void flag_kernel(volatile long long *flag, long long seq)
{
    __threadfence_system();
    *flag = seq;
}

cudaError_t launch(bool pdl, cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, empty_kernel, (int *)nullptr);
}

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

} // namespace

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev = 0;
    CK(cudaGetDevice(&dev));
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    CK(cudaMemPoolCreate(&pool, &props));
    unsigned long long keep = 1ull << 30;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    cudaEvent_t ev;
    CK(cudaEventCreate(&ev));
    long long *flag_h = nullptr, *flag_d = nullptr;
    CK(cudaHostAlloc((void **)&flag_h, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostGetDevicePointer((void **)&flag_d, flag_h, 0));
    *flag_h = 0;

    printf("| host call | median ns |\n|---|---:|\n");
    const size_t sizes[2] = {1u << 20, 11u << 20};
    for (size_t bytes : sizes) {
        std::vector<double> ta, tf;
        for (int r = 0; r < kReps; r++) {
            void *p = nullptr;
            double t0 = now_ns();
            CK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
            double t1 = now_ns();
            CK(cudaFreeAsync(p, s));
            double t2 = now_ns();
            ta.push_back(t1 - t0);
            tf.push_back(t2 - t1);
            if (r % kBatch == kBatch - 1) CK(cudaStreamSynchronize(s));
        }
        printf("| cudaMallocFromPoolAsync %zu MB (block cached) | %.0f |\n", bytes >> 20,
               median(ta));
        printf("| cudaFreeAsync %zu MB | %.0f |\n", bytes >> 20, median(tf));
    }
    CK(cudaStreamSynchronize(s));
    {
        // two allocations live at once, as a build holds out_in and its workspace
        std::vector<double> t;
        for (int r = 0; r < kReps; r++) {
            void *a = nullptr, *b = nullptr;
            double t0 = now_ns();
            CK(cudaMallocFromPoolAsync(&a, 11u << 20, pool, s));
            CK(cudaMallocFromPoolAsync(&b, 4u << 20, pool, s));
            t.push_back(now_ns() - t0);
            CK(cudaFreeAsync(b, s));
            CK(cudaFreeAsync(a, s));
            if (r % kBatch == kBatch - 1) CK(cudaStreamSynchronize(s));
        }
        printf("| two allocations, 11 MB and 4 MB | %.0f |\n", median(t));
    }
    for (int pdl = 0; pdl < 2; pdl++) {
        std::vector<double> t;
        for (int r = 0; r < kReps; r++) {
            double t0 = now_ns();
            CK(launch(pdl != 0, s));
            t.push_back(now_ns() - t0);
            if (r % kBatch == kBatch - 1) CK(cudaStreamSynchronize(s));
        }
        printf("| cudaLaunchKernelEx, %s | %.0f |\n",
               pdl ? "programmatic serialization" : "no attribute", median(t));
    }
    {
        std::vector<double> t;
        for (int r = 0; r < kReps; r++) {
            double t0 = now_ns();
            empty_kernel<<<1, 32, 0, s>>>(nullptr);
            t.push_back(now_ns() - t0);
            if (r % kBatch == kBatch - 1) CK(cudaStreamSynchronize(s));
        }
        CK(cudaGetLastError());
        printf("| <<<>>> launch | %.0f |\n", median(t));
    }
    {
        std::vector<double> t;
        for (int r = 0; r < kReps; r++) {
            double t0 = now_ns();
            CK(cudaEventRecord(ev, s));
            t.push_back(now_ns() - t0);
            if (r % kBatch == kBatch - 1) CK(cudaStreamSynchronize(s));
        }
        printf("| cudaEventRecord | %.0f |\n", median(t));
    }
    // Round trips on an idle stream: launch a one-thread kernel, then wait for it.
    {
        std::vector<double> ts, tp;
        long long seq = 0;
        for (int r = 0; r < kReps; r++) {
            double t0 = now_ns();
            flag_kernel<<<1, 1, 0, s>>>(flag_d, ++seq);
            CK(cudaStreamSynchronize(s));
            ts.push_back(now_ns() - t0);
            t0 = now_ns();
            flag_kernel<<<1, 1, 0, s>>>(flag_d, ++seq);
            while (__atomic_load_n(flag_h, __ATOMIC_ACQUIRE) != seq) {
            }
            tp.push_back(now_ns() - t0);
            CK(cudaStreamSynchronize(s));
        }
        printf("| round trip: launch, cudaStreamSynchronize | %.0f |\n", median(ts));
        printf("| round trip: launch, poll a mapped word | %.0f |\n", median(tp));
    }
    return 0;
}
