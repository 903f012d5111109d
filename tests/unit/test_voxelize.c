/* tests/unit/test_voxelize.c - CPU voxelization (conv/voxelize_cpu.c) against a brute-force
 * oracle written here: each point's voxel computed on its own, points grouped by sorting their
 * indices by (b, z, y, x, index), means in double, the cap chosen by first point index.
 * Also: exact boundaries, non-finite points, the cap, 16-bit outputs, N = 0 and 1, bad
 * descriptors and points, the KITTI preset, and the public API on a CPU context. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "voxelize/voxelize.h"
#include "core/dtype.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"
#include "voxelize_testutil.h"

/* ---- helpers ---------------------------------------------------------------------------- */

#define CHECK_VS(expr, expected)                                                               \
    do {                                                                                       \
        vc_status s_ = (expr);                                                                 \
        CHECK_MSG(s_ == (expected), "%s returned %d, expected %d (%s)", #expr, (int)s_,        \
                  (int)(expected), err.msg);                                                   \
    } while (0)

/* ---- the oracle ------------------------------------------------------------------------- */

typedef struct orc_pt {
    int32_t c[4]; /* b, z, y, x */
    int64_t idx;
} orc_pt;

static int orc_cmp(const void *a, const void *b)
{
    const orc_pt *p = a, *q = b;
    for (int i = 0; i < 4; i++)
        if (p->c[i] != q->c[i]) return p->c[i] < q->c[i] ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

typedef struct orc_vox {
    int32_t c[4];
    int64_t first, count, start; /* start: first entry in the sorted point list */
} orc_vox;

static int orc_vox_cmp_first(const void *a, const void *b)
{
    const orc_vox *p = a, *q = b;
    return (p->first > q->first) - (p->first < q->first);
}

static int orc_vox_cmp_coord(const void *a, const void *b)
{
    const orc_vox *p = a, *q = b;
    for (int i = 0; i < 4; i++)
        if (p->c[i] != q->c[i]) return p->c[i] < q->c[i] ? -1 : 1;
    return 0;
}

typedef struct orc_result {
    int64_t n, channels;
    int32_t *coords;  /* [n, 4]        */
    double *feat;     /* [n, channels] */
    int32_t shape[3];
    int32_t batch_size;
    vc_voxelize_stats stats;
} orc_result;

static void orc_free(orc_result *r)
{
    free(r->coords);
    free(r->feat);
    memset(r, 0, sizeof *r);
}

/* Brute force, assuming valid input (SKIP semantics for non-finite points). */
static void oracle(const vc_voxelize_desc *d, const float *pts, int64_t n, int dim,
                   const int32_t *batch, orc_result *r)
{
    memset(r, 0, sizeof *r);
    int32_t shp[3]; /* x, y, z */
    for (int a = 0; a < 3; a++) {
        volatile float ext = d->range[a + 3] - d->range[a];
        volatile float q = ext / d->voxel_size[a];
        shp[a] = (int32_t)roundf(q);
    }
    r->shape[0] = shp[2];
    r->shape[1] = shp[1];
    r->shape[2] = shp[0];
    int32_t maxb = 0;
    for (int64_t i = 0; i < n; i++)
        if (batch && batch[i] > maxb) maxb = batch[i];
    r->batch_size = d->batch_size > 0 ? d->batch_size : maxb + 1;

    orc_pt *list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
    int64_t m = 0;
    r->stats.points_in = n;
    for (int64_t i = 0; i < n; i++) {
        const float *p = pts + i * dim;
        if (isnan(p[0]) || isnan(p[1]) || isnan(p[2]) || isinf(p[0]) || isinf(p[1]) ||
            isinf(p[2])) {
            r->stats.points_nonfinite++;
            continue;
        }
        int64_t c[3];
        int ok = 1;
        for (int a = 0; a < 3; a++) {
            volatile float t = p[a] - d->range[a];
            volatile float q = t / d->voxel_size[a];
            double f = floor((double)q); /* q is a float: floor in double is exact */
            if (f < 0 || f >= shp[a]) ok = 0;
            else c[a] = (int64_t)f;
        }
        if (!ok) {
            r->stats.points_out_of_range++;
            continue;
        }
        list[m].c[0] = batch ? batch[i] : 0;
        list[m].c[1] = (int32_t)c[2];
        list[m].c[2] = (int32_t)c[1];
        list[m].c[3] = (int32_t)c[0];
        list[m].idx = i;
        m++;
    }
    qsort(list, (size_t)m, sizeof *list, orc_cmp);
    orc_vox *vox = malloc((size_t)(m > 0 ? m : 1) * sizeof *vox);
    int64_t nv = 0;
    for (int64_t j = 0; j < m; j++) {
        if (j == 0 || memcmp(list[j].c, list[j - 1].c, sizeof list[j].c) != 0) {
            memcpy(vox[nv].c, list[j].c, sizeof vox[nv].c);
            vox[nv].first = list[j].idx; /* smallest index: sorted by index within a voxel */
            vox[nv].count = 0;
            vox[nv].start = j;
            nv++;
        }
        vox[nv - 1].count++;
    }
    r->stats.voxels_total = nv;
    int64_t kept = nv;
    if (d->max_voxels > 0 && kept > d->max_voxels) {
        qsort(vox, (size_t)nv, sizeof *vox, orc_vox_cmp_first);
        kept = d->max_voxels;
        qsort(vox, (size_t)kept, sizeof *vox, orc_vox_cmp_coord);
    }
    r->stats.voxels_kept = kept;
    r->n = kept;
    r->channels = d->reduce == VC_REDUCE_COUNT ? 1 : dim;
    r->coords = malloc((size_t)(kept > 0 ? kept : 1) * 4 * sizeof *r->coords);
    r->feat = malloc((size_t)(kept > 0 ? kept : 1) * (size_t)r->channels * sizeof *r->feat);
    for (int64_t v = 0; v < kept; v++) {
        memcpy(r->coords + v * 4, vox[v].c, 4 * sizeof(int32_t));
        r->stats.points_used += vox[v].count;
        double *f = r->feat + v * r->channels;
        if (d->reduce == VC_REDUCE_COUNT) {
            f[0] = (double)vox[v].count;
        } else if (d->reduce == VC_REDUCE_FIRST) {
            for (int c = 0; c < dim; c++) f[c] = pts[vox[v].first * dim + c];
        } else {
            for (int c = 0; c < dim; c++) {
                double s = 0;
                for (int64_t j = 0; j < vox[v].count; j++)
                    s += pts[list[vox[v].start + j].idx * dim + c];
                f[c] = s / (double)vox[v].count;
            }
        }
    }
    free(list);
    free(vox);
}

/* Compares a result with the oracle; returns the number of mismatches (and CHECKs them). */
static int compare(const char *what, const vc_voxels *got, const vc_voxelize_stats *gs,
                   const orc_result *ref, vc_dtype dtype)
{
    int bad = 0;
#define CMP(cond, ...)                                                                         \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            bad++;                                                                             \
            CHECK_MSG(cond, __VA_ARGS__);                                                      \
        }                                                                                      \
    } while (0)
    CMP(got->n == ref->n, "%s: n %lld vs %lld", what, (long long)got->n, (long long)ref->n);
    CMP(got->channels == ref->channels, "%s: channels", what);
    CMP(memcmp(got->shape, ref->shape, sizeof got->shape) == 0, "%s: shape %d %d %d vs %d %d %d",
        what, got->shape[0], got->shape[1], got->shape[2], ref->shape[0], ref->shape[1],
        ref->shape[2]);
    CMP(got->batch_size == ref->batch_size, "%s: batch_size %d vs %d", what, got->batch_size,
        ref->batch_size);
    CMP(gs->points_in == ref->stats.points_in, "%s: points_in", what);
    CMP(gs->points_used == ref->stats.points_used, "%s: points_used %lld vs %lld", what,
        (long long)gs->points_used, (long long)ref->stats.points_used);
    CMP(gs->points_out_of_range == ref->stats.points_out_of_range,
        "%s: points_out_of_range %lld vs %lld", what, (long long)gs->points_out_of_range,
        (long long)ref->stats.points_out_of_range);
    CMP(gs->points_nonfinite == ref->stats.points_nonfinite, "%s: points_nonfinite", what);
    CMP(gs->voxels_total == ref->stats.voxels_total, "%s: voxels_total %lld vs %lld", what,
        (long long)gs->voxels_total, (long long)ref->stats.voxels_total);
    CMP(gs->voxels_kept == ref->stats.voxels_kept, "%s: voxels_kept", what);
    if (bad) return bad;
    if (ref->n > 0) {
        CMP(got->coords && got->features, "%s: NULL arrays", what);
        if (bad) return bad;
    }
    int coord_bad = 0;
    for (int64_t i = 0; i < ref->n * 4 && !coord_bad; i++)
        if (got->coords[i] != ref->coords[i]) coord_bad = 1;
    CMP(!coord_bad, "%s: coordinates differ", what);
    double tol = dtype == VC_DTYPE_FP32 ? 1e-6 : dtype == VC_DTYPE_FP16 ? 1e-3 : 8e-3;
    int64_t feat_bad = 0, first_bad = -1;
    for (int64_t i = 0; i < ref->n * ref->channels; i++) {
        double a = vc_load_f32(got->features, dtype, i), e = ref->feat[i];
        double lim = tol * fabs(e) + (dtype == VC_DTYPE_FP16 ? 1e-7 : 1e-37);
        if (!(fabs(a - e) <= lim)) {
            if (first_bad < 0) first_bad = i;
            feat_bad++;
        }
    }
    CMP(feat_bad == 0, "%s: %lld features differ, first at %lld: %g vs %.9g", what,
        (long long)feat_bad, (long long)first_bad,
        first_bad >= 0 ? (double)vc_load_f32(got->features, dtype, first_bad) : 0.0,
        first_bad >= 0 ? ref->feat[first_bad] : 0.0);
