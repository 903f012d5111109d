// kmap/discover.cu - the input inserts and the outputs of a GPU build: the input rows into
// their hash table; SUBM's out_in by lookups; the new-output types' output keys, claimed in an
// output hash table (then sorted, sort_pairs.cu, and ranked) or marked in the dense path's
// bitmap (then counted and unpacked), and their out_in, each input scattering its targets.
#include <cooperative_groups.h>

#include "kmap/kmap_internal.cuh"

namespace cg = cooperative_groups;

namespace kmap_gpu {

namespace {

// The pairs of a warp's 32 input rows for STRIDED, DOWNSAMPLE (every offset whose gather reads
// the row) and TRANSPOSED, numbered across the warp (lane 0's first), so that a round can hand
// lane l the pairs base + j x 32 + l: every lane busy, however unevenly the targets fall on the
// rows, and the memory round trips of a lane's pairs issued together. Every lane of the warp
// makes the calls (shuffles).
struct WarpPairs {
    uint64_t key;          // row_pairs' key and lists of this lane's row (count 0: no row)
    uint32_t list[3];
    uint32_t first, total; // the number of this lane's first pair; the warp's pairs
};

__device__ __forceinline__ WarpPairs warp_pairs(const Geom &g, const vc_keypack &kout, bool row,
                                                const int4 c)
{
    WarpPairs w;
    const uint32_t cnt = row_pairs(g, kout, row, c, &w.key, w.list);
    uint32_t incl = cnt; // inclusive scan over the lanes
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(kFullWarp, incl, o);
        if ((int)(threadIdx.x & 31) >= o) incl += v;
    }
    w.total = __shfl_sync(kFullWarp, incl, 31);
    w.first = incl - cnt;
    return w;
}

// Pair idx of the warp (act false at idx >= total): its output key, offset k and source lane.
struct WarpPair {
    uint64_t key;
    int32_t k, lane;
    bool act;
};

__device__ __forceinline__ WarpPair warp_pair(const WarpPairs &w, const Geom &g, uint32_t idx)
{
    int src = 0; // the last lane whose first pair is <= idx
    for (int st = 16; st; st >>= 1) {
        const uint32_t f = __shfl_sync(kFullWarp, w.first, src + st);
        if (f <= idx) src += st;
    }
    const uint32_t first = __shfl_sync(kFullWarp, w.first, src);
    const uint64_t key = __shfl_sync(kFullWarp, w.key, src);
    uint32_t list[3];
    for (int a = 0; a < 3; a++) list[a] = __shfl_sync(kFullWarp, w.list[a], src);
    WarpPair r = {0, 0, src, idx < w.total};
    if (!r.act) return r;
    r.key = pair_of(g, key, list, idx - first, &r.k);
    return r;
}

// Pairs a lane takes per round (its round trips issued together).
const int kPairBatch = 4;

// Round `base` of a warp's pairs: slot j of this lane is pair base + 32j + lane (t[j]), with its
// key and act copied out for the batched hash calls; act false past the warp's pairs.
__device__ __forceinline__ void warp_round(const WarpPairs &w, const Geom &g, uint32_t base,
                                           WarpPair t[kPairBatch], uint64_t key[kPairBatch],
                                           bool act[kPairBatch])
{
#pragma unroll
    for (int j = 0; j < kPairBatch; j++) {
        t[j] = WarpPair{0, 0, 0, false};
        if (base + 32 * j < w.total) // the same for every lane
            t[j] = warp_pair(w, g, base + 32 * j + (threadIdx.x & 31));
        key[j] = t[j].key;
        act[j] = t[j].act;
    }
}

// Range check and insert of input row i; false for a row outside the limits.
__device__ __forceinline__ bool insert_input(const vc_keypack &kin, const vc_hash_gpu_view &hin,
                                             const int4 c, int64_t i, int64_t *scr,
                                             unsigned &n_dup)
{
    if (!vc_key_in_range_d(kin, c.x, c.y, c.z, c.w)) {
        atomicMin((long long *)&scr[S_BAD_ROW], (long long)i);
        return false;
    }
    int64_t rec;
    const int r = vc_hash_gpu_insert_d(hin, vc_key_pack_d(kin, c.x, c.y, c.z, c.w), (int32_t)i,
                                       true, &rec, true);
    if (r == VC_HGI_EXISTS)
        n_dup++;
    else if (r != VC_HGI_CLAIMED)
        raise_flag(scr, VC_KMAP_GPU_F_PROBE_IN);
    if (rec != INT64_MAX) atomicMin((long long *)&scr[S_FIRST_DUP], (long long)rec);
    return true;
}

__device__ __forceinline__ void add_dups(unsigned n_dup, int64_t *scr)
{
    // Every lane of every warp gets here (blockDim is a multiple of 32).
    n_dup = __reduce_add_sync(0xffffffffu, n_dup);
    if ((threadIdx.x & 31) == 0 && n_dup)
        atomicAdd((unsigned long long *)&scr[S_N_DUP], (unsigned long long)n_dup);
}

// Fills p[0, n) with -1, 16 bytes a store where p is aligned, by block `block` of `blocks`.
__device__ __forceinline__ void fill_minus1(int32_t *p, int64_t n, int64_t block, int64_t blocks)
{
    const int64_t t0 = block * blockDim.x + threadIdx.x, step = blocks * blockDim.x;
    const int64_t n4 = ((uintptr_t)p & 15) == 0 ? n / 4 : 0;
    for (int64_t i = t0; i < n4; i += step)
        reinterpret_cast<int4 *>(p)[i] = make_int4(-1, -1, -1, -1);
    for (int64_t i = t0; i < n - 4 * n4; i += step) p[4 * n4 + i] = -1;
}

// SUBM: inserts the input rows in blocks [0, insert_blocks); the blocks after them fill
// out_in (n_fill entries: the map's rows x K) with -1 for the lookups of the next kernel, so
// that the fill's stores run beside the inserts' round trips instead of before them (prep
// clears the tables only). Input kernels take the rows they are launched over (n) and the
// device count (d_n_in, Job) that bounds them.
__global__ void subm_insert_kernel(const int32_t *coords, int64_t n, const int64_t *d_n_in,
                                   vc_keypack kin, vc_hash_gpu_view hin, int64_t *scr,
                                   int32_t *out_in, int64_t n_fill, int64_t insert_blocks)
{
    pdl_enter();
    if (blockIdx.x >= insert_blocks) {
        fill_minus1(out_in, n_fill, blockIdx.x - insert_blocks, gridDim.x - insert_blocks);
        return;
    }
    n = dev_count(d_n_in, n);
    unsigned n_dup = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += insert_blocks * blockDim.x) {
        const int4 c = reinterpret_cast<const int4 *>(coords)[i];
        insert_input(kin, hin, c, i, scr, n_dup);
    }
    add_dups(n_dup, scr);
}

