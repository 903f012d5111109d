// gemm/gemm_kernels.cuh - the device code of gemm/gemm.cu and gemm/gemm_sm90.cu: the launch
// parameters, the per-CTA set-up (row gather/scatter indices, OR of the rows' tap masks), the fused
// epilogue, the tensor-core kernel (mma.sync m16n8k16 fp16/bf16, m16n8k8 tf32 with ldmatrix, or
// Hopper wgmma from shared-memory descriptors; multi-stage cp.async with zero-fill), its launcher,
// and the exact fp32 FMA kernel.
#ifndef VC_GEMM_KERNELS_CUH
#define VC_GEMM_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

#include <type_traits>

#include "gemm/gemm.h"
#include "gemm/wgmma.cuh"

namespace vcg {

// Largest mask word count whose OR a CTA keeps; with more words (taps > 1024) masks are ignored,
// which gives the same result (a masked tap has only -1 gathers) at the cost of the skipping.
constexpr int kMaxMaskWords = 32;

struct Params {
    int64_t m;
    int32_t n_cols, k, taps;
    const void *a;
    int64_t a_rows;
    const int32_t *gather, *gather_rows, *row_map;
    const uint32_t *masks; // NULL when not used
    int32_t mask_words;
    const void *w;
    int32_t b_taps, b_tap0;
    void *c;
    int32_t c_dtype, accumulate;
    int32_t tap_lo, tap_hi; // the taps computed, [tap_lo, tap_hi) within [0, taps)
    const float *bias;
    const void *residual;
    int32_t res_dtype, act;
    float slope;
    int32_t pair_store; // C (and residual) rows allow 2-element vector accesses
    int32_t vec8;       // n_cols % 8 == 0 and C, residual, bias 16-byte aligned
    int32_t n_tiles;    // tiles along n; tile b covers n tile b % n_tiles, m tile b / n_tiles
    int64_t m_tiles;    // tiles along m
    int32_t gchunk;     // taps of gather indices a tensor-core CTA keeps in shared memory
    int32_t gstride;    // their row stride in int32 (odd: no bank conflicts)
    int32_t epi_alias;  // one tile per CTA: the epilogue stages its slabs in the pipeline's
                        // shared memory (set by launch_mma)
    int32_t splits;     // tap split (gemm.h). In the kernel, > 1: CTA b runs group
                        // b % splits of tile b / splits, and C is the fp32 workspace [splits,
                        // m, n_cols] (row group * m + i for logical row i) with no epilogue;
                        // gemm.cu's split_reduce_kernel then adds the groups and runs the
                        // epilogue. Given to launch_mma: < -1 asks it to choose up to -splits.
    float *partial;     // the workspace (host side: launch_mma makes it C)
    const int32_t *tile_order; // tile order (gemm.h), or NULL; in the kernel: set only where
                               // each tile has its own CTA and no tap split
    int64_t order_blocks;      // its blocks
    int32_t order_per;         // in the kernel: tiles of BM rows a block holds
};

// A launch as planned (vc_gemm_plan): the tap split's groups (1: none), whether they run as
// thread-block clusters, whether a given tile order is taken (gemm.h), whether the epilogue
// stages in the pipeline's shared memory, the CTAs (without a tile order) and the dynamic shared
// memory a CTA.
struct LaunchPlan {
    int splits;
    bool clusters;
    bool orderable;
    bool epi_alias;
    int64_t grid;
    int dyn;
};

// The schedule choices of a plan (vc_gemm_args: force_order, two_pass_split).
struct Sched {
    bool force_order;
    bool two_pass;
};

// The tensor-core kernel's gather-index chunk: all taps up to 32, else 32 at a time.
constexpr int kGatherChunk = 32;

// ---- small PTX helpers ---------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

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

// cp.async of LB bytes (16: .cg, 8/4: .ca); src_bytes 0 zero-fills the destination.
template <int LB>
__device__ __forceinline__ void cp_async(uint32_t dst, const void *src, int src_bytes)
{
    size_t g = __cvta_generic_to_global(src);
    if constexpr (LB == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(g),
                     "r"(src_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(g),
                     "n"(LB), "r"(src_bytes));
    }
}

// cp.async of LB bytes that zero-fills and reads nothing where `on` is 0 (ignore-src): the
// address need not be valid then.
template <int LB>
__device__ __forceinline__ void cp_async_if(uint32_t dst, const void *src, uint32_t on)
{
    size_t g = __cvta_generic_to_global(src);
    if constexpr (LB == 16) {
        asm volatile("{\n.reg .pred z;\nsetp.eq.u32 z, %2, 0;\n"
                     "cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(dst),
                     "l"(g), "r"(on));
    } else {
        asm volatile("{\n.reg .pred z;\nsetp.eq.u32 z, %2, 0;\n"
                     "cp.async.ca.shared.global [%0], [%1], %3, z;\n}\n" ::"r"(dst),
                     "l"(g), "r"(on), "n"(LB));
    }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ uint32_t to_tf32(uint32_t x)
{
    uint32_t y;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(y) : "f"(__uint_as_float(x)));
    return y;
}

// D += A * B for one warp; T picks the instruction (k16 for 16-bit types, k8 for tf32). Not
// volatile: a register-only operation the compiler may schedule among the shared loads.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1)
{
    if constexpr (sizeof(T) == 4) {
        asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else if constexpr (std::is_same<T, __half>::value) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// ---- element access by run-time dtype --------------------------------------------------------

__device__ __forceinline__ float load_any(const void *p, int dt, int64_t i)
{
    if (dt == VC_GEMM_F16) return __half2float(static_cast<const __half *>(p)[i]);
    if (dt == VC_GEMM_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void load_any2(const void *p, int dt, int64_t i, float &x, float &y)
{
    if (dt == VC_GEMM_F16) {
        float2 f = __half22float2(*reinterpret_cast<const __half2 *>(
            static_cast<const __half *>(p) + i));
        x = f.x;
        y = f.y;
    } else if (dt == VC_GEMM_BF16) {
        float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(
            static_cast<const __nv_bfloat16 *>(p) + i));
        x = f.x;
        y = f.y;
    } else {
        float2 f = *reinterpret_cast<const float2 *>(static_cast<const float *>(p) + i);
        x = f.x;
        y = f.y;
    }
}

__device__ __forceinline__ void store_any(void *p, int dt, int64_t i, float v)
{
    if (dt == VC_GEMM_F16)
        static_cast<__half *>(p)[i] = __float2half_rn(v);
    else if (dt == VC_GEMM_BF16)
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    else
        static_cast<float *>(p)[i] = v;
}

__device__ __forceinline__ void store_any2(void *p, int dt, int64_t i, float x, float y)
{
    if (dt == VC_GEMM_F16)
        *reinterpret_cast<__half2 *>(static_cast<__half *>(p) + i) = __floats2half2_rn(x, y);
    else if (dt == VC_GEMM_BF16)
        *reinterpret_cast<__nv_bfloat162 *>(static_cast<__nv_bfloat16 *>(p) + i) =
            __floats2bfloat162_rn(x, y);
    else
        *reinterpret_cast<float2 *>(static_cast<float *>(p) + i) = make_float2(x, y);
}

__device__ __forceinline__ float activate(const Params &p, float v)
{
    if (p.act == VC_GEMM_ACT_RELU) return v > 0.f ? v : 0.f;
    if (p.act == VC_GEMM_ACT_LEAKY) return v > 0.f ? v : v * p.slope;
    return v;
}

// The epilogue of two adjacent outputs (r, n) and (r, n + 1); n is even, n < n_cols.
__device__ __forceinline__ void epilogue2(const Params &p, int64_t r, int n, float v0, float v1)
{
    const int64_t at = r * p.n_cols + n;
    const bool two = n + 1 < p.n_cols;
    if (two && p.pair_store) {
        if (p.accumulate) {
            float x, y;
            load_any2(p.c, p.c_dtype, at, x, y);
            v0 += x;
            v1 += y;
        }
        if (p.bias) {
            v0 += p.bias[n];
            v1 += p.bias[n + 1];
        }
        if (p.residual) {
            float x, y;
            load_any2(p.residual, p.res_dtype, at, x, y);
            v0 += x;
            v1 += y;
        }
        store_any2(p.c, p.c_dtype, at, activate(p, v0), activate(p, v1));
        return;
    }
    float v[2] = {v0, v1};
#pragma unroll
    for (int j = 0; j < 2; j++) {
        if (j == 1 && !two) break;
        float x = v[j];
        if (p.accumulate) x += load_any(p.c, p.c_dtype, at + j);
        if (p.bias) x += p.bias[n + j];
        if (p.residual) x += load_any(p.residual, p.res_dtype, at + j);
        store_any(p.c, p.c_dtype, at + j, activate(p, x));
    }
}

// Eight fp32 values from / to a buffer of dtype dt at element i (16-byte aligned).
__device__ __forceinline__ void load_any8(const void *p, int dt, int64_t i, float (&v)[8])
{
    if (dt == VC_GEMM_F32) {
        const float4 *q = reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
        float4 a = q[0], b = q[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
        v[7] = b.w;
        return;
    }
    uint4 u = *reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(p) + i);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 f;
        if (dt == VC_GEMM_F16)
            f = __half22float2(*reinterpret_cast<const __half2 *>(&w[e]));
        else
            f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w[e]));
        v[2 * e] = f.x;
        v[2 * e + 1] = f.y;
    }
}

__device__ __forceinline__ void store_any8(void *p, int dt, int64_t i, const float (&v)[8])
{
    if (dt == VC_GEMM_F32) {
        float4 *q = reinterpret_cast<float4 *>(static_cast<float *>(p) + i);
        q[0] = make_float4(v[0], v[1], v[2], v[3]);
        q[1] = make_float4(v[4], v[5], v[6], v[7]);
        return;
    }
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (dt == VC_GEMM_F16) {
            __half2 h = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
            w[e] = *reinterpret_cast<uint32_t *>(&h);
        } else {
            __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
            w[e] = *reinterpret_cast<uint32_t *>(&h);
        }
    }
    *reinterpret_cast<uint4 *>(static_cast<uint16_t *>(p) + i) =
        make_uint4(w[0], w[1], w[2], w[3]);
}

