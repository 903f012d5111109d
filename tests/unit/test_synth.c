/* test_synth.c - the synthetic scenes (vc_synth_voxels, vc_synth_points) and the benchmark
 * pieces of the API on the CPU (vc_timer, vc_layer_floor_get, vc_conv_plan): the public scenes
 * are the benchmark programs' generators draw for draw (bench_conv's LiDAR frames and
 * bench_kmap's room), pinned by a hash so that no change moves a draw unnoticed; the same
 * description gives the same bytes; bad descriptions are refused with a message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/floor.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

static vc_context *cpu_context(void)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) exit(1);
    return ctx;
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* The coordinates (host copy) and features of a synthetic tensor. */
static int32_t *rows_of(vc_context *ctx, const vc_tensor *t, int64_t *n)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    *n = ti.count;
    int32_t *r = malloc((size_t)ti.count * 16 + 16);
    vc_coords_copy_out(ctx, ti.coords, r, VC_MEMORY_HOST);
    return r;
}

static void test_lidar_is_bench_conv(vc_context *ctx)
{
    /* bench_conv's three frames: one generator seeded 0x5eed5eed12345, frames in order */
    vc_rng rng = {0x5eed5eed12345ull};
    const int32_t kitti[3] = {41, 1600, 1408};
    for (int f = 0; f < 3; f++) {
        int32_t *want;
        int64_t nw;
        scene_lidar_boxes(&rng, f, &want, &nw, kitti);
        vc_synth_desc d = VC_SYNTH_DESC_INIT;
        d.frame = f;
        vc_tensor *t = NULL;
        CHECK(vc_synth_voxels(ctx, &d, &t) == VC_OK);
        int64_t n = 0;
        int32_t *got = t ? rows_of(ctx, t, &n) : NULL;
        CHECK_MSG(got && n == nw && !memcmp(got, want, (size_t)n * 16), "frame %d: %lld vs %lld",
                  f, (long long)n, (long long)nw);
        if (f == 0) /* bench_conv's frame 0 of docs/benchmarks.md, pinned */
            CHECK_MSG(n == 100640 && fnv(got, (size_t)n * 16) == 0xe67db547acc2c6a6ull,
                      "frame 0: %lld voxels, hash %016llx", (long long)n,
                      (unsigned long long)fnv(got, (size_t)n * 16));
        free(got);
        free(want);
        vc_tensor_destroy(t);
    }
}

static void test_room_and_uniform(vc_context *ctx)
{
    vc_rng rng = {1234};
    const int32_t room[3] = {100, 267, 334};
    int32_t *want;
    int64_t nw;
    scene_room(&rng, &want, &nw, room);
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.kind = VC_SYNTH_INDOOR;
    d.seed = 1234;
    vc_tensor *t = NULL;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_OK);
    int64_t n = 0;
    int32_t *got = t ? rows_of(ctx, t, &n) : NULL;
    CHECK(got && n == nw && !memcmp(got, want, (size_t)n * 16));
    free(got);
    free(want);
    vc_tensor_destroy(t);

    d.kind = VC_SYNTH_UNIFORM;
    d.voxels = 5000;
    d.grid = VC_SYNTH_GRID_NUSCENES;
    d.channels = 3;
    vc_tensor *a = NULL, *b = NULL;
    CHECK(vc_synth_voxels(ctx, &d, &a) == VC_OK && vc_synth_voxels(ctx, &d, &b) == VC_OK);
    if (a && b) {
        vc_tensor_info ia, ib;
        vc_coords_info ci;
        vc_tensor_get_info(a, &ia);
        vc_tensor_get_info(b, &ib);
        vc_coords_get_info(ia.coords, &ci);
        CHECK(ia.count == 5000 && ia.channels == 3 && ci.spatial_shape[1] == 1440);
        CHECK(!memcmp(ia.data, ib.data, 5000 * 3 * sizeof(float)));
        int64_t na, nb;
        int32_t *ra = rows_of(ctx, a, &na), *rb = rows_of(ctx, b, &nb);
        CHECK(na == nb && !memcmp(ra, rb, (size_t)na * 16));
        free(ra);
        free(rb);
    }
    vc_tensor_destroy(a);
    vc_tensor_destroy(b);
}

