/*
 * cmd_voxelize.c - voxconv voxelize: reads a point cloud, voxelizes it (vc_voxelize) and writes
 * a .vxt tensor, printing the statistics.
 */
#include <string.h>

#include "cli.h"

static const char *const REDUCES[] = {"mean", "first", "count", NULL};
static const char *const NONFINITES[] = {"skip", "error", NULL};

static const char VOXELIZE_HELP[] =
    "usage: voxconv voxelize IN OUT.vxt --voxel-size X,Y,Z\n"
    "                        --range XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX [options]\n"
    "\n"
    "Reads a point cloud (raw .bin, .pcd, .ply, float32 .npy [N, D>=3]), voxelizes it and\n"
    "writes a .vxt sparse tensor. A point p lands in voxel floor((p - min) / size), computed in\n"
    "float32, and is kept when inside the spatial shape round((max - min) / size); coordinates\n"
    "are (batch, z, y, x), sorted. Features reduce every column of the cloud (x, y, z\n"
    "included), as spconv does.\n"
    "\n"
    "  --voxel-size X,Y,Z      voxel size in metres (required)\n"
    "  --range XMIN,...,ZMAX   point cloud range (required)\n"
    "  --reduce mean|first|count\n"
    "                          features: mean of the points (default), the first point, or\n"
    "                          one channel holding the point count\n"
    "  --max-voxels N          keep at most N voxels, those whose first point comes first\n"
    "                          (default 0 = no cap)\n"
    "  --nonfinite skip|error  points with NaN/inf x, y or z: drop them (default) or fail\n"
    "  --dtype fp32|fp16|bf16  feature dtype of the result (default fp32)\n"
    "  --format F              input format: auto|kitti|pcd|ply|npy (default auto)\n"
    CLI_READ_OPTIONS_HELP
    "  --json                  print the statistics as one JSON object\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

/* The texts of the value options. */
typedef struct voxelize_opts {
    const char *vsize, *range, *reduce, *maxv, *dtype, *nonfinite, *format;
} voxelize_opts;

/* The value options, parsed into the descriptor and the input format. */
static int parse_voxelize_opts(const char *cmd, const voxelize_opts *o, vc_voxelize_desc *d,
                               int *fmt)
{
    const char *vsize = o->vsize, *range = o->range, *reduce = o->reduce, *maxv = o->maxv;
    const char *dtype = o->dtype, *nonfinite = o->nonfinite, *format = o->format;
    if (!vsize) return cli_usage_error(cmd, "--voxel-size is required");
    if (!range) return cli_usage_error(cmd, "--range is required");
    if (cli_parse_floats(cmd, "--voxel-size", vsize, 3, d->voxel_size)) return CLI_USAGE;
    for (int i = 0; i < 3; i++)
        if (!(d->voxel_size[i] > 0))
            return cli_usage_error(cmd, "--voxel-size: sizes must be > 0, got '%s'", vsize);
    if (cli_parse_floats(cmd, "--range", range, 6, d->range)) return CLI_USAGE;
    for (int i = 0; i < 3; i++)
        if (!(d->range[i + 3] > d->range[i]))
            return cli_usage_error(cmd, "--range: each max must exceed its min, got '%s'", range);
    int v = 0;
    if (reduce) {
        if (cli_parse_choice(cmd, "--reduce", reduce, REDUCES, &v)) return CLI_USAGE;
        d->reduce = (vc_reduce)v;
    }
    if (maxv && cli_parse_i64(cmd, "--max-voxels", maxv, 0, INT64_MAX, &d->max_voxels))
        return CLI_USAGE;
    if (dtype) {
        if (cli_parse_choice(cmd, "--dtype", dtype, CLI_DTYPES, &v)) return CLI_USAGE;
        d->dtype = (vc_dtype)v;
    }
    if (nonfinite) {
        if (cli_parse_choice(cmd, "--nonfinite", nonfinite, NONFINITES, &v)) return CLI_USAGE;
        d->nonfinite = (vc_nonfinite)v;
    }
    *fmt = 0;
    if (format && cli_parse_choice(cmd, "--format", format, CLI_FORMATS, fmt)) return CLI_USAGE;
    if (*fmt == VC_FORMAT_VXT)
        return cli_usage_error(cmd, "--format: a .vxt is not a point cloud");
    return CLI_OK;
}

