/* tests/gpu/test_gpu_net.c - networks on the GPU against the CPU twin: the shipped models
 * (the models/ descriptions) with random weights on the real scans, in fp32 (tight) and fp16 (loose), every
 * named output (sparse rows exactly, features and dense outputs by relative error); the
 * residual test model with BatchNorm statistics far from the identity from a safetensors
 * buffer. Prints each model's GPU frame time (run_points, wall clock, median of 20) as a
 * figure for the lead, not a check. Skips (77) without CUDA or a device. */
#define _POSIX_C_SOURCE 200809L /* core/clock.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/net_testutil.h"
#include "testutil.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/clock.h"
#include "gpu_testutil.h"
#include "net_compare.h"

static vc_context *cpu, *gpu;
static int g_quick;

/* Every output of the GPU net against the CPU net's. */
static void compare(vc_net *g, vc_net *c, double tol, const char *what)
{
    net_compare(gpu, g, cpu, c, tol, what);
}


static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
    float *pts = net_scan_points(scan, dim, &np);
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
            double t0 = vc_clock_ms();
            vc_net_run_points(g16, &p);
            vc_context_synchronize(gpu);
            t[r] = vc_clock_ms() - t0;
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
