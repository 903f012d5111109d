/* kmap/kmap_gpu.h - kernel maps on the GPU (the .cu files of kmap/; kmap/kmap_internal.cuh
 * says which does what). The maps are bit-identical to those of the CPU twin
 * (kmap/kmap_cpu.c): same out_shape, n_out, out_coords, out_in, pair lists, masks and perm, run
 * after run, whatever the engine options. The vc_kmap_data these functions fill holds DEVICE
 * pointers; free it with vc_kmap_data_free_gpu, never vc_kmap_data_free.
 *
 * Two variants:
 *
 * 1. vc_kmap_build_gpu (and _timed, vc_kmap_inverse_gpu): sizes everything itself and returns a
 *    map whose counts are on the host and whose arrays are complete in the stream's order (the
 *    mask sort's last passes may still run on return). Host synchronisation points, each a
 *    read-back of the device status block (posted into the context's mapped pinned block by the
 *    kernel that makes the last count, or by a one-thread kernel queued behind the stage; the
 *    host polls for its sequence number, then waits for the stream; build.cu's read_status):
 *      SUBM, INVERSE: ONE, at the end (n_pairs, the duplicate / range checks, the flags);
 *      STRIDED, DOWNSAMPLE, TRANSPOSED: TWO, after the output keys are collected (n_out, the
 *      duplicate / range checks) and at the end (n_pairs, the flags).
 *    A hash table that overflows its probe bound (or an output table that passes load 0.5)
 *    costs one more round, rebuilt larger; that is rare and bounded. Failure paths may read one
 *    input row back to name it. Arrays come from opt's allocator, by default the library's
 *    stream-ordered device pool (core/alloc.h, core/device_pool.h: no cudaMalloc per build);
 *    the map keeps the allocator (m->alloc) to free them; in_rows / out_rows are sized for an
 *    upper bound of the pair count (n_out * K for SUBM, n_in * t for the others, t = kernel offsets
 *    one input can reach), of which n_pairs are used.
 *
 * 2. vc_kmap_gpu_bounded_*: caller-given bounds (max_in, max_out, max_pairs) size every array
 *    once (the output hash table of the new-output types with at least 8 x max_out slots, at
 *    most 1/8 full, for probe walks as short as the regular build's, or the dense path's
 *    bitmap of the output key space where that has at most 26 bits; the input table, as in
 *    the regular build, at most 1/4 full where that fits in 4 MB, else at most 1/2);
 *    vc_kmap_build_gpu_bounded only queues kernels (no host synchronisation, no allocation, no
 *    read-back), so a whole build can be captured in a CUDA graph and replayed on new
 *    coordinates written into the same input buffer. Every count stays on the device, in the
 *    status block bounded.d_status (n_out, n_pairs, flags); arrays are written only within the
 *    bounds. Counts past a bound are never silently dropped: they raise a flag in the status
 *    block, and vc_kmap_gpu_bounded_check - THE one synchronisation point of this variant, to be
 *    called by the caller after the build (or graph launch) and before the map is trusted -
 *    reads the block back the same way (one small kernel queued, then a wait) and returns
 *    VC_ERR_CAPACITY naming the count needed, VC_ERR_DUPLICATE / VC_ERR_OUT_OF_RANGE for bad
 *    input rows, as the regular build would.
 *    Device consumers may instead read d_status directly (n_out / n_pairs words) and skip the
 *    check, at their own risk: a nonzero flags word means the map must not be used.
 *    The input count too may live on the device (vc_kmap_build_gpu_bounded_dev): the build's
 *    first kernel copies it into the status block (N_IN) and every kernel, launched over the
 *    extent, bounds itself by it; the output count (N_LIVE) feeds the next level's build, so
 *    a network's levels chain in one graph. Rows of the extent past the counts are tail rows
 *    with a guarantee (below) that lets consumers run over the extent.
 *
 * Kernels. A build is a sequence of ordinary kernels (no host synchronisation between them),
 * with CUB radix sorts only for masks of K > 32 and 64-bit output keys. The new-output types
 * whose output keys have at most 26 bits (an 8 MB bitmap; a stride-2 map of the SECOND grid
 * 41 x 1600 x 1408 has 25) find their outputs in a bitmap of the output key space, so they need
 * no output hash table and no sort of the output keys; past that, a hash table and a sort
 * (vc_engine_options.kmap_dense moves the bound or turns the bitmap off). SUBM k3 is 6
 * launches, a captured graph of 6 kernel nodes (the mask sort's passes after the first share
 * one launch, with a barrier among their tile blocks, where the tiles are no more than the SMs;
 * past that, one launch a pass). In the regular builds on compute capability 9.0 and up each
 * launch asks for programmatic dependent launch (core/launch.cuh), so it overlaps the end of
 * the kernel before it (each kernel waits on its predecessor before touching memory); the bounded
 * build launches plainly (in a captured graph the overlap measured slower). Every kernel
 * triggers its dependents at its start, so a caller's PDL kernel queued after a bounded build
 * must itself wait on the grid dependency before reading the map (include/voxconv.h).
 *
 * Work runs on `stream`. No atomics decide a result: they claim hash slots, keep minima, count
 * claims (whose order a sort then removes), set the dense path's bits, count finished tiles or
 * raise flags. */
