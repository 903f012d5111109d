/* tests/gpu/test_gpu_tune.c - the tune cache on a CUDA context: vc_conv_tune on layers of each
 * kind (subm k3, strided k3 s2, inverse, subm 1x1x1; fp16, bf16, tf32), the cache saved and
 * loaded into a new context without a warning; there the planner runs the tuned choice (what
 * ran, read from the context, and vc_conv_plan agree with the tune report), results stay
 * within the GPU tolerances of the CPU twin (1e-2 fp16/bf16, 5e-4 tf32) and are bit-identical
 * run after run. An entry forced by hand (a configuration and a tap split) is obeyed, one that
 * does not fit the layer falls back to the planner's rules, and a cache edited to name another
 * GPU loads as foreign with one warning and changes nothing. Every report obeys the tuner's
 * rule (a kept choice gained more than max(margin, 2 x spread) in its A/B rounds, and the cache
 * entry records that gain); one bucket tuned over two layers gives both its verdict, layers
 * of two buckets are refused; a call with desc.untuned runs the planner's own choice despite
 * the table. Skips (77) without a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#include "gemm/gemm.h"
#include "src/internal.h"

static vc_context *make_ctx(vc_backend b, const char *cache)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = b;
    d.tune_cache = cache;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        fprintf(stderr, "context: %s\n", vc_context_last_error(NULL));
        exit(1);
    }
    return ctx;
}

/* One layer of the test: its map over the scene (or the level before it), channels, dtype. */
typedef struct layer {
    const char *name;
    vc_map_type type;
    int32_t kernel, stride;
    int64_t cin, cout;
    vc_dtype dtype;
    int tf32;
} layer;

/* The scene on both contexts (same rows), its features random in [-1, 1). */
typedef struct scene {
    vc_context *g, *c;
    int32_t *coords;
    int64_t n;
    int32_t shape[3];
    vc_rng *rng;
} scene;

/* Input tensors of `cin` channels on the layer's input set in g and c (the same values, drawn
 * from a copy of `r`: the same r gives the same features on every context). For an INVERSE
 * layer the input set is the strided map's output, *fwd_g / *fwd_c its maps. */
static void inputs(scene *s, const layer *l, vc_rng r, vc_tensor **tg, vc_tensor **tc,
                   vc_kmap **fwd_g, vc_kmap **fwd_c)
{
    vc_coords *cg = NULL, *cc = NULL;
    CHECK_OK(s->g, vc_coords_create(s->g, s->coords, s->n, VC_MEMORY_HOST, s->shape, 1, &cg));
    CHECK_OK(s->c, vc_coords_create(s->c, s->coords, s->n, VC_MEMORY_HOST, s->shape, 1, &cc));
    *fwd_g = *fwd_c = NULL;
    vc_coords *ig = cg, *ic = cc;
    if (l->type == VC_MAP_INVERSE) {
        vc_map_desc md = VC_MAP_DESC_INIT;
        md.type = VC_MAP_STRIDED;
        md.stride[0] = md.stride[1] = md.stride[2] = 2;
        md.padding[0] = md.padding[1] = md.padding[2] = 1;
        CHECK_OK(s->g, vc_kmap_build(s->g, cg, &md, fwd_g));
        CHECK_OK(s->c, vc_kmap_build(s->c, cc, &md, fwd_c));
        vc_kmap_info kg, kc;
        vc_kmap_get_info(*fwd_g, &kg);
        vc_kmap_get_info(*fwd_c, &kc);
        ig = kg.out_coords;
        ic = kc.out_coords;
    }
    vc_coords_info ci;
    vc_coords_get_info(ic, &ci);
    const int64_t ne = ci.count * l->cin;
    float *f = malloc((size_t)(ne + 1) * sizeof *f);
    for (int64_t i = 0; i < ne; i++) f[i] = vc_rng_float(&r);
    const vc_dtype dt = l->dtype;
    CHECK_OK(s->g, vc_tensor_create(s->g, ig, l->cin, VC_DTYPE_FP32, f, VC_MEMORY_HOST, tg));
    CHECK_OK(s->c, vc_tensor_create(s->c, ic, l->cin, VC_DTYPE_FP32, f, VC_MEMORY_HOST, tc));
    if (dt != VC_DTYPE_FP32) { /* the CPU twin gets the same rounded values */
        vc_tensor *a = NULL, *b = NULL;
        CHECK_OK(s->g, vc_tensor_cast(s->g, *tg, dt, &a));
        CHECK_OK(s->c, vc_tensor_cast(s->c, *tc, dt, &b));
        vc_tensor_destroy(*tg);
        vc_tensor_destroy(*tc);
        *tg = a;
        *tc = b;
    }
    free(f);
    vc_coords_destroy(cg);
    vc_coords_destroy(cc);
}