// SUBM: item (p, k) for k <= centre. k == centre is p itself; otherwise the neighbour q at
// offset k, written at (p, k) and mirrored at (q, K-1-k); a missing one is written as -1. A
// thread takes kLookups items at a time, a whole grid apart, and waits on their hash probes
// together (4 measured slower than 1: fewer threads in flight).
const int kLookups = 1;

__device__ __forceinline__ void st_subm_lookup(const int32_t *coords, int64_t n, const Geom &g,
                                               const vc_keypack &kin,
                                               const vc_hash_gpu_view &hin, int32_t *out_in)
{
    const int32_t K = g.K, centre = (K - 1) / 2, H = centre + 1;
    const int64_t total = n * H, T = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i0 < total;
         i0 += kLookups * T) {
        int64_t p[kLookups];
        int32_t k[kLookups], v[kLookups];
        uint64_t key[kLookups];
        bool act[kLookups];
#pragma unroll
        for (int j = 0; j < kLookups; j++) {
            const int64_t i = i0 + j * T;
            act[j] = false;
            key[j] = 0;
            k[j] = centre;
            p[j] = 0;
            if (i >= total) continue;
            p[j] = div_idx(i, H);
            k[j] = (int32_t)(i - p[j] * H);
            if (k[j] == centre) continue;
            const int4 c = reinterpret_cast<const int4 *>(coords)[p[j]];
            int32_t d[3];
            offset_of(g, k[j], d);
            const int64_t z = (int64_t)c.y + (int64_t)(d[0] - g.kernel[0] / 2) * g.dilation[0];
            const int64_t y = (int64_t)c.z + (int64_t)(d[1] - g.kernel[1] / 2) * g.dilation[1];
            const int64_t x = (int64_t)c.w + (int64_t)(d[2] - g.kernel[2] / 2) * g.dilation[2];
            act[j] = z >= 0 && z < g.in_shape[0] && y >= 0 && y < g.in_shape[1] && x >= 0 &&
                     x < g.in_shape[2];
            if (act[j])
                key[j] = vc_key_pack_d(kin, c.x, (int32_t)z, (int32_t)y, (int32_t)x);
        }
        vc_hash_gpu_lookup_batch<kLookups>(hin, key, act, v);
#pragma unroll
        for (int j = 0; j < kLookups; j++) {
            if (i0 + j * T >= total) continue;
            if (k[j] == centre) {
                out_in[p[j] * K + centre] = (int32_t)p[j];
            } else if (v[j] >= 0) {
                out_in[p[j] * K + k[j]] = v[j];
                out_in[(int64_t)v[j] * K + (K - 1 - k[j])] = (int32_t)p[j];
            } else {
                out_in[p[j] * K + k[j]] = -1;
            }
        }
    }
}

