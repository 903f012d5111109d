// kmap/sort_pairs.cu - the look-back LSD radix sort and the launches that share it: the row
// pass (masks, per-block pair counts, the mask sort's digit histograms), the column scans, the
// pair scatter and the mask sort (perm), fused into pairs_sort_kernel; the output-key sort of
// the new-output types; CUB's sorts for K > 32 and 64-bit output keys.
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "kmap/kmap_internal.cuh"

namespace kmap_gpu {

namespace {

// ---- the look-back radix sort --------------------------------------------------------------
//
// A stable LSD radix sort whose tiles take their digit prefixes by decoupled look-back (each
// tile publishes its digit counts, then the running prefix of its predecessors, which it reads
// back-to-front): after one histogram of every pass's digits (made by whatever step produced
// the keys), a pass is one kernel (or one step between two barriers of a launch's sort blocks),
// with no scan step. Digits of up to 9 bits: BITS = 8 (256 bins, one per thread) or 9 (512
// bins, two per thread). It sorts the masks (K <= 32, one mask word: ceil(K / 9) passes) and
// the 32-bit output keys.

template <int BITS> struct SortSmem {
    static const int kBins = 1 << BITS;
    typedef cub::BlockScan<long long, kRowThreads> Scan;
    typename Scan::TempStorage scan;
    int32_t wcnt[kRowWarps][kBins];
    int32_t wpre[kRowWarps][kBins];
    long long tbase[kBins];
    long long gbase[kBins];
    long long tile;
};

const unsigned long long kLbAgg = 1ull << 62, kLbInc = 2ull << 62, kLbVal = (1ull << 62) - 1;
const int kLbWindow = 16;

// Decoupled look-back for slot j of tile t (m slots per tile), in two halves so that a block
// posts all its slots before it waits on any: lb_publish posts the tile's count agg (tile 0:
// as its inclusive sum); lb_walk returns the sum of the slot over tiles < t and posts the
// inclusive sum. A tile waits only on smaller tiles, held by blocks that took them earlier
// (tile numbers come from a counter), so the smallest tile in progress never waits: no
// deadlock. A launch of no more tiles than SMs takes them by block index (tiles_resident).
__device__ __forceinline__ void lb_publish(unsigned long long *lb, int64_t t, int64_t m,
                                           int64_t j, long long agg)
{
    atomicExch(lb + t * m + j, (t == 0 ? kLbInc : kLbAgg) | (unsigned long long)agg);
}

__device__ __forceinline__ long long lb_walk(unsigned long long *lb, int64_t t, int64_t m,
                                             int64_t j, long long agg)
{
    if (t == 0) return 0;
    const volatile unsigned long long *w = lb;
    long long excl = 0;
    // Walk back kLbWindow tiles at a time (independent loads in flight: when every tile starts
    // at once, as the few tiles of a small sort do, the walk of tile t takes t / kLbWindow
    // round trips); tile 0 always holds an inclusive prefix, so the walk ends there at the
    // latest.
    for (int64_t u = t - 1;; u -= kLbWindow) {
        unsigned long long v[kLbWindow];
#pragma unroll
        for (int i = 0; i < kLbWindow; i++) v[i] = u - i >= 0 ? w[(u - i) * m + j] : 0;
        bool done = false;
#pragma unroll
        for (int i = 0; i < kLbWindow; i++) {
            if (done) break;
            while ((v[i] >> 62) == 0) v[i] = w[(u - i) * m + j];
            excl += (long long)(v[i] & kLbVal);
            if ((v[i] >> 62) == 2) done = true;
        }
        if (done) break;
    }
    atomicExch(lb + t * m + j, kLbInc | (unsigned long long)(excl + agg));
    return excl;
}

// A packed look-back for sorts of a few tiles, each with its own block, all started at once (a
// launch of tiles_resident tiles). A tile posts its counts plus one as 16-bit lanes, four bins
// a 64-bit word (a tile holds kTile < 2^16 - 1 items), so that a zero lane means "not posted
// yet", and sums every earlier tile's words, kRowThreads / (bins / 4) threads a word: no
// inclusive prefixes, a quarter of the words and of the flag tests. Used where each thread's
// share is one window of loads (kPackedTiles: 33 tiles of 9-bit digits, 65 of 8-bit), where it
// is one round trip; with more tiles, the walk of lb_walk stops sooner at a prefix that an
// earlier tile has posted (measured faster below that bound and slower past it, see
// docs/benchmarks.md). Word j of tile t (m words a tile) holds bins 4j..4j+3.
static_assert(kTile < 0xffff, "packed look-back counts are 16-bit lanes of count + 1");
const unsigned long long kLane1 = 0x0001000100010001ull, kLaneTop = 0x8000800080008000ull;
template <int BITS>
constexpr int64_t kPackedTiles = (int64_t)kRowThreads / ((1 << BITS) / 4) * kLbWindow + 1;

__device__ __forceinline__ void lb_post4(unsigned long long *lb, int64_t t, int64_t m, int64_t j,
                                         const long long *c)
{
    unsigned long long w = 0;
#pragma unroll
    for (int q = 0; q < 4; q++) w |= (unsigned long long)(c[q] + 1) << (16 * q);
    atomicExch(lb + t * m + j, w);
}

// The sums of bins 4j..4j+3 over tiles u < t with u % R == h, as two 64-bit words of two 32-bit
// lanes each: lo = (bin 4j, bin 4j + 2), hi = (bin 4j + 1, bin 4j + 3). Lanes never carry into
// each other: a bin's sum is at most the item count plus the tiles, < 2^32.
__device__ __forceinline__ void lb_sum4(const unsigned long long *lb, int64_t t, int64_t m,
                                        int64_t j, int h, int R, unsigned long long &lo,
                                        unsigned long long &hi)
{
    const volatile unsigned long long *w = lb;
    const unsigned long long even = 0x0000ffff0000ffffull;
    lo = hi = 0;
    unsigned long long posts = 0;
    for (int64_t u0 = h; u0 < t; u0 += (int64_t)R * kLbWindow) {
        unsigned long long v[kLbWindow];
#pragma unroll
        for (int i = 0; i < kLbWindow; i++) {
            const int64_t u = u0 + (int64_t)R * i;
            v[i] = u < t ? w[u * m + j] : kLane1;
        }
#pragma unroll
        for (int i = 0; i < kLbWindow; i++) {
            const int64_t u = u0 + (int64_t)R * i;
            if (u >= t) break;
            // a zero lane: that tile has not posted (lanes are at most kTile + 1 < 2^15)
            while ((v[i] - kLane1) & ~v[i] & kLaneTop) v[i] = w[u * m + j];
            lo += v[i] & even;
            hi += (v[i] >> 16) & even;
            posts++;
        }
    }
    lo -= posts * 0x0000000100000001ull;
    hi -= posts * 0x0000000100000001ull;
}

// One stable LSD pass over n items: digit ((key ^ flip) >> shift) & (2^dbits - 1), dbits <=
// BITS, of src_k; values src_v (NULL: the item index) into dst_k (NULL: keys not kept) / dst_v
// (NULL: none). ghist: the pass's global digit counts [2^BITS]; lb: its look-back words
// [tiles][2^BITS], zero before the pass; ctr: a tile counter at zero (ordinary launches: tiles
// go to blocks in the order the blocks ask) or NULL (launches of at most one tile per SM: block
// b takes tiles b, b + gridDim.x, ...).
template <int BITS>
__device__ void sort_pass(const uint32_t *src_k, const int32_t *src_v, uint32_t *dst_k,
                          int32_t *dst_v, int64_t n, uint32_t flip, int shift, int dbits,
                          const uint32_t *ghist, unsigned long long *lb,
                          unsigned long long *ctr, SortSmem<BITS> &sm)
{
    typedef SortSmem<BITS> S;
    const int B = S::kBins, BPT = B / kRowThreads;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t dmask = (1u << dbits) - 1u;
    const unsigned lt = (1u << lane) - 1u;
    const int64_t tiles = (n + kTile - 1) / kTile;
    // every tile has a block of its own, all started at once, and few enough that each thread
    // of the packed look-back (lb_post4) reads its share in one window
    const bool packed = !ctr && tiles <= gridDim.x && tiles <= kPackedTiles<BITS>;
    // Every load a tile needs is issued before anything waits on one: the digit counts here,
    // the tile's items below (one memory round trip instead of one per item).
    uint32_t hc[BPT];
#pragma unroll
    for (int b = 0; b < BPT; b++) hc[b] = __ldcg(&ghist[b * kRowThreads + tid]);
    bool based = false;
    for (int64_t t = blockIdx.x;; t += gridDim.x) {
        if (ctr) {
            if (tid == 0) sm.tile = (long long)atomicAdd(ctr, 1ull);
            __syncthreads();
            t = sm.tile;
        }
        if (t >= tiles) break;
        // Item r of warp w is item t * kTile + w * 32 * kSortItems + 32 r + lane: a warp's
        // items are contiguous, so it ranks them alone and the block meets at a barrier once.
        uint32_t k[kSortItems];
        int32_t v[kSortItems], dg[kSortItems], lr[kSortItems];
        const int64_t i0 = t * kTile + (int64_t)warp * 32 * kSortItems + lane;
#pragma unroll
        for (int r = 0; r < kSortItems; r++) {
            const int64_t i = i0 + 32 * r;
            const bool ok = i < n;
            k[r] = ok ? __ldcg(&src_k[i]) : 0u;
            v[r] = ok ? (src_v ? __ldcg(&src_v[i]) : (int32_t)i) : 0;
        }
#pragma unroll
        for (int b = 0; b < BPT; b++)
            for (int w = 0; w < kRowWarps; w++) sm.wcnt[w][b * kRowThreads + tid] = 0;
        if (!based) {
            // global base of each digit (once per block), kRowThreads bins per round
            long long carry = 0;
            for (int b = 0; b < BPT; b++) {
                long long excl, agg;
                typename S::Scan(sm.scan).ExclusiveSum((long long)hc[b], excl, agg);
                sm.gbase[b * kRowThreads + tid] = carry + excl;
                carry += agg;
                __syncthreads(); // the scan storage is reused
            }
            based = true;
        }
        __syncthreads();
        // Ranks within the warp: earlier items of the warp with the same digit.
        int32_t *wc = sm.wcnt[warp];
#pragma unroll
        for (int r = 0; r < kSortItems; r++) {
            const bool ok = i0 + 32 * r < n;
            dg[r] = ok ? (int32_t)(((k[r] ^ flip) >> shift) & dmask) : B;
            const unsigned peers = __match_any_sync(0xffffffffu, dg[r]);
            const int rank = __popc(peers & lt);
            const int before = ok ? wc[dg[r]] : 0;
            __syncwarp();
            if (ok && rank == 0) wc[dg[r]] = before + __popc(peers);
            __syncwarp();
            lr[r] = before + rank;
        }
        __syncthreads();
        // Per digit: the counts of earlier warps, the tile's count, its prefix over tiles.
        int agg[BPT];
#pragma unroll
        for (int b = 0; b < BPT; b++) {
            const int bin = b * kRowThreads + tid;
            int run = 0;
            for (int w = 0; w < kRowWarps; w++) {
                const int c = sm.wcnt[w][bin];
                sm.wpre[w][bin] = run;
                run += c;
            }
            agg[b] = run;
            if (packed)
                sm.tbase[bin] = run;
            else
                lb_publish(lb, t, B, bin, run);
        }
        if (packed) {
            // W words a tile, R threads a word, each summing every R-th earlier tile; their
            // sums meet in wcnt (free once the loop above has read it: the barrier)
            const int W = B / 4, R = kRowThreads / W, j = tid % W, h = tid / W;
            static_assert(kRowThreads % (S::kBins / 4) == 0 && kRowThreads / (S::kBins / 4) <=
                          kRowWarps, "packed look-back: R partial sums a bin in wcnt");
            __syncthreads();
            if (tid < W) lb_post4(lb, t, W, j, &sm.tbase[4 * j]);
            unsigned long long lo, hi;
            lb_sum4(lb, t, W, j, h, R, lo, hi);
            sm.wcnt[h][4 * j] = (int32_t)(uint32_t)lo;
            sm.wcnt[h][4 * j + 1] = (int32_t)(uint32_t)hi;
            sm.wcnt[h][4 * j + 2] = (int32_t)(lo >> 32);
            sm.wcnt[h][4 * j + 3] = (int32_t)(hi >> 32);
            __syncthreads();
#pragma unroll
            for (int b = 0; b < BPT; b++) {
                const int bin = b * kRowThreads + tid;
                long long excl = 0;
                for (int q = 0; q < R; q++) excl += (uint32_t)sm.wcnt[q][bin];
                sm.tbase[bin] = sm.gbase[bin] + excl;
            }
        } else {
#pragma unroll
            for (int b = 0; b < BPT; b++) {
                const int bin = b * kRowThreads + tid;
                sm.tbase[bin] = sm.gbase[bin] + lb_walk(lb, t, B, bin, agg[b]);
            }
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kSortItems; r++) {
            if (dg[r] == B) continue;
            const long long pos = sm.tbase[dg[r]] + sm.wpre[warp][dg[r]] + lr[r];
            if (pos >= n) continue; // only where the histograms counted more than n items
            if (dst_k) dst_k[pos] = k[r];
            if (dst_v) dst_v[pos] = v[r];
        }
        __syncthreads();
    }
}

// A whole LSD sort over the digits of 32-bit keys, a pass at a time. Pass p reads the keys
// from src (p = 0) or the other key buffer, and the values from the identity (p = 0) or the
// other value buffer; keys alternate sk_a, sk_b, values sv and perm, starting so that the last
// pass lands its values in perm (and its keys, when keep_keys, in sk_a for an odd number of
// passes, sk_b for an even one). NULL perm and sv: keys only. The mask sort (outputs by
// descending mask, ties by row): src = masks, flip = ~0, values into perm. The output-key
// sort: flip = 0, keys only, kept.
struct LsdSort {
    const uint32_t *src;
    uint32_t *sk_a, *sk_b;
    int32_t *sv, *perm;
    uint32_t flip;
    int32_t keep_keys;
    uint32_t *hist;            // [passes][hist_stride] digit counts of key ^ flip
    int64_t hist_stride;
    unsigned long long *lb;    // [passes][lb_stride] look-back words, zero before the sort
    int64_t lb_stride;
    unsigned long long *ctr;   // [passes] tile counters at zero, or NULL (tiles_resident)
    unsigned long long *bar;   // barrier counter at zero (sort_barrier), or NULL
    int32_t passes, dbits;
};

template <int BITS>
__device__ __forceinline__ void lsd_pass(const LsdSort &a, int p, int64_t n, SortSmem<BITS> &sm)
{
    const int P = a.passes;
    const bool last = p == P - 1;
    const uint32_t *src_k = p == 0 ? a.src : ((p - 1) % 2 == 0 ? a.sk_a : a.sk_b);
    const int32_t *src_v = p == 0 ? NULL : ((P - p) % 2 == 0 ? a.perm : a.sv);
    uint32_t *dst_k = last && !a.keep_keys ? NULL : (p % 2 == 0 ? a.sk_a : a.sk_b);
    int32_t *dst_v = (P - 1 - p) % 2 == 0 ? a.perm : a.sv;
    sort_pass<BITS>(src_k, src_v, dst_k, dst_v, n, a.flip, a.dbits * p, a.dbits,
                    a.hist + p * a.hist_stride, a.lb + p * a.lb_stride,
                    a.ctr ? a.ctr + p : NULL, sm);
}

// Row passes read out_in a 256-row chunk at a time. Where K <= kMaxStageK the chunk is first
// copied into shared memory with coalesced 16-byte loads (rows of stride K | 1: odd, so that
// thread p reading its row hits distinct banks); a thread reading its own row from global
// memory instead touches a new sector per offset, and the L1 does not hold a chunk's rows for
// long beside the shared memory of its neighbours.
const int kMaxStageK = 32;

__host__ __device__ __forceinline__ int stage_stride(int32_t K) { return K | 1; }

// Copies rows [p0, p0 + cnt) (cnt <= kRowThreads, K <= kMaxStageK) of out_in into srow
// (stride S). All of a thread's loads are issued before its first store.
const int kStageLoads = kMaxStageK / 4; // 16-byte loads per thread: 256 rows x 32 ints / 256
const int kStageBatch = 4;              // of which in flight at once (registers)

__device__ __forceinline__ void stage_rows(const int32_t *out_in, int32_t K, int64_t p0, int cnt,
                                           int32_t *srow, int S)
{
    const int total = cnt * K;
    const int32_t *src = out_in + p0 * K;
    const int tid = threadIdx.x;
    // 16-byte loads where src is aligned (p0 is a multiple of kRowThreads, so it is whenever
    // out_in is), element e = 4i..4i+3; row and column advance by a constant per step.
    const bool aligned = ((uintptr_t)src & 15) == 0;
    const int n4 = aligned ? total / 4 : 0;
    const int step = 4 * kRowThreads, dr = step / K, dc = step - dr * K;
    int row = (4 * tid) / K, col = 4 * tid - row * K;
    int4 v[kStageBatch];
#pragma unroll
    for (int j = 0; j < kStageLoads; j++) {
        if (j % kStageBatch == 0) {
            // the next kStageBatch loads, all in flight before their stores
#pragma unroll
            for (int q = 0; q < kStageBatch; q++) {
                const int i = tid + (j + q) * kRowThreads;
                if (i < n4) v[q] = reinterpret_cast<const int4 *>(src)[i];
            }
        }
        if (tid + j * kRowThreads < n4) {
            const int4 &vj = v[j % kStageBatch];
            const int32_t x[4] = {vj.x, vj.y, vj.z, vj.w};
            int r = row, c = col;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                srow[r * S + c] = x[q];
                if (++c == K) {
                    c = 0;
                    r++;
                }
            }
        }
        row += dr;
        col += dc;
        if (col >= K) {
            col -= K;
            row++;
        }
    }
    for (int e = 4 * n4 + tid; e < total; e += kRowThreads) {
        const int r = e / K;
        srow[r * S + (e - r * K)] = src[e];
    }
}

// What the row pass prepares for the look-back mask sort (K <= 32), or nothing (hist NULL).
struct SortPrep {
    uint32_t *hist;           // [passes][kMaxBins] digit counts of ~key, zero before the pass
    int32_t passes, dbits;
    unsigned long long *zero; // the sort's tile counters and look-back words, cleared here
    int64_t zero_words;
    uint32_t *keys;           // [rows] the rows' sort keys (kmap.h), or NULL: the key is the mask
    uint8_t kbit[32];         // with keys: offset k's key bit (kmap.h: vc_kmap_key_bits)
};

// Dynamic shared memory of rowpass_kernel: wc [kRowWarps][K] ints, then the staged rows.
size_t rowpass_smem(int32_t K)
{
    size_t b = (size_t)kRowWarps * K * 4;
    if (K <= kMaxStageK) b += (size_t)kRowThreads * stage_stride(K) * 4;
    return b;
}

// One thread per output row p < rows (rows past the device count n get mask 0): mask words,
// the sort keys of a look-back mask sort where they differ from the masks (sp.keys),
// iota for a CUB mask sort (NULL: none), perm[p] = p for the rows past n (tail, NULL: none: the
// look-back mask sort places the n live rows, whose masks are never 0, and the tail rows sort
// after them in row order), the block's per-offset counts cnt[k * nb + block],
// the digit histograms of the keys of a look-back mask sort (sp). The scan of the counts runs
// in the next launch, one block per offset (col_scan): until it moved there, the last block of
// this pass scanned all K * nb counts alone while the other SMs idled, most of the pass's time.
// At most 64 registers: 4 blocks per SM, so that ~500 blocks (128k rows) run in one wave.
__global__ void __launch_bounds__(kRowThreads, 4)
    rowpass_kernel(const int32_t *out_in, int32_t K, int32_t words, const int64_t *d_n,
                   int64_t rows, uint32_t *masks, int32_t *iota, int32_t *tail, int32_t *cnt,
                   SortPrep sp)
{
    pdl_enter();
    __shared__ uint32_t shist[kMaxPasses * kMaxBins];
    __shared__ int32_t skbit[32]; // sp.keys: K <= 32
    extern __shared__ int32_t dyn[];
    int32_t *wc = dyn;                       // [kRowWarps][K]
    int32_t *srow = dyn + kRowWarps * K;     // [kRowThreads][S] where K <= kMaxStageK
    const bool staged = K <= kMaxStageK;
    const int S = stage_stride(K);
    const int64_t n = dev_count(d_n, rows);
    const int64_t nb = gridDim.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t p0 = (int64_t)blockIdx.x * kRowThreads, p = p0 + tid;
    const bool valid = p < n;
    const int nh = sp.hist ? sp.passes * kMaxBins : 0;
    for (int i = tid; i < nh; i += kRowThreads) shist[i] = 0;
    for (int64_t i = p; i < sp.zero_words; i += nb * kRowThreads) sp.zero[i] = 0;
    if (staged && p0 < n)
        stage_rows(out_in, K, p0, (int)(n - p0 < kRowThreads ? n - p0 : kRowThreads), srow, S);
    if (sp.keys && warp == 0) {
        // constant indices into the parameter: an indexed read would copy it to the stack
#pragma unroll
        for (int k = 0; k < 32; k++)
            if (lane == k) skbit[k] = sp.kbit[k];
    }
    __syncthreads();
    for (int32_t w = 0; w < words; w++) {
        const int32_t k0 = 32 * w, k1 = K < k0 + 32 ? K : k0 + 32;
        uint32_t m = 0, sk = 0; // sk: the sort key (sp.keys, one word)
        if (valid) {
            const int32_t *row = staged ? srow + tid * S : out_in + p * K;
            if (sp.keys) {
                for (int32_t k = k0; k < k1; k++)
                    if (row[k] >= 0) {
                        m |= 1u << (k - k0);
                        sk |= 1u << skbit[k];
                    }
            } else {
                for (int32_t k = k0; k < k1; k++)
                    if (row[k] >= 0) m |= 1u << (k - k0);
            }
        }
        if (!sp.keys) sk = m;
        else if (p < rows) sp.keys[p] = sk;
        if (nh) {
            // digit counts of ~sk, one shared atomic per distinct digit of the warp
            const uint32_t key = ~sk, dmask = (1u << sp.dbits) - 1u;
            for (int q = 0; q < sp.passes; q++) {
                const uint32_t d = valid ? (key >> (q * sp.dbits)) & dmask : 0xffffffffu;
                const unsigned peers = __match_any_sync(0xffffffffu, d);
                if (valid && (peers & ((1u << lane) - 1u)) == 0)
                    atomicAdd(&shist[q * kMaxBins + d], (uint32_t)__popc(peers));
            }
        }
        if (p < rows) masks[p * words + w] = m;
        for (int32_t k = k0; k < k1; k++) {
            const unsigned b = __ballot_sync(0xffffffffu, (m >> (k - k0)) & 1u);
            if (lane == 0) wc[warp * K + k] = __popc(b);
        }
    }
    if (iota && p < rows) iota[p] = (int32_t)p;
    if (tail && !valid && p < rows) tail[p] = (int32_t)p;
    __syncthreads();
    for (int i = tid; i < nh; i += kRowThreads) {
        const uint32_t c = shist[i];
        if (c) atomicAdd(&sp.hist[i], c);
    }
    for (int32_t k = tid; k < K; k += kRowThreads) {
        int32_t sum = 0;
        for (int w = 0; w < kRowWarps; w++) sum += wc[w * K + k];
        cnt[(int64_t)k * nb + blockIdx.x] = sum;
    }
}

// The column scans and the pair scatter. cnt [K][nb]: the row pass's per-(offset, block)
// counts; base [K][nb] and tot [K]: what the column scans make of them.
struct PairsArgs {
    const int32_t *out_in;
    const uint32_t *masks;
    int32_t K, words;
    const int32_t *cnt;
    int64_t *base, *tot;
    int64_t nb;
    int64_t *offsets, *scr;
    int64_t max_pairs;
    int32_t *in_rows, *out_rows;
    int64_t chunk0;  // the first chunk of a launch's pair blocks
    StatusPost post; // dst NULL, or the read-back's posting: block chunk 0 posts the counts
};

// The column scan of offset k, one block: base[k, b] = pairs of offset k in row blocks before
// b, tot[k] = all pairs of offset k. Reads of cnt walk consecutive counts per thread (L1 serves
// the rest of each sector).
__device__ void col_scan(const PairsArgs &a, int32_t k, unsigned char *raw)
{
    typedef cub::BlockScan<long long, kRowThreads> Scan;
    typename Scan::TempStorage &tmp = *reinterpret_cast<typename Scan::TempStorage *>(raw);
    const int32_t *c = a.cnt + (int64_t)k * a.nb;
    int64_t *out = a.base + (int64_t)k * a.nb;
    const long long carry = block_prefix<long long>(
        tmp, a.nb, [&](int64_t i) { return (long long)c[i]; },
        [&](int64_t i, long long v) { out[i] = v; });
    if (threadIdx.x == 0) a.tot[k] = carry;
}

// The offsets of a pairs block, soff[k] = pairs of offsets before k (soff[K]: all), from the
// column scans' totals: a load per thread (tot_mine = tot[threadIdx.x], loaded early by the
// caller) and a block scan, where one thread used to sum them alone while the block waited.
// tmp_raw: the scan's storage. Block `chunk` 0 publishes them, n_pairs and the overflow flag,
// and then (a.post) posts the status block: its last count is final there, since every kernel
// that writes the others has finished (pdl_enter), and no later block or kernel raises a flag.
__device__ void pair_offsets(const PairsArgs &a, int64_t chunk, long long tot_mine,
                             long long *soff, unsigned char *tmp_raw)
{
    typedef cub::BlockScan<long long, kRowThreads> Scan;
    typename Scan::TempStorage &tmp = *reinterpret_cast<typename Scan::TempStorage *>(tmp_raw);
    const int tid = threadIdx.x;
    long long carry = 0;
    for (int32_t k0 = 0; k0 < a.K; k0 += kRowThreads) {
        const int32_t k = k0 + tid;
        long long excl, agg;
        const long long t = k >= a.K ? 0ll : k0 == 0 ? tot_mine : (long long)a.tot[k];
        Scan(tmp).ExclusiveSum(t, excl, agg);
        if (k < a.K) soff[k] = carry + excl;
        carry += agg;
        __syncthreads(); // the scan storage is reused
    }
    if (tid == 0) {
        soff[a.K] = carry;
        if (chunk == 0) {
            a.scr[S_N_PAIRS] = carry;
            if (carry > a.max_pairs) raise_flag(a.scr, VC_KMAP_GPU_F_PAIR_OVERFLOW);
            if (a.post.dst) post_status(a.scr, a.post);
        }
    }
    __syncthreads();
    if (chunk == 0)
        for (int32_t k = tid; k <= a.K; k += kRowThreads) a.offsets[k] = soff[k];
}

// The pair scatter of one 256-row chunk: pair (p, k) goes to soff[k] + base[k, chunk] + (set
// bits of offset k in earlier warps of the chunk) + (set lanes before p in its warp). Positions
// >= max_pairs are not written (block 0 raises the overflow flag). Where K <= kMaxStageK the
// chunk's rows are staged in shared memory first (srow, stride S).

__device__ __forceinline__ void st_pairs(const PairsArgs &a, int64_t n, int64_t chunk,
                                         long long *soff, unsigned char *tmp, long long *wpre,
                                         int32_t *srow)
{
    const int32_t K = a.K, words = a.words;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t p0 = chunk * kRowThreads, p = p0 + tid;
    const bool valid = p < n;
    const bool staged = K <= kMaxStageK;
    const int S = stage_stride(K);
    // this thread's offset total and chunk base, in flight while the rows are staged
    const long long tot_mine = tid < K ? (long long)a.tot[tid] : 0;
    const long long base_mine = tid < K ? (long long)a.base[(int64_t)tid * a.nb + chunk] : 0;
    if (staged && p0 < n)
        stage_rows(a.out_in, K, p0, (int)(n - p0 < kRowThreads ? n - p0 : kRowThreads), srow, S);
    pair_offsets(a, chunk, tot_mine, soff, tmp);
    for (int32_t w = 0; w < words; w++) {
        const int32_t k0 = 32 * w, k1 = K < k0 + 32 ? K : k0 + 32;
        const uint32_t m = valid ? a.masks[p * words + w] : 0u;
        for (int32_t k = k0; k < k1; k++) {
            const unsigned b = __ballot_sync(0xffffffffu, (m >> (k - k0)) & 1u);
            if (lane == 0) wpre[warp * K + k] = __popc(b);
        }
    }
    __syncthreads();
    for (int32_t k = tid; k < K; k += kRowThreads) {
        long long run = soff[k] + (k == tid ? base_mine : (long long)a.base[k * a.nb + chunk]);
        for (int w = 0; w < kRowWarps; w++) {
            const long long t = wpre[w * K + k];
            wpre[w * K + k] = run;
            run += t;
        }
    }
    __syncthreads();
    const unsigned lt = (1u << lane) - 1u;
    for (int32_t w = 0; w < words; w++) {
        const int32_t k0 = 32 * w, k1 = K < k0 + 32 ? K : k0 + 32;
        const uint32_t m = valid ? a.masks[p * words + w] : 0u;
        for (int32_t k = k0; k < k1; k++) {
            const unsigned bit = (m >> (k - k0)) & 1u;
            const unsigned b = __ballot_sync(0xffffffffu, bit);
            if (bit) {
                const long long pos = wpre[warp * K + k] + __popc(b & lt);
                if (pos < a.max_pairs) {
                    a.in_rows[pos] = staged ? srow[tid * S + k] : a.out_in[p * K + k];
                    a.out_rows[pos] = (int32_t)p;
                }
            }
        }
    }
}

// Blocks [0, sort_blocks) run passes [pass, pass_end) of the look-back mask sort (several only
// where each block holds one tile, tiles_resident, with a barrier between them), the
// next scan_blocks (K or 0) the column scans, the last pair_blocks the pair scatter of chunk
// pa.chunk0 + blockIdx.x - sort_blocks - scan_blocks (which needs the scans of an earlier
// launch): any part may be empty, so the scans beside the first pass and the pairs beside the
// later ones share their launches. Shared memory: the sort's, the scan's, or the pairs' offsets
// [kMaxVolume + 1], their scan's storage, prefix words [kRowWarps][K] and (K <= kMaxStageK)
// staged rows.
template <int BITS> struct PairsSortSmem {
    static const size_t kSort = sizeof(SortSmem<BITS>);
    static const size_t kScan = (sizeof(cub::BlockScan<long long, kRowThreads>::TempStorage) +
                                 15) / 16 * 16;
    static const size_t kOffs = sizeof(long long) * (kMaxVolume + 1) + kScan;
    static const size_t kWide = sizeof(long long) * kRowWarps * kMaxVolume;
    static const size_t kStaged = sizeof(long long) * kRowWarps * kMaxStageK +
                                  sizeof(int32_t) * kRowThreads * (kMaxStageK | 1);
    static const size_t kPairs = kOffs + (kWide > kStaged ? kWide : kStaged);
    static const size_t kBytes = kSort > kPairs ? kSort : kPairs;
};

// A barrier of the first `blocks` blocks of a launch, round r = 1, 2, ...: each block adds one
// to *ctr (zero before the launch) and waits until it reads r * blocks. For the sort blocks of
// a launch that runs several passes, each block holding one tile (tiles_resident): only they
// wait, there are no more of them than SMs, and the other blocks of the launch never wait, so
// every one of them becomes resident and the barrier cannot deadlock.
__device__ __forceinline__ void sort_barrier(unsigned long long *ctr, int64_t blocks, int round)
{
    __syncthreads(); // every thread's stores of the pass before this thread's fence
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(ctr, 1ull);
        const unsigned long long target = (unsigned long long)blocks * (unsigned)round;
        const volatile unsigned long long *c = ctr;
        while (*c < target) {
        }
        __threadfence();
    }
    __syncthreads();
}

