/* tests/unit/test_net.c - networks on the CPU (src/net/, vc_net_*):
 * - the net's outputs equal the same layers run one at a time through the public API with the
 *   weights folded here (bit-identical), on a residual model and a U-Net-like model (strided,
 *   inverse, concat, pooling, a lone add), on a real scan and a synthetic two-batch scene;
 * - with BatchNorm statistics far from the identity, the residual model matches a reference
 *   that applies BN, ReLU and the adds unfused on the host (fp32, relative 1e-4);
 * - BF16 weights give the net built from the same values in F32; num_batches_tracked is
 *   ignored; two runs give the same bits; run_points equals voxelize + run;
 * - malformed descriptions and weight files give errors that name the layer or the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_testutil.h"
#include "scenes.h"
#include "testutil.h"

static vc_context *ctx;

/* ---- the layers one at a time, weights folded here ------------------------------------------ */

/* A BatchNorm's four tensors from the store. */
static void bn_params(pstore *p, const char *bn, const float **g, const float **be,
                      const float **mu, const float **var)
{
    char n[128];
    snprintf(n, sizeof n, "%s.weight", bn), *g = pst_get(p, n);
    snprintf(n, sizeof n, "%s.bias", bn), *be = pst_get(p, n);
    snprintf(n, sizeof n, "%s.running_mean", bn), *mu = pst_get(p, n);
    snprintf(n, sizeof n, "%s.running_var", bn), *var = pst_get(p, n);
}

/* W' = W * s, b' = (b - mean) * s + beta, s = gamma / sqrtf(var + eps): docs/networks.md. */
static void fold(pstore *p, const char *conv, const char *bn, float eps, int64_t out,
                 int64_t per_out, int has_bias, float **w, float **b)
{
    char n[128];
    snprintf(n, sizeof n, "%s.weight", conv);
    *w = malloc((size_t)(out * per_out) * 4);
    memcpy(*w, pst_get(p, n), (size_t)(out * per_out) * 4);
    *b = calloc((size_t)out, 4);
    if (has_bias) {
        snprintf(n, sizeof n, "%s.bias", conv);
        memcpy(*b, pst_get(p, n), (size_t)out * 4);
    }
    if (!bn) return;
    const float *g, *be, *mu, *var;
    bn_params(p, bn, &g, &be, &mu, &var);
    for (int64_t o = 0; o < out; o++) {
        float s = g[o] / sqrtf(var[o] + eps);
        for (int64_t j = 0; j < per_out; j++) (*w)[o * per_out + j] *= s;
        (*b)[o] = ((*b)[o] - mu[o]) * s + be[o];
    }
}

/* One conv through vc_conv_forward with the folded weights. */
static vc_tensor *conv(pstore *p, const vc_tensor *in, vc_map_type type, int k, int stride,
                       int pad, const vc_kmap *kmap, const char *name, const char *bn, float eps,
                       int64_t out, int has_bias, vc_activation act, float slope,
                       const vc_tensor *res)
{
    vc_tensor_info ti;
    vc_tensor_get_info(in, &ti);
    int64_t kk = (int64_t)k * k * k;
    float *w, *b;
    fold(p, name, bn, eps, out, kk * ti.channels, has_bias, &w, &b);
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.map.type = type;
    for (int i = 0; i < 3; i++) {
        d.map.kernel[i] = k;
        d.map.stride[i] = stride;
        d.map.padding[i] = pad;
    }
    d.kmap = kmap;
    d.out_channels = out;
    d.weights = w;
    d.bias = (has_bias || bn) ? b : NULL;
    d.activation = act;
    d.leaky_slope = slope;
    d.residual = res;
    vc_tensor *y = NULL;
    CHECK_OK(ctx, vc_conv_forward(ctx, &d, in, &y));
    free(w);
    free(b);
    return y;
}

static vc_tensor *affine(pstore *p, const vc_tensor *in, const char *bn, float eps,
                         vc_activation act)
{
    vc_tensor_info ti;
    vc_tensor_get_info(in, &ti);
    float *sc = malloc((size_t)ti.channels * 4), *sh = malloc((size_t)ti.channels * 4);
    const float *g, *be, *mu, *var;
    bn_params(p, bn, &g, &be, &mu, &var);
    for (int64_t c = 0; c < ti.channels; c++) {
        sc[c] = g[c] / sqrtf(var[c] + eps);
        sh[c] = be[c] - mu[c] * sc[c];
    }
    vc_tensor *t = NULL;
    CHECK_OK(ctx, vc_tensor_cast(ctx, in, VC_DTYPE_FP32, &t));
    CHECK_OK(ctx, vc_tensor_affine(ctx, t, sc, sh, VC_MEMORY_HOST, act, 0));
    free(sc);
    free(sh);
    return t;
}

/* Compares a net's sparse output with a reference tensor: same rows, same feature bits. */
static void same_sparse(const vc_net *net, const char *name, const vc_tensor *ref,
                        const char *what)
{
    int32_t idx = -1;
    vc_net_output o;
    CHECK_OK(ctx, vc_net_find_output(net, name, &idx));
    CHECK_OK(ctx, vc_net_get_output(net, idx, &o));
    CHECK(o.kind == VC_NET_SPARSE && o.tensor);
    if (!o.tensor || !ref) return;
    int32_t *c0, *c1;
    float *f0, *f1;
    int64_t n0, n1, ch0, ch1;
    net_host(ctx, o.tensor, &c0, &f0, &n0, &ch0);
    net_host(ctx, ref, &c1, &f1, &n1, &ch1);
    CHECK_MSG(n0 == n1 && ch0 == ch1, "%s %s: %lld x %lld vs %lld x %lld", what, name,
              (long long)n0, (long long)ch0, (long long)n1, (long long)ch1);
    if (n0 == n1 && ch0 == ch1) {
        CHECK_MSG(memcmp(c0, c1, (size_t)n0 * 16) == 0, "%s %s: rows differ", what, name);
        CHECK_MSG(memcmp(f0, f1, (size_t)(n0 * ch0) * 4) == 0, "%s %s: features differ", what,
                  name);
    }
    free(c0), free(c1), free(f0), free(f1);
}

