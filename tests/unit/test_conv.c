/* tests/unit/test_conv.c - sparse convolution through the public API against a dense oracle:
 * the sparse input is scattered into a zero-filled [B, Z, Y, X, C] grid, a dense 3D
 * cross-correlation in double is evaluated at the output sites the library returns, and the
 * output coordinate sets are recomputed from the definitions of each map type (subm, strided,
 * downsample, transposed, inverse). Also: dtypes, epilogue (bias, ReLU, LeakyReLU, residual),
 * thread-count determinism, and bad input leaving caller buffers and *out untouched. */
#include "oracle.h"

static const char *type_name(vc_map_type t)
{
    static const char *n[] = {"subm", "strided", "downsample", "inverse", "transposed"};
    return (unsigned)t < 5 ? n[t] : "?";
}

/* ---- the dense oracle ---------------------------------------------------------------------- */

typedef struct geom {
    vc_map_type type;        /* of the layer; INVERSE uses fwd_type and the forward params    */
    vc_map_type fwd_type;    /* INVERSE: STRIDED or DOWNSAMPLE                                 */
    int32_t k[3], s[3], p[3], d[3];
} geom;

static int32_t volume(const geom *g) { return g->k[0] * g->k[1] * g->k[2]; }

/* Output spatial shape of a forward map type from the header's formulas. */
static void out_shape_of(vc_map_type t, const geom *g, const int32_t in[3], int32_t out[3])
{
    for (int a = 0; a < 3; a++) {
        switch (t) {
        case VC_MAP_STRIDED:
            out[a] = (in[a] + 2 * g->p[a] - g->d[a] * (g->k[a] - 1) - 1) / g->s[a] + 1;
            break;
        case VC_MAP_DOWNSAMPLE: out[a] = (in[a] + g->s[a] - 1) / g->s[a]; break;
        case VC_MAP_TRANSPOSED:
            out[a] = (in[a] - 1) * g->s[a] - 2 * g->p[a] + g->d[a] * (g->k[a] - 1) + 1;
            break;
        default: out[a] = in[a]; break;
        }
    }
}

/* The input coordinate (one axis) output o reads at kernel index kk, or INT32_MIN for none.
 * For INVERSE, "input" is the forward map's output p such that forward p reads o at kk. */
static int32_t reads(const geom *g, int a, int32_t o, int32_t kk)
{
    int32_t s = g->s[a], p = g->p[a], d = g->d[a], c = (g->k[a] % 2) ? g->k[a] / 2 : 0;
    int32_t num;
    switch (g->type) {
    case VC_MAP_SUBM: return o + (kk - g->k[a] / 2) * d;
    case VC_MAP_STRIDED: return o * s - p + kk * d;
    case VC_MAP_DOWNSAMPLE: return o * s + (kk - c) * d;
    case VC_MAP_TRANSPOSED:
        num = o + p - kk * d;
        return num % s == 0 ? num / s : INT32_MIN;
    case VC_MAP_INVERSE:
        num = g->fwd_type == VC_MAP_STRIDED ? o + p - kk * d : o - (kk - c) * d;
        return num % s == 0 ? num / s : INT32_MIN;
    }
    return INT32_MIN;
}

/* Dense conv in double evaluated at out_coords; in_vals [n_in, cin], w [cout, K, cin].
 * mag gets the sum of |terms| of each output, the scale of its fp32 rounding error. */
static void dense_conv(const geom *g, int32_t B, const int32_t in_shape[3],
                       const int32_t *in_coords, int64_t n_in, const double *in_vals,
                       int64_t cin, const double *w, int64_t cout, const int32_t *out_coords,
                       int64_t n_out, double *ref, double *mag)
{
    int64_t nsites = (int64_t)B * in_shape[0] * in_shape[1] * in_shape[2];
    double *grid = calloc((size_t)(nsites * cin + 1), sizeof(double));
    for (int64_t i = 0; i < n_in; i++)
        for (int64_t c = 0; c < cin; c++)
            grid[site(in_coords + 4 * i, in_shape) * cin + c] += in_vals[i * cin + c];
    const int32_t K = volume(g);
    for (int64_t r = 0; r < n_out; r++) {
        const int32_t *o = out_coords + 4 * r;
        for (int64_t co = 0; co < cout; co++) ref[r * cout + co] = mag[r * cout + co] = 0;
        for (int32_t kz = 0; kz < g->k[0]; kz++)
            for (int32_t ky = 0; ky < g->k[1]; ky++)
                for (int32_t kx = 0; kx < g->k[2]; kx++) {
                    int32_t q[4] = {o[0], reads(g, 0, o[1], kz), reads(g, 1, o[2], ky),
                                    reads(g, 2, o[3], kx)};
                    int ok = 1;
                    for (int a = 0; a < 3; a++)
                        if (q[a + 1] < 0 || q[a + 1] >= in_shape[a]) ok = 0;
                    if (!ok) continue;
                    const double *x = grid + site(q, in_shape) * cin;
                    int32_t k = (kz * g->k[1] + ky) * g->k[2] + kx;
                    for (int64_t co = 0; co < cout; co++) {
                        double acc = 0, am = 0;
                        for (int64_t ci = 0; ci < cin; ci++) {
                            acc += x[ci] * w[(co * K + k) * cin + ci];
                            am += fabs(x[ci] * w[(co * K + k) * cin + ci]);
                        }
                        ref[r * cout + co] += acc;
                        mag[r * cout + co] += am;
                    }
                }
    }
    free(grid);
}

