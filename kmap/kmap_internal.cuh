// kmap/kmap_internal.cuh - what the .cu files of the GPU kernel maps share (kmap/kmap_gpu.h is
// the interface, bit-identical to the CPU twin kmap/kmap_cpu.c): constants, the status block's
// words, the geometry of a map (Geom) and the target arithmetic the kernels and the host share,
// the device helpers several kernels use, a build's description (Job), its workspace layout
// (Sizes, Bufs) and the stage functions each file queues for the others. Files:
//   geometry.cu    a build's description (setup_job: checks, key layouts, Geom), its header,
//                  the dense path's choice, vc_kmap_gpu_debug_targets;
//   discover.cu    the input inserts and the outputs: output keys claimed in a hash table or
//                  marked in the dense path's bitmap, their count and ranks, out_coords and
//                  out_in (SUBM: by lookups; the others: by scattering each input's targets);
//   sort_pairs.cu  the look-back radix sort, the row passes (masks, pair counts), the column
//                  scans, the pair scatter and perm, and the output-key sort;
//   build.cu       the workspace, the status block and its read-back, the regular builds and
//                  the inverse, the public entry points;
//   bounded.cu     the bounded, graph-capturable builds;
//   tile_order.cu  the tile order of a finished map.
// Kernels are defined (in an anonymous namespace) in the file that launches them: the objects
// are built without relocatable device code.
//
// Steps of a build (one kernel each unless said):
//  prep     clears the hash tables (all ones), the sort histograms (zero) and the status block;
//  insert   packs the input rows, checks their range, inserts them (row index as value: a
//           repeated key keeps its smallest row and records the first repeat, as the CPU's
//           sequential insert would) (SUBM: blocks of the same launch fill out_in with -1);
//           STRIDED / DOWNSAMPLE / TRANSPOSED: also inserts each candidate output key into the
//           output table and appends the keys it claims (warp-aggregated counter) to a list,
//           counting the digits of the keys it claims for their sort; or, on the dense path
//           (output keys of at most 26 bits, the usual case: "the dense output path"), sets
//           each output key's bit in a bitmap of the output key space, and a count kernel
//           counts the outputs (the bitmap's tiles, then a scan of their sums);
//  outputs  dense path: an unpack kernel gives each 256-bit group of the bitmap its first rank
//           and writes each set bit's coordinates at its rank (the (b, z, y, x) order), and
//           clears out_in to -1; the scatter ranks its keys in the bitmap. Otherwise radix
//           sort of the unique output keys (32-bit keys: the look-back sort, sort_pairs.cu, all
//           passes in one launch with a barrier between them where the tiles are no more than
//           the SMs, else a kernel per pass; 64-bit keys: CUB; the output arrays are allocated
//           while it runs): rank order = (b, z, y, x) order, the CPU's; a rank kernel stores
//           each key's rank in the output table, unpacks out_coords and clears out_in to -1;
//  out_in   SUBM: one thread per (row, offset k <= centre) looks the neighbour up and writes
//           out_in[p, k] = q and, by the kernel symmetry (q, p, K-1-k), out_in[q, K-1-k] = p:
//           half the lookups. Others: one thread per input enumerates the offsets that reach
//           an output (per-axis masks) and writes out_in[p, k] = q; (p, k) has at most one q;
//  rowpass  one thread per output row (rows staged in shared memory, K <= 32): the mask words,
//           per-block per-offset counts (warp ballots), the digit histograms of the mask sort;
//  scan     one block per offset scans its column of block counts (in the launch of the first
//           sort pass): per-(offset, block) pair bases within the offset, the offset's total;
//  pairs    one thread per output row again: each block scans the K totals (offsets[] and
//           n_pairs from block 0), ballot ranks, pairs written at base + rank, so the pairs of
//           an offset are in output-row order, as on the CPU (in the launches of the later
//           sort passes);
//  perm     K <= 32: a stable LSD radix sort of the masks, descending, from the identity, in
//           ceil(K / 9) passes whose tiles take their digit prefixes by decoupled look-back:
//           the first pass in one launch, the others in one more with a barrier between them
//           where the tiles are no more than the SMs, else one launch each; K > 32: CUB sorts
//           over the mask words, least significant word first.
//  SUBM k3 is 6 kernels: prep, insert, out_in, rowpass, scans + pass 1, pairs + passes 2-3.
// Launches (launch_k): every kernel of these steps starts with pdl_enter; in the regular
// builds, on compute capability 9.0 and up, each is launched with programmatic stream
// serialization, so its launch overlaps the end of the kernel before it. The arrays no early
// kernel needs are allocated after those kernels are queued, while the GPU runs them.
// Hash tables use 8-byte packed slots when the key layout fits 31 bits (hash_gpu.h).
// Temporaries are carved from one workspace; arrays of the regular build come from the
// library's stream-ordered pool (core/device_pool.h), which keeps freed blocks for reuse.
#ifndef VC_KMAP_KMAP_INTERNAL_CUH
#define VC_KMAP_KMAP_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <cub/block/block_scan.cuh>