__global__ void subm_lookup_kernel(const int32_t *coords, int64_t n, const int64_t *d_n_in,
                                   Geom g, vc_keypack kin, vc_hash_gpu_view hin, int32_t *out_in)
{
    pdl_enter();
    st_subm_lookup(coords, dev_count(d_n_in, n), g, kin, hin, out_in);
}

// The digit histograms of the output-key sort, counted as the keys are claimed (each unique key
// once): a block's counts in shared memory (shist [passes][kMaxBins]), added to the global ones
// at the end. shist NULL: none (64-bit keys sort with CUB).
struct KeyHist {
    uint32_t *shist;
    int32_t passes, dbits;
};

// A block's list of the output keys it claimed, in shared memory (keys NULL: none): appended
// to ukeys once at the end of the block (newout_insert_kernel), so that the global claim
// counter, one address for every claim of a build, takes one atomic per block instead of one
// per group of converged lanes (measured slightly faster, see docs/benchmarks.md; the counter
// was not what the insert kernel waits on: its warps mostly wait at the block's final barrier
// for the slowest ones).
template <typename UKey> struct ClaimList {
    UKey *keys;
    int *cnt; // claims of the block so far (may pass cap: the rest went to ukeys directly)
    int cap;
};

const int kClaimList = 2048; // entries of a block's claim list (8 a thread)

// The bookkeeping of an output key's insert (r its VC_HGI_* result): a new key goes to the
// block's list while it has room, else straight to ukeys at a position taken from the claim
// counter (one atomic per group of converged lanes).
template <typename UKey>
__device__ __forceinline__ void note_output(int r, uint64_t key, UKey *ukeys, int64_t ucap,
                                            int64_t *scr, const KeyHist &kh,
                                            const ClaimList<UKey> &cl)
{
    if (r == VC_HGI_CLAIMED) {
        if (kh.shist) {
            const uint32_t dmask = (1u << kh.dbits) - 1u;
            for (int q = 0; q < kh.passes; q++)
                atomicAdd(&kh.shist[q * kMaxBins + (((uint32_t)key >> (q * kh.dbits)) & dmask)],
                          1u);
        }
        if (cl.keys) {
            const int pos = atomicAdd(cl.cnt, 1);
            if (pos < cl.cap) {
                cl.keys[pos] = (UKey)key;
                return;
            }
        }
        cg::coalesced_group grp = cg::coalesced_threads();
        unsigned long long first = 0;
        if (grp.thread_rank() == 0)
            first = atomicAdd((unsigned long long *)&scr[S_N_OUT], (unsigned long long)grp.size());
        first = grp.shfl(first, 0);
        const unsigned long long idx = first + grp.thread_rank();
        if (idx < (unsigned long long)ucap)
            ukeys[idx] = (UKey)key;
        else
            raise_flag(scr, VC_KMAP_GPU_F_OUT_OVERFLOW);
    } else if (r != VC_HGI_EXISTS) {
        raise_flag(scr, VC_KMAP_GPU_F_PROBE_OUT);
    }
}

// Inserts a warp's N x 32 output keys (act: where there is one): a key met on several lanes of
// one batch slot goes to the table once (neighbouring rows share most of their targets), and
// each lane's N inserts wait on their round trips together.
template <int N, typename UKey>
__device__ __forceinline__ void claim_outputs(const vc_hash_gpu_view &hout, uint64_t *key,
                                              bool *act, UKey *ukeys, int64_t ucap, int64_t *scr,
                                              const KeyHist &kh, const ClaimList<UKey> &cl)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < N; j++) {
        const unsigned peers = __match_any_sync(kFullWarp, act[j] ? key[j] : VC_HASH_EMPTY);
        act[j] = act[j] && __ffs(peers) - 1 == lane;
    }
    int r[N];
    vc_hash_gpu_claim_batch<N>(hout, key, act, INT32_MAX, r);
#pragma unroll
    for (int j = 0; j < N; j++)
        if (act[j]) note_output(r[j], key[j], ukeys, ucap, scr, kh, cl);
}

// Where a new-output build puts the output keys it finds: ClaimSink claims each in the output
// hash table and lists the keys it claimed for their sort; DenseSink sets each key's bit in a
// bitmap over the whole output key space (the dense path, below).
template <typename UKey> struct ClaimSink {
    vc_hash_gpu_view hout;
    UKey *ukeys;
    int64_t ucap;
    int64_t *scr;
    KeyHist kh;
    ClaimList<UKey> cl;
    template <int N> __device__ __forceinline__ void put(uint64_t *key, bool *act) const
    {
        claim_outputs<N>(hout, key, act, ukeys, ucap, scr, kh, cl);
    }
};

