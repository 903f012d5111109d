// gemm/warp_tile.cuh - the warp-tile kernel (warp_kernel) for narrow layers: a tile of 32 rows x
// BN columns is computed by S warps (1, 2 or 4) with mma.sync m16n8k16 (fp16, bf16), each warp
// walking a share of the tile's taps, its A rows gathered from global memory straight into the
// MMA fragments (8-byte loads, k steps of 16) and W read through the L1 cache: no shared memory
// in the main loop, no barriers but the one before the S warps add their sums, no tile set-up
// shared by a CTA. Launched by plan_warp / launch_warp.
//
// Why: where a row holds up to 16 channels (32 bytes) the CTA-tile kernel of gemm/mainloop.cuh
// spends its time on what surrounds the MMAs - a 64-row tile's set-up (rows, masks, gather
// indices: dependent round trips behind barriers), a barrier and a cp.async wait per 16-32-deep
// k step, the staged epilogue - and its tiles come in more than one wave. Here a warp waits on
// nothing but its own loads, the next step's loads are in flight during this step's MMAs, and a
// warp's 32 rows OR fewer masks than a 64-row tile's. Measured (docs/benchmarks.md) it is faster
// than the CTA tiles on layers of c_in <= 16 from 10k outputs; at c_in 32 (16-byte loads, or
// two steps of 8) and at BN 32 its registers cut the warps in flight and it lost.
// S > 1: on a small layer every tile is in flight at once and the layer lasts as long as its
// heaviest tile's chain of steps (a scan's mask-sorted 32-row tiles OR 1 to 27 taps; ncu: one
// warp a scheduler, ~10 cycles an instruction). Warp j of a tile's S walks the taps t with
// t % S == j, which cuts that chain S times and puts S times the warps on the schedulers.
// The k permutation: lane (g = lane / 4, q = lane % 4) holds, of each row it loads, the 4
// consecutive elements [4q, 4q + 4) of the step's 16 (one 8-byte load), as the MMA's logical
// columns 2q, 2q + 1, 2q + 8, 2q + 9. W's rows are read with the same map, so each product pairs
// the same physical column of A and W: the sum over k is the same sum, taken in another order
// inside each MMA.
//
// The result per row: for each group j, the sum over its taps t % S == j in ascending order (a
// tap no row of the tile has is skipped; one some rows lack adds exact zeros there), the groups
// added in order 0..S-1, then the epilogue - the same bits whatever rows share the tile.
#ifndef VC_GEMM_WARP_TILE_CUH
#define VC_GEMM_WARP_TILE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/launch.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/params.cuh"
#include "gemm/ptx_sm80.cuh"
#include "gemm/taps.cuh"