template <int BITS>
__global__ void __launch_bounds__(kRowThreads, 3)
    pairs_sort_kernel(PairsArgs pa, int64_t scan_blocks, LsdSort ps, int32_t pass,
                      int32_t pass_end, int64_t sort_blocks, const int64_t *d_n, int64_t rows)
{
    pdl_enter();
    __shared__ __align__(16) unsigned char raw[PairsSortSmem<BITS>::kBytes];
    const int64_t n = dev_count(d_n, rows);
    const int64_t b = blockIdx.x;
    if (b < sort_blocks) {
        // passes [pass, pass_end), a barrier of the sort blocks between two (ps.bar)
        for (int32_t p = pass; p < pass_end; p++) {
            if (p > pass) sort_barrier(ps.bar, sort_blocks, p - pass);
            lsd_pass<BITS>(ps, p, n, *reinterpret_cast<SortSmem<BITS> *>(raw));
        }
        return;
    }
    if (b < sort_blocks + scan_blocks) {
        col_scan(pa, (int32_t)(b - sort_blocks), raw);
        return;
    }
    const int64_t chunk = pa.chunk0 + (b - sort_blocks - scan_blocks);
    typedef PairsSortSmem<BITS> L;
    long long *soff = reinterpret_cast<long long *>(raw);
    unsigned char *tmp = raw + sizeof(long long) * (kMaxVolume + 1);
    long long *wpre = reinterpret_cast<long long *>(tmp + L::kScan);
    int32_t *srow = reinterpret_cast<int32_t *>(wpre + kRowWarps * pa.K);
    st_pairs(pa, n, chunk, soff, tmp, wpre, srow);
}