#undef CMP
    if (!bad) vc_t_pass++;
    return bad;
}

/* Runs the CPU voxelizer and the oracle on the same input and compares them. */
static void run_case(const char *what, const vc_voxelize_desc *d, const float *pts, int64_t n,
                     int dim, const int32_t *batch)
{
    vc_points p = make_points(pts, n, dim, batch, VC_MEMORY_HOST);
    vc_voxels got;
    memset(&got, 0, sizeof got);
    vc_voxelize_stats gs;
    memset(&gs, 0xab, sizeof gs);
    vc_err err = {{0}};
    vc_status s = vc_voxelize_cpu(d, &p, NULL, &got, &gs, &err);
    CHECK_MSG(s == VC_OK, "%s: status %d (%s)", what, (int)s, err.msg);
    if (s != VC_OK) return;
    orc_result ref;
    oracle(d, pts, n, dim, batch, &ref);
    compare(what, &got, &gs, &ref, d->dtype);
    orc_free(&ref);
    vc_voxels_free(&got);
}

/* ---- random clouds ---------------------------------------------------------------------- */

/* A cloud clustered on a small grid so voxels hold many points, with some points outside the
 * range, exact duplicates, and points exactly on voxel (the first five planes) and range
 * boundaries (scenes.h). */
static float *random_cloud(vc_rng *rng, const vc_voxelize_desc *d, int64_t n, int dim)
{
    return scene_random_points(rng, d, n, dim, 5);
}

