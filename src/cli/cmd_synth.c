/*
 * cmd_synth.c - voxconv synth: a deterministic synthetic scene (vc_synth_voxels,
 * vc_synth_points) to a .vxt tensor or a point file (.bin KITTI records, .npy float32 [N, 4]).
 */
#include <string.h>

#include "cli.h"

const char *const CLI_SYNTH_KINDS[] = {"lidar", "indoor", "uniform", NULL};
static const char *const GRIDS[] = {"kitti", "nuscenes", NULL};

static const char SYNTH_HELP[] =
    "usage: voxconv synth lidar|indoor|uniform OUT [--seed N] [--voxels N] [options]\n"
    "\n"
    "Writes a deterministic synthetic scene: the same arguments give the same bytes. OUT.vxt\n"
    "gets voxels (batch 1, float32 features uniform in [-1, 1)); OUT.bin (KITTI records) or\n"
    "OUT.npy (float32 [N, 4]) gets points x, y, z, intensity.\n"
    "  lidar    one sweep of a 128-beam spinning LiDAR among buildings, walls and parked cars\n"
    "           (~100k voxels on the KITTI grid; the scene of bench/bench_conv.c)\n"
    "  indoor   a 10 x 8 x 3 m room at 3 cm: floor, ceiling, walls, boxes (~320k voxels)\n"
    "  uniform  distinct voxels drawn uniformly over the grid (default 100000)\n"
    "Points of lidar are the sweep's returns; of indoor and uniform, the voxel centres.\n"
    "\n"
    "  --seed N                the generator's seed, decimal or 0x hex (default 0: the seed\n"
    "                          of bench_conv's scene, 0x5eed5eed12345)\n"
    "  --voxels N              aim at N voxels (uniform: exactly N)\n"
    "  --frame F               frame 0..255; frame F continues the draws of frames 0..F-1\n"
    "                          (bench_conv rotates frames 0, 1, 2 of lidar)\n"
    "  --grid kitti|nuscenes   lidar and uniform: the SECOND/KITTI grid (0.05 x 0.05 x 0.1 m,\n"
    "                          41x1600x1408, default) or CenterPoint's nuScenes grid\n"
    "                          (0.075 x 0.075 x 0.2 m, 40x1440x1440)\n"
    "  --channels C            feature channels of a .vxt (default 4)\n"
    "  --json                  print a JSON summary\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

int cli_parse_synth(const char *cmd, const char *flag, const char *text, vc_synth_desc *d)
{
    int k = 0;
    char kind[16];
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    if (len >= sizeof kind)
        return cli_usage_error(cmd, "%s: expected lidar, indoor or uniform, got '%s'", flag,
                               text);
    memcpy(kind, text, len);
    kind[len] = 0;
    if (cli_parse_choice(cmd, flag, kind, CLI_SYNTH_KINDS, &k)) return CLI_USAGE;
    d->kind = (vc_synth_kind)k;
    if (colon && cli_parse_i64(cmd, flag, colon + 1, 1, (int64_t)1 << 28, &d->voxels))
        return CLI_USAGE;
    return CLI_OK;
}

/* The options of a synthetic scene other than its kind, into d. */
static int parse_synth_opts(const char *cmd, const char *const t[5], vc_synth_desc *d)
{
    int64_t v = 0;
    int g = 0;
    if (t[0] && cli_parse_u64(cmd, "--seed", t[0], &d->seed)) return CLI_USAGE;
    if (t[1] && cli_parse_i64(cmd, "--voxels", t[1], 1, (int64_t)1 << 28, &d->voxels))
        return CLI_USAGE;
    if (t[2]) {
        if (cli_parse_i64(cmd, "--frame", t[2], 0, 255, &v)) return CLI_USAGE;
        d->frame = (int32_t)v;
    }
    if (t[3]) {
        if (cli_parse_choice(cmd, "--grid", t[3], GRIDS, &g)) return CLI_USAGE;
        if (d->kind == VC_SYNTH_INDOOR)
            return cli_usage_error(cmd, "--grid: indoor has its own 3 cm grid");
        d->grid = (vc_synth_grid)g;
    }
    if (t[4]) {
        if (cli_parse_i64(cmd, "--channels", t[4], 1, 1024, &v)) return CLI_USAGE;
        d->channels = (int32_t)v;
    }
    return CLI_OK;
}

