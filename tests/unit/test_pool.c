/* tests/unit/test_pool.c - pooling through the public API against a dense oracle: max and mean
 * over the present inputs of each output's receptive field (subm, strided and downsample maps),
 * evaluated on a dense [B, Z, Y, X] grid with an occupancy mask; global max/mean per batch item
 * (empty items give 0); bad input leaving *out and caller buffers untouched. */
#include "oracle.h"

/* ---- the dense oracle ---------------------------------------------------------------------- */

typedef struct pool_case {
    vc_map_type type;         /* SUBM, STRIDED or DOWNSAMPLE                                   */
    int32_t k[3], s[3], p[3], d[3];
    int32_t shape[3], B;
    int64_t n, channels;
    vc_dtype dt;
    vc_pool_mode mode;
    int prebuilt;
} pool_case;

static void out_shape_of(const pool_case *c, int32_t out[3])
{
    for (int a = 0; a < 3; a++) {
        if (c->type == VC_MAP_STRIDED)
            out[a] = (c->shape[a] + 2 * c->p[a] - c->d[a] * (c->k[a] - 1) - 1) / c->s[a] + 1;
        else if (c->type == VC_MAP_DOWNSAMPLE)
            out[a] = (c->shape[a] + c->s[a] - 1) / c->s[a];
        else
            out[a] = c->shape[a];
    }
}

static int32_t reads(const pool_case *c, int a, int32_t o, int32_t kk)
{
    int32_t ctr = (c->k[a] % 2) ? c->k[a] / 2 : 0;
    if (c->type == VC_MAP_SUBM) return o + (kk - c->k[a] / 2) * c->d[a];
    if (c->type == VC_MAP_STRIDED) return o * c->s[a] - c->p[a] + kk * c->d[a];
    return o * c->s[a] + (kk - ctr) * c->d[a];
}

/* Max / mean over the present inputs in each output's window; rows without any input get 0
 * and *empty counts them. */
static void dense_pool(const pool_case *c, const int32_t *in_coords, int64_t n_in,
                       const double *vals, const int32_t *out_coords, int64_t n_out, double *ref,
                       int64_t *empty)
{
    const int64_t C = c->channels;
    int64_t nsites = (int64_t)c->B * c->shape[0] * c->shape[1] * c->shape[2];
    int64_t *row = malloc(sizeof(int64_t) * (size_t)(nsites + 1));
    for (int64_t s = 0; s < nsites; s++) row[s] = -1;
    for (int64_t i = 0; i < n_in; i++) row[site(in_coords + 4 * i, c->shape)] = i;
    *empty = 0;
    for (int64_t r = 0; r < n_out; r++) {
        const int32_t *o = out_coords + 4 * r;
        int64_t cnt = 0;
        for (int64_t ch = 0; ch < C; ch++) ref[r * C + ch] = 0;
        for (int32_t kz = 0; kz < c->k[0]; kz++)
            for (int32_t ky = 0; ky < c->k[1]; ky++)
                for (int32_t kx = 0; kx < c->k[2]; kx++) {
                    int32_t q[4] = {o[0], reads(c, 0, o[1], kz), reads(c, 1, o[2], ky),
                                    reads(c, 2, o[3], kx)};
                    int ok = 1;
                    for (int a = 0; a < 3; a++)
                        if (q[a + 1] < 0 || q[a + 1] >= c->shape[a]) ok = 0;
                    if (!ok || row[site(q, c->shape)] < 0) continue;
                    const double *x = vals + row[site(q, c->shape)] * C;
                    for (int64_t ch = 0; ch < C; ch++) {
                        if (c->mode == VC_POOL_AVG) ref[r * C + ch] += x[ch];
                        else if (cnt == 0 || x[ch] > ref[r * C + ch]) ref[r * C + ch] = x[ch];
                    }
                    cnt++;
                }
        if (cnt == 0) (*empty)++;
        if (c->mode == VC_POOL_AVG && cnt > 0)
            for (int64_t ch = 0; ch < C; ch++) ref[r * C + ch] /= (double)cnt;
    }
    free(row);
}