static vc_conv_desc conv_desc(const layer *l, const float *w, const vc_kmap *fwd)
{
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.map.type = l->type;
    d.map.kernel[0] = d.map.kernel[1] = d.map.kernel[2] = l->kernel;
    d.map.stride[0] = d.map.stride[1] = d.map.stride[2] = l->stride;
    d.map.padding[0] = d.map.padding[1] = d.map.padding[2] = l->type == VC_MAP_SUBM ? 0 : 1;
    d.map.inverse_of = fwd;
    d.out_channels = l->cout;
    d.weights = w;
    d.weight_dtype = VC_DTYPE_FP32;
    d.activation = VC_ACT_RELU;
    d.allow_tf32 = l->tf32;
    return d;
}

/* ||gpu - cpu|| / ||cpu|| of two results. */
static double rel_err(vc_context *g, const vc_tensor *tg, vc_context *c, const vc_tensor *tc)
{
    vc_tensor_info gi, ci;
    vc_tensor_get_info(tg, &gi);
    vc_tensor_get_info(tc, &ci);
    if (gi.count != ci.count || gi.channels != ci.channels) return INFINITY;
    const int64_t n = gi.count * gi.channels;
    float *a = malloc((size_t)(n + 1) * 4), *b = malloc((size_t)(n + 1) * 4);
    double *r = malloc((size_t)(n + 1) * 8);
    double e = INFINITY;
    if (vc_tensor_copy_out(g, tg, a, VC_DTYPE_FP32, VC_MEMORY_HOST) == VC_OK &&
        vc_tensor_copy_out(c, tc, b, VC_DTYPE_FP32, VC_MEMORY_HOST) == VC_OK) {
        for (int64_t i = 0; i < n; i++) r[i] = b[i];
        e = vc_rel_err(a, r, n);
    }
    free(a);
    free(b);
    free(r);
    return e;
}

/* 1 when two GPU results hold the same bytes. */
static int same_bits(vc_context *g, const vc_tensor *x, const vc_tensor *y)
{
    vc_tensor_info xi, yi;
    vc_tensor_get_info(x, &xi);
    vc_tensor_get_info(y, &yi);
    const size_t n = (size_t)(xi.count * xi.channels) * vc_dtype_size(xi.dtype);
    if (n != (size_t)(yi.count * yi.channels) * vc_dtype_size(yi.dtype)) return 0;
    unsigned char *a = malloc(n + 1), *b = malloc(n + 1);
    int same = vc_tensor_copy_out(g, x, a, xi.dtype, VC_MEMORY_HOST) == VC_OK &&
               vc_tensor_copy_out(g, y, b, yi.dtype, VC_MEMORY_HOST) == VC_OK &&
               memcmp(a, b, n) == 0;
    free(a);
    free(b);
    return same;
}

/* Runs layer l on context x (GPU) and checks it against the CPU result rc: tolerance, what ran
 * (want_config -1: anything, tuned flag want_tuned) and bit-identity of two runs. */