/* A dense output against `ref` (n floats). */
static void same_dense(vc_net *net, const char *name, const float *ref, int64_t n,
                       const char *what)
{
    int32_t idx = -1;
    vc_net_output o;
    CHECK_OK(ctx, vc_net_find_output(net, name, &idx));
    CHECK_OK(ctx, vc_net_get_output(net, idx, &o));
    int64_t m = 1;
    for (int k = 0; k < o.ndim; k++) m *= o.shape[k];
    CHECK_MSG(o.kind == VC_NET_DENSE && m == n, "%s %s: %lld elements, expected %lld", what,
              name, (long long)m, (long long)n);
    if (m != n) return;
    float *h = malloc((size_t)(n ? n : 1) * 4);
    CHECK_OK(ctx, vc_net_copy_output(net, idx, h, (size_t)n * 4, VC_MEMORY_HOST));
    CHECK_MSG(memcmp(h, ref, (size_t)n * 4) == 0, "%s %s: values differ", what, name);
    free(h);
}

/* The input in the model's spatial shape. */
static vc_tensor *placed(const vc_tensor *in, const int32_t shape[3])
{
    vc_tensor *t = net_retensor(ctx, in, -1, shape);
    CHECK_MSG(t != NULL, "placed: %s", vc_context_last_error(ctx));
    return t;
}

static void check_res_fused(vc_net *net, pstore *p, const vc_tensor *in0, const int32_t sh[3],
                            const char *what)
{
    vc_tensor *x = placed(in0, sh);
    vc_tensor *stem = conv(p, x, VC_MAP_SUBM, 3, 1, 0, NULL, "c0", "b0", 1e-3f, 16, 0, VC_ACT_RELU, 0, NULL);
    vc_tensor *r1 = conv(p, stem, VC_MAP_SUBM, 3, 1, 0, NULL, "r1", "rb1", 1e-3f, 16, 1, VC_ACT_RELU, 0, NULL);
    vc_tensor *block = conv(p, r1, VC_MAP_SUBM, 3, 1, 0, NULL, "r2", "rb2", 1e-3f, 16, 1, VC_ACT_RELU, 0, stem);
    vc_tensor *d = conv(p, block, VC_MAP_STRIDED, 3, 2, 1, NULL, "down", "db", 1e-3f, 24, 0,
                        VC_ACT_LEAKY_RELU, 0.1f, NULL);
    vc_tensor *side = affine(p, stem, "side", 1e-5f, VC_ACT_RELU);
    same_sparse(net, "block", block, what);
    same_sparse(net, "d", d, what);
    same_sparse(net, "side", side, what);
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(d, &ti);
    vc_coords_get_info(ti.coords, &ci);
    float gap[2 * 24];
    CHECK_OK(ctx, vc_global_pool(ctx, VC_POOL_AVG, d, gap, VC_MEMORY_HOST));
    same_dense(net, "gap", gap, (int64_t)ci.batch_size * 24, what);
    int64_t nd = (int64_t)ci.batch_size * 24 * ci.spatial_shape[0] * ci.spatial_shape[1] *
                 ci.spatial_shape[2];
    float *bev = malloc((size_t)nd * 4);
    CHECK_OK(ctx, vc_tensor_to_dense(ctx, d, bev, nd, VC_DTYPE_FP32, VC_MEMORY_HOST));
    same_dense(net, "bev", bev, nd, what);
    free(bev);
    vc_tensor *ts[] = {x, stem, r1, block, d, side};
    for (int i = 0; i < 6; i++) vc_tensor_destroy(ts[i]);
}

static void check_unet_fused(vc_net *net, pstore *p, const vc_tensor *in0, const int32_t sh[3],
                             const char *what)
{
    vc_tensor *x = placed(in0, sh);
    vc_tensor_info xi;
    vc_tensor *e0 = conv(p, x, VC_MAP_SUBM, 3, 1, 0, NULL, "e0c", "e0b", 1e-5f, 16, 1, VC_ACT_RELU, 0, NULL);
    vc_tensor_get_info(e0, &xi);
    vc_map_desc md = VC_MAP_DESC_INIT;
    md.type = VC_MAP_STRIDED;
    for (int i = 0; i < 3; i++) md.kernel[i] = md.stride[i] = 2;
    vc_kmap *km = NULL;
    CHECK_OK(ctx, vc_kmap_build(ctx, xi.coords, &md, &km));
    vc_tensor *e1 = conv(p, e0, VC_MAP_STRIDED, 2, 2, 0, km, "down", "downb", 1e-5f, 32, 0, VC_ACT_RELU, 0, NULL);
    vc_tensor *m = conv(p, e1, VC_MAP_SUBM, 3, 1, 0, NULL, "mid", NULL, 0, 32, 0, VC_ACT_RELU, 0, NULL);
    vc_map_desc inv = VC_MAP_DESC_INIT;
    inv.type = VC_MAP_INVERSE;
    inv.inverse_of = km;
    vc_kmap *ki = NULL;
    vc_tensor_info mi;
    vc_tensor_get_info(m, &mi);
    CHECK_OK(ctx, vc_kmap_build(ctx, mi.coords, &inv, &ki));
    vc_tensor *u0 = conv(p, m, VC_MAP_INVERSE, 2, 1, 0, ki, "up", "upb", 1e-5f, 16, 0, VC_ACT_RELU, 0, NULL);
    vc_tensor *cat = NULL, *pool = NULL, *sum = NULL;
    const vc_tensor *parts[2] = {u0, e0};
    CHECK_OK(ctx, vc_tensor_concat(ctx, parts, 2, &cat));
    vc_tensor *head = conv(p, cat, VC_MAP_SUBM, 1, 1, 0, NULL, "head", NULL, 0, 5, 1, VC_ACT_NONE, 0, NULL);
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.map = md;
    CHECK_OK(ctx, vc_pool_forward(ctx, &pd, e0, &pool));
    CHECK_OK(ctx, vc_tensor_add(ctx, e1, m, VC_ACT_RELU, 0, &sum));
    same_sparse(net, "head", head, what);
    same_sparse(net, "e1", e1, what);
    same_sparse(net, "cat", cat, what);
    same_sparse(net, "pool", pool, what);
    same_sparse(net, "sum", sum, what);
    vc_kmap_destroy(ki);
    vc_kmap_destroy(km);
    vc_tensor *ts[] = {x, e0, e1, m, u0, cat, head, pool, sum};
    for (int i = 0; i < 9; i++) vc_tensor_destroy(ts[i]);
}