// The epilogue of outputs (r, n .. n + 7), n % 8 == 0, n < n_cols: 16-byte accesses when the
// eight are inside the row and p.vec8, else element by element.
__device__ __forceinline__ void epilogue8(const Params &p, int64_t r, int n, float (&v)[8])
{
    const int64_t at = r * p.n_cols + n;
    if (p.vec8 && n + 8 <= p.n_cols) {
        float x[8];
        if (p.accumulate) {
            load_any8(p.c, p.c_dtype, at, x);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] += x[e];
        }
        if (p.bias) {
            load_any8(p.bias, VC_GEMM_F32, n, x);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] += x[e];
        }
        if (p.residual) {
            load_any8(p.residual, p.res_dtype, at, x);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] += x[e];
        }
        if (p.act != VC_GEMM_ACT_NONE) {
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = activate(p, v[e]);
        }
        store_any8(p.c, p.c_dtype, at, v);
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        if (n + e >= p.n_cols) break;
        float x = v[e];
        if (p.accumulate) x += load_any(p.c, p.c_dtype, at + e);
        if (p.bias) x += p.bias[n + e];
        if (p.residual) x += load_any(p.residual, p.res_dtype, at + e);
        store_any(p.c, p.c_dtype, at + e, activate(p, x));
    }
}

// ---- CTA set-up shared by both kernels -------------------------------------------------------

// The bits of mask word w whose taps are in [tap_lo, tap_hi).
__device__ __forceinline__ uint32_t tap_bits(const Params &p, int w)
{
    const int lo = max(p.tap_lo - 32 * w, 0), hi = min(p.tap_hi - 32 * w, 32);
    if (hi <= lo) return 0u;
    return (hi == 32 ? ~0u : (1u << hi) - 1u) & ~((1u << lo) - 1u);
}

// Row gather index g (-1: row past m) and output row r of each of the CTA's BM rows; the OR of
// the rows' tap masks (when used). Returns the number of taps the CTA computes.
template <int BM, int THREADS>
__device__ __forceinline__ int cta_setup(const Params &p, int64_t m0, int64_t *row_g,
                                         int64_t *row_out, uint32_t *tile_mask)
{
    const int tid = threadIdx.x;
    for (int i = tid; i < BM; i += THREADS) {
        int64_t gi = m0 + i, g = -1, r = -1;
        if (gi < p.m) {
            g = p.gather_rows ? (int64_t)p.gather_rows[gi] : gi;
            r = p.row_map ? (int64_t)p.row_map[gi] : gi;
        }
        row_g[i] = g;
        row_out[i] = r;
    }
    const int words = (p.taps + 31) >> 5;
    if (p.masks) {
        for (int w = tid; w < words; w += THREADS) tile_mask[w] = 0u;
        __syncthreads();
        for (int i = tid; i < BM; i += THREADS) {
            int64_t r = row_out[i];
            if (r < 0) continue;
            const uint32_t *mr = p.masks + r * p.mask_words;
            for (int w = 0; w < words; w++) {
                uint32_t v = mr[w] & tap_bits(p, w); // next_tap reads only [tap_lo, tap_hi)
                if (v) atomicOr(&tile_mask[w], v);
            }
        }
    }
    __syncthreads();
    if (!p.masks) return p.tap_hi - p.tap_lo;
    int n = 0;
    for (int w = 0; w < words; w++) n += __popc(tile_mask[w] & tap_bits(p, w));
    return n;
}

// Tap split: keeps in the tile's mask the taps of group `split` - the taps of ranks
// [n split / splits, n (split + 1) / splits) among the n it has in [tap_lo, tap_hi). One thread.
__device__ __forceinline__ void keep_group(const Params &p, uint32_t *tile_mask, int words,
                                           int split)
{
    int n = 0;
    for (int w = 0; w < words; w++) n += __popc(tile_mask[w] & tap_bits(p, w));
    const int lo = n * split / p.splits, hi = n * (split + 1) / p.splits;
    int rank = 0;
    for (int w = 0; w < words; w++) {
        uint32_t v = tile_mask[w] & tap_bits(p, w), keep = 0u;
        for (; v; v &= v - 1, rank++)
            if (rank >= lo && rank < hi) keep |= v & (0u - v);
        tile_mask[w] = keep;
    }
}