// Word w of the sort keys (kmap.h) of rows perm[0, n) into keys[0, n): bit b is the mask bit of
// offset tap[b], the offset whose key bit is 32 w + b (-1: none, past K).
struct KeyWord {
    int16_t tap[32];
};
__global__ void key_word_kernel(const uint32_t *masks, const int32_t *perm, int64_t n,
                                int32_t words, KeyWord kw, uint32_t *keys)
{
    GRID_LOOP(i, n) {
        const uint32_t *mr = masks + (int64_t)perm[i] * words;
        uint32_t v = 0;
#pragma unroll
        for (int b = 0; b < 32; b++) {
            const int32_t t = kw.tap[b];
            if (t >= 0) v |= (mr[t >> 5] >> (t & 31) & 1u) << b;
        }
        keys[i] = v;
    }
}

// Whether a look-back sort of `tiles` tiles may take them by block index (LsdSort.ctr NULL)
// instead of from a counter. Only the sort's blocks ever wait, each on smaller tiles; with no
// more tiles than multiprocessors they cannot fill the device, so the block of a tile that is
// waited on is scheduled as soon as blocks that never wait (the scans and pairs sharing the
// launch, other streams' work) make room, whatever order the hardware starts blocks in. Saves
// each tile the counter's atomic and a barrier before its first load. Larger sorts take tiles
// from the counter, in the order their blocks start.
bool tiles_resident(int64_t tiles) { return tiles <= vc_device_sms(); }