/* Expected output set of a STRIDED, DOWNSAMPLE or TRANSPOSED map: the sites of [B, out_shape]
 * reached by some input, in (b, z, y, x) order. Returns the count; *out malloc'ed. */
static int64_t reached_set(vc_map_type t, const geom *g, int32_t B, const int32_t in_shape[3],
                           const int32_t *in, int64_t n_in, int32_t **out)
{
    int32_t os[3];
    out_shape_of(t, g, in_shape, os);
    int64_t nsites = (int64_t)B * os[0] * os[1] * os[2];
    unsigned char *hit = calloc((size_t)nsites + 1, 1);
    for (int64_t i = 0; i < n_in; i++) {
        const int32_t *q = in + 4 * i;
        if (t == VC_MAP_DOWNSAMPLE) {
            int32_t p[4] = {q[0], q[1] / g->s[0], q[2] / g->s[1], q[3] / g->s[2]};
            hit[site(p, os)] = 1;
            continue;
        }
        for (int32_t kz = 0; kz < g->k[0]; kz++)
            for (int32_t ky = 0; ky < g->k[1]; ky++)
                for (int32_t kx = 0; kx < g->k[2]; kx++) {
                    int32_t kk[3] = {kz, ky, kx}, p[4] = {q[0], 0, 0, 0};
                    int ok = 1;
                    for (int a = 0; a < 3; a++) {
                        int32_t v;
                        if (t == VC_MAP_STRIDED) {
                            int32_t num = q[a + 1] + g->p[a] - kk[a] * g->d[a];
                            v = num % g->s[a] == 0 ? num / g->s[a] : -1;
                        } else { /* TRANSPOSED */
                            v = q[a + 1] * g->s[a] - g->p[a] + kk[a] * g->d[a];
                        }
                        if (v < 0 || v >= os[a]) ok = 0;
                        p[a + 1] = v;
                    }
                    if (ok) hit[site(p, os)] = 1;
                }
    }
    int64_t n = 0;
    for (int64_t s = 0; s < nsites; s++) n += hit[s];
    int32_t *c = malloc(sizeof(int32_t) * 4 * (size_t)(n + 1));
    int64_t r = 0;
    for (int64_t s = 0; s < nsites; s++) {
        if (!hit[s]) continue;
        int64_t v = s;
        c[r * 4 + 3] = (int32_t)(v % os[2]);
        v /= os[2];
        c[r * 4 + 2] = (int32_t)(v % os[1]);
        v /= os[1];
        c[r * 4 + 1] = (int32_t)(v % os[0]);
        c[r * 4 + 0] = (int32_t)(v / os[0]);
        r++;
    }
    free(hit);
    *out = c;
    return n;
}

static int g_cases, g_zero_cases; /* cases with outputs, and those with an all-zero reference */

/* ---- one test case through the API --------------------------------------------------------- */

typedef struct conv_case {
    geom g;                   /* g.type: the layer's map type                                  */
    int32_t shape[3], B;
    int64_t n;                /* input rows (of the forward input for INVERSE)                 */
    int64_t cin, cout;
    vc_dtype in_dt, w_dt, out_dt, res_dt; /* out_dt -1: the input's dtype                    */
    int bias, residual, prebuilt;
    vc_activation act;
    float slope;
    vc_algo algo;
} conv_case;

static void describe(const conv_case *c, char *buf, size_t n)
{
    snprintf(buf, n,
             "%s%s k(%d,%d,%d) s(%d,%d,%d) p(%d,%d,%d) d(%d,%d,%d) shape(%d,%d,%d) B%d n%lld "
             "cin%lld cout%lld in %s w %s out %s bias%d act%d res%d(%s) prebuilt%d algo%d",
             type_name(c->g.type), c->g.type == VC_MAP_INVERSE ?
             (c->g.fwd_type == VC_MAP_STRIDED ? "(strided)" : "(downsample)") : "",
             c->g.k[0], c->g.k[1], c->g.k[2], c->g.s[0], c->g.s[1], c->g.s[2], c->g.p[0],
             c->g.p[1], c->g.p[2], c->g.d[0], c->g.d[1], c->g.d[2], c->shape[0], c->shape[1],
             c->shape[2], c->B, (long long)c->n, (long long)c->cin, (long long)c->cout,
             dt_name(c->in_dt), dt_name(c->w_dt),
             (int)c->out_dt < 0 ? "same" : dt_name(c->out_dt), c->bias, (int)c->act,
             c->residual, dt_name(c->res_dt), c->prebuilt, (int)c->algo);
}

static vc_map_desc map_desc_of(const geom *g, vc_map_type t)
{
    vc_map_desc d = VC_MAP_DESC_INIT;
    d.type = t;
    for (int a = 0; a < 3; a++) {
        d.kernel[a] = g->k[a];
        d.stride[a] = g->s[a];
        d.padding[a] = g->p[a];
        d.dilation[a] = g->d[a];
    }
    return d;
}