// The first tap >= t that the CTA computes (taps when none). The tensor-core kernel's tile mask
// holds only taps in [tap_lo, tap_hi).
__device__ __forceinline__ int next_tap(const Params &p, const uint32_t *tile_mask, int t)
{
    if (!p.masks && p.splits <= 1) return t < p.tap_hi ? t : p.taps;
    while (t < p.tap_hi) {
        uint32_t v = tile_mask[t >> 5] >> (t & 31);
        if (v) return t + __ffs(v) - 1;
        t = (t | 31) + 1;
    }
    return p.taps;
}

// ---- the tensor-core kernel -------------------------------------------------------------------
//
// T: __half, __nv_bfloat16 or float (tf32). Tile BM x BN x BK (BK in elements), WM x WN warps,
// STAGES shared-memory stages. LB: bytes per global load: 16/8/4 through cp.async (k must be a
// multiple of LB / sizeof(T) and the A and W bases LB-aligned), 2 = 16-bit scalar loads through
// registers (any k). Shared tiles are rows of BK elements; 16-byte units are XOR-swizzled so
// that ldmatrix and the copies are free of bank conflicts.
// WG: Hopper wgmma (sm_90a only) in place of mma.sync: rows of 64 or 128 bytes (the 64- or
// 128-byte swizzle that wgmma's descriptors read), one warpgroup per 64 rows of the tile computing
// all BN columns (WM = BM / 16 warps of 16 rows, WN = 1), 16-byte loads.

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG>
struct MmaCfg {
    static constexpr int THREADS = WM * WN * 32;
    static constexpr int ES = (int)sizeof(T);
    static constexpr int ROWB = BK * ES;              // bytes per shared row
    static constexpr int UNITS = ROWB / 16;           // 16-byte units per row
    static constexpr int RPL = UNITS >= 8 ? 1 : 8 / UNITS; // rows per 128-byte line
    static constexpr int KSTEPS = ROWB / 32;          // mma k-steps (32 bytes each) per tile
    static constexpr int WTM = BM / WM, WTN = BN / WN;
    static constexpr int MI = WTM / 16, NI = WTN / 8;
    static constexpr int E = LB / ES > 0 ? LB / ES : 1; // elements per load
    static constexpr int LPR = BK / E;                // loads per row
    static constexpr int ROWS_PER_PASS = THREADS / LPR;
    // BN need not be a multiple of the rows per pass: the last pass loads the rows below BN.
    static constexpr int A_LOADS = BM / ROWS_PER_PASS;
    static constexpr int B_LOADS = (BN + ROWS_PER_PASS - 1) / ROWS_PER_PASS;
    static constexpr bool B_PARTIAL = BN % ROWS_PER_PASS != 0;
    static constexpr int STAGE_BYTES = (BM + BN) * ROWB;
    static constexpr int ALIGN = WG ? 1024 : 0; // slack to align the stages to a swizzle atom
    static constexpr int SMEM = STAGES * STAGE_BYTES + ALIGN;
    // The epilogue stages each warp's 16-row slab EPI_COLS columns at a time (wgmma: 32 of the
    // BN, so that the staging takes 18 KB of shared memory, not BN / 32 times that).
    static constexpr int EPI_COLS = WG ? 32 : WTN;
    static constexpr int EPI_LD = EPI_COLS + 4;                 // staging row stride, floats
    static constexpr int EPI_BYTES = WM * WN * 16 * EPI_LD * 4;
    // A cluster's tap split: each CTA's fp32 tile in its (idle) pipeline stages, rows of BN + 4
    // floats (16-byte aligned; the padding spreads a fragment's rows over the banks).
    static constexpr int RED_LD = BN + 4;
    static constexpr bool CLUSTER_FITS = BM * RED_LD * 4 <= SMEM;
    static_assert(ROWB % 32 == 0 && UNITS <= 8, "shared rows of 32..128 bytes");
    static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile of 16 x 16 at least");
    static_assert(THREADS % LPR == 0 && BM % ROWS_PER_PASS == 0, "load mapping");
    static_assert(LB != 2 || ES == 2, "scalar loads are for 16-bit types");
    static_assert(STAGES >= 2, "two stages at least");
    static_assert(EPI_COLS % 16 == 0, "the staged epilogue reads 8-column chunks, 32 a warp");
    static_assert(!WG || ((ROWB == 128 || ROWB == 64) && WN == 1 && WM * 16 == BM &&
                          BM % 64 == 0 && LB == 16 && (BN == 64 || BN == 128 || BN == 256)),
                  "wgmma tiles: 64/128-byte rows, one warpgroup per 64 rows, N of 64, 128 or 256");
};

