// kmap/kmap.cu - kernel maps on the GPU, bit-identical to the CPU twin
// kmap/kmap_cpu.c. Variants, sync points and the status block: see kmap_gpu.h.
//
// Steps (one kernel each unless said):
//  prep     clears the hash tables (all ones), the sort histograms (zero) and the status block;
//  insert   packs the input rows, checks their range, inserts them (row index as value: a
//           repeated key keeps its smallest row and records the first repeat, as the CPU's
//           sequential insert would); SUBM: also writes -1 into the upper half of out_in;
//           STRIDED / DOWNSAMPLE / TRANSPOSED: also inserts each candidate output key into the
//           output table and appends the keys it claims (warp-aggregated counter) to a list,
//           counting the digits of the keys it claims for their sort; or, on the dense path
//           (output keys of at most 26 bits, the usual case: "the dense output path"), sets
//           each output key's bit in a bitmap of the output key space, and a count kernel
//           counts the outputs (the bitmap's tiles, then a scan of their sums);
//  outputs  dense path: an unpack kernel gives each 256-bit group of the bitmap its first rank
//           and writes each set bit's coordinates at its rank (the (b, z, y, x) order), and
//           clears out_in to -1; the scatter below ranks its keys in the bitmap. Otherwise
//           radix sort of the unique output keys (32-bit keys: the look-back sort below, all
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
// Temporaries are carved from one workspace; arrays of the regular build come from a
// stream-ordered pool of the library that keeps freed blocks for reuse.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "core/device_pool.h"
#include "core/launch.cuh"
#include "hash/hash_gpu.h"
#include "kmap/kmap_gpu.h"

static const char kArea[] = "kernel map"; // the messages' prefix (VC_CUDA_TRY, vc_cuda_fail)

namespace cg = cooperative_groups;