/* Runs one case on ctx; returns the output features as fp32 (malloc'ed, n_out rows) through
 * *result when not NULL, for the determinism checks. Returns 0 if the case could not run. */
/* The output coordinates of a case: the input set itself (SUBM; INVERSE: the forward input X)
 * or the set the kernel reaches from xc, on the expected grid. */
static void check_out_coords(const char *what, const conv_case *c, const vc_coords *X,
                             const int32_t *xc, const vc_tensor_info *ti,
                             const vc_coords_info *oi, const int32_t *out_coords, int64_t n_out)
{
    const geom *g = &c->g;
    int32_t *exp_coords = NULL;
    int32_t eshape[3];
    int64_t n_exp;
    if (g->type == VC_MAP_SUBM || g->type == VC_MAP_INVERSE) {
        /* outputs = the input set (SUBM) or the forward input set (INVERSE) */
        CHECK_MSG(ti->coords == X, "%s: output not on the expected coordinate set", what);
        n_exp = c->n;
        exp_coords = malloc(sizeof(int32_t) * 4 * (size_t)(n_exp + 1));
        memcpy(exp_coords, xc, sizeof(int32_t) * 4 * (size_t)n_exp);
        memcpy(eshape, c->shape, sizeof eshape);
    } else {
        n_exp = reached_set(g->type, g, c->B, c->shape, xc, c->n, &exp_coords);
        out_shape_of(g->type, g, c->shape, eshape);
    }
    CHECK_MSG(oi->spatial_shape[0] == eshape[0] && oi->spatial_shape[1] == eshape[1] &&
              oi->spatial_shape[2] == eshape[2], "%s: out shape (%d,%d,%d), want (%d,%d,%d)",
              what, oi->spatial_shape[0], oi->spatial_shape[1], oi->spatial_shape[2], eshape[0],
              eshape[1], eshape[2]);
    CHECK_MSG(n_out == n_exp && !memcmp(out_coords, exp_coords, sizeof(int32_t) * 4 *
                                        (size_t)(n_out < n_exp ? n_out : n_exp)),
              "%s: output coordinates differ (%lld rows, want %lld)", what, (long long)n_out,
              (long long)n_exp);
    free(exp_coords);
}

/* ref and mag (the dense oracle's sums and sums of |terms|) with the case's bias, residual and
 * activation applied. */
static void apply_epilogue(const conv_case *c, const float *bias, const double *res_vals,
                           int64_t n_out, double *ref, double *mag)
{
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t co = 0; co < c->cout; co++) {
            double v = ref[r * c->cout + co];
            if (c->bias) v += bias[co];
            if (res_vals) v += res_vals[r * c->cout + co];
            mag[r * c->cout + co] += (c->bias ? fabs(bias[co]) : 0) +
                                     (res_vals ? fabs(res_vals[r * c->cout + co]) : 0);
            if (c->act == VC_ACT_RELU && v < 0) v = 0;
            if (c->act == VC_ACT_LEAKY_RELU && v < 0) v *= c->slope;
            ref[r * c->cout + co] = v;
        }
}

/* fp32 results: ||out - ref|| <= 1e-6 ||ref||, or, where the terms cancel, <= 1e-6 times the
 * norm of the sums of |terms| (what fp32 accumulation error scales with). fp16/bf16 results:
 * 1e-2 ||ref|| (the final rounding alone is up to 2^-9 resp. 2^-8). */
static void check_features(const char *what, vc_dtype out_dt, const float *got, const double *ref,
                           const double *mag, int64_t n)
{
    double err = vc_rel_err(got, ref, n);
    if (out_dt == VC_DTYPE_FP32) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            double dv = isnan(got[i]) ? INFINITY : (double)got[i] - ref[i];
            num += dv * dv;
            den += mag[i] * mag[i];
        }
        double err_mag = den > 0 ? sqrt(num / den) : (num == 0 ? 0 : INFINITY);
        CHECK_MSG(err <= 1e-6 || err_mag <= 1e-6, "%s: rel err %.3g, vs |terms| %.3g > 1e-6",
                  what, err, err_mag);
    } else {
        CHECK_MSG(err <= 1e-2, "%s: rel err %.3g > 1e-2", what, err);
    }
}