/* ---- the residual model unfused, on the host --------------------------------------------- */

/* A conv with the raw weights and bias (no BN, no activation) through the library. */
static float *raw_conv(pstore *p, const vc_tensor *in, vc_map_type type, int stride, int pad,
                       const char *name, int64_t out, int has_bias, vc_tensor **y)
{
    char n[128];
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.map.type = type;
    for (int i = 0; i < 3; i++) d.map.stride[i] = stride, d.map.padding[i] = pad;
    d.out_channels = out;
    snprintf(n, sizeof n, "%s.weight", name);
    d.weights = pst_get(p, n);
    snprintf(n, sizeof n, "%s.bias", name);
    d.bias = has_bias ? pst_get(p, n) : NULL;
    CHECK_OK(ctx, vc_conv_forward(ctx, &d, in, y));
    int32_t *c;
    float *f;
    int64_t rows, ch;
    net_host(ctx, *y, &c, &f, &rows, &ch);
    free(c);
    return f;
}

/* In place on host rows: BN (x - mean) / sqrt(var + eps) * gamma + beta in double. */
static void host_bn(pstore *p, const char *bn, double eps, float *x, int64_t rows, int64_t c)
{
    const float *g, *be, *mu, *var;
    bn_params(p, bn, &g, &be, &mu, &var);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < c; k++) {
            double v = ((double)x[r * c + k] - mu[k]) / sqrt((double)var[k] + eps) * g[k] + be[k];
            x[r * c + k] = (float)v;
        }
}

static void host_act(float *x, int64_t n, double slope)
{
    for (int64_t i = 0; i < n; i++)
        if (x[i] < 0) x[i] = (float)(x[i] * slope);
}

/* A tensor of the host features on t's coordinates. */
static vc_tensor *on_coords(const vc_tensor *t, const float *f, int64_t c)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    vc_tensor *y = NULL;
    CHECK_OK(ctx, vc_tensor_create(ctx, ti.coords, c, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &y));
    return y;
}

static void near_sparse(const vc_net *net, const char *name, const float *ref, int64_t n,
                        const char *what)
{
    int32_t idx = -1;
    vc_net_output o;
    CHECK_OK(ctx, vc_net_find_output(net, name, &idx));
    CHECK_OK(ctx, vc_net_get_output(net, idx, &o));
    int32_t *c;
    float *f;
    int64_t rows, ch;
    net_host(ctx, o.tensor, &c, &f, &rows, &ch);
    CHECK(rows * ch == n);
    double *r = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) r[i] = ref[i];
    double e = rows * ch == n ? vc_rel_err(f, r, n) : INFINITY;
    CHECK_MSG(e < 1e-4, "%s %s: relative error %.3g vs the unfused reference", what, name, e);
    printf("%s %s: unfused reference relative error %.2e\n", what, name, e);
    free(r), free(c), free(f);
}

static void check_res_unfused(vc_net *net, pstore *p, const vc_tensor *in0, const int32_t sh[3],
                              const char *what)
{
    vc_tensor *x = placed(in0, sh), *t0, *t1, *t2, *t3, *a, *b;
    vc_tensor_info xi;
    vc_tensor_get_info(x, &xi);
    int64_t n = xi.count;
    float *stem = raw_conv(p, x, VC_MAP_SUBM, 1, 0, "c0", 16, 0, &t0);
    host_bn(p, "b0", 1e-3, stem, n, 16);
    host_act(stem, n * 16, 0);
    a = on_coords(t0, stem, 16);
    float *r1 = raw_conv(p, a, VC_MAP_SUBM, 1, 0, "r1", 16, 1, &t1);
    host_bn(p, "rb1", 1e-3, r1, n, 16);
    host_act(r1, n * 16, 0);
    b = on_coords(t0, r1, 16);
    float *blk = raw_conv(p, b, VC_MAP_SUBM, 1, 0, "r2", 16, 1, &t2);
    host_bn(p, "rb2", 1e-3, blk, n, 16);
    for (int64_t i = 0; i < n * 16; i++) blk[i] += stem[i];
    host_act(blk, n * 16, 0);
    near_sparse(net, "block", blk, n * 16, what);
    vc_tensor *bt = on_coords(t0, blk, 16);
    float *d = raw_conv(p, bt, VC_MAP_STRIDED, 2, 1, "down", 24, 0, &t3);
    vc_tensor_info di;
    vc_tensor_get_info(t3, &di);
    host_bn(p, "db", 1e-3, d, di.count, 24);
    host_act(d, di.count * 24, 0.1);
    near_sparse(net, "d", d, di.count * 24, what);
    host_bn(p, "side", 1e-5, stem, n, 16);
    host_act(stem, n * 16, 0);
    near_sparse(net, "side", stem, n * 16, what);
    free(stem), free(r1), free(blk), free(d);
    vc_tensor *ts[] = {x, t0, t1, t2, t3, a, b, bt};
    for (int i = 0; i < 8; i++) vc_tensor_destroy(ts[i]);
}