// Byte offset of 16-byte unit u of row `row` in a tile with UNITS units per row.
template <int UNITS, int RPL>
__device__ __forceinline__ uint32_t swz(int row, int u)
{
    return (uint32_t)(row * UNITS * 16 + ((u ^ ((row / RPL) % UNITS)) << 4));
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

// Persistent: CTA b computes tiles b, b + gridDim.x, ... (n fastest), and one cp.async pipeline
// runs across its tiles, so the loads of the next tile are in flight during the epilogue of
// this one. The producer (the loads, STAGES - 1 iterations ahead) sets each tile up when it
// reaches it: gather rows, output rows (a ring of STAGES slots, read by the epilogue), the OR of
// the rows' masks and the gather indices of up to p.gchunk taps in shared memory. A tile whose
// taps are all masked runs one iteration of zeros, so every tile has at least one iteration
// and the producer is never more than STAGES - 1 tiles ahead.
// CL: the cluster kernel of a tap split (launch_mma): CTA b is rank b % splits of a cluster of
// p.splits CTAs, runs group b % splits of tile b / splits, and C is the real output: the
// epilogue puts the fp32 tile in shared memory and cluster_reduce adds the cluster's tiles and
// runs the epilogue. A separate instantiation for the tiles that split (gemm.cu's table): as a
// run-time branch in every kernel, its code perturbed the register allocation of the main loop
// (the register-capped 64x64x32_s3 spilled 8-80 bytes, 64x64x32_s4 went from 95 to 96-128
// registers, 128x32x32_s4 from 80 to 93).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CL = false>
__global__ void __launch_bounds__(WM *WN * 32, MINB > 1 ? MINB : 0)
    mma_kernel(const Params p)
{
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG>;
    static_assert(!CL || C::CLUSTER_FITS, "a cluster split needs the fp32 tile to fit the stages");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
    if constexpr (CL) return; // never launched there (no clusters before sm_90)
#endif
    constexpr bool cl = CL; // (a name, not CL itself: that reorders a tf32 kernel's SASS)
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ int64_t row_g[BM];
    __shared__ int64_t row_out[STAGES][BM];
    __shared__ int32_t tile_iters[STAGES];
    __shared__ uint32_t tile_mask[kMaxMaskWords];
    // Epilogue staging: its own region, or (p.epi_alias: the CTA has one tile) the pipeline's
    // stages, which are idle by then; the gather indices follow.
    const int epi_own = p.epi_alias ? 0 : C::EPI_BYTES;
    float *stage = reinterpret_cast<float *>(smem + (p.epi_alias ? 0 : C::SMEM));
    int32_t *gidx = reinterpret_cast<int32_t *>(smem + C::SMEM + epi_own); // [BM][gstride]

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t n_total = p.m_tiles * p.n_tiles;
    const int kc_per_tap = (p.k + BK - 1) / BK;
    const int words = (p.taps + 31) >> 5;
    const T *A = static_cast<const T *>(p.a);
    const T *W = static_cast<const T *>(p.w);
    // wgmma's 128-byte swizzle is a function of the address: stages start on 1024-byte atoms.
    const uint32_t s_base = WG ? (smem_addr(smem) + 1023u) & ~1023u : smem_addr(smem);

    // Load mapping: this thread's load column (fixed) and rows lrow + j * ROWS_PER_PASS.
    const int lcol = tid % C::LPR, lrow = tid / C::LPR;
    const int byte_in_row = lcol * C::E * C::ES;
    const int unit = byte_in_row >> 4, within = byte_in_row & 15;

    // Tap split: the CTA's one tile; its group (blockIdx.x % splits) is read where it is used.
    // Tile order: CTA b takes m tile j = b / n_tiles of the blocks in their order (block
    // tile_order[j / order_per], its tile j % order_per) and n tile b % n_tiles; a CTA whose
    // tile is past the rows (a short last block) has nothing to do.
    int64_t first_tile = p.splits > 1 ? blockIdx.x / (unsigned)p.splits : blockIdx.x;
    if (!cl && p.tile_order) {
        const unsigned j = blockIdx.x / (unsigned)p.n_tiles, per = (unsigned)p.order_per;
        const int64_t mt = (int64_t)__ldg(p.tile_order + j / per) * per + j % per;
        if (mt >= p.m_tiles) return;
        first_tile = mt * p.n_tiles + blockIdx.x % (unsigned)p.n_tiles;
    }

    // Producer state.
    int64_t ld_tile = first_tile;
    int ld_slot = -1, ld_iter = 0, ld_iters = 0, ld_tap = 0, ld_kc = 0, cur_tap = -1;
    int g_t0 = 0, g_n = 0; // taps [g_t0, g_t0 + g_n) are in gidx
    bool dummy = false;
    // The loads' sources as byte addresses of this thread's column at k chunk 0 of the current
    // tap, so that an iteration adds one uniform offset (the chunk's bytes) to each: A's row
    // for the tap (bit j of ld_ok: the row has one) and W[n, b_tap0 + tap] (bit 16 + j: n <
    // n_cols and the tile has a tap). Set at the tile's set-up (W at tap 0) and when the tap
    // changes. A load whose bit is clear zero-fills and reads nothing (cp.async's ignore-src), so
    // its address need not be valid and is not selected away. One word of flags, not a
    // register per load: the small tiles run with registers capped (MINB).
    const char *a_src[C::A_LOADS];
    const char *b_src[C::B_LOADS];
    uint32_t ld_ok = 0;
    static_assert(C::A_LOADS <= 16 && C::B_LOADS <= 16, "ld_ok's bits");
    int ld_stage = 0;

    auto setup_tile = [&]() {
        __syncthreads(); // nobody still reads the previous tile's producer data
        ld_slot = ld_slot + 1 == STAGES ? 0 : ld_slot + 1;
        const int64_t m0 = (ld_tile / p.n_tiles) * BM;
        const int n0 = (int)(ld_tile % p.n_tiles) * BN;
        // The tile's mask (a tap split walks one too: all taps without masks) is cleared, then
        // each row sets its gather row, its output row (a tap split: its row of the workspace)
        // and ORs in its mask.
        const bool masked = p.masks || p.splits > 1;
        if (masked) { // only the taps in [tap_lo, tap_hi): next_tap need not mask them
            for (int w = tid; w < words; w += C::THREADS)
                tile_mask[w] = p.masks ? 0u : tap_bits(p, w);
            __syncthreads();
        }
        for (int i = tid; i < BM; i += C::THREADS) {
            int64_t gi = m0 + i, g = -1, r = -1;
            if (gi < p.m) {
                g = p.gather_rows ? (int64_t)p.gather_rows[gi] : gi;
                r = p.row_map ? (int64_t)p.row_map[gi] : gi;
                if (p.masks && r >= 0) { // a row without output (-1) has no mask
                    const uint32_t *mr = p.masks + r * p.mask_words;
                    for (int w = 0; w < words; w++) {
                        uint32_t v = __ldg(mr + w) & tap_bits(p, w);
                        if (v) atomicOr(&tile_mask[w], v);
                    }
                }
                if (p.splits > 1 && !cl)
                    r = (int64_t)(blockIdx.x % (unsigned)p.splits) * p.m + gi;
            }
            row_g[i] = g;
            row_out[ld_slot][i] = r;
        }
        __syncthreads();
        if (p.splits > 1) {
            if (tid == 0) keep_group(p, tile_mask, words, (int)(blockIdx.x % (unsigned)p.splits));
            __syncthreads();
        }
        int active = p.tap_hi - p.tap_lo;
        if (masked) {
            active = 0;
            for (int w = 0; w < words; w++) active += __popc(tile_mask[w]);
        }
        ld_iters = active * kc_per_tap;
        dummy = ld_iters == 0;
        if (dummy) ld_iters = 1;
        if (tid == 0) tile_iters[ld_slot] = ld_iters;
        ld_iter = 0;
        ld_kc = 0;
        ld_tap = dummy ? p.tap_lo : next_tap(p, tile_mask, p.tap_lo);
        cur_tap = -1;
        g_n = 0;
        ld_ok = 0;
#pragma unroll
        for (int j = 0; j < C::B_LOADS; j++) {
            const int n = n0 + lrow + j * C::ROWS_PER_PASS;
            const bool ok = n < p.n_cols && !dummy;
            b_src[j] = reinterpret_cast<const char *>(
                W + (ok ? ((int64_t)n * p.b_taps + p.b_tap0) * p.k : 0) + lcol * C::E);
            ld_ok |= (uint32_t)ok << (16 + j);
        }
        __syncthreads(); // tile_iters and row_out visible to every thread
    };

    // Gather indices of taps [t, t + gchunk) for the tile's rows into gidx. A row's taps are
    // contiguous in the gather table, so a warp reads 32 / gw rows at a time, gw lanes (g_n
    // rounded up to a power of two) per row: coalesced, no integer division, eight loads in
    // flight per lane.
    auto load_gidx = [&](int t) {
        __syncthreads();
        g_t0 = t;
        g_n = min(p.gchunk, p.tap_hi - t);
        const int lsh = g_n <= 1 ? 0 : 32 - __clz(g_n - 1); // log2 of gw
        const int tap = lane & ((1 << lsh) - 1);
        const int step = (C::THREADS / 32) << (5 - lsh);     // rows per pass of the CTA
        const int r0 = (warp << (5 - lsh)) + (lane >> lsh);
        if (p.masks || p.splits > 1) {
            // A CTA with one tile (nothing of another tile in flight): cp.async copies every
            // index at once, no register staging, so the set-up waits one round trip for them
            // (the batches below wait one each: four for a two-warp 64-row tile). Raw values:
            // the use checks the range.
            if (tap < g_n) {
#pragma unroll 4
                for (int row = r0; row < BM; row += step) {
                    const int64_t g = row_g[row];
                    if (g >= 0)
                        cp_async<4>(smem_addr(gidx + row * p.gstride + tap),
                                    p.gather + g * p.taps + t + tap, 4);
                    else
                        gidx[row * p.gstride + tap] = -1;
                }
            }
            cp_async_commit(); // an extra group, complete before any later one: counts stay right
            cp_async_wait<0>();
            __syncthreads();
            return;
        }
        for (int rb = r0; rb < BM; rb += 8 * step) {
            int32_t v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int row = rb + u * step;
                v[u] = -1;
                if (row < BM && tap < g_n) {
                    const int64_t g = row_g[row];
                    if (g >= 0) v[u] = __ldg(p.gather + g * p.taps + t + tap);
                }
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int row = rb + u * step;
                // Raw values, as the cp.async path stages them: the use checks the range (a
                // check here, next to its load, would make each load wait for the one before).
                if (row < BM && tap < g_n) gidx[row * p.gstride + tap] = v[u];
            }
        }
        __syncthreads();
    };

    // Issues the loads of the producer's next iteration into stage ld_stage.
    auto load_stage = [&]() {
        if (ld_iter == 0) setup_tile();
        if (ld_tap != cur_tap) {
            const int prev_tap = cur_tap;
            cur_tap = ld_tap;
            ld_ok &= 0xffff0000u;
            if (p.gather && !dummy && (cur_tap < g_t0 || cur_tap >= g_t0 + g_n))
                load_gidx(cur_tap);
            const char *const a_col = reinterpret_cast<const char *>(A + lcol * C::E);
            if (p.gather) {
                // Staged gather indices are 32-bit: one unsigned compare rejects -1 and indices
                // past a_rows (both read zeros), one wide multiply-add makes the address (a
                // row's bytes, k * ES, fit 32 bits: k <= 2^27, gemm.h).
                const int32_t *gr = gidx + lrow * p.gstride + cur_tap - g_t0;
                const int kb = p.k * C::ES;
                const uint32_t rows = p.a_rows < INT32_MAX ? (uint32_t)p.a_rows : INT32_MAX;
#pragma unroll
                for (int j = 0; j < C::A_LOADS; j++) {
                    const int32_t idx = gr[j * C::ROWS_PER_PASS * p.gstride];
                    const bool ok = (uint32_t)idx < rows && !dummy;
                    a_src[j] = a_col + (int64_t)(ok ? idx : 0) * kb;
                    ld_ok |= (uint32_t)ok << j;
                }
            } else {
#pragma unroll
                for (int j = 0; j < C::A_LOADS; j++) {
                    const int64_t g = row_g[lrow + j * C::ROWS_PER_PASS];
                    const bool ok = g >= 0 && g < p.a_rows && !dummy;
                    a_src[j] = a_col + (ok ? g * p.k * C::ES : 0);
                    ld_ok |= (uint32_t)ok << j;
                }
            }
            // W moves from the previous tap (tap 0 at the tile's first: prev is -1) to this one.
            const int64_t db = (int64_t)(cur_tap - max(prev_tap, 0)) * p.k * C::ES;
#pragma unroll
            for (int j = 0; j < C::B_LOADS; j++) b_src[j] += db;
        }
        const int kc_bytes = ld_kc * BK * C::ES;
        const uint32_t on = ld_kc * BK + lcol * C::E < p.k ? ld_ok : 0u; // k % E == 0 (cp.async)
        const uint32_t sa = s_base + ld_stage * C::STAGE_BYTES;
        const uint32_t sb = sa + BM * C::ROWB;
        if constexpr (LB >= 4) {
#pragma unroll
            for (int j = 0; j < C::A_LOADS; j++) {
                const int row = lrow + j * C::ROWS_PER_PASS;
                cp_async_if<LB>(sa + swz<C::UNITS, C::RPL>(row, unit) + within,
                                a_src[j] + kc_bytes, on & 1u << j);
            }
#pragma unroll
            for (int j = 0; j < C::B_LOADS; j++) {
                const int row = lrow + j * C::ROWS_PER_PASS;
                if (C::B_PARTIAL && row >= BN) break;
                cp_async_if<LB>(sb + swz<C::UNITS, C::RPL>(row, unit) + within,
                                b_src[j] + kc_bytes, on & 1u << (16 + j));
            }
        } else {
            uint16_t va[C::A_LOADS], vb[C::B_LOADS];
#pragma unroll
            for (int j = 0; j < C::A_LOADS; j++)
                va[j] = on & 1u << j
                            ? __ldg(reinterpret_cast<const uint16_t *>(a_src[j] + kc_bytes))
                            : (uint16_t)0;
#pragma unroll
            for (int j = 0; j < C::B_LOADS; j++)
                vb[j] = on & 1u << (16 + j)
                            ? __ldg(reinterpret_cast<const uint16_t *>(b_src[j] + kc_bytes))
                            : (uint16_t)0;
#pragma unroll
            for (int j = 0; j < C::A_LOADS; j++) {
                int row = lrow + j * C::ROWS_PER_PASS;
                uint32_t d = sa + swz<C::UNITS, C::RPL>(row, unit) + within;
                asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(d), "h"(va[j]));
            }
#pragma unroll
            for (int j = 0; j < C::B_LOADS; j++) {
                int row = lrow + j * C::ROWS_PER_PASS;
                if (C::B_PARTIAL && row >= BN) break;
                uint32_t d = sb + swz<C::UNITS, C::RPL>(row, unit) + within;
                asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(d), "h"(vb[j]));
            }
        }
        ld_stage = ld_stage + 1 == STAGES ? 0 : ld_stage + 1;
        if (++ld_iter == ld_iters) {
            ld_iter = 0;
            ld_tile += gridDim.x;
        } else if (++ld_kc == kc_per_tap) {
            ld_kc = 0;
            ld_tap = next_tap(p, tile_mask, ld_tap + 1);
        }
    };

    float acc[C::MI][C::NI][4];
