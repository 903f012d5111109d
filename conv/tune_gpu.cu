// conv/tune_gpu.cu - vc_conv_gpu_tune (conv/conv_gpu.h): the measuring loop of the tuner. It
// runs the real convolution (vc_conv_gpu) with forced choices, so what it times is what a
// tuned layer runs, operand staging and tap-split workspace included. A bucket's choice must
// hold for every layer of the bucket: candidates are found on the first member, ranked by
// their worst ratio over all members, and the finalist is kept only where interleaved A/B
// rounds against the planner's choice show it faster beyond their spread on every member.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "conv/conv_gpu.h"
#include "conv/tune.h"
#include "gemm/gemm.h"

static_assert(VC_TUNE_MAX_SPLIT == VC_GEMM_MAX_SPLITS, "a tune entry's split is a GEMM's");

namespace {

const int kWarm = 2;       // launches before the timed ones (lazy module loads, pool growth)
const int kMaxRuns = 64;   // timed launches a candidate, at most
const int kMaxCands = 512; // distinct choices of one sweep, at most (far more than compiled)
const int kShort = 3;      // the sweep's fastest, timed on every other member
const int kSplits[] = {0, 1, 2, 3, 4, 6, 8}; // 0: the planner's rule for the configuration

int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b ? 1 : 0;
}

// The median of v[0..n) (sorts v).
double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
    *ms = median_of(v, runs);
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

const Choice kPlanner = {-1, 0, false, false};

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

// The candidates of a bucket: explicit choices (the configuration and the groups they ran
// with on the first member, so every member runs the same), each with its worst ratio to the
// planner's time over the members timed so far.
struct Cands {
    Choice c[kMaxCands];
    vc_conv_choice ran[kMaxCands];
    double ratio[kMaxCands];
    int n;
};

// Adds the choice that ran as `ran` (with the switches of c) unless it is the planner's own
// or one already listed; 1 where it was added.
int add_cand(Cands *k, const Choice &c, const vc_conv_choice &ran, double ratio,
             const vc_conv_choice &pl)
{
    const Choice e = {ran.config, ran.groups, c.no_order, c.two_pass};
    if (!e.no_order && !e.two_pass && ran.config == pl.config && ran.groups == pl.groups)
        return 0;
    for (int i = 0; i < k->n; i++)
        if (k->c[i].cfg == e.cfg && k->c[i].split == e.split &&
            k->c[i].no_order == e.no_order && k->c[i].two_pass == e.two_pass)
            return 0;
    if (k->n == kMaxCands) return 0;
    k->c[k->n] = e;
    k->ran[k->n] = ran;
    k->ratio[k->n++] = ratio;
    return 1;
}

// The sweep on the first member: every configuration of the layer's dtype and math, with
// every split that applies, into k.
vc_status sweep(const Timing &t, const vc_engine_options &o, int runs, const vc_conv_choice &pl,
                double p_ms, vc_conv_tune_result *res, Cands *k, vc_err *err)
{
    const vc_kmap_data *m = t.a->map;
    const bool half = t.a->in_dtype == VC_DTYPE_FP16 || t.a->in_dtype == VC_DTYPE_BF16;
    const vc_gemm_math math = half ? VC_GEMM_MATH_DEFAULT
                                   : t.tf32 ? VC_GEMM_MATH_TF32 : VC_GEMM_MATH_FP32;
    const int n_splits = half && m->volume > 1 ? (int)(sizeof kSplits / sizeof kSplits[0]) : 1;
    const vc_gemm_config *tab = NULL;
    const int32_t n_cfg = vc_gemm_configs(&tab);
    for (int32_t cfg = 0; cfg < n_cfg; cfg++) {
        if (tab[cfg].ab_dtype != (vc_gemm_dtype)t.a->in_dtype || tab[cfg].math != math) continue;
        for (int si = 0; si < n_splits; si++) {
            double ms = 0.0;
            vc_conv_choice ran;
            const Choice c = {cfg, kSplits[si], false, false};
            const vc_status st = time_choice(t, forced(o, c), runs, &ms, &ran, err);
            if (st == VC_ERR_UNSUPPORTED) continue;
            if (st != VC_OK) return st;
            res->candidates += add_cand(k, c, ran, ms / p_ms, pl);
        }
    }
    return VC_OK;
}