/* ---- nets, inputs ------------------------------------------------------------------------ */

/* A net of the description `text` with random weights from `seed`, fp32 unless `dtype` says. */
static vc_net *random_net(const char *text, uint64_t seed, vc_dtype dtype)
{
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_json = text;
    d.random_weights = 1;
    d.seed = seed;
    d.dtype = dtype;
    vc_net *net = NULL;
    CHECK_OK(ctx, vc_net_create(ctx, &d, &net));
    return net;
}

static vc_net *make_net(const char *model, const uint8_t *w, size_t wn, vc_status want,
                        const char *needle, const char *what)
{
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_json = model;
    d.weights_data = w;
    d.weights_size = wn;
    d.dtype = VC_DTYPE_FP32;
    vc_net *net = NULL;
    vc_status s = vc_net_create(ctx, &d, &net);
    const char *msg = vc_context_last_error(ctx);
    CHECK_MSG(s == want, "%s: %s, expected %s (%s)", what, vc_status_string(s),
              vc_status_string(want), msg);
    if (needle)
        CHECK_MSG(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, msg, needle);
    if (s != VC_OK) CHECK(net == NULL);
    return net;
}

/* The real scan voxelized at 0.2 m over 40 x 40 x 4 m (grid 20 x 200 x 200), or NULL. */
static vc_tensor *scan_input(void)
{
    const char *root = getenv("VC_DATA_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s%sdatasets/data/vlp16.bin", root ? root : "", root ? "/" : "");
    vc_cloud cl;
    if (vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &cl) != VC_OK) {
        printf("SKIP the real scan: %s not readable (run datasets/fetch)\n", path);
        return NULL;
    }
    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    const float range[6] = {-20, -20, -2, 20, 20, 2};
    memcpy(vd.range, range, sizeof range);
    for (int i = 0; i < 3; i++) vd.voxel_size[i] = 0.2f;
    vc_points pts = {cl.data, cl.count, cl.dim, NULL, VC_MEMORY_HOST};
    vc_tensor *t = NULL;
    CHECK_OK(ctx, vc_voxelize(ctx, &vd, &pts, &t, NULL));
    vc_cloud_free(&cl);
    return t;
}

/* Two batch items of scan-like sheets in 21 x 64 x 64, features uniform in [-1, 1). */
static vc_tensor *synthetic_input(vc_rng *rng)
{
    const int32_t shape[3] = {21, 64, 64};
    scene_cloud sc = scene_random_cloud(rng, 3000, 2, shape, 3);
    float *f = malloc((size_t)sc.n * 16);
    for (int64_t i = 0; i < sc.n * 4; i++) f[i] = vc_rng_float(rng);
    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, sc.rows, sc.n, VC_MEMORY_HOST, shape, 2, &c));
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 4, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &t));
    vc_coords_destroy(c);
    free(sc.rows);
    free(f);
    return t;
}

/* Both models on one input: fused bit-identical, unfused within 1e-4, a second run the same. */
static void test_models(vc_rng *rng, const vc_tensor *in, const int32_t model_shape[3],
                        const char *what)
{
    pstore p = {0};
    net_res_params(&p, rng);
    size_t wn;
    uint8_t *w = pst_serialize(&p, "b0", &wn);
    char *text = net_model_text(NET_RES_MODEL, model_shape, NULL);
    vc_net *net = make_net(text, w, wn, VC_OK, NULL, what);
    if (net) {
        CHECK_OK(ctx, vc_net_set_profiling(net, 1));
        CHECK_OK(ctx, vc_net_run(net, in));
        check_res_fused(net, &p, in, model_shape, what);
        check_res_unfused(net, &p, in, model_shape, what);
        CHECK_OK(ctx, vc_net_run(net, in)); /* maps cached, buffers reused: the same bits */
        check_res_fused(net, &p, in, model_shape, what);
        /* the CPU runs step by step whatever the auto-bounds switch says */
        CHECK_STATUS(ctx, vc_net_set_auto_bounds(NULL, 1), VC_ERR_INVALID_ARGUMENT);
        CHECK_OK(ctx, vc_net_set_profiling(net, 0));
        CHECK_OK(ctx, vc_net_set_auto_bounds(net, 1));
        CHECK_OK(ctx, vc_net_run(net, in));
        check_res_fused(net, &p, in, model_shape, what);
        CHECK_OK(ctx, vc_net_set_auto_bounds(net, 0));
        CHECK_OK(ctx, vc_net_set_profiling(net, 1));
        int32_t ns = 0;
        vc_net_step_info si;
        CHECK_OK(ctx, vc_net_step_count(net, &ns));
        CHECK_MSG(ns == 7, "%s: %d steps, expected 7 (stem, r1, r2+add, down, side, gap, bev)", what, ns);
        CHECK_OK(ctx, vc_net_get_step(net, 2, &si));
        CHECK_MSG(strcmp(si.op, "subm+bn+add+relu") == 0 && si.pairs > 0 && si.ms >= 0,
                  "%s: step 2 is %s", what, si.op);
    }
    vc_net_destroy(net);
    free(text);
    free(w);
    pst_free(&p);

    net_unet_params(&p, rng);
    w = pst_serialize(&p, NULL, &wn);
    text = net_model_text(NET_UNET_MODEL, model_shape, NULL);
    net = make_net(text, w, wn, VC_OK, NULL, what);
    if (net) {
        CHECK_OK(ctx, vc_net_run(net, in));
        check_unet_fused(net, &p, in, model_shape, what);
    }
    vc_net_destroy(net);
    free(text);
    free(w);
    pst_free(&p);
}

/* ---- errors ---------------------------------------------------------------------------------- */