namespace {

const int kRowThreads = 256; // row passes: one output row per thread
const int kRowWarps = kRowThreads / 32;
const int kMaxKernel = 7;
const int kMaxVolume = kMaxKernel * kMaxKernel * kMaxKernel;
const int kScanItems = 8;
const int kRetries = 6;
// The look-back radix sorts (below): at most kMaxPasses passes of digits of <= kMaxDigitBits.
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
    S_DONE = 6, // spare (the row pass's block counter until its scan moved out); kept zero
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

int64_t row_blocks(int64_t rows) { return (rows + kRowThreads - 1) / kRowThreads; }

__device__ __forceinline__ void raise_flag(int64_t *scr, unsigned long long f)
{
    atomicOr((unsigned long long *)&scr[S_FLAGS], f);
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

// ---- kernels ------------------------------------------------------------------------------

struct Fill {
    unsigned long long *p;
    int64_t words;
};

// Clears up to four regions to all ones (odd: one more int32 to -1, or NULL) and one to zero,
// and resets the status block.
__global__ void prep_kernel(Fill a, Fill b, Fill c, Fill d, int32_t *odd, Fill z, int64_t *scr,
                            int64_t n_out_init)
{
    pdl_enter();
    const int64_t t0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    if (t0 == 0) {
        scr[S_BAD_ROW] = INT64_MAX;
        scr[S_FIRST_DUP] = INT64_MAX;
        scr[S_N_DUP] = 0;
        scr[S_N_OUT] = n_out_init;
        scr[S_N_PAIRS] = 0;
        scr[S_FLAGS] = 0;
        scr[S_DONE] = 0;
        scr[7] = 0;
        if (odd) *odd = -1;
    }
    for (int64_t i = t0; i < a.words; i += step) a.p[i] = ~0ull;
    for (int64_t i = t0; i < b.words; i += step) b.p[i] = ~0ull;
    for (int64_t i = t0; i < c.words; i += step) c.p[i] = ~0ull;
    for (int64_t i = t0; i < d.words; i += step) d.p[i] = ~0ull;
    for (int64_t i = t0; i < z.words; i += step) z.p[i] = 0ull;
}

// Copies the status block to dst, mapped host memory: the read-back of read_status.
__global__ void status_kernel(const int64_t *scr, int64_t *dst)
{
    pdl_enter();
    if (threadIdx.x < S_WORDS) dst[threadIdx.x] = scr[threadIdx.x];
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

// SUBM: inserts the input rows (out_in is all -1 already: prep).
__global__ void subm_insert_kernel(const int32_t *coords, int64_t n, vc_keypack kin,
                                   vc_hash_gpu_view hin, int64_t *scr)
{
    pdl_enter();
    unsigned n_dup = 0;
    GRID_LOOP(i, n)
    {
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

__global__ void subm_lookup_kernel(const int32_t *coords, int64_t n, Geom g, vc_keypack kin,
                                   vc_hash_gpu_view hin, int32_t *out_in)
{
    pdl_enter();
    st_subm_lookup(coords, n, g, kin, hin, out_in);
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
const int kDenseGroupWords = 8; // 32-bit words of a rank group: one 32-byte sector
const int kDenseGroupBits = 32 * kDenseGroupWords;

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
__global__ void dense_insert_kernel(const int32_t *coords, int64_t n, Geom g, vc_keypack kin,
                                    vc_hash_gpu_view hin, vc_keypack kout, uint32_t *bits,
                                    int64_t *scr)
{
    pdl_enter();
    st_newout_insert(coords, n, g, kin, hin, kout, DenseSink{bits}, scr);
}

template <typename UKey>
__global__ void newout_insert_kernel(const int32_t *coords, int64_t n, Geom g, vc_keypack kin,
                                     vc_hash_gpu_view hin, vc_keypack kout,
                                     vc_hash_gpu_view hout, UKey *ukeys, int64_t ucap,
                                     int64_t *scr, uint32_t *khist, int32_t passes,
                                     int32_t dbits)
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
    st_newout_insert(coords, n, g, kin, hin, kout, sink, scr);
    __syncthreads();
    for (int i = threadIdx.x; i < nh; i += blockDim.x) {
        const uint32_t c = shist[i];
        if (c) atomicAdd(&khist[i], c);
    }
    // the block's list to ukeys: one atomic on the claim counter
    const int m = n_list < kClaimList ? n_list : kClaimList;
    if (m == 0) return;
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

// Fills p[0, n) with -1, 16 bytes a store where p is aligned.
__device__ __forceinline__ void fill_minus1(int32_t *p, int64_t n)
{
    const int64_t n4 = ((uintptr_t)p & 15) == 0 ? n / 4 : 0;
    GRID_LOOP(i, n4) reinterpret_cast<int4 *>(p)[i] = make_int4(-1, -1, -1, -1);
    GRID_LOOP(i, n - 4 * n4) p[4 * n4 + i] = -1;
}

// Rank r of the sorted output keys: stored as the key's value, unpacked into out_coords; and
// out_in cleared to -1 for the scatter.
template <typename UKey>
__device__ __forceinline__ void st_rank(const UKey *sorted, int64_t n, const vc_keypack &kout,
                                        const vc_hash_gpu_view &hout, int32_t K,
                                        int32_t *out_coords, int32_t *out_in, int64_t *scr)
{
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
    fill_minus1(out_in, n * K);
}

template <typename UKey>
__global__ void rank_kernel(const UKey *sorted, const int64_t *d_n, int64_t rows,
                            vc_keypack kout, vc_hash_gpu_view hout, int32_t K,
                            int32_t *out_coords, int32_t *out_in, int64_t *scr)
{
    pdl_enter();
    st_rank(sorted, dev_count(d_n, rows), kout, hout, K, out_coords, out_in, scr);
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
__global__ void scatter_kernel(const int32_t *coords, int64_t n_in, Geom g, vc_keypack kout,
                               Find out, const int64_t *d_n, int64_t rows, int32_t *out_in,
                               int64_t *scr)
{
    pdl_enter();
    st_scatter(coords, n_in, g, kout, out, dev_count(d_n, rows), out_in, scr);
}

// INVERSE: out_in[q, k] = p for every forward entry (p -> q at k). out_in starts at -1.
__global__ void inverse_kernel(const int32_t *fwd_out_in, int64_t n_entries, int32_t K,
                               int64_t fwd_n_in, int32_t *out_in, int64_t *scr)
{
    GRID_LOOP(i, n_entries)
    {
        int32_t q = fwd_out_in[i];
        if (q < 0) continue;
        int64_t p = div_idx(i, K);
        int32_t k = (int32_t)(i - p * K);
        if (q >= fwd_n_in) {
            raise_flag(scr, VC_KMAP_GPU_F_BAD_ENTRY);
            continue;
        }
        int32_t old = atomicCAS(&out_in[(int64_t)q * K + k], -1, (int32_t)p);
        if (old != -1) raise_flag(scr, VC_KMAP_GPU_F_CONFLICT);
    }
}

// ---- the look-back radix sort --------------------------------------------------------------
//
// A stable LSD radix sort whose tiles take their digit prefixes by decoupled look-back (each
// tile publishes its digit counts, then the running prefix of its predecessors, which it reads
// back-to-front): after one histogram of every pass's digits (made by whatever step produced
// the keys), a pass is one kernel (or one step between two barriers of a launch's sort blocks),
// with no scan step. Digits of up to 9 bits: BITS = 8 (256 bins, one per thread) or 9 (512
// bins, two per thread). It sorts the masks (K <= 32, one mask word: ceil(K / 9) passes) and
// the 32-bit output keys.

const int kSortItems = 8;
const int kTile = kRowThreads * kSortItems; // items per sort tile

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

// The dense count, tile t = block t of kRowThreads rank groups (one a thread, 2048 words):
// sub[8t + w] = the set bits of warp w's 256 words, tsum[t] = the tile's. The last block to
// finish (done, zero before the launch) turns tsum into exclusive prefixes over the tiles and
// writes n_out (the set bits in all) into the status block, with VC_KMAP_GPU_F_OUT_OVERFLOW
// past cap (a bounded build's max_out). No tile waits on another: a decoupled look-back over
// 512 tiles that all start at once (2^25 bits) walked ~30 round trips for the last of them and
// measured slower; so did tiles of 256 words (8x the blocks, each an atomic on `done`).
__global__ void __launch_bounds__(kRowThreads)
    dense_count_kernel(const uint32_t *bits, int64_t groups, int32_t *tsum, int32_t *sub,
                       unsigned long long *done, int64_t cap, int64_t *scr)
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
        __threadfence();
        last = atomicAdd(done, 1ull) == gridDim.x - 1ull;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // the other blocks' sums, past L1; in place
    const int32_t carry = block_prefix<int32_t>(
        tmp, gridDim.x, [&](int64_t i) { return __ldcg(&tsum[i]); },
        [&](int64_t i, int32_t v) { tsum[i] = v; });
    if (tid == 0) {
        scr[S_N_OUT] = carry;
        if (carry > cap) raise_flag(scr, VC_KMAP_GPU_F_OUT_OVERFLOW);
    }
}

// The dense path's outputs, block b over bitmap words [256b, 256b + 256) (warp b % 8 of the
// count's tile b / 8), a word a thread: its first rank (tsum, the count's tile prefix, the
// sub-tile sums before it, and a scan of the block), stored as base[g]
// by the first word of each group, then out_coords at the ranks of its set bits (rows < n,
// the device count clamped to rows). A thread never unpacks more than 32 outputs: with 256
// groups a block, a lane a group (or a warp a group in turn), the dense groups near a scanner
// fell to a few lanes, which measured slower than a word a thread. Every block also clears
// out_in to -1 for the scatter.
__global__ void __launch_bounds__(kRowThreads)
    dense_unpack_kernel(const uint32_t *bits, int64_t words, const int32_t *tsum,
                        const int32_t *sub, int32_t *base, const int64_t *d_n, int64_t rows,
                        vc_keypack kout, int32_t K, int32_t *out_coords, int32_t *out_in)
{
    pdl_enter();
    typedef cub::BlockScan<int32_t, kRowThreads> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const int64_t n = dev_count(d_n, rows);
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
    fill_minus1(out_in, n * K);
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

// Passes and digit width of a sort of K-bit keys (K <= 32): ceil(K / 9) passes of equal digits
// (K = 27: 3 x 9; K = 8: 1 x 8; K = 32: 4 x 8).
struct PermPlan {
    int32_t passes, dbits, bits; // bits: the SortSmem width, 8 or 9
    int64_t tiles;
    int64_t lb_words;            // tile counters, then passes x tiles x 2^bits look-back words
};

PermPlan perm_plan(int32_t K, int64_t rows)
{
    static_assert(kMaxDigitBits == 9, "vc_kmap_sort_plan (kmap.h) plans 9-bit digits");
    PermPlan pl;
    pl.passes = vc_kmap_sort_plan(K, &pl.dbits);
    if (pl.passes < 1) {
        pl.passes = 1;
        pl.dbits = 1;
    }
    pl.bits = pl.dbits > 8 ? 9 : 8;
    pl.tiles = (rows + kTile - 1) / kTile;
    if (pl.tiles < 1) pl.tiles = 1;
    pl.lb_words = kMaxPasses + (int64_t)pl.passes * pl.tiles * ((int64_t)1 << pl.bits);
    return pl;
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
    uint32_t *hist;           // [passes][kMaxBins] digit counts of ~mask, zero before the pass
    int32_t passes, dbits;
    unsigned long long *zero; // the sort's tile counters and look-back words, cleared here
    int64_t zero_words;
};

// Dynamic shared memory of rowpass_kernel: wc [kRowWarps][K] ints, then the staged rows.
size_t rowpass_smem(int32_t K)
{
    size_t b = (size_t)kRowWarps * K * 4;
    if (K <= kMaxStageK) b += (size_t)kRowThreads * stage_stride(K) * 4;
    return b;
}

// One thread per output row p < rows (rows past the device count n get mask 0): mask words,
// iota for a CUB mask sort (NULL: none), the block's per-offset counts cnt[k * nb + block],
// the digit histograms of a look-back mask sort (sp). The scan of the counts runs in the next
// launch, one block per offset (col_scan): until it moved there, the last block of this pass
// scanned all K * nb counts alone while the other SMs idled, most of the pass's time. At most
// 64 registers: 4 blocks per SM, so that ~500 blocks (128k rows) run in one wave.
__global__ void __launch_bounds__(kRowThreads, 4)
    rowpass_kernel(const int32_t *out_in, int32_t K, int32_t words, const int64_t *d_n,
                   int64_t rows, uint32_t *masks, int32_t *iota, int32_t *cnt, SortPrep sp)
{
    pdl_enter();
    __shared__ uint32_t shist[kMaxPasses * kMaxBins];
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
    __syncthreads();
    for (int32_t w = 0; w < words; w++) {
        const int32_t k0 = 32 * w, k1 = K < k0 + 32 ? K : k0 + 32;
        uint32_t m = 0;
        if (valid) {
            if (staged) {
                const int32_t *row = srow + tid * S;
                for (int32_t k = k0; k < k1; k++)
                    if (row[k] >= 0) m |= 1u << (k - k0);
            } else {
                const int32_t *row = out_in + p * K;
                for (int32_t k = k0; k < k1; k++)
                    if (row[k] >= 0) m |= 1u << (k - k0);
            }
        }
        if (nh) {
            // digit counts of ~m, one shared atomic per distinct digit of the warp
            const uint32_t key = ~m, dmask = (1u << sp.dbits) - 1u;
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
    int64_t chunk0; // the first chunk of a launch's pair blocks
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
// tmp_raw: the scan's storage. Block `chunk` 0 publishes them, n_pairs and the overflow flag.
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

__global__ void mask_word_kernel(const uint32_t *masks, const int32_t *perm, int64_t n,
                                 int32_t words, int32_t w, uint32_t *keys)
{
    GRID_LOOP(i, n) keys[i] = masks[(int64_t)perm[i] * words + w];
}

// Stream-ordered scratch of `bytes` from the library's pool (core/device_pool.h).
cudaError_t pool_bytes(void **p, size_t bytes, cudaStream_t s)
{
    return (cudaError_t)vc_device_pool_alloc(p, (int64_t)bytes, s);
}

// ---- launches ----------------------------------------------------------------------------

// Whether a look-back sort of `tiles` tiles may take them by block index (LsdSort.ctr NULL)
// instead of from a counter. Only the sort's blocks ever wait, each on smaller tiles; with no
// more tiles than multiprocessors they cannot fill the device, so the block of a tile that is
// waited on is scheduled as soon as blocks that never wait (the scans and pairs sharing the
// launch, other streams' work) make room, whatever order the hardware starts blocks in. Saves
// each tile the counter's atomic and a barrier before its first load. Larger sorts take tiles
// from the counter, in the order their blocks start.
bool tiles_resident(int64_t tiles) { return tiles <= vc_device_sms(); }

// Kernels launch through launch_k (core/launch.cuh). The regular builds ask for the
// programmatic overlap (Bufs.pdl), the bounded one does not: in a captured graph the overlap
// measured slower (strided and downsample replays), while regular calls gain from it (see
// docs/benchmarks.md).

template <typename T> cudaError_t dev_alloc_n(T **p, int64_t n)
{
    if (n < 1) n = 1;
    *p = NULL;
    cudaError_t e = cudaMalloc((void **)p, (size_t)n * sizeof(T));
    if (e != cudaSuccess) *p = NULL;
    return e;
}

// Input-table capacity of a regular or bounded build: the default (>= 2 x n slots, at most half
// full) doubled once where the doubled table stays within kInputTableBudget bytes. At most 1/4
// full, the subm lookups and every type's input inserts walk shorter probe sequences (measured
// faster, see docs/benchmarks.md); past the budget the larger table cost more than it
// saved.
constexpr int64_t kInputTableBudget = (int64_t)4 << 20;

int64_t input_cap(int64_t n, int32_t packed)
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
    // mask sort (hist) and of the output-key sort (khist), [kMaxPasses][kMaxBins] each, and
    // the output-key sort's tile counters and look-back words (32-bit output keys).
    uint32_t *hist, *khist;
    unsigned long long *klbz;
    int64_t klbz_words, zero_words;
    // The dense path (Sizes.dense_bits), in the zero region after hist: the count's done
    // counter (dlb, 32 words so that the bitmap stays aligned), then the bitmap; after them the
    // groups' first ranks (dbase) and the count's tile and sub-tile sums (dtsum, dsub).
    unsigned long long *dlb;
    int64_t dlb_words;
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
    bool pdl; // launch with the programmatic overlap (launch_k): the regular builds
};

int64_t table_words(int64_t cap, int32_t packed) { return cap * (packed ? 1 : 2); }

// The count the row and sort kernels of a stage read (dev_count): NULL where the host passes
// the exact one (exact), else the device's output count in the status block.
const int64_t *stage_count(const Bufs &b, bool exact) { return exact ? NULL : b.scr + S_N_OUT; }
int64_t ukey_words(int64_t n, int32_t ukey32) { return ukey32 ? (n + 1) / 2 : n; }

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
PermPlan key_plan(const Sizes &z) { return perm_plan(z.key_bits, z.ucap); }

// Rank groups of the dense path's bitmap (at least one), its words, and its count's tiles (of
// kRowThreads groups; the unpack's blocks are their warps' sub-tiles).
int64_t dense_groups(const Sizes &z)
{
    return z.dense_bits > 8 ? (int64_t)1 << (z.dense_bits - 8) : 1;
}

int64_t dense_words(const Sizes &z) { return dense_groups(z) * kDenseGroupWords; }

int64_t dense_tiles(const Sizes &z) { return (dense_groups(z) + kRowThreads - 1) / kRowThreads; }

// Lays the temporaries out from `base` (NULL: just the size): the tables part (status block,
// hash tables, output-key list) and / or the rows part (sorted keys, counts, sort buffers).
size_t carve(const Sizes &z, bool tables, bool rows, char *base, Bufs *b)
{
    Carver c = {base, 0};
    if (tables) {
        b->scr = c.take<int64_t>(S_WORDS);
        b->hist = c.take<uint32_t>(2 * kMaxPasses * kMaxBins); // 16 KB: klbz follows at once
        b->khist = base ? b->hist + kMaxPasses * kMaxBins : NULL;
        b->klbz_words = z.ucap > 0 && z.ukey32 ? key_plan(z).lb_words : 0;
        b->klbz = b->klbz_words > 0 ? c.take<unsigned long long>(b->klbz_words) : NULL;
        // the dense path has no key sort (ucap 0), so its words follow hist at once; a multiple
        // of 32 words (the carver's 256-byte alignment), so that the bitmap follows them
        const int64_t bitmap_words = z.dense_bits ? dense_words(z) / 2 : 0;
        b->dlb_words = z.dense_bits ? 32 : 0;
        b->dlb = b->dlb_words > 0 ? c.take<unsigned long long>(b->dlb_words) : NULL;
        b->bits = bitmap_words > 0 ? (uint32_t *)c.take<unsigned long long>(bitmap_words) : NULL;
        b->zero_words = kMaxPasses * kMaxBins + b->klbz_words + b->dlb_words + bitmap_words;
        b->dbase = z.dense_bits ? c.take<int32_t>(dense_groups(z)) : NULL;
        b->dtsum = z.dense_bits ? c.take<int32_t>(dense_tiles(z)) : NULL;
        b->dsub = z.dense_bits ? c.take<int32_t>(dense_tiles(z) * kRowWarps) : NULL;
        b->tin = c.take<unsigned long long>(table_words(z.cap_in, z.packed_in));
        b->tout = z.cap_out > 0 ? c.take<unsigned long long>(table_words(z.cap_out, z.packed_out))
                                : NULL;
        b->ukeys = z.ucap > 0 ? (void *)c.take<unsigned long long>(ukey_words(z.ucap, z.ukey32))
                              : NULL;
    }
    if (rows) {
        const int64_t nb = row_blocks(z.rows);
        b->usorted = z.nsort > 0
                         ? (void *)c.take<unsigned long long>(ukey_words(z.nsort, z.ukey32))
                         : NULL;
        b->cnt = c.take<int32_t>((int64_t)z.K * nb);
        b->base = c.take<int64_t>((int64_t)z.K * nb);
        b->tot = c.take<int64_t>(z.K);
        b->iota = c.take<int32_t>(z.rows);
        b->keys_a = c.take<uint32_t>(z.rows);
        b->keys_b = c.take<uint32_t>(z.rows);
        b->lbz_words = z.words == 1 ? perm_plan(z.K, z.rows).lb_words : 0;
        b->lbz = b->lbz_words > 0 ? c.take<unsigned long long>(b->lbz_words) : NULL;
        b->cub = c.take<char>((int64_t)z.cub_bytes);
        b->cub_bytes = z.cub_bytes;
    }
    return c.off + 256;
}

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

// ---- a build's description ---------------------------------------------------------------

struct Job {
    const int32_t *d_in;
    int64_t n_in;
    int32_t shape[3];
    int32_t batch;
    vc_map_desc desc;
    Geom g;
    vc_keypack kin, kout;
    bool new_out;
    int32_t K, words;
    int32_t bits_in, bits_out;
    int64_t reach; // kernel offsets one input can reach at most
};

int32_t key_bits(const vc_keypack &kp) { return kp.shift[0] + kp.bits[0]; }

// The dense output path (kernels above) serves new-output maps whose output keys have at
// most kDenseMaxBits bits: a bitmap of at most 8 MB, whose clear, count and unpack move ~24 MB,
// which costs less than the output table's claims, the key sort and the ranks of a typical
// scan (measured, see docs/benchmarks.md).
// vc_engine_options.kmap_dense: 1 takes it up to kDenseForceBits (tests), -1 never (A/B).
const int32_t kDenseMaxBits = 26, kDenseForceBits = 28;

// Sizes.dense_bits of a build of j: its output key bits (at least 1), or 0 for the hash path.
int32_t dense_bits_for(const Job &j, const vc_engine_options *opt)
{
    if (!j.new_out) return 0;
    const int mode = opt ? opt->kmap_dense : 0;
    const int32_t most = mode > 0 ? kDenseForceBits : mode < 0 ? -1 : kDenseMaxBits;
    if (j.bits_out > most) return 0;
    return j.bits_out > 0 ? j.bits_out : 1;
}

// Offsets per axis that one input coordinate can use at most: every one for SUBM and
// TRANSPOSED; for STRIDED and DOWNSAMPLE those d with d*dil in one residue class mod stride.
int64_t reach_of(const vc_map_desc *d)
{
    int64_t t = 1;
    for (int a = 0; a < 3; a++) {
        int64_t best = d->kernel[a];
        if (d->type == VC_MAP_STRIDED || d->type == VC_MAP_DOWNSAMPLE) {
            best = 0;
            for (int32_t i = 0; i < d->kernel[a]; i++) {
                int64_t c = 0;
                for (int32_t j = 0; j < d->kernel[a]; j++)
                    if (((int64_t)i * d->dilation[a]) % d->stride[a] ==
                        ((int64_t)j * d->dilation[a]) % d->stride[a])
                        c++;
                if (c > best) best = c;
            }
        }
        t *= best;
    }
    return t;
}

vc_status setup_job(Job *j, const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                    int32_t batch_size, const vc_map_desc *d, vc_err *err)
{
    int32_t oshape[3];
    vc_status st = vc_kmap_check_build(d_in, n_in, shape, batch_size, d, oshape, err);
    if (st != VC_OK) return st;
    memset(j, 0, sizeof *j);
    if (vc_keypack_init(&j->kin, batch_size, shape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: coordinates of batch %d, shape "
                       "%dx%dx%d do not pack into 63 bits", (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    j->new_out = d->type != VC_MAP_SUBM;
    if (j->new_out && vc_keypack_init(&j->kout, batch_size, oshape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: output coordinates of batch %d, "
                       "shape %dx%dx%d do not pack into 63 bits", (int)batch_size,
                       (int)oshape[0], (int)oshape[1], (int)oshape[2]);
    if (!j->new_out) j->kout = j->kin;
    j->d_in = d_in;
    j->n_in = n_in;
    j->batch = batch_size;
    j->desc = *d;
    for (int a = 0; a < 3; a++) {
        j->shape[a] = shape[a];
        j->g.kernel[a] = d->kernel[a];
        j->g.stride[a] = d->stride[a];
        j->g.padding[a] = d->padding[a];
        j->g.dilation[a] = d->dilation[a];
        j->g.in_shape[a] = shape[a];
        j->g.out_shape[a] = oshape[a];
    }
    j->K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    j->g.K = j->K;
    j->g.type = (int32_t)d->type;
    j->g.mag[0] = (65536u + (uint32_t)d->kernel[2] - 1u) / (uint32_t)d->kernel[2];
    j->g.mag[1] = (65536u + (uint32_t)d->kernel[1] - 1u) / (uint32_t)d->kernel[1];
    for (int a = 0; a < 3; a++) {
        const int64_t ks = d->kernel[a], st = d->stride[a], dil = d->dilation[a];
        j->g.t_off[a] = d->type == VC_MAP_STRIDED     ? (int64_t)d->padding[a]
                        : d->type == VC_MAP_DOWNSAMPLE ? (ks % 2 == 1 ? ks / 2 : 0) * dil
                                                       : -(int64_t)d->padding[a];
        const bool tr = d->type == VC_MAP_TRANSPOSED;
        const int sh = j->kout.shift[a + 1];
        j->g.smag[a] = st > 1 ? UINT64_MAX / (uint64_t)st + 1u : 0;
        for (int64_t k = 0; k < ks && k < kMaxKernel; k++) {
            j->g.eq[a][k] = k * dil / st;
            j->g.er[a][k] = (int32_t)(k * dil % st);
            if (!tr && st <= kRemTable) j->g.rbits[a][j->g.er[a][k]] |= (uint8_t)(1u << k);
            j->g.dkey[a][k] = (uint64_t)(tr ? -(k * dil) : j->g.eq[a][k]) << sh;
        }
        // the q whose every offset's target lies in [0, out_shape): STRIDED / DOWNSAMPLE q -
        // eq[a][d] (eq grows with d, eq[a][0] = 0); TRANSPOSED q + d x dil
        const int64_t reach = tr ? (ks - 1) * dil : j->g.eq[a][ks <= kMaxKernel ? ks - 1 : 0];
        j->g.q_lo[a] = tr ? 0 : reach;
        j->g.q_hi[a] = tr ? (int64_t)oshape[a] - reach : (int64_t)oshape[a];
    }
    j->words = (j->K + 31) / 32;
    j->bits_in = key_bits(j->kin);
    j->bits_out = key_bits(j->kout);
    j->reach = reach_of(d);
    return VC_OK;
}

void init_header(const Job &j, vc_kmap_data *m)
{
    memset(m, 0, sizeof *m);
    m->type = j.desc.type;
    for (int a = 0; a < 3; a++) {
        m->kernel[a] = j.desc.kernel[a];
        m->stride[a] = j.desc.stride[a];
        m->padding[a] = j.desc.padding[a];
        m->dilation[a] = j.desc.dilation[a];
        m->out_shape[a] = j.g.out_shape[a];
    }
    m->volume = j.K;
    m->n_in = j.n_in;
    m->out_batch_size = j.batch;
    m->mask_words = j.words;
}

// ---- queued stages (no host synchronisation in any of these) -----------------------------

// minus1: an int32 array of n_minus1 entries to fill with -1 as well (SUBM and INVERSE:
// out_in), or NULL.
cudaError_t q_prep(const Sizes &z, const Bufs &b, int64_t n_out_init, cudaStream_t s,
                   int32_t *minus1 = NULL, int64_t n_minus1 = 0)
{
    Fill f0 = {b.tin, z.cap_in > 0 ? table_words(z.cap_in, z.packed_in) : 0};
    Fill f1 = {b.tout, z.cap_out > 0 ? table_words(z.cap_out, z.packed_out) : 0};
    Fill f2 = {(unsigned long long *)b.ukeys, z.ucap > 0 ? ukey_words(z.ucap, z.ukey32) : 0};
    Fill f3 = {(unsigned long long *)minus1, minus1 ? n_minus1 / 2 : 0};
    int32_t *odd = minus1 && n_minus1 % 2 ? minus1 + n_minus1 - 1 : NULL;
    Fill fz = {(unsigned long long *)b.hist, b.zero_words};
    int64_t mx = f0.words > f1.words ? f0.words : f1.words;
    if (f2.words > mx) mx = f2.words;
    if (f3.words > mx) mx = f3.words;
    if (fz.words > mx) mx = fz.words;
    // a few stores per thread: a grid of at most 1024 blocks
    unsigned grid = grid_for(mx);
    if (grid > 1024) grid = 1024;
    return launch_k(b.pdl, prep_kernel, grid, kThreads, 0, s, f0, f1, f2, f3, odd, fz, b.scr,
                    n_out_init);
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

cudaError_t q_insert(const Job &j, const Sizes &z, const Bufs &b, cudaStream_t s)
{
    if (j.n_in == 0) return cudaSuccess;
    if (!j.new_out) {
        // out_in is all -1 already (prep)
        return launch_k(b.pdl, subm_insert_kernel, grid_for(j.n_in), kThreads, 0, s, j.d_in,
                        j.n_in, j.kin, view_in(z, b), b.scr);
    } else if (z.dense_bits) {
        // the bitmap, then its count (n_out)
        cudaError_t e = launch_k(b.pdl, dense_insert_kernel, grid_for(j.n_in), kThreads, 0, s,
                                 j.d_in, j.n_in, j.g, j.kin, view_in(z, b), j.kout, b.bits,
                                 b.scr);
        if (e != cudaSuccess) return e;
        const int64_t cap = z.out_bound > 0 ? z.out_bound : INT64_MAX;
        return launch_k(b.pdl, dense_count_kernel, dense_tiles(z), kRowThreads, 0, s,
                        (const uint32_t *)b.bits, dense_groups(z), b.dtsum, b.dsub, b.dlb, cap,
                        b.scr);
    } else if (z.ukey32) {
        const PermPlan kp = key_plan(z);
        return launch_k(b.pdl, newout_insert_kernel<uint32_t>, grid_for(j.n_in), kThreads, 0,
                        s, j.d_in, j.n_in, j.g, j.kin, view_in(z, b), j.kout, view_out(z, b),
                        (uint32_t *)b.ukeys, z.ucap, b.scr, b.khist, kp.passes, kp.dbits);
    } else {
        return launch_k(b.pdl, newout_insert_kernel<uint64_t>, grid_for(j.n_in), kThreads, 0,
                        s, j.d_in, j.n_in, j.g, j.kin, view_in(z, b), j.kout, view_out(z, b),
                        (uint64_t *)b.ukeys, z.ucap, b.scr, (uint32_t *)NULL, 0, 0);
    }
}

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
                     m->out_in);
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
                        j.d_in, j.n_in, j.g, j.kout, DenseFind{b.bits, b.dbase}, d_n, rows,
                        m->out_in, b.scr);
    return launch_k(b.pdl, scatter_kernel<HashFind>, grid_for(j.n_in), kThreads, 0, s, j.d_in,
                    j.n_in, j.g, j.kout, HashFind{view_out(z, b)}, d_n, rows, m->out_in, b.scr);
}

cudaError_t q_subm_lookup(const Job &j, const Sizes &z, const Bufs &b, int32_t *out_in,
                          cudaStream_t s)
{
    if (j.n_in == 0) return cudaSuccess;
    const int64_t total = j.n_in * ((j.K - 1) / 2 + 1);
    return launch_k(b.pdl, subm_lookup_kernel, grid_for((total + kLookups - 1) / kLookups),
                    kThreads, 0, s, j.d_in, j.n_in, j.g, j.kin, view_in(z, b), out_in);
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
cudaError_t q_finish(const Job &j, const Bufs &b, vc_kmap_data *m, int64_t rows, bool exact,
                     int64_t max_pairs, cudaEvent_t ev_pairs, cudaStream_t s)
{
    cudaError_t e;
    const int32_t K = j.K, words = j.words;
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
    if (words == 1) {
        const PermPlan pl = perm_plan(K, rows);
        LsdSort ps;
        ps.src = m->masks;
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
        SortPrep sp = {b.hist, pl.passes, pl.dbits, b.lbz, b.lbz_words};
        e = launch_k(b.pdl, rowpass_kernel, nb, kRowThreads, rowpass_smem(K), s, m->out_in, K,
                     words, d_n, rows, m->masks, (int32_t *)NULL, b.cnt, sp);
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
    SortPrep none = {NULL, 0, 0, NULL, 0};
    e = launch_k(b.pdl, rowpass_kernel, nb, kRowThreads, rowpass_smem(K), s, m->out_in, K,
                 words, d_n, rows, m->masks, ident, b.cnt, none);
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
    for (int32_t w = 0; w < words; w++) {
        mask_word_kernel<<<grid_for(rows), kThreads, 0, s>>>(m->masks, pa_, rows, words, w,
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

// ---- host side ---------------------------------------------------------------------------

// Copies the status block back: THE synchronisation point of a stage. Into a mapped pinned
// block of the calling thread (made at its first read-back, kept for the process), written by
// a one-block kernel queued behind the stage (status_kernel, overlapped with the stage's last
// kernel): that read-back measured faster than a 64-byte copy, whose copy-engine round trip
// follows the last kernel. Where no mapped block
// could be made, a copy (into pageable memory where there is no pinned block at all, through a
// staging buffer). release[0, n_release): workspaces to free, stream-ordered, once the status
// is read, queued before the wait so that the host's tail after it is shorter; each entry is
// NULL once its free is queued.
cudaError_t read_status(const int64_t *scr, int64_t st[S_WORDS], cudaStream_t s,
                        void **release = NULL, int n_release = 0)
{
    static thread_local int64_t *pinned = NULL, *mapped = NULL;
    static thread_local bool tried = false;
    if (!tried) {
        tried = true;
        void *p = NULL, *d = NULL;
        if (cudaHostAlloc(&p, S_WORDS * sizeof(int64_t),
                          cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess) {
            pinned = (int64_t *)p;
            if (cudaHostGetDevicePointer(&d, p, 0) == cudaSuccess) mapped = (int64_t *)d;
        } else if (cudaMallocHost(&p, S_WORDS * sizeof(int64_t)) == cudaSuccess) {
            pinned = (int64_t *)p; // no mapping (a device that cannot map host memory): copies
        }
        cudaGetLastError();
    }
    int64_t *dst = pinned ? pinned : st;
    cudaError_t e = mapped ? launch_k(true, status_kernel, 1, 32, 0, s, scr, mapped)
                           : cudaMemcpyAsync(dst, scr, S_WORDS * sizeof(int64_t),
                                             cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess) return e;
    for (int i = 0; i < n_release; i++) {
        if (!release[i]) continue;
        e = cudaFreeAsync(release[i], s);
        release[i] = NULL;
        if (e != cudaSuccess) return e;
    }
    e = cudaStreamSynchronize(s);
    if (e == cudaSuccess && pinned) memcpy(st, pinned, S_WORDS * sizeof(int64_t));
    return e;
}

// The CPU's verdict on bad input rows: whichever of the first row outside the limits and the
// first row repeating an earlier one comes first. VC_OK when there is neither.
vc_status input_error(const int64_t st[S_WORDS], const int32_t *d_in, int64_t n_in,
                      const int32_t shape[3], int32_t batch_size, vc_err *err)
{
    const int64_t bad = st[S_BAD_ROW];
    int64_t dup = st[S_N_DUP] > 0 ? st[S_FIRST_DUP] : -1;
    if (st[S_N_DUP] > 0 && (dup < 0 || dup >= n_in)) dup = INT64_MAX - 1; // not located
    if (bad != INT64_MAX && bad >= 0 && bad < n_in && (dup < 0 || bad < dup)) {
        int32_t c[4] = {0, 0, 0, 0};
        if (cudaMemcpy(c, d_in + 4 * bad, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess)
            cudaGetLastError();
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: input row %lld (%d, %d, %d, %d) "
                       "lies outside batch size %d, shape %dx%dx%d", (long long)bad, (int)c[0],
                       (int)c[1], (int)c[2], (int)c[3], (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    }
    if (dup >= 0) {
        int32_t c[4] = {0, 0, 0, 0};
        if (dup < n_in &&
            cudaMemcpy(c, d_in + 4 * dup, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess)
            cudaGetLastError();
        return vc_fail(err, VC_ERR_DUPLICATE, "kernel map: input row %lld repeats the "
                       "coordinate (%d, %d, %d, %d) of an earlier row (%lld duplicates)",
                       (long long)dup, (int)c[0], (int)c[1], (int)c[2], (int)c[3],
                       (long long)st[S_N_DUP]);
    }
    return VC_OK;
}

void free_map_arrays(vc_kmap_data *m, bool pool)
{
    void *p[8] = {m->out_coords, m->out_in, m->offsets, m->in_rows, m->out_rows, m->masks,
                  m->perm, m->tile_order};
    bool any = false;
    for (int i = 0; i < 8; i++) any = any || p[i];
    if (!any) return;
    // Pool blocks are freed without an implicit synchronisation: wait for every user first.
    if (pool) cudaDeviceSynchronize();
    for (int i = 0; i < 8; i++)
        if (p[i]) cudaFree(p[i]);
    cudaGetLastError();
    m->out_coords = m->out_in = m->in_rows = m->out_rows = m->perm = NULL;
    m->tile_order = NULL;
    m->order_blocks = 0;
    m->offsets = NULL;
    m->masks = NULL;
}

#define EV(i)                                                                                  \
    do {                                                                                       \
        if (ev) VC_CUDA_TRY(cudaEventRecord(ev[i], s), "recording an event");                  \
    } while (0)

// SUBM, regular: one read-back at the end.
vc_status subm_regular(const Job &j, cudaStream_t s, vc_kmap_data *m, cudaEvent_t *ev,
                       vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t n = j.n_in;
    const int32_t K = j.K;
    int64_t n_entries = 0, n_words = 0;
    int64_t stat[S_WORDS];
    Sizes z;
    Bufs b;
    void *ws = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(n, K, &n_entries) || vc_mul_overflow_i64(n, j.words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                       (long long)n, (int)K);
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(n, z.packed_in);
    z.rows = n;
    z.K = K;
    z.words = j.words;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    // out_in and the workspace first: the first three kernels are queued before the other
    // arrays are allocated, so the host's allocations overlap the GPU's work
    // instead of delaying its start.
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->out_in, n_entries, s), "allocating out_in");
    for (int attempt = 0;; attempt++) {
        if (z.cap_in == 0 || z.cap_in > INT64_MAX / 64) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: hash table too large");
            goto fail;
        }
        VC_CUDA_TRY(pool_bytes(&ws, carve(z, true, true, NULL, &b), s), "allocating workspace");
        carve(z, true, true, (char *)ws, &b);
        EV(0);
        // out_in all -1 (one contiguous fill: clearing only the upper half in the insert
        // kernel measured slower)
        VC_CUDA_TRY(q_prep(z, b, n, s, m->out_in, n_entries), "clearing the tables");
        VC_CUDA_TRY(q_insert(j, z, b, s), "inserting the input keys");
        EV(1);
        EV(2);
        VC_CUDA_TRY(q_subm_lookup(j, z, b, m->out_in, s), "looking neighbours up");
        EV(3);
        if (!m->offsets) {
            VC_CUDA_TRY(vc_device_pool_alloc_n(&m->offsets, (int64_t)K + 1, s),
                        "allocating offsets");
            VC_CUDA_TRY(vc_device_pool_alloc_n(&m->masks, n_words, s), "allocating masks");
            VC_CUDA_TRY(vc_device_pool_alloc_n(&m->perm, n, s), "allocating perm");
            // Pairs: at most n * K (sized without reading the count back).
            VC_CUDA_TRY(vc_device_pool_alloc_n(&m->in_rows, n_entries, s), "allocating in_rows");
            VC_CUDA_TRY(vc_device_pool_alloc_n(&m->out_rows, n_entries, s), "allocating out_rows");
        }
        VC_CUDA_TRY(q_finish(j, b, m, n, true, n_entries, ev ? ev[4] : NULL, s), "pairs and masks");
        // SYNC POINT (the only one): n_pairs, the checks of the input rows, the flags.
        VC_CUDA_TRY(read_status(b.scr, stat, s, &ws, 1), "reading the counts back");
        EV(5);
        st = input_error(stat, j.d_in, n, j.shape, j.batch, err);
        if (st != VC_OK) goto fail;
        if (stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_IN) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the input hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            z.cap_in *= 2;
            continue;
        }
        if (stat[S_FLAGS] != 0) {
            st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: status flags 0x%llx",
                         (unsigned long long)stat[S_FLAGS]);
            goto fail;
        }
        break;
    }
    m->n_out = n;
    m->n_pairs = stat[S_N_PAIRS];
    return VC_OK;

fail:
    if (ws) cudaFreeAsync(ws, s);
    free_map_arrays(m, true);
    return st;
}

// STRIDED / DOWNSAMPLE / TRANSPOSED, regular: read-backs after collecting the output keys
// (n_out) and at the end.
vc_status newout_regular(const Job &j, const vc_engine_options *opt, cudaStream_t s,
                         vc_kmap_data *m, cudaEvent_t *ev, vc_err *err)
{
    vc_status st = VC_OK;
    const int32_t K = j.K;
    int64_t stat[S_WORDS];
    int64_t n_out = 0, n_entries = 0, n_words = 0, est = 0, pair_bound = 0, reach_total = 0;
    Sizes z;
    Bufs b;
    void *ws1 = NULL, *ws2 = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(j.n_in, j.reach, &reach_total))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld inputs x %lld offsets overflows",
                       (long long)j.n_in, (long long)j.reach);
    // Output table: sized for the outputs expected (every input's targets for TRANSPOSED, one
    // per input for DOWNSAMPLE, up to 4 per input for STRIDED); a larger output count is
    // caught at the read-back and the step repeated with the exact count.
    est = reach_total;
    if (j.desc.type == VC_MAP_DOWNSAMPLE) est = j.n_in;
    if (j.desc.type == VC_MAP_STRIDED && est > 4 * j.n_in) est = 4 * j.n_in;
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(j.n_in, z.packed_in);
    z.packed_out = j.bits_out <= VC_HASH_GPU_PACKED_BITS;
    z.ukey32 = z.packed_out;
    z.key_bits = j.bits_out;
    z.dense_bits = dense_bits_for(j, opt);
    z.cap_out = z.dense_bits ? 0 : vc_hash_capacity_for(est);
    z.K = K;
    z.words = j.words;
    for (int attempt = 0;; attempt++) {
        if (z.cap_in == 0 || (!z.dense_bits && z.cap_out == 0) || z.cap_in > INT64_MAX / 64 ||
            z.cap_out > INT64_MAX / 64) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: hash table too large");
            goto fail;
        }
        z.ucap = z.cap_out / 2;
        if (ws1) cudaFreeAsync(ws1, s);
        ws1 = NULL;
        VC_CUDA_TRY(pool_bytes(&ws1, carve(z, true, false, NULL, &b), s), "allocating workspace");
        carve(z, true, false, (char *)ws1, &b);
        EV(0);
        VC_CUDA_TRY(q_prep(z, b, 0, s), "clearing the tables");
        VC_CUDA_TRY(q_insert(j, z, b, s), "inserting the keys");
        // SYNC POINT 1: n_out (sizes the outputs), the checks of the input rows, the flags.
        VC_CUDA_TRY(read_status(b.scr, stat, s), "reading the output count back");
        st = input_error(stat, j.d_in, j.n_in, j.shape, j.batch, err);
        if (st != VC_OK) goto fail;
        n_out = stat[S_N_OUT];
        if (stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_IN) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the input hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            z.cap_in *= 2;
            continue;
        }
        if (!z.dense_bits &&
            ((stat[S_FLAGS] & (VC_KMAP_GPU_F_PROBE_OUT | VC_KMAP_GPU_F_OUT_OVERFLOW)) ||
             n_out > z.cap_out / 2)) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the output hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            int64_t cap = vc_hash_capacity_for(n_out);
            if ((stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_OUT) && cap <= z.cap_out) cap = 2 * z.cap_out;
            z.cap_out = cap;
            continue;
        }
        if (stat[S_FLAGS] != 0) {
            st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: status flags 0x%llx",
                         (unsigned long long)stat[S_FLAGS]);
            goto fail;
        }
        break;
    }
    EV(1);
    if (n_out > VC_MAX_ROWS) {
        st = vc_fail(err, VC_ERR_LIMIT, "kernel map: more than %lld output rows",
                     (long long)VC_MAX_ROWS);
        goto fail;
    }
    if (vc_mul_overflow_i64(n_out, K, &n_entries) ||
        vc_mul_overflow_i64(n_out, j.words, &n_words)) {
        st = vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                     (long long)n_out, (int)K);
        goto fail;
    }
    m->n_out = n_out;
    pair_bound = reach_total < n_entries ? reach_total : n_entries;
    z.nsort = z.dense_bits ? 0 : n_out; // the dense path's outputs come in order
    z.end_bit_out = j.bits_out > 0 ? j.bits_out : 1;
    z.rows = n_out;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    // What the output step needs first; the rest is allocated while the GPU runs it.
    VC_CUDA_TRY(pool_bytes(&ws2, carve(z, false, true, NULL, &b), s), "allocating workspace");
    carve(z, false, true, (char *)ws2, &b);
    {
        // the key sort first: the output arrays are allocated while it runs
        const void *sorted = NULL;
        VC_CUDA_TRY(q_key_sort(z, b, true, s, &sorted), "sorting the output keys");
        VC_CUDA_TRY(vc_device_pool_alloc_n(&m->out_coords, 4 * n_out, s),
                    "allocating output coordinates");
        VC_CUDA_TRY(vc_device_pool_alloc_n(&m->out_in, n_entries, s), "allocating out_in");
        VC_CUDA_TRY(q_rank_scatter(j, z, b, m, n_out, true, sorted, ev ? ev[2] : NULL, s),
           "output coordinates and out_in");
    }
    EV(3);
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->offsets, (int64_t)K + 1, s), "allocating offsets");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->masks, n_words, s), "allocating masks");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->perm, n_out, s), "allocating perm");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->in_rows, pair_bound, s), "allocating in_rows");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m->out_rows, pair_bound, s), "allocating out_rows");
    VC_CUDA_TRY(q_finish(j, b, m, n_out, true, pair_bound, ev ? ev[4] : NULL, s),
                "pairs and masks");
    // SYNC POINT 2: n_pairs and the flags.
    {
        void *rel[2] = {ws1, ws2};
        const cudaError_t e = read_status(b.scr, stat, s, rel, 2);
        ws1 = rel[0];
        ws2 = rel[1];
        VC_CUDA_TRY(e, "reading the counts back");
    }
    EV(5);
    if (stat[S_FLAGS] != 0) {
        st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: an output key collected in step 2 was "
                     "not found in step 3 (status flags 0x%llx)",
                     (unsigned long long)stat[S_FLAGS]);
        goto fail;
    }
    m->n_pairs = stat[S_N_PAIRS];
    return VC_OK;