// ---- the dense output path ----------------------------------------------------------------
//
// Where the output keys span at most 2^kDenseMaxBits values (the packed key space of the output
// grid: 2^25 for a stride-2 map of the SECOND grid 41 x 1600 x 1408), a new-output build marks
// each output key's bit in a bitmap of the whole space instead of claiming it in a hash table:
// bit i is key i, so the rank of a key among the outputs, its row in the (b, z, y, x) order of
// the CPU twin, is the number of set bits below it. A count of the bitmap's tiles (n_out) and
// a scan in the unpack give every group of kDenseGroupBits bits its first rank; a key's rank
// is then that base plus the popcounts of one 32-byte sector. It replaces the output table's
// claims (a CAS and its round trip per key), the radix sort of the claimed keys and the rank
// kernel's table writes by bit stores that do not wait, a count and an unpack.

struct DenseSink {
    uint32_t *bits;
    // Lanes whose keys share a bitmap word set them with one atomic (neighbouring rows share
    // most of their targets); the atomics' results are unused, so no lane waits on them.
    template <int N> __device__ __forceinline__ void put(uint64_t *key, bool *act) const
    {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < N; j++) {
            const uint64_t w = act[j] ? key[j] >> 5 : ~0ull;
            const unsigned peers = __match_any_sync(kFullWarp, w);
            const unsigned m = __reduce_or_sync(peers, act[j] ? 1u << (key[j] & 31) : 0u);
            if (act[j] && __ffs(peers) - 1 == lane) atomicOr(&bits[w], m);
        }
    }
};

// The rank of key among the set bits (-1: not set), from its group's 8 words and first rank.
__device__ __forceinline__ int32_t dense_rank(const uint4 lo, const uint4 hi, int32_t base,
                                              uint64_t key)
{
    const uint32_t w[kDenseGroupWords] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int wi = (int)(key >> 5) & (kDenseGroupWords - 1), b = (int)(key & 31);
    int32_t r = base;
    uint32_t cur = 0;
#pragma unroll
    for (int i = 0; i < kDenseGroupWords; i++) {
        if (i < wi) r += __popc(w[i]);
        if (i == wi) cur = w[i];
    }
    if (!((cur >> b) & 1u)) return -1;
    return r + __popc(cur & ((1u << b) - 1u));
}

// Output-row lookups of st_scatter: in the output hash table (HashFind) or by rank in the
// bitmap (DenseFind); -1 for a key that is not an output.
struct HashFind {
    vc_hash_gpu_view hout;
    template <int N>
    __device__ __forceinline__ void find(const uint64_t *key, const bool *act, int32_t *v) const
    {
        vc_hash_gpu_lookup_batch<N>(hout, key, act, v);
    }
};

struct DenseFind {
    const uint32_t *bits;
    const int32_t *base; // [groups] first rank of each group (dense_unpack_kernel)
    template <int N>
    __device__ __forceinline__ void find(const uint64_t *key, const bool *act, int32_t *v) const
    {
        uint4 lo[N], hi[N];
        int32_t b[N];
#pragma unroll
        for (int j = 0; j < N; j++) { // every load in flight before the first use
            lo[j] = hi[j] = make_uint4(0, 0, 0, 0);
            b[j] = 0;
            if (!act[j]) continue;
            const int64_t g = (int64_t)(key[j] / kDenseGroupBits);
            const uint4 *p = reinterpret_cast<const uint4 *>(bits) + 2 * g;
            lo[j] = __ldg(p);
            hi[j] = __ldg(p + 1);
            b[j] = __ldg(base + g);
        }
#pragma unroll
        for (int j = 0; j < N; j++) v[j] = act[j] ? dense_rank(lo[j], hi[j], b[j], key[j]) : -1;
    }
};

// STRIDED / DOWNSAMPLE / TRANSPOSED: inserts the input rows, and hands the output keys to sink:
// DOWNSAMPLE floor(q / s), the others every q's targets. A warp takes 32 rows at a time (every
// lane makes the calls).
template <typename Sink>
__device__ __forceinline__ void st_newout_insert(const int32_t *coords, int64_t n, const Geom &g,
                                                 const vc_keypack &kin,
                                                 const vc_hash_gpu_view &hin,
                                                 const vc_keypack &kout, const Sink &sink,
                                                 int64_t *scr)
{
    unsigned n_dup = 0;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x + (threadIdx.x & ~31u); i0 < n;
         i0 += step) {
        const int64_t i = i0 + (threadIdx.x & 31);
        int4 c = make_int4(0, 0, 0, 0);
        bool row = false;
        if (i < n) {
            c = reinterpret_cast<const int4 *>(coords)[i];
            row = insert_input(kin, hin, c, i, scr, n_dup);
        }
        if (g.type == VC_MAP_DOWNSAMPLE) {
            uint64_t key = 0; // the input's coordinates are in range
            if (row)
                key = vc_key_pack_d(kout, c.x, (int32_t)div_stride(g, 0, c.y),
                                    (int32_t)div_stride(g, 1, c.z), (int32_t)div_stride(g, 2, c.w));
            sink.template put<1>(&key, &row);
            continue;
        }
        const WarpPairs w = warp_pairs(g, kout, row, c);
        for (uint32_t base = 0; base < w.total; base += 32 * kPairBatch) {
            WarpPair t[kPairBatch];
            uint64_t key[kPairBatch];
            bool act[kPairBatch];
            warp_round(w, g, base, t, key, act);
            sink.template put<kPairBatch>(key, act);
        }
    }
    add_dups(n_dup, scr);
}