#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "core/device_pool.h"
#include "core/launch.cuh"
#include "hash/hash_gpu.h"
#include "kmap/kmap_gpu.h"

static const char kArea[] = "kernel map"; // the messages' prefix (VC_CUDA_TRY, vc_cuda_fail)

namespace kmap_gpu {

const int kRowThreads = 256; // row passes: one output row per thread
const int kRowWarps = kRowThreads / 32;
const int kMaxKernel = 7;
const int kMaxVolume = kMaxKernel * kMaxKernel * kMaxKernel;
const int kScanItems = 8;
const int kRetries = 6;
// The look-back radix sorts (sort_pairs.cu): at most kMaxPasses passes of digits of at most
// kMaxDigitBits.
const int kMaxPasses = 4;
const int kRemTable = 8; // strides up to this have axis_mask's table (Geom::rbits)
const int kMaxDigitBits = 9;
const int kMaxBins = 1 << kMaxDigitBits;

enum {
    S_BAD_ROW = VC_KMAP_GPU_BAD_ROW,
    S_FIRST_DUP = VC_KMAP_GPU_FIRST_DUP,
    S_N_DUP = VC_KMAP_GPU_N_DUP,
    S_N_OUT = VC_KMAP_GPU_N_OUT,
    S_N_PAIRS = VC_KMAP_GPU_N_PAIRS,
    S_FLAGS = VC_KMAP_GPU_FLAGS,
    S_N_LIVE = VC_KMAP_GPU_N_LIVE,
    S_N_IN = VC_KMAP_GPU_N_IN,
    S_WORDS = VC_KMAP_GPU_STATUS_WORDS
};

struct Geom {
    int32_t kernel[3], stride[3], padding[3], dilation[3];
    int32_t in_shape[3], out_shape[3];
    int32_t K;
    int32_t type;
    uint32_t mag[2]; // ceil(2^16 / kernel[2]), ceil(2^16 / kernel[1]): offset_of's divisions
    // axis_pos / axis_mask (new-output types): t_off[a] is added to an input coordinate before
    // its one division by the stride (STRIDED: padding; DOWNSAMPLE: centre x dilation;
    // TRANSPOSED: -padding, added after the multiplication); offset d's d x dilation is
    // eq[a][d] x stride + er[a][d] (STRIDED, DOWNSAMPLE).
    int64_t t_off[3];
    int64_t eq[3][kMaxKernel];
    int32_t er[3][kMaxKernel];
    // axis_pos's division by the stride: q = the high word of (c + t_off) x smag[a] for c +
    // t_off < 2^32 (smag = ceil(2^64 / stride); 0 for stride 1); axis_mask's inner range: every
    // offset d whose remainder er[a][d] is r (rbits[a][r], r < kRemTable, stride <= kRemTable)
    // has its target inside the grid where q_lo[a] <= q < q_hi[a].
    uint64_t smag[3];
    int64_t q_lo[3], q_hi[3];
    uint8_t rbits[3][kRemTable];
    // the packed output key of offsets (dz, dy, dx) for the input at (b, q): key_of(b, q) -
    // dkey[0][dz] - dkey[1][dy] - dkey[2][dx] (mod 2^64; the fields are exact where the
    // offsets are in axis_mask)
    uint64_t dkey[3][kMaxKernel];
};

inline int64_t row_blocks(int64_t rows) { return (rows + kRowThreads - 1) / kRowThreads; }

__device__ __forceinline__ void raise_flag(int64_t *scr, unsigned long long f)
{
    atomicOr((unsigned long long *)&scr[S_FLAGS], f);
}

// Where a regular build posts its status block for the host (read_status): the context's mapped
// pinned block (dst; NULL: none) and the call's sequence number, stored after the words.
struct StatusPost {
    int64_t *dst;
    int64_t seq;
};

// The posting, by one thread, once every word of scr is final: the words, a system-scope fence,
// then the sequence number the host polls for. The words are loaded from L2 (__ldcg): other
// blocks and kernels stored them.
__device__ __forceinline__ void post_status(const int64_t *scr, const StatusPost &p)
{
    int64_t v[S_WORDS];
#pragma unroll
    for (int i = 0; i < S_WORDS; i++) v[i] = __ldcg((const long long *)scr + i);
#pragma unroll
    for (int i = 0; i < S_WORDS; i++) p.dst[i] = v[i];
    __threadfence_system();
    *(volatile int64_t *)(p.dst + S_WORDS) = p.seq;
}

// A regular build's read-back posting as its stages hand it on (host side): where and under
// which number it is posted (status_post), and whether a launch the build queued carries it
// (queued, set by carry). Where none does, read_status queues the one-thread status_kernel
// under the same number.
struct Posting {
    StatusPost post;
    bool queued;
    // The posting a launch carries: this one where the launch makes the stage's final counts
    // (makes_counts) and there is a mapped block, else none.
    StatusPost carry(bool makes_counts)
    {
        queued = makes_counts && post.dst;
        return queued ? post : StatusPost{NULL, 0};
    }
};

// The launch's ticket, taken by one thread of each block after a barrier over the block's
// stores (counter: zero before the launch). True in the last block to take one; its fences
// order the block's stores before its ticket, and every other ticket (so every other block's
// stores) before the last block's later loads, which read past L1 (__ldcg).
template <typename T> __device__ __forceinline__ bool last_block(T *counter)
{
    __threadfence();
    const bool last = atomicAdd(counter, (T)1) == (T)gridDim.x - 1;
    if (last) __threadfence();
    return last;
}

// Called by every thread of every block of a launch once the block's stores and atomics to the
// status block are made: the last block to get here posts it (post.dst set; done: a counter at
// zero before the launch).
__device__ __forceinline__ void post_when_last(unsigned long long *done, const int64_t *scr,
                                               const StatusPost &post)
{
    __syncthreads(); // every thread's stores before thread 0's ticket
    if (threadIdx.x == 0 && last_block(done)) post_status(scr, post);
}

// The row count of a stage: rows itself where d_n is NULL (the host knew the exact count),
// else the device's count clamped to [0, rows].
__device__ __forceinline__ int64_t dev_count(const int64_t *d_n, int64_t rows)
{
    if (!d_n) return rows;
    const int64_t n = *d_n;
    return n < rows ? (n > 0 ? n : 0) : rows;
}

// i / d for i >= 0, d > 0: 32-bit division where i fits (a 64-bit division costs several times
// as many instructions).
__device__ __forceinline__ int64_t div_idx(int64_t i, int32_t d)
{
    return i <= 0xffffffffll ? (int64_t)((uint32_t)i / (uint32_t)d) : i / d;
}

// Kernel offset k -> (dz, dy, dx), z slowest and x fastest. The divisions by the kernel sizes
// (<= 7) are multiplications by mag: exact for k < 343 (the error k * (mag - 2^16 / s) / 2^16
// stays below 0.006, and a quotient's fraction below 6/7).
__device__ __forceinline__ void offset_of(const Geom &g, int32_t k, int32_t d[3])
{
    const int32_t t = (int32_t)(((uint32_t)k * g.mag[0]) >> 16);
    d[2] = k - t * g.kernel[2];
    d[0] = (int32_t)(((uint32_t)t * g.mag[1]) >> 16);
    d[1] = t - d[0] * g.kernel[1];
}

// Where input coordinate c stands along axis a, for axis_mask: STRIDED / DOWNSAMPLE: c +
// t_off = q x stride + r (the build's only division on this axis: div_stride);
// TRANSPOSED: q = c x stride + t_off (r unused).
struct AxisPos {
    int64_t q, r;
};

// The target arithmetic below (div_stride to pair_of) runs on the host too, for
// vc_kmap_gpu_debug_targets (the unit test's check of it against the map's definition).
__host__ __device__ __forceinline__ uint64_t mul_hi64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

__host__ __device__ __forceinline__ int32_t low_bit(uint32_t m) // m != 0
{
#ifdef __CUDA_ARCH__
    return __ffs(m) - 1;
#else
    return __builtin_ctz(m);
#endif
}

// t / stride[a] (rounded toward zero), a multiplication where 0 <= t < 2^32.
__host__ __device__ __forceinline__ int64_t div_stride(const Geom &g, int a, int64_t t)
{
    if (t >= 0 && t <= 0xffffffffll)
        return g.smag[a] ? (int64_t)mul_hi64((uint64_t)t, g.smag[a]) : t;
    return t / g.stride[a];
}

__host__ __device__ __forceinline__ AxisPos axis_pos(const Geom &g, int a, int32_t c)
{
    AxisPos p;
    const int64_t s = g.stride[a];
    if (g.type == VC_MAP_TRANSPOSED) {
        p.q = (int64_t)c * s + g.t_off[a];
        p.r = 0;
        return p;
    }
    const int64_t t = (int64_t)c + g.t_off[a];
    p.q = div_stride(g, a, t);
    p.r = t - p.q * s;
    return p;
}

// STRIDED / TRANSPOSED: the output coordinate along axis a that the input at p writes at
// offset d; DOWNSAMPLE: the output whose gather at offset d reads it. STRIDED: q = p*s - pad +
// d*dil for output p, so p = (c + pad - d*dil) / s where that divides; DOWNSAMPLE: output p
// reads input p*s + (d - centre)*dil, so p = (c + centre*dil - d*dil) / s; with c + t_off = q*s
// + r and d*dil = eq*s + er, it divides exactly when r == er, and the quotient is q - eq
// (negative where q < eq). TRANSPOSED: c*s - pad + d*dil. axis_mask has bit d set where the
// target exists (it divides and lies in the output grid).
__host__ __device__ __forceinline__ uint32_t axis_mask(const Geom &g, int a, const AxisPos &p)
{
    const bool tr = g.type == VC_MAP_TRANSPOSED;
    if (p.q >= g.q_lo[a] && p.q < g.q_hi[a]) { // every divisible offset lands inside
        if (tr) return (1u << g.kernel[a]) - 1u;
        if (g.stride[a] <= kRemTable && p.r >= 0) return g.rbits[a][p.r];
    }
    uint32_t m = 0;
    for (int32_t d = 0; d < g.kernel[a]; d++) {
        if (!tr && p.r != g.er[a][d]) continue;
        const int64_t t = tr ? p.q + (int64_t)d * g.dilation[a] : p.q - g.eq[a][d];
        if (t >= 0 && t < g.out_shape[a]) m |= 1u << d;
    }
    return m;
}

const unsigned kFullWarp = 0xffffffffu;

// One input row's (row, target) pairs: *key = key_of(b, q) (Geom::dkey) and per axis the
// offsets of axis_mask's bits, 3 bits each from bit 3 up, with their count in bits 0-2; returns
// the number of pairs, (jz x ny + jy) x nx + jx for the jz-th offset along z and so on (0, with
// empty lists, where row is false).
__host__ __device__ __forceinline__ uint32_t row_pairs(const Geom &g, const vc_keypack &kout,
                                                       bool row, const int4 c, uint64_t *key,
                                                       uint32_t list[3])
{
    *key = (uint64_t)(uint32_t)c.x << kout.shift[0];
    uint32_t cnt = row ? 1 : 0;
    const int32_t cc[3] = {c.y, c.z, c.w};
    for (int a = 0; a < 3; a++) {
        list[a] = 0;
        if (!row) continue;
        const AxisPos p = axis_pos(g, a, cc[a]);
        *key += (uint64_t)p.q << kout.shift[a + 1];
        uint32_t n = 0;
        for (uint32_t m = axis_mask(g, a, p); m; m &= m - 1u)
            list[a] |= (uint32_t)low_bit(m) << (3 + 3 * n++);
        list[a] |= n;
        cnt *= n;
    }
    return cnt;
}

// j / n for j < 2^12 and 1 <= n <= kMaxKernel, in fp32: (j + 1/2) / n is at least 1/(2n) from
// the integers on either side, far above the division's rounding error (4 instructions, not ~20).
__host__ __device__ __forceinline__ uint32_t small_div(uint32_t j, uint32_t n)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__fdividef((float)j + 0.5f, (float)n);
#else
    return (uint32_t)(((float)j + 0.5f) / (float)n);
#endif
}