// The schedule switches of a choice that ran as `ran`: without the tile order it took, with its
// clustered tap split in two passes, and both; each timed on the first member, into k.
vc_status refine(const Timing &t, const vc_engine_options &o, int runs, const vc_conv_choice &ran,
                 const vc_conv_choice &pl, double p_ms, vc_conv_tune_result *res, Cands *k,
                 vc_err *err)
{
    for (int v = 1; v < 4; v++) {
        const Choice c = {ran.config, ran.groups, (v & 1) != 0, (v & 2) != 0};
        if ((c.no_order && !ran.order) || (c.two_pass && !ran.clusters)) continue;
        double ms = 0.0;
        vc_conv_choice again;
        const vc_status st = time_choice(t, forced(o, c), runs, &ms, &again, err);
        if (st == VC_ERR_UNSUPPORTED) continue;
        if (st != VC_OK) return st;
        res->candidates += add_cand(k, c, again, ms / p_ms, pl);
    }
    return VC_OK;
}

// The index of the candidate of least ratio; -1 where k is empty.
int best_cand(const Cands *k)
{
    int b = -1;
    for (int i = 0; i < k->n; i++)
        if (b < 0 || k->ratio[i] < k->ratio[b]) b = i;
    return b;
}

// The shortlist: the kShort candidates of least ratio on the first member, faster than the
// planner's by more than margin there; their indices into sl, the count returned.
int shortlist(const Cands *k, double margin, int sl[kShort])
{
    int n = 0;
    bool taken[kMaxCands] = {false};
    for (int j = 0; j < kShort; j++) {
        int b = -1;
        for (int i = 0; i < k->n; i++)
            if (!taken[i] && k->ratio[i] < 1.0 - margin && (b < 0 || k->ratio[i] < k->ratio[b]))
                b = i;
        if (b < 0) break;
        taken[b] = true;
        sl[n++] = b;
    }
    return n;
}

// The interleaved A/B of member t: `rounds` rounds, each timing the planner's choice and c
// (`runs` launches each, their median), in the order ABBA... so a drift weighs on both alike;
// per round the ratio planner / c. Fills the member's medians, gain and spread.
vc_status confirm(const Timing &t, const vc_engine_options &o, int runs, int rounds,
                  const Choice &c, vc_conv_tune_member *mb, vc_err *err)
{
    double pa[kMaxRuns], ca[kMaxRuns], r[kMaxRuns], d[kMaxRuns];
    vc_conv_choice again;
    for (int i = 0; i < rounds; i++) {
        for (int side = 0; side < 2; side++) {
            const bool cand = (side == 1) != (i % 2 == 1);
            double ms = 0.0;
            const vc_status st =
                time_choice(t, forced(o, cand ? c : kPlanner), runs, &ms, &again, err);
            if (st != VC_OK) return st;
            (cand ? ca : pa)[i] = ms;
        }
        r[i] = ca[i] > 0.0 ? pa[i] / ca[i] : 0.0;
    }
    mb->gain = median_of(r, rounds);
    for (int i = 0; i < rounds; i++) d[i] = fabs(r[i] - mb->gain);
    mb->spread = mb->gain > 0.0 ? median_of(d, rounds) / mb->gain : 0.0;
    mb->planner_ms = median_of(pa, rounds);
    mb->tuned_ms = median_of(ca, rounds);
    return VC_OK;
}

// Ranks the shortlist over the other members: each candidate's ratio becomes its worst over
// all members (a candidate a member refuses is out).
vc_status rank_members(Timing *t, const vc_conv_args *const *a, int32_t n,
                       const vc_engine_options &o, int runs, const double *p_ms, Cands *k,
                       const int *sl, int n_sl, vc_err *err)
{
    for (int m = 1; m < n; m++) {
        t->a = a[m];
        for (int j = 0; j < n_sl; j++) {
            const int i = sl[j];
            double ms = 0.0;
            vc_conv_choice ran;
            const vc_status st = time_choice(*t, forced(o, k->c[i]), runs, &ms, &ran, err);
            if (st == VC_ERR_UNSUPPORTED) {
                k->ratio[i] = INFINITY;
                continue;
            }
            if (st != VC_OK) return st;
            if (ms / p_ms[m] > k->ratio[i]) k->ratio[i] = ms / p_ms[m];
        }
    }
    return VC_OK;
}

// Whether the A/B of every member shows the finalist faster beyond its spread and the margin.
bool kept_everywhere(const vc_conv_tune_member *mb, int32_t n, double margin)
{
    for (int32_t m = 0; m < n; m++) {
        const double need = fmax(margin, 2.0 * mb[m].spread);
        if (!(mb[m].gain > 1.0 + need)) return false;
    }
    return true;
}

} // namespace

