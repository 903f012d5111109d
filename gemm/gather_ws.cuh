// gemm/gather_ws.cuh - the warp-specialised gathered kernel (ws_kernel, sm_90a): a persistent
// CTA of three warpgroups - set-up, copies, consumer - that hand 64 x BN tiles of the gathered
// GEMM (gemm.h: gather, gather rows, row map, masks, tap range, the fused epilogue) to each other
// through mbarriers, so that a tile's set-up, its copies and the tensor cores' work on the tile
// before overlap. Included by gemm/gemm_sm90.cu alone (wgmma assembles for sm_90a only).
//
// Why: in the CTA-a-tile kernel (mainloop.cuh) the same warps set a tile up (dependent loads of
// its rows, masks and gather indices, each behind a barrier), issue each stage's copies and run
// its MMAs, one after the other, and every CTA pays the set-up before its first MMA
// (docs/benchmarks.md, "Inside the heaviest CTA", "What a small layer's time is made of").
//
// Roles (384 threads):
//  - warpgroup 2, the set-up, up to SLOTS tiles ahead: waits for a free tile slot, loads the
//    tile's rows (gather and output row), then at once the OR of their masks (tap range applied)
//    and the gather indices of all its taps (the taps computed fit one chunk, vc_gemm_plan) into
//    the slot, and posts it (slot_full).
//  - warpgroup 0, the copies: for each tile, waits for its slot, then walks the tile's taps and k
//    chunks: each iteration waits for its stage to be free (empty), issues its cp.async copies
//    (A's gathered rows, W's slice; zero-fill where a row has no source) and arrives on the
//    stage's full barrier when they land (cp.async.mbarrier.arrive.noinc: each thread once).
//  - warpgroup 1, the consumer: for each tile, waits for its slot, then for each stage runs the
//    wgmma of the stage, and hands the stage before back (its wgmma done: wait_group 1) - so one
//    stage's MMAs are in flight while the next is waited for; then the epilogue (staged as the
//    tensor-core kernel's: 16-row slabs, 32 columns at a time, epilogue8). The copies and the
//    consumer free the slot (slot_free).
// Tiles: CTA b takes tile positions b, b + gridDim.x, ... (every role walks the same sequence);
// a position is a tile of the tile order where one is given (heavy blocks first: each CTA starts
// with one of the heaviest), else tile j itself. A tile whose rows all lie past *m_live (a
// bounded frame's tail) is skipped by all. A tile without taps runs one iteration of zeros, as
// in the tensor-core kernel, so that its epilogue (bias, activation) still writes its rows.
// Sums: tile by tile the same wgmma in the same order (taps ascending, k chunks, 16-deep steps)
// as the one-warpgroup 64-row wgmma tile of the same BN and 64-deep chunks: the same bits.
#ifndef VC_GEMM_GATHER_WS_CUH
#define VC_GEMM_GATHER_WS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm/epilogue.cuh"
#include "gemm/params.cuh"
#include "gemm/ptx_sm80.cuh"
#include "gemm/taps.cuh"
#include "gemm/wgmma.cuh"

