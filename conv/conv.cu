// conv/conv.cu - sparse convolution on the GPU: the dispatcher behind vc_conv_gpu.
// Both algorithms run on the one GEMM family of gemm/gemm.h; the CPU twin is vc_conv_cpu.
//
//  - IMPLICIT GEMM (implicit_gemm): one GEMM over all n_out outputs (vc_gemm_plan, then
//    vc_gemm_run), output-stationary, its tiles from conv/tiles.h: the GEMM gathers
//    the K taps of each output through out_in in its main loop, walks the outputs in mask order
//    (perm, which the map sorted by neighbour mask) so a CTA skips the taps none of its rows
//    has, and applies the epilogue (bias, residual, activation, output dtype) before it writes
//    each output row. No atomics. A SUBM 1x1x1 map is the identity, so that layer runs as a
//    dense GEMM (no gather, masks or row order).
//    TAP SPLIT (conv/tiles.h: tap_splits): a layer with too few tiles to fill the device (the coarse levels)
//    runs each tile's taps on several CTAs that write fp32 partial sums into stream-ordered
//    scratch; gemm/ adds them in group order and applies the epilogue in a second kernel - or,
//    on sm_90 with the small 16-bit tiles, runs a tile's CTAs as one thread-block cluster that
//    adds the same sums in the same order through distributed shared memory (one launch, the
//    scratch unused). Deterministic for a given device (the group count follows its SM count
//    and occupancy).
//  - GATHER-GEMM-SCATTER (GGS): an fp32 accumulator [n_out, c_out] set to zero, one GEMM per
//    offset k with pairs (gather in_rows, scatter-add into out_rows; the rows of one offset are
//    distinct, and the launches are ordered on one stream, so no atomics), then an epilogue
//    kernel. Every output element sums its offsets in k order, as the CPU twin does.
//    SYNC POINT: the launch sizes are the per-offset pair counts, which live on the device
//    (map->offsets); GGS copies the K+1 offsets to the host and waits for the stream once per
//    call. It is the only host synchronisation in this file; implicit GEMM has none.
//  - GROUPED GGS (ggs_grouped): the pairs of all offsets in ONE GEMM launch. Each offset's pairs
//    are a segment of the GEMM's rows padded to 256 (a tile never mixes offsets: the GEMM
//    computes the taps its rows' one-bit masks name, through out_in); each pair's product goes
//    to its own fp32 row in output-major order (row rowptr[p] + rank of k among p's taps), and
//    one reduction sums each output's rows in offset order and applies the epilogue: the same
//    sums in the same order as GGS, no atomics, no host synchronisation (sizes from the host's
//    n_pairs), pairs x c_out x 4 bytes of scratch.
//
// Weights in a dtype other than the features' are converted on the device into stream-ordered
// scratch (the GEMM takes A and W in one dtype), and 16-bit features whose c_in is not a multiple
// of 8 are widened with zero columns (with their weights, in the same launch) so the GEMM runs
// 16-byte loads (gemm_operands). Scratch comes from the options' allocator (core/alloc.h; by
// default the library's stream-ordered pool), is freed stream ordered on the caller's stream,
// and is released on every path. The engine options (core/options.h) pick among kernels, never
// the algorithm.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <cub/device/device_scan.cuh>

#include "conv/conv_gpu.h"
#include "conv/tiles.h"
#include "conv/tune.h"
#include "core/cuda_check.cuh"
#include "core/cuda_util.cuh"
#include "core/device_pool.h"
#include "core/launch.cuh"
#include "core/options.h"
#include "gemm/gemm.h"
#include "kmap/kmap_gpu.h"

static_assert(VC_KMAP_ORDER_ROWS == VC_GEMM_ORDER_ROWS, "the map's tile order is the GEMM's");

namespace {

const char kArea[] = "conv"; // messages of VC_CUDA_TRY (core/cuda_check.cuh)

// Weight conversion to the feature dtype (round to nearest even, as vc_store_f32). Like
// pad_kernel, it lets the GEMM after it launch at once (pdl_enter: the GEMM sets up its tiles
// meanwhile and waits for it before it reads the operands; vc_gemm_args.overlap_prev).
__global__ void cast_kernel(const void *src, int st, void *dst, int dt, int64_t n)
{
    pdl_enter();
    GRID_LOOP(i, n) store_f32(dst, dt, i, load_f32(src, st, i));
}

// Rows of c columns copied into rows of cp >= c columns (cp a multiple of 8) of 16-bit dtype dt,
// zero-padded, 8 columns (one 16-byte store) a thread: the features (rows_a rows of dtype at)
// and the weights (rows_b rows of dtype bt) of a layer whose c_in is not a multiple of 8, in
// ONE launch, so that the GEMM runs its 16-byte loads instead of its 2-byte scalar path (zero
// columns add nothing). Values are converted as store_f32(load_f32(...)) would. Launched
// plainly, it lets the GEMM after it launch at once (pdl_enter), which sets up its tiles
// meanwhile and waits for it before it reads the operands (vc_gemm_args.overlap_prev).
__global__ void pad_kernel(const void *a, int at, int64_t rows_a, void *da, const void *b, int bt,
                           int64_t rows_b, void *db, int64_t c, int dt, int64_t cp)
{
    pdl_enter();
    const int64_t chunks = cp / 8;
    GRID_LOOP(i, (rows_a + rows_b) * chunks)
    {
        int64_t r = i / chunks;
        const int64_t j0 = (i - r * chunks) * 8;
        const void *src = a;
        int st = at;
        void *dst = da;
        if (r >= rows_a) {
            r -= rows_a;
            src = b;
            st = bt;
            dst = db;
        }
        uint4 o;
        unsigned short *e = reinterpret_cast<unsigned short *>(&o);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float v = j0 + u < c ? load_f32(src, st, r * c + j0 + u) : 0.0f;
            e[u] = dt == VC_DTYPE_FP16 ? __half_as_ushort(__float2half_rn(v))
                                       : __bfloat16_as_ushort(__float2bfloat16_rn(v));
        }
        reinterpret_cast<uint4 *>(dst)[r * chunks + j0 / 8] = o;
    }
}