#pragma unroll
    for (int i = 0; i < C::MI; i++)
#pragma unroll
        for (int j = 0; j < C::NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    const int wm0 = (warp / WN) * C::WTM, wn0 = (warp % WN) * C::WTN;
    // ldmatrix addresses within a stage: this lane's row of the warp's first 16-row A slab and
    // of its first 16-row B slab, at k-step 0. A slab 16 rows down is 16 * ROWB bytes further
    // (the swizzle's pattern repeats every UNITS * RPL <= 16 rows), and k-step ks flips bit 5
    // (unit 2 ks + c = (2 ks) ^ c, units are bits 4.. of an offset, stages are 128-aligned).
    static_assert((16 / C::RPL) % C::UNITS == 0 && 2 * C::KSTEPS <= C::UNITS, "ldmatrix steps");
    const uint32_t a_ld = swz<C::UNITS, C::RPL>(wm0 + (lane & 15), lane >> 4);
    const uint32_t b_ld = swz<C::UNITS, C::RPL>(wn0 + (lane & 7) + ((lane >> 4) << 3),
                                                (lane >> 3) & 1) + BM * C::ROWB;

#pragma unroll 1
    for (int s = 0; s < STAGES - 1; s++) {
        if (ld_tile < n_total) load_stage();
        cp_async_commit();
    }
    // Consumer state: the tile, its ring slot, the iteration within it.
    int64_t c_tile = first_tile;
    int c_slot = 0, c_iter = 0, c_iters = tile_iters[0], c_stage = 0;
    for (;;) {
        cp_async_wait<STAGES - 2>();
        const uint32_t sa = s_base + c_stage * C::STAGE_BYTES;
        const uint32_t sb = sa + BM * C::ROWB;
        c_stage = c_stage + 1 == STAGES ? 0 : c_stage + 1;
        if constexpr (WG) {
            // tf32: wgmma reads fp32 words and drops their low 13 bits; round the words this
            // thread copied to nearest (as cvt.rna for mma.sync) before the tensor cores see them.
            if constexpr (sizeof(T) == 4) {
#pragma unroll
                for (int j = 0; j < C::A_LOADS + C::B_LOADS; j++) {
                    const bool is_a = j < C::A_LOADS;
                    const int row = lrow + (is_a ? j : j - C::A_LOADS) * C::ROWS_PER_PASS;
                    if (C::B_PARTIAL && !is_a && row >= BN) break;
                    const uint32_t at = (is_a ? sa : sb) + swz<C::UNITS, C::RPL>(row, unit);
                    uint32_t v[4];
                    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                                 : "r"(at));
                    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(at),
                                 "r"(to_tf32(v[0])), "r"(to_tf32(v[1])), "r"(to_tf32(v[2])),
                                 "r"(to_tf32(v[3])));
                }
            }
            // The rounded words (st.shared, the generic proxy) are for the tensor cores (the
            // async proxy): a proxy fence in each writing thread, then the barrier. cp.async
            // data needs none: its completion (wait_group) and the barrier order it.
            if constexpr (sizeof(T) == 4) fence_proxy_async();
        }
        __syncthreads();
        if constexpr (WG) {
            // The warpgroup's 64 rows of A against all BN rows of B, KSTEPS k-steps of 32
            // bytes (the descriptor's start address advances 2 units of 16 bytes a step); the
            // loads of the next stage are issued while the tensor cores run.
            const uint64_t da = wg_desc<C::ROWB>(sa + (warp >> 2) * 64 * C::ROWB);
            const uint64_t db = wg_desc<C::ROWB>(sb);
            wg_fence_acc(acc[0]);
            wg_fence();
#pragma unroll
            for (int ks = 0; ks < C::KSTEPS; ks++) wgmma<T, BN>(acc[0], da + 2 * ks, db + 2 * ks);
            wg_commit();
        }
        if (ld_tile < n_total) load_stage();
        cp_async_commit();
        if constexpr (WG) {
            wg_wait0();
            wg_fence_acc(acc[0]);
        } else {
#pragma unroll
        for (int ks = 0; ks < C::KSTEPS; ks++) {
            uint32_t af[C::MI][4], bf[C::NI][2];
#pragma unroll
            for (int i = 0; i < C::MI; i++)
                ldmatrix_x4(af[i], ((sa + a_ld) ^ (ks << 5)) + i * 16 * C::ROWB);
#pragma unroll
            for (int j = 0; j < C::NI; j += 2) {
                uint32_t r[4];
                ldmatrix_x4(r, ((sa + b_ld) ^ (ks << 5)) + j * 8 * C::ROWB);
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
            if constexpr (sizeof(T) == 4) {
#pragma unroll
                for (int i = 0; i < C::MI; i++)
#pragma unroll
                    for (int e = 0; e < 4; e++) af[i][e] = to_tf32(af[i][e]);
#pragma unroll
                for (int j = 0; j < C::NI; j++) {
                    bf[j][0] = to_tf32(bf[j][0]);
                    bf[j][1] = to_tf32(bf[j][1]);
                }
            }
#pragma unroll
            for (int i = 0; i < C::MI; i++)
#pragma unroll
                for (int j = 0; j < C::NI; j++) mma<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
        }
        if (++c_iter < c_iters) continue;

        // Epilogue: each warp stages a 16-row slab of its fragments (lane: rows g, g + 8,
        // columns 2q, 2q + 1), EPI_COLS columns at a time, in shared memory and reads it back
        // as 8-column chunks, so that the epilogue runs once per 8 outputs with 16-byte accesses.
        // A cluster's tap split (the CTA's one tile) instead puts each slab in its place in the
        // CTA's fp32 tile at the start of the stages (rows of RED_LD floats) and reads nothing
        // back: cluster_reduce adds the cluster's tiles below.
        if (p.epi_alias || cl) { // the staging overwrites the stages: every copy and read done
            cp_async_wait<0>();
            __syncthreads();
        }
        {
            const int g = lane >> 2, q = lane & 3;
            const int n0 = (int)(c_tile % p.n_tiles) * BN;
            const int ld = cl ? C::RED_LD : C::EPI_LD;
            float *ws = cl ? reinterpret_cast<float *>(smem) + wm0 * C::RED_LD + wn0
                           : stage + warp * 16 * C::EPI_LD;
            constexpr int CPR = C::EPI_COLS / 8; // chunks per slab row
#pragma unroll
            for (int i = 0; i < C::MI; i++)
#pragma unroll
            for (int j0 = 0; j0 < C::NI; j0 += CPR) {
                float *wsl = cl ? ws + i * 16 * C::RED_LD + j0 * 8 : ws;
#pragma unroll
                for (int j = 0; j < CPR; j++) {
                    *reinterpret_cast<float2 *>(wsl + g * ld + j * 8 + 2 * q) =
                        make_float2(acc[i][j0 + j][0], acc[i][j0 + j][1]);
                    *reinterpret_cast<float2 *>(wsl + (g + 8) * ld + j * 8 + 2 * q) =
                        make_float2(acc[i][j0 + j][2], acc[i][j0 + j][3]);
                }
                if (cl) continue;
                __syncwarp();
#pragma unroll
                for (int u = 0; u < 16 * CPR / 32; u++) {
                    const int c = lane + 32 * u, row = c / CPR, col = (c % CPR) * 8;
                    const int64_t r = row_out[c_slot][wm0 + i * 16 + row];
                    const int n = n0 + wn0 + j0 * 8 + col;
                    if (r >= 0 && n < p.n_cols) {
                        const float4 *src = reinterpret_cast<const float4 *>(
                            ws + row * C::EPI_LD + col);
                        float4 a = src[0], b = src[1];
                        float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
                        epilogue8(p, r, n, v);
                    }
                }
                __syncwarp();
            }
        }
#pragma unroll
        for (int i = 0; i < C::MI; i++)
#pragma unroll
            for (int j = 0; j < C::NI; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
        if (cl) break; // one tile per CTA: the cluster adds its groups' sums below
        c_tile += gridDim.x;
        if (c_tile >= n_total) break;
        c_slot = c_slot + 1 == STAGES ? 0 : c_slot + 1;
        c_iter = 0;
        c_iters = tile_iters[c_slot];
    }
    if constexpr (cl)
        cluster_reduce(p, reinterpret_cast<const float *>(smem), C::RED_LD, BM, BN,
                       row_out[c_slot], c_tile);
    cp_async_wait<0>();
}

// Host-side caches per device (attributes read once, shared-memory opt-ins set once), safe when
// several host threads launch at once: relaxed atomics, and every writer of a device's slot
// stores the same value. Devices past the table are not cached (asked every time).
constexpr int kMaxCachedDevices = 64;

// Whether this device's bit is set in `flags`; done() sets it.
struct DeviceFlags {
    std::atomic<unsigned long long> bits{0};
    bool has(int dev) const
    {
        return dev >= 0 && dev < kMaxCachedDevices &&
               (bits.load(std::memory_order_relaxed) >> dev & 1ull);
    }
    void done(int dev)
    {
        if (dev >= 0 && dev < kMaxCachedDevices)
            bits.fetch_or(1ull << dev, std::memory_order_relaxed);
    }
};

// A positive int per device, 0 while unknown.
struct DeviceInts {
    std::atomic<int> v[kMaxCachedDevices];
    int get(int dev) const
    {
        return dev >= 0 && dev < kMaxCachedDevices ? v[dev].load(std::memory_order_relaxed) : 0;
    }
    void put(int dev, int x)
    {
        if (dev >= 0 && dev < kMaxCachedDevices) v[dev].store(x, std::memory_order_relaxed);
    }
};

// Multiprocessor count of the current device, cached per device.
inline cudaError_t sm_count(int *count)
{
    static DeviceInts cache; // static storage: zero before first use
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if ((*count = cache.get(dev)) > 0) return cudaSuccess;
    e = cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess && *count > 0) cache.put(dev, *count);
    return e;
}