fail:
    if (ws1) cudaFreeAsync(ws1, s);
    if (ws2) cudaFreeAsync(ws2, s);
    free_map_arrays(m, true);
    return st;
}

// Output-table capacity of a bounded build: at least 8 x max_out slots, at most 1/8 full, near
// the regular build's strided table (sized for 4 x n_in keys). At half full (the capacity of
// max_out keys) the graph replay's strided insert and scatter measured much slower than the
// regular call's: the claims and lookups of keys that several inputs share walk longer probe
// sequences.
int64_t bounded_cap_out(int64_t max_out)
{
    return max_out > INT64_MAX / 8 ? 0 : vc_hash_capacity_for(4 * max_out);
}

vc_status build_impl(const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                     int32_t batch_size, const vc_map_desc *d, const vc_engine_options *opt,
                     cudaStream_t s, vc_kmap_data *out, vc_kmap_gpu_timing *timing, vc_err *err)
{
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL argument");
    Job j;
    vc_status st = setup_job(&j, d_in, n_in, shape, batch_size, d, err);
    if (st != VC_OK) return st;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    cudaEvent_t evs[6] = {0, 0, 0, 0, 0, 0};
    cudaEvent_t *ev = NULL;
    if (timing) {
        memset(timing, 0, sizeof *timing);
        for (int i = 0; i < 6; i++)
            if (cudaEventCreate(&evs[i]) != cudaSuccess) {
                st = vc_cuda_fail(err, cudaGetLastError(), kArea, "creating events");
                for (int k = 0; k < i; k++) cudaEventDestroy(evs[k]);
                return st;
            }
        ev = evs;
    }
    vc_kmap_data m;
    init_header(j, &m);
    st = j.new_out ? newout_regular(j, opt, s, &m, ev, err) : subm_regular(j, s, &m, ev, err);
    if (st == VC_OK && timing) {
        cudaError_t e = cudaEventSynchronize(evs[5]);
        float *f[6] = {&timing->insert_ms, &timing->out_coords_ms, &timing->out_in_ms,
                       &timing->pairs_ms, &timing->masks_ms, &timing->total_ms};
        for (int i = 0; e == cudaSuccess && i < 5; i++)
            e = cudaEventElapsedTime(f[i], evs[i], evs[i + 1]);
        if (e == cudaSuccess) e = cudaEventElapsedTime(f[5], evs[0], evs[5]);
        if (e != cudaSuccess) {
            st = vc_cuda_fail(err, e, kArea, "timing");
            free_map_arrays(&m, true);
        }
    }
    for (int i = 0; i < 6; i++)
        if (evs[i]) cudaEventDestroy(evs[i]);
    if (st == VC_OK) *out = m;
    return st;
}

} // namespace

