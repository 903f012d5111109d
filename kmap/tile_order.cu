// kmap/tile_order.cu - the tile order of a map on the device (kmap.h), vc_kmap_tile_order_cpu's
// twin, bit for bit.
#include "kmap/kmap_internal.cuh"

using namespace kmap_gpu;

namespace {

constexpr int kOrderThreads = 256, kOrderWarps = kOrderThreads / 32;
constexpr int kOrderMaxWords = (VC_KMAP_MAX_VOLUME + 31) / 32;
constexpr int kOrderBuckets = 32 * kOrderMaxWords + 1; // costs 0 .. 352 (K <= 343)
// Blocks whose costs the sorting CTA keeps in shared memory (524k outputs; test_gpu_kmap's 1M-row
// cloud takes the other path).
constexpr int kOrderStaged = 4096;

// One warp a block of VC_KMAP_ORDER_ROWS positions of perm: cost[b] = popcount of the OR of its
// rows' masks. The CTA that finishes last (ticket: 0 at the start, left at 0) then sorts the blocks
// by cost, descending, ties by block: each warp counts a contiguous range of blocks, the counts
// give each (cost, warp) its first position, and each warp places its range 32 blocks at a
// time, ranking equal costs among the lanes (match_any) - a stable counting sort.
__global__ void __launch_bounds__(kOrderThreads)
    tile_order_kernel(const uint32_t *masks, int32_t words, const int32_t *perm, int64_t n,
                      int64_t blocks, int32_t *cost, unsigned *ticket, int32_t *order)
{
    static_assert(VC_KMAP_ORDER_ROWS == 128, "four rows a lane");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t b = (int64_t)blockIdx.x * kOrderWarps + warp;
    if (b < blocks) {
        int32_t r[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t at = b * VC_KMAP_ORDER_ROWS + lane + 32 * j;
            r[j] = at < n ? perm[at] : -1;
        }
        int c = 0;
        for (int w = 0; w < words; w++) {
            uint32_t v = 0;
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (r[j] >= 0) v |= masks[(int64_t)r[j] * words + w];
#pragma unroll
            for (int d = 16; d > 0; d >>= 1) v |= __shfl_xor_sync(~0u, v, d);
            c += __popc(v);
        }
        if (lane == 0) cost[b] = c;
    }
    // The CTA's costs (the barrier) before its ticket; the last CTA reads every CTA's.
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) last = last_block(ticket);
    __syncthreads();
    if (!last) return;

    __shared__ int32_t cnt[kOrderWarps][kOrderBuckets]; // then each (cost, warp)'s next place
    __shared__ int64_t tot[kOrderBuckets];
    __shared__ uint16_t staged[kOrderStaged]; // the costs, where they fit: one round trip
    static_assert(kOrderThreads == kRowThreads, "block_prefix scans with kRowThreads threads");
    __shared__ typename cub::BlockScan<int64_t, kRowThreads>::TempStorage scan_tmp;
    const int most = 32 * words; // bucket most - c holds cost c
    for (int i = threadIdx.x; i < kOrderWarps * kOrderBuckets; i += kOrderThreads)
        (&cnt[0][0])[i] = 0;
    const bool in_smem = blocks <= kOrderStaged;
    if (in_smem) {
#pragma unroll 4
        for (int i = threadIdx.x; i < (int)blocks; i += kOrderThreads)
            staged[i] = (uint16_t)__ldcg(cost + i);
    }
    __syncthreads();
    auto cost_of = [&](int64_t i) { return in_smem ? (int)staged[i] : __ldcg(cost + i); };
    const int64_t per = (blocks + kOrderWarps - 1) / kOrderWarps;
    const int64_t lo = min(blocks, warp * per), hi = min(blocks, lo + per);
    for (int64_t i = lo + lane; i < hi; i += 32) atomicAdd(&cnt[warp][most - cost_of(i)], 1);
    __syncthreads();
    for (int q = threadIdx.x; q <= most; q += kOrderThreads) {
        int64_t t = 0;
        for (int w = 0; w < kOrderWarps; w++) t += cnt[w][q];
        tot[q] = t;
    }
    __syncthreads();
    // exclusive prefixes of the bucket totals, in place
    block_prefix<int64_t>(
        scan_tmp, most + 1, [&](int64_t q) { return tot[q]; },
        [&](int64_t q, int64_t v) { tot[q] = v; });
    __syncthreads();
    for (int q = threadIdx.x; q <= most; q += kOrderThreads) {
        int64_t at = tot[q];
        for (int w = 0; w < kOrderWarps; w++) {
            const int32_t c = cnt[w][q];
            cnt[w][q] = (int32_t)at; // blocks <= 2^31 / 128: positions fit
            at += c;
        }
    }
    __syncthreads();
    for (int64_t i0 = lo; i0 < hi; i0 += 32) {
        const int64_t i = i0 + lane;
        const unsigned on = __ballot_sync(~0u, i < hi);
        if (i < hi) {
            const int q = most - cost_of(i);
            const unsigned peers = __match_any_sync(on, q);
            order[cnt[warp][q] + __popc(peers & ((1u << lane) - 1u))] = (int32_t)i;
            __syncwarp(on);
            if (lane == __ffs(peers) - 1) cnt[warp][q] += __popc(peers);
        }
        __syncwarp();
    }
    if (threadIdx.x == 0) *ticket = 0u; // for the next build in place (every CTA has taken one)
}

} // namespace

