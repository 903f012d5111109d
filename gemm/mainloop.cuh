// gemm/mainloop.cuh - the tensor-core kernel (mma_kernel): mma.sync m16n8k16 fp16/bf16 and
// m16n8k8 tf32 with ldmatrix, or Hopper wgmma from shared-memory descriptors, fed by a
// multi-stage cp.async pipeline with zero-fill; persistent or a CTA per tile, with the rows'
// gather and scatter, the tiles' tap masks and the fused epilogue. The producer's stages (tile
// set-up, gather indices, a stage's loads) are closures over the kernel's state; the kernel
// runs the pipeline, the MMAs and the epilogue. Launched by gemm/schedule.cuh.
#ifndef VC_GEMM_MAINLOOP_CUH
#define VC_GEMM_MAINLOOP_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm/cluster.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/params.cuh"
#include "gemm/ptx_sm80.cuh"
#include "gemm/taps.cuh"
#include "gemm/wgmma.cuh"

namespace vcg {

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
// TG: tap sets (wgmma tiles only; 2 or 4). TG > 1: the CTA is TG sets of THREADS threads; set s
// walks the tile's taps t with t % TG == s (taps.cuh: deal_taps) in its own ring of STAGES
// stages, behind its own named barrier, and set 0 adds the sets' sums in set order and runs the
// epilogue: a row's result depends on its own taps only. Why: on a small scan every tile is in
// flight at once and a layer lasts as long as its heaviest tile, whose time goes to each tap's
// chain of dependent steps (docs/benchmarks.md, "Inside the heaviest CTA"); two sets run two
// such chains at once. A CTA computes one tile, and the gather indices of all its taps (at most
// a chunk) are copied at its set-up.
// TP: tap packs (gathered rows, k = BK / TP exactly, 16-byte loads). TP > 1: a stage holds TP
// taps of the tile's walk side by side along k (StageLoad), so a narrow layer (a stem's 8
// padded channels, 16 or 32) walks its taps in a TP-th of the stages, each a full k step, where
// one tap a stage would leave BK - k columns of zeros. A CTA computes one tile; its gather
// indices are copied at its set-up as for tap sets. The sums run in the walk's order of taps,
// as without packs; where k is a multiple of 16 each MMA k step holds one tap and a row's
// result depends on its own taps only, and at k = 8 a step holds two taps, so a row's rounding
// also depends on which taps its tile walks (still the same bits for the same tile).

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int TG = 1>
struct MmaCfg {
    static constexpr int THREADS = WM * WN * 32; // a tap set's
    static constexpr int CTA_THREADS = THREADS * TG;
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
    static constexpr int SMEM = TG * STAGES * STAGE_BYTES + ALIGN; // TG rings
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
                          BM % 64 == 0 && LB == 16 &&
                          (BN == 32 || BN == 64 || BN == 96 || BN == 128 || BN == 256)),
                  "wgmma tiles: 64/128-byte rows, one warpgroup per 64 rows, N of 32-256");
    // A tap set's sums wait for set 0 in the set's own ring: THREADS x MI x NI x 4 floats.
    static_assert(TG == 1 || (WG && TG <= 4 && MI * NI * 16 * THREADS <= STAGES * STAGE_BYTES),
                  "tap sets: wgmma tiles whose accumulators fit a ring");
};

// Byte offset of 16-byte unit u of row `row` in a tile with UNITS units per row.
template <int UNITS, int RPL>
__device__ __forceinline__ uint32_t swz(int row, int u)
{
    return (uint32_t)(row * UNITS * 16 + ((u ^ ((row / RPL) % UNITS)) << 4));
}

// Element c of a stage's row (a thread's load column) as an element of its tap's k: with tap
// packs (TP > 1, k = BK / TP) column c holds element c % k of the tap in slot c / k (StageLoad);
// without, c itself.
template <int BK, int TP> __device__ __forceinline__ int pack_col(int c)
{
    return TP > 1 ? c % (BK / TP) : c;
}

