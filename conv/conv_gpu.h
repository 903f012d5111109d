/* conv/conv_gpu.h - convolution and pooling on the GPU, with the semantics of the CPU twins in
 * conv/conv.h (the tests compare against them). Every pointer in the arguments, the map's arrays
 * included (a vc_kmap_data from vc_kmap_build_gpu), is a DEVICE pointer. Work is queued on
 * `stream`; no call synchronises the host except where its comment says so (gather-GEMM-scatter
 * reads the pair counts back; global pooling reads its batch-index check back). */
#ifndef VC_CONV_CONV_GPU_H
#define VC_CONV_CONV_GPU_H

#include "conv/conv.h"
#include "core/options.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Forward convolution. algo: VC_ALGO_IMPLICIT_GEMM (output-stationary, gather through out_in,
 * outputs in mask order, CTA mask skipping, fused epilogue, no atomics), VC_ALGO_GATHER_GEMM_SCATTER
 * (per-offset GEMMs into an fp32 accumulator, then the epilogue),
 * VC_ALGO_GATHER_GEMM_SCATTER_GROUPED (one GEMM over the pairs of every offset into fp32 partial
 * products in output-major order, then one reduction per output in offset order with the
 * epilogue; scratch of n_pairs x c_out floats), or VC_ALGO_AUTO (the planner
 * picks from the map and the channels). Deterministic for a given algo and device (the implicit
 * GEMM's tap split, on coarse layers, takes its group count from the device). a->num_threads is
 * ignored. fp32 features use exact fp32 arithmetic unless `tf32` is set. Weights in another
 * dtype than the features are converted to the features' dtype on the device.
 * Synchronisation: VC_ALGO_IMPLICIT_GEMM never waits for the device. VC_ALGO_GATHER_GEMM_SCATTER
 * reads the map's K+1 pair offsets back to size its per-offset launches: ONE stream
 * synchronisation per call (the only one); the grouped GGS sizes its launches from the host's
 * n_pairs and never waits; AUTO synchronises only when it picks the per-offset GGS.
 * opt (NULL: the defaults) chooses among the implicit GEMM's kernels (core/options.h:
 * gemm_config, tap_split, tile_order, force_order, cluster_split); a forced configuration
 * that does not fit the layer fails with VC_ERR_UNSUPPORTED. */
vc_status vc_conv_gpu(const vc_conv_args *a, vc_algo algo, int tf32,
                      const vc_engine_options *opt, struct CUstream_st *stream, vc_err *err);

/* The implicit GEMM over a BOUNDED map view (a frame of src/net/graph.c): a->map's n_in, n_out
 * and n_pairs are the extents of fixed buffers, not counts, and its arrays hold a bounded build
 * over device counts (kmap/kmap_gpu.h, vc_kmap_build_gpu_bounded_dev): out_in rows and mask words
 * past the live output count are -1 and 0, perm lists the live rows first. Input and output
 * arrays have the extents' rows; rows past the live counts are tail rows (unspecified, never
 * read by a live row). Plans the tile configuration, tap split and tile order as for a map of
 * plan_rows outputs (the rows a typical frame has; 0 or more than the extent: the extent) with
 * the view's pairs per output, and launches over the extent; never reads anything back, never
 * synchronises; scratch comes from opt->allocator (in a captured frame,
 * the graph's arena). a->map_cache must be the view itself: its tile order is rebuilt in place
 * where the plan takes one and *order_stale is set (then cleared) - the frame's first layer on
 * the map - and built (allocating through the map's allocator) the first time, which must
 * happen outside stream capture at the same extents. d_live (device, or NULL): the map's live
 * output count (vc_kmap_gpu_bounded_out_count), read when the work runs: the tiles of tail
 * rows are then skipped, leaving those rows unwritten (vc_gemm_args.m_live). */
vc_status vc_conv_gpu_bounded(const vc_conv_args *a, int tf32, const vc_engine_options *opt,
                              const int64_t *d_live, int64_t plan_rows, int *order_stale,
                              struct CUstream_st *stream, vc_err *err);

