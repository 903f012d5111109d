/* gemm/gemm.h - tensor-core GEMM with row gather and row scatter, the one kernel
 * family behind both convolution algorithms. Knows nothing of kernel maps or the API: it sees
 * index arrays and dense matrices. All pointers are device pointers; work is queued on `stream`.
 *
 * The problem, for logical rows i in [0, m) and output columns n in [0, n_cols):
 *
 *   r      = row_map ? row_map[i] : i                    (the output row of logical row i;
 *                                                         -1: the row is skipped - nothing
 *                                                         written, its mask not read)
 *   g      = gather_rows ? gather_rows[i] : i            (the row of the gather table)
 *   acc[n] = sum over t in [tap_lo, tap_hi), c in [0, k):
 *              A[ gather[g * taps + t], c ] * W[n, b_tap0 + t, c]       (a -1 index reads zeros)
 *   C[r, n] = epilogue(acc[n] (+ C[r, n] if accumulate))
 *
 * ([tap_lo, tap_hi) is [0, taps) unless a range is given: a tap range lets several launches
 * split the taps, each with its own row order, the later ones accumulating into C.)
 *
 * W is the weight tensor in spconv's layout [n_cols, b_taps, k] (C_out, kernel volume, C_in), so
 * the weights of tap t are read in place. With gather == NULL the A rows are g itself (a dense
 * GEMM: taps must be 1).
 *
 *  - implicit GEMM (output-stationary conv): m = n_out, taps = K, gather = out_in [n_out, K],
 *    gather_rows = row_map = perm (outputs sorted by their masks' key), masks = the per-output
 *    masks so a CTA skips taps none of its rows uses; epilogue fused; no atomics: every C row is
 *    written once.
 *  - gather-GEMM-scatter, one offset t: m = pair count of t, taps = 1, b_tap0 = t,
 *    gather = in_rows of t, row_map = out_rows of t, accumulate = 1 into an fp32 C. Output rows
 *    of one offset are distinct, so launches on one stream need no atomics.
 *  - grouped gather-GEMM-scatter (conv/conv.cu): the pairs of every offset in one launch,
 *    taps = K through out_in, gather_rows = each pair's output, masks with one bit per row so
 *    that each tile (segments padded to whole tiles, padding rows -1) computes one offset,
 *    row_map = the pair's row of an fp32 C of partial products.
 *
 * Arithmetic: fp16/bf16 A and W use mma.sync m16n8k16 with fp32 accumulation; fp32 A and W use
 * tf32 m16n8k8 (VC_GEMM_MATH_TF32) or exact fp32 FMA (VC_GEMM_MATH_FP32). A and W have the same
 * dtype. */
#ifndef VC_GEMM_GEMM_H
#define VC_GEMM_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Element types (the values of vc_dtype in include/voxconv.h). */
typedef enum vc_gemm_dtype {
    VC_GEMM_F32 = 0,
    VC_GEMM_F16 = 1,
    VC_GEMM_BF16 = 2
} vc_gemm_dtype;

typedef enum vc_gemm_math {
    VC_GEMM_MATH_DEFAULT = 0, /* tensor cores for 16-bit types, exact FMA for fp32          */
    VC_GEMM_MATH_TF32 = 1,    /* fp32 through tf32 tensor cores                              */
    VC_GEMM_MATH_FP32 = 2     /* exact fp32 FMA                                              */
} vc_gemm_math;

typedef enum vc_gemm_act {
    VC_GEMM_ACT_NONE = 0,
    VC_GEMM_ACT_RELU = 1,
    VC_GEMM_ACT_LEAKY = 2
} vc_gemm_act;