static void run_checked(const char *what, vc_context *x, const vc_conv_desc *d,
                        const vc_tensor *in, vc_context *c, const vc_tensor *rc, double tol,
                        int32_t want_config, int32_t want_groups, int want_tuned)
{
    vc_tensor *o1 = NULL, *o2 = NULL;
    CHECK_OK(x, vc_conv_forward(x, d, in, &o1));
    const vc_conv_choice ran = x->choice;
    CHECK_OK(x, vc_conv_forward(x, d, in, &o2));
    if (!o1 || !o2) return;
    const double e = rel_err(x, o1, c, rc);
    CHECK_MSG(e <= tol, "%s: error %.3g > %.3g", what, e, tol);
    CHECK_MSG(same_bits(x, o1, o2), "%s: two runs differ", what);
    CHECK_MSG(ran.tuned == want_tuned, "%s: tuned %d, expected %d", what, (int)ran.tuned,
              want_tuned);
    if (want_config >= 0)
        CHECK_MSG(ran.config == want_config && ran.groups == want_groups,
                  "%s: ran config %d / %d groups, expected %d / %d", what, (int)ran.config,
                  (int)ran.groups, (int)want_config, (int)want_groups);
    printf("%s: error %.3g, config %d, groups %d, tuned %d\n", what, e, (int)ran.config,
           (int)ran.groups, (int)ran.tuned);
    vc_tensor_destroy(o1);
    vc_tensor_destroy(o2);
}

/* The tuner's rule on a report: a kept choice was confirmed by A/B rounds and gained more
 * than max(margin, 2 x spread); a finalist not kept did not; without a finalist no rounds ran
 * and the planner's choice stays. */
static void check_verdict(const char *what, const vc_tune_report *r, double margin,
                          int members)
{
    const double need = 1.0 + (margin > 2.0 * r->spread ? margin : 2.0 * r->spread);
    CHECK_MSG(r->members == members, "%s: %d members, expected %d", what, (int)r->members,
              members);
    if (r->changed)
        CHECK_MSG(r->rounds > 0 && r->gain > need && !strcmp(r->tuned, r->finalist),
                  "%s: kept %s with gain %.3f +- %.3f over %d rounds", what, r->tuned, r->gain,
                  r->spread, (int)r->rounds);
    else if (r->rounds > 0)
        CHECK_MSG(r->finalist[0] && (members > 1 || r->gain <= need) &&
                      !strcmp(r->tuned, r->planner),
                  "%s: finalist %s not kept, gain %.3f +- %.3f", what, r->finalist, r->gain,
                  r->spread);
    else
        CHECK_MSG(r->gain == 0.0 && !strcmp(r->tuned, r->planner),
                  "%s: no rounds, yet gain %.3f / tuned %s", what, r->gain, r->tuned);
    printf("%s: finalist '%s', gain %.3f +- %.3f over %d rounds: %s\n", what, r->finalist,
           r->gain, r->spread, (int)r->rounds, r->changed ? "kept" : "planner stays");
}