extern "C" vc_status vc_kmap_build_gpu(const int32_t *d_in_coords, int64_t n_in,
                                       const int32_t shape[3], int32_t batch_size,
                                       const vc_map_desc *d, const vc_engine_options *opt,
                                       struct CUstream_st *stream, vc_kmap_data *out,
                                       vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, opt, (cudaStream_t)stream, out,
                      NULL, err);
}

extern "C" vc_status vc_kmap_build_gpu_timed(const int32_t *d_in_coords, int64_t n_in,
                                             const int32_t shape[3], int32_t batch_size,
                                             const vc_map_desc *d, const vc_engine_options *opt,
                                             struct CUstream_st *stream, vc_kmap_data *out,
                                             vc_kmap_gpu_timing *timing, vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, opt, (cudaStream_t)stream, out,
                      timing, err);
}

extern "C" vc_status vc_kmap_inverse_gpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                                         int32_t fwd_in_batch_size, struct CUstream_st *stream,
                                         vc_kmap_data *out, vc_err *err)
{
    vc_kmap_data m;
    vc_status st = vc_kmap_inverse_header(fwd, fwd_in_shape, fwd_in_batch_size, &m, err);
    if (st != VC_OK) return st;
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: NULL argument");
    const int32_t K = m.volume;
    cudaStream_t s = (cudaStream_t)stream;
    Job j;
    memset(&j, 0, sizeof j);
    j.K = K;
    j.words = m.mask_words;
    const int64_t n = m.n_out, fwd_entries = fwd->n_out * (int64_t)K;
    int64_t n_entries = 0, n_words = 0;
    int64_t stat[S_WORDS];
    Sizes z;
    Bufs b;
    void *ws = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(n, K, &n_entries) || vc_mul_overflow_i64(n, j.words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "inverse map: %lld outputs x %d offsets overflows",
                       (long long)n, (int)K);
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    z.rows = n;
    z.K = K;
    z.words = j.words;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.out_in, n_entries, s), "allocating out_in");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.offsets, (int64_t)K + 1, s), "allocating offsets");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.masks, n_words, s), "allocating masks");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.perm, n, s), "allocating perm");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.in_rows, fwd->n_pairs, s), "allocating in_rows");
    VC_CUDA_TRY(vc_device_pool_alloc_n(&m.out_rows, fwd->n_pairs, s), "allocating out_rows");
    VC_CUDA_TRY(pool_bytes(&ws, carve(z, true, true, NULL, &b), s), "allocating workspace");
    carve(z, true, true, (char *)ws, &b);
    VC_CUDA_TRY(q_prep(z, b, n, s, m.out_in, n_entries), "clearing the status and out_in");
    if (fwd_entries > 0) {
        inverse_kernel<<<grid_for(fwd_entries), kThreads, 0, s>>>(fwd->out_in, fwd_entries, K,
                                                                  fwd->n_in, m.out_in, b.scr);
        VC_CUDA_TRY(cudaGetLastError(), "inverse kernel");
    }
    VC_CUDA_TRY(q_finish(j, b, &m, n, true, fwd->n_pairs, NULL, s), "pairs and masks");
    // SYNC POINT (the only one): n_pairs and the flags.
    VC_CUDA_TRY(read_status(b.scr, stat, s), "reading the counts back");
    if (stat[S_FLAGS] & VC_KMAP_GPU_F_BAD_ENTRY) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: a forward entry is not an input "
                     "row");
        goto fail;
    }
    if (stat[S_FLAGS] & VC_KMAP_GPU_F_CONFLICT) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: an input feeds two outputs at "
                     "the same offset");
        goto fail;
    }
    if (stat[S_FLAGS] != 0) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: malformed forward map (%lld "
                     "pairs, %lld given)", (long long)stat[S_N_PAIRS], (long long)fwd->n_pairs);
        goto fail;
    }
    m.n_pairs = stat[S_N_PAIRS];
    cudaFreeAsync(ws, s);
    *out = m;
    return VC_OK;