static void test_random(vc_rng *rng)
{
    const float range[6] = {-1.0f, -2.0f, 0.5f, 1.2f, 1.0f, 2.0f};
    const vc_dtype dtypes[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    const int64_t sizes[] = {1, 2, 31, 33, 500, 3000};
    int iter = 0;
    for (int r = 0; r < 3; r++) {
        for (int bs = 1; bs <= 3; bs++) {
            for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
                int64_t n = sizes[si];
                int dim = 3 + (int)vc_rng_int(rng, 3);
                vc_voxelize_desc d = make_desc(0.25f, 0.3f, 0.2f, range, (vc_reduce)r);
                d.dtype = dtypes[iter % 3];
                /* batch_size given or inferred */
                d.batch_size = (iter % 2) ? bs : 0;
                float *pts = random_cloud(rng, &d, n, dim);
                int32_t *batch = NULL;
                if (bs > 1) {
                    batch = malloc((size_t)n * sizeof *batch);
                    for (int64_t i = 0; i < n; i++) batch[i] = (int32_t)vc_rng_int(rng, bs);
                }
                char what[128];
                snprintf(what, sizeof what, "random reduce=%d batch=%d n=%lld dim=%d dtype=%d",
                         r, bs, (long long)n, dim, (int)d.dtype);
                run_case(what, &d, pts, n, dim, batch);
                /* the same with a cap */
                d.max_voxels = 1 + vc_rng_int(rng, n > 10 ? n / 4 : 3);
                snprintf(what, sizeof what, "random capped max=%lld reduce=%d batch=%d n=%lld",
                         (long long)d.max_voxels, r, bs, (long long)n);
                run_case(what, &d, pts, n, dim, batch);
                free(pts);
                free(batch);
                iter++;
            }
        }
    }
}

/* Non-finite points mixed in: SKIP matches the oracle; ERROR names the first bad point. */
static void test_nonfinite(vc_rng *rng)
{
    const float range[6] = {0, 0, 0, 2, 2, 2};
    vc_voxelize_desc d = make_desc(0.5f, 0.5f, 0.5f, range, VC_REDUCE_MEAN);
    const int64_t n = 400;
    const int dim = 4;
    float *pts = random_cloud(rng, &d, n, dim);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
        if (vc_rng_int(rng, 10) == 0) {
            pts[i * dim + vc_rng_int(rng, 3)] = bad[vc_rng_int(rng, 3)];
            if (first_bad < 0) first_bad = i;
        }
    }
    /* a NaN in an extra column is not a non-finite point */
    pts[(n - 1) * dim + 3] = NAN;
    pts[(n - 1) * dim + 0] = 1.0f;
    pts[(n - 1) * dim + 1] = 1.0f;
    pts[(n - 1) * dim + 2] = 1.0f;
    /* Oracle comparison without the NaN extra column (means would be NaN, which the comparison
     * rejects), then the extra column case on its own. */
    run_case("nonfinite skip", &d, pts, n - 1, dim, NULL);

    vc_points p = make_points(pts, n, dim, NULL, VC_MEMORY_HOST);
    vc_voxels out;
    memset(&out, 0x5a, sizeof out);
    vc_voxels before = out;
    vc_voxelize_stats st;
    memset(&st, 0x5a, sizeof st);
    vc_voxelize_stats st_before = st;
    vc_err err = {{0}};
    d.nonfinite = VC_NONFINITE_ERROR;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    char want[64];
    snprintf(want, sizeof want, "point %lld ", (long long)first_bad);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message '%s' should name %s", err.msg, want);
    CHECK(memcmp(&out, &before, sizeof out) == 0);
    CHECK(memcmp(&st, &st_before, sizeof st) == 0);

    /* A NaN extra column in a voxel: SKIP keeps the point; the voxel's mean is NaN. */
    d.nonfinite = VC_NONFINITE_SKIP;
    float one[4] = {1.0f, 1.0f, 1.0f, NAN};
    p = make_points(one, 1, 4, NULL, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 1 && st.points_nonfinite == 0 && isnan(((float *)out.features)[3]));
    vc_voxels_free(&out);

    /* All points non-finite. */
    float allbad[6] = {NAN, 0, 0, 0, INFINITY, 0};
    p = make_points(allbad, 2, 3, NULL, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 0 && st.points_nonfinite == 2 && st.points_used == 0 && out.batch_size == 1);
    vc_voxels_free(&out);
    free(pts);
}

