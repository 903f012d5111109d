// gemm/schedule.cuh - how the tensor-core kernel is launched: the per-device caches, the tap
// split's groups (two passes or thread-block clusters), the grid (persistent or a CTA per tile),
// whether a tile order is taken; plan_mma decides, launch_mma launches.
#ifndef VC_GEMM_SCHEDULE_CUH
#define VC_GEMM_SCHEDULE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

#include "core/launch.cuh"
#include "gemm/mainloop.cuh"
#include "gemm/params.cuh"

namespace vcg {

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
// end, so a second wave's CTA would hold its cluster's finished CTAs on their SMs. Of three
// rules A/B'd against the two-pass split (docs/journal/benchmarks-history.md, "Tap splits as
// thread-block clusters") this one was the fastest; rounding to the nearest made several
// layers slower than two passes.
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
// CLUSTER: the tile has a cluster kernel (mma_kernel's CL) for its tap splits. TG: its tap sets
// (MmaCfg), TP: its tap packs (StageLoad): a CTA per tile, no tap split (an automatic one is
// one group; vc_gemm_run refuses an explicit one).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CLUSTER = false, int TG = 1, int TP = 1>
cudaError_t plan_mma(const Params &p, const Sched &sc, LaunchPlan *out)
{
    static_assert((TG == 1 && TP == 1) || !CLUSTER, "tap sets and tap packs have no tap split");
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    auto kern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, false, TG, TP>;
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
    const bool one_tile = p.masks || p.splits < -1 || p.splits > 1 || TG > 1 || TP > 1;
    const bool can_alias = C::EPI_BYTES <= C::SMEM;
    int sms = 0, per_sm = 0;
    if ((e = sm_count(&sms)) != cudaSuccess) return e;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, kern, C::CTA_THREADS, one_tile && can_alias ? dyn - C::EPI_BYTES : dyn);
    if (e != cudaSuccess) return e;
    if (per_sm < 1) per_sm = 1;
    const int64_t tiles = p.m_tiles * p.n_tiles;
    const int64_t plan_tiles = p.plan_tiles > 0 ? p.plan_tiles : tiles; // vc_gemm_args.m_plan
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
    const int splits = TG > 1 || TP > 1 ? 1
                              : resolve_splits(p, plan_tiles, (int64_t)sms * per_sm, can_cluster,
                                               &clusters);
    // With masks (the implicit-GEMM convolution) tiles differ in cost by the taps they skip, and
    // a CTA per tile - the hardware hands the next tile to whichever CTA finishes - beat the
    // persistent grid's fixed round robin on every layer measured (bench_conv --tune; equal on
    // the small layers; docs/benchmarks.md). A tap split runs a CTA per group of each tile.
    const int64_t units = tiles * splits;
    const int64_t grid = one_tile || tiles < (int64_t)sms * per_sm ? units : (int64_t)sms * per_sm;
    // Tile order: where each tile has its own CTA, no split, BM divides the blocks, and the
    // tiles make more than a wave and a quarter (below that every tile starts at once, and the
    // order's load only lengthens each CTA's chain of dependent loads).
    out->splits = splits;
    out->clusters = clusters;
    out->orderable = splits == 1 && grid == units && VC_GEMM_ORDER_ROWS % BM == 0 &&
                     (plan_tiles * 4 > (int64_t)sms * per_sm * 5 || sc.force_order);
    out->epi_alias = grid == units && can_alias;
    out->grid = grid;
    out->dyn = out->epi_alias ? dyn - C::EPI_BYTES : dyn;
    const int64_t slots = (int64_t)sms * per_sm;
    out->waves = (units + slots - 1) / slots;
    return cudaSuccess;
}

// Launches a plan of plan_mma. *left: the groups whose sums the caller must still add (1: none
// - no split, or the split ran as clusters, which add their own; else the caller's second
// pass).
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, int LB, bool WG,
          int MINB = 1, bool CLUSTER = false, int TG = 1, int TP = 1>
cudaError_t launch_mma(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left)
{
    using C = MmaCfg<T, BM, BN, BK, WM, WN, STAGES, LB, WG, TG>;
    auto kern = mma_kernel<T, BM, BN, BK, WM, WN, STAGES, LB, WG, MINB, false, TG, TP>;
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
    return launch_k(pl.overlap, kern, grid, C::CTA_THREADS, (size_t)pl.dyn, s, q);
}

} // namespace vcg

#endif