/* Expected output set: SUBM = the input; STRIDED = sites reached through the kernel;
 * DOWNSAMPLE = unique floor(q / s); sorted by (b, z, y, x). */
static int64_t expected_set(const pool_case *c, const int32_t *in, int64_t n_in, int32_t **out)
{
    int32_t os[3];
    out_shape_of(c, os);
    int64_t nsites = (int64_t)c->B * os[0] * os[1] * os[2];
    unsigned char *hit = calloc((size_t)nsites + 1, 1);
    for (int64_t i = 0; i < n_in; i++) {
        const int32_t *q = in + 4 * i;
        if (c->type != VC_MAP_STRIDED) {
            int32_t p[4] = {q[0], q[1], q[2], q[3]};
            if (c->type == VC_MAP_DOWNSAMPLE)
                for (int a = 0; a < 3; a++) p[a + 1] = q[a + 1] / c->s[a];
            hit[site(p, os)] = 1;
            continue;
        }
        for (int32_t kz = 0; kz < c->k[0]; kz++)
            for (int32_t ky = 0; ky < c->k[1]; ky++)
                for (int32_t kx = 0; kx < c->k[2]; kx++) {
                    int32_t kk[3] = {kz, ky, kx}, p[4] = {q[0], 0, 0, 0};
                    int ok = 1;
                    for (int a = 0; a < 3; a++) {
                        int32_t num = q[a + 1] + c->p[a] - kk[a] * c->d[a];
                        p[a + 1] = num % c->s[a] == 0 ? num / c->s[a] : -1;
                        if (p[a + 1] < 0 || p[a + 1] >= os[a]) ok = 0;
                    }
                    if (ok) hit[site(p, os)] = 1;
                }
    }
    int64_t n = 0;
    for (int64_t s = 0; s < nsites; s++) n += hit[s];
    int32_t *co = malloc(sizeof(int32_t) * 4 * (size_t)(n + 1));
    int64_t r = 0;
    for (int64_t s = 0; s < nsites; s++) {
        if (!hit[s]) continue;
        int64_t v = s;
        co[r * 4 + 3] = (int32_t)(v % os[2]);
        v /= os[2];
        co[r * 4 + 2] = (int32_t)(v % os[1]);
        v /= os[1];
        co[r * 4 + 1] = (int32_t)(v % os[0]);
        co[r * 4 + 0] = (int32_t)(v / os[0]);
        r++;
    }
    free(hit);
    *out = co;
    return n;
}

static int64_t g_empty_rows; /* output rows with no input seen (DOWNSAMPLE only) */

/* ---- one case through the API -------------------------------------------------------------- */