#define HEAD "{\"format\": \"voxconv-model\", \"version\": 1, \"input\": {\"channels\": 4, \"spatial_shape\": [8, 8, 8]}, "
#define SUBM(id, extra) "{\"op\": \"subm\", \"id\": \"" id "\", \"name\": \"" id "\", \"out_channels\": 8, \"kernel\": 3" extra "}"

static void test_parse_errors(void)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"{\"format\": ", "not valid JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"format\": \"other\", \"version\": 1}", "\"format\" is \"other\""},
        {"{\"format\": \"voxconv-model\", \"version\": 2}", "version 2 is not supported"},
        {HEAD "\"layers\": [{\"op\": \"conv3d\"}], \"outputs\": {\"y\": \"#0\"}}", "layer 0: unknown op \"conv3d\""},
        {HEAD "\"layers\": [" SUBM("a", ", \"input\": \"nope\"") "], \"outputs\": {\"y\": \"a\"}}", "layer 0 ('a', subm): input \"nope\" names no layer"},
        {HEAD "\"layers\": [" SUBM("a", ", \"input\": \"b\"") ", " SUBM("b", "") "], \"outputs\": {\"y\": \"b\"}}", "not an earlier layer"},
        {HEAD "\"layers\": [" SUBM("a", ", \"input\": \"a\"") "], \"outputs\": {\"y\": \"a\"}}", "not an earlier layer"},
        {HEAD "\"layers\": [{\"op\": \"dense\", \"id\": \"d\"}, {\"op\": \"relu\"}], \"outputs\": {\"y\": \"#1\"}}", "layer 1 ('#1', relu): reads 'd', a dense result"},
        {HEAD "\"layers\": [{\"op\": \"subm\", \"id\": \"a\", \"name\": \"a\", \"kernel\": 3}], \"outputs\": {\"y\": \"a\"}}", "\"out_channels\" is missing"},
        {HEAD "\"layers\": [{\"op\": \"subm\", \"id\": \"a\", \"out_channels\": 8, \"kernel\": 3}], \"outputs\": {\"y\": \"a\"}}", "\"name\" is missing"},
        {HEAD "\"layers\": [" SUBM("a", ", \"kernal\": 3") "], \"outputs\": {\"y\": \"a\"}}", "unknown field \"kernal\""},
        {HEAD "\"layers\": [" SUBM("a", "") ", " SUBM("a", "") "], \"outputs\": {\"y\": \"a\"}}", "layer 1 ('a', subm): id repeats layer 0's"},
        {HEAD "\"layers\": [{\"op\": \"subm\", \"id\": \"a\", \"name\": \"a\", \"out_channels\": 8, \"kernel\": 2}], \"outputs\": {\"y\": \"a\"}}", "odd kernels"},
        {HEAD "\"layers\": [" SUBM("a", "") ", {\"op\": \"add\", \"inputs\": [\"a\", \"input\"]}], \"outputs\": {\"y\": \"#1\"}}", "add of 8 and 4 channels"},
        {HEAD "\"layers\": [" SUBM("a", "") ", {\"op\": \"add\", \"inputs\": [\"a\"]}], \"outputs\": {\"y\": \"#1\"}}", "add takes exactly 2 inputs"},
        {HEAD "\"layers\": [" SUBM("a", "") "], \"outputs\": {\"y\": \"b\"}}", "outputs: \"y\": \"b\" names no layer"},
        {HEAD "\"layers\": [" SUBM("a", "") "], \"outputs\": {}}", "outputs: must be an object"},
        {HEAD "\"layers\": [], \"outputs\": {\"y\": \"a\"}}", "layers: must be an array"},
        {HEAD "\"layers\": [{\"op\": \"inverse\", \"id\": \"u\", \"name\": \"u\", \"out_channels\": 4, \"indice_key\": \"zz\"}], \"outputs\": {\"y\": \"u\"}}", "indice_key \"zz\" names no earlier conv"},
        {HEAD "\"layers\": [" SUBM("a", ", \"indice_key\": \"k\"") ", {\"op\": \"subm\", \"id\": \"b\", \"name\": \"b\", \"out_channels\": 8, \"kernel\": 5, \"indice_key\": \"k\"}], \"outputs\": {\"y\": \"b\"}}", "indice_key \"k\" is already layer 'a''s"},
        {HEAD "\"layers\": [{\"op\": \"relu\", \"name\": \"x\"}], \"outputs\": {\"y\": \"#0\"}}", "\"name\" is for layers with parameters"},
        {"{\"format\": \"voxconv-model\", \"version\": 1, \"input\": {\"channels\": 4, \"spatial_shape\": [8, 8]}, \"layers\": [], \"outputs\": {}}", "input: \"spatial_shape\" must be an integer or [z, y, x]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vc_net_desc d = VC_NET_DESC_INIT;
        d.model_json = cases[i].json;
        d.random_weights = 1;
        vc_net *net = NULL;
        vc_status s = vc_net_create(ctx, &d, &net);
        const char *msg = vc_context_last_error(ctx);
        CHECK_MSG(s == VC_ERR_FORMAT && !net, "case %zu: %s", i, vc_status_string(s));
        CHECK_MSG(strstr(msg, cases[i].needle) && strstr(msg, "<model_json>"),
                  "case %zu: message '%s' lacks '%s'", i, msg, cases[i].needle);
    }
    /* the descriptor itself */
    vc_net_desc d = VC_NET_DESC_INIT;
    vc_net *net = NULL;
    CHECK_STATUS(ctx, vc_net_create(ctx, &d, &net), VC_ERR_INVALID_ARGUMENT);
    d.model_path = "/nonexistent/model.json";
    d.random_weights = 1;
    CHECK_STATUS(ctx, vc_net_create(ctx, &d, &net), VC_ERR_IO);
    CHECK(strstr(vc_context_last_error(ctx), "/nonexistent/model.json") != NULL);
    d.struct_size = 8;
    CHECK_STATUS(ctx, vc_net_create(ctx, &d, &net), VC_ERR_INVALID_ARGUMENT);
}