fail:
    if (ws) cudaFreeAsync(ws, s);
    free_map_arrays(&m, true);
    return st;
}

extern "C" void vc_kmap_data_free_gpu(vc_kmap_data *m)
{
    if (!m) return;
    free_map_arrays(m, true);
    memset(m, 0, sizeof *m);
}

// ---- tile order (kmap.h) ------------------------------------------------------------------

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
    // The CTA's costs (the barrier) before its ticket (thread 0's fence, cumulative); the last
    // CTA's reads after every ticket (its fence).
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
        if (last) __threadfence();
    }
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

// Frees a map's tile order (a pool block, so the stream is waited on first: no implicit
// synchronisation on free) and clears its fields.
static void drop_tile_order(vc_kmap_data *m, cudaStream_t s)
{
    if (m->tile_order) {
        cudaStreamSynchronize(s);
        cudaFree(m->tile_order);
    }
    cudaGetLastError();
    m->tile_order = NULL;
    m->order_blocks = 0;
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
    if (!m->tile_order || m->order_blocks != blocks) {
        // One block: the order, then the kernel's scratch (the costs, the ticket), kept for a
        // rebuild in place; the ticket starts at 0 and the kernel leaves it at 0.
        drop_tile_order(m, s);
        if (blocks == 0) return VC_OK;
        cudaError_t e = vc_device_pool_alloc_n(&m->tile_order, 2 * blocks + 1, s);
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
        drop_tile_order(m, s);
        return vc_cuda_fail(err, e, kArea, "building the tile order");
    }
    m->order_blocks = blocks;
    return VC_OK;
}