#ifndef VC_CONV_KMAP_GPU_H
#define VC_CONV_KMAP_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/options.h"
#include "kmap/kmap.h" /* C declarations: keep them C-linked when included from CUDA sources */

struct CUstream_st;

/* Words of the device status block (int64) of a build. */
#define VC_KMAP_GPU_BAD_ROW 0   /* smallest input row outside shape / batch size; INT64_MAX   */
#define VC_KMAP_GPU_FIRST_DUP 1 /* smallest input row repeating an earlier row; INT64_MAX      */
#define VC_KMAP_GPU_N_DUP 2     /* input rows repeating an earlier row                         */
#define VC_KMAP_GPU_N_OUT 3     /* output rows; the true count even past max_out                */
#define VC_KMAP_GPU_N_PAIRS 4   /* pairs; the true count even past max_pairs (unless n_out
                                   overflowed, which leaves it partial)                         */
#define VC_KMAP_GPU_FLAGS 5     /* VC_KMAP_GPU_F_* bits, 0 for a valid map                      */
#define VC_KMAP_GPU_N_LIVE 6    /* output rows in the arrays: N_OUT clamped to [0, the bound]   */
#define VC_KMAP_GPU_N_IN 7      /* bounded builds: the input count the build read (even outside
                                   [0, max_in]); 0 for the others                               */
#define VC_KMAP_GPU_STATUS_WORDS 8

#define VC_KMAP_GPU_F_PROBE_IN 1      /* the input table overflowed its probe bound            */
#define VC_KMAP_GPU_F_PROBE_OUT 2     /* the output table overflowed its probe bound           */
#define VC_KMAP_GPU_F_OUT_OVERFLOW 4  /* n_out > max_out                                       */
#define VC_KMAP_GPU_F_PAIR_OVERFLOW 8 /* n_pairs > max_pairs                                   */
#define VC_KMAP_GPU_F_MISSING 16      /* internal: an output key was not found again           */
#define VC_KMAP_GPU_F_BAD_ENTRY 32    /* inverse: a forward entry is not an input row          */
#define VC_KMAP_GPU_F_CONFLICT 64     /* inverse: an input feeds two outputs at one offset     */
#define VC_KMAP_GPU_F_IN_COUNT 128    /* bounded: the input count is outside [0, max_in]       */
#define VC_KMAP_GPU_F_FORWARD 256     /* bounded inverse: its forward map's build failed; the
                                         forward's flags are copied above FORWARD_SHIFT        */
#define VC_KMAP_GPU_FORWARD_SHIFT 16