/* Exact boundaries: min is inside (voxel 0), max is outside; just below min is outside. */
static void test_boundaries(void)
{
    const float range[6] = {0, 0, 0, 1, 1, 1};
    vc_voxelize_desc d = make_desc(0.25f, 0.25f, 0.25f, range, VC_REDUCE_COUNT);
    const float pts[] = {
        0.0f, 0.0f, 0.0f,            /* voxel (0,0,0)                      */
        1.0f, 0.5f, 0.5f,            /* x == max: out                      */
        0.5f, 1.0f, 0.5f,            /* y == max: out                      */
        0.5f, 0.5f, 1.0f,            /* z == max: out                      */
        0.25f, 0.5f, 0.75f,          /* exact boundaries: x 1, y 2, z 3    */
        0.99999994f, 0.0f, 0.0f,     /* largest float below 1: x voxel 3   */
        -1e-7f, 0.0f, 0.0f,          /* just below min: out                */
        -0.0f, -0.0f, -0.0f,         /* negative zero is min: (0,0,0)      */
    };
    vc_points p = make_points(pts, 8, 3, NULL, VC_MEMORY_HOST);
    vc_voxels out;
    vc_voxelize_stats st;
    vc_err err = {{0}};
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.shape[0] == 4 && out.shape[1] == 4 && out.shape[2] == 4);
    CHECK(st.points_out_of_range == 4 && st.points_used == 4);
    CHECK(out.n == 3);
    if (out.n == 3) {
        const int32_t want[12] = {0, 0, 0, 0, 0, 0, 0, 3, 0, 3, 2, 1};
        CHECK(memcmp(out.coords, want, sizeof want) == 0);
        const float *f = out.features;
        CHECK(f[0] == 2.0f && f[1] == 1.0f && f[2] == 1.0f);
    }
    vc_voxels_free(&out);

    /* A negative range and a voxel size that does not divide it: shape rounds. */
    const float range2[6] = {-3.0f, -3.0f, -3.0f, 0.0f, 0.0f, 0.0f};
    d = make_desc(0.7f, 0.5f, 2.0f, range2, VC_REDUCE_FIRST);
    /* x: 3/0.7 = 4.29 -> 4 (voxels up to -0.2); z: 3/2 = 1.5 -> 2 (round half away) */
    const float pts2[] = {
        -0.1f, -0.1f, -0.1f, /* x index 4: out (range rounds down to 4 voxels) */
        -0.3f, -0.1f, -0.1f, /* x index 3, y 5, z 1                              */
    };
    p = make_points(pts2, 2, 3, NULL, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.shape[0] == 2 && out.shape[1] == 6 && out.shape[2] == 4);
    CHECK(out.n == 1 && st.points_out_of_range == 1);
    if (out.n == 1) {
        const int32_t want[4] = {0, 1, 5, 3};
        CHECK(memcmp(out.coords, want, sizeof want) == 0);
        CHECK(((float *)out.features)[0] == -0.3f);
    }
    vc_voxels_free(&out);

    /* Division, not a multiply by the reciprocal: x = 0x1.4cccccp+0 (one ulp below 1.3f) over
     * 0.1f gives 12.99999..., floor 12; x * (1 / 0.1f) would give 13. */
    const float range3[6] = {0, 0, 0, 2, 2, 2};
    d = make_desc(0.1f, 0.1f, 0.1f, range3, VC_REDUCE_COUNT);
    const float pts3[3] = {0x1.4cccccp+0f, 0.05f, 0.05f};
    p = make_points(pts3, 1, 3, NULL, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 1 && out.coords && out.coords[3] == 12);
    vc_voxels_free(&out);
}