static int run_case(vc_context *ctx, vc_rng *rng, const conv_case *c, float **result,
                    int64_t *result_n)
{
    char what[512];
    describe(c, what, sizeof what);
    int fails0 = vc_t_fail;
    const geom *g = &c->g;
    const int32_t K = volume(g);
    vc_dtype out_dt = (int)c->out_dt < 0 ? c->in_dt : c->out_dt;

    /* Input coordinate set X (the forward input for INVERSE). */
    int64_t n_sites;
    int32_t *xc = rand_coords(rng, c->shape, c->B, c->n, 0, &n_sites);
    vc_coords *X = NULL, *in_set = NULL;
    vc_kmap *fwd = NULL, *map = NULL;
    vc_tensor *in = NULL, *res = NULL, *out = NULL;
    int32_t *in_coords = NULL, *out_coords = NULL;
    double *in_vals = NULL, *w_vals = NULL, *res_vals = NULL, *ref = NULL, *mag = NULL;
    void *in_buf = NULL, *w_buf = NULL, *res_buf = NULL;
    float *bias = NULL, *got = NULL;
    int64_t n_in = c->n, n_out = 0;
    int32_t in_shape[3] = {c->shape[0], c->shape[1], c->shape[2]};
    int ran = 0;

    CHECK_OK(ctx, vc_coords_create(ctx, xc, c->n, VC_MEMORY_HOST, c->shape, c->B, &X));
    if (!X) goto done;
    in_set = X;
    in_coords = xc;
    if (g->type == VC_MAP_INVERSE) {
        vc_map_desc fd = map_desc_of(g, g->fwd_type);
        CHECK_OK(ctx, vc_kmap_build(ctx, X, &fd, &fwd));
        if (!fwd) goto done;
        vc_kmap_info fi;
        vc_coords_info ci;
        CHECK_OK(ctx, vc_kmap_get_info(fwd, &fi));
        CHECK_OK(ctx, vc_coords_get_info(fi.out_coords, &ci));
        in_set = fi.out_coords;
        n_in = ci.count;
        out_shape_of(g->fwd_type, g, c->shape, in_shape);
        CHECK(ci.spatial_shape[0] == in_shape[0] && ci.spatial_shape[1] == in_shape[1] &&
              ci.spatial_shape[2] == in_shape[2]);
        in_coords = malloc(sizeof(int32_t) * 4 * (size_t)(n_in + 1));
        CHECK_OK(ctx, vc_coords_copy_out(ctx, in_set, in_coords, VC_MEMORY_HOST));
    }

    in_vals = malloc(sizeof(double) * (size_t)(n_in * c->cin + 1));
    in_buf = rand_buffer(rng, n_in * c->cin, c->in_dt, 1.0, in_vals);
    w_vals = malloc(sizeof(double) * (size_t)(c->cout * K * c->cin));
    w_buf = rand_buffer(rng, c->cout * K * c->cin, c->w_dt, 1.0, w_vals);
    bias = malloc(sizeof(float) * (size_t)c->cout);
    for (int64_t i = 0; i < c->cout; i++) bias[i] = vc_rng_float(rng);
    CHECK_OK(ctx, vc_tensor_create(ctx, in_set, c->cin, c->in_dt, in_buf, VC_MEMORY_HOST, &in));
    if (!in) goto done;

    vc_conv_desc desc = VC_CONV_DESC_INIT;
    if (g->type == VC_MAP_INVERSE) {
        desc.map.type = VC_MAP_INVERSE; /* kernel fields left at the defaults: must be ignored */
        desc.map.inverse_of = fwd;
    } else {
        desc.map = map_desc_of(g, g->type);
    }
    desc.out_channels = c->cout;
    desc.weights = w_buf;
    desc.weight_dtype = c->w_dt;
    desc.bias = c->bias ? bias : NULL;
    desc.activation = c->act;
    desc.leaky_slope = c->slope;
    desc.out_dtype = c->out_dt;
    desc.algo = c->algo;

    if (c->prebuilt || c->residual) {
        CHECK_OK(ctx, vc_kmap_build(ctx, in_set, &desc.map, &map));
        if (!map) goto done;
        vc_kmap_info mi;
        CHECK_OK(ctx, vc_kmap_get_info(map, &mi));
        CHECK(mi.volume == K && mi.in_count == n_in);
        if (c->prebuilt) desc.kmap = map;
        if (c->residual) {
            res_vals = malloc(sizeof(double) * (size_t)(mi.out_count * c->cout + 1));
            res_buf = rand_buffer(rng, mi.out_count * c->cout, c->res_dt, 1.0, res_vals);
            CHECK_OK(ctx, vc_tensor_create(ctx, mi.out_coords, c->cout, c->res_dt, res_buf,
                                           VC_MEMORY_HOST, &res));
            desc.residual = res;
        }
    }

    CHECK_OK(ctx, vc_conv_forward(ctx, &desc, in, &out));
    if (!out) goto done;
    ran = 1;

    /* The result: its shape and coordinates. */
    vc_tensor_info ti;
    vc_coords_info oi;
    CHECK_OK(ctx, vc_tensor_get_info(out, &ti));
    CHECK_OK(ctx, vc_coords_get_info(ti.coords, &oi));
    n_out = ti.count;
    CHECK(ti.channels == c->cout && ti.dtype == out_dt && oi.count == n_out);
    CHECK(oi.batch_size == c->B);
    out_coords = malloc(sizeof(int32_t) * 4 * (size_t)(n_out + 1));
    CHECK_OK(ctx, vc_coords_copy_out(ctx, ti.coords, out_coords, VC_MEMORY_HOST));

    check_out_coords(what, c, X, xc, &ti, &oi, out_coords, n_out);

    /* The features against the dense oracle. */
    got = malloc(sizeof(float) * (size_t)(n_out * c->cout + 1));
    for (int64_t i = 0; i < n_out * c->cout; i++) got[i] = NAN;
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, out, got, VC_DTYPE_FP32, VC_MEMORY_HOST));
    ref = malloc(sizeof(double) * (size_t)(n_out * c->cout + 1));
    mag = malloc(sizeof(double) * (size_t)(n_out * c->cout + 1));
    dense_conv(g, c->B, in_shape, in_coords, n_in, in_vals, c->cin, w_vals, c->cout,
               out_coords, n_out, ref, mag);
    apply_epilogue(c, bias, res_vals, n_out, ref, mag);
    check_features(what, out_dt, got, ref, mag, n_out * c->cout);
    /* A reference that is all zero (possible: a strided layer whose kernel misses every
     * input) proves little; count such cases so main() can check they stay rare. */
    if (n_out > 0) {
        double norm = 0;
        for (int64_t i = 0; i < n_out * c->cout; i++) norm += fabs(ref[i]);
        g_cases++;
        if (norm == 0) g_zero_cases++;
    }
    if (result) {
        *result = got;
        *result_n = n_out * c->cout;
        got = NULL;
    }