// The epilogue of an algorithm that sums into fp32 first, for element i = p * c_out + co.
struct Epi {
    int64_t c_out;
    const float *bias;
    const void *res;
    int res_dtype, act;
    float slope;
    void *out;
    int out_dtype;
};

// out[p, co] = act(v + bias[co] + residual[p, co]) as out dtype. Same order of operations as
// vc_conv_cpu's epilogue.
__device__ __forceinline__ void epi_store(const Epi &e, int64_t i, float v)
{
    if (e.bias) v += e.bias[i % e.c_out];
    if (e.res) v += load_f32(e.res, e.res_dtype, i);
    if (e.act == VC_ACT_RELU) v = v < 0.0f ? 0.0f : v;
    else if (e.act == VC_ACT_LEAKY_RELU) v = v < 0.0f ? v * e.slope : v;
    store_f32(e.out, e.out_dtype, i, v);
}

// v = acc[p, co]; acc NULL reads zeros (a map without pairs).
__global__ void epilogue_kernel(const float *acc, int64_t total, Epi e)
{
    GRID_LOOP(i, total) epi_store(e, i, acc ? acc[i] : 0.0f);
}

// ---- grouped gather-GEMM-scatter ------------------------------------------------------------
// Pair j of output p, in p's offset order, is row rowptr[p] + j of the partial products (the
// "output-major" order). One GEMM launch computes every pair's product into its row; one
// reduction sums each output's rows in offset order and applies the epilogue.

// Offset segments of the GEMM's logical rows start at multiples of kGgsPad, so that no tile of
// BM | kGgsPad rows mixes two offsets (a tile computes the taps its rows' masks have).
const int64_t kGgsPad = 256;

// cnt[p] = pairs of output p (bits of its mask), cnt[n_out] = 0: rowptr by an exclusive scan.
__global__ void ggs_count_kernel(const uint32_t *masks, int32_t words, int64_t n_out,
                                 int32_t *cnt)
{
    GRID_LOOP(p, n_out + 1)
    {
        int32_t c = 0;
        if (p < n_out)
            for (int32_t w = 0; w < words; w++) c += __popc(masks[p * words + w]);
        cnt[p] = c;
    }
}

// For pair q (offset k, output p = out_rows[q]): its logical row i = pstart[k] + q - offsets[k]
// reads gather row p (the GEMM gathers out_in[p, k]) and writes partial row d = rowptr[p] +
// (bits of p's mask below k); the row mask of d holds k alone. pstart[k] = sum over k' < k of
// the offset's pairs rounded up to kGgsPad. Rows between segments keep the -1 of a memset.
__global__ void ggs_index_kernel(const int64_t *offsets, int32_t K, int64_t n_pairs,
                                 const int32_t *out_rows, const uint32_t *masks, int32_t words,
                                 const int32_t *rowptr, int32_t *gather_rows, int32_t *row_map,
                                 uint32_t *row_mask)
{
    __shared__ long long soff[344], sstart[344];
    for (int k = threadIdx.x; k <= K; k += blockDim.x) soff[k] = offsets[k];
    __syncthreads();
    if (threadIdx.x == 0) {
        long long run = 0;
        for (int k = 0; k < K; k++) {
            sstart[k] = run;
            run += (soff[k + 1] - soff[k] + kGgsPad - 1) / kGgsPad * kGgsPad;
        }
    }
    __syncthreads();
    GRID_LOOP(q, n_pairs)
    {
        int lo = 0, hi = K - 1; // the offset k with soff[k] <= q < soff[k + 1]
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (soff[mid] <= q) lo = mid;
            else hi = mid - 1;
        }
        const int k = lo;
        const int32_t p = out_rows[q];
        const uint32_t *mr = masks + (int64_t)p * words;
        int32_t below = 0;
        for (int w = 0; w < (k >> 5); w++) below += __popc(mr[w]);
        below += __popc(mr[k >> 5] & ((1u << (k & 31)) - 1u));
        const int64_t d = (int64_t)rowptr[p] + below;
        const int64_t i = sstart[k] + (q - soff[k]);
        gather_rows[i] = p;
        row_map[i] = (int32_t)d;
        for (int w = 0; w < words; w++) row_mask[d * words + w] = w == (k >> 5) ? 1u << (k & 31) : 0u;
    }
}