/* What vc_conv_gpu_tune found for a bucket (configurations are indices into vc_gemm_configs'
 * table; groups are tap-split groups, 1 for none). The finalist is the candidate confirmed
 * against the planner's choice (finalist_config -1: none came that far); kept 1 where it won
 * on every member. */
typedef struct vc_conv_tune_result {
    int32_t candidates;              /* choices timed, the planner's included                 */
    int32_t finalist_config, finalist_groups;
    int32_t finalist_no_order;       /* 1: without the planner's tile order                   */
    int32_t finalist_two_pass;       /* 1: its tap split runs in two passes                   */
    int32_t rounds;                  /* A/B rounds of the confirmation (0: none ran)          */
    int32_t kept;                    /* 1: the finalist beat the planner on every member      */
} vc_conv_tune_result;

/* What vc_conv_gpu_tune measured on one member layer of the bucket: the planner's choice
 * there; with a confirmation, the medians over its rounds of each side's per-round median,
 * gain = the median of the per-round ratios planner / finalist and spread = their median
 * absolute deviation over the gain; without one, planner_ms = tuned_ms = the planner's
 * median, gain = spread = 0. */
typedef struct vc_conv_tune_member {
    int32_t planner_config, planner_groups;
    double planner_ms, tuned_ms, gain, spread;
} vc_conv_tune_member;

/* Tunes one bucket: a[0..n) are its member layers (1 <= n <= VC_TUNE_MAX_MEMBERS; the caller
 * makes sure they share a bucket), timed as vc_conv_gpu with VC_ALGO_IMPLICIT_GEMM runs them
 * (each a->out is overwritten). On the first member: the planner's choice and every compiled
 * GEMM configuration of its dtype and math, each with every tap split of {planner's rule, 1,
 * 2, 3, 4, 6, 8} (16-bit features on maps of K > 1; one split otherwise), skipping those that
 * do not fit and those that resolve to a choice already timed; then the schedule switches of
 * the planner's choice and of the fastest (without the tile order it took; a clustered tap
 * split in two passes). Each time is the median of `runs` launches after two warm-up
 * launches, each launch timed alone with events, and is read as a ratio to the member's own
 * planner time. The three fastest choices (as the configuration and groups they ran with)
 * faster than the planner's by more than `margin` are timed on every other member; a
 * choice's score is its worst ratio over the members, and the least score, if still below
 * 1 - margin, makes the finalist. The finalist is then confirmed on every member by `rounds`
 * interleaved A/B rounds against the planner's choice (mb[m]); it is kept only where on
 * every member gain > 1 + max(margin, 2 x spread). Exact fp32 (one configuration) times the
 * planner's choice alone. opt: as for vc_conv_gpu (its gemm_config, tap_split and tune are
 * overridden). Synchronises after every launch. */
vc_status vc_conv_gpu_tune(const vc_conv_args *const *a, int32_t n, int tf32,
                           const vc_engine_options *opt, int32_t runs, int32_t rounds,
                           double margin, struct CUstream_st *stream, vc_conv_tune_result *res,
                           vc_conv_tune_member *mb, vc_err *err);

/* The algorithm VC_ALGO_AUTO runs for this map, channels and feature dtype under options opt
 * (NULL: the defaults); never AUTO. */
vc_algo vc_conv_gpu_plan(const vc_kmap_data *map, int64_t c_in, int64_t c_out, vc_dtype dtype,
                         const vc_engine_options *opt);

/* The implicit GEMM's first tile configuration for the layer (a gemm/gemm.h name, or "gemm
 * default" where gemm/ picks, as for fp32) and its tap split (tap_splits: 0 none, N > 0 forced
 * groups, -N up to N as the device allows): the tune table's choice where opt has one for the
 * layer's bucket (*tuned 1), else the planner's rules. Launches nothing. */
void vc_conv_gpu_describe(const vc_kmap_data *map, int64_t c_in, int64_t c_out, vc_dtype dtype,
                          int tf32, const vc_engine_options *opt, const char **config,
                          int32_t *tap_split, int32_t *tuned);

#ifdef __cplusplus
}
#endif

#endif