// Pair j (< row_pairs' count) of a row: its output key, and its offset in *k.
__host__ __device__ __forceinline__ uint64_t pair_of(const Geom &g, uint64_t key,
                                                     const uint32_t list[3], uint32_t j,
                                                     int32_t *k)
{
    const uint32_t ny = list[1] & 7u, nx = list[2] & 7u;
    const uint32_t jzy = small_div(j, nx), jz = small_div(jzy, ny);
    const uint32_t jj[3] = {jz, jzy - jz * ny, j - jzy * nx};
    int32_t d[3];
    for (int a = 0; a < 3; a++) {
        d[a] = (int32_t)((list[a] >> (3 + 3 * jj[a])) & 7u);
        key -= g.dkey[a][d[a]];
    }
    *k = (d[0] * g.kernel[1] + d[1]) * g.kernel[2] + d[2];
    return key;
}

// ---- shared by the kernels of several files ------------------------------------------------

// The look-back sort's tiles (sort_pairs.cu).
const int kSortItems = 8;
const int kTile = kRowThreads * kSortItems; // items per sort tile

// The dense output path's rank groups of the bitmap (discover.cu).
const int kDenseGroupWords = 8; // 32-bit words of a rank group: one 32-byte sector
const int kDenseGroupBits = 32 * kDenseGroupWords;