typedef struct vc_gemm_args {
    int64_t m;                 /* logical rows                                                   */
    int32_t n_cols;            /* output columns (C_out)                                         */
    int32_t k;                 /* input columns (C_in), 1 .. 2^27 (a row's bytes fit 32 bits)    */
    int32_t taps;              /* gather taps per row (1 for a plain or per-offset GEMM)         */
    const void *a;             /* A [a_rows, k], row-major, dtype ab_dtype                       */
    int64_t a_rows;
    const int32_t *gather;     /* [*, taps] indices into A, -1 = zero; NULL = dense rows         */
    const int32_t *gather_rows;/* [m] or NULL                                                    */
    const int32_t *row_map;    /* [m] or NULL                                                    */
    const uint32_t *masks;     /* [*, mask_words] indexed by output row r, or NULL: taps whose
                                  bit is clear in every row of a tile are skipped                */
    int32_t mask_words;
    const void *w;             /* W [n_cols, b_taps, k], dtype ab_dtype                          */
    int32_t b_taps;
    int32_t b_tap0;
    vc_gemm_dtype ab_dtype;
    vc_gemm_math math;
    void *c;                   /* C [*, n_cols] row-major                                         */
    vc_gemm_dtype c_dtype;
    int accumulate;            /* C += (C read in c_dtype: a 16-bit C adds its rounded values)   */
    int32_t tap_lo, tap_hi;    /* taps computed: [tap_lo, tap_hi); tap_hi = 0 means [0, taps)    */
    /* epilogue, in this order: + bias[n], + residual[r, n], activation, convert to c_dtype     */
    const float *bias;         /* [n_cols] or NULL                                               */
    const void *residual;      /* [*, n_cols] or NULL, indexed by r                              */
    vc_gemm_dtype residual_dtype;
    vc_gemm_act act;
    float slope;
    /* TAP SPLIT (tensor-core configurations, taps <= 1024): each tile's taps are divided into
     * groups of consecutive taps, as even in count as the tile's masks allow, and each group
     * runs on its own CTA, which writes its fp32 sums into partial[s, i, n]; a second kernel
     * then adds the groups in the order s = 0, 1, ... and applies accumulate and the epilogue.
     * On the small 16-bit tiles (vc_gemm_split_in_clusters) on compute capability 9.0 and later,
     * with at most 8 groups, a tile's groups run as one thread-block cluster instead and add
     * their sums through distributed shared memory in the same order (the same bits; one launch;
     * partial is then left untouched, but is still required). Deterministic: the same number of
     * groups gives the same bits. For problems with too few tiles to fill the device (a
     * convolution's coarse levels).
     *   splits > 1: that many groups;
     *   splits < -1: as many as fill the device - the CTAs of this configuration it holds at
     *                once over the tiles, rounded - at most -splits (the count depends on the
     *                device, and so may the last bits of the result). Where the split can run
     *                as clusters: rounded down and at most 8 (1: no split);
     *   0, 1, -1: no split. */
    int32_t splits;            /* -VC_GEMM_MAX_SPLITS .. VC_GEMM_MAX_SPLITS                      */
    float *partial;            /* [|splits|, m, n_cols] fp32 device workspace, 16-byte aligned  */
    /* TILE ORDER (with masks): the order in which CTAs take the tiles, a schedule only - the
     * result is the same bits with or without it. The rows are cut into order_blocks blocks of
     * VC_GEMM_ORDER_ROWS consecutive rows (the last may be short); tile_order[j] is the block
     * the j-th CTAs take (a permutation of 0 .. order_blocks - 1; a tile of fewer rows takes the
     * block's tiles in row order). Costly tiles first shorten the last wave (conv/ passes the
     * map's blocks by descending tap count, kmap.h). Taken where each tile has its own CTA, no
     * tap split runs, the tile's rows divide VC_GEMM_ORDER_ROWS and the tiles make more than
     * 1.25 waves of the CTAs the device holds (vc_gemm_plan's takes_order); elsewhere ignored.
     * NULL: row order. */
    const int32_t *tile_order; /* [order_blocks] device, or NULL                                */
    int64_t order_blocks;      /* ceil(m / VC_GEMM_ORDER_ROWS) when tile_order is given          */
    /* Schedule choices (vc_engine_options), never of the result; 0 is the default:
     * force_order = 1 takes a given tile order whatever the waves (so that small problems
     * exercise it); two_pass_split = 1 runs every tap split as two passes through the workspace
     * (as on devices before compute capability 9.0), never as clusters. */
    int32_t force_order;
    int32_t two_pass_split;
    /* BOUNDED ROWS (with masks): a device int64, or NULL. Rows at or past it in row order (the
     * positions of row_map / gather_rows: a bounded map's perm lists its live rows first) may
     * be left unwritten - their tiles and their tap split's sums are skipped - and the rows
     * before it are computed as without it. The masked tensor-core kernels and the tap split's
     * reduction honour it; the others compute every row. */
    const int64_t *m_live;
    /* SCHEDULE ROWS: the rows the schedule is planned for - an automatic tap split's groups and
     * whether a tile order is taken - where m is an extent that a problem's live rows
     * (m_live) fill only in part; 0 or more than m: m. Never changes the result's bits beyond
     * what the groups it leads to change (splits). */
    int64_t m_plan;
    /* OVERLAP (compute capability 9.0 and up; 0: off): 1 lets the launch start while the kernel
     * before it in the stream still runs (programmatic stream serialization). The warp tiles,
     * and the tiles of gemm/mainloop.cuh (mma.sync, and the implicit wgmma tiles) where their
     * launch takes more than one wave (the plan's waves), then set up their first tile (its
     * rows, masks and tile order) and wait for that kernel (griddepcontrol.wait) before they
     * read A or W or write C; the dense TMA and fp32 FMA kernels and a split's cluster launch
     * run plainly. For a kernel that writes A or W alone and lets its dependents
     * launch (griddepcontrol.launch_dependents; conv/'s operand widening): what the set-up
     * reads must be complete when that kernel starts. Never changes the result. */
    int32_t overlap_prev;
} vc_gemm_args;