static void run_case(vc_context *ctx, vc_rng *rng, const pool_case *c)
{
    char what[400];
    snprintf(what, sizeof what,
             "%s %s k(%d,%d,%d) s(%d,%d,%d) p(%d,%d,%d) d(%d,%d,%d) shape(%d,%d,%d) B%d n%lld "
             "C%lld %s prebuilt%d", c->mode == VC_POOL_MAX ? "max" : "avg",
             c->type == VC_MAP_SUBM ? "subm" : c->type == VC_MAP_STRIDED ? "strided" : "down",
             c->k[0], c->k[1], c->k[2], c->s[0], c->s[1], c->s[2], c->p[0], c->p[1], c->p[2],
             c->d[0], c->d[1], c->d[2], c->shape[0], c->shape[1], c->shape[2], c->B,
             (long long)c->n, (long long)c->channels, dt_name(c->dt), c->prebuilt);
    int fails0 = vc_t_fail;
    int64_t n = 0;
    int32_t *xc = rand_coords(rng, c->shape, c->B, c->n, 0, &n);
    double *vals = malloc(sizeof(double) * (size_t)(n * c->channels + 1));
    void *buf = rand_buffer(rng, n * c->channels, c->dt, 4.0, vals);
    vc_coords *X = NULL;
    vc_tensor *in = NULL, *out = NULL;
    vc_kmap *map = NULL;
    int32_t *oc = NULL, *ec = NULL;
    float *got = NULL;
    double *ref = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, xc, n, VC_MEMORY_HOST, c->shape, c->B, &X));
    if (!X) goto done;
    CHECK_OK(ctx, vc_tensor_create(ctx, X, c->channels, c->dt, buf, VC_MEMORY_HOST, &in));
    if (!in) goto done;
    vc_pool_desc d = VC_POOL_DESC_INIT;
    d.mode = c->mode;
    d.map.type = c->type;
    for (int a = 0; a < 3; a++) {
        d.map.kernel[a] = c->k[a];
        d.map.stride[a] = c->s[a];
        d.map.padding[a] = c->p[a];
        d.map.dilation[a] = c->d[a];
    }
    if (c->prebuilt) {
        CHECK_OK(ctx, vc_kmap_build(ctx, X, &d.map, &map));
        d.kmap = map;
    }
    CHECK_OK(ctx, vc_pool_forward(ctx, &d, in, &out));
    if (!out) goto done;

    vc_tensor_info ti;
    vc_coords_info ci;
    CHECK_OK(ctx, vc_tensor_get_info(out, &ti));
    CHECK_OK(ctx, vc_coords_get_info(ti.coords, &ci));
    CHECK_MSG(ti.channels == c->channels && ti.dtype == c->dt, "%s: channels/dtype", what);
    int32_t os[3];
    out_shape_of(c, os);
    CHECK_MSG(ci.spatial_shape[0] == os[0] && ci.spatial_shape[1] == os[1] &&
              ci.spatial_shape[2] == os[2] && ci.batch_size == c->B, "%s: out shape", what);
    if (c->type == VC_MAP_SUBM) CHECK_MSG(ti.coords == X, "%s: subm output set", what);
    int64_t n_out = ti.count;
    oc = malloc(sizeof(int32_t) * 4 * (size_t)(n_out + 1));
    CHECK_OK(ctx, vc_coords_copy_out(ctx, ti.coords, oc, VC_MEMORY_HOST));
    int64_t n_exp = expected_set(c, xc, n, &ec);
    if (c->type == VC_MAP_SUBM) memcpy(ec, xc, sizeof(int32_t) * 4 * (size_t)n);
    CHECK_MSG(n_out == n_exp && !memcmp(oc, ec, sizeof(int32_t) * 4 *
                                        (size_t)(n_out < n_exp ? n_out : n_exp)),
              "%s: output coordinates (%lld rows, want %lld)", what, (long long)n_out,
              (long long)n_exp);

    int64_t m = n_out * c->channels;
    got = malloc(sizeof(float) * (size_t)(m + 1));
    for (int64_t i = 0; i < m; i++) got[i] = NAN;
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, out, got, VC_DTYPE_FP32, VC_MEMORY_HOST));
    ref = malloc(sizeof(double) * (size_t)(m + 1));
    int64_t empty = 0;
    dense_pool(c, xc, n, vals, oc, n_out, ref, &empty);
    /* Rows without inputs occur only where a DOWNSAMPLE kernel does not cover the stride
     * (k1s2: odd sites map to an output that never reads them); they must be 0. */
    if (c->type != VC_MAP_DOWNSAMPLE)
        CHECK_MSG(empty == 0, "%s: %lld output rows have no input", what, (long long)empty);
    g_empty_rows += empty;
    if (c->mode == VC_POOL_MAX) { /* a max of stored values is exact */
        int64_t bad = 0;
        for (int64_t i = 0; i < m; i++) bad += (double)got[i] != ref[i];
        CHECK_MSG(bad == 0, "%s: %lld max values differ", what, (long long)bad);
    } else {
        double tol = c->dt == VC_DTYPE_FP32 ? 1e-6 : 1e-2;
        double err = vc_rel_err(got, ref, m);
        CHECK_MSG(err <= tol, "%s: rel err %.3g > %.0e", what, err, tol);
    }