// The dense path's insert: the input rows into their table, the output keys into the bitmap.
__global__ void dense_insert_kernel(const int32_t *coords, int64_t n, const int64_t *d_n_in,
                                    Geom g, vc_keypack kin, vc_hash_gpu_view hin,
                                    vc_keypack kout, uint32_t *bits, int64_t *scr)
{
    pdl_enter();
    st_newout_insert(coords, dev_count(d_n_in, n), g, kin, hin, kout, DenseSink{bits}, scr);
}

template <typename UKey>
__global__ void newout_insert_kernel(const int32_t *coords, int64_t n, const int64_t *d_n_in,
                                     Geom g, vc_keypack kin,
                                     vc_hash_gpu_view hin, vc_keypack kout,
                                     vc_hash_gpu_view hout, UKey *ukeys, int64_t ucap,
                                     int64_t *scr, uint32_t *khist, int32_t passes,
                                     int32_t dbits, unsigned long long *done, StatusPost post)
{
    pdl_enter();
    __shared__ uint32_t shist[kMaxPasses * kMaxBins];
    __shared__ UKey list[kClaimList];
    __shared__ int n_list;
    __shared__ unsigned long long first;
    const int nh = khist ? passes * kMaxBins : 0;
    for (int i = threadIdx.x; i < nh; i += blockDim.x) shist[i] = 0;
    if (threadIdx.x == 0) n_list = 0;
    __syncthreads();
    const KeyHist kh = {khist ? shist : NULL, passes, dbits};
    const ClaimList<UKey> cl = {list, &n_list, kClaimList};
    const ClaimSink<UKey> sink = {hout, ukeys, ucap, scr, kh, cl};
    st_newout_insert(coords, dev_count(d_n_in, n), g, kin, hin, kout, sink, scr);
    __syncthreads();
    for (int i = threadIdx.x; i < nh; i += blockDim.x) {
        const uint32_t c = shist[i];
        if (c) atomicAdd(&khist[i], c);
    }
    // the block's list to ukeys: one atomic on the claim counter (m is the block's)
    const int m = n_list < kClaimList ? n_list : kClaimList;
    if (m > 0) {
        if (threadIdx.x == 0)
            first = atomicAdd((unsigned long long *)&scr[S_N_OUT], (unsigned long long)m);
        __syncthreads();
        bool over = false;
        for (int i = threadIdx.x; i < m; i += blockDim.x) {
            if (first + i < (unsigned long long)ucap)
                ukeys[first + i] = list[i];
            else
                over = true;
        }
        if (over) raise_flag(scr, VC_KMAP_GPU_F_OUT_OVERFLOW);
    }
    if (post.dst) post_when_last(done, scr, post);
}


// Rank r < n of the sorted output keys: stored as the key's value, unpacked into out_coords;
// and out_in cleared to -1 for the scatter over all `rows` rows (a bounded build's extent: the
// tail rows stay -1, the guarantee of kmap_gpu.h), n published as the live count.
template <typename UKey>
__device__ __forceinline__ void st_rank(const UKey *sorted, int64_t n, int64_t rows,
                                        const vc_keypack &kout, const vc_hash_gpu_view &hout,
                                        int32_t K, int32_t *out_coords, int32_t *out_in,
                                        int64_t *scr)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) scr[S_N_LIVE] = n;
    GRID_LOOP(r, n)
    {
        const uint64_t key = (uint64_t)sorted[r];
        const int64_t s = vc_hash_gpu_slot_d(hout, key);
        if (s < 0)
            raise_flag(scr, VC_KMAP_GPU_F_MISSING);
        else
            vc_hash_gpu_set_d(hout, s, key, (int32_t)r);
        int32_t c[4];
        vc_key_unpack_d(kout, key, c);
        reinterpret_cast<int4 *>(out_coords)[r] = make_int4(c[0], c[1], c[2], c[3]);
    }
    fill_minus1(out_in, rows * K, blockIdx.x, gridDim.x);
}

template <typename UKey>
__global__ void rank_kernel(const UKey *sorted, const int64_t *d_n, int64_t rows,
                            vc_keypack kout, vc_hash_gpu_view hout, int32_t K,
                            int32_t *out_coords, int32_t *out_in, int64_t *scr)
{
    pdl_enter();
    st_rank(sorted, dev_count(d_n, rows), rows, kout, hout, K, out_coords, out_in, scr);
}