/* Rows of a tile-order block (vc_gemm_args.tile_order). */
#define VC_GEMM_ORDER_ROWS 128

/* Most groups a tap split may use. */
#define VC_GEMM_MAX_SPLITS 16

/* 1 when tap splits on configuration `config` can run as thread-block clusters on the current
 * device (a small 16-bit tile with a cluster kernel, compute capability 9.0 or later, the
 * library built for it; splits of 2 to 8 groups, an automatic one rounded down: see splits
 * above; args.two_pass_split turns them off), 0 when they run in two passes. For planners: the
 * two-pass split's second launch and workspace traffic are what a cluster split saves. */
int vc_gemm_split_in_clusters(int32_t config);

/* The tile configurations compiled into the library, by name ("f16_128x64x32_s3" ...), for the
 * planner, the tuner and the benchmarks. */
typedef struct vc_gemm_config {
    const char *name;
    int32_t tile_m, tile_n, tile_k, stages, warps;
    vc_gemm_dtype ab_dtype;
    vc_gemm_math math;
    /* the taps a stage holds: 1, or 2-4 for a tap-packed tile (gathered rows with k = tile_k /
     * tap_pack only; no tap split) */
    int32_t tap_pack;
} vc_gemm_config;

/* Number of compiled configurations and their table (static storage). */
int32_t vc_gemm_configs(const vc_gemm_config **table);

/* The index in vc_gemm_configs' table of the configuration named by the first len characters of
 * name (e.g. "f16_64x64x32_s4"), or -1 where this build has none of that name. */
int32_t vc_gemm_config_named(const char *name, size_t len);

/* A GEMM ready to launch: what vc_gemm_plan checked and chose, for vc_gemm_run. */
typedef struct vc_gemm_launch_plan {
    /* The arguments, with a tap split resolved: splits is the groups that run (an automatic
     * split resolved as gemm.h says; 0: none). Between vc_gemm_plan and vc_gemm_run the caller
     * may set args.partial (the tap split's workspace, groups x m x n_cols floats) and
     * args.tile_order / args.order_blocks (taken where takes_order); nothing else. */
    vc_gemm_args args;
    int32_t config;      /* the configuration that runs; -1: m = 0, nothing to launch         */
    int32_t groups;      /* the tap split's groups (1: no split)                               */
    int32_t takes_order; /* 1: a tile order in args.tile_order would be taken                  */
    /* gemm/'s launch shape, set by vc_gemm_plan for vc_gemm_run                             */
    int32_t clusters;    /* the split runs as thread-block clusters (where the launch is let)  */
    int32_t epi_alias;   /* the epilogue stages in the pipeline's shared memory                */
    int32_t smem;        /* dynamic shared memory a CTA                                        */
    int64_t grid;        /* CTAs (without a tile order)                                        */
    /* The launch's CTA waves: its CTAs (a persistent grid: its tiles, a split's groups each)
     * over those of this launch the device holds at once, rounded up; 0 where not counted (the
     * warp-tile, FMA and dense-TMA kernels). For planners: a layer of one wave lasts about its
     * heaviest CTA, each further wave adds a CTA's chain. */
    int64_t waves;
} vc_gemm_launch_plan;

/* Checks the arguments and plans the GEMM with configuration `config` (an index into the
 * table, or -1 to let the library pick by shape and dtype) on the current device: the
 * configuration, the tap split's groups, whether a tile order would be taken, the launch shape.
 * Launches nothing; never synchronises. Returns VC_OK, or VC_ERR_INVALID_ARGUMENT (bad
 * arguments), VC_ERR_UNSUPPORTED (no compiled configuration fits) or VC_ERR_CUDA (a device
 * query failed), with a one-line message in err (may be NULL). */
vc_status vc_gemm_plan(const vc_gemm_args *args, int32_t config, vc_gemm_launch_plan *plan,
                       vc_err *err);

/* Launches a plan of vc_gemm_plan on `stream`. Returns VC_OK; VC_ERR_INVALID_ARGUMENT where a
 * tap split runs without a 16-byte aligned workspace or a tile order has the wrong block count;
 * VC_ERR_CUDA where a launch failed (the error cleared). Never synchronises. */
vc_status vc_gemm_run(const vc_gemm_launch_plan *plan, struct CUstream_st *stream,
                      vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