// The tensor-core kernel runs a persistent grid: as many CTAs as fit on the device at once, or
// the tile count if smaller.
// MINB: CTAs per SM the register allocation must allow (__launch_bounds__), for tiles whose
// shared memory would let more CTAs in than their registers do.
// Tap split: the groups of an automatic split (p.splits < -1): enough to fill the CTAs the
// device holds at once (slots), rounded, at most -p.splits; else p.splits itself (1 at least).
// can_cluster (the tile has a cluster kernel that runs here): *clusters tells whether the split
// runs as clusters. An automatic one then takes as many groups as one wave holds, rounded down,
// at most 8, and does not split where that is 1: a cluster's CTAs wait for each other at the
// end, so a second wave's CTA would hold its cluster's finished CTAs on their SMs. H200, A/B of
// the three rules against the two-pass split (docs/benchmarks.md "Tap splits as clusters"):
// rounded to the nearest, 5 layers 4-10% slower than two-pass; rounded down with a two-pass
// fallback below 2 groups, network sums 0.95-0.99; this rule, 0.94-0.98 (two layers 5% and 9%
// slower, MinkUNet 384->256 at 3k outputs and 160->160 at 5k).
inline int resolve_splits(const Params &p, int64_t tiles, int64_t slots, bool can_cluster,
                          bool *clusters)
{
    *clusters = false;
    if (p.splits >= -1) {
        const int s = p.splits > 1 ? p.splits : 1;
        *clusters = can_cluster && s >= 2 && s <= 8;
        return s;
    }
    const int64_t most = can_cluster && -p.splits > 8 ? 8 : -p.splits;
    const int64_t s = can_cluster ? slots / tiles : (slots + tiles / 2) / tiles;
    *clusters = can_cluster && s >= 2;
    return s < 1 ? 1 : s > most ? (int)most : (int)s;
}