// ---- bounded builds ---------------------------------------------------------------------

namespace {

// Sizes of a bounded build's temporaries (the same at create and at every build).
Sizes bounded_sizes(const Job &j, const vc_kmap_gpu_bounded *b)
{
    Sizes z;
    memset(&z, 0, sizeof z);
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(b->max_in, z.packed_in);
    z.K = j.K;
    z.words = j.words;
    if (j.new_out && b->dense) {
        z.dense_bits = b->dense;
        z.out_bound = b->max_out;
        z.rows = b->max_out;
    } else if (j.new_out) {
        z.packed_out = j.bits_out <= VC_HASH_GPU_PACKED_BITS;
        z.ukey32 = z.packed_out;
        z.key_bits = j.bits_out;
        z.cap_out = bounded_cap_out(b->max_out);
        z.ucap = b->max_out;
        z.nsort = b->max_out;
        z.end_bit_out = j.bits_out + 1; // the all-ones padding sorts after every key
        z.rows = b->max_out;
    } else {
        z.rows = b->max_in;
    }
    z.cub_bytes = b->sort_bytes; // sized at create
    return z;
}

} // namespace

extern "C" vc_status vc_kmap_gpu_bounded_create(const vc_map_desc *d, const int32_t shape[3],
                                                int32_t batch_size, int64_t max_in,
                                                int64_t max_out, int64_t max_pairs,
                                                const vc_engine_options *opt,
                                                vc_kmap_gpu_bounded *b, vc_err *err)
{
    if (!b) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: NULL argument");
    memset(b, 0, sizeof *b);
    Job j;
    vc_status st = setup_job(&j, NULL, 0, shape, batch_size, d, err);
    if (st != VC_OK) return st;
    if (max_in < 0 || max_in > VC_MAX_ROWS || max_out < 1 || max_out > VC_MAX_ROWS ||
        max_pairs < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: bounds max_in %lld, "
                       "max_out %lld, max_pairs %lld (need 0 <= max_in, 1 <= max_out <= %lld, "
                       "1 <= max_pairs)", (long long)max_in, (long long)max_out,
                       (long long)max_pairs, (long long)VC_MAX_ROWS);
    if (!j.new_out && max_out < max_in)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: a SUBM map has as many "
                       "outputs as inputs: max_out %lld < max_in %lld", (long long)max_out,
                       (long long)max_in);
    int64_t n_entries = 0, n_words = 0;
    if (vc_mul_overflow_i64(max_out, j.K, &n_entries) ||
        vc_mul_overflow_i64(max_out, j.words, &n_words) || max_pairs > INT64_MAX / 8)
        return vc_fail(err, VC_ERR_LIMIT, "bounded kernel map: bounds overflow");
    vc_kmap_gpu_bounded t;
    memset(&t, 0, sizeof t);
    t.desc = *d;
    for (int a = 0; a < 3; a++) t.in_shape[a] = shape[a];
    t.batch_size = batch_size;
    t.max_in = max_in;
    t.max_out = max_out;
    t.max_pairs = max_pairs;
    init_header(j, &t.map);
    t.opt = opt ? *opt : vc_engine_options_default();
    t.dense = dense_bits_for(j, &t.opt);
    Sizes z = bounded_sizes(j, &t);
    Bufs bf;
    memset(&bf, 0, sizeof bf);
    cudaGetLastError();
    cudaError_t e = cub_bytes_for(&z);
    t.sort_bytes = z.cub_bytes;
    if (e == cudaSuccess && j.new_out) e = dev_alloc_n(&t.map.out_coords, 4 * max_out);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.out_in, n_entries);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.offsets, (int64_t)j.K + 1);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.in_rows, max_pairs);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.out_rows, max_pairs);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.masks, n_words);
    if (e == cudaSuccess) e = dev_alloc_n(&t.map.perm, max_out);
    if (e == cudaSuccess) {
        t.workspace_bytes = carve(z, true, true, NULL, &bf);
        e = cudaMalloc(&t.workspace, t.workspace_bytes);
        if (e != cudaSuccess) t.workspace = NULL;
    }
    if (e == cudaSuccess) {
        carve(z, true, true, (char *)t.workspace, &bf);
        t.d_status = bf.scr;
        // Clear the status so that a check before any build reports nothing stale.
        e = cudaMemset(t.d_status, 0, S_WORDS * sizeof(int64_t));
    }
    if (e != cudaSuccess) {
        st = vc_cuda_fail(err, e, kArea, "allocating the bounded map");
        free_map_arrays(&t.map, false);
        if (t.workspace) cudaFree(t.workspace);
        return st;
    }
    t.map.n_in = 0;
    t.map.n_out = 0;
    t.map.n_pairs = 0;
    *b = t;
    return VC_OK;
}