// An exclusive prefix sum over n values by one block of kRowThreads threads, kScanItems
// consecutive values a thread at a time: store(i, the sum of values [0, i)) for every i < n, the
// values read by load(i) (a store may overwrite the value it replaces: each chunk is read before
// it is written); returns the sum of all n. The column scans of the pair counts and the dense
// count's scan of its tile sums.
template <typename T, typename Load, typename Store>
__device__ __forceinline__ T block_prefix(typename cub::BlockScan<T, kRowThreads>::TempStorage &tmp,
                                          int64_t n, Load load, Store store)
{
    T carry = 0;
    for (int64_t start = 0; start < n; start += (int64_t)kRowThreads * kScanItems) {
        const int64_t i0 = start + (int64_t)threadIdx.x * kScanItems;
        T v[kScanItems], mine = 0;
#pragma unroll
        for (int j = 0; j < kScanItems; j++) {
            v[j] = i0 + j < n ? load(i0 + j) : 0;
            mine += v[j];
        }
        T excl, all;
        cub::BlockScan<T, kRowThreads>(tmp).ExclusiveSum(mine, excl, all);
        __syncthreads(); // the scan storage is reused by the next chunk
        T run = carry + excl;
#pragma unroll
        for (int j = 0; j < kScanItems; j++) {
            if (i0 + j < n) store(i0 + j, run);
            run += v[j];
        }
        carry += all;
    }
    return carry;
}