/* A weight file with one fault: the error names the tensor and nothing is created. */
static void test_weight_errors(vc_rng *rng)
{
    const int32_t shape[3] = {8, 16, 16};
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    pstore p = {0};
    net_res_params(&p, rng);
    size_t wn;
    uint8_t *w = pst_serialize(&p, "rb1", &wn);
    vc_net_destroy(make_net(text, w, wn, VC_OK, NULL, "good weights"));
    vc_net_destroy(make_net(text, w, wn - 3, VC_ERR_FORMAT, "tensor 'rb1.num_batches_tracked'", "truncated"));
    vc_net_destroy(make_net(text, w, 5, VC_ERR_FORMAT, "too short", "5 bytes"));
    free(w);

    ptensor *t = pst_find(&p, "r1.weight");
    snprintf(t->dtype, sizeof t->dtype, "I32");
    w = pst_serialize(&p, NULL, &wn);
    vc_net_destroy(make_net(text, w, wn, VC_ERR_UNSUPPORTED, "tensor 'r1.weight' has dtype I32", "wrong dtype"));
    free(w);
    snprintf(t->dtype, sizeof t->dtype, "F32");
    int64_t s0 = t->shape[4];
    t->shape[4] = t->shape[1], t->shape[1] = s0; /* [16, 16, 3, 3, 3]: same bytes, wrong order */
    w = pst_serialize(&p, NULL, &wn);
    vc_net_destroy(make_net(text, w, wn, VC_ERR_SHAPE_MISMATCH, "tensor 'r1.weight' has shape [16, 16, 3, 3, 3], the description needs [16, 3, 3, 3, 16]", "mis-shaped"));
    free(w);
    t->shape[1] = t->shape[4], t->shape[4] = s0;

    pst_get(&p, "db.running_var")[5] = NAN;
    w = pst_serialize(&p, NULL, &wn);
    vc_net_destroy(make_net(text, w, wn, VC_ERR_INVALID_ARGUMENT, "tensor 'db.running_var' has a non-finite value", "NaN"));
    free(w);
    pst_get(&p, "db.running_var")[5] = 1.0f;

    const int64_t one = 3;
    pst_add(&p, rng, "head.weight", 1, &one, 0, 1);
    w = pst_serialize(&p, NULL, &wn);
    vc_net_destroy(make_net(text, w, wn, VC_ERR_INVALID_ARGUMENT, "tensor 'head.weight' is not used", "extra"));
    free(w);
    p.n--;
    free(p.t[p.n].v);

    ptensor keep = *pst_find(&p, "rb2.running_mean");
    *pst_find(&p, "rb2.running_mean") = p.t[p.n - 1];
    p.n--;
    w = pst_serialize(&p, NULL, &wn);
    vc_net_destroy(make_net(text, w, wn, VC_ERR_INVALID_ARGUMENT, "tensor 'rb2.running_mean' [16] is missing", "missing"));
    free(w);
    p.t[p.n++] = keep;
    pst_free(&p);
    free(text);
}

/* BF16 weights load as the F32 values they round to: the same outputs, bit for bit. */
static void test_bf16_weights(vc_rng *rng, const vc_tensor *in)
{
    const int32_t shape[3] = {21, 64, 64};
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    pstore p = {0};
    net_res_params(&p, rng);
    for (int i = 0; i < p.n; i++)
        for (int64_t k = 0; k < p.t[i].n; k++) {
            uint32_t u = (uint32_t)pst_bf16(p.t[i].v[k]) << 16;
            memcpy(&p.t[i].v[k], &u, 4);
        }
    size_t n32, n16;
    uint8_t *w32 = pst_serialize(&p, NULL, &n32);
    for (int i = 0; i < p.n; i++) snprintf(p.t[i].dtype, sizeof p.t[i].dtype, "BF16");
    uint8_t *w16 = pst_serialize(&p, NULL, &n16);
    CHECK(n16 < n32);
    vc_net *a = make_net(text, w32, n32, VC_OK, NULL, "f32"), *b = make_net(text, w16, n16, VC_OK, NULL, "bf16");
    if (a && b) {
        CHECK_OK(ctx, vc_net_run(a, in));
        CHECK_OK(ctx, vc_net_run(b, in));
        vc_net_output oa, ob;
        CHECK_OK(ctx, vc_net_get_output(a, 1, &oa));
        same_sparse(b, oa.name, oa.tensor, "bf16 weights");
        CHECK_OK(ctx, vc_net_get_output(b, 1, &ob));
    }
    vc_net_destroy(a);
    vc_net_destroy(b);
    free(w32), free(w16), free(text);
    pst_free(&p);
}