static void test_sizes_and_points(vc_context *ctx)
{
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.voxels = 30000;
    vc_tensor *t = NULL;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_OK);
    vc_tensor_info ti;
    if (t) {
        vc_tensor_get_info(t, &ti);
        CHECK_MSG(fabs((double)ti.count / 30000.0 - 1.0) < 0.1, "%lld voxels", (long long)ti.count);
    }
    vc_tensor_destroy(t);
    vc_cloud a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    d.voxels = 0;
    d.frame = 1;
    CHECK(vc_synth_points(ctx, &d, &a) == VC_OK && vc_synth_points(ctx, &d, &b) == VC_OK);
    CHECK(a.dim == 4 && a.count > 100000 && a.count == b.count && !strcmp(a.names[3], "intensity"));
    CHECK(a.count == b.count && !memcmp(a.data, b.data, (size_t)a.count * 16));
    vc_cloud_free(&a);
    vc_cloud_free(&b);
    /* indoor points are the voxel centres: voxelizing them at 3 cm gives the voxels back */
    d.kind = VC_SYNTH_INDOOR;
    d.frame = 0;
    CHECK(vc_synth_points(ctx, &d, &a) == VC_OK && vc_synth_voxels(ctx, &d, &t) == VC_OK);
    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    for (int k = 0; k < 3; k++) vd.voxel_size[k] = 0.03f;
    vd.range[3] = 334 * 0.03f;
    vd.range[4] = 267 * 0.03f;
    vd.range[5] = 100 * 0.03f;
    vc_points pts = {a.data, a.count, a.dim, NULL, VC_MEMORY_HOST};
    vc_tensor *v = NULL;
    CHECK(vc_voxelize(ctx, &vd, &pts, &v, NULL) == VC_OK);
    if (v && t) {
        vc_tensor_info vi;
        vc_tensor_get_info(v, &vi);
        vc_tensor_get_info(t, &ti);
        CHECK_MSG(vi.count == ti.count, "%lld vs %lld", (long long)vi.count, (long long)ti.count);
    }
    vc_tensor_destroy(v);
    vc_tensor_destroy(t);
    vc_cloud_free(&a);
}

static void test_bad_desc(vc_context *ctx)
{
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    vc_tensor *t = (vc_tensor *)0x1;
    d.kind = (vc_synth_kind)9;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_ERR_INVALID_ARGUMENT && t == (vc_tensor *)0x1);
    CHECK(strstr(vc_context_last_error(ctx), "kind") != NULL);
    d = (vc_synth_desc)VC_SYNTH_DESC_INIT;
    d.frame = 256;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_ERR_INVALID_ARGUMENT);
    d.frame = 0;
    d.channels = 0;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_ERR_INVALID_ARGUMENT);
    d.channels = 4;
    d.kind = VC_SYNTH_UNIFORM;
    d.voxels = (int64_t)1 << 27; /* more than a quarter of the KITTI grid */
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_ERR_LIMIT);
    d.struct_size = 3;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_synth_voxels(ctx, NULL, &t) == VC_ERR_INVALID_ARGUMENT && t == (vc_tensor *)0x1);
}