// Passes and digit width of a sort of K-bit keys (K <= 32): ceil(K / 9) passes of equal digits,
// least significant first (K = 27: 3 x 9; K = 8: 1 x 8; K = 32: 4 x 8); one pass of 1 bit for
// K outside [1, 32] (masks of K > 32 sort a word at a time with CUB).
struct PermPlan {
    int32_t passes, dbits, bits; // bits: the SortSmem width, 8 or 9
    int64_t tiles;
    int64_t lb_words;            // tile counters, then passes x tiles x 2^bits look-back words
};

inline PermPlan perm_plan(int32_t K, int64_t rows)
{
    static_assert(kMaxDigitBits == 9, "the plan takes digits of up to 9 bits");
    PermPlan pl;
    if (K >= 1 && K <= 32) {
        pl.passes = (K + 8) / 9;
        pl.dbits = (K + pl.passes - 1) / pl.passes;
    } else {
        pl.passes = 1;
        pl.dbits = 1;
    }
    pl.bits = pl.dbits > 8 ? 9 : 8;
    pl.tiles = (rows + kTile - 1) / kTile;
    if (pl.tiles < 1) pl.tiles = 1;
    pl.lb_words = kMaxPasses + (int64_t)pl.passes * pl.tiles * ((int64_t)1 << pl.bits);
    return pl;
}