// bits: the sort's digit width (PermPlan.bits), which picks the kernel's instantiation: 9, or 8
// (also where the launch has no sort blocks).
cudaError_t q_pairs_sort(int bits, const PairsArgs &pa, int64_t scan_blocks, int64_t pair_blocks,
                         const LsdSort &ps, int pass, int64_t sort_blocks, const int64_t *d_n,
                         int64_t rows, bool pdl, cudaStream_t s, int pass_end = -1)
{
    const int64_t blocks = scan_blocks + pair_blocks + sort_blocks;
    if (blocks == 0) return cudaSuccess;
    if (pass_end < 0) pass_end = pass + 1;
    if (bits == 9)
        return launch_k(pdl, pairs_sort_kernel<9>, blocks, kRowThreads, 0, s, pa, scan_blocks,
                        ps, pass, pass_end, sort_blocks, d_n, rows);
    return launch_k(pdl, pairs_sort_kernel<8>, blocks, kRowThreads, 0, s, pa, scan_blocks, ps,
                    pass, pass_end, sort_blocks, d_n, rows);
}

} // namespace

// CUB temporary storage for the sorts of a build.
cudaError_t cub_bytes_for(Sizes *z)
{
    size_t a = 0, b = 0;
    cudaError_t e = cudaSuccess;
    if (z->nsort > 0 && !z->ukey32) { // 32-bit keys: the look-back sort, no CUB
        if (z->ukey32)
            e = cub::DeviceRadixSort::SortKeys(NULL, a, (const uint32_t *)NULL, (uint32_t *)NULL,
                                               z->nsort, 0, z->end_bit_out);
        else
            e = cub::DeviceRadixSort::SortKeys(NULL, a, (const uint64_t *)NULL, (uint64_t *)NULL,
                                               z->nsort, 0, z->end_bit_out);
        if (e != cudaSuccess) return e;
    }
    if (z->rows > 0 && z->words > 1) { // K <= 32: the look-back sort, no CUB
        const int bits = z->K < 32 ? z->K : 32;
        e = cub::DeviceRadixSort::SortPairsDescending(NULL, b, (const uint32_t *)NULL,
                                                      (uint32_t *)NULL, (const int32_t *)NULL,
                                                      (int32_t *)NULL, z->rows, 0, bits);
        if (e != cudaSuccess) return e;
    }
    z->cub_bytes = a > b ? a : b;
    return cudaSuccess;
}