static void print_voxelize_summary(const char *in_path, const char *out_path,
                                   const vc_voxelize_stats *stats, const vc_tensor *t, int json)
{
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    if (json) {
        cli_json_io("input", in_path, "output", out_path);
        printf(", \"points_in\": %lld, \"points_used\": %lld, \"points_out_of_range\": %lld, "
               "\"points_nonfinite\": %lld, \"voxels_total\": %lld, \"voxels_kept\": %lld, ",
               (long long)stats->points_in, (long long)stats->points_used,
               (long long)stats->points_out_of_range, (long long)stats->points_nonfinite,
               (long long)stats->voxels_total, (long long)stats->voxels_kept);
        printf("\"spatial_shape\": ");
        cli_print_int3_json(stdout, ci.spatial_shape);
        printf(", \"channels\": %lld, \"dtype\": \"%s\"}\n", (long long)ti.channels,
               cli_dtype_name(ti.dtype));
    } else {
        printf("voxelize: %lld points -> %lld voxels (%lld points used, %lld out of range, "
               "%lld non-finite, %lld voxels before the cap), shape %dx%dx%d (z,y,x), "
               "%lld channels %s\n",
               (long long)stats->points_in, (long long)stats->voxels_kept,
               (long long)stats->points_used, (long long)stats->points_out_of_range,
               (long long)stats->points_nonfinite, (long long)stats->voxels_total,
               ci.spatial_shape[0], ci.spatial_shape[1], ci.spatial_shape[2],
               (long long)ti.channels, cli_dtype_name(ti.dtype));
    }
}

int cmd_voxelize(int argc, char **argv)
{
    const char *cmd = "voxelize";
    voxelize_opts o = {0};
    cli_read_opts r = {0};
    const char *backend = NULL, *pos[2];
    int json = 0, done = 0, npos = 0;
    cli_opt opts[] = {{"--voxel-size", &o.vsize, NULL}, {"--range", &o.range, NULL},
                      {"--reduce", &o.reduce, NULL},    {"--max-voxels", &o.maxv, NULL},
                      {"--dtype", &o.dtype, NULL},      {"--nonfinite", &o.nonfinite, NULL},
                      {"--format", &o.format, NULL},    {"--json", NULL, &json},
                      {"--backend", &backend, NULL},    CLI_READ_OPTIONS(r)};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2, &npos, VOXELIZE_HELP, &done);
    if (rc || done) return rc;
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN and OUT.vxt (see voxconv voxelize --help)");
    if (cli_check_extension(cmd, "OUT", pos[1], ".vxt")) return CLI_USAGE;
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    int fmt = 0;
    if (parse_voxelize_opts(cmd, &o, &d, &fmt) || cli_parse_read_opts(cmd, &r)) return CLI_USAGE;

    vc_context *ctx = NULL;
    if ((rc = cli_open_context(cmd, backend, &ctx))) {
        cli_read_opts_free(&r);
        return rc;
    }
    vc_cloud cl;
    memset(&cl, 0, sizeof cl);
    vc_tensor *t = NULL;
    vc_voxelize_stats stats;
    memset(&stats, 0, sizeof stats);
    if ((rc = cli_read_cloud(cmd, ctx, pos[0], fmt, &r, &cl))) goto done;
    vc_points pts = {cl.data, cl.count, cl.dim, NULL, VC_MEMORY_HOST};
    vc_status st = vc_voxelize(ctx, &d, &pts, &t, &stats);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "voxelization failed");
        goto done;
    }
    if ((rc = cli_save_tensor(cmd, ctx, t, pos[1]))) goto done;
    print_voxelize_summary(pos[0], pos[1], &stats, t, json);
done:
    vc_tensor_destroy(t);
    vc_cloud_free(&cl);
    vc_context_destroy(ctx);
    cli_read_opts_free(&r);
    return rc;
}