/* Milliseconds per stage of one build, measured with CUDA events on the stream. */
typedef struct vc_kmap_gpu_timing {
    float insert_ms;      /* clear tables, pack and insert the input keys (+ STRIDED etc.: the
                             candidate output keys, hashed and collected or marked in the dense
                             path's bitmap and counted; their read-back)                        */
    float out_coords_ms;  /* sort of the unique output keys, ranks, unpack (the dense path: the
                             unpack alone; 0 for SUBM)                                           */
    float out_in_ms;      /* out_in by lookup                                                    */
    float pairs_ms;       /* masks, per-offset counts and their scan, pair scatter              */
    float masks_ms;       /* mask-sorted permutation, and the final read-back                   */
    float total_ms;
} vc_kmap_gpu_timing;

/* Builds a SUBM, STRIDED, DOWNSAMPLE or TRANSPOSED map over device coordinates d_in_coords
 * [n_in, 4] (rows distinct and inside shape/batch_size: a duplicate gives VC_ERR_DUPLICATE, a row
 * outside gives VC_ERR_OUT_OF_RANGE, as on the CPU). opt (NULL: the defaults) picks the output
 * path of the new-output types (kmap_dense); every choice gives the same map. On failure *out
 * is left untouched. Synchronises (see above). */
vc_status vc_kmap_build_gpu(const int32_t *d_in_coords, int64_t n_in, const int32_t shape[3],
                            int32_t batch_size, const vc_map_desc *d,
                            const vc_engine_options *opt, struct CUstream_st *stream,
                            vc_kmap_data *out, vc_err *err);

/* The same, filling *timing (may be NULL) with the stage times. */
vc_status vc_kmap_build_gpu_timed(const int32_t *d_in_coords, int64_t n_in,
                                  const int32_t shape[3], int32_t batch_size,
                                  const vc_map_desc *d, const vc_engine_options *opt,
                                  struct CUstream_st *stream, vc_kmap_data *out,
                                  vc_kmap_gpu_timing *timing, vc_err *err);

/* Builds the INVERSE of a STRIDED or DOWNSAMPLE map whose arrays are on the device (fwd as made
 * by vc_kmap_build_gpu): inputs are fwd's outputs, outputs fwd's inputs. Same checks as
 * vc_kmap_inverse_cpu. Synchronises once. */
vc_status vc_kmap_inverse_gpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                              int32_t fwd_in_batch_size, const vc_engine_options *opt,
                              struct CUstream_st *stream, vc_kmap_data *out, vc_err *err);

/* Waits for the device, then frees the device arrays of a map built by vc_kmap_build_gpu or
 * vc_kmap_inverse_gpu and zeroes the struct; NULL is fine. */
void vc_kmap_data_free_gpu(vc_kmap_data *m);

/* The tile order of kmap.h for a map on the device (vc_kmap_tile_order_cpu's twin, bit for
 * bit), replacing an earlier one (in place where the block count is the same). One kernel
 * launch on `stream` (the first time also an allocation through m->alloc, which holds
 * the kernel's scratch after the order, and a 4-byte memset); no host synchronisation. Not to
 * be run on one map from two streams at once. Under stream capture a build that would
 * reallocate (a new block count) fails with VC_ERR_UNSUPPORTED instead (a bounded map's view,
 * vc_kmap_gpu_bounded_view, never does). */
vc_status vc_kmap_tile_order_gpu(vc_kmap_data *m, struct CUstream_st *stream, vc_err *err);

/* ---- the bounded, graph-capturable variant --------------------------------------------- */

typedef struct vc_kmap_gpu_bounded {
    vc_map_desc desc;         /* SUBM, STRIDED, DOWNSAMPLE, TRANSPOSED or INVERSE              */
    int32_t in_shape[3];
    int32_t batch_size;
    int64_t max_in, max_out, max_pairs;
    /* Device arrays sized by the bounds: out_coords [max_out, 4] (new-output types; NULL for
     * SUBM), out_in [max_out, K], offsets [K + 1], in_rows / out_rows [max_pairs], masks
     * [max_out, mask_words], perm [max_out]. Header fields are set at create; map.n_in, n_out and
     * n_pairs are set by vc_kmap_gpu_bounded_check (the device status block holds the truth). */
    vc_kmap_data map;
    int64_t *d_status;        /* device int64 [VC_KMAP_GPU_STATUS_WORDS]                       */
    void *workspace;          /* device scratch: hash tables, counts, sort storage             */
    size_t workspace_bytes;
    size_t sort_bytes;        /* internal: sort storage inside the workspace                   */
    vc_engine_options opt;    /* the options it was created with (the defaults for NULL)       */
    int32_t dense;            /* internal: output key bits of the dense output path, or 0      */
    const int32_t *last_in;   /* input of the last queued build (the check names bad rows)     */
    const struct vc_kmap_gpu_bounded *fwd; /* INVERSE: the forward map it was created over     */
} vc_kmap_gpu_bounded;