// ---- a build's workspace --------------------------------------------------------------------

// Input-table capacity of a regular or bounded build: the default (>= 2 x n slots, at most half
// full) doubled once where the doubled table stays within kInputTableBudget bytes. At most 1/4
// full, the subm lookups and every type's input inserts walk shorter probe sequences (measured
// faster, see docs/benchmarks.md); past the budget the larger table cost more than it
// saved.
constexpr int64_t kInputTableBudget = (int64_t)4 << 20;

inline int64_t input_cap(int64_t n, int32_t packed)
{
    const int64_t cap = vc_hash_capacity_for(n);
    const int64_t slot = packed ? 8 : 16;
    return cap > 0 && cap <= kInputTableBudget / (2 * slot) ? 2 * cap : cap;
}

// Sizes of the temporaries of one build.
struct Sizes {
    int64_t cap_in, cap_out;   // hash capacities (0: no table)
    int32_t packed_in, packed_out;
    int32_t ukey32;            // output keys as uint32 (packed output table)
    int64_t ucap;              // entries of the output-key list
    int64_t nsort;             // output keys sorted (0: none)
    int32_t end_bit_out;
    int32_t key_bits;          // bits of the output keys (new-output types)
    int32_t dense_bits;        // the dense path: a bitmap of 2^dense_bits bits (0: hash table)
    int64_t out_bound;         // outputs past this raise OUT_OVERFLOW in the dense count (bounded)
    int64_t rows;              // rows of the row passes
    int32_t K, words;
    size_t cub_bytes;
};