static void test_bench_pieces(vc_context *ctx)
{
    vc_timer *tm = NULL;
    double ms = -1;
    CHECK(vc_timer_create(ctx, &tm) == VC_OK);
    CHECK(vc_timer_start(tm) == VC_OK && vc_timer_stop(tm, &ms) == VC_OK && ms >= 0);
    CHECK(vc_context_destroy(ctx) == VC_ERR_INVALID_ARGUMENT); /* the timer is alive */
    CHECK(vc_timer_destroy(tm) == VC_OK);
    char name[64];
    CHECK(vc_context_device_name(ctx, name, sizeof name) == VC_OK && !strcmp(name, "cpu"));

    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    d.kind = VC_SYNTH_UNIFORM;
    d.voxels = 2000;
    vc_tensor *t = NULL;
    vc_kmap *m = NULL;
    CHECK(vc_synth_voxels(ctx, &d, &t) == VC_OK);
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    vc_map_desc md = VC_MAP_DESC_INIT;
    CHECK(vc_kmap_build(ctx, ti.coords, &md, &m) == VC_OK);
    vc_kmap_info mi;
    vc_kmap_get_info(m, &mi);
    vc_layer_floor f;
    CHECK(vc_layer_floor_get(ctx, m, 16, 32, VC_DTYPE_FP16, 0, 0, &f) == VC_OK);
    const double flops = 2.0 * (double)mi.pair_count * 16 * 32;
    const double bytes = 2.0 * (2000.0 * 16 + 2000.0 * 32 + 27.0 * 16 * 32) + 4.0 * 2000 * 27;
    CHECK(f.flops == flops && f.bytes == bytes && f.ms == 0 && f.peak_flops == 0);
    CHECK(vc_layer_floor_rates(&f, 1e12, 1e9) == VC_OK);
    CHECK(fabs(f.ms - 1e3 * fmax(flops / 1e12, bytes / 1e9)) < 1e-12);
    /* the H100 rates on record, through the one copy of the model */
    double pf, pb;
    vc_floor_rates("NVIDIA H100 80GB HBM3", VC_DTYPE_BF16, 0, &pf, &pb);
    CHECK(pf == 650e12 && pb == 3.0e12);
    vc_floor_rates("NVIDIA H100 80GB HBM3", VC_DTYPE_FP32, 0, &pf, &pb);
    CHECK(pf == 0 && pb == 3.0e12);
    vc_conv_plan_info p;
    vc_conv_desc cd = VC_CONV_DESC_INIT;
    cd.in_channels = 16;
    cd.out_channels = 32;
    CHECK(vc_conv_plan(ctx, &cd, m, VC_DTYPE_FP32, &p) == VC_OK && !strcmp(p.config, "cpu"));
    cd.in_channels = 0;
    CHECK(vc_conv_plan(ctx, &cd, m, VC_DTYPE_FP32, &p) == VC_ERR_INVALID_ARGUMENT);
    vc_kmap_destroy(m);
    vc_tensor_destroy(t);
}

/* The benchmark programs' scan argument "path[@size]" (synth/scenes.h: scene_scan_arg): the
 * default size, one size, three, the last @ taken; refused: anything after the size, two sizes,
 * sizes not positive, a path past the buffer. */
static void test_scan_arg(void)
{
    char path[16];
    float v[3];
    CHECK(scene_scan_arg("a.bin", path, sizeof path, v) == 0 && !strcmp(path, "a.bin"));
    CHECK(v[0] == 0.05f && v[1] == 0.05f && v[2] == 0.1f);
    CHECK(scene_scan_arg("b@c.pcd@0.02", path, sizeof path, v) == 0 && !strcmp(path, "b@c.pcd"));
    CHECK(v[0] == 0.02f && v[1] == 0.02f && v[2] == 0.02f);
    CHECK(scene_scan_arg("d.pcd@0.1,0.2,0.3", path, sizeof path, v) == 0);
    CHECK(v[0] == 0.1f && v[1] == 0.2f && v[2] == 0.3f);
    static const char *bad[] = {"e@",       "e@0.02x",     "e@0.02,abc", "e@0.1,0.2",
                                "e@1,2,3,", "e@1,2,3x",    "e@0",        "e@-0.1",
                                "e@nan",    "e@1,1,-1",    "a_path_of_16_chars@0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(scene_scan_arg(bad[i], path, sizeof path, v) == -1, "%s accepted", bad[i]);
}

int main(void)
{
    vc_context *ctx = cpu_context();
    test_lidar_is_bench_conv(ctx);
    test_room_and_uniform(ctx);
    test_sizes_and_points(ctx);
    test_bad_desc(ctx);
    test_bench_pieces(ctx);
    test_scan_arg();
    CHECK(vc_context_destroy(ctx) == VC_OK);
    TEST_END();
}