// Tap split: the parameters of the first pass - C is the workspace, plain fp32 sums.
inline void split_pass(Params &q, int splits)
{
    q.splits = splits;
    q.c = q.partial;
    q.c_dtype = VC_GEMM_F32;
    q.accumulate = 0;
    q.bias = nullptr;
    q.residual = nullptr;
    q.res_dtype = VC_GEMM_F32;
    q.act = VC_GEMM_ACT_NONE;
    q.pair_store = q.n_cols % 2 == 0;
    q.vec8 = q.n_cols % 8 == 0;
}

// The launch of a tensor-core configuration on the current device (*out), launching nothing.
// CLUSTER: the tile has a cluster kernel (mma_kernel's CL) for its tap splits.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CLUSTER = false>
cudaError_t plan_mma(const Params &p, const Sched &sc, LaunchPlan *out)
{
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG>;
    auto kern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB>;
    const int max_dyn = C::SMEM + C::EPI_BYTES + BM * (kGatherChunk + 1) * 4;
    const int dyn = C::SMEM + C::EPI_BYTES + (p.gather ? BM * p.gstride * 4 : 0);
    // Shared memory past 48 KB needs the opt-in, once per device and kernel (concurrent
    // callers may both set it: the same value).
    static DeviceFlags set_on;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    if (!set_on.has(dev)) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, max_dyn);
        if (e != cudaSuccess) return e;
        set_on.done(dev);
    }
    // A CTA per tile (masks, a tap split) has no next tile to prefetch during its epilogue, so
    // the epilogue's staging can reuse the pipeline's shared memory: 5-9 KB less per CTA on the
    // small tiles, one or two CTAs more per SM (the implicit GEMM is latency-bound: occupancy is
    // what it runs on).
    const bool one_tile = p.masks || p.splits < -1 || p.splits > 1;
    const bool can_alias = C::EPI_BYTES <= C::SMEM;
    int sms = 0, per_sm = 0;
    if ((e = sm_count(&sms)) != cudaSuccess) return e;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, kern, C::THREADS, one_tile && can_alias ? dyn - C::EPI_BYTES : dyn);
    if (e != cudaSuccess) return e;
    if (per_sm < 1) per_sm = 1;
    const int64_t tiles = p.m_tiles * p.n_tiles;
    // A tap split of at most 8 groups (a portable cluster), where the cluster kernel's binary is
    // for compute capability 9.0 or later, runs each tile's groups as one cluster: no workspace
    // round trip, no second launch. Where the launch is refused (a cluster that cannot be
    // placed), the two-pass split runs instead.
    bool can_cluster = false, clusters = false;
    if constexpr (CLUSTER) {
        static DeviceInts bin_cc; // the cluster kernel binary's compute capability x 10
        auto ckern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, true>;
        int cc = bin_cc.get(dev);
        if ((p.splits > 1 || p.splits < -1) && cc == 0) {
            cudaFuncAttributes fa;
            if (cudaFuncGetAttributes(&fa, ckern) == cudaSuccess && fa.binaryVersion > 0) {
                cc = fa.binaryVersion;
                bin_cc.put(dev, cc);
            } else {
                (void)cudaGetLastError();
            }
        }
        can_cluster = cc >= 90 && !sc.two_pass;
    }
    const int splits = resolve_splits(p, tiles, (int64_t)sms * per_sm, can_cluster, &clusters);
    // With masks (the implicit-GEMM convolution) tiles differ in cost by the taps they skip, and
    // a CTA per tile - the hardware hands the next tile to whichever CTA finishes - beat the
    // persistent grid's fixed round robin on every layer measured (bench_conv --tune; equal on
    // the small layers; gemm/NOTES.md). A tap split runs a CTA per group of each tile.
    const int64_t units = tiles * splits;
    const int64_t grid = one_tile || tiles < (int64_t)sms * per_sm ? units : (int64_t)sms * per_sm;
    // Tile order: where each tile has its own CTA, no split, BM divides the blocks, and the
    // tiles make more than a wave and a quarter (below that every tile starts at once, and the
    // order's load only lengthens each CTA's chain of dependent loads).
    out->splits = splits;
    out->clusters = clusters;
    out->orderable = splits == 1 && grid == units && VC_GEMM_ORDER_ROWS % BM == 0 &&
                     (tiles * 4 > (int64_t)sms * per_sm * 5 || sc.force_order);
    out->epi_alias = grid == units && can_alias;
    out->grid = grid;
    out->dyn = out->epi_alias ? dyn - C::EPI_BYTES : dyn;
    return cudaSuccess;
}