done:
    if (vc_t_fail != fails0) fprintf(stderr, "  case: %s\n", what);
    vc_tensor_destroy(out);
    vc_tensor_destroy(in);
    vc_kmap_destroy(map);
    vc_coords_destroy(X);
    free(xc);
    free(vals);
    free(buf);
    free(oc);
    free(ec);
    free(got);
    free(ref);
}

static const int64_t CHANNELS[] = {1, 3, 4, 5, 7, 17};

static pool_case base_case(vc_map_type t, vc_pool_mode mode)
{
    pool_case c;
    memset(&c, 0, sizeof c);
    c.type = t;
    c.mode = mode;
    for (int a = 0; a < 3; a++) {
        c.k[a] = t == VC_MAP_DOWNSAMPLE ? 2 : 3;
        c.s[a] = t == VC_MAP_SUBM ? 1 : 2;
        c.p[a] = t == VC_MAP_STRIDED ? 1 : 0;
        c.d[a] = 1;
    }
    c.shape[0] = 6;
    c.shape[1] = 5;
    c.shape[2] = 7;
    c.B = 2;
    c.n = 50;
    c.channels = 5;
    c.dt = VC_DTYPE_FP32;
    return c;
}

static int geom_ok(const pool_case *c)
{
    int32_t os[3];
    out_shape_of(c, os);
    for (int a = 0; a < 3; a++) {
        if (os[a] < 1) return 0;
        if (c->type == VC_MAP_STRIDED &&
            c->shape[a] + 2 * c->p[a] - c->d[a] * (c->k[a] - 1) - 1 < 0)
            return 0;
    }
    return 1;
}

static void test_map_pooling(vc_context *ctx, vc_rng *rng)
{
    static const vc_map_type types[] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE};
    static const vc_dtype dts[] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    static const int64_t ns[] = {0, 1, 31, 33, 120};
    for (int t = 0; t < 3; t++)
        for (int m = 0; m < 2; m++) {
            for (int i = 0; i < 5; i++)
                for (int dt = 0; dt < 3; dt++) {
                    pool_case c = base_case(types[t], (vc_pool_mode)m);
                    c.n = ns[i];
                    c.dt = dts[dt];
                    c.prebuilt = (i + dt) % 2;
                    run_case(ctx, rng, &c);
                }
            for (int ch = 0; ch < 6; ch++) {
                pool_case c = base_case(types[t], (vc_pool_mode)m);
                c.channels = CHANNELS[ch];
                run_case(ctx, rng, &c);
            }
        }
    /* k3s2 downsample (centred), non-cubic kernels */
    for (int m = 0; m < 2; m++) {
        pool_case c = base_case(VC_MAP_DOWNSAMPLE, (vc_pool_mode)m);
        c.k[0] = c.k[1] = c.k[2] = 3;
        run_case(ctx, rng, &c);
        c = base_case(VC_MAP_SUBM, (vc_pool_mode)m);
        c.k[1] = c.k[2] = 1;
        run_case(ctx, rng, &c);
        c = base_case(VC_MAP_STRIDED, (vc_pool_mode)m);
        c.k[0] = c.k[2] = 1;
        c.p[0] = c.p[2] = 0;
        run_case(ctx, rng, &c);
    }
    /* random geometries */
    for (int it = 0; it < 150; it++) {
        pool_case c = base_case(types[vc_rng_int(rng, 3)], (vc_pool_mode)vc_rng_int(rng, 2));
        for (int tries = 0; tries < 100; tries++) {
            for (int a = 0; a < 3; a++) {
                c.shape[a] = 1 + (int32_t)vc_rng_int(rng, 7);
                c.k[a] = c.type == VC_MAP_SUBM ? 1 + 2 * (int32_t)vc_rng_int(rng, 3)
                                               : 1 + (int32_t)vc_rng_int(rng, 5);
                c.s[a] = c.type == VC_MAP_SUBM ? 1 : 1 + (int32_t)vc_rng_int(rng, 3);
                c.p[a] = c.type == VC_MAP_STRIDED ? (int32_t)vc_rng_int(rng, 3) : 0;
                c.d[a] = 1 + (int32_t)vc_rng_int(rng, 2);
            }
            if (geom_ok(&c)) break;
        }
        if (!geom_ok(&c)) continue;
        c.B = 1 + (int32_t)vc_rng_int(rng, 3);
        int64_t total = (int64_t)c.B * c.shape[0] * c.shape[1] * c.shape[2];
        c.n = total * (10 + vc_rng_int(rng, 31)) / 100;
        c.channels = CHANNELS[vc_rng_int(rng, 6)];
        c.dt = dts[vc_rng_int(rng, 3)];
        c.prebuilt = (int)vc_rng_int(rng, 2);
        run_case(ctx, rng, &c);
    }
}