/* Tunes the layer on a, saves, loads into a new context and checks the planner obeys. */
static void test_layer(scene *s, const layer *l, const char *path)
{
    const double tol = l->dtype == VC_DTYPE_FP32 ? (l->tf32 ? 5e-4 : 1e-6) : 1e-2;
    vc_tensor *tg = NULL, *tc = NULL, *rc = NULL;
    vc_kmap *fg = NULL, *fc = NULL;
    const vc_rng feats = {vc_rng_next(s->rng) | 1u};
    inputs(s, l, feats, &tg, &tc, &fg, &fc);
    const int64_t K = (int64_t)l->kernel * l->kernel * l->kernel, nw = l->cout * K * l->cin;
    float *w = malloc((size_t)nw * 4);
    for (int64_t i = 0; i < nw; i++) w[i] = vc_rng_float(s->rng) / sqrtf((float)(K * l->cin));
    vc_conv_desc dg = conv_desc(l, w, fg), dc = conv_desc(l, w, fc);
    CHECK_OK(s->c, vc_conv_forward(s->c, &dc, tc, &rc));

    vc_tune_options to = VC_TUNE_OPTIONS_INIT;
    to.runs = 3;
    if (getenv("VC_SANITIZE")) to.rounds = 3; /* memcheck: fewer launches, same logic */
    vc_tune_report r;
    CHECK_OK(s->g, vc_conv_tune(s->g, &dg, tg, &to, &r));
    printf("%s: %s: %d choices, planner %s %.4f ms, %s %s %.4f ms\n", l->name, r.bucket,
           (int)r.candidates, r.planner, r.planner_ms, r.changed ? "tuned" : "kept", r.tuned,
           r.tuned_ms);
    CHECK(r.bucket[0] != 0 && r.planner[0] != 0);
    CHECK(r.changed ? r.tuned_ms < r.planner_ms : strcmp(r.tuned, r.planner) == 0);
    check_verdict(l->name, &r, to.margin, 1);
    /* a kept entry records the gain it was kept for */
    const vc_tune_entry *te = NULL;
    for (int32_t i = 0; i < s->g->tune.n; i++) {
        char kt[96];
        vc_tune_key_text(&s->g->tune.e[i].key, kt, sizeof kt);
        if (!strcmp(kt, r.bucket)) te = &s->g->tune.e[i];
    }
    CHECK_MSG(!r.changed || (te && te->config >= 0 && te->ms_planner > te->ms_tuned &&
                             fabs(te->ms_planner / te->ms_tuned - r.gain) < 1e-9 * r.gain),
              "%s: the kept entry does not record its gain %.4f", l->name, r.gain);
    CHECK_OK(s->g, vc_tune_cache_save(s->g, path));

    vc_context *b = make_ctx(VC_BACKEND_CUDA, path);
    CHECK_MSG(vc_context_warning(b)[0] == 0, "%s", vc_context_warning(b));
    int32_t na = 0, nb = 0;
    vc_tune_cache_count(s->g, &na);
    vc_tune_cache_count(b, &nb);
    CHECK(na == nb && nb >= (l->dtype == VC_DTYPE_FP32 && !l->tf32 ? 0 : 1));
    /* the same layer on b's own copies of the input */
    scene sb = *s;
    sb.g = b;
    vc_tensor *bg = NULL, *bc = NULL;
    vc_kmap *bfg = NULL, *bfc = NULL;
    inputs(&sb, l, feats, &bg, &bc, &bfg, &bfc);
    vc_conv_desc db = conv_desc(l, w, bfg);
    const char *slash = strchr(r.tuned, '/');
    const int32_t cfg =
        r.changed && slash ? vc_gemm_config_named(r.tuned, (size_t)(slash - r.tuned)) : -1;
    const int32_t groups = slash ? atoi(slash + 1) : 1;
    run_checked(l->name, b, &db, bg, s->c, rc, tol, cfg, groups, r.changed);
    /* vc_conv_plan says the same */
    vc_kmap *m = NULL;
    vc_tensor_info bi;
    vc_tensor_get_info(bg, &bi);
    CHECK_OK(b, vc_kmap_build(b, bi.coords, &db.map, &m));
    vc_conv_plan_info pi;
    vc_conv_desc dp = db;
    dp.in_channels = l->cin;
    CHECK_OK(b, vc_conv_plan(b, &dp, m, l->dtype, &pi));
    CHECK_MSG(pi.tuned == r.changed && (!r.changed || !strncmp(pi.config, r.tuned, strlen(
                                                          pi.config))),
              "%s: vc_conv_plan says %s (tuned %d), the tune report %s", l->name, pi.config,
              (int)pi.tuned, r.tuned);
    /* the bucket the API names is the tuner's */
    char bk[96];
    CHECK_OK(b, vc_conv_bucket(b, &dp, m, l->dtype, bk, sizeof bk));
    CHECK_MSG(!strcmp(bk, r.bucket), "%s: vc_conv_bucket '%s', tune '%s'", l->name, bk,
              r.bucket);
    /* untuned: the planner's own plan even where the cache has the bucket */
    dp.untuned = 1;
    CHECK_OK(b, vc_conv_plan(b, &dp, m, l->dtype, &pi));
    CHECK(pi.tuned == 0);
    vc_kmap_destroy(m);
    vc_tensor_destroy(bg);
    vc_tensor_destroy(bc);
    vc_kmap_destroy(bfg);
    vc_kmap_destroy(bfc);
    vc_context_destroy(b);
    vc_tensor_destroy(tg);
    vc_tensor_destroy(tc);
    vc_tensor_destroy(rc);
    vc_kmap_destroy(fg);
    vc_kmap_destroy(fc);
    free(w);
}

