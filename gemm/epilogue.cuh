// gemm/epilogue.cuh - the fused epilogue of every GEMM kernel: element access by run-time dtype
// and the epilogue of two or eight adjacent outputs of a row (accumulate, bias, residual,
// activation, conversion to C's dtype); the direct epilogue of a warp's wgmma fragments where
// only bias and activation apply.
#ifndef VC_GEMM_EPILOGUE_CUH
#define VC_GEMM_EPILOGUE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "gemm/params.cuh"

namespace vcg {

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

// The same comparisons as the CPU twin (conv/conv_cpu.c): NaN passes through and -0 stays -0,
// so GPU and CPU agree bit for bit on those inputs too.
__device__ __forceinline__ float activate(const Params &p, float v)
{
    if (p.act == VC_GEMM_ACT_RELU) return v < 0.f ? 0.f : v;
    if (p.act == VC_GEMM_ACT_LEAKY) return v < 0.f ? v * p.slope : v;
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

// ---- the direct epilogue of a warp's 16 wgmma rows -------------------------------------------
//
// Where C is of the inputs' 16-bit type T and only the bias and the activation apply (no
// accumulate, no residual; p.vec8: n_cols % 8 == 0, C and the bias 16-byte aligned): the bias and
// the activation are applied to the fragments in registers, the values converted to T and staged
// 64 columns at a time (16 rows of 128 bytes padded to kDirectLd words: the stores and the
// 16-byte reads are free of bank conflicts), then stored as 16-byte chunks of a row, four a lane,
// independent of each other. The general path stages fp32 and runs each 8 columns through
// epilogue8's run-time dtype branches. The same operations in the same order as epilogue8: the
// same bits.

constexpr int kDirectLd = 36; // 32-bit words a staged row: 64 columns of T and 16 bytes

// The GEMM dtype of T, as Params.c_dtype names it.
template <typename T> __host__ __device__ constexpr int gemm_dtype_of()
{
    return sizeof(T) == 4 ? VC_GEMM_F32
                          : std::is_same<T, __half>::value ? VC_GEMM_F16 : VC_GEMM_BF16;
}

// Whether the direct epilogue applies to p (T 16-bit).
template <typename T> __device__ __forceinline__ bool direct_epilogue_ok(const Params &p)
{
    return sizeof(T) == 2 && p.c_dtype == gemm_dtype_of<T>() && !p.accumulate && !p.residual &&
           p.vec8;
}

// Two fp32 values rounded to nearest into a 32-bit word of two T (16-bit), as store_any8 does.
template <typename T> __device__ __forceinline__ uint32_t pack2(float x, float y)
{
    if constexpr (std::is_same<T, __half>::value) {
        __half2 h = __floats2half2_rn(x, y);
        return *reinterpret_cast<uint32_t *>(&h);
    } else {
        __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
        return *reinterpret_cast<uint32_t *>(&h);
    }
}

// Fragment f of acc: columns n0 + 8 f + 2 q (+1) of the warp's rows g and g + 8 (g = lane / 4,
// q = lane % 4). slab: the warp's staging, 16 x kDirectLd words. row_of(row): the output row of
// the warp's row (0..15), or -1 for none.
template <typename T, int NF, typename RowOf>
__device__ __forceinline__ void epilogue_direct(const Params &p, const float (&acc)[NF][4],
                                                float *slab, int n0, int g, int q, int lane,
                                                RowOf row_of)
{
    uint32_t *st = reinterpret_cast<uint32_t *>(slab);
    // A lane stores rows lane / 8 + 4 u (u < 4) of every 64-column chunk: their output rows
    // once, before the chunks.
    int64_t out_row[4];
#pragma unroll
    for (int u = 0; u < 4; u++) out_row[u] = row_of((lane >> 3) + 4 * u);
#pragma unroll
    for (int cc = 0; cc < (NF + 7) / 8; cc++) {
        if (n0 + 64 * cc >= p.n_cols) break;
#pragma unroll
        for (int f = 0; f < 8; f++) {
            const int fi = 8 * cc + f;
            if (fi >= NF) break;
            float v0 = acc[fi][0], v1 = acc[fi][1], v2 = acc[fi][2], v3 = acc[fi][3];
            const int n = n0 + 8 * fi + 2 * q;
            if (p.bias && n < p.n_cols) {
                const float2 b = *reinterpret_cast<const float2 *>(p.bias + n);
                v0 += b.x, v1 += b.y, v2 += b.x, v3 += b.y;
            }
            st[g * kDirectLd + 4 * f + q] = pack2<T>(activate(p, v0), activate(p, v1));
            st[(g + 8) * kDirectLd + 4 * f + q] = pack2<T>(activate(p, v2), activate(p, v3));
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int row = (lane >> 3) + 4 * u, ch = lane & 7;
            const int n = n0 + 64 * cc + 8 * ch;
            if (8 * cc + ch >= NF || n >= p.n_cols) continue;
            const int64_t r = out_row[u];
            if (r < 0) continue;
            const uint4 v = *reinterpret_cast<const uint4 *>(st + row * kDirectLd + 4 * ch);
            *reinterpret_cast<uint4 *>(static_cast<T *>(p.c) + r * p.n_cols + n) = v;
        }
        __syncwarp();
    }
}

} // namespace vcg

#endif