namespace vcg {

// Warps a CTA (independent: a CTA is only a unit of launch).
constexpr int kWarpTileWarps = 4;
// Rows a warp: two m16 tiles share each W fragment it loads.
constexpr int kWarpTileRows = 32;

// Four elements (8 bytes) of a row as two 32-bit words; zeros where ok is 0 (the load is
// predicated off and src is not read). Predicated PTX rather than a branch: the main loop's
// instruction count is what narrow layers run on.
__device__ __forceinline__ void load_words(uint32_t (&v)[2], const void *src, uint32_t ok)
{
    asm("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\n"
        "@p ld.global.nc.v2.u32 {%0, %1}, [%2];\n}\n"
        : "=r"(v[0]), "=r"(v[1])
        : "l"(src), "r"(ok));
}

// *v = *src where ok, else *v unchanged (a predicated 32-bit load).
__device__ __forceinline__ void load_if(int32_t &v, const int32_t *src, uint32_t ok)
{
    asm("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p ld.global.nc.u32 %0, [%1];\n}\n"
        : "+r"(v)
        : "l"(src), "r"(ok));
}

// The warp's walk over its taps in ascending order: those in [tap_lo, tap_hi) of its group that
// one of its rows has (all of them without masks). A mask word is read and ORed over the warp
// when the walk reaches it. -1 after the last.
// `mine`: the taps of this warp's group in every word (all of them without an in-CTA split).
struct TapWalk {
    int w, words;
    uint32_t bits, mine;
    __device__ __forceinline__ int next(const Params &p, int64_t r_lane)
    {
        while (bits == 0u) {
            if (++w >= words) return -1;
            uint32_t v = tap_bits(p, w) & mine;
            if (p.masks) {
                const uint32_t row =
                    r_lane >= 0 ? __ldg(p.masks + r_lane * p.mask_words + w) : 0u;
                v &= __reduce_or_sync(0xffffffffu, row);
            }
            bits = v;
        }
        const int t = 32 * w + __ffs(bits) - 1;
        bits &= bits - 1u;
        return t;
    }
};

// BN: columns a warp (a multiple of 8). S: the warps that share a tile (1, 2 or 4), warp j of
// them walking the taps t with t % S == j; their sums are added in group order through shared
// memory, so a row's result depends only on its own taps, never on which rows share the tile.
// k % 4 == 0 and A, W 8-byte aligned (gemm.cu's fits).
template <typename T, int BN, int S>
__global__ void __launch_bounds__(kWarpTileWarps * 32) warp_kernel(const Params p)
{
    static_assert(sizeof(T) == 2, "16-bit operands");
    constexpr int NT = BN / 8, STEP = 16; // S: checked by tap_group_bits
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, wid = threadIdx.x >> 5;
    const int group = wid % S;
    const int64_t tile = (int64_t)blockIdx.x * (kWarpTileWarps / S) + wid / S;
    // A tile's S warps leave together (these tests are the tile's), so the barrier of its
    // reduction sees all of them or none.
    if (tile >= p.m_tiles * p.n_tiles) return;
    const int64_t row0 = tile / p.n_tiles * kWarpTileRows;
    const int n0 = (int)(tile % p.n_tiles) * BN;
    // A bounded frame's tail: rows at or past *m_live need not be written.
    if (p.m_live && row0 >= *p.m_live) return;

    // Lane l owns row row0 + l: its gather row and output row (-1: none - past m, or unmapped).
    int64_t g_own = -1, r_own = -1;
    {
        const int64_t i = row0 + lane;
        if (i < p.m) {
            r_own = p.row_map ? (int64_t)__ldg(p.row_map + i) : i;
            if (r_own >= 0) g_own = p.gather_rows ? (int64_t)__ldg(p.gather_rows + i) : i;
        }
    }
    // This lane's four fragment rows, 16 mi + g + 8 h of the warp's (u = 2 mi + h): the row of
    // the gather table (-1: none).
    int64_t grow[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
        grow[u] = __shfl_sync(0xffffffffu, g_own, 16 * (u >> 1) + g + 8 * (u & 1));

    // Byte addresses of this lane's elements: A's column 4q (a row is kb bytes; gemm.cu's
    // fits keeps a_rows and k * 2 within 32 bits), W's row n = n0 + 8 j + g at tap 0 (a column
    // past n_cols: none).
    const char *const a_lane = static_cast<const char *>(p.a) + q * 8;
    const uint32_t kb = (uint32_t)p.k * 2u;
    const uint32_t a_rows = (uint32_t)p.a_rows; // fits: a_rows <= INT32_MAX
    const char *wrow[NT];
    uint32_t w_ok = 0;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int n = n0 + 8 * j + g;
        if (n < p.n_cols) w_ok |= 1u << j;
        wrow[j] = static_cast<const char *>(p.w) +
                  ((n < p.n_cols ? (int64_t)n * p.b_taps + p.b_tap0 : 0) * kb + q * 8);
    }
    // Each fragment row's entries in the gather table (bit u of g_ok: the row has some), or,
    // dense, its A row (the index every tap then reads).
    const int32_t *gp[4];
    int32_t g_dense[4];
    uint32_t g_ok = 0;
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const bool on = grow[u] >= 0 && p.gather;
        if (on) g_ok |= 1u << u;
        gp[u] = p.gather + (on ? grow[u] * p.taps : 0);
        g_dense[u] = p.gather ? -1 : (int32_t)grow[u];
    }
    const int kch = (p.k + STEP - 1) / STEP; // k steps of STEP a tap