done:
    if (vc_t_fail != fails0) fprintf(stderr, "  case: %s\n", what);
    vc_tensor_destroy(out);
    vc_tensor_destroy(res);
    vc_tensor_destroy(in);
    vc_kmap_destroy(map);
    vc_kmap_destroy(fwd);
    vc_coords_destroy(X);
    if (in_coords != xc) free(in_coords);
    free(xc);
    free(out_coords);
    free(in_vals);
    free(w_vals);
    free(res_vals);
    free(ref);
    free(mag);
    free(in_buf);
    free(w_buf);
    free(res_buf);
    free(bias);
    free(got);
    return ran;
}

/* ---- case generation ----------------------------------------------------------------------- */

static const int64_t CHANNELS[] = {1, 3, 4, 5, 7, 17};

static conv_case base_case(vc_map_type t)
{
    conv_case c;
    memset(&c, 0, sizeof c);
    c.g.type = t;
    c.g.fwd_type = VC_MAP_STRIDED;
    for (int a = 0; a < 3; a++) {
        c.g.k[a] = 3;
        c.g.s[a] = t == VC_MAP_SUBM ? 1 : 2;
        c.g.p[a] = t == VC_MAP_STRIDED || t == VC_MAP_TRANSPOSED || t == VC_MAP_INVERSE ? 1 : 0;
        c.g.d[a] = 1;
    }
    if (t == VC_MAP_DOWNSAMPLE) c.g.k[0] = c.g.k[1] = c.g.k[2] = 2;
    c.shape[0] = 6;
    c.shape[1] = 5;
    c.shape[2] = 7;
    c.B = 2;
    c.n = 40;
    c.cin = 3;
    c.cout = 5;
    c.in_dt = c.w_dt = c.res_dt = VC_DTYPE_FP32;
    c.out_dt = (vc_dtype)-1;
    c.slope = 0.1f;
    return c;
}

/* Whether the geometry gives a non-empty output shape. */
static int geom_ok(const conv_case *c)
{
    int32_t os[3];
    vc_map_type t = c->g.type == VC_MAP_INVERSE ? c->g.fwd_type : c->g.type;
    out_shape_of(t, &c->g, c->shape, os);
    for (int a = 0; a < 3; a++) {
        if (os[a] < 1) return 0;
        if (t == VC_MAP_STRIDED &&
            c->shape[a] + 2 * c->g.p[a] - c->g.d[a] * (c->g.k[a] - 1) - 1 < 0)
            return 0;
    }
    return 1;
}