/* One bucket over two layers (the same layer on two copies of the scene): both reports carry
 * the bucket's verdict under the rule, each its own A/B; layers of two buckets are refused. */
static void test_bucket(scene *s)
{
    const layer l = {"bucket", VC_MAP_SUBM, 3, 1, 32, 32, VC_DTYPE_FP16, 0};
    const layer l2 = {"other bucket", VC_MAP_SUBM, 3, 1, 32, 64, VC_DTYPE_FP16, 0};
    vc_context *x = make_ctx(VC_BACKEND_CUDA, NULL);
    scene sx = *s;
    sx.g = x;
    vc_tensor *g[3] = {NULL, NULL, NULL}, *c[3] = {NULL, NULL, NULL};
    vc_kmap *f[6] = {NULL};
    const vc_rng feats = {vc_rng_next(s->rng) | 1u};
    for (int i = 0; i < 3; i++) inputs(&sx, i < 2 ? &l : &l2, feats, &g[i], &c[i], &f[2 * i],
                                       &f[2 * i + 1]);
    float *w = malloc((size_t)64 * 27 * 32 * 4);
    for (int64_t i = 0; i < 64 * 27 * 32; i++) w[i] = vc_rng_float(s->rng) * 0.05f;
    vc_conv_desc d[2] = {conv_desc(&l, w, NULL), conv_desc(&l, w, NULL)};
    const vc_tensor *in[2] = {g[0], g[1]};
    vc_tune_options to = VC_TUNE_OPTIONS_INIT;
    to.runs = 3;
    to.rounds = getenv("VC_SANITIZE") ? 3 : 5;
    vc_tune_report r[2];
    CHECK_OK(x, vc_conv_tune_layers(x, 2, d, in, &to, r));
    CHECK(!strcmp(r[0].bucket, r[1].bucket) && r[0].changed == r[1].changed &&
          r[0].rounds == r[1].rounds && !strcmp(r[0].finalist, r[1].finalist));
    check_verdict("bucket, layer 1", &r[0], to.margin, 2);
    check_verdict("bucket, layer 2", &r[1], to.margin, 2);
    int wins = 0; /* not kept after rounds: some layer did not gain beyond its noise */
    for (int i = 0; i < 2; i++)
        wins += r[i].gain > 1.0 + (to.margin > 2.0 * r[i].spread ? to.margin : 2.0 * r[i].spread);
    CHECK(r[0].changed || r[0].rounds == 0 || wins < 2);
    int32_t n = 0;
    vc_tune_cache_count(x, &n);
    CHECK(n == 1);
    /* two buckets: refused, the table unchanged */
    d[1] = conv_desc(&l2, w, NULL);
    in[1] = g[2];
    CHECK(vc_conv_tune_layers(x, 2, d, in, &to, r) == VC_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(vc_context_last_error(x), "falls in bucket") != NULL, "%s",
              vc_context_last_error(x));
    vc_tune_cache_count(x, &n);
    CHECK(n == 1);
    for (int i = 0; i < 3; i++) {
        vc_tensor_destroy(g[i]);
        vc_tensor_destroy(c[i]);
    }
    for (int i = 0; i < 6; i++) vc_kmap_destroy(f[i]);
    free(w);
    CHECK_OK(x, vc_context_destroy(x));
}

/* Entries put by hand: a configuration and split the planner would not pick is obeyed; one
 * that does not fit the layer falls back to the rules; a foreign cache changes nothing. */