// New-output types, in two parts so that the caller may allocate the output arrays between
// them. q_key_sort sorts the collected keys (nsort of them: the exact count, or the bound with
// all-ones padding that sorts last) and sets *sorted to the buffer holding them; q_rank_scatter
// ranks them (rows = capacity of the output arrays) and scatters out_in. exact: nsort and rows
// are the exact output count (regular builds), so the kernels do not read the device's.
// ev_mid (may be NULL) is recorded between the ranks and the scatter.
cudaError_t q_key_sort(const Sizes &z, const Bufs &b, bool exact, cudaStream_t s,
                       const void **sorted)
{
    cudaError_t e;
    size_t bytes = b.cub_bytes;
    const int64_t *d_n = stage_count(b, exact);
    *sorted = b.usorted;
    if (z.nsort > 0 && z.ukey32) {
        // The look-back sort over the device count of keys (at most nsort), its histograms
        // counted by the insert as the keys were claimed: ukeys -> usorted -> ukeys ... Where
        // the tiles are resident, every pass in one launch with a barrier between passes (as
        // the mask sort in q_finish), else one launch a pass with tiles taken from counters.
        const PermPlan pl = key_plan(z);
        const int64_t tiles = (z.nsort + kTile - 1) / kTile;
        const bool fused = tiles_resident(tiles);
        LsdSort ks;
        ks.src = (const uint32_t *)b.ukeys;
        ks.sk_a = (uint32_t *)b.usorted;
        ks.sk_b = (uint32_t *)b.ukeys;
        ks.sv = ks.perm = NULL;
        ks.flip = 0;
        ks.keep_keys = 1;
        ks.hist = b.khist;
        ks.hist_stride = kMaxBins;
        ks.ctr = fused ? NULL : b.klbz;
        ks.bar = b.klbz; // the tile counters' first word, unused where the tiles are resident
        ks.lb = b.klbz + kMaxPasses;
        ks.lb_stride = pl.tiles * ((int64_t)1 << pl.bits);
        ks.passes = pl.passes;
        ks.dbits = pl.dbits;
        PairsArgs none;
        memset(&none, 0, sizeof none);
        for (int p = 0; p < pl.passes;) {
            const int p_end = fused ? pl.passes : p + 1;
            e = q_pairs_sort(pl.bits, none, 0, 0, ks, p, tiles, d_n, z.nsort, b.pdl, s, p_end);
            if (e != cudaSuccess) return e;
            p = p_end;
        }
        *sorted = pl.passes % 2 == 1 ? b.usorted : b.ukeys;
    } else if (z.nsort > 0) {
        e = cub::DeviceRadixSort::SortKeys(b.cub, bytes, (const uint64_t *)b.ukeys,
                                           (uint64_t *)b.usorted, z.nsort, 0, z.end_bit_out, s);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// Masks, counts, scans, pairs (ev_pairs after them, may be NULL), then perm. rows: capacity of
// the row arrays; the device count at S_N_OUT (<= rows) says how many are real.
// K <= 32: the look-back mask sort, the column scans in the launch of its first pass and the
// pair scatter in that of its second (with one pass, in a launch after it; apart when timed),
// then one launch per pass. K > 32: the scans, the pairs, then CUB sorts of the mask words.
// exact: rows is the exact row count (every build but the bounded new-output ones), so the
// kernels do not read the device's count (one dependent load fewer at the start of each).
// With that load's branch, ptxas also spills less in the pass kernel at its 80 registers
// (measured faster, see docs/benchmarks.md).
// posting (may be NULL): the read-back's posting (status_post). The pair block of chunk 0
// carries it and posts the counts, so the host has them while the mask sort's later passes (or
// CUB's sorts) still run; where the pairs are timed apart (ev_pairs) or there are no rows, no
// launch carries it and read_status posts them behind the stage.
cudaError_t q_finish(const Job &j, const Bufs &b, vc_kmap_data *m, int64_t rows, bool exact,
                     int64_t max_pairs, cudaEvent_t ev_pairs, cudaStream_t s, Posting *posting)
{
    cudaError_t e;
    const int32_t K = j.K, words = j.words;
    // the posting rides with the pairs (not when they are timed apart)
    const StatusPost post =
        posting ? posting->carry(rows > 0 && !ev_pairs) : StatusPost{NULL, 0};
    if (rows == 0) {
        e = cudaMemsetAsync(m->offsets, 0, ((size_t)K + 1) * sizeof(int64_t), s);
        if (e == cudaSuccess && ev_pairs) e = cudaEventRecord(ev_pairs, s);
        return e;
    }
    const int64_t nb = row_blocks(rows);
    const int64_t *d_n = stage_count(b, exact);
    PairsArgs pa;
    pa.out_in = m->out_in;
    pa.masks = m->masks;
    pa.K = K;
    pa.words = words;
    pa.cnt = b.cnt;
    pa.base = b.base;
    pa.tot = b.tot;
    pa.nb = nb;
    pa.offsets = m->offsets;
    pa.scr = b.scr;
    pa.max_pairs = max_pairs;
    pa.in_rows = m->in_rows;
    pa.out_rows = m->out_rows;
    pa.chunk0 = 0;
    pa.post = post;
    if (words == 1) {
        const PermPlan pl = perm_plan(K, rows);
        // The sort's keys: the masks themselves where every offset's key bit is its own
        // (kmap.h), else keys the row pass writes (keys_b, which the passes read before
        // pass 1 writes it: they meet at a barrier or a launch boundary).
        int32_t kbit[32];
        const bool ident = vc_kmap_key_bits(m->kernel, kbit) != 0;
        LsdSort ps;
        ps.src = ident ? m->masks : b.keys_b;
        ps.sk_a = b.keys_a;
        ps.sk_b = b.keys_b;
        ps.sv = b.iota;
        ps.perm = m->perm;
        ps.flip = 0xffffffffu;
        ps.keep_keys = 0;
        ps.hist = b.hist;
        ps.hist_stride = kMaxBins;
        ps.ctr = tiles_resident(pl.tiles) ? NULL : b.lbz;
        ps.bar = b.lbz; // the tile counters' first word, unused where tiles are resident
        ps.lb = b.lbz + kMaxPasses;
        ps.lb_stride = pl.tiles * ((int64_t)1 << pl.bits);
        ps.passes = pl.passes;
        ps.dbits = pl.dbits;
        SortPrep sp = {b.hist, pl.passes, pl.dbits, b.lbz, b.lbz_words, ident ? NULL : b.keys_b,
                       {0}};
        for (int32_t k = 0; k < K; k++) sp.kbit[k] = (uint8_t)kbit[k];
        int32_t *tail = exact ? NULL : m->perm; // bounded: the extent's tail rows of perm
        e = launch_k(b.pdl, rowpass_kernel, nb, kRowThreads, rowpass_smem(K), s, m->out_in, K,
                     words, d_n, rows, m->masks, (int32_t *)NULL, tail, b.cnt, sp);
        if (e != cudaSuccess) return e;
        // The scans share the launch of pass 0 and the pairs those of the later passes. Where
        // the tiles are resident, the later passes are one launch with a barrier between them
        // (a kernel boundary costs more); otherwise one launch each, with the pairs split
        // evenly over them.
        const bool apart = ev_pairs != NULL;
        if (apart) {
            e = q_pairs_sort(pl.bits, pa, K, 0, ps, 0, 0, d_n, rows, b.pdl, s);
            if (e == cudaSuccess)
                e = q_pairs_sort(pl.bits, pa, 0, nb, ps, 0, 0, d_n, rows, b.pdl, s);
            if (e == cudaSuccess && ev_pairs) e = cudaEventRecord(ev_pairs, s);
            if (e != cudaSuccess) return e;
        }
        const bool fused = ps.ctr == NULL;
        // launches after pass 0's, which take the pairs (none with one pass: the pairs follow
        // in a launch of their own)
        const int64_t later = pl.passes == 1 ? 0 : fused ? 1 : pl.passes - 1;
        const int64_t share = apart || later == 0 ? 0 : (nb + later - 1) / later;
        for (int p = 0; p < pl.passes;) {
            const int p_end = p == 0 ? 1 : fused ? pl.passes : p + 1;
            const int64_t scans = !apart && p == 0 ? K : 0;
            // launch p - 1 after pass 0's (fused: the only one, p = 1) takes share chunks
            pa.chunk0 = p == 0 ? 0 : (p - 1) * share;
            const int64_t pairs = p == 0 || pa.chunk0 >= nb ? 0
                                  : nb - pa.chunk0 < share ? nb - pa.chunk0 : share;
            e = q_pairs_sort(pl.bits, pa, scans, pairs, ps, p, pl.tiles, d_n, rows, b.pdl, s,
                             p_end);
            if (e != cudaSuccess) return e;
            p = p_end;
        }
        pa.chunk0 = 0;
        if (!apart && later == 0)
            e = q_pairs_sort(pl.bits, pa, 0, nb, ps, 0, 0, d_n, rows, b.pdl, s);
        return e;
    }
    // The LSD passes below alternate between two value buffers, perm and iota: start from the
    // one that makes the last pass land in perm (no copy, so a captured graph holds kernels
    // and memsets only).
    int32_t *ident = (words % 2 == 0) ? m->perm : b.iota;
    SortPrep none = {NULL, 0, 0, NULL, 0, NULL, {0}};
    e = launch_k(b.pdl, rowpass_kernel, nb, kRowThreads, rowpass_smem(K), s, m->out_in, K,
                 words, d_n, rows, m->masks, ident, (int32_t *)NULL, b.cnt, none);
    if (e != cudaSuccess) return e;
    {
        LsdSort ps;
        memset(&ps, 0, sizeof ps);
        if ((e = q_pairs_sort(8, pa, K, 0, ps, 0, 0, d_n, rows, b.pdl, s)) != cudaSuccess)
            return e;
        if ((e = q_pairs_sort(8, pa, 0, nb, ps, 0, 0, d_n, rows, b.pdl, s)) != cudaSuccess)
            return e;
    }
    if (ev_pairs && (e = cudaEventRecord(ev_pairs, s)) != cudaSuccess) return e;
    size_t bytes = b.cub_bytes;
    // Stable LSD passes, least significant word first, from the identity.
    int32_t *pa_ = ident, *pb_ = ident == m->perm ? b.iota : m->perm;
    int32_t kbit[kMaxVolume];
    vc_kmap_key_bits(m->kernel, kbit);
    for (int32_t w = 0; w < words; w++) {
        KeyWord kw;
        for (int q = 0; q < 32; q++) kw.tap[q] = -1;
        for (int32_t k = 0; k < K; k++)
            if (kbit[k] >> 5 == w) kw.tap[kbit[k] & 31] = (int16_t)k;
        key_word_kernel<<<grid_for(rows), kThreads, 0, s>>>(m->masks, pa_, rows, words, kw,
                                                            b.keys_a);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        const int bits = K - 32 * w < 32 ? K - 32 * w : 32;
        e = cub::DeviceRadixSort::SortPairsDescending(b.cub, bytes, b.keys_a, b.keys_b, pa_, pb_,
                                                      rows, 0, bits, s);
        if (e != cudaSuccess) return e;
        int32_t *x = pa_;
        pa_ = pb_;
        pb_ = x;
    }
    return cudaSuccess; // pa_ == m->perm
}

} // namespace kmap_gpu