static conv_case random_case(vc_rng *rng)
{
    static const vc_map_type types[] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE,
                                        VC_MAP_TRANSPOSED, VC_MAP_INVERSE};
    static const vc_dtype dts[] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    conv_case c = base_case(types[vc_rng_int(rng, 5)]);
    if (c.g.type == VC_MAP_INVERSE)
        c.g.fwd_type = vc_rng_int(rng, 2) ? VC_MAP_STRIDED : VC_MAP_DOWNSAMPLE;
    vc_map_type t = c.g.type == VC_MAP_INVERSE ? c.g.fwd_type : c.g.type;
    for (int tries = 0; tries < 100; tries++) {
        for (int a = 0; a < 3; a++) {
            c.shape[a] = 1 + (int32_t)vc_rng_int(rng, 7);
            c.g.k[a] = t == VC_MAP_SUBM ? 1 + 2 * (int32_t)vc_rng_int(rng, 3)
                                        : 1 + (int32_t)vc_rng_int(rng, 5);
            c.g.s[a] = t == VC_MAP_SUBM ? 1 : 1 + (int32_t)vc_rng_int(rng, 3);
            c.g.p[a] = t == VC_MAP_SUBM || t == VC_MAP_DOWNSAMPLE ? 0
                                                                  : (int32_t)vc_rng_int(rng, 3);
            c.g.d[a] = 1 + (int32_t)vc_rng_int(rng, 2);
        }
        if (vc_rng_int(rng, 4) == 0) { /* non-cubic (3,1,1) / (1,3,1) */
            int a = (int)vc_rng_int(rng, 2);
            c.g.k[0] = c.g.k[1] = c.g.k[2] = 1;
            c.g.k[a] = 3;
        }
        if (geom_ok(&c)) break;
    }
    c.B = 1 + (int32_t)vc_rng_int(rng, 3);
    int64_t total = (int64_t)c.B * c.shape[0] * c.shape[1] * c.shape[2];
    static const int64_t ns[] = {0, 1, 31, 33};
    int pick = (int)vc_rng_int(rng, 8);
    if (pick < 4) c.n = ns[pick];
    else c.n = total * (10 + vc_rng_int(rng, 31)) / 100; /* density 10..40 % */
    if (c.n > total) c.n = total;
    c.cin = CHANNELS[vc_rng_int(rng, 6)];
    c.cout = CHANNELS[vc_rng_int(rng, 6)];
    c.in_dt = dts[vc_rng_int(rng, 3)];
    c.w_dt = dts[vc_rng_int(rng, 3)];
    c.res_dt = dts[vc_rng_int(rng, 3)];
    c.out_dt = vc_rng_int(rng, 2) ? (vc_dtype)-1 : dts[vc_rng_int(rng, 3)];
    c.bias = (int)vc_rng_int(rng, 2);
    c.residual = vc_rng_int(rng, 3) == 0;
    c.prebuilt = (int)vc_rng_int(rng, 2);
    c.act = (vc_activation)vc_rng_int(rng, 3);
    c.slope = vc_rng_int(rng, 2) ? 0.01f : 0.2f;
    c.algo = vc_rng_int(rng, 2) ? VC_ALGO_AUTO : VC_ALGO_GATHER_GEMM_SCATTER;
    return c;
}

/* ---- named cases --------------------------------------------------------------------------- */

static void test_named(vc_context *ctx, vc_rng *rng)
{
    static const vc_map_type types[] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE,
                                        VC_MAP_TRANSPOSED, VC_MAP_INVERSE};
    static const int64_t ns[] = {0, 1, 31, 33, 60};
    /* every type at N = 0, 1, 31, 33 and a denser set; inverse of both forward types */
    for (int t = 0; t < 5; t++)
        for (int i = 0; i < 5; i++)
            for (int f = 0; f < (types[t] == VC_MAP_INVERSE ? 2 : 1); f++) {
                conv_case c = base_case(types[t]);
                c.n = ns[i];
                if (f) {
                    c.g.fwd_type = VC_MAP_DOWNSAMPLE;
                    c.g.k[0] = c.g.k[1] = c.g.k[2] = 2;
                    c.g.p[0] = c.g.p[1] = c.g.p[2] = 0;
                }
                run_case(ctx, rng, &c, NULL, NULL);
            }
    /* channels in x out */
    for (int i = 0; i < 6; i++)
        for (int o = 0; o < 6; o++) {
            conv_case c = base_case(VC_MAP_SUBM);
            c.cin = CHANNELS[i];
            c.cout = CHANNELS[o];
            run_case(ctx, rng, &c, NULL, NULL);
        }
    /* non-cubic kernels, odd and even kernels for downsample, big dilated kernels */
    {
        static const int32_t ks[][3] = {{3, 1, 1}, {1, 3, 1}, {1, 1, 3}, {5, 5, 5}, {1, 1, 1}};
        for (int t = 0; t < 5; t++)
            for (int j = 0; j < 5; j++) {
                conv_case c = base_case(types[t]);
                memcpy(c.g.k, ks[j], sizeof c.g.k);
                if (j == 3) c.g.d[0] = c.g.d[1] = c.g.d[2] = 2;
                if (types[t] == VC_MAP_INVERSE) c.g.p[0] = c.g.p[1] = c.g.p[2] = 0;
                c.n = 50;
                if (!geom_ok(&c)) continue;
                run_case(ctx, rng, &c, NULL, NULL);
            }
        conv_case c = base_case(VC_MAP_DOWNSAMPLE);
        c.g.k[0] = c.g.k[1] = c.g.k[2] = 3; /* odd: centred */
        run_case(ctx, rng, &c, NULL, NULL);
        c.g.k[0] = 2; /* mixed even/odd, stride (3,2,1) */
        c.g.s[0] = 3;
        c.g.s[2] = 1;
        run_case(ctx, rng, &c, NULL, NULL);
    }
    /* stride and padding sweeps for strided and transposed */
    for (int t = 1; t <= 4; t += 3)
        for (int s = 1; s <= 3; s++)
            for (int p = 0; p <= 2; p++) {
                conv_case c = base_case(types[t]);
                for (int a = 0; a < 3; a++) {
                    c.g.s[a] = s;
                    c.g.p[a] = p;
                }
                if (geom_ok(&c)) run_case(ctx, rng, &c, NULL, NULL);
            }
    /* every dtype combination, epilogue options */
    static const vc_dtype dts[] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    for (int i = 0; i < 3; i++)
        for (int w = 0; w < 3; w++)
            for (int o = 0; o < 3; o++) {
                conv_case c = base_case(VC_MAP_STRIDED);
                c.in_dt = dts[i];
                c.w_dt = dts[w];
                c.out_dt = dts[o];
                c.bias = 1;
                c.act = VC_ACT_LEAKY_RELU;
                c.residual = 1;
                c.res_dt = dts[(i + w + o) % 3];
                run_case(ctx, rng, &c, NULL, NULL);
            }
    for (int a = 0; a < 3; a++)
        for (int r = 0; r < 2; r++) {
            conv_case c = base_case(VC_MAP_SUBM);
            c.act = (vc_activation)a;
            c.residual = r;
            c.bias = 1;
            c.cin = 17;
            c.cout = 7;
            run_case(ctx, rng, &c, NULL, NULL);
        }
    /* a full grid, batch 3: every edge site present */
    {
        conv_case c = base_case(VC_MAP_STRIDED);
        c.B = 3;
        c.shape[0] = 4;
        c.shape[1] = 3;
        c.shape[2] = 5;
        c.n = 3 * 4 * 3 * 5;
        run_case(ctx, rng, &c, NULL, NULL);
        c.g.type = VC_MAP_SUBM;
        c.g.s[0] = c.g.s[1] = c.g.s[2] = 1;
        c.g.p[0] = c.g.p[1] = c.g.p[2] = 0;
        run_case(ctx, rng, &c, NULL, NULL);
    }
}