static void test_forced(scene *s, const char *path)
{
    const layer l = {"forced", VC_MAP_SUBM, 3, 1, 32, 32, VC_DTYPE_FP16, 0};
    vc_tensor *tg = NULL, *tc = NULL, *rc = NULL;
    vc_kmap *fg = NULL, *fc = NULL;
    const vc_rng feats = {vc_rng_next(s->rng) | 1u};
    inputs(s, &l, feats, &tg, &tc, &fg, &fc);
    const int64_t nw = l.cout * 27 * l.cin;
    float *w = malloc((size_t)nw * 4);
    for (int64_t i = 0; i < nw; i++) w[i] = vc_rng_float(s->rng) * 0.1f;
    vc_conv_desc dg = conv_desc(&l, w, NULL), dc = conv_desc(&l, w, NULL);
    CHECK_OK(s->c, vc_conv_forward(s->c, &dc, tc, &rc));
    vc_context *x = make_ctx(VC_BACKEND_CUDA, NULL);
    vc_tensor *xg = NULL, *xc = NULL;
    vc_kmap *a = NULL, *b = NULL;
    scene sx = *s;
    sx.g = x;
    inputs(&sx, &l, feats, &xg, &xc, &a, &b);
    vc_tensor *o = NULL;
    CHECK_OK(x, vc_conv_forward(x, &dg, xg, &o)); /* the planner's choice, and the layer's map */
    const vc_conv_choice planner = x->choice;
    vc_tensor_destroy(o);
    vc_tensor_info ti;
    vc_tensor_get_info(xg, &ti);
    vc_kmap *m = NULL;
    CHECK_OK(x, vc_kmap_build(x, ti.coords, &dg.map, &m));
    vc_tune_entry e;
    memset(&e, 0, sizeof e);
    CHECK(vc_tune_key_of(&m->data, l.cin, l.cout, l.dtype, 0, &e.key) == 0);
    /* a configuration other than the planner's, with a two-group split */
    const char *want = planner.config == vc_gemm_config_named("f16_64x64x32_s4", 15)
                           ? "f16_64x32x32_s3"
                           : "f16_64x64x32_s4";
    e.config = vc_gemm_config_named(want, strlen(want));
    e.split = 2;
    CHECK(e.config >= 0 && vc_tune_put(&x->tune, &e) == 0);
    run_checked("forced entry", x, &dg, xg, s->c, rc, 1e-2, e.config, 2, 1);
    vc_conv_desc du = dg; /* a call that asks for the planner's own rules */
    du.untuned = 1;
    run_checked("untuned call", x, &du, xg, s->c, rc, 1e-2, planner.config, planner.groups, 0);
    CHECK_OK(x, vc_tune_cache_save(x, path));
    /* the same through a file */
    vc_context *y = make_ctx(VC_BACKEND_CUDA, path);
    CHECK_MSG(vc_context_warning(y)[0] == 0, "%s", vc_context_warning(y));
    vc_tensor *yg = NULL, *yc = NULL;
    vc_kmap *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL;
    sx.g = y;
    inputs(&sx, &l, feats, &yg, &yc, &c1, &c2);
    run_checked("forced, loaded", y, &dg, yg, s->c, rc, 1e-2, e.config, 2, 1);
    vc_tensor_destroy(yg);
    vc_tensor_destroy(yc);
    vc_context_destroy(y);
    /* a configuration of another dtype does not fit: the planner's rules run */
    e.config = vc_gemm_config_named("bf16_64x64x32_s4", 16);
    CHECK(e.config >= 0 && vc_tune_put(&x->tune, &e) == 0);
    run_checked("unfit entry", x, &dg, xg, s->c, rc, 1e-2, planner.config, planner.groups, 0);
    /* a cache made for another GPU: one warning, nothing loaded, the planner's choice */
    FILE *f = fopen(path, "rb");
    char text[1 << 16];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    char *at = strstr(text, "\"name\":");
    if (at) memcpy(at + 9, "Z", 1); /* the device name's first letter */
    f = fopen(path, "wb");
    if (f) fwrite(text, 1, n, f), fclose(f);
    vc_context *z = make_ctx(VC_BACKEND_CUDA, path);
    CHECK_MSG(strstr(vc_context_warning(z), "foreign") != NULL, "%s", vc_context_warning(z));
    int32_t cnt = -1;
    vc_tune_cache_count(z, &cnt);
    CHECK(cnt == 0);
    vc_tensor *zg = NULL, *zc = NULL;
    sx.g = z;
    inputs(&sx, &l, feats, &zg, &zc, &c3, &c4);
    run_checked("foreign cache", z, &dg, zg, s->c, rc, 1e-2, planner.config, planner.groups, 0);
    vc_tensor_destroy(zg);
    vc_tensor_destroy(zc);
    vc_context_destroy(z);
    vc_kmap_destroy(m);
    vc_kmap_destroy(a);
    vc_kmap_destroy(b);
    vc_kmap_destroy(c1);
    vc_kmap_destroy(c2);
    vc_kmap_destroy(c3);
    vc_kmap_destroy(c4);
    vc_tensor_destroy(xg);
    vc_tensor_destroy(xc);
    CHECK_OK(x, vc_context_destroy(x));
    vc_tensor_destroy(tg);
    vc_tensor_destroy(tc);
    vc_tensor_destroy(rc);
    free(w);
}
#endif

