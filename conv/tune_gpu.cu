// conv/tune_gpu.cu - vc_conv_gpu_tune (conv/conv_gpu.h): the measuring loop of the tuner. It
// runs the real convolution (vc_conv_gpu) with forced choices, so what it times is what a
// tuned layer runs, operand staging and tap-split workspace included.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "conv/conv_gpu.h"
#include "conv/tune.h"
#include "gemm/gemm.h"

static_assert(VC_TUNE_MAX_SPLIT == VC_GEMM_MAX_SPLITS, "a tune entry's split is a GEMM's");

namespace {

const int kWarm = 2;      // launches before the timed ones (lazy module loads, pool growth)
const int kMaxRuns = 64;  // timed launches a candidate, at most
const int kSplits[] = {0, 1, 2, 3, 4, 6, 8}; // 0: the planner's rule for the configuration

int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b ? 1 : 0;
}

struct Timing {
    const vc_conv_args *a;
    int tf32;
    cudaStream_t s;
    cudaEvent_t ev[2];
};

// The median time of `runs` launches of the layer under options o (after kWarm launches), and
// what they ran. A refused choice returns its status (VC_ERR_UNSUPPORTED: skip it).
vc_status time_choice(const Timing &t, vc_engine_options o, int runs, double *ms,
                      vc_conv_choice *ran, vc_err *err)
{
    vc_conv_choice c = {0, -1, 1, 0, 0, 0};
    o.choice = &c;
    o.tune = NULL;
    double v[kMaxRuns];
    for (int i = -kWarm; i < runs; i++) {
        if (cudaEventRecord(t.ev[0], t.s) != cudaSuccess) goto cuda_fail;
        {
            const vc_status st = vc_conv_gpu(t.a, VC_ALGO_IMPLICIT_GEMM, t.tf32, &o, t.s, err);
            if (st != VC_OK) return st;
        }
        float f = 0.0f;
        if (cudaEventRecord(t.ev[1], t.s) != cudaSuccess ||
            cudaEventSynchronize(t.ev[1]) != cudaSuccess ||
            cudaEventElapsedTime(&f, t.ev[0], t.ev[1]) != cudaSuccess)
            goto cuda_fail;
        if (i >= 0) v[i] = f;
    }
    qsort(v, (size_t)runs, sizeof v[0], cmp_double);
    *ms = runs % 2 ? v[runs / 2] : 0.5 * (v[runs / 2 - 1] + v[runs / 2]);
    *ran = c;
    return VC_OK;
cuda_fail:
    const cudaError_t e = cudaGetLastError();
    return vc_fail(err, VC_ERR_CUDA, "conv tune: timing a launch: %s", cudaGetErrorString(e));
}

// A choice the tuner can force: a configuration, a tap split, and the schedule switches.
struct Choice {
    int32_t cfg, split;      // split as gemm.h's splits (0: the planner's rule for cfg)
    bool no_order, two_pass; // no tile order; the tap split in two passes, never as clusters
};

// Options that force choice c.
vc_engine_options forced(const vc_engine_options &o, const Choice &c)
{
    vc_engine_options f = o;
    f.gemm_config = c.cfg;
    f.tap_split = c.split;
    if (c.no_order) f.tile_order = 0;
    if (c.two_pass) f.cluster_split = 0;
    return f;
}

// The fastest choice found so far (valid false: none).
struct Best {
    bool valid;
    double ms;
    Choice c;
    vc_conv_choice ran;
};

void keep_if_faster(Best *b, double ms, const Choice &c, const vc_conv_choice &ran)
{
    if (!b->valid || ms < b->ms) *b = {true, ms, c, ran};
}

// The sweep: every configuration of the layer's dtype and math, with every split that applies;
// the fastest that is not the planner's own choice into *best.
vc_status sweep(const Timing &t, const vc_engine_options &o, int runs, const vc_conv_choice &pl,
                vc_conv_tune_result *res, Best *best, vc_err *err)
{
    const vc_kmap_data *m = t.a->map;
    const bool half = t.a->in_dtype == VC_DTYPE_FP16 || t.a->in_dtype == VC_DTYPE_BF16;
    const vc_gemm_math math = half ? VC_GEMM_MATH_DEFAULT
                                   : t.tf32 ? VC_GEMM_MATH_TF32 : VC_GEMM_MATH_FP32;
    const int n_splits = half && m->volume > 1 ? (int)(sizeof kSplits / sizeof kSplits[0]) : 1;
    const vc_gemm_config *tab = NULL;
    const int32_t n_cfg = vc_gemm_configs(&tab);
    // (config, groups) already timed: a forced split can resolve to what another one ran
    int32_t seen[2 * 8 * 128];
    int n_seen = 0;
    for (int32_t cfg = 0; cfg < n_cfg; cfg++) {
        if (tab[cfg].ab_dtype != (vc_gemm_dtype)t.a->in_dtype || tab[cfg].math != math) continue;
        for (int si = 0; si < n_splits; si++) {
            double ms = 0.0;
            vc_conv_choice ran;
            const Choice c = {cfg, kSplits[si], false, false};
            const vc_status st = time_choice(t, forced(o, c), runs, &ms, &ran, err);
            if (st == VC_ERR_UNSUPPORTED) continue;
            if (st != VC_OK) return st;
            if (ran.config == pl.config && ran.groups == pl.groups) continue;
            bool dup = false;
            for (int i = 0; i < n_seen && !dup; i++)
                dup = seen[2 * i] == ran.config && seen[2 * i + 1] == ran.groups;
            if (dup) continue;
            if (n_seen < (int)(sizeof seen / sizeof seen[0]) / 2) {
                seen[2 * n_seen] = ran.config;
                seen[2 * n_seen + 1] = ran.groups;
                n_seen++;
            }
            res->candidates++;
            keep_if_faster(best, ms, c, ran);
        }
    }
    return VC_OK;
}

