// gemm/simt.cuh - the exact fp32 GEMM kernel (fmaf, no tensor cores) of configuration
// f32_64x64x16_fma.
#ifndef VC_GEMM_SIMT_CUH
#define VC_GEMM_SIMT_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm/epilogue.cuh"
#include "gemm/params.cuh"
#include "gemm/taps.cuh"

namespace vcg {

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