struct Bufs {
    int64_t *scr;
    // Tables part, one region cleared to zero by prep (zero_words): the digit counts of the
    // mask sort (hist) and of the output-key sort (khist), [kMaxPasses][kMaxBins] each, the
    // output-key sort's tile counters and look-back words (32-bit output keys), and for the
    // new-output types the done counter of the kernel that makes the output count (the dense
    // count's, or the output hash insert's: its last block finishes the count).
    uint32_t *hist, *khist;
    unsigned long long *klbz;
    int64_t klbz_words, zero_words;
    unsigned long long *done;
    // The dense path (Sizes.dense_bits), in the zero region after done: the bitmap; after it
    // the groups' first ranks (dbase) and the count's tile and sub-tile sums (dtsum, dsub).
    uint32_t *bits;
    int32_t *dbase, *dtsum, *dsub;
    unsigned long long *tin, *tout;
    void *ukeys, *usorted;
    int32_t *cnt;
    int64_t *base, *tot;
    int32_t *iota;
    uint32_t *keys_a, *keys_b;
    unsigned long long *lbz;   // the mask sort's tile counters and look-back words (K <= 32)
    int64_t lbz_words;
    void *cub;
    size_t cub_bytes;
    // Launch with the programmatic overlap (launch_k, core/launch.cuh): the regular builds do,
    // the bounded one does not: in a captured graph the overlap measured slower (strided and
    // downsample replays), while regular calls gain from it (see docs/benchmarks.md).
    bool pdl;
};

inline int64_t table_words(int64_t cap, int32_t packed) { return cap * (packed ? 1 : 2); }

// The count the row and sort kernels of a stage read (dev_count): NULL where the host passes
// the exact one (exact), else the device's output count in the status block.
inline const int64_t *stage_count(const Bufs &b, bool exact)
{
    return exact ? NULL : b.scr + S_N_OUT;
}

inline int64_t ukey_words(int64_t n, int32_t ukey32) { return ukey32 ? (n + 1) / 2 : n; }

struct Carver {
    char *base;
    size_t off;
    template <typename T> T *take(int64_t n)
    {
        if (n < 1) n = 1;
        off = (off + 255) & ~(size_t)255;
        T *p = base ? (T *)(base + off) : NULL;
        off += (size_t)n * sizeof(T);
        return p;
    }
};

// The output-key sort of a build with 32-bit output keys: over the key bits, tiles for ucap.
inline PermPlan key_plan(const Sizes &z) { return perm_plan(z.key_bits, z.ucap); }

// Rank groups of the dense path's bitmap (at least one), its words, and its count's tiles (of
// kRowThreads groups; the unpack's blocks are their warps' sub-tiles).
inline int64_t dense_groups(const Sizes &z)
{
    return z.dense_bits > 8 ? (int64_t)1 << (z.dense_bits - 8) : 1;
}

inline int64_t dense_words(const Sizes &z) { return dense_groups(z) * kDenseGroupWords; }

inline int64_t dense_tiles(const Sizes &z)
{
    return (dense_groups(z) + kRowThreads - 1) / kRowThreads;
}

// ---- a build's description (setup_job, geometry.cu) ----------------------------------------

struct Job {
    const int32_t *d_in;
    int64_t n_in;          // rows the input kernels are launched over: the exact count, or
                           // (d_n_in set) the bounded build's extent max_in
    const int64_t *d_n_in; // NULL, or the device count of input rows (the bounded build's
                           // status word S_N_IN, clamped to [0, n_in] by each kernel: dev_count)
    int32_t shape[3];
    int32_t batch;
    vc_map_desc desc;
    Geom g;
    vc_keypack kin, kout;
    bool new_out;
    int32_t K, words;
    int32_t bits_in, bits_out;
    int64_t reach; // kernel offsets one input can reach at most
    // Where the build's memory comes from and its context's cache (the read-back block); set
    // by the entry points after setup_job (core/alloc.h; NULL: the defaults, none kept).
    const vc_allocator *alloc;
    vc_engine_cache *cache;
};

inline int32_t key_bits(const vc_keypack &kp) { return kp.shift[0] + kp.bits[0]; }

// ---- what each file defines for the others (the q_* functions queue work, no host
// synchronisation in any of them) ----------------------------------------------------------

// geometry.cu: checks the arguments and describes the build (d_in may be NULL when n_in is 0);
// the header of its map; the dense path's key bits (Sizes.dense_bits) under opt, 0: the hash
// table.
vc_status setup_job(Job *j, const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                    int32_t batch_size, const vc_map_desc *d, vc_err *err);
void init_header(const Job &j, vc_kmap_data *m);
int32_t dense_bits_for(const Job &j, const vc_engine_options *opt);

