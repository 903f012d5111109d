/*
 * cmd_pool.c - voxconv pool: one sparse pooling layer over a kernel map (vc_pool_forward) to a
 * .vxt, or global pooling of every batch item (vc_global_pool) to a dense .npy.
 */
#include <stdint.h>
#include <stdlib.h>

#include "cli.h"

static const char *const POOL_TYPES[] = {"subm", "strided", "downsample", NULL};
static const char *const POOL_MODES[] = {"max", "avg", NULL};

static const char POOL_HELP[] =
    "usage: voxconv pool IN.vxt OUT.vxt --mode max|avg --type subm|strided|downsample\n"
    "                    --kernel K [--stride S] [--padding P] [--dilation D] [--json]\n"
    "       voxconv pool IN.vxt OUT.npy --global --mode max|avg [--json]\n"
    "\n"
    "Sparse pooling over a kernel map (same map semantics as voxconv conv); avg is the mean\n"
    "over the inputs present, not over the kernel volume. With --global, pools every batch\n"
    "item into a dense float32 [batch_size, C] .npy (items with no voxels give 0).\n"
    "\n"
    "  --mode max|avg          pooling mode (default max)\n"
    "  --type subm|strided|downsample   map type (required unless --global)\n"
    "  --kernel, --stride, --padding, --dilation   as for voxconv conv\n"
    "  --global                global pooling to a .npy\n"
    "  --nonfinite refuse|keep|zero   NaN or infinite input features: an error (default),\n"
    "                          kept, or set to 0 (counted on stderr)\n"
    "  --json                  print a JSON summary\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

/* The dense output of --global may exceed this many bytes only when it has no more rows than
 * the tensor has voxels (then it is no larger than the tensor's features): a batch size from
 * a file header never makes a small file ask for gigabytes. */
#define POOL_GLOBAL_FREE_BYTES ((int64_t)64 << 20)

/* --global: every batch item to one row of a float32 [batch_size, C] .npy. */
static int pool_global(const char *cmd, vc_context *ctx, const char *const pos[2], int pm,
                       const vc_tensor *in, int json)
{
    vc_tensor_info ii;
    vc_coords_info ici;
    vc_tensor_get_info(in, &ii);
    vc_coords_get_info(ii.coords, &ici);
    int32_t b = ici.batch_size;
    /* b < 2^31 and channels <= 2^20 (the library's limit): no int64 overflow. */
    int64_t elems = (int64_t)b * ii.channels, bytes = elems * (int64_t)sizeof(float);
    if ((uint64_t)bytes > (uint64_t)SIZE_MAX ||
        (bytes > POOL_GLOBAL_FREE_BYTES && (int64_t)b > ii.count))
        return cli_error(cmd, "--global: batch size %d x %lld channels would be a %lld-row "
                         "output for %lld voxels (over %lld MiB, an output may have at most as "
                         "many rows as the tensor has voxels)", (int)b, (long long)ii.channels,
                         (long long)b, (long long)ii.count,
                         (long long)(POOL_GLOBAL_FREE_BYTES >> 20));
    float *dense = cli_xcalloc((size_t)elems, sizeof(float));
    if (!dense) return cli_error(cmd, "out of memory");
    int rc = CLI_OK;
    vc_status st = vc_global_pool(ctx, (vc_pool_mode)pm, in, dense, VC_MEMORY_HOST);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "global pooling failed");
    } else {
        int64_t shape[2] = {b, ii.channels};
        rc = cli_write_npy(cmd, ctx, pos[1], dense, VC_DTYPE_FP32, 2, shape);
    }
    free(dense);
    if (rc) return rc;
    if (json) {
        cli_json_io("input", pos[0], "output", pos[1]);
        printf(", \"mode\": \"%s\", \"global\": true, \"voxels\": %lld, "
               "\"batch_size\": %d, \"channels\": %lld}\n",
               POOL_MODES[pm], (long long)ii.count, b, (long long)ii.channels);
    } else {
        printf("pool global %s: %lld voxels -> [%d, %lld] float32\n", POOL_MODES[pm],
               (long long)ii.count, b, (long long)ii.channels);
    }
    return CLI_OK;
}