// Output p: the sum of its partial rows rowptr[p] .. rowptr[p + 1] - 1 in that (offset) order,
// then the epilogue.
__global__ void ggs_reduce_kernel(const float *part, const int32_t *rowptr, int64_t total, Epi e)
{
    GRID_LOOP(i, total)
    {
        const int64_t p = i / e.c_out, co = i - p * e.c_out;
        float v = 0.0f;
        for (int64_t j = rowptr[p], end = rowptr[p + 1]; j < end; j++) v += part[j * e.c_out + co];
        epi_store(e, i, v);
    }
}

// ---- host helpers ------------------------------------------------------------------------

// A failure of gemm/ (status st, its message in ge) as conv's status and message.
vc_status gemm_fail(vc_err *err, vc_status st, const vc_err &ge, const char *what)
{
    if (st == VC_ERR_CUDA) {
        cudaGetLastError();
        return vc_fail(err, VC_ERR_CUDA, "conv: %s: GEMM launch failed: %.255s", what, ge.msg);
    }
    if (st == VC_ERR_UNSUPPORTED)
        return vc_fail(err, VC_ERR_UNSUPPORTED, "conv: %s: no compiled GEMM fits: %.255s", what,
                       ge.msg);
    return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: %s: GEMM rejected its arguments: %.255s",
                   what, ge.msg);
}

// Plans and launches one GEMM with gemm/'s choice of configuration.
vc_status gemm_once(const vc_gemm_args *g, cudaStream_t s, const char *what, vc_err *err)
{
    vc_gemm_launch_plan plan;
    vc_err ge;
    ge.msg[0] = 0;
    vc_status st = vc_gemm_plan(g, -1, &plan, &ge);
    if (st == VC_OK) st = vc_gemm_run(&plan, s, &ge);
    return st == VC_OK ? VC_OK : gemm_fail(err, st, ge, what);
}

size_t dtype_bytes(vc_dtype t) { return t == VC_DTYPE_FP32 ? 4 : 2; }

// Stream-ordered scratch through the context's allocator (core/alloc.h; NULL: the pool).
cudaError_t scratch(const vc_allocator *al, void **p, int64_t bytes, cudaStream_t s)
{
    return (cudaError_t)vc_dev_alloc(al, p, (size_t)bytes, s);
}

vc_gemm_act gemm_act(vc_activation a)
{
    return a == VC_ACT_RELU ? VC_GEMM_ACT_RELU
                            : a == VC_ACT_LEAKY_RELU ? VC_GEMM_ACT_LEAKY : VC_GEMM_ACT_NONE;
}

// Host-side checks (the map's arrays are on the device and are trusted, as built by
// vc_kmap_build_gpu / vc_kmap_inverse_gpu); mirrors vc_conv_cpu's check_args.
vc_status check_args(const vc_conv_args *a, vc_algo algo, vc_err *err)
{
    if (!a || !a->map)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: NULL arguments or kernel map");
    const vc_kmap_data *m = a->map;
    if (m->volume < 1 || m->volume > VC_KMAP_MAX_VOLUME || m->n_in < 0 || m->n_out < 0 ||
        m->n_pairs < 0 || m->n_in > VC_MAX_ROWS || m->n_out > VC_MAX_ROWS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "conv: bad kernel map (volume %d, n_in %lld, n_out %lld, pairs %lld)",
                       (int)m->volume, (long long)m->n_in, (long long)m->n_out,
                       (long long)m->n_pairs);
    if (algo != VC_ALGO_AUTO && algo != VC_ALGO_IMPLICIT_GEMM &&
        algo != VC_ALGO_GATHER_GEMM_SCATTER && algo != VC_ALGO_GATHER_GEMM_SCATTER_GROUPED)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: unknown algorithm %d", (int)algo);
    vc_status st = vc_conv_check_operands(a, err);
    if (st != VC_OK) return st;
    if (m->n_out > 0 && m->n_pairs > 0) {
        if (!m->out_in || !m->perm || !m->masks || m->mask_words != (m->volume + 31) / 32)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "conv: kernel map lacks out_in, masks or perm (mask words %d)",
                           (int)m->mask_words);
        if (!m->offsets || !m->in_rows || !m->out_rows)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: kernel map has no pair lists");
    }
    return VC_OK;
}

// The GEMM arguments both algorithms share.
vc_gemm_args base_args(const vc_conv_args *a, const void *w, int tf32, const vc_engine_options &o)
{
    vc_gemm_args g;
    memset(&g, 0, sizeof g);
    const vc_kmap_data *m = a->map;
    g.n_cols = (int32_t)a->c_out;
    g.k = (int32_t)a->c_in;
    g.a = a->in;
    g.a_rows = m->n_in;
    g.w = w;
    g.b_taps = m->volume;
    g.ab_dtype = (vc_gemm_dtype)a->in_dtype;
    g.math = a->in_dtype != VC_DTYPE_FP32 ? VC_GEMM_MATH_DEFAULT
                                          : tf32 ? VC_GEMM_MATH_TF32 : VC_GEMM_MATH_FP32;
    g.force_order = o.force_order;
    g.two_pass_split = !o.cluster_split;
    return g;
}

