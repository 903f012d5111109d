/* tests/gpu/test_gpu_api.c - the public API on a CUDA context against the same calls on a CPU
 * context: voxelization of a synthetic scan (and the real scans when datasets/fetch has run),
 * kernel maps of every type (bit-identical), a small network of convolutions (every map type,
 * fp32/fp16/bf16, bias, activations, residual), pooling and global pooling, and the caching and
 * error behaviour that only a device context shows, and the bounded (graph-capturable) kernel
 * maps against vc_kmap_build. Skips (77) without CUDA or a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

static vc_context *make_ctx(vc_backend b)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = b;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        fprintf(stderr, "context: %s\n", vc_context_last_error(NULL));
        exit(1);
    }
    return ctx;
}

/* Host copy of a tensor's features as fp32 and of its coordinates. */
static float *feats_of(vc_context *ctx, const vc_tensor *t, int64_t *n, int64_t *c)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    *n = ti.count;
    *c = ti.channels;
    float *f = malloc((size_t)(ti.count * ti.channels + 1) * 4);
    if (vc_tensor_copy_out(ctx, t, f, VC_DTYPE_FP32, VC_MEMORY_HOST) != VC_OK) {
        free(f);
        return NULL;
    }
    return f;
}

static int32_t *coords_of(vc_context *ctx, const vc_tensor *t, int64_t *n)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    vc_coords_info ci;
    vc_coords_get_info(ti.coords, &ci);
    *n = ci.count;
    int32_t *c = malloc((size_t)(ci.count + 1) * 16);
    vc_coords_copy_out(ctx, ti.coords, c, VC_MEMORY_HOST);
    return c;
}

/* Compares a GPU tensor with a CPU tensor: same coordinates, features within tol. */
static void compare(const char *what, vc_context *g, const vc_tensor *tg, vc_context *c,
                    const vc_tensor *tc, double tol)
{
    int64_t ng, nc, cg, cc, kg, kc;
    int32_t *xg = coords_of(g, tg, &kg), *xc = coords_of(c, tc, &kc);
    CHECK_MSG(kg == kc && memcmp(xg, xc, (size_t)kg * 16) == 0, "%s: coordinates differ", what);
    float *fg = feats_of(g, tg, &ng, &cg), *fc = feats_of(c, tc, &nc, &cc);
    CHECK_MSG(fg && fc && ng == nc && cg == cc, "%s: shapes differ", what);
    if (fg && fc && ng == nc && cg == cc) {
        double *ref = malloc((size_t)(nc * cc + 1) * sizeof(double));
        for (int64_t i = 0; i < nc * cc; i++) ref[i] = fc[i];
        double e = vc_rel_err(fg, ref, nc * cc);
        CHECK_MSG(e <= tol, "%s: rel err %.3g > %.3g", what, e, tol);
        printf("  %-34s %8lld rows x %3lld ch, rel err %.2e\n", what, (long long)ng,
               (long long)cg, e);
        free(ref);
    }
    free(xg); free(xc); free(fg); free(fc);
}

/* A synthetic outdoor-like scan: points on a ground plane and on a few walls. */
static float *synthetic_scan(vc_rng *rng, int64_t n)
{
    float *p = malloc((size_t)n * 16);
    for (int64_t i = 0; i < n; i++) {
        float r = 2.0f + 38.0f * (float)(vc_rng_next(rng) % 100000) / 100000.0f;
        float a = 6.2831853f * vc_rng_float(rng);
        float x = r * cosf(a), y = r * sinf(a), z = -1.7f + 0.02f * vc_rng_float(rng);
        if (i % 4 == 0) { x = 10.0f + 0.05f * vc_rng_float(rng); z = -1.7f + 3.0f * fabsf(vc_rng_float(rng)); }
        p[4 * i + 0] = x; p[4 * i + 1] = y; p[4 * i + 2] = z;
        p[4 * i + 3] = fabsf(vc_rng_float(rng));
    }
    return p;
}