/* Allocates (once, through opt's allocator) the arrays and workspace of bounded builds of `d`
 * over input sets of at most max_in rows inside shape / batch_size. max_out >= 1 and
 * max_pairs >= 1; for SUBM n_out = n_in, so max_out must be >= max_in. opt (NULL: the
 * defaults) is copied into b; its kmap_dense fixes the output path of every build of b, its
 * allocator and cache serve b until destroyed. Synchronous; *b is zeroed first and stays
 * zeroed on failure. */
vc_status vc_kmap_gpu_bounded_create(const vc_map_desc *d, const int32_t shape[3],
                                     int32_t batch_size, int64_t max_in, int64_t max_out,
                                     int64_t max_pairs, const vc_engine_options *opt,
                                     vc_kmap_gpu_bounded *b, vc_err *err);

/* Queues a build over d_in_coords [n_in, 4] (n_in <= max_in, known when the build is queued;
 * the coordinates themselves are read when the work runs, so a captured graph replays on
 * whatever the buffer then holds). No synchronisation, no allocation, no read-back: allowed
 * under stream capture. Argument errors are returned at once; everything the data decides is
 * left in the status block for vc_kmap_gpu_bounded_check. It is the _dev build below over a
 * count the library stores itself (a kernel parameter of the build's first kernel: a captured
 * graph keeps the count it was captured with), with the same guarantee on tail rows. */
vc_status vc_kmap_build_gpu_bounded(vc_kmap_gpu_bounded *b, const int32_t *d_in_coords,
                                    int64_t n_in, struct CUstream_st *stream, vc_err *err);

/* Queues a build over the first *d_n_in rows of d_in ([max_in, 4] device coords); d_n_in is
 * a device int64 read when the build runs (so a captured graph rebuilds for whatever count
 * the buffer then holds); rows from *d_n_in to max_in are ignored whatever they hold. A
 * count above max_in sets the capacity flag (reported by the check), never reads past.
 * Every kernel is launched over the extent (max_in input rows, the extent's output rows) and
 * bounds itself by the count.
 *
 * Guarantee after a build (either entry), over the extent (max_out rows; SUBM: max_in): out_in
 * rows past the output count are all -1 and their mask words 0; perm lists the live rows
 * first (in vc_kmap_build's order: live rows all have a non-zero mask) then the tail rows in
 * row order; offsets / in_rows / out_rows hold the live pairs only (offsets[K] = the pair
 * count, on the device). Live arrays are bit-identical to vc_kmap_build's for the same rows.
 * Tail rows of out_coords and pair slots past offsets[K] are unspecified. On a build the check
 * rejects, none of this holds. */
vc_status vc_kmap_build_gpu_bounded_dev(vc_kmap_gpu_bounded *b, const int32_t *d_in,
                                        const int64_t *d_n_in, struct CUstream_st *stream,
                                        vc_err *err);

/* The bounded INVERSE of fwd (a STRIDED or DOWNSAMPLE bounded map): its inputs are fwd's
 * outputs (extent fwd->max_out), its outputs fwd's inputs (extent fwd->max_in, shape and batch
 * size fwd's input ones), max_pairs fwd's (the inverse has exactly fwd's pairs). Allocates its
 * arrays once as vc_kmap_gpu_bounded_create does (opt likewise; NULL: the defaults); fwd must
 * outlive b. desc.type is VC_MAP_INVERSE, out_coords NULL (the outputs are fwd's input rows).
 * Synchronous; *b is zeroed first and stays zeroed on failure. */