// The tile order of an implicit GEMM whose rows are in perm's order (kmap.h), into the plan:
// the map's own, or - where the plan would take one (takes_order: more than 1.25 waves of
// tiles) and the caller lets the map be written (map_cache) - one built now and kept in the map
// for the later layers on it. Built only where it is used: it costs a few microseconds of GPU
// time, and the layers it served ran faster (docs/journal/benchmarks-history.md, "Tile order:
// the implicit GEMM takes its costliest tiles first"). Not built while
// the stream is being captured: its allocation would then belong to the graph, and the map
// outlives it.
// A bounded view (order_stale not NULL: vc_conv_gpu_bounded) rebuilds its order in place on the
// frame's first layer that takes one (*order_stale set), since perm changed with the frame; its
// extent, and so its block count, is fixed, so after the first build (outside capture) the
// rebuild neither allocates nor waits. *queued is set where a build was queued on s.
vc_status tile_order_for(const vc_conv_args *a, vc_gemm_launch_plan *plan,
                         bool rows_in_perm, const vc_engine_options &o, int *order_stale,
                         bool *queued, cudaStream_t s, vc_err *err)
{
    const vc_kmap_data *m = a->map;
    plan->args.tile_order = NULL;
    plan->args.order_blocks = 0;
    if (!rows_in_perm || !o.tile_order) return VC_OK;
    if (order_stale) {
        if (!plan->takes_order || a->map_cache != m) return VC_OK;
        if (*order_stale || !m->tile_order) {
            *queued = true;
            const vc_status st = vc_kmap_tile_order_gpu(a->map_cache, s, err);
            if (st != VC_OK) return st;
            *order_stale = 0;
        }
    } else if (!m->tile_order) {
        cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
        if (a->map_cache != m || cudaStreamIsCapturing(s, &cap) != cudaSuccess ||
            cap != cudaStreamCaptureStatusNone || !plan->takes_order) {
            cudaGetLastError();
            return VC_OK;
        }
        *queued = true;
        const vc_status st = vc_kmap_tile_order_gpu(a->map_cache, s, err);
        if (st != VC_OK) return st;
    }
    plan->args.tile_order = m->tile_order;
    plan->args.order_blocks = m->order_blocks;
    return VC_OK;
}

// Grouped GGS (a: the GEMM's view of the layer, features possibly widened; w its weights):
// rowptr by a count and a scan, the GEMM's index arrays, ONE GEMM over every pair of every
// offset (taps = K through out_in, each tile's mask one offset), ONE reduction with the
// epilogue. The sizes are host-known (n_pairs, n_out): no synchronisation.
vc_status ggs_grouped(const vc_conv_args *a, const void *w, int tf32, const Epi &epi,
                      const vc_engine_options &o, cudaStream_t s, vc_err *err)
{
    const vc_kmap_data *m = a->map;
    const int64_t n_out = m->n_out, P = m->n_pairs, c_out = a->c_out;
    const int32_t K = m->volume, words = m->mask_words;
    const int64_t rows = P + (int64_t)K * kGgsPad; // the GEMM's logical rows, a bound
    vc_status st = VC_OK;
    void *idx = NULL, *cub_tmp = NULL;
    float *part = NULL;
    size_t cub_bytes = 0;
    int32_t *cnt, *rowptr, *gather_rows, *row_map;
    uint32_t *row_mask;
    int64_t idx_words;
    const vc_gemm_config *t = NULL;
    const int32_t n_cfg = vc_gemm_configs(&t);
    for (int32_t c = 0; c < n_cfg; c++)
        if (kGgsPad % t[c].tile_m != 0)
            return vc_fail(err, VC_ERR_INTERNAL, "conv: grouped GGS: tile %s does not divide "
                           "the %lld-row offset segments", t[c].name, (long long)kGgsPad);
    if (rows > INT32_MAX)
        return vc_fail(err, VC_ERR_UNSUPPORTED, "conv: grouped GGS: %lld pairs are too many for "
                       "its 32-bit row indices; use the implicit GEMM", (long long)P);
    {
        // [n_out + 1] counts, [n_out + 1] rowptr, [rows] gather rows, [rows] row map, [P, words]
        // row masks; 4-byte words, each array 256-byte aligned.
        const int64_t al = 64;
        const int64_t n1 = (n_out + 1 + al - 1) / al * al, nr = (rows + al - 1) / al * al;
        idx_words = 2 * n1 + 2 * nr + P * words;
        VC_CUDA_TRY(scratch(o.allocator, &idx, idx_words * 4, s),
                    "allocating grouped GGS indices");
        cnt = (int32_t *)idx;
        rowptr = cnt + n1;
        gather_rows = rowptr + n1;
        row_map = gather_rows + nr;
        row_mask = (uint32_t *)(row_map + nr);
    }
    VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, cub_bytes, cnt, rowptr, n_out + 1, s),
                "sizing the rowptr scan");
    VC_CUDA_TRY(scratch(o.allocator, &cub_tmp, (int64_t)cub_bytes, s),
                "allocating the rowptr scan");
    VC_CUDA_TRY(scratch(o.allocator, (void **)&part, P * c_out * (int64_t)sizeof(float), s),
                "allocating grouped GGS partial products");
    ggs_count_kernel<<<grid_for(n_out + 1), kThreads, 0, s>>>(m->masks, words, n_out, cnt);
    VC_CUDA_TRY(cudaGetLastError(), "grouped GGS count kernel");
    VC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub_tmp, cub_bytes, cnt, rowptr, n_out + 1, s),
                "the rowptr scan");
    VC_CUDA_TRY(cudaMemsetAsync(gather_rows, 0xff,
                                (size_t)(row_mask - (uint32_t *)gather_rows) * 4, s),
                "clearing grouped GGS rows");
    ggs_index_kernel<<<grid_for(P), kThreads, 0, s>>>(m->offsets, K, P, m->out_rows, m->masks,
                                                      words, rowptr, gather_rows, row_map,
                                                      row_mask);
    VC_CUDA_TRY(cudaGetLastError(), "grouped GGS index kernel");
    {
        vc_gemm_args g = base_args(a, w, tf32, o);
        g.m = rows;
        g.taps = K;
        g.gather = m->out_in;
        g.gather_rows = gather_rows;
        g.row_map = row_map;
        g.masks = row_mask;
        g.mask_words = words;
        g.c = part;
        g.c_dtype = VC_GEMM_F32;
        g.residual_dtype = VC_GEMM_F32;
        g.act = VC_GEMM_ACT_NONE;
        st = gemm_once(&g, s, "grouped gather-GEMM-scatter", err);
        if (st != VC_OK) goto fail;
    }
    ggs_reduce_kernel<<<grid_for(n_out * c_out), kThreads, 0, s>>>(part, rowptr, n_out * c_out,
                                                                    epi);
    VC_CUDA_TRY(cudaGetLastError(), "grouped GGS reduction kernel");