// STRIDED / DOWNSAMPLE / TRANSPOSED out_in, input-stationary: (p, k) has at most one input q,
// so every element is written at most once. A warp takes 32 rows at a time and looks their
// pairs up kPairBatch a lane at a time (every lane makes the calls).
template <typename Find>
__device__ __forceinline__ void st_scatter(const int32_t *coords, int64_t n_in, const Geom &g,
                                           const vc_keypack &kout, const Find &out,
                                           int64_t n_out, int32_t *out_in, int64_t *scr)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x + (threadIdx.x & ~31u); i0 < n_in;
         i0 += step) {
        const int64_t i = i0 + (threadIdx.x & 31);
        int4 c = make_int4(0, 0, 0, 0);
        if (i < n_in) c = reinterpret_cast<const int4 *>(coords)[i];
        // a bad row: the build fails anyway
        const bool row = i < n_in && c.x >= 0 && c.x < kout.limit[0];
        const WarpPairs w = warp_pairs(g, kout, row, c);
        for (uint32_t base = 0; base < w.total; base += 32 * kPairBatch) {
            WarpPair t[kPairBatch];
            uint64_t key[kPairBatch];
            bool act[kPairBatch];
            int32_t v[kPairBatch];
            warp_round(w, g, base, t, key, act);
            out.template find<kPairBatch>(key, act, v);
#pragma unroll
            for (int j = 0; j < kPairBatch; j++) {
                if (!act[j]) continue;
                const int32_t p = v[j];
                if (p < 0 && g.type == VC_MAP_DOWNSAMPLE) continue; // not an output
                if (p < 0 || p >= n_out) {
                    raise_flag(scr, VC_KMAP_GPU_F_MISSING);
                    continue;
                }
                out_in[(int64_t)p * g.K + t[j].k] = (int32_t)(i0 + t[j].lane);
            }
        }
    }
}

template <typename Find>
__global__ void scatter_kernel(const int32_t *coords, int64_t n_in, const int64_t *d_n_in,
                               Geom g, vc_keypack kout, Find out, const int64_t *d_n,
                               int64_t rows, int32_t *out_in, int64_t *scr)
{
    pdl_enter();
    st_scatter(coords, dev_count(d_n_in, n_in), g, kout, out, dev_count(d_n, rows), out_in, scr);
}

// The dense count, tile t = block t of kRowThreads rank groups (one a thread, 2048 words):
// sub[8t + w] = the set bits of warp w's 256 words, tsum[t] = the tile's. The last block to
// finish (done, zero before the launch) turns tsum into exclusive prefixes over the tiles and
// writes n_out (the set bits in all) into the status block, with VC_KMAP_GPU_F_OUT_OVERFLOW
// past cap (a bounded build's max_out), then (post.dst) posts the block for the host: its
// other words came from the insert before. No tile waits on another: a decoupled look-back over
// 512 tiles that all start at once (2^25 bits) walked ~30 round trips for the last of them and
// measured slower; so did tiles of 256 words (8x the blocks, each an atomic on `done`).
__global__ void __launch_bounds__(kRowThreads)
    dense_count_kernel(const uint32_t *bits, int64_t groups, int32_t *tsum, int32_t *sub,
                       unsigned long long *done, int64_t cap, int64_t *scr, StatusPost post)
{
    pdl_enter();
    typedef cub::BlockScan<int32_t, kRowThreads> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ int32_t wsum[kRowWarps];
    __shared__ bool last;
    static_assert(kRowWarps == 8, "dense_unpack_kernel reads a tile's sub-tile sums as 2 int4");
    const int tid = threadIdx.x, warp = tid / 32;
    const int64_t g = (int64_t)blockIdx.x * kRowThreads + tid;
    int32_t c = 0;
    if (g < groups) {
        // the bitmap was written by the atomics of the kernel before: loads past L1
        const uint4 *p = reinterpret_cast<const uint4 *>(bits) + 2 * g;
        const uint4 lo = __ldcg(p), hi = __ldcg(p + 1);
        c = __popc(lo.x) + __popc(lo.y) + __popc(lo.z) + __popc(lo.w) + __popc(hi.x) +
            __popc(hi.y) + __popc(hi.z) + __popc(hi.w);
    }
    c = __reduce_add_sync(kFullWarp, c);
    if (tid % 32 == 0) {
        wsum[warp] = c;
        sub[(int64_t)blockIdx.x * kRowWarps + warp] = c;
    }
    __syncthreads();
    if (tid == 0) {
        int32_t agg = 0;
        for (int w = 0; w < kRowWarps; w++) agg += wsum[w];
        tsum[blockIdx.x] = agg;
        last = last_block(done);
    }
    __syncthreads();
    if (!last) return;
    // the other blocks' sums, past L1; in place
    const int32_t carry = block_prefix<int32_t>(
        tmp, gridDim.x, [&](int64_t i) { return __ldcg(&tsum[i]); },
        [&](int64_t i, int32_t v) { tsum[i] = v; });
    if (tid == 0) {
        scr[S_N_OUT] = carry;
        if (carry > cap) raise_flag(scr, VC_KMAP_GPU_F_OUT_OVERFLOW);
        if (post.dst) post_status(scr, post);
    }
}

