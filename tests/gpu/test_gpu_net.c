/* tests/gpu/test_gpu_net.c - networks on the GPU against the CPU twin: the shipped models
 * (the models/ descriptions) with random weights on the real scans, in fp32 (tight) and fp16 (loose), every
 * named output (sparse rows exactly, features and dense outputs by relative error); the
 * residual test model with BatchNorm statistics far from the identity from a safetensors
 * buffer. Prints each model's GPU frame time (run_points, wall clock, median of 20) as a
 * figure for the lead, not a check. Skips (77) without CUDA or a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/net_testutil.h"
#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "gpu_testutil.h"

static vc_context *cpu, *gpu;
static int g_quick;

static float *dense_host(vc_context *ctx, vc_net *net, int32_t i, int64_t *n)
{
    vc_net_output o;
    vc_net_get_output(net, i, &o);
    *n = 1;
    for (int k = 0; k < o.ndim; k++) *n *= o.shape[k];
    size_t es = vc_dtype_size(o.dtype);
    void *raw = malloc((size_t)*n * es + 4);
    float *f = malloc((size_t)*n * 4 + 4);
    CHECK_OK(ctx, vc_net_copy_output(net, i, raw, (size_t)*n * es, VC_MEMORY_HOST));
    for (int64_t k = 0; k < *n; k++)
        f[k] = o.dtype == VC_DTYPE_FP32   ? ((float *)raw)[k]
               : o.dtype == VC_DTYPE_FP16 ? vc_f16_to_f32(((uint16_t *)raw)[k])
                                          : vc_bf16_to_f32(((uint16_t *)raw)[k]);
    free(raw);
    return f;
}

/* Every output of the GPU net against the CPU net's. */
static void compare(vc_net *g, vc_net *c, double tol, const char *what)
{
    int32_t n = 0;
    vc_net_output_count(c, &n);
    for (int32_t i = 0; i < n; i++) {
        vc_net_output oc, og;
        vc_net_get_output(c, i, &oc);
        vc_net_get_output(g, i, &og);
        float *fg, *fc;
        int64_t cnt, m;
        if (oc.kind == VC_NET_SPARSE) {
            int32_t *cg, *cc;
            int64_t ng, nc, chg, chc;
            net_host(gpu, og.tensor, &cg, &fg, &ng, &chg);
            net_host(cpu, oc.tensor, &cc, &fc, &nc, &chc);
            CHECK_MSG(ng == nc && chg == chc, "%s %s: %lld x %lld vs %lld x %lld", what, oc.name,
                      (long long)ng, (long long)chg, (long long)nc, (long long)chc);
            CHECK_MSG(ng == nc && memcmp(cg, cc, (size_t)nc * 16) == 0, "%s %s: rows differ", what,
                      oc.name);
            cnt = ng == nc && chg == chc ? nc * chc : 0;
            free(cg), free(cc);
        } else {
            fg = dense_host(gpu, g, i, &m);
            fc = dense_host(cpu, c, i, &cnt);
            CHECK_MSG(m == cnt, "%s %s: dense sizes %lld vs %lld", what, oc.name, (long long)m,
                      (long long)cnt);
            if (m != cnt) cnt = 0;
        }
        double *ref = malloc((size_t)(cnt ? cnt : 1) * sizeof(double));
        for (int64_t k = 0; k < cnt; k++) ref[k] = fc[k];
        double e = vc_rel_err(fg, ref, cnt);
        printf("  %s %-24s %12lld values, relative error %.2e (tolerance %.0e)\n", what, oc.name,
               (long long)cnt, e, tol);
        CHECK_MSG(e <= tol, "%s %s: relative error %.3g > %.3g", what, oc.name, e, tol);
        free(ref), free(fg), free(fc);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A scan's points with `dim` columns (extra columns zero), or NULL. */
static float *scan_points(const char *file, int dim, int64_t *n)
{
    const char *root = getenv("VC_DATA_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s%sdatasets/data/%s", root ? root : "", root ? "/" : "", file);
    vc_cloud cl;
    if (vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &cl) != VC_OK) {
        printf("SKIP: %s not readable (run datasets/fetch)\n", path);
        return NULL;
    }
    float *p = calloc((size_t)cl.count * (size_t)dim + 1, 4);
    for (int64_t i = 0; i < cl.count; i++)
        for (int k = 0; k < dim && k < cl.dim; k++) p[i * dim + k] = cl.data[i * cl.dim + k];
    *n = cl.count;
    vc_cloud_free(&cl);
    return p;
}

static vc_net *net_of(vc_context *ctx, const char *path, const char *json, const uint8_t *w,
                      size_t wn, vc_dtype dt)
{
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_path = path;
    d.model_json = json;
    d.weights_data = w;
    d.weights_size = wn;
    d.random_weights = w == NULL;
    d.seed = 2026;
    d.dtype = dt;
    vc_net *net = NULL;
    CHECK_OK(ctx, vc_net_create(ctx, &d, &net));
    return net;
}

/* One shipped model on a scan: CPU fp32 vs GPU fp32 and fp16; the GPU frame time. */
static void test_model(const char *model, const char *scan, int dim)
{
    const char *root = getenv("VC_DATA_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s%smodels/%s", root ? root : "", root ? "/" : "", model);
    int64_t np = 0;
    float *pts = scan_points(scan, dim, &np);
    if (!pts) return;
    vc_points p = {pts, np, dim, NULL, VC_MEMORY_HOST};
    printf("%s on %s (%lld points)\n", model, scan, (long long)np);
    vc_net *c = net_of(cpu, path, NULL, NULL, 0, VC_DTYPE_FP32);
    vc_net *g32 = net_of(gpu, path, NULL, NULL, 0, VC_DTYPE_FP32);
    vc_net *g16 = net_of(gpu, path, NULL, NULL, 0, (vc_dtype)-1); /* fp16 on CUDA */
    if (c && g32 && g16) {
        CHECK_OK(cpu, vc_net_run_points(c, &p));
        CHECK_OK(gpu, vc_net_run_points(g32, &p));
        CHECK_OK(gpu, vc_net_run_points(g16, &p));
        compare(g32, c, 1e-5, "fp32");
        compare(g16, c, 3e-2, "fp16");
        int reps = g_quick ? 2 : 20;
        double t[20];
        for (int r = 0; r < reps; r++) {
            double t0 = now_ms();
            vc_net_run_points(g16, &p);
            vc_context_synchronize(gpu);
            t[r] = now_ms() - t0;
        }
        qsort(t, (size_t)reps, sizeof t[0], dcmp);
        printf("  GPU fp16 frame (host points -> outputs): median %.3f ms over %d runs\n",
               t[reps / 2], reps);
        compare(g16, c, 3e-2, "fp16 again");
    }
    vc_net_destroy(c), vc_net_destroy(g32), vc_net_destroy(g16);
    free(pts);
}

/* The residual test model, BN far from the identity, from safetensors bytes. */
static void test_checkpoint(vc_rng *rng)
{
    const int32_t shape[3] = {21, 64, 64};
    pstore p = {0};
    net_res_params(&p, rng);
    size_t wn;
    uint8_t *w = pst_serialize(&p, "b0", &wn);
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    int64_t n = 4000;
    int32_t *rows = malloc((size_t)n * 16);
    float *f = malloc((size_t)n * 16);
    for (int64_t i = 0; i < n; i++) {
        rows[i * 4] = (int32_t)(i & 1);
        rows[i * 4 + 1] = (int32_t)(i / 2 % 21); /* 2000 distinct sites per batch item */
        rows[i * 4 + 2] = (int32_t)(i / 2 / 21 % 64);
        rows[i * 4 + 3] = (int32_t)(i / 2 / 21 / 64 % 64);
        for (int k = 0; k < 4; k++) f[i * 4 + k] = vc_rng_float(rng);
    }
    vc_coords *cc = NULL, *cg = NULL;
    vc_tensor *tc = NULL, *tg = NULL;
    CHECK_OK(cpu, vc_coords_create(cpu, rows, n, VC_MEMORY_HOST, shape, 2, &cc));
    CHECK_OK(cpu, vc_tensor_create(cpu, cc, 4, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &tc));
    CHECK_OK(gpu, vc_coords_create(gpu, rows, n, VC_MEMORY_HOST, shape, 2, &cg));
    CHECK_OK(gpu, vc_tensor_create(gpu, cg, 4, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &tg));
    vc_net *c = net_of(cpu, NULL, text, w, wn, VC_DTYPE_FP32);
    vc_net *g = net_of(gpu, NULL, text, w, wn, VC_DTYPE_FP32);
    if (c && g) {
        CHECK_OK(cpu, vc_net_run(c, tc));
        CHECK_OK(gpu, vc_net_run(g, tg));
        compare(g, c, 1e-5, "res-test fp32");
    }
    vc_net_destroy(c), vc_net_destroy(g);
    vc_tensor_destroy(tc), vc_tensor_destroy(tg);
    vc_coords_destroy(cc), vc_coords_destroy(cg);
    free(rows), free(f), free(w), free(text);
    pst_free(&p);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_net");
    g_quick = getenv("VC_SANITIZE") != NULL;
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    if (vc_context_create(&d, &cpu) != VC_OK) return 1;
    d.backend = VC_BACKEND_CUDA;
    if (vc_context_create(&d, &gpu) != VC_OK) {
        printf("test_gpu_net: no usable CUDA device (%s), skipped\n", vc_context_last_error(NULL));
        vc_context_destroy(cpu);
        return 77;
    }
    test_checkpoint(&rng);
    test_model("voxel_res_backbone8x_kitti.json", "vlp16.bin", 4);
    if (!g_quick) {
        test_model("voxel_backbone8x_kitti.json", "vlp16.bin", 4);
        test_model("voxel_res_backbone8x_nuscenes.json", "vlp16.bin", 5);
        test_model("spunet_indoor.json", "octomap_scan.bin", 3);
    }
    CHECK_OK(gpu, vc_context_destroy(gpu));
    CHECK_OK(cpu, vc_context_destroy(cpu));
    TEST_END();
}
#else
int main(void)
{
    printf("test_gpu_net: built without CUDA, skipped\n");
    return 77;
}
#endif