/* Same case on contexts with 1 and 4 threads: bit-identical results. */
static void test_determinism(vc_context *ctx1, vc_context *ctx4, vc_rng *rng)
{
    for (int i = 0; i < 12; i++) {
        conv_case c = random_case(rng);
        c.n = 200;
        c.shape[0] = c.shape[1] = c.shape[2] = 7;
        c.B = 2;
        c.cin = 17;
        c.cout = 7;
        if (!geom_ok(&c)) continue;
        vc_rng r1 = *rng, r4 = *rng;
        float *a = NULL, *b = NULL, *a2 = NULL;
        int64_t na = 0, nb = 0, na2 = 0;
        int ok = run_case(ctx1, &r1, &c, &a, &na);
        ok &= run_case(ctx4, &r4, &c, &b, &nb);
        vc_rng r2 = *rng;
        ok &= run_case(ctx4, &r2, &c, &a2, &na2);
        *rng = r1;
        if (ok) {
            CHECK(na == nb && na == na2);
            CHECK_MSG(na == nb && !memcmp(a, b, sizeof(float) * (size_t)na),
                      "1 and 4 threads give different bits");
            CHECK_MSG(na == na2 && !memcmp(b, a2, sizeof(float) * (size_t)na),
                      "two runs give different bits");
        }
        free(a);
        free(b);
        free(a2);
    }
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void test_bad_input(vc_context *ctx, vc_rng *rng)
{
    const int32_t shape[3] = {6, 5, 7};
    int64_t n_sites;
    int32_t *xc = rand_coords(rng, shape, 2, 40, 0, &n_sites);
    int32_t *yc = rand_coords(rng, shape, 2, 40, 0, &n_sites);
    vc_coords *X = NULL, *Y = NULL;
    vc_tensor *in = NULL, *res_other = NULL, *res_chan = NULL, *res_ok = NULL;
    vc_kmap *mapY = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, xc, 40, VC_MEMORY_HOST, shape, 2, &X));
    CHECK_OK(ctx, vc_coords_create(ctx, yc, 40, VC_MEMORY_HOST, shape, 2, &Y));
    double vals[40 * 17];
    void *inbuf = rand_buffer(rng, 40 * 3, VC_DTYPE_FP32, 1.0, vals);
    void *wbuf = rand_buffer(rng, 4 * 27 * 3, VC_DTYPE_FP32, 1.0, vals);
    void *rbuf = rand_buffer(rng, 40 * 4, VC_DTYPE_FP32, 1.0, vals);
    void *rbuf5 = rand_buffer(rng, 40 * 5, VC_DTYPE_FP32, 1.0, vals);
    float bias[4] = {0.5f, -0.25f, 1.0f, 2.0f};
    CHECK_OK(ctx, vc_tensor_create(ctx, X, 3, VC_DTYPE_FP32, inbuf, VC_MEMORY_HOST, &in));
    CHECK_OK(ctx, vc_tensor_create(ctx, Y, 4, VC_DTYPE_FP32, rbuf, VC_MEMORY_HOST, &res_other));
    CHECK_OK(ctx, vc_tensor_create(ctx, X, 5, VC_DTYPE_FP32, rbuf5, VC_MEMORY_HOST, &res_chan));
    CHECK_OK(ctx, vc_tensor_create(ctx, X, 4, VC_DTYPE_FP32, rbuf, VC_MEMORY_HOST, &res_ok));
    vc_map_desc sd = VC_MAP_DESC_INIT;
    CHECK_OK(ctx, vc_kmap_build(ctx, Y, &sd, &mapY));
    if (!X || !Y || !in || !res_other || !res_chan || !res_ok || !mapY) goto done;

    /* snapshots of every caller-visible buffer */
    float in_before[40 * 3], res_before[40 * 4], in_after[40 * 3], res_after[40 * 4];
    unsigned char w_before[4 * 27 * 3 * 4];
    memcpy(w_before, wbuf, sizeof w_before);
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, in, in_before, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, res_ok, res_before, VC_DTYPE_FP32, VC_MEMORY_HOST));

    vc_tensor *const sentinel = (vc_tensor *)(uintptr_t)0x5a5a5a50u;
    enum { N_BAD = 12 };
    for (int i = 0; i < N_BAD; i++) {
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.out_channels = 4;
        d.weights = wbuf;
        d.bias = bias;
        vc_status want = VC_ERR_INVALID_ARGUMENT;
        const vc_tensor *input = in;
        vc_tensor *out = sentinel;
        vc_tensor **outp = &out;
        const char *why = "";
        switch (i) {
        case 0: d.weights = NULL; why = "NULL weights"; break;
        case 1: d.out_channels = 0; why = "out_channels 0"; break;
        case 2: d.residual = res_other; want = VC_ERR_SHAPE_MISMATCH;
            why = "residual on other coordinates"; break;
        case 3: d.residual = res_chan; want = VC_ERR_SHAPE_MISMATCH;
            why = "residual with 5 channels for C_out 4"; break;
        case 4: d.kmap = mapY; want = VC_ERR_SHAPE_MISMATCH;
            why = "prebuilt map of another set"; break;
        case 5: d.weight_dtype = VC_DTYPE_INT32; why = "int32 weights"; break;
        case 6: d.map.kernel[1] = 2; why = "even subm kernel"; break;
        case 7: d.map.type = VC_MAP_INVERSE; why = "inverse without a forward map"; break;
        case 8: input = NULL; why = "NULL input"; break;
        case 9: outp = NULL; why = "NULL out"; break;
        case 10: d.activation = (vc_activation)7; why = "bad activation"; break;
        case 11: d.map.stride[0] = 0; d.map.type = VC_MAP_STRIDED; why = "stride 0"; break;
        }
        vc_status s = vc_conv_forward(ctx, &d, input, outp);
        CHECK_MSG(s == want, "%s: got %s, want %s (%s)", why, vc_status_string(s),
                  vc_status_string(want), vc_context_last_error(ctx));
        CHECK_MSG(out == sentinel, "%s: *out changed on failure", why);
        const char *msg = vc_context_last_error(ctx);
        CHECK_MSG(msg && msg[0], "%s: no message recorded", why);
        if (s == VC_OK && out != sentinel) vc_tensor_destroy(out);
    }
    /* NULL desc and NULL context */
    {
        vc_tensor *out = sentinel;
        CHECK_STATUS(ctx, vc_conv_forward(ctx, NULL, in, &out), VC_ERR_INVALID_ARGUMENT);
        CHECK(out == sentinel);
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.out_channels = 4;
        d.weights = wbuf;
        CHECK_STATUS(ctx, vc_conv_forward(NULL, &d, in, &out), VC_ERR_INVALID_ARGUMENT);
        CHECK(out == sentinel);
    }
    CHECK(!memcmp(w_before, wbuf, sizeof w_before));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, in, in_after, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, res_ok, res_after, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(!memcmp(in_before, in_after, sizeof in_before));
    CHECK(!memcmp(res_before, res_after, sizeof res_before));

    /* and the same valid call then succeeds (the failures left no state behind) */
    {
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.out_channels = 4;
        d.weights = wbuf;
        d.residual = res_ok;
        vc_tensor *out = NULL;
        CHECK_OK(ctx, vc_conv_forward(ctx, &d, in, &out));
        vc_tensor_destroy(out);
    }

