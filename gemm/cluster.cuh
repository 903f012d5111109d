// gemm/cluster.cuh - a tap split run as one thread-block cluster per tile (sm_90): the cluster
// PTX and the reduction of the cluster's fp32 tiles through distributed shared memory.
#ifndef VC_GEMM_CLUSTER_CUH
#define VC_GEMM_CLUSTER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm/epilogue.cuh"
#include "gemm/params.cuh"
#include "gemm/ptx_sm80.cuh"

namespace vcg {

// Thread-block clusters (sm_90; never reached elsewhere: launch_mma launches a cluster kernel
// only where its binary is for compute capability 9.0 or later). cluster_sync: every thread of
// every CTA of the cluster arrives, then waits (release / acquire: shared-memory writes before it
// are visible to the whole cluster after it). cluster_map: shared address `addr` of this CTA
// mapped into the window of the cluster's CTA `rank`. ld_cluster4: 16 bytes from such an address.
__device__ __forceinline__ void cluster_sync()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank)
{
    uint32_t r = addr;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
#endif
    return r;
}
__device__ __forceinline__ float4 ld_cluster4(uint32_t addr)
{
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
#endif
    return v;
}
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}


// A cluster's tap split, after the epilogue has put each CTA's fp32 tile (group g = its rank) in
// its pipeline's shared memory at `red` (rows of ld floats): after the cluster barrier CTA g
// reads rows [bm g / S, bm (g + 1) / S) of every CTA's tile, adds them in group order (as
// split_reduce_kernel does: the same sums, bit for bit) and runs the epilogue; a second barrier
// keeps every CTA's shared memory alive until the others have read it. Every thread of every
// CTA of the cluster calls it.
__device__ __forceinline__ void cluster_reduce(const Params &p, const float *red, int ld, int bm,
                                               int bn, const int64_t *rows, int64_t tile)
{
    cluster_sync();
    const int S = p.splits, rank = (int)cluster_rank();
    const int r_lo = bm * rank / S, r_hi = bm * (rank + 1) / S;
    const int n0 = (int)(tile % p.n_tiles) * bn;
    const int cpr = bn / 8; // 8-column chunks a row
    const uint32_t base = smem_addr(red);
    for (int c = threadIdx.x; c < (r_hi - r_lo) * cpr; c += blockDim.x) {
        const int row = r_lo + c / cpr, col = (c % cpr) * 8;
        const int64_t r = rows[row];
        if (r < 0 || n0 + col >= p.n_cols) continue;
        const uint32_t off = base + (uint32_t)(row * ld + col) * 4u;
        float v[8];
        for (int s = 0; s < S; s++) {
            const uint32_t at = cluster_map(off, (uint32_t)s);
            const float4 a = ld_cluster4(at), b = ld_cluster4(at + 16);
            const float u[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = s == 0 ? u[e] : v[e] + u[e];
        }
        epilogue8(p, r, n0 + col, v);
    }
    cluster_sync();
}

} // namespace vcg

#endif
