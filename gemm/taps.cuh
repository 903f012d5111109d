// gemm/taps.cuh - which rows and taps a CTA's tile computes, for both kernels: the rows' gather
// and output indices, the OR of their tap masks within [tap_lo, tap_hi), a tap split's group of
// them and the walk over them.
#ifndef VC_GEMM_TAPS_CUH
#define VC_GEMM_TAPS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm/params.cuh"

namespace vcg {

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

// The bits of a mask word whose taps t have t % S == 0 (every bit for S = 1): shifted left by j,
// those of the taps t % S == j, as a word's first tap is a multiple of 32 and S divides 32. The
// pattern the taps of a tile are divided by, among the warp tiles' S warps and the tensor-core
// kernel's tap sets.
template <int S> __host__ __device__ constexpr uint32_t tap_group_bits()
{
    static_assert(S == 1 || S == 2 || S == 4, "32 % S == 0: a group's taps are a bit pattern");
    return S == 1 ? ~0u : S == 2 ? 0x55555555u : 0x11111111u;
}

// Tap sets (the tensor-core kernel's TG): set s takes the tile's taps t with t % TG == s - of
// the OR in tile_mask[0] when `masked`, else of every tap in [tap_lo, tap_hi) - so that a row's
// sums, like the warp tiles', do not depend on the other rows of its tile. One thread; the taps
// fit kMaxMaskWords words (vc_gemm_plan).
template <int TG>
__device__ __forceinline__ void deal_taps(const Params &p, uint32_t (*tile_mask)[kMaxMaskWords],
                                          int words, bool masked)
{
    constexpr uint32_t set0 = tap_group_bits<TG>();
    for (int w = 0; w < words; w++) {
        const uint32_t v = masked ? tile_mask[0][w] & tap_bits(p, w) : tap_bits(p, w);
#pragma unroll
        for (int s = TG - 1; s >= 0; s--) tile_mask[s][w] = v & set0 << s; // [0], the source, last
    }
}

// The first tap >= t that the CTA computes (taps when none). The tensor-core kernel's tile mask
// holds only taps in [tap_lo, tap_hi). `sets`: the mask is a tap set's, walked with or without
// row masks.
__device__ __forceinline__ int next_tap(const Params &p, const uint32_t *tile_mask, int t,
                                        bool sets = false)
{
    if (!p.masks && p.splits <= 1 && !sets) return t < p.tap_hi ? t : p.taps;
    while (t < p.tap_hi) {
        uint32_t v = tile_mask[t >> 5] >> (t & 31);
        if (v) return t + __ffs(v) - 1;
        t = (t | 31) + 1;
    }
    return p.taps;
}

} // namespace vcg

#endif