fail:
    vc_dev_free(o.allocator, idx, s);
    vc_dev_free(o.allocator, cub_tmp, s);
    vc_dev_free(o.allocator, part, s);
    return st;
}

// Per-offset GGS (a, w as for ggs_grouped): the fp32 accumulator, one GEMM per offset that has
// pairs, the epilogue. SYNC POINT (documented in conv_gpu.h): the per-offset pair counts.
vc_status ggs_per_offset(const vc_conv_args *a, const void *w, int tf32, const Epi &epi,
                         const vc_engine_options &o, cudaStream_t s, vc_err *err)
{
    const vc_kmap_data *m = a->map;
    const int64_t n_out = m->n_out, c_out = a->c_out;
    const int32_t K = m->volume;
    vc_status st = VC_OK;
    float *acc = NULL;
    int64_t off[344];
    VC_CUDA_TRY(cudaMemcpyAsync(off, m->offsets, ((size_t)K + 1) * sizeof(int64_t),
                                cudaMemcpyDeviceToHost, s), "reading the pair offsets");
    VC_CUDA_TRY(cudaStreamSynchronize(s), "reading the pair offsets");
    if (off[0] != 0 || off[K] != m->n_pairs) {
        st = vc_fail(err, VC_ERR_INTERNAL, "conv: kernel map pair offsets are inconsistent "
                     "(offsets[0] %lld, offsets[K] %lld, n_pairs %lld)", (long long)off[0],
                     (long long)off[K], (long long)m->n_pairs);
        goto fail;
    }
    for (int32_t k = 0; k < K; k++)
        if (off[k + 1] < off[k]) {
            st = vc_fail(err, VC_ERR_INTERNAL, "conv: kernel map offsets decrease at %d", (int)k);
            goto fail;
        }
    VC_CUDA_TRY(scratch(o.allocator, (void **)&acc, n_out * c_out * (int64_t)sizeof(float), s),
                "allocating the fp32 accumulator");
    VC_CUDA_TRY(cudaMemsetAsync(acc, 0, (size_t)(n_out * c_out) * sizeof(float), s),
                "zeroing the accumulator");
    for (int32_t k = 0; k < K; k++) {
        const int64_t np = off[k + 1] - off[k];
        if (np == 0) continue;
        vc_gemm_args g = base_args(a, w, tf32, o);
        g.m = np;
        g.taps = 1;
        g.gather = m->in_rows + off[k];
        g.gather_rows = NULL;
        g.row_map = m->out_rows + off[k];
        g.masks = NULL;
        g.mask_words = 0;
        g.b_tap0 = k;
        g.c = acc;
        g.c_dtype = VC_GEMM_F32;
        g.accumulate = 1;
        g.act = VC_GEMM_ACT_NONE;
        g.residual_dtype = VC_GEMM_F32;
        st = gemm_once(&g, s, "gather-GEMM-scatter", err);
        if (st != VC_OK) goto fail;
    }
    epilogue_kernel<<<grid_for(n_out * c_out), kThreads, 0, s>>>(acc, n_out * c_out, epi);
    VC_CUDA_TRY(cudaGetLastError(), "epilogue kernel");
fail:
    vc_dev_free(o.allocator, acc, s);
    return st;
}

// A bucket's tuned choice for layer a (conv/tune.h), where the options leave the configuration
// and the tap split to the planner and the context has a tune table; else NULL.
const vc_tune_entry *tuned_choice(const vc_conv_args *a, int tf32, const vc_engine_options &o)
{
    vc_tune_key k;
    if (!o.tune || o.gemm_config >= 0 || o.tap_split != 0 ||
        vc_tune_key_of(a->map, a->c_in, a->c_out, a->in_dtype, tf32, &k) != 0)
        return NULL;
    const vc_tune_entry *e = vc_tune_find(o.tune, &k);
    return e && e->config >= 0 ? e : NULL;
}

// One configuration to try: its index (-1: gemm/'s pick), its tap split (gemm.h's splits),
// whether it came from the tune table, and the tuned entry's schedule: no tile order, the split
// in two passes.
struct Candidate {
    int32_t cfg, splits;
    bool tuned, no_order, two_pass;
};