static float *random_weights(vc_rng *rng, int64_t n, float scale)
{
    float *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) w[i] = scale * vc_rng_float(rng);
    return w;
}

static void run_net(const char *name, vc_context *g, vc_context *c, const float *pts, int64_t np,
                    vc_rng *rng, vc_dtype dt)
{
    printf("%s (%s)\n", name, dt == VC_DTYPE_FP32 ? "fp32" : dt == VC_DTYPE_FP16 ? "fp16" : "bf16");
    double tol = dt == VC_DTYPE_FP32 ? 1e-6 : 1e-2;
    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    vd.voxel_size[0] = vd.voxel_size[1] = 0.1f; vd.voxel_size[2] = 0.15f;
    const float range[6] = {-40, -40, -3, 40, 40, 3};
    memcpy(vd.range, range, sizeof range);
    vd.dtype = dt;
    vc_points p = {pts, np, 4, NULL, VC_MEMORY_HOST};
    vc_tensor *xg = NULL, *xc = NULL;
    vc_voxelize_stats sg, sc;
    CHECK_OK(g, vc_voxelize(g, &vd, &p, &xg, &sg));
    CHECK_OK(c, vc_voxelize(c, &vd, &p, &xc, &sc));
    if (!xg || !xc) return;
    CHECK(memcmp(&sg, &sc, sizeof sg) == 0);
    compare("voxelize mean", g, xg, c, xc, dt == VC_DTYPE_FP32 ? 1e-6 : 1e-2);

    /* layer list: type, kernel, stride, padding, cout, act, residual */
    struct { vc_map_type type; int k, s, pad, cout; vc_activation act; int res; const char *n; }
    L[] = {{VC_MAP_SUBM, 3, 1, 0, 16, VC_ACT_RELU, 0, "subm k3 4->16 relu"},
           {VC_MAP_SUBM, 3, 1, 0, 16, VC_ACT_RELU, 1, "subm k3 16->16 +res relu"},
           {VC_MAP_STRIDED, 3, 2, 1, 32, VC_ACT_LEAKY_RELU, 0, "strided k3s2p1 16->32 leaky"},
           {VC_MAP_SUBM, 5, 1, 0, 17, VC_ACT_NONE, 0, "subm k5 32->17"},
           {VC_MAP_DOWNSAMPLE, 2, 2, 0, 96, VC_ACT_RELU, 0, "downsample k2s2 17->96"},
           {VC_MAP_INVERSE, 2, 2, 0, 24, VC_ACT_NONE, 0, "inverse of k2s2 96->24"},
           {VC_MAP_TRANSPOSED, 3, 2, 1, 8, VC_ACT_NONE, 0, "transposed k3s2p1 24->8"}};
    vc_tensor *cur_g = xg, *cur_c = xc, *all[64];
    int n_all = 0;
    all[n_all++] = xg;
    all[n_all++] = xc;
    vc_kmap *fwd_g = NULL, *fwd_c = NULL;
    for (size_t l = 0; l < sizeof L / sizeof L[0]; l++) {
        vc_tensor_info ti;
        vc_tensor_get_info(cur_c, &ti);
        int64_t cin = ti.channels;
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.map.type = L[l].type;
        for (int a = 0; a < 3; a++) {
            d.map.kernel[a] = L[l].k; d.map.stride[a] = L[l].s; d.map.padding[a] = L[l].pad;
        }
        d.out_channels = L[l].cout;
        int64_t K = (int64_t)L[l].k * L[l].k * L[l].k;
        float *w = random_weights(rng, L[l].cout * K * cin, 1.0f / sqrtf((float)(K * cin)));
        float *b = random_weights(rng, L[l].cout, 0.1f);
        d.weights = w;
        d.bias = b;
        d.activation = L[l].act;
        vc_tensor *og = NULL, *oc = NULL;
        if (L[l].type == VC_MAP_INVERSE) {
            d.map.inverse_of = fwd_g;
            if (fwd_g) CHECK_OK(g, vc_conv_forward(g, &d, cur_g, &og));
            d.map.inverse_of = fwd_c;
            if (fwd_c) CHECK_OK(c, vc_conv_forward(c, &d, cur_c, &oc));
        } else {
            if (L[l].res) { d.residual = cur_g; }
            CHECK_OK(g, vc_conv_forward(g, &d, cur_g, &og));
            if (L[l].res) { d.residual = cur_c; }
            CHECK_OK(c, vc_conv_forward(c, &d, cur_c, &oc));
        }
        if (L[l].type == VC_MAP_DOWNSAMPLE) {
            vc_tensor_info ig, ic;
            vc_tensor_get_info(cur_g, &ig);
            vc_tensor_get_info(cur_c, &ic);
            vc_map_desc md = d.map;
            CHECK_OK(g, vc_kmap_build(g, ig.coords, &md, &fwd_g)); /* the cached one */
            CHECK_OK(c, vc_kmap_build(c, ic.coords, &md, &fwd_c));
        }
        free(w);
        free(b);
        if (!og || !oc) {
            vc_tensor_destroy(og);
            vc_tensor_destroy(oc);
            break;
        }
        compare(L[l].n, g, og, c, oc, tol);
        all[n_all++] = og;
        all[n_all++] = oc;
        cur_g = og; cur_c = oc;
    }
    /* pooling on the last tensor, and global pooling */
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.map.type = VC_MAP_STRIDED;
    for (int a = 0; a < 3; a++) { pd.map.kernel[a] = 2; pd.map.stride[a] = 2; }
    for (int mode = 0; mode < 2; mode++) {
        pd.mode = (vc_pool_mode)mode;
        vc_tensor *pg = NULL, *pc = NULL;
        CHECK_OK(g, vc_pool_forward(g, &pd, cur_g, &pg));
        CHECK_OK(c, vc_pool_forward(c, &pd, cur_c, &pc));
        if (pg && pc) compare(mode ? "avg pool k2s2" : "max pool k2s2", g, pg, c, pc, tol);
        vc_tensor_destroy(pg);
        vc_tensor_destroy(pc);
        vc_tensor_info ti;
        vc_tensor_get_info(cur_c, &ti);
        float hg[64], hc[64];
        memset(hg, 0, sizeof hg);
        CHECK_OK(g, vc_global_pool(g, (vc_pool_mode)mode, cur_g, hg, VC_MEMORY_HOST));
        CHECK_OK(c, vc_global_pool(c, (vc_pool_mode)mode, cur_c, hc, VC_MEMORY_HOST));
        double ref[64];
        for (int i = 0; i < ti.channels; i++) ref[i] = hc[i];
        double e = vc_rel_err(hg, ref, ti.channels);
        CHECK_MSG(e <= tol, "global pool %d: %.3g", mode, e);
    }
    vc_kmap_destroy(fwd_g);
    vc_kmap_destroy(fwd_c);
    for (int i = 0; i < n_all; i++) vc_tensor_destroy(all[i]);
}