// The dense path's outputs, block b over bitmap words [256b, 256b + 256) (warp b % 8 of the
// count's tile b / 8), a word a thread: its first rank (tsum, the count's tile prefix, the
// sub-tile sums before it, and a scan of the block), stored as base[g]
// by the first word of each group, then out_coords at the ranks of its set bits (rows < n,
// the device count clamped to rows). A thread never unpacks more than 32 outputs: with 256
// groups a block, a lane a group (or a warp a group in turn), the dense groups near a scanner
// fell to a few lanes, which measured slower than a word a thread. Every block also clears
// out_in to -1 for the scatter, over all `rows` rows (as st_rank), and block 0 publishes n.
__global__ void __launch_bounds__(kRowThreads)
    dense_unpack_kernel(const uint32_t *bits, int64_t words, const int32_t *tsum,
                        const int32_t *sub, int32_t *base, const int64_t *d_n, int64_t rows,
                        vc_keypack kout, int32_t K, int32_t *out_coords, int32_t *out_in,
                        int64_t *scr)
{
    pdl_enter();
    typedef cub::BlockScan<int32_t, kRowThreads> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const int64_t n = dev_count(d_n, rows);
    if (blockIdx.x == 0 && threadIdx.x == 0) scr[S_N_LIVE] = n;
    const int64_t blocks = (words + kRowThreads - 1) / kRowThreads;
    if (blockIdx.x < blocks) {
        const int64_t u = (int64_t)blockIdx.x * kRowThreads + threadIdx.x;
        const int64_t t = blockIdx.x / kRowWarps, w = blockIdx.x % kRowWarps;
        // every load in flight before the scan: the tile's prefix, and the sums of its
        // sub-tiles in one 32-byte sector (a loop of loads up to w measured slower)
        const int4 *sq = reinterpret_cast<const int4 *>(sub + t * kRowWarps);
        const int4 s0 = __ldcg(sq), s1 = __ldcg(sq + 1);
        const int32_t sv[kRowWarps] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        int32_t tb = __ldcg(&tsum[t]);
#pragma unroll
        for (int i = 0; i < kRowWarps; i++) tb += i < w ? sv[i] : 0;
        uint32_t word = u < words ? __ldcg(bits + u) : 0u;
        int32_t excl;
        Scan(tmp).ExclusiveSum(__popc(word), excl);
        int64_t r = tb + excl;
        if (u < words && u % kDenseGroupWords == 0) base[u / kDenseGroupWords] = (int32_t)r;
        for (; word && r < n; word &= word - 1, r++) {
            int32_t c[4];
            vc_key_unpack_d(kout, (uint64_t)u * 32 + (__ffs(word) - 1), c);
            reinterpret_cast<int4 *>(out_coords)[r] = make_int4(c[0], c[1], c[2], c[3]);
        }
    }
    fill_minus1(out_in, rows * K, blockIdx.x, gridDim.x);
}

vc_hash_gpu_view view_in(const Sizes &z, const Bufs &b)
{
    return vc_hash_gpu_make_view((uint64_t *)b.tin, z.cap_in, VC_HASH_DEFAULT_MAX_PROBE,
                                 z.packed_in);
}

vc_hash_gpu_view view_out(const Sizes &z, const Bufs &b)
{
    return vc_hash_gpu_make_view((uint64_t *)b.tout, z.cap_out, VC_HASH_DEFAULT_MAX_PROBE,
                                 z.packed_out);
}

} // namespace

