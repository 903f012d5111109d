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
 *    gather_rows = row_map = perm (outputs sorted by mask), masks = the per-output masks so a CTA
 *    skips taps none of its rows uses; epilogue fused; no atomics: every C row is written once.
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

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Element types (same values as vc_dtype in include/voxconv.h, which gemm/ does not include). */
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
     * 1.25 waves of the CTAs the device holds (vc_gemm_takes_order); elsewhere ignored. NULL:
     * row order. */
    const int32_t *tile_order; /* [order_blocks] device, or NULL                                */
    int64_t order_blocks;      /* ceil(m / VC_GEMM_ORDER_ROWS) when tile_order is given          */
} vc_gemm_args;

/* Rows of a tile-order block (vc_gemm_args.tile_order). */
#define VC_GEMM_ORDER_ROWS 128

/* Most groups a tap split may use. */
#define VC_GEMM_MAX_SPLITS 16

/* 1 when tap splits on configuration `config` can run as thread-block clusters on the current
 * device (a small 16-bit tile with a cluster kernel, compute capability 9.0 or later, the
 * library built for it; splits of 2 to 8 groups, an automatic one rounded down: see splits
 * above), 0 when they run in two passes. For planners: the two-pass
 * split's second launch and workspace traffic are what a cluster split saves. */
int vc_gemm_split_in_clusters(int32_t config);

/* Sets *takes to 1 when vc_gemm_run of these arguments with `config` would take a tile order
 * if one were given (tile_order may be NULL here), else 0; same checks and return codes as
 * vc_gemm_run; launches nothing. For callers that build the order only where it is used. */
int vc_gemm_takes_order(const vc_gemm_args *args, int32_t config, int *takes, char *msg,
                        int32_t msg_len);

/* Testing only: on = 1 makes a given tile order taken whatever the waves (so that small
 * problems exercise it); 0 (the default) restores the rule above. Process-wide. */
void vc_gemm_debug_force_order(int on);

/* Testing and benchmarking: on = 0 makes every later tap split run as two passes through the
 * workspace (as on devices before compute capability 9.0); 1 (the default) lets it run as
 * clusters where it can. Process-wide. */
void vc_gemm_debug_cluster_split(int on);

/* The tile configurations compiled into the library, by name ("f16_128x64x32_s3" ...), for the
 * planner, the tuner and the benchmarks. */
typedef struct vc_gemm_config {
    const char *name;
    int32_t tile_m, tile_n, tile_k, stages, warps;
    vc_gemm_dtype ab_dtype;
    vc_gemm_math math;
} vc_gemm_config;

/* Number of compiled configurations and their table (static storage). */
int32_t vc_gemm_configs(const vc_gemm_config **table);

/* Launches the GEMM with configuration `config` (an index into the table, or -1 to let the
 * library pick by shape and dtype). Returns 0, or a negative code: -1 bad arguments (the
 * message says which), -2 no compiled configuration fits, -3 a CUDA launch error.
 * `msg` (may be NULL) receives a one-line explanation of a failure. Never synchronises. */
int vc_gemm_run(const vc_gemm_args *args, int32_t config, struct CUstream_st *stream, char *msg,
                int32_t msg_len);

/* The groups a tap split of these arguments would run on this device with `config` (as
 * vc_gemm_run; *groups = 1: no split), so that the caller sizes the workspace (partial may be
 * NULL here). Same checks and return codes as vc_gemm_run; launches nothing. */
int vc_gemm_split_groups(const vc_gemm_args *args, int32_t config, int32_t *groups, char *msg,
                         int32_t msg_len);

#ifdef __cplusplus
}
#endif

#endif