/* Duplicates of one point: one voxel; MEAN of equal values is that value exactly. */
static void test_duplicates(void)
{
    const float range[6] = {0, 0, 0, 10, 10, 10};
    float pts[100 * 4];
    for (int i = 0; i < 100; i++) {
        pts[i * 4 + 0] = 3.3f;
        pts[i * 4 + 1] = 4.4f;
        pts[i * 4 + 2] = 5.5f;
        pts[i * 4 + 3] = 0.1f;
    }
    for (int r = 0; r < 3; r++) {
        vc_voxelize_desc d = make_desc(1.0f, 1.0f, 1.0f, range, (vc_reduce)r);
        vc_points p = make_points(pts, 100, 4, NULL, VC_MEMORY_HOST);
        vc_voxels out;
        vc_voxelize_stats st;
        vc_err err = {{0}};
        CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
        CHECK(out.n == 1 && st.points_used == 100 && st.voxels_total == 1);
        if (out.n == 1) {
            const int32_t want[4] = {0, 5, 4, 3};
            CHECK(memcmp(out.coords, want, sizeof want) == 0);
            const float *f = out.features;
            if (r == VC_REDUCE_COUNT)
                CHECK(out.channels == 1 && f[0] == 100.0f);
            else
                CHECK(out.channels == 4 && f[0] == 3.3f && f[1] == 4.4f && f[2] == 5.5f &&
                      f[3] == 0.1f);
        }
        vc_voxels_free(&out);
    }
}

/* The cap keeps the voxels whose first point comes earliest, output sorted by coordinate. */
static void test_cap(void)
{
    const float range[6] = {0, 0, 0, 4, 4, 4};
    vc_voxelize_desc d = make_desc(1.0f, 1.0f, 1.0f, range, VC_REDUCE_COUNT);
    const float pts[] = {
        3.5f, 0.5f, 0.5f, /* A: x 3 */
        2.5f, 0.5f, 0.5f, /* B: x 2 */
        3.6f, 0.6f, 0.6f, /* A */
        0.5f, 0.5f, 0.5f, /* C: x 0 (smallest coordinate, dropped by the cap) */
        1.5f, 0.5f, 0.5f, /* D */
        2.6f, 0.5f, 0.5f, /* B */
        0.6f, 0.5f, 0.5f, /* C */
    };
    vc_points p = make_points(pts, 7, 3, NULL, VC_MEMORY_HOST);
    vc_voxels out;
    vc_voxelize_stats st;
    vc_err err = {{0}};
    d.max_voxels = 2;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 2 && st.voxels_total == 4 && st.voxels_kept == 2 && st.points_used == 4);
    if (out.n == 2) {
        const int32_t want[8] = {0, 0, 0, 2, 0, 0, 0, 3};
        CHECK(memcmp(out.coords, want, sizeof want) == 0);
        const float *f = out.features;
        CHECK(f[0] == 2.0f && f[1] == 2.0f);
    }
    vc_voxels_free(&out);
    d.max_voxels = 4; /* exactly the total: no voxel dropped */
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 4 && st.points_used == 7);
    vc_voxels_free(&out);
    d.max_voxels = 100;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 4 && st.voxels_kept == 4);
    vc_voxels_free(&out);
}

/* N = 0 and N = 1, and batch size inference. */
static void test_small(void)
{
    const float range[6] = {0, 0, 0, 1, 1, 1};
    vc_voxelize_desc d = make_desc(0.1f, 0.1f, 0.1f, range, VC_REDUCE_MEAN);
    vc_points p = make_points(NULL, 0, 4, NULL, VC_MEMORY_HOST);
    vc_voxels out;
    vc_voxelize_stats st;
    vc_err err = {{0}};
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 0 && out.channels == 4 && out.batch_size == 1);
    CHECK(out.shape[0] == 10 && out.shape[1] == 10 && out.shape[2] == 10);
    CHECK(st.points_in == 0 && st.points_used == 0 && st.voxels_total == 0 &&
          st.voxels_kept == 0 && st.points_out_of_range == 0 && st.points_nonfinite == 0);
    vc_voxels_free(&out);
    d.batch_size = 3;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, NULL, &err), VC_OK);
    CHECK(out.n == 0 && out.batch_size == 3);
    vc_voxels_free(&out);

    const float one[4] = {0.55f, 0.25f, 0.95f, 7.0f};
    const int32_t b5 = 5;
    d.batch_size = 0;
    p = make_points(one, 1, 4, &b5, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 1 && out.batch_size == 6 && st.points_used == 1);
    if (out.n == 1) {
        CHECK(out.coords[0] == 5 && out.coords[1] == 9 && out.coords[2] == 2 &&
              out.coords[3] == 5);
        const float *f = out.features;
        CHECK(f[0] == 0.55f && f[1] == 0.25f && f[2] == 0.95f && f[3] == 7.0f);
    }
    vc_voxels_free(&out);

    /* batch indices of dropped points still count toward the inferred batch size */
    const float two[6] = {0.5f, 0.5f, 0.5f, 5.0f, 0.5f, 0.5f};
    const int32_t bb[2] = {0, 4};
    p = make_points(two, 2, 3, bb, VC_MEMORY_HOST);
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    CHECK(out.n == 1 && out.batch_size == 5 && st.points_out_of_range == 1);
    vc_voxels_free(&out);
}