/* Outputs before a run, lookups, run_points = voxelize + run, random weights deterministic. */
static void test_api(vc_rng *rng)
{
    const int32_t shape[3] = {21, 200, 200};
    char *text = net_model_text(NET_RES_MODEL, shape,
                                ", \"voxelize\": {\"voxel_size\": [0.2, 0.2, 0.2], \"range\": "
                                "[-20, -20, -2, 20, 20, 2], \"use_dim\": 4}");
    vc_net *a = random_net(text, 42, VC_DTYPE_FP32), *b = random_net(text, 42, VC_DTYPE_FP32);
    int32_t n = 0, idx = -1;
    vc_net_output o;
    CHECK_OK(ctx, vc_net_output_count(a, &n));
    CHECK(n == 5);
    CHECK_OK(ctx, vc_net_get_output(a, 0, &o));
    CHECK(strcmp(o.name, "block") == 0 && o.kind == VC_NET_SPARSE && o.tensor == NULL);
    CHECK_OK(ctx, vc_net_find_output(a, "bev", &idx));
    CHECK(idx == 4);
    CHECK_STATUS(ctx, vc_net_find_output(a, "nope", &idx), VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_net_get_output(a, 5, &o), VC_ERR_INVALID_ARGUMENT);
    /* points with 5 columns: use_dim 4 takes the first four */
    int64_t np = 20000;
    float *pts = malloc((size_t)np * 20), *p4 = malloc((size_t)np * 16);
    for (int64_t i = 0; i < np; i++)
        for (int k = 0; k < 5; k++) {
            float v = vc_rng_float(rng) * (k < 2 ? 19.0f : k == 2 ? 1.9f : 1.0f);
            pts[i * 5 + k] = v;
            if (k < 4) p4[i * 4 + k] = v;
        }
    vc_points pp = {pts, np, 5, NULL, VC_MEMORY_HOST};
    CHECK_OK(ctx, vc_net_run_points(a, &pp));
    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    const float range[6] = {-20, -20, -2, 20, 20, 2};
    memcpy(vd.range, range, sizeof range);
    for (int i = 0; i < 3; i++) vd.voxel_size[i] = 0.2f;
    vc_points p4p = {p4, np, 4, NULL, VC_MEMORY_HOST};
    vc_tensor *vox = NULL;
    CHECK_OK(ctx, vc_voxelize(ctx, &vd, &p4p, &vox, NULL));
    CHECK_OK(ctx, vc_net_run(b, vox));
    for (int32_t i = 0; i < 3; i++) {
        vc_net_output ob;
        CHECK_OK(ctx, vc_net_get_output(b, i, &ob));
        same_sparse(a, ob.name, ob.tensor, "run_points vs voxelize + run (same seed)");
    }
    vc_tensor *bad = NULL;
    CHECK_OK(ctx, vc_tensor_cast(ctx, vox, VC_DTYPE_FP16, &bad));
    CHECK_OK(ctx, vc_net_run(b, bad)); /* any dtype: cast to the net's */
    vc_tensor_destroy(bad);
    free(pts), free(p4);
    vc_tensor_destroy(vox);
    vc_net_destroy(a);
    vc_net_destroy(b);
    free(text);
}

/* A residual add of the net's own input (fused as the conv's residual). */
static void test_input_residual(vc_rng *rng, const vc_tensor *in)
{
    const int32_t shape[3] = {21, 64, 64};
    char text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"voxconv-model\", \"version\": 1, \"input\": {\"channels\": 4, "
             "\"spatial_shape\": [%d, %d, %d]}, \"layers\": [{\"op\": \"subm\", \"name\": \"c\", "
             "\"out_channels\": 4, \"kernel\": 3}, {\"op\": \"batchnorm\", \"name\": \"b\"}, "
             "{\"op\": \"add\", \"inputs\": [\"#1\", \"input\"]}, {\"op\": \"relu\", \"id\": \"y\"}], "
             "\"outputs\": {\"y\": \"y\"}}", shape[0], shape[1], shape[2]);
    pstore p = {0};
    const int k3[3] = {3, 3, 3};
    pst_conv(&p, rng, "c", 4, k3, 4, 0);
    pst_bn(&p, rng, "b", 4);
    size_t wn;
    uint8_t *w = pst_serialize(&p, NULL, &wn);
    vc_net *net = make_net(text, w, wn, VC_OK, NULL, "input residual");
    if (net) {
        CHECK_OK(ctx, vc_net_run(net, in));
        vc_tensor *y = conv(&p, in, VC_MAP_SUBM, 3, 1, 0, NULL, "c", "b", 1e-5f, 4, 0, VC_ACT_RELU, 0, in);
        same_sparse(net, "y", y, "input residual");
        vc_tensor_destroy(y);
        int32_t ns = 0;
        CHECK_OK(ctx, vc_net_step_count(net, &ns));
        CHECK(ns == 1);
    }
    vc_net_destroy(net);
    free(w);
    pst_free(&p);
}

/* An add of two conv+BN results: fused into the first conv planned, once (it was once fused
 * into both, the first with no residual yet, and leaked a result every run). */
static void test_two_conv_add(vc_rng *rng, const vc_tensor *in)
{
    const int32_t shape[3] = {21, 64, 64};
    char text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"voxconv-model\", \"version\": 1, \"input\": {\"channels\": 4, "
             "\"spatial_shape\": [%d, %d, %d]}, \"layers\": [{\"op\": \"subm\", \"name\": \"c\", "
             "\"out_channels\": 8, \"kernel\": 3}, {\"op\": \"batchnorm\", \"id\": \"cb\", "
             "\"name\": \"cb\"}, {\"op\": \"subm\", \"input\": \"input\", \"name\": \"p\", "
             "\"out_channels\": 8, \"kernel\": 3}, {\"op\": \"batchnorm\", \"id\": \"pb\", "
             "\"name\": \"pb\"}, {\"op\": \"add\", \"inputs\": [\"cb\", \"pb\"]}, "
             "{\"op\": \"relu\", \"id\": \"y\"}], \"outputs\": {\"y\": \"y\"}}",
             shape[0], shape[1], shape[2]);
    pstore p = {0};
    const int k3[3] = {3, 3, 3};
    pst_conv(&p, rng, "c", 8, k3, 4, 0);
    pst_bn(&p, rng, "cb", 8);
    pst_conv(&p, rng, "p", 8, k3, 4, 0);
    pst_bn(&p, rng, "pb", 8);
    size_t wn;
    uint8_t *w = pst_serialize(&p, NULL, &wn);
    vc_net *net = make_net(text, w, wn, VC_OK, NULL, "two-conv add");
    for (int run = 0; net && run < 2; run++) {
        CHECK_OK(ctx, vc_net_run(net, in));
        vc_tensor *yp = conv(&p, in, VC_MAP_SUBM, 3, 1, 0, NULL, "p", "pb", 1e-5f, 8, 0,
                             VC_ACT_NONE, 0, NULL);
        vc_tensor *y = conv(&p, in, VC_MAP_SUBM, 3, 1, 0, NULL, "c", "cb", 1e-5f, 8, 0,
                            VC_ACT_RELU, 0, yp);
        same_sparse(net, "y", y, "two-conv add");
        vc_tensor_destroy(y);
        vc_tensor_destroy(yp);
        int32_t ns = 0;
        CHECK_OK(ctx, vc_net_step_count(net, &ns));
        CHECK_MSG(ns == 2, "two-conv add: %d steps, expected 2", ns);
    }
    vc_net_destroy(net);
    free(w);
    pst_free(&p);
}