int main(void)
{
#ifndef VOXCONV_HAVE_CUDA
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
#else
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_tune");
    scene s = {make_ctx(VC_BACKEND_CUDA, NULL), make_ctx(VC_BACKEND_CPU, NULL), NULL, 0,
               {0, 0, 0}, &rng};
    /* a LiDAR sweep of the library's generator, its rows on the host */
    vc_synth_desc sd = VC_SYNTH_DESC_INIT;
    sd.voxels = getenv("VC_SANITIZE") ? 3000 : 30000;
    vc_tensor *scene_t = NULL;
    CHECK_OK(s.c, vc_synth_voxels(s.c, &sd, &scene_t));
    if (!scene_t) TEST_END();
    vc_tensor_info ti;
    vc_tensor_get_info(scene_t, &ti);
    vc_coords_info ci;
    vc_coords_get_info(ti.coords, &ci);
    s.n = ci.count;
    memcpy(s.shape, ci.spatial_shape, sizeof s.shape);
    s.coords = malloc((size_t)s.n * 16);
    memcpy(s.coords, ci.data, (size_t)s.n * 16);
    vc_tensor_destroy(scene_t);
    const char *path = vc_test_tmp_path("gpu_tune_", "cache.json");
    const layer layers[] = {
        {"subm k3 fp16", VC_MAP_SUBM, 3, 1, 32, 32, VC_DTYPE_FP16, 0},
        {"strided k3 s2 fp16", VC_MAP_STRIDED, 3, 2, 32, 64, VC_DTYPE_FP16, 0},
        {"inverse k3 fp16", VC_MAP_INVERSE, 3, 2, 64, 32, VC_DTYPE_FP16, 0},
        {"subm k1 fp16", VC_MAP_SUBM, 1, 1, 64, 128, VC_DTYPE_FP16, 0},
        {"subm k3 bf16", VC_MAP_SUBM, 3, 1, 64, 64, VC_DTYPE_BF16, 0},
        {"subm k3 tf32", VC_MAP_SUBM, 3, 1, 16, 32, VC_DTYPE_FP32, 1},
        {"subm k3 fp32", VC_MAP_SUBM, 3, 1, 16, 16, VC_DTYPE_FP32, 0},
    };
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) test_layer(&s, &layers[i], path);
    test_bucket(&s);
    test_forced(&s, path);
    free(s.coords);
    CHECK_OK(s.g, vc_context_destroy(s.g));
    CHECK_OK(s.c, vc_context_destroy(s.c));
    TEST_END();
#endif
}