/* Which file OUT is: 0 .vxt, 1 .bin, 2 .npy, -1 none of them. */
static int out_kind(const char *path)
{
    static const char *const ext[3] = {".vxt", ".bin", ".npy"};
    size_t n = strlen(path);
    for (int i = 0; i < 3; i++)
        if (n > 4 && strcmp(path + n - 4, ext[i]) == 0) return i;
    return -1;
}

static void print_synth_summary(const char *kind, const char *path, const vc_synth_desc *d,
                                int64_t count, const char *what, const int32_t shape[3],
                                int json)
{
    if (json) {
        printf("{\"kind\": ");
        cli_json_string(stdout, kind);
        printf(", \"output\": ");
        cli_json_string(stdout, path);
        printf(", \"seed\": %llu, \"frame\": %d, \"%s\": %lld", (unsigned long long)d->seed,
               (int)d->frame, what, (long long)count);
        if (shape) {
            printf(", \"spatial_shape\": ");
            cli_print_int3_json(stdout, shape);
        }
        printf("}\n");
    } else {
        printf("synth %s: %lld %s", kind, (long long)count, what);
        if (shape) printf(", shape %dx%dx%d (z,y,x)", shape[0], shape[1], shape[2]);
        printf(" -> %s\n", path);
    }
}

int cmd_synth(int argc, char **argv)
{
    const char *cmd = "synth";
    const char *t[5] = {NULL}, *backend = NULL, *pos[2];
    int json = 0, done = 0, npos = 0;
    cli_opt opts[] = {{"--seed", &t[0], NULL},  {"--voxels", &t[1], NULL},
                      {"--frame", &t[2], NULL}, {"--grid", &t[3], NULL},
                      {"--channels", &t[4], NULL}, {"--json", NULL, &json},
                      {"--backend", &backend, NULL}};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2, &npos, SYNTH_HELP, &done);
    if (rc || done) return rc;
    if (npos != 2) return cli_usage_error(cmd, "expected KIND and OUT (see voxconv synth --help)");
    vc_synth_desc d = VC_SYNTH_DESC_INIT;
    if (strchr(pos[0], ':'))
        return cli_usage_error(cmd, "KIND: give the size with --voxels, got '%s'", pos[0]);
    if (cli_parse_synth(cmd, "KIND", pos[0], &d) || parse_synth_opts(cmd, t, &d))
        return CLI_USAGE;
    const int ok = out_kind(pos[1]);
    if (ok < 0) return cli_usage_error(cmd, "OUT: expected a .vxt, .bin or .npy path, got '%s'",
                                       pos[1]);
    if (ok > 0 && t[4]) return cli_usage_error(cmd, "--channels: points have 4 columns");

    vc_context *ctx = NULL;
    if ((rc = cli_open_context(cmd, backend, &ctx))) return rc;
    vc_status st;
    if (ok == 0) {
        vc_tensor *ten = NULL;
        if ((st = vc_synth_voxels(ctx, &d, &ten)) != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot make the scene");
        } else if ((rc = cli_save_tensor(cmd, ctx, ten, pos[1])) == CLI_OK) {
            vc_tensor_info ti;
            vc_coords_info ci;
            vc_tensor_get_info(ten, &ti);
            vc_coords_get_info(ti.coords, &ci);
            print_synth_summary(pos[0], pos[1], &d, ti.count, "voxels", ci.spatial_shape, json);
        }
        vc_tensor_destroy(ten);
    } else {
        vc_cloud c;
        memset(&c, 0, sizeof c);
        if ((st = vc_synth_points(ctx, &d, &c)) != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot make the scene");
        } else {
            if (ok == 1) {
                if ((st = vc_cloud_write_kitti(ctx, pos[1], &c)) != VC_OK)
                    rc = cli_file_error(cmd, ctx, st, "cannot write", pos[1]);
            } else {
                int64_t shape[2] = {c.count, 4};
                rc = cli_write_npy(cmd, ctx, pos[1], c.data, VC_DTYPE_FP32, 2, shape);
            }
            if (rc == CLI_OK)
                print_synth_summary(pos[0], pos[1], &d, c.count, "points", NULL, json);
        }
        vc_cloud_free(&c);
    }
    vc_context_destroy(ctx);
    return rc;
}