static void test_maps_identical(vc_context *g, vc_context *c, vc_rng *rng)
{
    const int32_t shape[3] = {41, 200, 176};
    int64_t n = 5000;
    int32_t *rows = malloc((size_t)n * 16);
    int64_t kept = 0;
    /* distinct random rows: a coarse lattice walk */
    for (int64_t i = 0; i < n; i++) {
        int32_t b = (int32_t)vc_rng_int(rng, 2), z = (int32_t)vc_rng_int(rng, shape[0]);
        int32_t y = (int32_t)vc_rng_int(rng, shape[1]), x = (int32_t)vc_rng_int(rng, shape[2]);
        int dup = 0;
        for (int64_t j = 0; j < kept && !dup; j++)
            dup = rows[4 * j] == b && rows[4 * j + 1] == z && rows[4 * j + 2] == y &&
                  rows[4 * j + 3] == x;
        if (dup) continue;
        rows[4 * kept] = b; rows[4 * kept + 1] = z; rows[4 * kept + 2] = y; rows[4 * kept + 3] = x;
        kept++;
    }
    vc_coords *cg = NULL, *cc = NULL;
    CHECK_OK(g, vc_coords_create(g, rows, kept, VC_MEMORY_HOST, shape, 2, &cg));
    CHECK_OK(c, vc_coords_create(c, rows, kept, VC_MEMORY_HOST, shape, 2, &cc));
    vc_map_type types[4] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE, VC_MAP_TRANSPOSED};
    for (int t = 0; t < 4; t++) {
        vc_map_desc d = VC_MAP_DESC_INIT;
        d.type = types[t];
        if (t > 0) for (int a = 0; a < 3; a++) { d.stride[a] = 2; d.kernel[a] = t == 2 ? 2 : 3; }
        vc_kmap *mg = NULL, *mc = NULL;
        CHECK_OK(g, vc_kmap_build(g, cg, &d, &mg));
        CHECK_OK(c, vc_kmap_build(c, cc, &d, &mc));
        if (!mg || !mc) continue;
        vc_kmap_info ig, ic;
        vc_kmap_get_info(mg, &ig);
        vc_kmap_get_info(mc, &ic);
        CHECK(ig.memory == VC_MEMORY_DEVICE && ic.memory == VC_MEMORY_HOST);
        CHECK(ig.out_count == ic.out_count && ig.pair_count == ic.pair_count);
        const int32_t *og, *oc;
        vc_kmap_out_in(mg, &og);
        vc_kmap_out_in(mc, &oc);
        size_t bytes = (size_t)ic.out_count * (size_t)ic.volume * 4;
        int32_t *h = malloc(bytes + 4);
        CHECK(cudaMemcpy(h, og, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK_MSG(memcmp(h, oc, bytes) == 0, "map type %d: out_in differs", t);
        free(h);
        vc_kmap *again = NULL;
        CHECK_OK(g, vc_kmap_build(g, cg, &d, &again));
        CHECK(again == mg);
        vc_kmap_destroy(again);
        vc_kmap_destroy(mg);
        vc_kmap_destroy(mc);
    }
    /* duplicates are reported by the device build as by the CPU */
    rows[4] = rows[0]; rows[5] = rows[1]; rows[6] = rows[2]; rows[7] = rows[3];
    vc_coords *dg = NULL;
    CHECK_OK(g, vc_coords_create(g, rows, kept, VC_MEMORY_HOST, shape, 2, &dg));
    vc_map_desc d = VC_MAP_DESC_INIT;
    vc_kmap *bad = (vc_kmap *)0x1;
    CHECK_STATUS(g, vc_kmap_build(g, dg, &d, &bad), VC_ERR_DUPLICATE);
    CHECK(bad == (vc_kmap *)0x1);
    vc_coords_destroy(dg);
    vc_coords_destroy(cg);
    vc_coords_destroy(cc);
    free(rows);
}

/* Host copy of `bytes` at device address d (NULL when d is NULL). */
static void *from_device(const void *d, size_t bytes)
{
    if (!d) return NULL;
    void *h = malloc(bytes + 16);
    if (cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        return NULL;
    }
    return h;
}

/* Device array `a` (bytes) equals device array `b`. */
static int same_device(const void *a, const void *b, size_t bytes)
{
    if (bytes == 0) return 1;
    void *ha = from_device(a, bytes), *hb = from_device(b, bytes);
    int same = ha && hb && memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    return same;
}

/* A bounded map's arrays after its last check equal those of vc_kmap_build over `rows`. */
static void compare_bounded(vc_context *g, vc_kmap_bounded *b, const int32_t *rows, int64_t n,
                            const int32_t shape[3], const vc_map_desc *d, const char *what)
{
    vc_coords *cs = NULL;
    vc_kmap *m = NULL;
    CHECK_OK(g, vc_coords_create(g, rows, n, VC_MEMORY_HOST, shape, 2, &cs));
    CHECK_OK(g, vc_kmap_build(g, cs, d, &m));
    int64_t n_out = -1, n_pairs = -1;
    CHECK_OK(g, vc_kmap_bounded_check(b, &n_out, &n_pairs));
    if (!m) {
        vc_coords_destroy(cs);
        return;
    }
    vc_kmap_info info;
    vc_kmap_get_info(m, &info);
    CHECK_MSG(n_out == info.out_count && n_pairs == info.pair_count,
              "%s: bounded counts %lld / %lld, regular %lld / %lld", what, (long long)n_out,
              (long long)n_pairs, (long long)info.out_count, (long long)info.pair_count);
    vc_kmap_bounded_arrays a;
    CHECK_OK(g, vc_kmap_bounded_arrays_get(b, &a));
    CHECK(a.volume == info.volume && a.mask_words == info.mask_words);
    const int32_t *out_in, *in_rows, *out_rows, *perm;
    const int64_t *offsets;
    const uint32_t *masks;
    vc_kmap_out_in(m, &out_in);
    vc_kmap_pairs(m, &in_rows, &out_rows, &offsets);
    vc_kmap_masks(m, &masks, &perm);
    const size_t no = (size_t)info.out_count, np = (size_t)info.pair_count;
    CHECK_MSG(same_device(a.out_in, out_in, no * (size_t)info.volume * 4), "%s: out_in", what);
    CHECK_MSG(same_device(a.offsets, offsets, ((size_t)info.volume + 1) * 8), "%s: offsets",
              what);
    CHECK_MSG(same_device(a.in_rows, in_rows, np * 4) && same_device(a.out_rows, out_rows, np * 4),
              "%s: pair lists", what);
    CHECK_MSG(same_device(a.masks, masks, no * (size_t)info.mask_words * 4) &&
                  same_device(a.perm, perm, no * 4), "%s: masks / perm", what);
    if (d->type == VC_MAP_SUBM) {
        CHECK_MSG(a.out_coords == NULL, "%s: SUBM out_coords", what);
    } else {
        int32_t *oc = malloc(no * 16 + 16), *bc = from_device(a.out_coords, no * 16);
        CHECK_OK(g, vc_coords_copy_out(g, info.out_coords, oc, VC_MEMORY_HOST));
        CHECK_MSG(bc && memcmp(oc, bc, no * 16) == 0, "%s: out_coords", what);
        free(oc);
        free(bc);
    }
    vc_kmap_destroy(m);
    vc_coords_destroy(cs);
}

/* The public bounded map: bit-identical to vc_kmap_build for every new-output type and SUBM; a
 * build captured in a CUDA graph replays on new rows written into the same buffer; bounds too
 * small, duplicates and unsupported requests get their statuses. */
static void test_bounded(vc_context *g, vc_rng *rng)
{
    const int32_t shape[3] = {41, 200, 176};
    const int64_t n = 4000;
    int32_t *rows = malloc((size_t)n * 16), *rows2 = malloc((size_t)n * 16);
    int64_t kept = 0;
    while (kept < n) { /* distinct rows */
        int32_t r[4] = {(int32_t)vc_rng_int(rng, 2), (int32_t)vc_rng_int(rng, shape[0]),
                        (int32_t)vc_rng_int(rng, shape[1]), (int32_t)vc_rng_int(rng, shape[2])};
        int dup = 0;
        for (int64_t j = 0; j < kept && !dup; j++) dup = !memcmp(rows + 4 * j, r, 16);
        if (!dup) memcpy(rows + 4 * kept++, r, 16);
    }
    const int64_t n2 = 3 * n / 4; /* the replay's rows: the first 3/4, reversed */
    for (int64_t i = 0; i < n2; i++) memcpy(rows2 + 4 * i, rows + 4 * (n2 - 1 - i), 16);
    int32_t *d_rows = NULL;
    CHECK(cudaMalloc((void **)&d_rows, (size_t)n * 16) == cudaSuccess);
    CHECK(cudaMemcpy(d_rows, rows, (size_t)n * 16, cudaMemcpyHostToDevice) == cudaSuccess);
    cudaStream_t st = NULL;
    /* a blocking stream: it waits for the legacy stream's pageable cudaMemcpy uploads */
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    CHECK_OK(g, vc_context_set_stream(g, st));
    vc_map_type types[4] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE, VC_MAP_TRANSPOSED};
    for (int t = 0; t < 4; t++) {
        char what[64];
        snprintf(what, sizeof what, "bounded map type %d", (int)types[t]);
        vc_map_desc d = VC_MAP_DESC_INIT;
        d.type = types[t];
        if (t > 0) for (int a = 0; a < 3; a++) { d.stride[a] = 2; d.kernel[a] = t == 2 ? 2 : 3; }
        /* the regular build's counts size the bounds (with slack) */
        vc_coords *cs = NULL;
        vc_kmap *m = NULL;
        CHECK_OK(g, vc_coords_create(g, rows, n, VC_MEMORY_HOST, shape, 2, &cs));
        CHECK_OK(g, vc_kmap_build(g, cs, &d, &m));
        if (!m) continue;
        vc_kmap_info info;
        vc_kmap_get_info(m, &info);
        vc_kmap_bounded_desc bd = VC_KMAP_BOUNDED_DESC_INIT;
        bd.map = d;
        memcpy(bd.shape, shape, sizeof bd.shape);
        bd.batch_size = 2;
        bd.max_in = n;
        bd.max_out = t == 0 ? n : info.out_count + 7;
        bd.max_pairs = info.pair_count + 11;
        vc_kmap_bounded *b = NULL;
        CHECK_OK(g, vc_kmap_bounded_create(g, &bd, &b));
        if (!b) continue;
        CHECK_OK(g, vc_kmap_bounded_build(b, d_rows, n));
        compare_bounded(g, b, rows, n, shape, &d, what);
        /* captured with the first n2 rows in the buffer, replayed after rows2 replaced them */
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        CHECK_OK(g, vc_kmap_bounded_build(b, d_rows, n2));
        CHECK(cudaStreamEndCapture(st, &graph) == cudaSuccess);
        CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
        CHECK(cudaMemcpy(d_rows, rows2, (size_t)n2 * 16, cudaMemcpyHostToDevice) == cudaSuccess);
        if (exec) CHECK(cudaGraphLaunch(exec, st) == cudaSuccess);
        snprintf(what, sizeof what, "bounded map type %d, graph replay", (int)types[t]);
        compare_bounded(g, b, rows2, n2, shape, &d, what);
        /* the device-count build over the same buffer (n2 in device memory), and its output
           count on the device */
        int64_t *d_cnt = NULL, dev_out = -1, n_out = -2;
        CHECK(cudaMalloc((void **)&d_cnt, 8) == cudaSuccess);
        CHECK(cudaMemcpy(d_cnt, &n2, 8, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_OK(g, vc_kmap_bounded_build_dev(b, d_rows, d_cnt));
        snprintf(what, sizeof what, "bounded map type %d, device count", (int)types[t]);
        compare_bounded(g, b, rows2, n2, shape, &d, what);
        vc_kmap_bounded_arrays ba;
        CHECK_OK(g, vc_kmap_bounded_arrays_get(b, &ba));
        CHECK_OK(g, vc_kmap_bounded_check(b, &n_out, NULL));
        CHECK(ba.out_count &&
              cudaMemcpy(&dev_out, ba.out_count, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECK_MSG(dev_out == n_out, "%s: out_count %lld, check %lld", what, (long long)dev_out,
                  (long long)n_out);
        CHECK_STATUS(g, vc_kmap_bounded_build_dev(b, d_rows, NULL), VC_ERR_INVALID_ARGUMENT);
        cudaFree(d_cnt);
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        CHECK(cudaMemcpy(d_rows, rows, (size_t)n * 16, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK_OK(g, vc_kmap_bounded_destroy(b));
        /* a pair bound one too small: VC_ERR_CAPACITY at the check, naming the count */
        bd.max_pairs = info.pair_count - 1;
        b = NULL;
        CHECK_OK(g, vc_kmap_bounded_create(g, &bd, &b));
        if (b) {
            CHECK_OK(g, vc_kmap_bounded_build(b, d_rows, n));
            CHECK_STATUS(g, vc_kmap_bounded_check(b, NULL, NULL), VC_ERR_CAPACITY);
            CHECK_OK(g, vc_kmap_bounded_destroy(b));
        }
        /* more rows than max_in: refused when queued */
        bd.max_pairs = info.pair_count + 11;
        bd.max_in = n / 2;
        if (t == 0) bd.max_out = n / 2;
        b = NULL;
        CHECK_OK(g, vc_kmap_bounded_create(g, &bd, &b));
        if (b) {
            CHECK_STATUS(g, vc_kmap_bounded_build(b, d_rows, n), VC_ERR_CAPACITY);
            CHECK_OK(g, vc_kmap_bounded_destroy(b));
        }
        vc_kmap_destroy(m);
        vc_coords_destroy(cs);
    }
    /* a duplicate row: VC_ERR_DUPLICATE at the check, as vc_kmap_build reports it */
    {
        vc_kmap_bounded_desc bd = VC_KMAP_BOUNDED_DESC_INIT;
        memcpy(bd.shape, shape, sizeof bd.shape);
        bd.batch_size = 2;
        bd.max_in = bd.max_out = n;
        bd.max_pairs = n * 27;
        vc_kmap_bounded *b = NULL;
        CHECK_OK(g, vc_kmap_bounded_create(g, &bd, &b));
        CHECK(cudaMemcpy(d_rows + 4, rows, 16, cudaMemcpyHostToDevice) == cudaSuccess);
        if (b) {
            CHECK_OK(g, vc_kmap_bounded_build(b, d_rows, n));
            CHECK_STATUS(g, vc_kmap_bounded_check(b, NULL, NULL), VC_ERR_DUPLICATE);
            /* the only live handle: the context refuses to die under it */
            CHECK_STATUS(g, vc_context_destroy(g), VC_ERR_INVALID_ARGUMENT);
            CHECK_OK(g, vc_kmap_bounded_destroy(b));
        }
        /* INVERSE has no bounded variant; a NULL coordinate pointer is an argument error */
        bd.map.type = VC_MAP_INVERSE;
        b = (vc_kmap_bounded *)0x1;
        CHECK_STATUS(g, vc_kmap_bounded_create(g, &bd, &b), VC_ERR_UNSUPPORTED);
        CHECK(b == (vc_kmap_bounded *)0x1);
    }
    CHECK_OK(g, vc_context_set_stream(g, NULL));
    cudaStreamDestroy(st);
    cudaFree(d_rows);
    free(rows);
    free(rows2);
}

static float *read_scan(const char *path, int64_t *n)
{
    vc_cloud cl;
    if (vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &cl) != VC_OK || cl.dim < 4) return NULL;
    float *p = malloc((size_t)cl.count * 16);
    for (int64_t i = 0; i < cl.count; i++) memcpy(p + 4 * i, cl.data + cl.dim * i, 16);
    *n = cl.count;
    vc_cloud_free(&cl);
    return p;
}
#endif

/* vc_tensor_check_finite on device features of every dtype: the same count, first element and
 * zeroing as on the host (deterministic: the count and the first index do not depend on the
 * order the device visits them). */
static void test_nonfinite_device(vc_context *g, vc_rng *rng)
{
    const int32_t shape[3] = {64, 64, 64};
    const int64_t n = 20000, ch = 7;
    int32_t *rows = malloc((size_t)n * 16);
    for (int64_t i = 0; i < n; i++) {
        rows[i * 4] = 0, rows[i * 4 + 1] = (int32_t)(i / 4096), rows[i * 4 + 2] = (int32_t)(i / 64 % 64);
        rows[i * 4 + 3] = (int32_t)(i % 64);
    }
    float *f = malloc((size_t)(n * ch) * 4), *back = malloc((size_t)(n * ch) * 4);
    const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    for (int di = 0; di < 3; di++) {
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n * ch; i++) {
            f[i] = vc_rng_float(rng);
            if (vc_rng_int(rng, 997) == 0) {
                f[i] = vc_rng_int(rng, 2) ? NAN : -INFINITY;
                if (!bad++) first = i;
            }
        }
        vc_coords *c = NULL;
        vc_tensor *t32 = NULL, *t = NULL;
        CHECK_OK(g, vc_coords_create(g, rows, n, VC_MEMORY_HOST, shape, 1, &c));
        CHECK_OK(g, vc_tensor_create(g, c, ch, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &t32));
        CHECK_OK(g, vc_tensor_cast(g, t32, dts[di], &t));
        int64_t got = -1;
        CHECK_STATUS(g, vc_tensor_check_finite(g, t, VC_NONFINITE_REFUSE, &got),
                     VC_ERR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "row %lld, channel %lld", (long long)(first / ch),
                 (long long)(first % ch));
        CHECK_MSG(got == bad && strstr(vc_context_last_error(g), want),
                  "dtype %d: %lld of %lld found: %s", (int)dts[di], (long long)got,
                  (long long)bad, vc_context_last_error(g));
        CHECK_OK(g, vc_tensor_check_finite(g, t, VC_NONFINITE_ZERO, &got));
        CHECK_OK(g, vc_tensor_copy_out(g, t, back, VC_DTYPE_FP32, VC_MEMORY_HOST));
        int64_t wrong = 0;
        for (int64_t i = 0; i < n * ch; i++)
            if (isfinite(f[i]) ? !isfinite(back[i]) : back[i] != 0.0f) wrong++;
        CHECK_MSG(got == bad && wrong == 0, "dtype %d: zeroing left %lld elements wrong",
                  (int)dts[di], (long long)wrong);
        CHECK_OK(g, vc_tensor_check_finite(g, t, VC_NONFINITE_REFUSE, &got));
        CHECK(got == 0);
        vc_tensor_destroy(t);
        vc_tensor_destroy(t32);
        vc_coords_destroy(c);
    }
    printf("  non-finite scan on the device: fp32, fp16, bf16\n");
    free(rows);
    free(f);
    free(back);
}

int main(void)
{
#ifndef VOXCONV_HAVE_CUDA
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
#else
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_api");
    vc_context *g = make_ctx(VC_BACKEND_CUDA), *c = make_ctx(VC_BACKEND_CPU);
    vc_context *a = make_ctx(VC_BACKEND_AUTO);
    vc_backend ab;
    vc_context_backend(a, &ab);
    printf("AUTO resolves to %s\n", ab == VC_BACKEND_CUDA ? "CUDA" : "CPU");
    vc_context_destroy(a);
    test_maps_identical(g, c, &rng);
    test_bounded(g, &rng);
    test_nonfinite_device(g, &rng);
    /* VC_SANITIZE: a small run for compute-sanitizer */
    int small = getenv("VC_SANITIZE") != NULL;
    int64_t np = small ? 8000 : 120000;
    float *pts = synthetic_scan(&rng, np);
    vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    for (int i = 0; i < 3; i++) run_net("synthetic scan", g, c, pts, np, &rng, dts[i]);
    free(pts);
    const char *root = getenv("VC_DATA_ROOT");
    const char *scans[2] = {"datasets/data/vlp16.bin", "datasets/data/octomap_scan.bin"};
    for (int i = 0; i < (small ? 0 : 2); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%s%s", root ? root : "", root ? "/" : "", scans[i]);
        float *sp = read_scan(path, &np);
        if (!sp) {
            printf("SKIP: %s not found (run datasets/fetch)\n", path);
            continue;
        }
        run_net(scans[i], g, c, sp, np, &rng, VC_DTYPE_FP16);
        free(sp);
    }
    CHECK_OK(g, vc_context_destroy(g));
    CHECK_OK(c, vc_context_destroy(c));
    TEST_END();
#endif
}