// The implicit GEMM's configurations for a layer, best first, into c (at most 5; returns the
// count): a forced one (options) alone; else a tuned bucket's choice, then the planner's
// (implicit_configs, then wave_first for a map whose CTAs walk few taps, each with the tap split
// of tap_splits) up to the first of gemm/'s pick.
int implicit_candidates(const vc_conv_args *a, const vc_conv_args &pa, bool dense, int tf32,
                        const vc_engine_options &o, Candidate c[5])
{
    const vc_kmap_data *m = a->map;
    if (o.gemm_config >= 0) {
        c[0] = {o.gemm_config, conv_tiles::tap_splits(m, pa.c_in, o.gemm_config, pa.in_dtype, o),
                false, false, false};
        return 1;
    }
    int n = 0;
    if (const vc_tune_entry *te = tuned_choice(a, tf32, o))
        c[n++] = {te->config, te->split > 1 ? te->split : 0, true, te->no_order != 0,
                  te->two_pass != 0};
    int32_t cfgs[4];
    conv_tiles::implicit_configs(m->type, m->n_out, m->n_pairs, a->c_in, a->c_out, m->volume,
                                 dense, pa.in_dtype, cfgs);
    conv_tiles::wave_first(m, pa.c_in, a->c_out, dense, pa.in_dtype, o, cfgs);
    for (int j = 0; j < 4; j++) {
        c[n++] = {cfgs[j], conv_tiles::tap_splits(m, pa.c_in, cfgs[j], pa.in_dtype, o), false,
                  false, false};
        if (cfgs[j] < 0) break;
    }
    return n;
}

// The implicit GEMM of a layer (pa: the GEMM's view of a, features possibly widened; w its
// weights): the candidates of implicit_candidates in turn until one fits; the workspace of the
// split it plans and the tile order it takes; one launch. What ran goes to o.choice. plan_map
// (NULL: a's map): the counts the candidates and the schedule are planned on; d_live (device,
// or NULL): the live output rows of a bounded view, past which tiles are skipped. after_ops:
// the last launch on s is gemm_operands' kernel, so the GEMM may overlap it (overlap_prev)
// unless a tile order is built in between.
vc_status implicit_gemm(const vc_conv_args *a, const vc_conv_args &pa, const void *w, int tf32,
                        const vc_engine_options &o, const vc_kmap_data *plan_map,
                        const int64_t *d_live, int *order_stale, bool after_ops, cudaStream_t s,
                        vc_err *err)
{
    const vc_kmap_data *m = a->map;
    const int64_t n_out = m->n_out, c_out = a->c_out;
    const int32_t K = m->volume;
    vc_gemm_args g = base_args(&pa, w, tf32, o);
    g.m = n_out;
    g.taps = K;
    g.gather = m->out_in;
    g.gather_rows = g.row_map = m->perm;
    g.masks = m->masks;
    g.mask_words = m->mask_words;
    g.c = a->out;
    g.c_dtype = (vc_gemm_dtype)a->out_dtype;
    g.bias = a->bias;
    g.residual = a->residual;
    g.residual_dtype = (vc_gemm_dtype)(a->residual ? a->res_dtype : VC_DTYPE_FP32);
    g.act = gemm_act(a->act);
    g.slope = a->slope;
    g.m_live = d_live;
    g.m_plan = plan_map ? plan_map->n_out : 0;
    // A SUBM 1x1x1 map (a shortcut) is the identity: out_in[p] = p, every output has its one
    // tap, perm is 0..n-1. The layer is then a dense GEMM - no gather, no masks, no row order -
    // which skips the tile set-up's dependent loads (rows, masks, indices) and lets a CTA
    // prefetch its next tile.
    const bool dense = m->type == VC_MAP_SUBM && K == 1 && m->n_in == n_out;
    if (dense) {
        g.gather = g.gather_rows = g.row_map = NULL;
        g.masks = NULL;
        g.mask_words = 0;
    }
    Candidate c[5];
    vc_conv_args ap = *a; // the candidates are planned on plan_map's counts
    ap.map = plan_map ? plan_map : m;
    const int nc = implicit_candidates(&ap, pa, dense, tf32, o, c);
    vc_status st = VC_OK, gs = VC_ERR_UNSUPPORTED;
    vc_gemm_launch_plan plan;
    vc_err ge;
    ge.msg[0] = 0;
    float *part = NULL;
    for (int j = 0; j < nc && gs == VC_ERR_UNSUPPORTED; j++) { // unsupported: the next tile
        // the tap split where the tile set is too small for the device (gemm/ resolves an
        // automatic split; the workspace is sized for the groups the plan runs)
        g.splits = c[j].splits;
        g.two_pass_split = !o.cluster_split || c[j].two_pass;
        gs = vc_gemm_plan(&g, c[j].cfg, &plan, &ge);
        if (gs == VC_ERR_UNSUPPORTED && c[j].cfg >= 0 && (c[j].tuned || o.gemm_config < 0))
            continue;
        if (gs != VC_OK) break;
        if (plan.groups > 1) {
            VC_CUDA_TRY(scratch(o.allocator, (void **)&part,
                                (int64_t)plan.groups * n_out * c_out * 4, s),
                        "allocating the tap split's partial sums");
            plan.args.partial = part;
        }
        bool queued = false;
        st = tile_order_for(a, &plan, !dense && !c[j].no_order, o, order_stale, &queued, s, err);
        if (st != VC_OK) goto fail;
        after_ops = after_ops && !queued;
        plan.args.overlap_prev = after_ops ? 1 : 0;
        gs = vc_gemm_run(&plan, s, &ge);
        if (gs == VC_OK && o.choice)
            *o.choice = {VC_ALGO_IMPLICIT_GEMM, plan.config, plan.groups, c[j].tuned ? 1 : 0,
                         plan.takes_order && plan.args.tile_order ? 1 : 0, plan.clusters};
    }
    if (gs != VC_OK) st = gemm_fail(err, gs, ge, "implicit GEMM");
fail:
    vc_dev_free(o.allocator, part, s);
    return st;
}