// The input count of a bounded build, for q_prep's status block: read from *d (a device word,
// NULL: the value host) when the prep kernel runs and stored at S_N_IN; a count outside [0, max]
// raises VC_KMAP_GPU_F_IN_COUNT; subm: the output count (S_N_OUT, S_N_LIVE) is that count
// clamped to [0, max]. Regular builds pass none (max < 0).
struct InCount {
    const int64_t *d;
    int64_t host, max;
    bool subm;
};

// build.cu: the workspace layout; the clear of the tables and the status block (minus1: an
// int32 array of n_minus1 entries to fill with -1 as well, INVERSE: out_in, or NULL;
// ic: a bounded build's input count);
// the status block's read-back (the one synchronisation point of a stage; status_post: where
// and under which number it is posted), the CPU's verdict on bad input rows, and the release
// of a map's arrays.
size_t carve(const Sizes &z, bool tables, bool rows, char *base, Bufs *b);
cudaError_t q_prep(const Sizes &z, const Bufs &b, int64_t n_out_init, cudaStream_t s,
                   int32_t *minus1 = NULL, int64_t n_minus1 = 0,
                   const InCount &ic = InCount{NULL, 0, -1, false});
Posting status_post(vc_engine_cache *cache);
cudaError_t read_status(vc_engine_cache *cache, const vc_allocator *a, const int64_t *scr,
                        int64_t st[S_WORDS], cudaStream_t s, void **release = NULL,
                        int n_release = 0, const Posting *posting = NULL);
vc_status input_error(const int64_t st[S_WORDS], const int32_t *d_in, int64_t n_in,
                      const int32_t shape[3], int32_t batch_size, vc_err *err);
void free_map_arrays(vc_kmap_data *m);
// The INVERSE's scatter of a forward out_in (fwd_scr: the bounded forward build's status block,
// or NULL for exact counts; build.cu's inverse_kernel).
cudaError_t q_inverse(const int32_t *fwd_out_in, int64_t n_entries, int32_t K, int64_t fwd_n_in,
                      const int64_t *fwd_scr, int32_t *out_in, int64_t *scr, cudaStream_t s);

// discover.cu: the inserts (and the new-output types' output keys), SUBM's out_in, and the
// new-output types' outputs and out_in.
// posting (may be NULL): the read-back's posting (status_post) of a new-output build's first
// stage, carried by the last block of the kernel that makes the output count (the dense
// count, or the output hash insert); not carried for SUBM or without rows.
// SUBM: out_in (n_out_in entries, the map's rows x K), filled with -1 by blocks of the insert's
// launch (prep clears the tables only).
cudaError_t q_insert(const Job &j, const Sizes &z, const Bufs &b, cudaStream_t s,
                     Posting *posting = NULL, int32_t *out_in = NULL, int64_t n_out_in = 0);
cudaError_t q_subm_lookup(const Job &j, const Sizes &z, const Bufs &b, int32_t *out_in,
                          cudaStream_t s);
cudaError_t q_rank_scatter(const Job &j, const Sizes &z, const Bufs &b, vc_kmap_data *m,
                           int64_t rows, bool exact, const void *sorted, cudaEvent_t ev_mid,
                           cudaStream_t s);

// sort_pairs.cu: CUB's temporary storage for the sorts of a build; the output-key sort; the
// masks, pairs and perm.
cudaError_t cub_bytes_for(Sizes *z);
cudaError_t q_key_sort(const Sizes &z, const Bufs &b, bool exact, cudaStream_t s,
                       const void **sorted);
cudaError_t q_finish(const Job &j, const Bufs &b, vc_kmap_data *m, int64_t rows, bool exact,
                     int64_t max_pairs, cudaEvent_t ev_pairs, cudaStream_t s,
                     Posting *posting = NULL);

} // namespace kmap_gpu

#endif