static void print_pool_summary(const char *const pos[2], int pm, const vc_pool_desc *pd,
                               const vc_tensor *in, const vc_tensor *out, int json)
{
    vc_tensor_info ii, oi;
    vc_coords_info ici, oci;
    vc_tensor_get_info(in, &ii);
    vc_coords_get_info(ii.coords, &ici);
    vc_tensor_get_info(out, &oi);
    vc_coords_get_info(oi.coords, &oci);
    if (json) {
        cli_json_io("input", pos[0], "output", pos[1]);
        printf(", \"mode\": \"%s\", ", POOL_MODES[pm]);
        cli_print_map_json(&pd->map, POOL_TYPES[pd->map.type]);
        printf(", \"in_voxels\": %lld, \"out_voxels\": %lld, \"channels\": %lld, ",
               (long long)ii.count, (long long)oi.count, (long long)oi.channels);
        cli_print_shapes_json(ici.spatial_shape, oci.spatial_shape);
        printf("}\n");
    } else {
        printf("pool %s ", POOL_MODES[pm]);
        cli_print_map_text(&pd->map, POOL_TYPES[pd->map.type]);
        printf(": %lld -> %lld voxels, %lld channels, shape %dx%dx%d -> %dx%dx%d (z,y,x)\n",
               (long long)ii.count, (long long)oi.count, (long long)oi.channels,
               ici.spatial_shape[0], ici.spatial_shape[1], ici.spatial_shape[2],
               oci.spatial_shape[0], oci.spatial_shape[1], oci.spatial_shape[2]);
    }
}

/* Pooling over the kernel map of pd->map, to a .vxt. */
static int pool_map(const char *cmd, vc_context *ctx, const char *const pos[2], int pm,
                    vc_pool_desc *pd, const vc_tensor *in, int json)
{
    vc_tensor_info ii;
    vc_tensor_get_info(in, &ii);
    vc_kmap *map = NULL;
    vc_tensor *out = NULL;
    int rc = CLI_OK;
    vc_status st = vc_kmap_build(ctx, ii.coords, &pd->map, &map);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "cannot build the kernel map");
        goto done;
    }
    pd->kmap = map;
    st = vc_pool_forward(ctx, pd, in, &out);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "pooling failed");
        goto done;
    }
    if ((rc = cli_save_tensor(cmd, ctx, out, pos[1]))) goto done;
    print_pool_summary(pos, pm, pd, in, out, json);
done:
    vc_tensor_destroy(out);
    vc_kmap_destroy(map);
    return rc;
}

int cmd_pool(int argc, char **argv)
{
    const char *cmd = "pool";
    cli_map_opts m = {0};
    const char *mode = NULL, *backend = NULL, *nonfinite = NULL, *pos[2];
    int json = 0, done = 0, npos = 0, global = 0;
    cli_opt opts[] = {CLI_MAP_OPTIONS(m),         {"--mode", &mode, NULL},
                      {"--global", NULL, &global}, {"--json", NULL, &json},
                      {"--backend", &backend, NULL}, {"--nonfinite", &nonfinite, NULL}};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2, &npos, POOL_HELP, &done);
    if (rc || done) return rc;
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and OUT (see voxconv pool --help)");
    if (cli_check_extension(cmd, "OUT", pos[1], global ? ".npy" : ".vxt")) return CLI_USAGE;
    int pm = 0;
    if (mode && cli_parse_choice(cmd, "--mode", mode, POOL_MODES, &pm)) return CLI_USAGE;
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.mode = (vc_pool_mode)pm;
    if (global) {
        if (m.type || m.kernel || m.stride || m.padding || m.dilation)
            return cli_usage_error(cmd, "--global takes no --type/--kernel/--stride/--padding/"
                                        "--dilation");
    } else if (cli_parse_map(cmd, &m, POOL_TYPES, &pd.map)) {
        return CLI_USAGE;
    }
    vc_nonfinite_policy nf;
    if (cli_parse_nonfinite(cmd, nonfinite, &nf)) return CLI_USAGE;
    vc_context *ctx = NULL;
    if ((rc = cli_open_context(cmd, backend, &ctx))) return rc;
    vc_tensor *in = NULL;
    if (!(rc = cli_load_tensor(cmd, ctx, pos[0], &in)) &&
        !(rc = cli_check_features(cmd, ctx, in, nf, pos[0]))) {
        if (global) rc = pool_global(cmd, ctx, pos, pm, in, json);
        else rc = pool_map(cmd, ctx, pos, pm, &pd, in, json);
    }
    vc_tensor_destroy(in);
    vc_context_destroy(ctx);
    return rc;
}