    // One step (tap t, k chunk kc): its gather indices (raw: -1 and indices past a_rows read
    // zeros; dense: the rows), then its operands - a[u] the two words of fragment row u, b[j]
    // those of W's column j.
    struct Slot {
        int t, kc;
        int32_t ix[4];
        uint32_t a[4][2], b[NT][2];
    };
    auto index = [&](Slot &x) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            x.ix[u] = g_dense[u];
            load_if(x.ix[u], gp[u] + x.t, g_ok >> u & 1u);
        }
    };
    auto load = [&](Slot &x) {
        const uint32_t c0 = (uint32_t)x.kc * STEP * 2; // the chunk's byte offset
        const uint32_t in_k = (int)(c0 / 2) + 4 * q < p.k;
#pragma unroll
        for (int u = 0; u < 4; u++)
            load_words(x.a[u], a_lane + (uint64_t)(uint32_t)x.ix[u] * kb + c0,
                       in_k & ((uint32_t)x.ix[u] < a_rows));
        const uint64_t wo = (uint64_t)(uint32_t)x.t * kb + c0;
#pragma unroll
        for (int j = 0; j < NT; j++) load_words(x.b[j], wrow[j] + wo, in_k & (w_ok >> j));
    };
    float acc[2][NT][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][j][e] = 0.f;
    auto mmas = [&](const Slot &x) {
#pragma unroll
        for (int mi = 0; mi < 2; mi++) {
            const uint32_t af[4] = {x.a[2 * mi][0], x.a[2 * mi + 1][0], x.a[2 * mi][1],
                                    x.a[2 * mi + 1][1]};
#pragma unroll
            for (int j = 0; j < NT; j++) mma<T>(acc[mi][j], af, x.b[j][0], x.b[j][1]);
        }
    };

    TapWalk walk{p.tap_lo / 32 - 1, (p.tap_hi + 31) / 32, 0u, tap_group_bits<S>() << group};
    // The step after y, into x (t = -1: none); x's gather indices are y's while the tap stays.
    auto advance = [&](Slot &x, const Slot &y) {
        x.t = y.t, x.kc = y.kc + 1;
        if (x.kc == kch) x.t = walk.next(p, r_own), x.kc = 0;
        if (x.t < 0) return;
        if (x.kc == 0)
            index(x);
        else
#pragma unroll
            for (int u = 0; u < 4; u++) x.ix[u] = y.ix[u];
    };
    // x holds step i's operands (loaded or in flight), y step i + 1's gather indices: step
    // i + 2's indices go into x, step i + 1's operands into y, then step i's MMAs run; the two
    // slots swap roles each step. False after the last step.
    auto step = [&](Slot &x, Slot &y) {
        if (y.t < 0) {
            mmas(x);
            return false;
        }
        advance(x, y); // x's t, kc and indices only: its operands stay for the MMAs
        load(y);
        mmas(x);
        return true;
    };
    Slot s0, s1;
    s0.t = walk.next(p, r_own), s0.kc = 0;
    if (s0.t >= 0) {
        index(s0);
        advance(s1, s0);
    }
    // An overlapped launch (vc_gemm_args.overlap_prev) waits here for the kernel that writes A
    // or W: nothing above reads them or writes C.
    grid_dep_wait();
    if (s0.t >= 0) {
        load(s0);
        for (;;) {
            if (!step(s0, s1)) break;
            if (!step(s1, s0)) break;
        }
    }

    // Epilogue: accumulator e of fragment (mi, j) is row 16 mi + g + 8 (e / 2), column
    // 8 j + 2 q + e % 2: two adjacent outputs a call. With S warps a tile, each warp stages its
    // sums in shared memory, and warp j of the tile then adds the S groups' sums in group order
    // for the row halves (mi, h) with (2 mi + h) % S == j and writes those.
    if constexpr (S > 1) {
        __shared__ float part[kWarpTileWarps][2 * NT * 4][32];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) part[wid][(mi * NT + j) * 4 + e][lane] = acc[mi][j][e];
        // The tile's S warps only (named barrier 1 + tile in the CTA; 0 is __syncthreads).
        named_barrier(1 + wid / S, 32 * S);
        const int w0 = wid - group;
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if ((2 * mi + e / 2) % S != group) continue; // a row half another warp writes
                    float v = part[w0][(mi * NT + j) * 4 + e][lane];
#pragma unroll
                    for (int x = 1; x < S; x++) v += part[w0 + x][(mi * NT + j) * 4 + e][lane];
                    acc[mi][j][e] = v;
                }
    }
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if ((2 * mi + h) % S != group) continue;
            const int64_t r = __shfl_sync(0xffffffffu, r_own, 16 * mi + g + 8 * h);
            if (r < 0) continue;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const int n = n0 + 8 * j + 2 * q;
                if (n < p.n_cols) epilogue2(p, r, n, acc[mi][j][2 * h], acc[mi][j][2 * h + 1]);
            }
        }
}

// The launch of a warp-tile configuration: S warps a tile, kWarpTileWarps warps a CTA; no tap
// split across CTAs (an automatic one resolves to one group: the S warps of a tile already
// divide its taps; an explicit one is refused by vc_gemm_plan), no tile order.
template <int S>
cudaError_t plan_warp(const Params &p, const Sched &, LaunchPlan *out)
{
    constexpr int per_cta = kWarpTileWarps / S; // tiles a CTA
    const int64_t tiles = p.m_tiles * p.n_tiles;
    *out = {1, false, false, false, (tiles + per_cta - 1) / per_cta, 0};
    return cudaSuccess;
}

template <typename T, int BN, int S>
cudaError_t launch_warp(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left)
{
    *left = 1;
    Params q = p;
    q.splits = 1;
    return launch_k(pl.overlap, warp_kernel<T, BN, S>, pl.grid, kWarpTileWarps * 32, 0, s, q);
}

} // namespace vcg

#endif