/* Global pooling, batch 3 with item 1 empty (and all empty, and batch index edges). */
static void test_global(vc_context *ctx, vc_rng *rng)
{
    static const vc_dtype dts[] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    const int32_t shape[3] = {5, 4, 6};
    for (int dt = 0; dt < 3; dt++)
        for (int m = 0; m < 2; m++)
            for (int ci = 0; ci < 6; ci++)
                for (int all_empty = 0; all_empty < 2; all_empty++) {
                    const int32_t B = 3;
                    const int64_t C = CHANNELS[ci];
                    int64_t n = 0;
                    int32_t *xc = rand_coords(rng, shape, B, all_empty ? 0 : 70, 2u, &n);
                    double *vals = malloc(sizeof(double) * (size_t)(n * C + 1));
                    void *buf = rand_buffer(rng, n * C, dts[dt], 4.0, vals);
                    vc_coords *X = NULL;
                    vc_tensor *in = NULL;
                    CHECK_OK(ctx, vc_coords_create(ctx, xc, n, VC_MEMORY_HOST, shape, B, &X));
                    CHECK_OK(ctx, vc_tensor_create(ctx, X, C, dts[dt], buf, VC_MEMORY_HOST,
                                                   &in));
                    float got[3 * 17];
                    double ref[3 * 17];
                    int64_t cnt[3] = {0, 0, 0};
                    for (int64_t i = 0; i < B * C; i++) {
                        got[i] = NAN;
                        ref[i] = 0;
                    }
                    for (int64_t i = 0; i < n; i++) {
                        int32_t b = xc[i * 4];
                        for (int64_t c = 0; c < C; c++) {
                            double v = vals[i * C + c];
                            if (m == VC_POOL_AVG) ref[b * C + c] += v;
                            else if (cnt[b] == 0 || v > ref[b * C + c]) ref[b * C + c] = v;
                        }
                        cnt[b]++;
                    }
                    for (int b = 0; b < B; b++)
                        for (int64_t c = 0; c < C && m == VC_POOL_AVG && cnt[b]; c++)
                            ref[b * C + c] /= (double)cnt[b];
                    CHECK(cnt[1] == 0 && (all_empty || (cnt[0] > 0 && cnt[2] > 0)));
                    if (in) {
                        CHECK_OK(ctx, vc_global_pool(ctx, (vc_pool_mode)m, in, got,
                                                     VC_MEMORY_HOST));
                        for (int64_t c = 0; c < C; c++) CHECK(got[1 * C + c] == 0.0f);
                        if (m == VC_POOL_MAX) {
                            int bad = 0;
                            for (int64_t i = 0; i < B * C; i++) bad += (double)got[i] != ref[i];
                            CHECK_MSG(bad == 0, "global max %s C%lld: %d values differ",
                                      dt_name(dts[dt]), (long long)C, bad);
                        } else {
                            double err = vc_rel_err(got, ref, B * C);
                            CHECK_MSG(err <= 1e-6, "global avg %s C%lld: rel err %.3g",
                                      dt_name(dts[dt]), (long long)C, err);
                        }
                    }
                    vc_tensor_destroy(in);
                    vc_coords_destroy(X);
                    free(xc);
                    free(vals);
                    free(buf);
                }
}