namespace vcg {

// The kernel's layout. Rows of 128 bytes (64 16-bit elements: the 128-byte swizzle), 64 rows a
// tile, STAGES stages of A's 64 rows and W's BN rows, SLOTS tile slots (what the consumer reads of
// a tile: its output rows, iterations and index).
template <typename T, int BN, int STAGES>
struct WsCfg {
    static constexpr int BM = 64, ES = (int)sizeof(T), BK = 128 / ES, ROWB = 128, UNITS = 8;
    static constexpr int SLOTS = 2;
    static constexpr int THREADS = 384; // copies, consumer and set-up warpgroups
    static constexpr int LPR = UNITS;   // 16-byte loads a row
    static constexpr int ROWS_PER_PASS = 128 / LPR;
    static constexpr int A_LOADS = BM / ROWS_PER_PASS, B_LOADS = BN / ROWS_PER_PASS;
    static constexpr int STAGE_BYTES = (BM + BN) * ROWB;
    static constexpr int EPI_LD = 36; // staging row stride in floats: 32 columns + 4
    static constexpr int EPI_BYTES = 4 * 16 * EPI_LD * 4;
    // dynamic shared memory: 1 KB of slack (stages on 1024-byte swizzle atoms), the stages, the
    // consumer's staging, then each tile slot's gather indices
    static constexpr int fixed_smem() { return 1024 + STAGES * STAGE_BYTES + EPI_BYTES; }
    // CTAs an SM the registers must allow: two where the shared memory lets two in (their
    // largest gather indices and 3 KB of static memory included) and the consumer's
    // accumulators leave room at 85 registers a thread (BN <= 64), else one.
    static constexpr int MINB =
        BN <= 64 && 2 * (fixed_smem() + SLOTS * BM * 33 * 4 + 3072) <= 228 * 1024 ? 2 : 1;
    static_assert(ES == 2, "16-bit inputs");
    static_assert(BN % 32 == 0 && BN >= 32 && BN <= 128, "BN of 32-128 (wgmma n, staging)");
    static_assert(STAGE_BYTES % 1024 == 0, "stages on swizzle atoms");
    static_assert(A_LOADS <= 8 && B_LOADS <= 16, "load bits");
};

// Tile position j of this launch: the tile (m tile x n_tiles + n tile), or -1 where the position
// is a short order block's padding or lies past the live rows.
__device__ __forceinline__ int64_t ws_tile(const Params &p, int64_t j, int bm, int64_t live)
{
    int64_t mt = j / p.n_tiles;
    if (p.tile_order) {
        const int64_t per = p.order_per;
        mt = (int64_t)__ldg(p.tile_order + mt / per) * per + mt % per;
        if (mt >= p.m_tiles) return -1;
    }
    if (mt * bm >= live) return -1;
    return mt * p.n_tiles + j % p.n_tiles;
}

// cp.async completion as one arrival on an mbarrier (no pending count added: the barrier's
// expected count includes it).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar)
{
    VC_WG_ASM("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Positions: the tiles (n fastest) or, with a tile order, its blocks' tiles.
__device__ __forceinline__ int64_t ws_positions(const Params &p)
{
    return p.tile_order ? p.order_blocks * p.order_per * p.n_tiles : p.m_tiles * p.n_tiles;
}

template <typename T, int BN, int STAGES>
__global__ void __launch_bounds__(384, (WsCfg<T, BN, STAGES>::MINB)) ws_kernel(const Params p)
{
    using C = WsCfg<T, BN, STAGES>;
    constexpr int BM = C::BM, SLOTS = C::SLOTS;
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ __align__(8) uint64_t slot_full[SLOTS], slot_free[SLOTS];
    __shared__ int64_t row_out[SLOTS][BM], row_g[SLOTS][BM];
    __shared__ int64_t slot_tile[SLOTS];
    __shared__ int32_t slot_iters[SLOTS]; // -1: a tile without taps (one iteration of zeros)
    __shared__ uint32_t tile_mask[SLOTS][kMaxMaskWords];

    const uint32_t s_ring = (smem_addr(smem) + 1023u) & ~1023u;
    float *const stage_epi =
        reinterpret_cast<float *>(smem + (s_ring - smem_addr(smem)) + STAGES * C::STAGE_BYTES);
    int32_t *const gidx0 = reinterpret_cast<int32_t *>(reinterpret_cast<uint8_t *>(stage_epi) +
                                                       C::EPI_BYTES); // [SLOTS][BM][gstride]
    const int tid = threadIdx.x, role = tid >> 7, rtid = tid & 127;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(smem_addr(&full[s]), 128); // the copying threads, one arrival each
            mbar_init(smem_addr(&empty[s]), 4);  // the consumer's warps, lane 0 of each
        }
        for (int s = 0; s < SLOTS; s++) {
            mbar_init(smem_addr(&slot_full[s]), 128); // the set-up's threads
            mbar_init(smem_addr(&slot_free[s]), 256); // the copying and consuming threads
        }
        mbar_init_fence();
    }
    __syncthreads();
    const int64_t positions = ws_positions(p);
    const int64_t live = p.m_live ? *p.m_live : INT64_MAX;
    const int kc_per_tap = (p.k + C::BK - 1) / C::BK;
    const bool masked = p.masks != nullptr;
    const int gslot = BM * p.gstride; // a slot's gather indices

    if (role == 2) { // ---- the set-up: rows, masks, gather indices, SLOTS tiles ahead ----
        const int words = (p.taps + 31) >> 5;
        int tc = 0;
        for (int64_t j = blockIdx.x; j < positions; j += gridDim.x) {
            const int64_t tile = ws_tile(p, j, BM, live);
            if (tile < 0) continue;
            const int slot = tc % SLOTS;
            if (tc >= SLOTS)
                mbar_wait(smem_addr(&slot_free[slot]), (uint32_t)((tc / SLOTS - 1) & 1));
            uint32_t *const tm = tile_mask[slot];
            const int64_t m0 = (tile / p.n_tiles) * BM;
            if (masked) // cleared before the barrier after the rows
                for (int w = rtid; w < words; w += 128) tm[w] = 0u;
            // Two dependent rounds of loads: the rows (gather row, output row), then at once the
            // OR of their masks and the gather indices of every tap in [tap_lo, tap_lo + g_n)
            // (not only the taps the OR holds, which would cost a third round).
            if (rtid < BM) {
                const int64_t gi = m0 + rtid;
                int64_t g = -1, r = -1;
                if (gi < p.m) {
                    g = p.gather_rows ? (int64_t)__ldg(p.gather_rows + gi) : gi;
                    r = p.row_map ? (int64_t)__ldg(p.row_map + gi) : gi;
                }
                row_g[slot][rtid] = g;
                row_out[slot][rtid] = r;
            }
            named_barrier(1, 128);
            if (masked && rtid < BM) {
                const int64_t r = row_out[slot][rtid];
                if (r >= 0) {
                    const uint32_t *mr = p.masks + r * p.mask_words;
                    for (int w = 0; w < words; w++) {
                        const uint32_t v = __ldg(mr + w) & tap_bits(p, w);
                        if (v) atomicOr(&tm[w], v);
                    }
                }
            }
            // a warp reads 32 / gw rows at a time, gw lanes a row (g_n rounded up to a power of
            // two), eight loads in flight a lane; raw values (the use checks the range)
            const int g_n = min(p.gchunk, p.tap_hi - p.tap_lo);
            if (p.gather) {
                int32_t *const gidx = gidx0 + slot * gslot;
                const int lsh = g_n <= 1 ? 0 : 32 - __clz(g_n - 1);
                const int tap = rtid & 31 & ((1 << lsh) - 1);
                const int step = 4 << (5 - lsh);
                const int r0 = ((rtid >> 5) << (5 - lsh)) + ((rtid & 31) >> lsh);
                if (tap < g_n) {
                    const int32_t *src = p.gather + p.tap_lo + tap;
                    for (int rb = r0; rb < BM; rb += 8 * step) {
                        int32_t v[8];
#pragma unroll
                        for (int u = 0; u < 8; u++) {
                            const int row = rb + u * step;
                            const int64_t g = row < BM ? row_g[slot][row] : -1;
                            v[u] = g >= 0 ? __ldg(src + (uint64_t)g * (uint32_t)p.taps) : -1;
                        }
#pragma unroll
                        for (int u = 0; u < 8; u++)
                            if (rb + u * step < BM) gidx[(rb + u * step) * p.gstride + tap] = v[u];
                    }
                }
            }
            named_barrier(1, 128);
            int active = p.tap_hi - p.tap_lo;
            if (masked) {
                active = 0;
                for (int w = 0; w < words; w++) active += __popc(tm[w]);
            }
            const int iters = active * kc_per_tap;
            if (rtid == 0) {
                slot_iters[slot] = iters > 0 ? iters : -1;
                slot_tile[slot] = tile;
            }
            mbar_arrive(smem_addr(&slot_full[slot])); // the slot is the others' to read
            tc++;
        }
        return;
    }

    if (role == 0) { // ---- the copies: tap by tap, k chunk by k chunk ----
        const T *A = static_cast<const T *>(p.a);
        const T *W = static_cast<const T *>(p.w);
        const int lcol = rtid % C::LPR, lrow = rtid / C::LPR;
        const uint32_t kb = (uint32_t)p.k * C::ES; // a row's bytes (fit 32 bits: gemm.h)
        const uint32_t rows = p.a_rows < INT32_MAX ? (uint32_t)p.a_rows : INT32_MAX;
        int64_t gs = 0; // stages issued so far
        int tc = 0;
        for (int64_t j = blockIdx.x; j < positions; j += gridDim.x) {
            const int64_t tile = ws_tile(p, j, BM, live);
            if (tile < 0) continue;
            const int slot = tc % SLOTS;
            mbar_wait(smem_addr(&slot_full[slot]), (uint32_t)((tc / SLOTS) & 1));
            const int si = slot_iters[slot];
            const bool dummy = si < 0;
            const int iters = dummy ? 1 : si;
            const int n0 = (int)(tile % p.n_tiles) * BN;
            const int64_t *const rg = row_g[slot];
            const uint32_t *const tm = tile_mask[slot];
            const int32_t *const gidx = gidx0 + slot * gslot;
            uint32_t live_rows = 0; // bit jj: row lrow + 16 jj has a gather row
            for (int jj = 0; jj < C::A_LOADS; jj++)
                live_rows |= (uint32_t)(rg[lrow + jj * C::ROWS_PER_PASS] >= 0 && !dummy) << jj;
            const char *b_src[C::B_LOADS];
            uint32_t b_ok = 0;
            for (int jj = 0; jj < C::B_LOADS; jj++) {
                const int n = n0 + lrow + jj * C::ROWS_PER_PASS;
                const bool ok = n < p.n_cols && !dummy;
                b_src[jj] = reinterpret_cast<const char *>(
                    W + (ok ? ((int64_t)n * p.b_taps + p.b_tap0) * p.k : 0) + lcol * 8);
                b_ok |= (uint32_t)ok << jj;
            }
            int tap = dummy ? p.tap_lo : next_tap(p, tm, p.tap_lo);
            int cur = -1, kc = 0;
            const char *a_src[C::A_LOADS];
            uint32_t a_ok = 0;
            for (int it = 0; it < iters; it++, gs++) {
                const int s = (int)(gs % STAGES);
                if (gs >= STAGES)
                    mbar_wait(smem_addr(&empty[s]), (uint32_t)(((gs / STAGES) & 1) ^ 1));
                if (tap != cur) {
                    const int64_t db = (int64_t)(tap - max(cur, 0)) * p.k * C::ES;
#pragma unroll
                    for (int jj = 0; jj < C::B_LOADS; jj++) b_src[jj] += db;
                    cur = tap;
                    const char *const a_col = reinterpret_cast<const char *>(A + lcol * 8);
                    a_ok = 0;
                    if (p.gather) {
                        const int32_t *gr = gidx + lrow * p.gstride + cur - p.tap_lo;
#pragma unroll
                        for (int jj = 0; jj < C::A_LOADS; jj++) {
                            const uint32_t idx =
                                (uint32_t)gr[jj * C::ROWS_PER_PASS * p.gstride];
                            const bool ok = idx < rows && (live_rows >> jj & 1u);
                            a_src[jj] = a_col + (uint64_t)(ok ? idx : 0u) * kb;
                            a_ok |= (uint32_t)ok << jj;
                        }
                    } else {
#pragma unroll
                        for (int jj = 0; jj < C::A_LOADS; jj++) {
                            const int64_t g = rg[lrow + jj * C::ROWS_PER_PASS];
                            const bool ok = g >= 0 && g < p.a_rows && !dummy;
                            a_src[jj] = a_col + (ok ? g * p.k * C::ES : 0);
                            a_ok |= (uint32_t)ok << jj;
                        }
                    }
                }
                const int kc_bytes = kc * C::BK * C::ES;
                const bool kin = kc * C::BK + lcol * 8 < p.k; // k % 8 == 0 (16-byte loads)
                const uint32_t sa = s_ring + (uint32_t)(s * C::STAGE_BYTES);
                const uint32_t sb = sa + BM * C::ROWB;
#pragma unroll
                for (int jj = 0; jj < C::A_LOADS; jj++) {
                    const int row = lrow + jj * C::ROWS_PER_PASS;
                    cp_async_if<16>(sa + (uint32_t)(row * 128 + ((lcol ^ (row & 7)) << 4)),
                                    a_src[jj] + kc_bytes, kin && (a_ok >> jj & 1u));
                }
#pragma unroll
                for (int jj = 0; jj < C::B_LOADS; jj++) {
                    const int row = lrow + jj * C::ROWS_PER_PASS;
                    cp_async_if<16>(sb + (uint32_t)(row * 128 + ((lcol ^ (row & 7)) << 4)),
                                    b_src[jj] + kc_bytes, kin && (b_ok >> jj & 1u));
                }
                cp_async_mbar_arrive(smem_addr(&full[s]));
                if (++kc == kc_per_tap) {
                    kc = 0;
                    if (!dummy) tap = next_tap(p, tm, tap + 1);
                }
            }
            mbar_arrive(smem_addr(&slot_free[slot])); // its rows, mask and indices read
            tc++;
        }
        cp_async_wait<0>();
        return;
    }

    // ---- the consumer ----
    const int warp = rtid >> 5, lane = tid & 31;
    const int g4 = lane >> 2, q = lane & 3;
    float *const slab = stage_epi + warp * 16 * C::EPI_LD;
    float acc[BN / 8][4];
    int64_t gs = 0;
    int tc = 0;
    for (int64_t j = blockIdx.x; j < positions; j += gridDim.x) {
        if (ws_tile(p, j, BM, live) < 0) continue;
        const int slot = tc % SLOTS;
        mbar_wait(smem_addr(&slot_full[slot]), (uint32_t)((tc / SLOTS) & 1));
        const int iters = slot_iters[slot] < 0 ? 1 : slot_iters[slot];
        const int64_t tile = slot_tile[slot];
#pragma unroll
        for (int f = 0; f < BN / 8; f++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[f][e] = 0.f;
        int prev = -1;
        for (int it = 0; it < iters; it++, gs++) {
            const int s = (int)(gs % STAGES);
            mbar_wait(smem_addr(&full[s]), (uint32_t)((gs / STAGES) & 1));
            const uint32_t sa = s_ring + (uint32_t)(s * C::STAGE_BYTES);
            const uint64_t da = wg_desc<128>(sa);
            const uint64_t db = wg_desc<128>(sa + BM * C::ROWB);
            wg_fence_acc(acc);
            wg_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) wgmma<T, BN>(acc, da + 2 * ks, db + 2 * ks);
            wg_commit();
            if (prev >= 0) {
                wg_wait1(); // the stage before: its wgmma done, hand it back
                if (lane == 0) mbar_arrive(smem_addr(&empty[prev]));
            }
            prev = s;
        }
        wg_wait0();
        wg_fence_acc(acc);
        if (lane == 0) mbar_arrive(smem_addr(&empty[prev]));
        // Epilogue: fragment f holds columns 8 f + 2 q (+1) of rows g4 and g4 + 8 of the warp's
        // 16; staged 32 columns at a time as fp32, each 8 columns through epilogue8.
        const int n0 = (int)(tile % p.n_tiles) * BN;
        const int64_t *ro = row_out[slot] + warp * 16;
#pragma unroll
        for (int cc = 0; cc < BN / 32; cc++) {
#pragma unroll
            for (int f = 0; f < 4; f++) {
                *reinterpret_cast<float2 *>(slab + g4 * C::EPI_LD + 8 * f + 2 * q) =
                    make_float2(acc[4 * cc + f][0], acc[4 * cc + f][1]);
                *reinterpret_cast<float2 *>(slab + (g4 + 8) * C::EPI_LD + 8 * f + 2 * q) =
                    make_float2(acc[4 * cc + f][2], acc[4 * cc + f][3]);
            }
            __syncwarp();
#pragma unroll
            for (int u = 0; u < 2; u++) { // 16 rows x 4 chunks of 8 columns
                const int c = lane + 32 * u, row = c >> 2, col = (c & 3) * 8;
                const int64_t r = ro[row];
                const int n = n0 + 32 * cc + col;
                if (r >= 0 && n < p.n_cols) {
                    const float4 *src =
                        reinterpret_cast<const float4 *>(slab + row * C::EPI_LD + col);
                    const float4 x = src[0], y = src[1];
                    float v[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
                    epilogue8(p, r, n, v);
                }
            }
            __syncwarp();
        }
        mbar_arrive(smem_addr(&slot_free[slot])); // its rows read
        tc++;
    }
}

} // namespace vcg

#endif