/* fp16 and bf16 outputs hold the fp32 result rounded to nearest even. */
static void test_half(void)
{
    const float range[6] = {0, 0, 0, 2, 2, 2};
    const float pts[] = {0.1f, 0.2f, 0.3f, 1000.123f, 0.4f, 0.2f, 0.3f, -3.3f,
                         1.5f, 1.5f, 1.5f, 70000.0f};
    const vc_dtype dts[2] = {VC_DTYPE_FP16, VC_DTYPE_BF16};
    for (int t = 0; t < 2; t++) {
        vc_voxelize_desc d = make_desc(1.0f, 1.0f, 1.0f, range, VC_REDUCE_MEAN);
        d.dtype = dts[t];
        vc_points p = make_points(pts, 3, 4, NULL, VC_MEMORY_HOST);
        vc_voxels out;
        vc_err err = {{0}};
        CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, NULL, &err), VC_OK);
        CHECK(out.n == 2);
        if (out.n == 2) {
            const uint16_t *h = out.features;
            float m[8] = {(float)(((double)0.1f + (double)0.4f) / 2), 0.2f, 0.3f,
                          (float)(((double)1000.123f + (double)-3.3f) / 2), 1.5f, 1.5f, 1.5f,
                          70000.0f};
            int same = 1;
            for (int i = 0; i < 8; i++) {
                uint16_t want = t == 0 ? vc_f32_to_f16(m[i]) : vc_f32_to_bf16(m[i]);
                if (h[i] != want) same = 0;
            }
            CHECK_MSG(same, "dtype %d: 16-bit features differ", (int)dts[t]);
            if (t == 0) CHECK(h[7] == 0x7c00u); /* 70000 overflows fp16 to +inf */
        }
        vc_voxels_free(&out);
    }
}