done:
    vc_kmap_destroy(mapY);
    vc_tensor_destroy(res_ok);
    vc_tensor_destroy(res_chan);
    vc_tensor_destroy(res_other);
    vc_tensor_destroy(in);
    vc_coords_destroy(Y);
    vc_coords_destroy(X);
    free(xc);
    free(yc);
    free(inbuf);
    free(wbuf);
    free(rbuf);
    free(rbuf5);
}

static vc_context *make_ctx(int threads)
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    cd.num_threads = threads;
    vc_context *ctx = NULL;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    return ctx;
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_conv");
    vc_context *ctx = make_ctx(0), *ctx1 = make_ctx(1), *ctx4 = make_ctx(4);
    if (!ctx || !ctx1 || !ctx4) TEST_END();

    test_named(ctx, &rng);
    int done = 0;
    for (int i = 0; i < 600; i++) {
        conv_case c = random_case(&rng);
        if (!geom_ok(&c)) continue;
        done += run_case(ctx, &rng, &c, NULL, NULL);
    }
    printf("random cases run: %d\n", done);
    printf("cases with outputs: %d, with an all-zero reference: %d\n", g_cases, g_zero_cases);
    CHECK_MSG(g_zero_cases * 10 < g_cases, "too many all-zero references");
    test_determinism(ctx1, ctx4, &rng);
    test_bad_input(ctx, &rng);

    /* every handle was released: the contexts go */
    CHECK_OK(ctx, vc_context_destroy(ctx));
    CHECK_OK(ctx1, vc_context_destroy(ctx1));
    CHECK_OK(ctx4, vc_context_destroy(ctx4));
    TEST_END();
}
