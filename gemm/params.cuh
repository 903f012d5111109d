// gemm/params.cuh - what gemm/gemm.cu hands its kernels and launchers: the kernel parameters
// (Params), a planned launch (LaunchPlan), the schedule choices of a plan (Sched) and the limits
// they share.
#ifndef VC_GEMM_PARAMS_CUH
#define VC_GEMM_PARAMS_CUH

#include <stdint.h>

#include "gemm/gemm.h"

namespace vcg {

// Largest mask word count whose OR a CTA keeps; with more words (taps > 1024) masks are ignored,
// which gives the same result (a masked tap has only -1 gathers) at the cost of the skipping.
constexpr int kMaxMaskWords = 32;

struct Params {
    int64_t m;
    int32_t n_cols, k, taps;
    const void *a;
    int64_t a_rows;
    const int32_t *gather, *gather_rows, *row_map;
    const uint32_t *masks; // NULL when not used
    int32_t mask_words;
    const void *w;
    int32_t b_taps, b_tap0;
    void *c;
    int32_t c_dtype, accumulate;
    int32_t tap_lo, tap_hi; // the taps computed, [tap_lo, tap_hi) within [0, taps)
    const float *bias;
    const void *residual;
    int32_t res_dtype, act;
    float slope;
    int32_t pair_store; // C (and residual) rows allow 2-element vector accesses
    int32_t vec8;       // n_cols % 8 == 0 and C, residual, bias 16-byte aligned
    int32_t n_tiles;    // tiles along n; tile b covers n tile b % n_tiles, m tile b / n_tiles
    int64_t m_tiles;    // tiles along m
    int32_t gchunk;     // taps of gather indices a tensor-core CTA keeps in shared memory
    int32_t gstride;    // their row stride in int32 (odd: no bank conflicts)
    int32_t epi_alias;  // one tile per CTA: the epilogue stages its slabs in the pipeline's
                        // shared memory (set by launch_mma)
    int32_t splits;     // tap split (gemm.h). In the kernel, > 1: CTA b runs group
                        // b % splits of tile b / splits, and C is the fp32 workspace [splits,
                        // m, n_cols] (row group * m + i for logical row i) with no epilogue;
                        // gemm.cu's split_reduce_kernel then adds the groups and runs the
                        // epilogue. Given to launch_mma: < -1 asks it to choose up to -splits.
    float *partial;     // the workspace (host side: launch_mma makes it C)
    const int32_t *tile_order; // tile order (gemm.h), or NULL; in the kernel: set only where
                               // each tile has its own CTA and no tap split
    int64_t order_blocks;      // its blocks
    int32_t order_per;         // in the kernel: tiles of BM rows a block holds
    const int64_t *m_live;     // vc_gemm_args.m_live where the launch has masks, else NULL
    int64_t plan_tiles;        // tiles of vc_gemm_args.m_plan's rows: what the schedule plans on
};

// A launch as planned (vc_gemm_plan): the tap split's groups (1: none), whether they run as
// thread-block clusters, whether a given tile order is taken (gemm.h), whether the epilogue
// stages in the pipeline's shared memory, the CTAs (without a tile order), the dynamic shared
// memory a CTA, the CTA waves (vc_gemm_launch_plan.waves) and whether the launch may overlap
// the kernel before it (vc_gemm_args.overlap_prev: launch_mma and launch_warp honour it).
struct LaunchPlan {
    int splits;
    bool clusters;
    bool orderable;
    bool epi_alias;
    int64_t grid;
    int dyn;
    int64_t waves; // the launch's CTAs over those the device holds at once, rounded up (0: not
                   // counted, as by the plans without an occupancy query)
    bool overlap;
};

// The schedule choices of a plan (vc_gemm_args: force_order, two_pass_split).
struct Sched {
    bool force_order;
    bool two_pass;
};

// The tensor-core kernel's gather-index chunk: all taps up to 32, else 32 at a time.
constexpr int kGatherChunk = 32;

} // namespace vcg

#endif