static void test_bad_input(vc_context *ctx, vc_rng *rng)
{
    const int32_t shape[3] = {6, 5, 7};
    int64_t n = 0, n2 = 0;
    int32_t *xc = rand_coords(rng, shape, 2, 40, 0, &n);
    int32_t *yc = rand_coords(rng, shape, 2, 40, 0, &n2);
    double vals[40 * 3];
    void *buf = rand_buffer(rng, 40 * 3, VC_DTYPE_FP32, 4.0, vals);
    vc_coords *X = NULL, *Y = NULL;
    vc_tensor *in = NULL;
    vc_kmap *mapY = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, xc, n, VC_MEMORY_HOST, shape, 2, &X));
    CHECK_OK(ctx, vc_coords_create(ctx, yc, n2, VC_MEMORY_HOST, shape, 2, &Y));
    CHECK_OK(ctx, vc_tensor_create(ctx, X, 3, VC_DTYPE_FP32, buf, VC_MEMORY_HOST, &in));
    vc_map_desc md = VC_MAP_DESC_INIT;
    CHECK_OK(ctx, vc_kmap_build(ctx, Y, &md, &mapY));
    if (!X || !Y || !in || !mapY) goto done;
    float before[40 * 3], after[40 * 3];
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, in, before, VC_DTYPE_FP32, VC_MEMORY_HOST));

    vc_tensor *const sentinel = (vc_tensor *)(uintptr_t)0x5a5a5a50u;
    for (int i = 0; i < 5; i++) {
        vc_pool_desc d = VC_POOL_DESC_INIT;
        vc_status want = VC_ERR_INVALID_ARGUMENT;
        const vc_tensor *input = in;
        const char *why = "";
        switch (i) {
        case 0: d.mode = (vc_pool_mode)9; why = "bad mode"; break;
        case 1: d.kmap = mapY; want = VC_ERR_SHAPE_MISMATCH; why = "map of another set"; break;
        case 2: d.map.kernel[0] = 4; why = "even subm kernel"; break;
        case 3: input = NULL; why = "NULL input"; break;
        case 4: d.map.type = VC_MAP_INVERSE; why = "inverse without forward map"; break;
        }
        vc_tensor *out = sentinel;
        vc_status s = vc_pool_forward(ctx, &d, input, &out);
        CHECK_MSG(s == want, "%s: got %s, want %s (%s)", why, vc_status_string(s),
                  vc_status_string(want), vc_context_last_error(ctx));
        CHECK_MSG(out == sentinel, "%s: *out changed", why);
    }
    {
        vc_pool_desc d = VC_POOL_DESC_INIT;
        CHECK_STATUS(ctx, vc_pool_forward(ctx, &d, in, NULL), VC_ERR_INVALID_ARGUMENT);
        float dst[2 * 3];
        for (int i = 0; i < 6; i++) dst[i] = 123.0f;
        CHECK_STATUS(ctx, vc_global_pool(ctx, (vc_pool_mode)5, in, dst, VC_MEMORY_HOST),
                     VC_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(ctx, vc_global_pool(ctx, VC_POOL_MAX, NULL, dst, VC_MEMORY_HOST),
                     VC_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(ctx, vc_global_pool(ctx, VC_POOL_MAX, in, NULL, VC_MEMORY_HOST),
                     VC_ERR_INVALID_ARGUMENT);
        int untouched = 1;
        for (int i = 0; i < 6; i++) untouched &= dst[i] == 123.0f;
        CHECK_MSG(untouched, "a failed vc_global_pool wrote to dst");
    }
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, in, after, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(!memcmp(before, after, sizeof before));

done:
    vc_kmap_destroy(mapY);
    vc_tensor_destroy(in);
    vc_coords_destroy(X);
    vc_coords_destroy(Y);
    free(xc);
    free(yc);
    free(buf);
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_pool");
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    if (!ctx) TEST_END();
    test_map_pooling(ctx, &rng);
    printf("downsample output rows with no input (checked to be 0): %lld\n",
           (long long)g_empty_rows);
    test_global(ctx, &rng);
    test_bad_input(ctx, &rng);
    CHECK_OK(ctx, vc_context_destroy(ctx));
    TEST_END();
}