vc_status vc_kmap_gpu_bounded_create_inverse(const vc_kmap_gpu_bounded *fwd,
                                             const vc_engine_options *opt,
                                             vc_kmap_gpu_bounded *b, vc_err *err);

/* Queues the build of the inverse b of fwd (created by vc_kmap_gpu_bounded_create_inverse over
 * that fwd) from fwd's arrays and device counts: queue it on the stream of fwd's build, after it
 * (or order the streams). No allocation, no synchronisation: capturable. The input count is
 * fwd's output count (N_LIVE), the output count fwd's input count (its N_IN, clamped to
 * fwd->max_in); live arrays are bit-identical to vc_kmap_inverse_gpu's / the CPU twin's of the
 * same forward map, with the tail guarantee of the _dev build over the extent fwd->max_in
 * (except that a live row may have mask 0 - an input no forward output reads, e.g. past the
 * last stride window - and then comes last among the live rows in perm, as there). A
 * forward build that failed leaves the inverse empty with VC_KMAP_GPU_F_FORWARD set, which
 * vc_kmap_gpu_bounded_check reports (VC_ERR_CAPACITY where the forward hit a bound). */
vc_status vc_kmap_build_gpu_bounded_inverse(vc_kmap_gpu_bounded *b,
                                            const vc_kmap_gpu_bounded *fwd,
                                            struct CUstream_st *stream, vc_err *err);

/* Device int64 holding the map's output row count after the build (subm: = *d_n_in): the
 * count of out_coords rows, for the next level's build. Valid for the map's life. Clamped to
 * [0, the extent] (status word VC_KMAP_GPU_N_LIVE; VC_KMAP_GPU_N_OUT keeps the true count
 * for the check's message). */
const int64_t *vc_kmap_gpu_bounded_out_count(const vc_kmap_gpu_bounded *b);

/* A view of b's map for consumers that run over the extent (a graph's conv, the tile order):
 * b->map with n_in = max_in, n_out = the extent (SUBM: max_in), n_pairs = max_pairs; it shares
 * b's arrays, among them a tile order allocated at create for the extent's block count, so
 * vc_kmap_tile_order_gpu on the view is one kernel launch (no allocation, no synchronisation:
 * capturable). Valid while b lives; never free it. */
void vc_kmap_gpu_bounded_view(const vc_kmap_gpu_bounded *b, vc_kmap_data *view);

/* Synchronises `stream` and reads the status block of the last build queued on b (or replayed
 * from a graph that captured it): sets b->map.n_in, n_out and n_pairs and returns VC_OK, or the
 * first problem as the regular build reports it: VC_ERR_OUT_OF_RANGE / VC_ERR_DUPLICATE (a bad
 * input row), VC_ERR_CAPACITY (n_out > max_out, n_pairs > max_pairs, or a hash table past its
 * probe bound; the message names the count needed, which is also left in b->map.n_out /
 * n_pairs), VC_ERR_INTERNAL. */
vc_status vc_kmap_gpu_bounded_check(vc_kmap_gpu_bounded *b, struct CUstream_st *stream,
                                    vc_err *err);

/* Frees what vc_kmap_gpu_bounded_create allocated (waiting for the device first) and zeroes *b.
 * NULL and zeroed structs are fine. */
void vc_kmap_gpu_bounded_destroy(vc_kmap_gpu_bounded *b);

/* Test hook, host only (no GPU needed): the (offset, output) pairs that the new-output kernels'
 * target arithmetic (the insert's and the scatter's, kmap/kmap_internal.cuh) gives input row
 * `row` (b, z, y, x, inside shape and batch) of a STRIDED, DOWNSAMPLE or TRANSPOSED map,
 * computed by the same code on the host: up to cap of them in k[] and out[] (b, z, y, x), in
 * the kernels' order. Returns their number (may pass cap), or -1 with err set for a
 * description the map build rejects, a SUBM map or a NULL argument. */
int vc_kmap_gpu_debug_targets(const vc_map_desc *d, const int32_t shape[3], int32_t batch_size,
                              const int32_t row[4], int32_t *k, int32_t (*out)[4], int cap,
                              vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