cudaError_t q_insert(const Job &j, const Sizes &z, const Bufs &b, cudaStream_t s,
                     Posting *posting, int32_t *out_in, int64_t n_out_in)
{
    const StatusPost p =
        posting ? posting->carry(j.n_in > 0 && j.new_out) : StatusPost{NULL, 0};
    if (j.n_in == 0) return cudaSuccess;
    if (!j.new_out) {
        // out_in's fill: ~8 16-byte stores a thread, at most two blocks an SM
        const int64_t per_block = (int64_t)kThreads * 8 * 4, cap = 2 * (int64_t)vc_device_sms();
        int64_t fill = out_in ? (n_out_in + per_block - 1) / per_block : 0;
        if (fill > cap) fill = cap;
        const unsigned ins = grid_for(j.n_in);
        return launch_k(b.pdl, subm_insert_kernel, ins + (unsigned)fill, kThreads, 0, s, j.d_in,
                        j.n_in, j.d_n_in, j.kin, view_in(z, b), b.scr, out_in, n_out_in,
                        (int64_t)ins);
    } else if (z.dense_bits) {
        // the bitmap, then its count (n_out)
        cudaError_t e = launch_k(b.pdl, dense_insert_kernel, grid_for(j.n_in), kThreads, 0, s,
                                 j.d_in, j.n_in, j.d_n_in, j.g, j.kin, view_in(z, b), j.kout,
                                 b.bits, b.scr);
        if (e != cudaSuccess) return e;
        const int64_t cap = z.out_bound > 0 ? z.out_bound : INT64_MAX;
        return launch_k(b.pdl, dense_count_kernel, dense_tiles(z), kRowThreads, 0, s,
                        (const uint32_t *)b.bits, dense_groups(z), b.dtsum, b.dsub, b.done, cap,
                        b.scr, p);
    } else if (z.ukey32) {
        const PermPlan kp = key_plan(z);
        return launch_k(b.pdl, newout_insert_kernel<uint32_t>, grid_for(j.n_in), kThreads, 0,
                        s, j.d_in, j.n_in, j.d_n_in, j.g, j.kin, view_in(z, b), j.kout,
                        view_out(z, b), (uint32_t *)b.ukeys, z.ucap, b.scr, b.khist, kp.passes,
                        kp.dbits, b.done, p);
    } else {
        return launch_k(b.pdl, newout_insert_kernel<uint64_t>, grid_for(j.n_in), kThreads, 0,
                        s, j.d_in, j.n_in, j.d_n_in, j.g, j.kin, view_in(z, b), j.kout,
                        view_out(z, b), (uint64_t *)b.ukeys, z.ucap, b.scr, (uint32_t *)NULL, 0,
                        0, b.done, p);
    }
}

cudaError_t q_rank_scatter(const Job &j, const Sizes &z, const Bufs &b, vc_kmap_data *m,
                           int64_t rows, bool exact, const void *sorted, cudaEvent_t ev_mid,
                           cudaStream_t s)
{
    cudaError_t e = cudaSuccess;
    const int64_t *d_n = stage_count(b, exact);
    // the outputs' rows: the dense path's unpack, or the ranks of the sorted keys
    if (rows > 0 && z.dense_bits) {
        // a block per 256 words, and enough blocks for a few 16-byte stores a thread of out_in
        const int64_t fill = grid_for(rows * j.K / 16);
        const int64_t words = dense_words(z), blocks = (words + kRowThreads - 1) / kRowThreads;
        e = launch_k(b.pdl, dense_unpack_kernel, blocks > fill ? blocks : fill, kRowThreads, 0,
                     s, (const uint32_t *)b.bits, words, (const int32_t *)b.dtsum,
                     (const int32_t *)b.dsub, b.dbase, d_n, rows, j.kout, j.K, m->out_coords,
                     m->out_in, b.scr);
    } else if (rows > 0) {
        const unsigned grid = grid_for(rows * j.K);
        if (z.ukey32)
            e = launch_k(b.pdl, rank_kernel<uint32_t>, grid, kThreads, 0, s,
                         (const uint32_t *)sorted, d_n, rows, j.kout, view_out(z, b), j.K,
                         m->out_coords, m->out_in, b.scr);
        else
            e = launch_k(b.pdl, rank_kernel<uint64_t>, grid, kThreads, 0, s,
                         (const uint64_t *)sorted, d_n, rows, j.kout, view_out(z, b), j.K,
                         m->out_coords, m->out_in, b.scr);
    }
    if (e != cudaSuccess) return e;
    if (ev_mid && (e = cudaEventRecord(ev_mid, s)) != cudaSuccess) return e;
    if (rows == 0 || j.n_in == 0) return cudaSuccess;
    // out_in, each target found by rank in the bitmap or in the output table
    if (z.dense_bits)
        return launch_k(b.pdl, scatter_kernel<DenseFind>, grid_for(j.n_in), kThreads, 0, s,
                        j.d_in, j.n_in, j.d_n_in, j.g, j.kout, DenseFind{b.bits, b.dbase}, d_n,
                        rows, m->out_in, b.scr);
    return launch_k(b.pdl, scatter_kernel<HashFind>, grid_for(j.n_in), kThreads, 0, s, j.d_in,
                    j.n_in, j.d_n_in, j.g, j.kout, HashFind{view_out(z, b)}, d_n, rows,
                    m->out_in, b.scr);
}

cudaError_t q_subm_lookup(const Job &j, const Sizes &z, const Bufs &b, int32_t *out_in,
                          cudaStream_t s)
{
    if (j.n_in == 0) return cudaSuccess;
    const int64_t total = j.n_in * ((j.K - 1) / 2 + 1);
    return launch_k(b.pdl, subm_lookup_kernel, grid_for((total + kLookups - 1) / kLookups),
                    kThreads, 0, s, j.d_in, j.n_in, j.d_n_in, j.g, j.kin, view_in(z, b), out_in);
}

} // namespace kmap_gpu