extern "C" vc_status vc_kmap_build_gpu_bounded(vc_kmap_gpu_bounded *b, const int32_t *d_in,
                                               int64_t n_in, struct CUstream_st *stream,
                                               vc_err *err)
{
    if (!b || !b->workspace)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: not created");
    if (n_in > b->max_in)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld input rows exceed max_in "
                       "%lld", (long long)n_in, (long long)b->max_in);
    Job j;
    vc_status st = setup_job(&j, d_in, n_in, b->in_shape, b->batch_size, &b->desc, err);
    if (st != VC_OK) return st;
    cudaStream_t s = (cudaStream_t)stream;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    vc_kmap_data *m = &b->map;
    Sizes z = bounded_sizes(j, b);
    Bufs bf;
    memset(&bf, 0, sizeof bf);
    carve(z, true, true, (char *)b->workspace, &bf);
    cudaError_t e = j.new_out ? q_prep(z, bf, 0, s)
                              : q_prep(z, bf, n_in, s, m->out_in, n_in * (int64_t)j.K);
    if (e == cudaSuccess) e = q_insert(j, z, bf, s);
    if (!j.new_out) {
        if (e == cudaSuccess) e = q_subm_lookup(j, z, bf, m->out_in, s);
        if (e == cudaSuccess) e = q_finish(j, bf, m, n_in, true, b->max_pairs, NULL, s);
    } else {
        const void *sorted = NULL; // none on the dense path
        if (e == cudaSuccess) e = q_key_sort(z, bf, false, s, &sorted);
        if (e == cudaSuccess)
            e = q_rank_scatter(j, z, bf, m, b->max_out, false, sorted, NULL, s);
        if (e == cudaSuccess) e = q_finish(j, bf, m, b->max_out, false, b->max_pairs, NULL, s);
    }
    if (e != cudaSuccess) return vc_cuda_fail(err, e, kArea, "queueing the bounded build");
    b->last_in = d_in;
    b->last_n_in = n_in;
    return VC_OK;
}