extern "C" vc_status vc_conv_gpu_tune(const vc_conv_args *const *a, int32_t n, int tf32,
                                      const vc_engine_options *opt, int32_t runs, int32_t rounds,
                                      double margin, struct CUstream_st *stream,
                                      vc_conv_tune_result *res, vc_conv_tune_member *mb,
                                      vc_err *err)
{
    if (!a || n < 1 || n > VC_TUNE_MAX_MEMBERS || !res || !mb || runs < 1 || runs > kMaxRuns ||
        rounds < 1 || rounds > kMaxRuns || !(margin >= 0.0 && margin < 1.0))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv tune: bad arguments (members %d, in "
                       "[1, %d]; runs %d and rounds %d, in [1, %d]; margin %g, in [0, 1))",
                       (int)n, VC_TUNE_MAX_MEMBERS, (int)runs, (int)rounds, kMaxRuns, margin);
    const vc_engine_options o = opt ? *opt : vc_engine_options_default();
    *res = {0, -1, 1, 0, 0, 0, 0};
    for (int32_t m = 0; m < n; m++) mb[m] = {-1, 1, 0.0, 0.0, 0.0, 0.0};
    Timing t = {a[0], tf32, stream, {NULL, NULL}};
    if (cudaEventCreate(&t.ev[0]) != cudaSuccess || cudaEventCreate(&t.ev[1]) != cudaSuccess) {
        const cudaError_t e = cudaGetLastError();
        if (t.ev[0]) cudaEventDestroy(t.ev[0]);
        return vc_fail(err, VC_ERR_CUDA, "conv tune: cudaEventCreate: %s", cudaGetErrorString(e));
    }
    Cands *k = (Cands *)malloc(sizeof(Cands));
    double p_ms[VC_TUNE_MAX_MEMBERS];
    vc_conv_choice pl[VC_TUNE_MAX_MEMBERS];
    int sl[kShort], n_sl = 0, f = -1;
    vc_status st = k ? VC_OK
                     : vc_fail(err, VC_ERR_OUT_OF_MEMORY, "conv tune: out of host memory");
    // the planner's choice on every member: the baseline of every ratio
    for (int32_t m = 0; m < n && st == VC_OK; m++) {
        t.a = a[m];
        st = time_choice(t, forced(o, kPlanner), runs, &p_ms[m], &pl[m], err);
        mb[m].planner_config = pl[m].config;
        mb[m].planner_groups = pl[m].groups;
        mb[m].planner_ms = mb[m].tuned_ms = p_ms[m];
        if (st == VC_OK && !(p_ms[m] > 0.0)) p_ms[m] = 1e-6;
    }
    res->candidates = 1;
    if (st != VC_OK || pl[0].config < 0) goto done; // no GEMM ran (no pairs): nothing to choose
    // the configurations and splits on the first member, then the schedule switches of the
    // planner's choice and of the sweep's fastest
    t.a = a[0];
    k->n = 0;
    st = sweep(t, o, runs, pl[0], p_ms[0], res, k, err);
    if (st == VC_OK) st = refine(t, o, runs, pl[0], pl[0], p_ms[0], res, k, err);
    f = best_cand(k);
    if (st == VC_OK && f >= 0 && !k->c[f].no_order && !k->c[f].two_pass)
        st = refine(t, o, runs, k->ran[f], pl[0], p_ms[0], res, k, err);
    if (st == VC_OK) n_sl = shortlist(k, margin, sl);
    if (st != VC_OK || n_sl == 0) goto done;
    // the shortlist on the other members; the finalist has the least worst ratio
    st = rank_members(&t, a, n, o, runs, p_ms, k, sl, n_sl, err);
    f = -1;
    for (int j = 0; j < n_sl; j++)
        if (f < 0 || k->ratio[sl[j]] < k->ratio[f]) f = sl[j];
    if (st != VC_OK || !(k->ratio[f] < 1.0 - margin)) goto done;
    res->finalist_config = k->c[f].cfg;
    res->finalist_groups = k->c[f].split;
    res->finalist_no_order = k->c[f].no_order;
    res->finalist_two_pass = k->c[f].two_pass;
    res->rounds = rounds;
    for (int32_t m = 0; m < n && st == VC_OK; m++) {
        t.a = a[m];
        st = confirm(t, o, runs, rounds, k->c[f], &mb[m], err);
    }
    if (st == VC_OK && kept_everywhere(mb, n, margin)) res->kept = 1;
done:
    free(k);
    cudaEventDestroy(t.ev[0]);
    cudaEventDestroy(t.ev[1]);
    return st;
}
