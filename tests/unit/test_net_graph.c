/* tests/unit/test_net_graph.c - graph mode's API on the CPU (no device needed): the levels of
 * the shipped models and of the test models (vc_net_level_count), the per-call run's rows per
 * level (vc_net_level_rows) against the coordinate sets the run made, and the argument checks
 * of vc_net_set_bounds / vc_net_bounds_get / vc_net_level_rows (a CPU context refuses bounds
 * with VC_ERR_UNSUPPORTED; NULL handles, NULL outputs and a foreign struct_size are refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_testutil.h"
#include "testutil.h"

static vc_context *ctx;

static vc_net *net_of(const char *path, const char *json)
{
    vc_net_desc d = VC_NET_DESC_INIT;
    d.model_path = path;
    d.model_json = json;
    d.random_weights = 1;
    d.seed = 7;
    vc_net *net = NULL;
    CHECK_OK(ctx, vc_net_create(ctx, &d, &net));
    return net;
}

/* The shipped models' levels: the input, the three strided convs, conv_out (k 3x1x1 s 2x1x1);
 * the U-Net's inverse convs return to sets that exist. */
static void test_levels(void)
{
    const struct {
        const char *model;
        int32_t levels;
    } want[] = {{"voxel_backbone8x_kitti.json", 5},
                {"voxel_res_backbone8x_kitti.json", 5},
                {"voxel_res_backbone8x_nuscenes.json", 5}};
    const char *root = getenv("VC_DATA_ROOT");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%smodels/%s", root ? root : "", root ? "/" : "",
                 want[i].model);
        vc_net *net = net_of(path, NULL);
        if (!net) continue;
        int32_t n = -1;
        CHECK_OK(ctx, vc_net_level_count(net, &n));
        CHECK_MSG(n == want[i].levels, "%s: %d levels, want %d", want[i].model, n,
                  want[i].levels);
        vc_net_destroy(net);
    }
}

/* The residual test model on a small scene: level rows after a per-call run equal the input's
 * rows and the strided output's. */
static void test_level_rows(vc_rng *rng)
{
    const int32_t shape[3] = {21, 64, 64};
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    vc_net *net = net_of(NULL, text);
    free(text);
    if (!net) return;
    int32_t n = 0;
    CHECK_OK(ctx, vc_net_level_count(net, &n));
    CHECK_MSG(n == 2, "res-test: %d levels, want 2", n);
    int64_t rows[4] = {-1, -1, -1, -1};
    CHECK_STATUS(ctx, vc_net_level_rows(net, rows, 2), VC_ERR_INVALID_ARGUMENT);
    int64_t count = 600;
    int32_t *c = malloc((size_t)count * 16);
    float *f = malloc((size_t)count * 16);
    for (int64_t i = 0; i < count; i++) {
        c[i * 4] = 0;
        c[i * 4 + 1] = (int32_t)(i % 21);
        c[i * 4 + 2] = (int32_t)(i / 21 % 64);
        c[i * 4 + 3] = (int32_t)(i / 21 / 64 * 7 % 64);
        for (int k = 0; k < 4; k++) f[i * 4 + k] = vc_rng_float(rng);
    }
    vc_coords *cs = NULL;
    vc_tensor *t = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, c, count, VC_MEMORY_HOST, shape, 1, &cs));
    CHECK_OK(ctx, vc_tensor_create(ctx, cs, 4, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &t));
    CHECK_OK(ctx, vc_net_run(net, t));
    CHECK_OK(ctx, vc_net_level_rows(net, rows, 4));
    int32_t oi = -1;
    CHECK_OK(ctx, vc_net_find_output(net, "d", &oi));
    vc_net_output o;
    CHECK_OK(ctx, vc_net_get_output(net, oi, &o));
    vc_tensor_info ti;
    vc_tensor_get_info(o.tensor, &ti);
    CHECK_MSG(rows[0] == count && rows[1] == ti.count && rows[2] == 0 && rows[3] == 0,
              "level rows %lld %lld %lld %lld, want %lld %lld 0 0", (long long)rows[0],
              (long long)rows[1], (long long)rows[2], (long long)rows[3], (long long)count,
              (long long)ti.count);
    vc_tensor_destroy(t);
    vc_coords_destroy(cs);
    free(c), free(f);
    vc_net_destroy(net);
}

static void test_args(void)
{
    const int32_t shape[3] = {21, 64, 64};
    char *text = net_model_text(NET_RES_MODEL, shape, NULL);
    vc_net *net = net_of(NULL, text);
    free(text);
    if (!net) return;
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    b.max_voxels[0] = 1000;
    CHECK(vc_net_set_bounds(NULL, &b) == VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_net_set_bounds(net, &b), VC_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(vc_context_last_error(ctx), "CUDA") != NULL, "message: %s",
              vc_context_last_error(ctx));
    vc_net_bounds bad = b;
    bad.struct_size = 3;
    CHECK_STATUS(ctx, vc_net_set_bounds(net, &bad), VC_ERR_INVALID_ARGUMENT);
    CHECK_OK(ctx, vc_net_set_bounds(net, NULL)); /* per-call runs: always fine */
    vc_net_bounds got;
    CHECK_STATUS(ctx, vc_net_bounds_get(net, &got), VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_net_bounds_get(net, NULL), VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_net_bounds_get(NULL, &got) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_net_level_count(NULL, NULL) == VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_net_level_count(net, NULL), VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_net_level_rows(net, NULL, 2), VC_ERR_INVALID_ARGUMENT);
    int64_t r[2];
    CHECK_STATUS(ctx, vc_net_level_rows(net, r, -1), VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_net_level_rows(NULL, r, 2) == VC_ERR_INVALID_ARGUMENT);
    vc_net_destroy(net);
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_net_graph");
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    if (vc_context_create(&cd, &ctx) != VC_OK) return 1;
    test_levels();
    test_level_rows(&rng);
    test_args();
    CHECK_OK(ctx, vc_context_destroy(ctx));
    TEST_END();
}