extern "C" vc_status vc_kmap_gpu_bounded_check(vc_kmap_gpu_bounded *b, struct CUstream_st *stream,
                                               vc_err *err)
{
    if (!b || !b->workspace)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: not created");
    int64_t stat[S_WORDS];
    // THE synchronisation point of the bounded variant.
    cudaError_t e = read_status(b->d_status, stat, (cudaStream_t)stream);
    if (e != cudaSuccess) return vc_cuda_fail(err, e, kArea, "reading the bounded map's status");
    b->map.n_in = b->last_n_in;
    b->map.n_out = stat[S_N_OUT];
    b->map.n_pairs = stat[S_N_PAIRS];
    vc_status st = input_error(stat, b->last_in, b->last_n_in, b->in_shape, b->batch_size, err);
    if (st != VC_OK) return st;
    const int64_t f = stat[S_FLAGS];
    if (f & VC_KMAP_GPU_F_OUT_OVERFLOW)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld output rows exceed max_out "
                       "%lld", (long long)stat[S_N_OUT], (long long)b->max_out);
    if (f & (VC_KMAP_GPU_F_PROBE_IN | VC_KMAP_GPU_F_PROBE_OUT))
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: a hash table overflowed its "
                       "probe bound (flags 0x%llx)", (unsigned long long)f);
    if (f & VC_KMAP_GPU_F_PAIR_OVERFLOW)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld pairs exceed max_pairs "
                       "%lld", (long long)stat[S_N_PAIRS], (long long)b->max_pairs);
    if (f != 0)
        return vc_fail(err, VC_ERR_INTERNAL, "bounded kernel map: status flags 0x%llx",
                       (unsigned long long)f);
    return VC_OK;
}

extern "C" void vc_kmap_gpu_bounded_destroy(vc_kmap_gpu_bounded *b)
{
    if (!b) return;
    if (b->workspace || b->map.out_in) cudaDeviceSynchronize();
    free_map_arrays(&b->map, false);
    if (b->workspace) cudaFree(b->workspace);
    cudaGetLastError();
    memset(b, 0, sizeof *b);
}

extern "C" int vc_kmap_gpu_debug_targets(const vc_map_desc *d, const int32_t shape[3],
                                         int32_t batch_size, const int32_t row[4], int32_t *k,
                                         int32_t (*out)[4], int cap, vc_err *err)
{
    if (!row || cap < 0 || (cap > 0 && (!k || !out))) {
        vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map targets: NULL or negative argument");
        return -1;
    }
    Job j;
    if (setup_job(&j, NULL, 0, shape, batch_size, d, err) != VC_OK) return -1;
    if (!j.new_out) {
        vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map targets: a SUBM map has no targets");
        return -1;
    }
    uint64_t key;
    uint32_t list[3];
    const uint32_t n = row_pairs(j.g, j.kout, true, make_int4(row[0], row[1], row[2], row[3]),
                                 &key, list);
    for (uint32_t i = 0; i < n && (int64_t)i < cap; i++)
        vc_key_unpack(&j.kout, pair_of(j.g, key, list, i, &k[i]), out[i]);
    return (int)n;
}