// ---- the producer's stages ------------------------------------------------------------------
//
// Closures over mma_kernel's state (reference members, as a lambda's [&] captures would be),
// so that each stage is its own function and the kernel's code is what its lambdas were.

// Sets up tile ld_tile in the next ring slot: its rows, its mask (a tap split's group of it),
// its iterations, W's sources at tap 0.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB, bool CL, int TG, int TP>
struct TileSetup {
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    static constexpr bool cl = CL;
    int &ld_slot;
    int64_t &ld_tile;
    const Params &p;
    const int &tid;
    const int &words;
    uint32_t (&tile_mask)[TG][kMaxMaskWords]; // the tile's OR in [0]; tap sets: each set's
    int64_t (&row_g)[BM];
    int64_t (&row_out)[STAGES][BM];
    int &ld_iters;
    const int &kc_per_tap;
    bool &dummy;
    int32_t (&tile_iters)[TG][STAGES];
    int &ld_iter;
    int &ld_kc;
    int &ld_tap;
    int &cur_tap;
    int &g_n;
    uint32_t &ld_ok;
    const int &lrow;
    const char *(&b_src)[C::B_LOADS];
    const T *const &W;
    const int &lcol;
    const int &set; // this thread's tap set (0 without)
    const int &stid; // its thread within the set
    __device__ __forceinline__ void operator()() const
    {
        __syncthreads(); // nobody still reads the previous tile's producer data
        ld_slot = ld_slot + 1 == STAGES ? 0 : ld_slot + 1;
        const int64_t m0 = (ld_tile / p.n_tiles) * BM;
        const int n0 = (int)(ld_tile % p.n_tiles) * BN;
        // The tile's mask (a tap split walks one too: all taps without masks) is cleared, then
        // each row sets its gather row, its output row (a tap split: its row of the workspace)
        // and ORs in its mask.
        const bool masked = p.masks || p.splits > 1;
        if (masked) { // only the taps in [tap_lo, tap_hi): next_tap need not mask them
            for (int w = tid; w < words; w += C::CTA_THREADS)
                tile_mask[0][w] = p.masks ? 0u : tap_bits(p, w);
            __syncthreads();
        }
        for (int i = tid; i < BM; i += C::CTA_THREADS) {
            int64_t gi = m0 + i, g = -1, r = -1;
            if (gi < p.m) {
                g = p.gather_rows ? (int64_t)p.gather_rows[gi] : gi;
                r = p.row_map ? (int64_t)p.row_map[gi] : gi;
                if (p.masks && r >= 0) { // a row without output (-1) has no mask
                    const uint32_t *mr = p.masks + r * p.mask_words;
                    for (int w = 0; w < words; w++) {
                        uint32_t v = __ldg(mr + w) & tap_bits(p, w);
                        if (v) atomicOr(&tile_mask[0][w], v);
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
            if (tid == 0)
                keep_group(p, tile_mask[0], words, (int)(blockIdx.x % (unsigned)p.splits));
            __syncthreads();
        }
        int active = p.tap_hi - p.tap_lo;
        if constexpr (TG > 1) { // every set walks a mask: its share of the tile's
            if (tid == 0) deal_taps<TG>(p, tile_mask, words, masked);
            __syncthreads();
        }
        if (masked || TG > 1) {
            active = 0;
            for (int w = 0; w < words; w++) active += __popc(tile_mask[set][w]);
        }
        // Tap packs: TP taps a stage (k = BK / TP, so kc_per_tap is 1).
        ld_iters = TP > 1 ? (active + TP - 1) / TP : active * kc_per_tap;
        dummy = ld_iters == 0;
        if (dummy) ld_iters = 1;
        if (stid == 0) tile_iters[set][ld_slot] = ld_iters;
        ld_iter = 0;
        ld_kc = 0;
        ld_tap = dummy ? p.tap_lo : next_tap(p, tile_mask[set], p.tap_lo, TG > 1);
        cur_tap = -1;
        g_n = 0;
        ld_ok = 0;
#pragma unroll
        for (int j = 0; j < C::B_LOADS; j++) {
            const int n = n0 + lrow + j * C::ROWS_PER_PASS;
            const bool ok = n < p.n_cols && !dummy;
            b_src[j] = reinterpret_cast<const char *>(
                W + (ok ? ((int64_t)n * p.b_taps + p.b_tap0) * p.k : 0) +
                pack_col<BK, TP>(lcol * C::E));
            ld_ok |= (uint32_t)ok << (16 + j);
        }
        if (p.gather) { // this thread's live rows: the gather copy skips the others
#pragma unroll
            for (int j = 0; j < C::A_LOADS; j++)
                ld_ok |= (uint32_t)(row_g[lrow + j * C::ROWS_PER_PASS] >= 0 && !dummy) << (8 + j);
        }
        __syncthreads(); // tile_iters and row_out visible to every thread
        // An overlapped launch (vc_gemm_args.overlap_prev) waits here for the kernel that
        // writes A or W: nothing above reads them or writes C.
        grid_dep_wait();
    }
};

// Gather indices of taps [t, t + gchunk) for the tile's rows into gidx. A row's taps are
// contiguous in the gather table, so a warp reads 32 / gw rows at a time, gw lanes (g_n
// rounded up to a power of two) per row: coalesced, no integer division, eight loads in
// flight per lane.
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB, bool CL, int TG>
struct GatherLoad {
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    static constexpr bool cl = CL;
    int &g_t0;
    int &g_n;
    const Params &p;
    const int &lane;
    const int &warp;
    int64_t (&row_g)[BM];
    int32_t *const &gidx;
    uint32_t (&tile_mask)[TG][kMaxMaskWords];
    // Whether the tile walks tap tt (in any tap set; the copy runs after the set-up has made
    // the sets' masks and a split's group): the cp.async copy skips the other taps' indices,
    // which are never read, so a tile of few taps copies few of the 27 a k3 row has.
    __device__ __forceinline__ bool walked(int tt) const
    {
        uint32_t w = 0u;
#pragma unroll
        for (int s = 0; s < TG; s++) w |= tile_mask[s][tt >> 5];
        return w >> (tt & 31) & 1u;
    }
    __device__ __forceinline__ void operator()(int t) const
    {
        __syncthreads();
        g_t0 = t;
        g_n = min(p.gchunk, p.tap_hi - t);
        const int lsh = g_n <= 1 ? 0 : 32 - __clz(g_n - 1); // log2 of gw
        const int tap = lane & ((1 << lsh) - 1);
        const int step = (C::CTA_THREADS / 32) << (5 - lsh); // rows per pass of the CTA
        const int r0 = (warp << (5 - lsh)) + (lane >> lsh);
        if (p.masks || p.splits > 1) {
            // A CTA with one tile (nothing of another tile in flight): cp.async copies every
            // index at once, no register staging, so the set-up waits one round trip for them
            // (the batches below wait one each: four for a two-warp 64-row tile). Raw values:
            // the use checks the range.
            // A row without a gather row (g < 0) is skipped: its loads are off (ld_ok's live
            // bits), so its stale indices are never used. The table's row: g x taps as one
            // unsigned wide multiply (g >= 0).
            if (tap < g_n && walked(t + tap)) {
                const int32_t *src = p.gather + t + tap;
#pragma unroll 4
                for (int row = r0; row < BM; row += step) {
                    const int64_t g = row_g[row];
                    if (g >= 0)
                        cp_async<4>(smem_addr(gidx + row * p.gstride + tap),
                                    src + (uint64_t)g * (uint32_t)p.taps, 4);
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
    }
};

// Issues the loads of the producer's next iteration into stage ld_stage.
// a_src / b_src: the loads' sources as byte addresses of this thread's column at k chunk 0 of
// the current tap, so that an iteration adds one uniform offset (the chunk's bytes) to each: A's
// row for the tap (bit j of ld_ok: the row has one; with a gather table, bit 8 + j: the row is
// live, set once a tile) and W[n, b_tap0 + tap] (bit 16 + j: n < n_cols and the tile has a
// tap). Set at the tile's set-up (W at tap 0) and when the tap changes. A load whose bit is
// clear zero-fills and reads nothing (cp.async's ignore-src), so its address need not be valid.
// One word of flags, not a register per load: the small tiles run with registers capped (MINB).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB, bool CL, int TG, int TP>
struct StageLoad {
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    static constexpr bool cl = CL;
    using TileSetup = vcg::TileSetup<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, CL, TG, TP>;
    using GatherLoad = vcg::GatherLoad<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, CL, TG>;
    int &ld_iter;
    TileSetup &setup_tile;
    int &ld_tap;
    int &cur_tap;
    uint32_t &ld_ok;
    const Params &p;
    bool &dummy;
    int &g_t0;
    int &g_n;
    GatherLoad &load_gidx;
    const T *const &A;
    const int &lcol;
    int32_t *const &gidx;
    const int &lrow;
    const char *(&a_src)[C::A_LOADS];
    int64_t (&row_g)[BM];
    const char *(&b_src)[C::B_LOADS];
    int &ld_kc;
    const uint32_t &s_base;
    int &ld_stage;
    const int &unit;
    const int &within;
    int &ld_iters;
    int64_t &ld_tile;
    const int &kc_per_tap;
    uint32_t (&tile_mask)[TG][kMaxMaskWords];
    const int &set;
    __device__ __forceinline__ void operator()() const
    {
        if (ld_iter == 0) {
            setup_tile();
            // Tap sets and tap packs: the indices of every tap at once, by the whole CTA (the
            // sets' walks differ, a pack's threads read different taps, and each copy ends in a
            // CTA barrier); vc_gemm_plan keeps the taps within one chunk.
            if constexpr (TG > 1 || TP > 1)
                if (p.gather) load_gidx(p.tap_lo);
        }
        // The tap this thread loads. Tap packs (TP > 1, k = BK / TP): a stage holds the walk's
        // next TP taps side by side along k, slot q in columns [q k, (q + 1) k), and each
        // thread's columns lie in one slot, so it loads the slot-th tap from ld_tap (past the
        // walk's end: p.taps, its loads zero-fill); `after` is the walk's tap after the stage's.
        int my_tap = ld_tap, after = 0;
        if constexpr (TP > 1) {
            const int slot = lcol * C::E / (BK / TP);
            int t = ld_tap;
#pragma unroll
            for (int q = 0; q < TP; q++) {
                if (q == slot) my_tap = t;
                t = next_tap(p, tile_mask[0], t + 1);
            }
            after = t;
        }
        if (my_tap != cur_tap && (TP == 1 || my_tap < p.tap_hi)) {
            const int prev_tap = cur_tap;
            cur_tap = my_tap;
            ld_ok &= 0xffffff00u;
            if constexpr (TG == 1 && TP == 1)
                if (p.gather && !dummy && (cur_tap < g_t0 || cur_tap >= g_t0 + g_n))
                    load_gidx(cur_tap);
            const char *const a_col =
                reinterpret_cast<const char *>(A + pack_col<BK, TP>(lcol * C::E));
            if (p.gather) {
                // Staged gather indices are 32-bit: one unsigned compare rejects -1 and indices
                // past a_rows (both read zeros), one unsigned 32 x 32 -> 64-bit multiply-add
                // makes the address (a row's bytes, k * ES, fit 32 bits: k <= 2^27, gemm.h).
                // A row that is not live (ld_ok bit 8 + j, off in a dummy tile) loads nothing.
                // An index out of range aims at row 0: a load that is off reads nothing, but
                // every address stays inside A all the same (stale indices of rows that are not
                // live included).
                const int32_t *gr = gidx + lrow * p.gstride + cur_tap - g_t0;
                const uint32_t kb = (uint32_t)p.k * C::ES;
                const uint32_t rows = p.a_rows < INT32_MAX ? (uint32_t)p.a_rows : INT32_MAX;
                uint32_t in = 0;
#pragma unroll
                for (int j = 0; j < C::A_LOADS; j++) {
                    const uint32_t idx = (uint32_t)gr[j * C::ROWS_PER_PASS * p.gstride];
                    const bool ok = idx < rows;
                    a_src[j] = a_col + (uint64_t)(ok ? idx : 0u) * kb;
                    in |= (uint32_t)ok << j;
                }
                ld_ok |= in & ld_ok >> 8;
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
        // k % E == 0 (cp.async); a pack's slot past the walk's end loads nothing
        const uint32_t on = TP > 1 ? (my_tap < p.tap_hi ? ld_ok : 0u)
                                   : ld_kc * BK + lcol * C::E < p.k ? ld_ok : 0u;
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
            ld_tap = TP > 1 ? after : next_tap(p, tile_mask[set], ld_tap + 1, TG > 1);
        }
    }
};

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
// (spills on the register-capped tiles, more registers on the others).
// Tap split: the CTA's one tile; its group (blockIdx.x % splits) is read where it is used.
// Tile order: CTA b takes m tile j = b / n_tiles of the blocks in their order (block
// tile_order[j / order_per], its tile j % order_per) and n tile b % n_tiles; a CTA whose tile is
// past the rows (a short last block) has nothing to do.
// Epilogue: each warp stages a 16-row slab of its fragments (lane: rows g, g + 8, columns 2q,
// 2q + 1), EPI_COLS columns at a time, in shared memory and reads it back as 8-column chunks, so
// that the epilogue runs once per 8 outputs with 16-byte accesses. A cluster's tap split (the
// CTA's one tile) instead puts each slab in its place in the CTA's fp32 tile at the start of the
// stages (rows of RED_LD floats) and reads nothing back: cluster_reduce adds the cluster's tiles.
// The producer's stages are closures (TileSetup, GatherLoad, StageLoad) whose members are
// references to the kernel's state, as lambdas' captures would be: so written, the kernel
// compiles to the machine code it had as one function. The consumer's MMAs and epilogue stay
// in the kernel: every other way tried to split them (values in a struct, free functions,
// closures) perturbed the register allocation and the code of some configurations.
// TG > 1 (MmaCfg): the tap sets; set s's threads are [s THREADS, (s + 1) THREADS), its ring the
// s-th, its barrier named 1 + s (the CTA's set-up, the gather copy and the sets' sums use the
// CTA barrier).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CL = false, int TG = 1, int TP = 1>
__global__ void __launch_bounds__(WM *WN * 32 * TG, MINB > 1 ? MINB : 0)
    mma_kernel(const Params p)
{
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    static_assert(!CL || C::CLUSTER_FITS, "a cluster split needs the fp32 tile to fit the stages");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
    if constexpr (CL) return; // never launched there (no clusters before sm_90)
#endif
    constexpr bool cl = CL; // (a name, not CL itself: that reorders a tf32 kernel's SASS)
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ int64_t row_g[BM];
    __shared__ int64_t row_out[STAGES][BM];
    __shared__ int32_t tile_iters[TG][STAGES];
    __shared__ uint32_t tile_mask[TG][kMaxMaskWords];
    // Epilogue staging: its own region, or (p.epi_alias: the CTA has one tile) the pipeline's
    // stages, which are idle by then; the gather indices follow.
    const int epi_own = p.epi_alias ? 0 : C::EPI_BYTES;
    float *stage = reinterpret_cast<float *>(smem + (p.epi_alias ? 0 : C::SMEM));
    int32_t *gidx = reinterpret_cast<int32_t *>(smem + C::SMEM + epi_own); // [BM][gstride]

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // This thread's tap set, its thread and warp within it (tid and warp without sets).
    const int set = TG > 1 ? tid / C::THREADS : 0;
    const int stid = TG > 1 ? tid % C::THREADS : tid, swarp = stid >> 5;
    const int64_t n_total = p.m_tiles * p.n_tiles;
    const int kc_per_tap = (p.k + BK - 1) / BK;
    const int words = (p.taps + 31) >> 5;
    const T *A = static_cast<const T *>(p.a);
    const T *W = static_cast<const T *>(p.w);
    // wgmma's 128-byte swizzle is a function of the address: stages start on 1024-byte atoms.
    // s_base: this thread's ring (its tap set's).
    const uint32_t s_ring0 = WG ? (smem_addr(smem) + 1023u) & ~1023u : smem_addr(smem);
    const uint32_t s_base = s_ring0 + (uint32_t)(set * STAGES * C::STAGE_BYTES);

    // Load mapping: this thread's load column (fixed) and rows lrow + j * ROWS_PER_PASS.
    const int lcol = stid % C::LPR, lrow = stid / C::LPR;
    const int byte_in_row = lcol * C::E * C::ES;
    const int unit = byte_in_row >> 4, within = byte_in_row & 15;

    int64_t first_tile = p.splits > 1 ? blockIdx.x / (unsigned)p.splits : blockIdx.x;
    if (!cl && p.tile_order) {
        const unsigned j = blockIdx.x / (unsigned)p.n_tiles, per = (unsigned)p.order_per;
        const int64_t mt = (int64_t)__ldg(p.tile_order + j / per) * per + j % per;
        if (mt >= p.m_tiles) return;
        first_tile = mt * p.n_tiles + blockIdx.x % (unsigned)p.n_tiles;
    }
    // A bounded frame's tail (masks: one tile a CTA, and a cluster's CTAs share it): a tile
    // whose rows all lie at or past *m_live has nothing to compute and nothing to write.
    if (p.m_live && first_tile / p.n_tiles * BM >= *p.m_live) return;

    // Producer state.
    int64_t ld_tile = first_tile;
    int ld_slot = -1, ld_iter = 0, ld_iters = 0, ld_tap = 0, ld_kc = 0, cur_tap = -1;
    int g_t0 = 0, g_n = 0; // taps [g_t0, g_t0 + g_n) are in gidx
    bool dummy = false;
    const char *a_src[C::A_LOADS];
    const char *b_src[C::B_LOADS];
    uint32_t ld_ok = 0;
    static_assert(C::A_LOADS <= 8 && C::B_LOADS <= 16, "ld_ok's bits");
    int ld_stage = 0;

    TileSetup<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, CL, TG, TP> setup_tile{
        ld_slot, ld_tile, p, tid, words, tile_mask, row_g, row_out, ld_iters, kc_per_tap, dummy,
        tile_iters, ld_iter, ld_kc, ld_tap, cur_tap, g_n, ld_ok, lrow, b_src, W, lcol, set, stid};
    GatherLoad<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, CL, TG> load_gidx{
        g_t0, g_n, p, lane, warp, row_g, gidx, tile_mask};
    StageLoad<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, CL, TG, TP> load_stage{
        ld_iter, setup_tile, ld_tap, cur_tap, ld_ok, p, dummy, g_t0, g_n, load_gidx, A, lcol, gidx,
        lrow, a_src, row_g, b_src, ld_kc, s_base, ld_stage, unit, within, ld_iters, ld_tile,
        kc_per_tap, tile_mask, set};

    float acc[C::MI][C::NI][4];
#pragma unroll
    for (int i = 0; i < C::MI; i++)
#pragma unroll
        for (int j = 0; j < C::NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

    const int wm0 = (swarp / WN) * C::WTM, wn0 = (swarp % WN) * C::WTN;
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
    int c_slot = 0, c_iter = 0, c_iters = tile_iters[set][0], c_stage = 0;
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
        if constexpr (TG > 1)
            named_barrier(1 + set, C::THREADS);
        else
            __syncthreads();
        if constexpr (WG) {
            // The warpgroup's 64 rows of A against all BN rows of B, KSTEPS k-steps of 32
            // bytes (the descriptor's start address advances 2 units of 16 bytes a step); the
            // loads of the next stage are issued while the tensor cores run.
            // A one-warpgroup set's slab is the stage's first: a constant, so that the descriptors
            // of TG = 1 stay in uniform registers.
            const int slab = C::THREADS > 128 ? swarp >> 2 : 0;
            const uint64_t da = wg_desc<C::ROWB>(sa + slab * 64 * C::ROWB);
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
        if constexpr (TG > 1) {
            // The sets' sums: set s > 0 leaves its accumulators in its ring (its copies done),
            // set 0 adds them in set order and runs the epilogue; its staging (epi_alias, at the
            // start of shared memory) stays below ring 1.
            cp_async_wait<0>();
            __syncthreads();
            // Accumulator k (acc's elements in order) of thread stid at red[k THREADS + stid].
            constexpr int ACC = C::MI * C::NI * 4;
            float *const mine = &acc[0][0][0];
            if (set > 0) {
                float *red = reinterpret_cast<float *>(smem + (s_base - smem_addr(smem))) + stid;
#pragma unroll
                for (int k = 0; k < ACC; k++) red[k * C::THREADS] = mine[k];
            }
            __syncthreads();
            if (set > 0) break;
#pragma unroll 1
            for (int s = 1; s < TG; s++) {
                const float *red = reinterpret_cast<const float *>(
                    smem + (s_ring0 - smem_addr(smem)) + s * STAGES * C::STAGE_BYTES) + stid;
#pragma unroll
                for (int k = 0; k < ACC; k++) mine[k] += red[k * C::THREADS];
            }
            static_assert(C::EPI_BYTES <= STAGES * C::STAGE_BYTES, "set 0's staging");
        }
        // the epilogue (the kernel's comment)
        // The staging overwrites the stages: every copy and read done (tap sets: above).
        if ((p.epi_alias || cl) && TG == 1) {
            cp_async_wait<0>();
            __syncthreads();
        }
        // 16-bit wgmma tiles of 128 columns or more where only bias and activation apply: the
        // direct epilogue (epilogue.cuh), from the fragments, staged as T. On the 64-column
        // tiles it measured slower (docs/benchmarks.md), and those keep the general path.
        bool direct = false;
        if constexpr (WG && sizeof(T) == 2 && !cl && BN >= 128) {
            direct = direct_epilogue_ok<T>(p);
            if (direct) {
                static_assert(C::EPI_LD == kDirectLd && C::MI == 1 && WN == 1, "wgmma staging");
                const int64_t *ro = row_out[c_slot] + wm0;
                epilogue_direct<T, C::NI>(p, acc[0], stage + swarp * 16 * C::EPI_LD,
                                          (int)(c_tile % p.n_tiles) * BN, lane >> 2, lane & 3,
                                          lane, [&](int row) -> int64_t { return ro[row]; });
            }
        }
        if (!direct) {
            const int g = lane >> 2, q = lane & 3;
            const int n0 = (int)(c_tile % p.n_tiles) * BN;
            const int ld = cl ? C::RED_LD : C::EPI_LD;
            float *ws = cl ? reinterpret_cast<float *>(smem) + wm0 * C::RED_LD + wn0
                           : stage + swarp * 16 * C::EPI_LD;
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
        if (cl || TG > 1) break; // one tile per CTA (a cluster adds its groups' sums below)
        c_tile += gridDim.x;
        if (c_tile >= n_total) break;
        c_slot = c_slot + 1 == STAGES ? 0 : c_slot + 1;
        c_iter = 0;
        c_iters = tile_iters[set][c_slot];
    }
    if constexpr (cl)
        cluster_reduce(p, reinterpret_cast<const float *>(smem), C::RED_LD, BM, BN,
                       row_out[c_slot], c_tile);
    cp_async_wait<0>();
}

} // namespace vcg

#endif