// The GEMM's view of a layer whose features the GEMM cannot take as they are, into *pa and
// *w: 16-bit features whose rows are not whole 16-byte units widened to a multiple of 8
// channels (with their weights, one scratch block and one launch for both: each allocation and
// launch before a small first layer's GEMM is on its critical path), or weights in another
// dtype than the features' converted. *scratch_out: the block to free; on success it is not
// NULL exactly when a kernel was launched, which the GEMM after it may overlap (implicit_gemm's
// after_ops).
vc_status gemm_operands(const vc_conv_args *a, vc_conv_args *pa, const void **w,
                        void **scratch_out, const vc_engine_options &o, cudaStream_t s,
                        vc_err *err)
{
    const vc_kmap_data *m = a->map;
    const int64_t c_in = a->c_in, c_out = a->c_out;
    const int32_t K = m->volume;
    vc_status st = VC_OK;
    *pa = *a;
    *w = a->weights;
    *scratch_out = NULL;
    if (a->in_dtype != VC_DTYPE_FP32 && c_in % 8 != 0) {
        const int64_t cp = (c_in + 7) / 8 * 8, nw = c_out * (int64_t)K;
        const int64_t in_bytes = (m->n_in * cp * 2 + 255) / 256 * 256;
        VC_CUDA_TRY(scratch(o.allocator, scratch_out, in_bytes + nw * cp * 2, s),
                    "allocating padded input and weights");
        void *w_pad = static_cast<char *>(*scratch_out) + in_bytes;
        pad_kernel<<<grid_for((m->n_in + nw) * (cp / 8)), kThreads, 0, s>>>(
            a->in, (int)a->in_dtype, m->n_in, *scratch_out, a->weights, (int)a->w_dtype, nw,
            w_pad, c_in, (int)a->in_dtype, cp);
        VC_CUDA_TRY(cudaGetLastError(), "padding kernel");
        pa->in = *scratch_out;
        pa->c_in = cp;
        *w = w_pad;
    } else if (a->w_dtype != a->in_dtype) {
        const int64_t nw = c_out * (int64_t)K * c_in;
        VC_CUDA_TRY(scratch(o.allocator, scratch_out,
                            nw * (int64_t)dtype_bytes(a->in_dtype), s),
                    "allocating converted weights");
        cast_kernel<<<grid_for(nw), kThreads, 0, s>>>(a->weights, (int)a->w_dtype, *scratch_out,
                                                      (int)a->in_dtype, nw);
        VC_CUDA_TRY(cudaGetLastError(), "weight conversion kernel");
        *w = *scratch_out;
    }
fail:
    return st;
}

} // namespace

// Planner for VC_ALGO_AUTO: implicit GEMM for every layer. Evidence (bench/bench_conv, fp16,
// bias + ReLU, L2 flushed; the tables are in docs/benchmarks.md): gather-GEMM-scatter lost on
// every conv layer timed - synthetic and real scans from the sparsest map to the densest, the
// subm sweep, CenterPoint, MinkUNet and spconv's net, layer by layer and whole networks. GGS
// pays a fixed cost per layer (K launches, the host read-back of the pair counts, the fp32
// accumulator's memset, K read-modify-writes of it and the epilogue pass) that its per-offset
// GEMMs never won back; the gap narrows as channels grow, so very wide layers on very large
// scenes might flip, but nothing measured does. The grouped GGS (one launch for all offsets) is
// faster than per offset and still slower than implicit: its fp32 partial products cost what
// the launches did. The options do not change the choice.
extern "C" vc_algo vc_conv_gpu_plan(const vc_kmap_data *map, int64_t c_in, int64_t c_out,
                                    vc_dtype dtype, const vc_engine_options *opt)
{
    (void)map;
    (void)c_in;
    (void)c_out;
    (void)dtype;
    (void)opt;
    return VC_ALGO_IMPLICIT_GEMM;
}