/* Bad descriptors and bad points: an error, a message, and nothing written. */
static void test_bad(void)
{
    const float range[6] = {0, 0, 0, 1, 1, 1};
    const float pts[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.2f, 0.2f, 0.2f, 0.2f};
    const int32_t batch_neg[2] = {0, -1};
    const int32_t batch_big[2] = {0, 2};
    vc_voxels out;
    memset(&out, 0x77, sizeof out);
    const vc_voxels before = out;
    vc_voxelize_stats st;
    memset(&st, 0x77, sizeof st);
    const vc_voxelize_stats st_before = st;
    vc_err err;
    vc_points p = make_points(pts, 2, 4, NULL, VC_MEMORY_HOST);
    int32_t shape[3] = {-5, -5, -5};

    struct {
        float v[3];
        float r[6];
        vc_status want;
    } descs[] = {
        {{0.0f, 0.1f, 0.1f}, {0, 0, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},
        {{0.1f, -0.1f, 0.1f}, {0, 0, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},
        {{0.1f, 0.1f, NAN}, {0, 0, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},
        {{INFINITY, 0.1f, 0.1f}, {0, 0, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},
        {{0.1f, 0.1f, 0.1f}, {0, 0, 0, 0, 1, 1}, VC_ERR_INVALID_ARGUMENT},   /* max == min */
        {{0.1f, 0.1f, 0.1f}, {0, 2, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},   /* max < min */
        {{0.1f, 0.1f, 0.1f}, {0, 0, NAN, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},
        {{0.1f, 0.1f, 0.1f}, {0, 0, 0, 1, INFINITY, 1}, VC_ERR_INVALID_ARGUMENT},
        {{0.1f, 0.1f, 5.0f}, {0, 0, 0, 1, 1, 1}, VC_ERR_INVALID_ARGUMENT},   /* round(0.2) = 0 */
        {{1e-9f, 0.1f, 0.1f}, {0, 0, 0, 1000, 1, 1}, VC_ERR_LIMIT},          /* 1e12 voxels */
        {{1e-30f, 0.1f, 0.1f}, {-3e38f, 0, 0, 3e38f, 1, 1}, VC_ERR_LIMIT},   /* inf voxels */
        {{1.0f, 1.0f, 1.0f}, {0, 0, 0, 1073741824.0f * 2, 1, 1}, VC_ERR_LIMIT}, /* 2^31 */
    };
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++) {
        vc_voxelize_desc d = make_desc(descs[i].v[0], descs[i].v[1], descs[i].v[2], descs[i].r,
                                       VC_REDUCE_MEAN);
        err.msg[0] = 0;
        vc_status s = vc_voxelize_check(&d, shape, &err);
        CHECK_MSG(s == descs[i].want, "desc %zu: check gave %d (%s)", i, (int)s, err.msg);
        CHECK_MSG(err.msg[0] != 0, "desc %zu: no message", i);
        CHECK(shape[0] == -5 && shape[1] == -5 && shape[2] == -5);
        s = vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err);
        CHECK_MSG(s == descs[i].want, "desc %zu: cpu gave %d (%s)", i, (int)s, err.msg);
    }
    /* 2^30 is the largest allowed extent per axis; three of them do not pack into 63 bits */
    {
        const float big[6] = {0, 0, 0, 1073741824.0f, 1073741824.0f, 1073741824.0f};
        vc_voxelize_desc d = make_desc(1.0f, 1.0f, 1.0f, big, VC_REDUCE_MEAN);
        CHECK_VS(vc_voxelize_check(&d, shape, &err), VC_OK);
        CHECK(shape[0] == 1073741824 && shape[1] == 1073741824 && shape[2] == 1073741824);
        CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_OUT_OF_RANGE);
    }

    vc_voxelize_desc good = make_desc(0.1f, 0.1f, 0.1f, range, VC_REDUCE_MEAN);
    vc_voxelize_desc d = good;
    d.reduce = (vc_reduce)3;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.reduce = (vc_reduce)-1;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.nonfinite = (vc_nonfinite)2;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.max_voxels = -1;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.batch_size = -2;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.dtype = VC_DTYPE_INT32;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.dtype = (vc_dtype)9;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    d = good;
    d.struct_size = 8;
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    CHECK_VS(vc_voxelize_cpu(NULL, &p, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    CHECK_VS(vc_voxelize_cpu(&good, NULL, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);

    /* bad points */
    vc_points q = p;
    q.dim = 2;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    q = p;
    q.count = -1;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    q = p;
    q.data = NULL;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    q = p;
    q.memory = VC_MEMORY_DEVICE;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    q = p;
    q.count = INT64_MAX / 2;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_LIMIT);
    q = p;
    q.batch = batch_neg;
    CHECK_VS(vc_voxelize_cpu(&good, &q, NULL, &out, &st, &err), VC_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(err.msg, "point 1 ") != NULL, "message '%s'", err.msg);
    d = good;
    d.batch_size = 2;
    q.batch = batch_big;
    CHECK_VS(vc_voxelize_cpu(&d, &q, NULL, &out, &st, &err), VC_ERR_OUT_OF_RANGE);
    CHECK_MSG(strstr(err.msg, "point 1 ") != NULL, "message '%s'", err.msg);
    /* none of the failures above wrote the outputs */
    CHECK(memcmp(&st, &st_before, sizeof st) == 0);
    CHECK(memcmp(&out, &before, sizeof out) == 0);
    d.batch_size = 3;
    CHECK_VS(vc_voxelize_cpu(&d, &q, NULL, &out, NULL, &err), VC_OK);
    CHECK(out.batch_size == 3 && out.n == 2);
    vc_voxels_free(&out);
    vc_voxels_free(NULL);
}

/* KITTI (SECOND) preset: voxel 0.05 x 0.05 x 0.1, range [0, -40, -3] .. [70.4, 40, 1]. */
static void test_kitti(vc_rng *rng)
{
    const float range[6] = {0.0f, -40.0f, -3.0f, 70.4f, 40.0f, 1.0f};
    vc_voxelize_desc d = make_desc(0.05f, 0.05f, 0.1f, range, VC_REDUCE_MEAN);
    int32_t shape[3];
    vc_err err = {{0}};
    CHECK_VS(vc_voxelize_check(&d, shape, &err), VC_OK);
    /* float32: 70.4f/0.05f = 1407.99998 -> 1408, 80/0.05f = 1599.99998 -> 1600,
       4/0.1f = 39.9999994 -> 40 */
    CHECK_MSG(shape[0] == 40 && shape[1] == 1600 && shape[2] == 1408, "shape %d %d %d",
              shape[0], shape[1], shape[2]);

    /* a scan-like cloud against the oracle, capped as SECOND does (16000 train voxels) */
    const int64_t n = 60000;
    float *pts = malloc((size_t)n * 4 * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *p = pts + i * 4;
        p[0] = 40.0f + 40.0f * vc_rng_float(rng);
        p[1] = 45.0f * vc_rng_float(rng);
        p[2] = -1.0f + 2.5f * vc_rng_float(rng);
        p[3] = 0.5f + 0.5f * vc_rng_float(rng);
    }
    run_case("kitti mean", &d, pts, n, 4, NULL);
    d.max_voxels = 16000;
    run_case("kitti capped", &d, pts, n, 4, NULL);
    free(pts);
}

/* 1M points: one run, timed loosely (the requirement is well under a second in Release). */
static void test_large(vc_rng *rng)
{
    const int64_t n = 1000000;
    const float range[6] = {0.0f, -40.0f, -3.0f, 70.4f, 40.0f, 1.0f};
    vc_voxelize_desc d = make_desc(0.05f, 0.05f, 0.1f, range, VC_REDUCE_MEAN);
    float *pts = malloc((size_t)n * 4 * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *p = pts + i * 4;
        p[0] = 35.2f + 36.0f * vc_rng_float(rng);
        p[1] = 41.0f * vc_rng_float(rng);
        p[2] = -1.0f + 2.1f * vc_rng_float(rng);
        p[3] = vc_rng_float(rng);
    }
    vc_points p = make_points(pts, n, 4, NULL, VC_MEMORY_HOST);
    vc_voxels out;
    vc_voxelize_stats st;
    vc_err err = {{0}};
    clock_t t0 = clock();
    CHECK_VS(vc_voxelize_cpu(&d, &p, NULL, &out, &st, &err), VC_OK);
    double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("1M points: %lld voxels in %.3f s (CPU time)\n", (long long)out.n, sec);
    CHECK(st.points_in == n && st.points_used + st.points_out_of_range == n);
    int sorted = 1;
    for (int64_t i = 1; i < out.n && sorted; i++) {
        const int32_t *a = out.coords + (i - 1) * 4, *b = out.coords + i * 4;
        int c = 0;
        for (int k = 0; k < 4 && !c; k++) c = (a[k] > b[k]) - (a[k] < b[k]);
        if (c >= 0) sorted = 0;
    }
    CHECK(sorted);
    vc_voxels_free(&out);
    free(pts);
}

/* Through the public API on a CPU context: the tensor matches the internal call. */
static void test_public_api(vc_rng *rng)
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    if (!ctx) return;
    const float range[6] = {-1.0f, -1.0f, -1.0f, 1.0f, 1.0f, 1.0f};
    vc_voxelize_desc d = make_desc(0.2f, 0.25f, 0.5f, range, VC_REDUCE_MEAN);
    d.dtype = VC_DTYPE_BF16;
    const int64_t n = 2000;
    float *pts = random_cloud(rng, &d, n, 5);
    int32_t *batch = malloc((size_t)n * sizeof *batch);
    for (int64_t i = 0; i < n; i++) batch[i] = (int32_t)vc_rng_int(rng, 2);
    vc_points p = make_points(pts, n, 5, batch, VC_MEMORY_HOST);

    vc_tensor *t = NULL;
    vc_voxelize_stats st;
    CHECK_OK(ctx, vc_voxelize(ctx, &d, &p, &t, &st));
    orc_result ref;
    oracle(&d, pts, n, 5, batch, &ref);
    if (t) {
        vc_tensor_info ti;
        vc_coords_info ci;
        CHECK_OK(ctx, vc_tensor_get_info(t, &ti));
        CHECK_OK(ctx, vc_coords_get_info(ti.coords, &ci));
        CHECK(ti.count == ref.n && ti.channels == 5 && ti.dtype == VC_DTYPE_BF16 &&
              ti.memory == VC_MEMORY_HOST);
        CHECK(ci.count == ref.n && ci.batch_size == ref.batch_size &&
              memcmp(ci.spatial_shape, ref.shape, sizeof ref.shape) == 0);
        vc_voxels got;
        memset(&got, 0, sizeof got);
        got.n = ti.count;
        got.channels = ti.channels;
        memcpy(got.shape, ci.spatial_shape, sizeof got.shape);
        got.batch_size = ci.batch_size;
        got.coords = malloc((size_t)(ti.count > 0 ? ti.count : 1) * 4 * sizeof(int32_t));
        got.features = malloc((size_t)(ti.count > 0 ? ti.count : 1) * 5 * sizeof(uint16_t));
        float *f32 = malloc((size_t)(ti.count > 0 ? ti.count : 1) * 5 * sizeof(float));
        CHECK_OK(ctx, vc_coords_copy_out(ctx, ti.coords, got.coords, VC_MEMORY_HOST));
        CHECK_OK(ctx, vc_tensor_copy_out(ctx, t, got.features, VC_DTYPE_BF16, VC_MEMORY_HOST));
        CHECK_OK(ctx, vc_tensor_copy_out(ctx, t, f32, VC_DTYPE_FP32, VC_MEMORY_HOST));
        compare("public api", &got, &st, &ref, VC_DTYPE_BF16);
        int same = 1;
        for (int64_t i = 0; i < ti.count * 5; i++)
            if (f32[i] != vc_bf16_to_f32(((uint16_t *)got.features)[i])) same = 0;
        CHECK(same);
        free(f32);
        vc_voxels_free(&got);
    }
    CHECK_OK(ctx, vc_tensor_destroy(t));

    /* errors come back with a message on the context, *out untouched */
    vc_tensor *t2 = (vc_tensor *)&d;
    d.voxel_size[1] = -1.0f;
    CHECK_STATUS(ctx, vc_voxelize(ctx, &d, &p, &t2, NULL), VC_ERR_INVALID_ARGUMENT);
    CHECK(t2 == (vc_tensor *)&d && strstr(vc_context_last_error(ctx), "voxel_size") != NULL);
    /* no points at all */
    d.voxel_size[1] = 0.25f;
    p = make_points(NULL, 0, 4, NULL, VC_MEMORY_HOST);
    t2 = NULL;
    CHECK_OK(ctx, vc_voxelize(ctx, &d, &p, &t2, &st));
    if (t2) {
        vc_tensor_info ti;
        CHECK_OK(ctx, vc_tensor_get_info(t2, &ti));
        CHECK(ti.count == 0 && ti.channels == 4 && st.points_in == 0);
    }
    CHECK_OK(ctx, vc_tensor_destroy(t2));
    orc_free(&ref);
    free(pts);
    free(batch);
    CHECK_OK(NULL, vc_context_destroy(ctx));
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_voxelize");
    test_boundaries();
    test_duplicates();
    test_cap();
    test_small();
    test_half();
    test_bad();
    test_nonfinite(&rng);
    test_random(&rng);
    test_kitti(&rng);
    test_large(&rng);
    test_public_api(&rng);
    TEST_END();
}
