/*
 * cmd_export.c - voxconv export: writes a .vxt tensor as PREFIX.coords.npy (int32 [N, 4]) and
 * PREFIX.feats.npy (float32 [N, C]).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char EXPORT_HELP[] =
    "usage: voxconv export IN.vxt PREFIX [--json] [--backend auto|cpu|cuda]\n"
    "\n"
    "Writes PREFIX.coords.npy (int32 [N, 4], rows batch, z, y, x) and PREFIX.feats.npy\n"
    "(float32 [N, C]; fp16 and bf16 features are converted to float32). Both files are\n"
    "written, or neither: an existing file is replaced only when both writes succeeded.\n";

int cmd_export(int argc, char **argv)
{
    const char *cmd = "export";
    const char *backend = NULL, *pos[2];
    int json = 0, done = 0, npos = 0;
    cli_opt opts[] = {{"--json", NULL, &json}, {"--backend", &backend, NULL}};
    int rc = cli_parse_command(cmd, argc, argv, opts, 2, pos, 2, &npos, EXPORT_HELP, &done);
    if (rc || done) return rc;
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and PREFIX (see voxconv export --help)");
    vc_context *ctx = NULL;
    if ((rc = cli_open_context(cmd, backend, &ctx))) return rc;
    vc_tensor *t = NULL;
    int32_t *coords = NULL;
    float *feats = NULL;
    size_t plen = strlen(pos[1]) + 16;
    char *cpath = cli_xcalloc(plen, 1), *fpath = cli_xcalloc(plen, 1);
    if (!cpath || !fpath) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    snprintf(cpath, plen, "%s.coords.npy", pos[1]);
    snprintf(fpath, plen, "%s.feats.npy", pos[1]);
    if ((rc = cli_load_tensor(cmd, ctx, pos[0], &t))) goto done;
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    if ((rc = cli_tensor_to_host(cmd, ctx, t, &coords, &feats))) goto done;
    int64_t cshape[2] = {ti.count, 4}, fshape[2] = {ti.count, ti.channels};
    cli_output outs[2] = {{cpath, NULL, cli_array(coords, VC_DTYPE_INT32, 2, cshape), NULL, 0},
                          {fpath, NULL, cli_array(feats, VC_DTYPE_FP32, 2, fshape), NULL, 0}};
    if ((rc = cli_write_outputs(cmd, ctx, outs, 2))) goto done; /* both or neither */
    if (json) {
        cli_json_io("input", pos[0], "coords", cpath);
        printf(", \"feats\": ");
        cli_json_string(stdout, fpath);
        printf(", \"voxels\": %lld, \"channels\": %lld, \"dtype\": \"%s\"}\n",
               (long long)ti.count, (long long)ti.channels, cli_dtype_name(ti.dtype));
    } else {
        printf("export: %lld voxels, %lld channels (%s) -> %s, %s\n", (long long)ti.count,
               (long long)ti.channels, cli_dtype_name(ti.dtype), cpath, fpath);
    }
done:
    free(coords);
    free(feats);
    free(cpath);
    free(fpath);
    vc_tensor_destroy(t);
    vc_context_destroy(ctx);
    return rc;
}