// Frees a map's tile order (a stream-ordered block of the map's allocator, so the stream is
// waited on first: no implicit synchronisation on free) and clears its fields.
static void drop_tile_order(vc_kmap_data *m, cudaStream_t s)
{
    if (m->tile_order) {
        cudaStreamSynchronize(s);
        vc_dev_free(m->alloc, m->tile_order, s);
    }
    cudaGetLastError();
    m->tile_order = NULL;
    m->order_blocks = 0;
}

// Whether s is capturing a graph (where neither the synchronisation nor the allocation of a
// reallocation is allowed).
static bool capturing(cudaStream_t s)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const bool yes = cudaStreamIsCapturing(s, &cs) == cudaSuccess &&
                     cs != cudaStreamCaptureStatusNone;
    cudaGetLastError();
    return yes;
}

extern "C" vc_status vc_kmap_tile_order_gpu(vc_kmap_data *m, struct CUstream_st *stream,
                                            vc_err *err)
{
    if (!m || m->n_out < 0 || m->volume > VC_KMAP_MAX_VOLUME ||
        (m->n_out > 0 && (!m->masks || !m->perm || m->mask_words < (m->volume + 31) / 32 ||
                          m->mask_words > kOrderMaxWords)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "tile order: map without masks or perm");
    cudaStream_t s = stream;
    const int64_t blocks = (m->n_out + VC_KMAP_ORDER_ROWS - 1) / VC_KMAP_ORDER_ROWS;
    const bool in_place = m->tile_order && m->order_blocks == blocks;
    if (!in_place && (blocks > 0 || m->tile_order) && capturing(s))
        return vc_fail(err, VC_ERR_UNSUPPORTED, "tile order: %lld blocks, built for %lld: "
                       "under stream capture it must be built in place (first build it once "
                       "outside the capture at this block count)", (long long)blocks,
                       (long long)m->order_blocks);
    if (!in_place) {
        // One block: the order, then the kernel's scratch (the costs, the ticket), kept for a
        // rebuild in place; the ticket starts at 0 and the kernel leaves it at 0.
        drop_tile_order(m, s);
        if (blocks == 0) return VC_OK;
        cudaError_t e = vc_dev_alloc_n(m->alloc, &m->tile_order, 2 * blocks + 1, s);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(m->tile_order + 2 * blocks, 0, sizeof(int32_t), s);
        if (e != cudaSuccess) {
            drop_tile_order(m, s);
            return vc_cuda_fail(err, e, kArea, "allocating the tile order");
        }
    }
    const int64_t grid = (blocks + kOrderWarps - 1) / kOrderWarps;
    tile_order_kernel<<<(unsigned)grid, kOrderThreads, 0, s>>>(
        m->masks, m->mask_words, m->perm, m->n_out, blocks, m->tile_order + blocks,
        reinterpret_cast<unsigned *>(m->tile_order + 2 * blocks), m->tile_order);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        if (!capturing(s)) drop_tile_order(m, s); // the capture fails anyway: no sync in it
        return vc_cuda_fail(err, e, kArea, "building the tile order");
    }
    m->order_blocks = blocks;
    return VC_OK;
}