// What implicit_gemm would try first for this layer (its first candidate, over the channels
// gemm_operands widens 16-bit features to), without launching.
extern "C" void vc_conv_gpu_describe(const vc_kmap_data *m, int64_t c_in, int64_t c_out,
                                     vc_dtype dt, int tf32, const vc_engine_options *opt,
                                     const char **config, int32_t *tap_split, int32_t *tuned)
{
    const vc_engine_options o = opt ? *opt : vc_engine_options_default();
    vc_conv_args a;
    memset(&a, 0, sizeof a);
    a.map = m;
    a.in_dtype = dt;
    a.c_in = c_in;
    a.c_out = c_out;
    vc_conv_args pa = a;
    pa.c_in = dt != VC_DTYPE_FP32 && c_in % 8 ? (c_in + 7) / 8 * 8 : c_in;
    const bool dense = m->type == VC_MAP_SUBM && m->volume == 1 && m->n_in == m->n_out;
    Candidate c[5];
    implicit_candidates(&a, pa, dense, tf32, o, c);
    const vc_gemm_config *t = NULL;
    const int32_t n = vc_gemm_configs(&t);
    *config = c[0].cfg >= 0 && c[0].cfg < n ? t[c[0].cfg].name : "gemm default";
    *tap_split = c[0].splits;
    *tuned = c[0].tuned ? 1 : 0;
}

extern "C" vc_status vc_conv_gpu(const vc_conv_args *a, vc_algo algo, int tf32,
                                 const vc_engine_options *opt, struct CUstream_st *stream,
                                 vc_err *err)
{
    vc_status st = check_args(a, algo, err);
    if (st != VC_OK) return st;
    const vc_engine_options o = opt ? *opt : vc_engine_options_default();
    const vc_kmap_data *m = a->map;
    const int64_t n_out = m->n_out, c_out = a->c_out;
    if (algo == VC_ALGO_AUTO) algo = vc_conv_gpu_plan(m, a->c_in, c_out, a->in_dtype, opt);
    if (o.choice) *o.choice = {(int32_t)algo, -1, 1, 0, 0, 0}; // implicit_gemm adds its GEMM's
    if (n_out == 0) return VC_OK;
    cudaStream_t s = stream;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    void *ops = NULL; // scratch of the GEMM's operands: set where gemm_operands launched
    const void *w = a->weights;
    vc_conv_args pa = *a; // the arguments the GEMM sees (features and c_in may be widened)
    const Epi epi = {c_out, a->bias, a->residual, (int)a->res_dtype, (int)a->act, a->slope,
                     a->out, (int)a->out_dtype};

    if (m->n_in == 0 || m->n_pairs == 0) {
        // No input reaches any output: the result is the epilogue of zeros.
        epilogue_kernel<<<grid_for(n_out * c_out), kThreads, 0, s>>>(NULL, n_out * c_out, epi);
        VC_CUDA_TRY(cudaGetLastError(), "epilogue kernel");
        goto fail;
    }
    st = gemm_operands(a, &pa, &w, &ops, o, s, err);
    if (st != VC_OK) goto fail;
    if (algo == VC_ALGO_IMPLICIT_GEMM)
        st = implicit_gemm(a, pa, w, tf32, o, NULL, NULL, NULL, ops != NULL, s, err);
    else if (algo == VC_ALGO_GATHER_GEMM_SCATTER_GROUPED)
        st = ggs_grouped(&pa, w, tf32, epi, o, s, err);
    else
        st = ggs_per_offset(&pa, w, tf32, epi, o, s, err);
fail:
    vc_dev_free(o.allocator, ops, s);
    return st;
}

// The implicit GEMM over a bounded view: the same operands and GEMM as vc_conv_gpu's implicit
// path, planned on the view's extents (n_out rows through perm; the tail rows have no taps, so
// their tiles skip the main loop and write the epilogue alone), never the per-offset GGS's
// read-back. Scratch (widened operands, tap-split partials) from opt's allocator.
extern "C" vc_status vc_conv_gpu_bounded(const vc_conv_args *a, int tf32,
                                         const vc_engine_options *opt, const int64_t *d_live,
                                         int64_t plan_rows, int *order_stale,
                                         struct CUstream_st *stream, vc_err *err)
{
    vc_status st = check_args(a, VC_ALGO_IMPLICIT_GEMM, err);
    if (st != VC_OK) return st;
    if (!order_stale)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: bounded view without its order flag");
    const vc_engine_options o = opt ? *opt : vc_engine_options_default();
    const vc_kmap_data *m = a->map;
    if (o.choice) *o.choice = {VC_ALGO_IMPLICIT_GEMM, -1, 1, 0, 0, 0};
    if (m->n_out == 0) return VC_OK;
    if (m->n_in == 0 || m->n_pairs == 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: a bounded view has extents >= 1");
    cudaStream_t s = stream;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    void *ops = NULL;
    const void *w = a->weights;
    vc_conv_args pa = *a;
    st = gemm_operands(a, &pa, &w, &ops, o, s, err);
    // The plan's view of the map: plan_rows outputs with the view's pairs per output (a SUBM
    // map's inputs are its outputs). The planner's size rules are for the rows a layer has,
    // and an extent is a frame's rows plus headroom.
    vc_kmap_data pm = *m;
    if (plan_rows > 0 && plan_rows < m->n_out) {
        pm.n_pairs = m->n_pairs / m->n_out * plan_rows +
                     m->n_pairs % m->n_out * plan_rows / m->n_out;
        if (pm.n_pairs < 1) pm.n_pairs = 1;
        if (m->type == VC_MAP_SUBM) pm.n_in = plan_rows;
        pm.n_out = plan_rows;
    }
    if (st == VC_OK)
        st = implicit_gemm(a, pa, w, tf32, o, &pm, d_live, order_stale, ops != NULL, s, err);
    vc_dev_free(o.allocator, ops, s);
    return st;
}