// The schedule switches of a choice that ran as `ran`: without the tile order it took, with its
// clustered tap split in two passes, and both; each timed, the fastest kept in *best.
vc_status refine(const Timing &t, const vc_engine_options &o, int runs, const vc_conv_choice &ran,
                 vc_conv_tune_result *res, Best *best, vc_err *err)
{
    for (int v = 1; v < 4; v++) {
        const Choice c = {ran.config, ran.groups, (v & 1) != 0, (v & 2) != 0};
        if ((c.no_order && !ran.order) || (c.two_pass && !ran.clusters)) continue;
        double ms = 0.0;
        vc_conv_choice again;
        const vc_status st = time_choice(t, forced(o, c), runs, &ms, &again, err);
        if (st == VC_ERR_UNSUPPORTED) continue;
        if (st != VC_OK) return st;
        res->candidates++;
        keep_if_faster(best, ms, c, again);
    }
    return VC_OK;
}

} // namespace

extern "C" vc_status vc_conv_gpu_tune(const vc_conv_args *a, int tf32,
                                      const vc_engine_options *opt, int32_t runs, double margin,
                                      struct CUstream_st *stream, vc_conv_tune_result *res,
                                      vc_err *err)
{
    if (!a || !res || runs < 1 || runs > kMaxRuns || !(margin >= 0.0 && margin < 1.0))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv tune: bad arguments (runs %d, in "
                       "[1, %d]; margin %g, in [0, 1))", (int)runs, kMaxRuns, margin);
    const vc_engine_options o = opt ? *opt : vc_engine_options_default();
    *res = {0, -1, 1, 0.0, -1, 1, 0, 0, 0.0};
    Timing t = {a, tf32, stream, {NULL, NULL}};
    if (cudaEventCreate(&t.ev[0]) != cudaSuccess || cudaEventCreate(&t.ev[1]) != cudaSuccess) {
        const cudaError_t e = cudaGetLastError();
        if (t.ev[0]) cudaEventDestroy(t.ev[0]);
        return vc_fail(err, VC_ERR_CUDA, "conv tune: cudaEventCreate: %s", cudaGetErrorString(e));
    }
    const Choice planner = {-1, 0, false, false};
    vc_conv_choice pl = {0, -1, 1, 0, 0, 0}, again;
    Best best = {false, 0.0, planner, pl};
    double p2 = 0.0, b2 = 0.0;
    vc_status st = time_choice(t, forced(o, planner), runs, &res->planner_ms, &pl, err);
    if (st != VC_OK) goto done;
    res->candidates = 1;
    res->planner_config = pl.config;
    res->planner_groups = pl.groups;
    if (pl.config < 0) goto done; // no GEMM ran (no pairs): nothing to choose
    // the configurations and splits, then the schedule switches of the planner's choice and of
    // the sweep's best
    st = sweep(t, o, runs, pl, res, &best, err);
    if (st == VC_OK) st = refine(t, o, runs, pl, res, &best, err);
    if (st == VC_OK && best.valid && !best.c.no_order && !best.c.two_pass)
        st = refine(t, o, runs, best.ran, res, &best, err);
    if (st != VC_OK || !best.valid || !(best.ms < res->planner_ms * (1.0 - margin))) goto done;
    // The confirming round: the planner's choice and the candidate alternating, twice each.
    for (int r = 0; r < 2 && st == VC_OK; r++) {
        double pm = 0.0, bm = 0.0;
        const Choice c = {best.ran.config, best.ran.groups, best.c.no_order, best.c.two_pass};
        st = time_choice(t, forced(o, planner), runs, &pm, &again, err);
        if (st == VC_OK) st = time_choice(t, forced(o, c), runs, &bm, &again, err);
        p2 += pm;
        b2 += bm;
    }
    if (st != VC_OK) goto done;
    res->planner_ms = p2 / 2.0;
    if (b2 < p2 * (1.0 - margin)) {
        res->best_config = best.ran.config;
        res->best_groups = best.ran.groups;
        res->best_no_order = best.c.no_order;
        res->best_two_pass = best.c.two_pass;
        res->best_ms = b2 / 2.0;
    }
done:
    cudaEventDestroy(t.ev[0]);
    cudaEventDestroy(t.ev[1]);
    return st;
}