// Launches a plan of plan_mma. *left: the groups whose sums the caller must still add (1: none
// - no split, or the split ran as clusters, which add their own; else the caller's second
// pass).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CLUSTER = false>
cudaError_t launch_mma(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left)
{
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG>;
    auto kern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB>;
    *left = pl.splits;
    Params q = p;
    q.splits = 1;
    q.epi_alias = pl.epi_alias;
    int64_t grid = pl.grid;
    // With a tile order the grid covers whole blocks (the CTAs past the rows return at once).
    q.tile_order = nullptr;
    q.order_per = 0;
    if (pl.orderable && p.tile_order) {
        q.tile_order = p.tile_order;
        q.order_per = VC_GEMM_ORDER_ROWS / BM;
        grid = p.order_blocks * q.order_per * p.n_tiles;
    }
    if constexpr (CLUSTER) {
        if (pl.clusters) {
            auto ckern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, true>;
            static DeviceFlags cset_on;
            int dev = 0;
            cudaError_t e = cudaGetDevice(&dev);
            if (e != cudaSuccess) return e;
            if (!cset_on.has(dev)) {
                const int max_dyn = C::SMEM + C::EPI_BYTES + BM * (kGatherChunk + 1) * 4;
                e = cudaFuncSetAttribute(ckern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         max_dyn);
                if (e != cudaSuccess) return e;
                cset_on.done(dev);
            }
            Params qc = q;
            qc.splits = pl.splits;
            cudaLaunchConfig_t lc = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = (unsigned)pl.splits;
            at[0].val.clusterDim.y = 1;
            at[0].val.clusterDim.z = 1;
            lc.gridDim = dim3((unsigned)grid);
            lc.blockDim = dim3(C::THREADS);
            lc.dynamicSmemBytes = (size_t)pl.dyn;
            lc.stream = s;
            lc.attrs = at;
            lc.numAttrs = 1;
            if (cudaLaunchKernelEx(&lc, ckern, qc) == cudaSuccess) {
                *left = 1;
                return cudaSuccess;
            }
            (void)cudaGetLastError(); // refused at launch: nothing ran
        }
    }
    if (pl.splits > 1) split_pass(q, pl.splits);
    kern<<<(unsigned)grid, C::THREADS, pl.dyn, s>>>(q);
    return cudaGetLastError();
}

// ---- the exact fp32 kernel ------------------------------------------------------------------
//
// BM x BN tile, BK-deep k chunks, each thread TM x TN outputs accumulated with fmaf. Each k chunk
// is summed into a fresh partial before it joins the total (shorter rounding chains for long
// k * taps). Loads go through registers one chunk ahead of the compute.

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    simt_kernel(const Params p)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int ROWS_PER_PASS = THREADS / BK;
    constexpr int A_LOADS = BM / ROWS_PER_PASS, B_LOADS = BN / ROWS_PER_PASS;
    static_assert(THREADS % BK == 0 && BM % ROWS_PER_PASS == 0 && BN % ROWS_PER_PASS == 0,
                  "load mapping");
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float Bs[BK][BN + 4];
    __shared__ int64_t row_g[BM], row_out[BM];
    __shared__ uint32_t tile_mask[kMaxMaskWords];

    const int tid = threadIdx.x;
    const int n_tile = (int)(blockIdx.x % (unsigned)p.n_tiles);
    const int64_t m0 = (int64_t)(blockIdx.x / (unsigned)p.n_tiles) * BM;
    const int n0 = n_tile * BN;
    const int active = cta_setup<BM, THREADS>(p, m0, row_g, row_out, tile_mask);
    const int kc_per_tap = (p.k + BK - 1) / BK;
    const int total = active * kc_per_tap;

    const float *A = static_cast<const float *>(p.a);
    const float *W = static_cast<const float *>(p.w);
    const int lcol = tid % BK, lrow = tid / BK;
    int64_t a_off[A_LOADS], b_off[B_LOADS];
#pragma unroll
    for (int j = 0; j < B_LOADS; j++) {
        int n = n0 + lrow + j * ROWS_PER_PASS;
        b_off[j] = n < p.n_cols ? ((int64_t)n * p.b_taps + p.b_tap0) * p.k : -1;
    }
    int ld_tap = next_tap(p, tile_mask, p.tap_lo), ld_kc = 0, cur_tap = -1;
    float ra[A_LOADS], rb[B_LOADS];
    auto load_regs = [&]() {
        if (ld_tap != cur_tap) {
            cur_tap = ld_tap;
#pragma unroll
            for (int j = 0; j < A_LOADS; j++) {
                int64_t g = row_g[lrow + j * ROWS_PER_PASS], off = -1;
                if (g >= 0) {
                    int64_t idx = p.gather ? (int64_t)__ldg(p.gather + g * p.taps + cur_tap) : g;
                    if (idx >= 0 && idx < p.a_rows) off = idx * p.k;
                }
                a_off[j] = off;
            }
        }
        const int col = ld_kc * BK + lcol;
        const bool col_ok = col < p.k;
        const int64_t w_tap = (int64_t)cur_tap * p.k + col;
#pragma unroll
        for (int j = 0; j < A_LOADS; j++)
            ra[j] = (col_ok && a_off[j] >= 0) ? __ldg(A + a_off[j] + col) : 0.f;
#pragma unroll
        for (int j = 0; j < B_LOADS; j++)
            rb[j] = (col_ok && b_off[j] >= 0) ? __ldg(W + b_off[j] + w_tap) : 0.f;
        if (++ld_kc == kc_per_tap) {
            ld_kc = 0;
            ld_tap = next_tap(p, tile_mask, ld_tap + 1);
        }
    };

    const int tm0 = (tid / (BN / TN)) * TM, tn0 = (tid % (BN / TN)) * TN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

    if (total > 0) load_regs();
    for (int it = 0; it < total; it++) {
#pragma unroll
        for (int j = 0; j < A_LOADS; j++) As[lcol][lrow + j * ROWS_PER_PASS] = ra[j];
#pragma unroll
        for (int j = 0; j < B_LOADS; j++) Bs[lcol][lrow + j * ROWS_PER_PASS] = rb[j];
        __syncthreads();
        if (it + 1 < total) load_regs();
        float part[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) part[i][j] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; i++) av[i] = As[kk][tm0 + i];
#pragma unroll
            for (int j = 0; j < TN; j++) bv[j] = Bs[kk][tn0 + j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) part[i][j] = fmaf(av[i], bv[j], part[i][j]);
        }
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] += part[i][j];
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; i++) {
        int64_t r = row_out[tm0 + i];
        if (r < 0) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 2) {
            int n = n0 + tn0 + j;
            if (n < p.n_cols) epilogue2(p, r, n, acc[i][j], acc[i][j + 1]);
        }
    }
}

} // namespace vcg

#endif