/* Argument errors of a run and of the outputs; fp16 and bf16 nets near the fp32 one. */
static void test_run_errors(vc_rng *rng, const vc_tensor *in)
{
    const int32_t shape[3] = {21, 64, 64}, small[3] = {8, 64, 64};
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    char *text_small = net_model_text(NET_RES_MODEL, small, NULL);
    vc_net *net = random_net(text, 5, VC_DTYPE_FP32), *tiny = random_net(text_small, 5, VC_DTYPE_FP32);
    if (!net || !tiny) return;
    float pt[8] = {0};
    vc_points pp = {pt, 2, 4, NULL, VC_MEMORY_HOST};
    CHECK_STATUS(ctx, vc_net_run_points(net, &pp), VC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(vc_context_last_error(ctx), "no \"voxelize\" block") != NULL);
    CHECK_STATUS(ctx, vc_net_run(tiny, in), VC_ERR_SHAPE_MISMATCH); /* 21 high into 8 */
    CHECK(strstr(vc_context_last_error(ctx), "exceeds") != NULL);
    vc_tensor *wide = NULL;
    const vc_tensor *parts[2] = {in, in};
    CHECK_OK(ctx, vc_tensor_concat(ctx, parts, 2, &wide));
    CHECK_STATUS(ctx, vc_net_run(net, wide), VC_ERR_SHAPE_MISMATCH); /* 8 channels, not 4 */
    CHECK_STATUS(ctx, vc_net_run(net, NULL), VC_ERR_INVALID_ARGUMENT);
    vc_tensor_destroy(wide);
    int32_t bev = -1, blk = -1;
    float one;
    CHECK_OK(ctx, vc_net_find_output(net, "bev", &bev));
    CHECK_OK(ctx, vc_net_find_output(net, "block", &blk));
    CHECK_STATUS(ctx, vc_net_copy_output(net, bev, &one, 4, VC_MEMORY_HOST),
                 VC_ERR_INVALID_ARGUMENT); /* not run yet */
    CHECK_OK(ctx, vc_net_run(net, in));
    CHECK_STATUS(ctx, vc_net_copy_output(net, bev, &one, 4, VC_MEMORY_HOST), VC_ERR_CAPACITY);
    CHECK_STATUS(ctx, vc_net_copy_output(net, blk, &one, 4, VC_MEMORY_HOST),
                 VC_ERR_INVALID_ARGUMENT); /* sparse */
    CHECK_STATUS(ctx, vc_net_get_output(net, 0, NULL), VC_ERR_INVALID_ARGUMENT);
    /* the same seed in fp16 and bf16: near the fp32 net */
    vc_net_output o32;
    CHECK_OK(ctx, vc_net_get_output(net, blk, &o32));
    int32_t *c32;
    float *f32;
    int64_t n32, ch;
    net_host(ctx, o32.tensor, &c32, &f32, &n32, &ch);
    double *ref = malloc((size_t)(n32 * ch) * sizeof(double));
    for (int64_t i = 0; i < n32 * ch; i++) ref[i] = f32[i];
    const vc_dtype dts[2] = {VC_DTYPE_FP16, VC_DTYPE_BF16};
    const double tol[2] = {1e-2, 5e-2};
    for (int k = 0; k < 2; k++) {
        vc_net *h = random_net(text, 5, dts[k]);
        if (!h) continue;
        CHECK_OK(ctx, vc_net_run(h, in));
        vc_net_output o;
        CHECK_OK(ctx, vc_net_get_output(h, blk, &o));
        vc_tensor_info ti;
        vc_tensor_get_info(o.tensor, &ti);
        CHECK(ti.dtype == dts[k]);
        int32_t *c;
        float *f;
        int64_t n, c2;
        net_host(ctx, o.tensor, &c, &f, &n, &c2);
        double e = n == n32 ? vc_rel_err(f, ref, n * c2) : INFINITY;
        printf("%s net vs fp32: relative error %.2e\n", k ? "bf16" : "fp16", e);
        CHECK_MSG(e < tol[k], "%s net: relative error %.3g", k ? "bf16" : "fp16", e);
        free(c), free(f);
        vc_net_destroy(h);
    }
    free(c32), free(f32), free(ref);
    (void)rng;
    vc_net_destroy(net);
    vc_net_destroy(tiny);
    free(text), free(text_small);
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_net");
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    if (vc_context_create(&cd, &ctx) != VC_OK) return 1;
    test_parse_errors();
    test_weight_errors(&rng);
    test_api(&rng);
    vc_tensor *syn = synthetic_input(&rng);
    const int32_t syn_shape[3] = {21, 64, 64};
    test_models(&rng, syn, syn_shape, "synthetic");
    test_bf16_weights(&rng, syn);
    test_input_residual(&rng, syn);
    test_two_conv_add(&rng, syn);
    test_run_errors(&rng, syn);
    vc_tensor_destroy(syn);
    vc_tensor *scan = scan_input();
    if (scan) {
        const int32_t scan_shape[3] = {21, 200, 200}; /* the scan's grid is 20 high: placed */
        test_models(&rng, scan, scan_shape, "vlp16");
        vc_tensor_destroy(scan);
    }
    CHECK_OK(ctx, vc_context_destroy(ctx));
    TEST_END();
}
