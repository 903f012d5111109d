/*
 * commands.c - the subcommands of the voxconv CLI: info, voxelize, conv, pool, export.
 *
 * Each command parses its options (args.c), creates a context (--backend), calls the public
 * API and prints a summary (text, or JSON with --json). Errors are one line on stderr built from
 * vc_status_string and vc_context_last_error. See docs/cli.md for the reference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const BACKENDS[] = {"auto", "cpu", "cuda", NULL};
static const char *const DTYPES[] = {"fp32", "fp16", "bf16", NULL};
static const char *const NPY_DTYPES[] = {"float32", "float16", "bfloat16", "int32"};
static const char *const MAP_NAMES[] = {"subm", "strided", "downsample", "inverse",
                                        "transposed", NULL};
static const char *const POOL_TYPES[] = {"subm", "strided", "downsample", NULL};
static const char *const POOL_MODES[] = {"max", "avg", NULL};
static const char *const ACTIVATIONS[] = {"none", "relu", "leaky", NULL};
static const char *const REDUCES[] = {"mean", "first", "count", NULL};
static const char *const NONFINITES[] = {"skip", "error", NULL};
static const char *const ALGOS[] = {"auto", "gather", "implicit", "grouped", NULL};
static const char *const FORMATS[] = {"auto", "kitti", "pcd", "ply", "npy", "vxt", NULL};

#define KERNEL_WHAT "K or KZ,KY,KX"

/* ---------------------------------------------------------------------------------------- */
/* Small helpers                                                                              */
/* ---------------------------------------------------------------------------------------- */

static int open_context(const char *cmd, const char *backend_text, vc_context **ctx)
{
    int b = 0;
    if (backend_text && cli_parse_choice(cmd, "--backend", backend_text, BACKENDS, &b))
        return CLI_USAGE;
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = (vc_backend)b;
    vc_status st = vc_context_create(&d, ctx);
    if (st != VC_OK) return cli_vc_error(cmd, NULL, st, "cannot create a context");
    return CLI_OK;
}

static const char *dtype_name(vc_dtype t)
{
    return (unsigned)t <= VC_DTYPE_BF16 ? DTYPES[t] : (t == VC_DTYPE_INT32 ? "int32" : "?");
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    if (n < m) return 0;
    for (size_t i = 0; i < m; i++) {
        char c = s[n - m + i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != suffix[i]) return 0;
    }
    return 1;
}

static void *xcalloc(size_t n, size_t size)
{
    if (n == 0) n = 1;
    return calloc(n, size ? size : 1);
}

static float half_to_float(uint16_t h)
{
    int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

/* splitmix64 step: the documented generator of --random-weights. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* "VERB 'PATH'" for an error line, or just "VERB" when the library's message names the path. */
static const char *file_what(char *buf, size_t size, const vc_context *ctx, const char *verb,
                             const char *path)
{
    const char *detail = vc_context_last_error(ctx);
    if (detail && strstr(detail, path)) snprintf(buf, size, "%s", verb);
    else snprintf(buf, size, "%s '%s'", verb, path);
    return buf;
}

static int load_tensor(const char *cmd, vc_context *ctx, const char *path, vc_tensor **t)
{
    vc_status st = vc_tensor_load(ctx, path, t);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot load", path);
        return cli_vc_error(cmd, ctx, st, what);
    }
    return CLI_OK;
}

static int save_tensor(const char *cmd, vc_context *ctx, const vc_tensor *t, const char *path)
{
    vc_status st = vc_tensor_save(ctx, t, path);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot write", path);
        return cli_vc_error(cmd, ctx, st, what);
    }
    return CLI_OK;
}

static int write_npy(const char *cmd, vc_context *ctx, const char *path, void *data,
                     vc_dtype dtype, int ndim, const int64_t *shape)
{
    vc_array a;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = dtype;
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) a.shape[i] = shape[i];
    vc_status st = vc_npy_write(ctx, path, &a);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot write", path);
        return cli_vc_error(cmd, ctx, st, what);
    }
    return CLI_OK;
}

/* Host copies of a tensor's coordinates (int32 [N,4]) and features (fp32 [N,C]). */
static int tensor_to_host(const char *cmd, vc_context *ctx, const vc_tensor *t,
                          int32_t **coords, float **feats)
{
    vc_tensor_info ti;
    vc_status st = vc_tensor_get_info(t, &ti);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot inspect the tensor");
    *coords = xcalloc((size_t)ti.count * 4, sizeof(int32_t));
    *feats = xcalloc((size_t)ti.count * (size_t)ti.channels, sizeof(float));
    if (!*coords || !*feats) {
        free(*coords);
        free(*feats);
        *coords = NULL;
        *feats = NULL;
        return cli_error(cmd, "out of memory copying %lld voxels", (long long)ti.count);
    }
    st = vc_coords_copy_out(ctx, ti.coords, *coords, VC_MEMORY_HOST);
    if (st == VC_OK) st = vc_tensor_copy_out(ctx, t, *feats, VC_DTYPE_FP32, VC_MEMORY_HOST);
    if (st != VC_OK) {
        free(*coords);
        free(*feats);
        *coords = NULL;
        *feats = NULL;
        return cli_vc_error(cmd, ctx, st, "cannot copy the tensor out");
    }
    return CLI_OK;
}

static void print_int3_json(FILE *f, const int32_t v[3])
{
    fprintf(f, "[%d, %d, %d]", v[0], v[1], v[2]);
}

/* ---------------------------------------------------------------------------------------- */
/* info                                                                                       */
/* ---------------------------------------------------------------------------------------- */

static const char INFO_HELP[] =
    "usage: voxconv info FILE [--format auto|kitti|pcd|ply|npy|vxt] [--json]\n"
    "                         [--backend auto|cpu|cuda]\n"
    "\n"
    "Describes a file. Point clouds (KITTI .bin, .pcd, .ply, float .npy [N, D>=3]): the\n"
    "number of points, the columns, and min/max of every column over the finite points.\n"
    ".npy arrays: dtype and shape. .vxt voxel tensors: voxels, channels, dtype, spatial shape\n"
    "(z,y,x), batch size, voxels per batch item, coordinate bounds and feature statistics.\n"
    "The kind of file is chosen by extension (.vxt, .npy, else a point cloud) unless --format\n"
    "names it.\n"
    "\n"
    "  --format F   file format (default auto)\n"
    "  --json       print one JSON object instead of text\n"
    "  --backend B  context backend (default auto)\n";

static void column_bounds(const float *data, int64_t n, int32_t dim, double *lo, double *hi,
                          int64_t *nonfinite)
{
    for (int32_t c = 0; c < dim; c++) {
        lo[c] = INFINITY;
        hi[c] = -INFINITY;
    }
    *nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *p = data + (size_t)i * (size_t)dim;
        if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) {
            (*nonfinite)++;
            continue;
        }
        for (int32_t c = 0; c < dim; c++) {
            if (!isfinite(p[c])) continue;
            if (p[c] < lo[c]) lo[c] = p[c];
            if (p[c] > hi[c]) hi[c] = p[c];
        }
    }
}

static void print_cloud(const char *path, const char *kind, const float *data, int64_t n,
                        int32_t dim, char **names, int json, int in_object)
{
    double *lo = xcalloc((size_t)dim, sizeof(double));
    double *hi = xcalloc((size_t)dim, sizeof(double));
    int64_t nonfinite = 0;
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return;
    }
    column_bounds(data, n, dim, lo, hi, &nonfinite);
    if (json) {
        if (!in_object) {
            printf("{\"file\": ");
            cli_json_string(stdout, path);
            printf(", \"kind\": \"%s\"", kind);
        }
        printf(", \"points\": %lld, \"nonfinite_points\": %lld, \"columns\": [",
               (long long)n, (long long)nonfinite);
        for (int32_t c = 0; c < dim; c++) {
            char def[32];
            snprintf(def, sizeof def, "c%d", (int)c);
            printf("%s{\"name\": ", c ? ", " : "");
            cli_json_string(stdout, names && names[c] ? names[c] : def);
            if (lo[c] <= hi[c]) printf(", \"min\": %.9g, \"max\": %.9g}", lo[c], hi[c]);
            else printf(", \"min\": null, \"max\": null}");
        }
        printf("]");
        if (!in_object) printf("}\n");
    } else {
        if (!in_object) printf("file:       %s\nkind:       %s\n", path, kind);
        printf("points:     %lld\n", (long long)n);
        printf("columns:    %d (", (int)dim);
        for (int32_t c = 0; c < dim; c++)
            printf("%s%s", c ? " " : "", names && names[c] ? names[c] : "?");
        printf(")\n");
        for (int32_t c = 0; c < dim; c++) {
            char label[64];
            snprintf(label, sizeof label, "%s:", names && names[c] ? names[c] : "?");
            if (lo[c] <= hi[c]) printf("%-11s %.6g .. %.6g\n", label, lo[c], hi[c]);
            else printf("%-11s (no finite values)\n", label);
        }
        printf("non-finite: %lld\n", (long long)nonfinite);
    }
    free(lo);
    free(hi);
}

static int info_tensor(const char *cmd, vc_context *ctx, const char *path, int json)
{
    vc_tensor *t = NULL;
    int rc = load_tensor(cmd, ctx, path, &t);
    if (rc) return rc;
    vc_tensor_info ti;
    vc_coords_info ci;
    int32_t *coords = NULL;
    float *feats = NULL;
    int64_t *per_batch = NULL;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    rc = tensor_to_host(cmd, ctx, t, &coords, &feats);
    if (rc) goto done;
    per_batch = xcalloc((size_t)(ci.batch_size > 0 ? ci.batch_size : 1), sizeof(int64_t));
    if (!per_batch) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    int32_t cmin[4] = {0, 0, 0, 0}, cmax[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < ti.count; i++) {
        for (int a = 0; a < 4; a++) {
            int32_t v = coords[i * 4 + a];
            if (i == 0 || v < cmin[a]) cmin[a] = v;
            if (i == 0 || v > cmax[a]) cmax[a] = v;
        }
        if (coords[i * 4] >= 0 && coords[i * 4] < ci.batch_size) per_batch[coords[i * 4]]++;
    }
    double fmin = INFINITY, fmax = -INFINITY, fsum = 0.0;
    int64_t nf = ti.count * ti.channels, fnonfinite = 0;
    for (int64_t i = 0; i < nf; i++) {
        float v = feats[i];
        if (!isfinite(v)) {
            fnonfinite++;
            continue;
        }
        if (v < fmin) fmin = v;
        if (v > fmax) fmax = v;
        fsum += v;
    }
    int64_t nfin = nf - fnonfinite;
    if (json) {
        printf("{\"file\": ");
        cli_json_string(stdout, path);
        printf(", \"kind\": \"tensor\", \"voxels\": %lld, \"channels\": %lld, \"dtype\": \"%s\", "
               "\"spatial_shape\": ",
               (long long)ti.count, (long long)ti.channels, dtype_name(ti.dtype));
        print_int3_json(stdout, ci.spatial_shape);
        printf(", \"batch_size\": %d, \"voxels_per_batch\": [", ci.batch_size);
        for (int32_t b = 0; b < ci.batch_size; b++)
            printf("%s%lld", b ? ", " : "", (long long)per_batch[b]);
        printf("]");
        if (ti.count > 0)
            printf(", \"coord_min\": [%d, %d, %d, %d], \"coord_max\": [%d, %d, %d, %d]", cmin[0],
                   cmin[1], cmin[2], cmin[3], cmax[0], cmax[1], cmax[2], cmax[3]);
        else
            printf(", \"coord_min\": null, \"coord_max\": null");
        if (nfin > 0)
            printf(", \"feature_min\": %.9g, \"feature_max\": %.9g, \"feature_mean\": %.9g", fmin,
                   fmax, fsum / (double)nfin);
        else
            printf(", \"feature_min\": null, \"feature_max\": null, \"feature_mean\": null");
        printf(", \"nonfinite_features\": %lld}\n", (long long)fnonfinite);
    } else {
        printf("file:          %s\n", path);
        printf("kind:          sparse tensor\n");
        printf("voxels:        %lld\n", (long long)ti.count);
        printf("channels:      %lld\n", (long long)ti.channels);
        printf("dtype:         %s\n", dtype_name(ti.dtype));
        printf("spatial shape: %d x %d x %d (z, y, x)\n", ci.spatial_shape[0],
               ci.spatial_shape[1], ci.spatial_shape[2]);
        printf("batch size:    %d\n", ci.batch_size);
        printf("per batch:    ");
        for (int32_t b = 0; b < ci.batch_size; b++) printf(" %lld", (long long)per_batch[b]);
        printf("\n");
        if (ti.count > 0)
            printf("coord bounds:  b %d..%d, z %d..%d, y %d..%d, x %d..%d\n", cmin[0], cmax[0],
                   cmin[1], cmax[1], cmin[2], cmax[2], cmin[3], cmax[3]);
        if (nfin > 0)
            printf("features:      min %.6g, max %.6g, mean %.6g\n", fmin, fmax,
                   fsum / (double)nfin);
        printf("non-finite:    %lld\n", (long long)fnonfinite);
    }
done:
    free(coords);
    free(feats);
    free(per_batch);
    vc_tensor_destroy(t);
    return rc;
}

static int info_npy(const char *cmd, vc_context *ctx, const char *path, int json)
{
    vc_array a;
    memset(&a, 0, sizeof a);
    vc_status st = vc_npy_read(ctx, path, &a);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot read", path);
        return cli_vc_error(cmd, ctx, st, what);
    }
    const char *dt = (unsigned)a.dtype <= VC_DTYPE_INT32 ? NPY_DTYPES[a.dtype] : "?";
    int cloud = a.dtype == VC_DTYPE_FP32 && a.ndim == 2 && a.shape[1] >= 3;
    if (json) {
        printf("{\"file\": ");
        cli_json_string(stdout, path);
        printf(", \"kind\": \"array\", \"dtype\": \"%s\", \"shape\": [", dt);
        for (int i = 0; i < a.ndim; i++) printf("%s%lld", i ? ", " : "", (long long)a.shape[i]);
        printf("]");
    } else {
        printf("file:       %s\nkind:       array\ndtype:      %s\nshape:      [", path, dt);
        for (int i = 0; i < a.ndim; i++) printf("%s%lld", i ? ", " : "", (long long)a.shape[i]);
        printf("]\n");
    }
    if (cloud) {
        int32_t dim = (int32_t)a.shape[1];
        char **names = xcalloc((size_t)dim, sizeof(char *));
        char (*buf)[16] = xcalloc((size_t)dim, sizeof *buf);
        if (names && buf) {
            for (int32_t c = 0; c < dim; c++) {
                if (c < 3) snprintf(buf[c], sizeof buf[c], "%c", "xyz"[c]);
                else snprintf(buf[c], sizeof buf[c], "c%d", (int)c);
                names[c] = buf[c];
            }
            print_cloud(path, "array", (const float *)a.data, a.shape[0], dim, names, json, 1);
        }
        free(names);
        free(buf);
    }
    if (json) printf("}\n");
    vc_array_free(&a);
    return CLI_OK;
}

int cmd_info(int argc, char **argv)
{
    const char *cmd = "info";
    const char *format = NULL, *backend = NULL, *pos[1];
    int json = 0, help = 0, npos = 0;
    cli_opt opts[] = {{"--format", &format, NULL}, {"--json", NULL, &json},
                      {"--backend", &backend, NULL}};
    int rc = cli_parse(cmd, argc, argv, opts, 3, pos, 1, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(INFO_HELP, stdout);
        return CLI_OK;
    }
    if (npos != 1) return cli_usage_error(cmd, "expected one FILE (see voxconv info --help)");
    int fmt = 0;
    if (format && cli_parse_choice(cmd, "--format", format, FORMATS, &fmt)) return CLI_USAGE;
    if (fmt == VC_FORMAT_AUTO) {
        if (ends_with(pos[0], ".vxt")) fmt = VC_FORMAT_VXT;
        else if (ends_with(pos[0], ".npy")) fmt = VC_FORMAT_NPY;
    }
    vc_context *ctx = NULL;
    if ((rc = open_context(cmd, backend, &ctx))) return rc;
    if (fmt == VC_FORMAT_VXT) {
        rc = info_tensor(cmd, ctx, pos[0], json);
    } else if (fmt == VC_FORMAT_NPY) {
        rc = info_npy(cmd, ctx, pos[0], json);
    } else {
        vc_cloud cl;
        memset(&cl, 0, sizeof cl);
        vc_status st = vc_cloud_read(ctx, pos[0], (vc_file_format)fmt, &cl);
        if (st != VC_OK) {
            char what[1200];
            file_what(what, sizeof what, ctx, "cannot read", pos[0]);
            rc = cli_vc_error(cmd, ctx, st, what);
        } else {
            print_cloud(pos[0], "point cloud", cl.data, cl.count, cl.dim, cl.names, json, 0);
            vc_cloud_free(&cl);
        }
    }
    vc_context_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* voxelize                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static const char VOXELIZE_HELP[] =
    "usage: voxconv voxelize IN OUT.vxt --voxel-size X,Y,Z\n"
    "                        --range XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX [options]\n"
    "\n"
    "Reads a point cloud (KITTI .bin, .pcd, .ply, float32 .npy [N, D>=3]), voxelizes it and\n"
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
    "  --json                  print the statistics as one JSON object\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

int cmd_voxelize(int argc, char **argv)
{
    const char *cmd = "voxelize";
    const char *vsize = NULL, *range = NULL, *reduce = NULL, *maxv = NULL, *dtype = NULL;
    const char *nonfinite = NULL, *format = NULL, *backend = NULL, *pos[2];
    int json = 0, help = 0, npos = 0;
    cli_opt opts[] = {{"--voxel-size", &vsize, NULL}, {"--range", &range, NULL},
                      {"--reduce", &reduce, NULL},    {"--max-voxels", &maxv, NULL},
                      {"--dtype", &dtype, NULL},      {"--nonfinite", &nonfinite, NULL},
                      {"--format", &format, NULL},    {"--json", NULL, &json},
                      {"--backend", &backend, NULL}};
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &npos,
                       &help);
    if (rc) return rc;
    if (help) {
        fputs(VOXELIZE_HELP, stdout);
        return CLI_OK;
    }
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN and OUT.vxt (see voxconv voxelize --help)");
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    if (!vsize) return cli_usage_error(cmd, "--voxel-size is required");
    if (!range) return cli_usage_error(cmd, "--range is required");
    if (cli_parse_floats(cmd, "--voxel-size", vsize, 3, d.voxel_size)) return CLI_USAGE;
    for (int i = 0; i < 3; i++)
        if (!(d.voxel_size[i] > 0))
            return cli_usage_error(cmd, "--voxel-size: sizes must be > 0, got '%s'", vsize);
    if (cli_parse_floats(cmd, "--range", range, 6, d.range)) return CLI_USAGE;
    for (int i = 0; i < 3; i++)
        if (!(d.range[i + 3] > d.range[i]))
            return cli_usage_error(cmd, "--range: each max must exceed its min, got '%s'", range);
    int v = 0;
    if (reduce) {
        if (cli_parse_choice(cmd, "--reduce", reduce, REDUCES, &v)) return CLI_USAGE;
        d.reduce = (vc_reduce)v;
    }
    if (maxv && cli_parse_i64(cmd, "--max-voxels", maxv, 0, INT64_MAX, &d.max_voxels))
        return CLI_USAGE;
    if (dtype) {
        if (cli_parse_choice(cmd, "--dtype", dtype, DTYPES, &v)) return CLI_USAGE;
        d.dtype = (vc_dtype)v;
    }
    if (nonfinite) {
        if (cli_parse_choice(cmd, "--nonfinite", nonfinite, NONFINITES, &v)) return CLI_USAGE;
        d.nonfinite = (vc_nonfinite)v;
    }
    int fmt = 0;
    if (format && cli_parse_choice(cmd, "--format", format, FORMATS, &fmt)) return CLI_USAGE;
    if (fmt == VC_FORMAT_VXT) return cli_usage_error(cmd, "--format: a .vxt is not a point cloud");

    vc_context *ctx = NULL;
    if ((rc = open_context(cmd, backend, &ctx))) return rc;
    vc_cloud cl;
    memset(&cl, 0, sizeof cl);
    vc_tensor *t = NULL;
    vc_voxelize_stats stats;
    memset(&stats, 0, sizeof stats);
    vc_status st = vc_cloud_read(ctx, pos[0], (vc_file_format)fmt, &cl);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot read", pos[0]);
        rc = cli_vc_error(cmd, ctx, st, what);
        goto done;
    }
    vc_points pts = {cl.data, cl.count, cl.dim, NULL, VC_MEMORY_HOST};
    st = vc_voxelize(ctx, &d, &pts, &t, &stats);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "voxelization failed");
        goto done;
    }
    if ((rc = save_tensor(cmd, ctx, t, pos[1]))) goto done;
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    if (json) {
        printf("{\"input\": ");
        cli_json_string(stdout, pos[0]);
        printf(", \"output\": ");
        cli_json_string(stdout, pos[1]);
        printf(", \"points_in\": %lld, \"points_used\": %lld, \"points_out_of_range\": %lld, "
               "\"points_nonfinite\": %lld, \"voxels_total\": %lld, \"voxels_kept\": %lld, ",
               (long long)stats.points_in, (long long)stats.points_used,
               (long long)stats.points_out_of_range, (long long)stats.points_nonfinite,
               (long long)stats.voxels_total, (long long)stats.voxels_kept);
        printf("\"spatial_shape\": ");
        print_int3_json(stdout, ci.spatial_shape);
        printf(", \"channels\": %lld, \"dtype\": \"%s\"}\n", (long long)ti.channels,
               dtype_name(ti.dtype));
    } else {
        printf("voxelize: %lld points -> %lld voxels (%lld points used, %lld out of range, "
               "%lld non-finite, %lld voxels before the cap), shape %dx%dx%d (z,y,x), "
               "%lld channels %s\n",
               (long long)stats.points_in, (long long)stats.voxels_kept,
               (long long)stats.points_used, (long long)stats.points_out_of_range,
               (long long)stats.points_nonfinite, (long long)stats.voxels_total,
               ci.spatial_shape[0], ci.spatial_shape[1], ci.spatial_shape[2],
               (long long)ti.channels, dtype_name(ti.dtype));
    }
done:
    vc_tensor_destroy(t);
    vc_cloud_free(&cl);
    vc_context_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Kernel-map options shared by conv and pool                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct map_opts {
    const char *type, *kernel, *stride, *padding, *dilation;
} map_opts;

/* Fills `d` from the texts; `types` is the list of accepted type names (indices = map types). */
static int parse_map(const char *cmd, const map_opts *m, const char *const *types,
                     vc_map_desc *d)
{
    int t = 0;
    if (!m->type) return cli_usage_error(cmd, "--type is required");
    if (cli_parse_choice(cmd, "--type", m->type, types, &t)) return CLI_USAGE;
    d->type = (vc_map_type)t;
    if (!m->kernel) return cli_usage_error(cmd, "--kernel is required");
    if (cli_parse_int3(cmd, "--kernel", m->kernel, 1, 7, KERNEL_WHAT, d->kernel)) return CLI_USAGE;
    if (m->stride &&
        cli_parse_int3(cmd, "--stride", m->stride, 1, 64, "S or SZ,SY,SX", d->stride))
        return CLI_USAGE;
    if (m->padding &&
        cli_parse_int3(cmd, "--padding", m->padding, 0, 64, "P or PZ,PY,PX", d->padding))
        return CLI_USAGE;
    if (m->dilation &&
        cli_parse_int3(cmd, "--dilation", m->dilation, 1, 64, "D or DZ,DY,DX", d->dilation))
        return CLI_USAGE;
    if (d->type == VC_MAP_SUBM) {
        for (int i = 0; i < 3; i++) {
            if (d->kernel[i] % 2 == 0)
                return cli_usage_error(cmd, "--kernel: subm needs odd sizes, got '%s'",
                                       m->kernel);
            if (d->stride[i] != 1)
                return cli_usage_error(cmd, "--stride: subm needs stride 1, got '%s'",
                                       m->stride);
        }
    }
    return CLI_OK;
}

static void print_map_text(const vc_map_desc *d, const char *type)
{
    printf("%s k%d,%d,%d s%d,%d,%d p%d,%d,%d d%d,%d,%d", type, d->kernel[0], d->kernel[1],
           d->kernel[2], d->stride[0], d->stride[1], d->stride[2], d->padding[0], d->padding[1],
           d->padding[2], d->dilation[0], d->dilation[1], d->dilation[2]);
}

static void print_map_json(const vc_map_desc *d, const char *type)
{
    printf("\"type\": \"%s\", \"kernel\": ", type);
    print_int3_json(stdout, d->kernel);
    printf(", \"stride\": ");
    print_int3_json(stdout, d->stride);
    printf(", \"padding\": ");
    print_int3_json(stdout, d->padding);
    printf(", \"dilation\": ");
    print_int3_json(stdout, d->dilation);
}

/* ---------------------------------------------------------------------------------------- */
/* conv                                                                                       */
/* ---------------------------------------------------------------------------------------- */

static const char CONV_HELP[] =
    "usage: voxconv conv IN.vxt OUT.vxt --type TYPE --kernel K --out-channels C\n"
    "                    (--weights W.npy | --random-weights SEED) [options]\n"
    "\n"
    "Runs one sparse convolution layer: out = act(conv(in, W) + bias), accumulated in fp32.\n"
    "Convolution is cross-correlation (spconv / PyTorch conv3d); sizes are per axis (z,y,x),\n"
    "one number meaning the same on every axis.\n"
    "\n"
    "  --type subm|strided|downsample|inverse|transposed\n"
    "      subm: output = input coordinates (odd kernels, stride 1);\n"
    "      strided: spconv sparse conv, output p reads input p*stride - padding + k*dilation;\n"
    "      downsample: Minkowski semantics, outputs floor(q / stride) (padding 0);\n"
    "      inverse: the inverse of a strided/downsample layer (see --forward-input);\n"
    "      transposed: a true transposed conv creating new coordinates\n"
    "  --kernel K|KZ,KY,KX     kernel size, 1..7 per axis (required)\n"
    "  --stride S|SZ,SY,SX     stride (default 1)\n"
    "  --padding P|PZ,PY,PX    padding (default 0)\n"
    "  --dilation D|DZ,DY,DX   dilation (default 1)\n"
    "  --out-channels C        output channels (required unless --weights gives them)\n"
    "  --weights W.npy         weights [C_out, kz, ky, kx, C_in], float32 or float16\n"
    "  --random-weights SEED   deterministic fp32 weights: element i (in [C_out,kz,ky,kx,C_in]\n"
    "                          order) is (2u - 1) * sqrt(1 / (K * C_in)), u = (z >> 11) * 2^-53\n"
    "                          where z is the (i+1)-th output of splitmix64 seeded with SEED\n"
    "  --bias B.npy            bias [C_out], float32 or float16\n"
    "  --activation none|relu|leaky   (default none)\n"
    "  --leaky-slope A         LeakyReLU slope (default 0.01)\n"
    "  --save-weights W.npy    write the weights used (float32 or as read)\n"
    "  --dtype fp32|fp16|bf16  compute on features of this dtype (the input is converted);\n"
    "                          the output has this dtype (default: the input's)\n"
    "  --algo auto|gather|implicit|grouped   algorithm (default auto); grouped:\n"
    "                          gather-GEMM-scatter over all offsets in one GEMM (CUDA)\n"
    "  --forward-input FWD.vxt (inverse only) the input of the forward layer: the forward map\n"
    "                          (--forward-type over FWD's coordinates with the same --kernel,\n"
    "                          --stride, --padding, --dilation) is built, IN's coordinates must\n"
    "                          equal its output coordinates, and the result lies on FWD's\n"
    "                          coordinates\n"
    "  --forward-type strided|downsample   type of the forward layer (default strided)\n"
    "  --json                  print a JSON summary\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n"
    "\n"
    "example: voxconv conv in.vxt out.vxt --type strided --kernel 3 --stride 2 --padding 1 \\\n"
    "             --out-channels 16 --random-weights 7 --save-weights w.npy\n";

/* Builds the weights: read from .npy, or generated. On success *w is malloc'ed. */
static int get_weights(const char *cmd, vc_context *ctx, const char *path, const char *seed_text,
                       int64_t *c_out, int64_t c_in, const int32_t kernel[3], void **w,
                       vc_dtype *wdt)
{
    int64_t kvol = (int64_t)kernel[0] * kernel[1] * kernel[2];
    if (path) {
        vc_array a;
        memset(&a, 0, sizeof a);
        vc_status st = vc_npy_read(ctx, path, &a);
        if (st != VC_OK) {
            char what[1200];
            file_what(what, sizeof what, ctx, "cannot read weights", path);
            return cli_vc_error(cmd, ctx, st, what);
        }
        if (*c_out == 0 && a.ndim == 5) *c_out = a.shape[0];
        int ok = a.ndim == 5 && a.shape[0] == *c_out && a.shape[1] == kernel[0] &&
                 a.shape[2] == kernel[1] && a.shape[3] == kernel[2] && a.shape[4] == c_in;
        if (!ok) {
            char got[160] = "";
            for (int i = 0; i < a.ndim && i < 8; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                         (long long)a.shape[i]);
            vc_array_free(&a);
            return cli_error(cmd, "--weights: '%s' has shape [%s], expected [%lld,%d,%d,%d,%lld]",
                             path, got, (long long)*c_out, kernel[0], kernel[1], kernel[2],
                             (long long)c_in);
        }
        if (a.dtype != VC_DTYPE_FP32 && a.dtype != VC_DTYPE_FP16) {
            vc_array_free(&a);
            return cli_error(cmd, "--weights: '%s' must be float32 or float16", path);
        }
        size_t bytes = (size_t)(*c_out * kvol * c_in) * vc_dtype_size(a.dtype);
        *w = xcalloc(bytes, 1);
        if (!*w) {
            vc_array_free(&a);
            return cli_error(cmd, "out of memory");
        }
        memcpy(*w, a.data, bytes);
        *wdt = a.dtype;
        vc_array_free(&a);
        return CLI_OK;
    }
    uint64_t seed = 0;
    if (cli_parse_u64(cmd, "--random-weights", seed_text, &seed)) return CLI_USAGE;
    int64_t n = *c_out * kvol * c_in;
    float *f = xcalloc((size_t)n, sizeof(float));
    if (!f) return cli_error(cmd, "out of memory");
    double scale = sqrt(1.0 / (double)(kvol * c_in));
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
        f[i] = (float)((2.0 * u - 1.0) * scale);
    }
    *w = f;
    *wdt = VC_DTYPE_FP32;
    return CLI_OK;
}

static int get_bias(const char *cmd, vc_context *ctx, const char *path, int64_t c_out,
                    float **bias)
{
    vc_array a;
    memset(&a, 0, sizeof a);
    vc_status st = vc_npy_read(ctx, path, &a);
    if (st != VC_OK) {
        char what[1200];
        file_what(what, sizeof what, ctx, "cannot read bias", path);
        return cli_vc_error(cmd, ctx, st, what);
    }
    if (a.ndim != 1 || a.shape[0] != c_out ||
        (a.dtype != VC_DTYPE_FP32 && a.dtype != VC_DTYPE_FP16)) {
        vc_array_free(&a);
        return cli_error(cmd, "--bias: '%s' must be float32 or float16 of shape [%lld]", path,
                         (long long)c_out);
    }
    *bias = xcalloc((size_t)c_out, sizeof(float));
    if (!*bias) {
        vc_array_free(&a);
        return cli_error(cmd, "out of memory");
    }
    for (int64_t i = 0; i < c_out; i++)
        (*bias)[i] = a.dtype == VC_DTYPE_FP32 ? ((const float *)a.data)[i]
                                              : half_to_float(((const uint16_t *)a.data)[i]);
    vc_array_free(&a);
    return CLI_OK;
}

/* Compares two coordinate sets (rows and spatial shape); 1 when equal. */
static int same_coords(vc_context *ctx, const vc_coords *a, const vc_coords *b, int *err)
{
    vc_coords_info ia, ib;
    *err = 0;
    vc_coords_get_info(a, &ia);
    vc_coords_get_info(b, &ib);
    if (ia.count != ib.count || ia.batch_size != ib.batch_size ||
        memcmp(ia.spatial_shape, ib.spatial_shape, sizeof ia.spatial_shape) != 0)
        return 0;
    int32_t *ra = xcalloc((size_t)ia.count * 4, sizeof(int32_t));
    int32_t *rb = xcalloc((size_t)ib.count * 4, sizeof(int32_t));
    int eq = 0;
    if (!ra || !rb) {
        *err = 1;
    } else if (vc_coords_copy_out(ctx, a, ra, VC_MEMORY_HOST) != VC_OK ||
               vc_coords_copy_out(ctx, b, rb, VC_MEMORY_HOST) != VC_OK) {
        *err = 1;
    } else {
        eq = memcmp(ra, rb, (size_t)ia.count * 4 * sizeof(int32_t)) == 0;
    }
    free(ra);
    free(rb);
    return eq;
}

int cmd_conv(int argc, char **argv)
{
    const char *cmd = "conv";
    map_opts m = {0};
    const char *outc = NULL, *weights = NULL, *seed = NULL, *bias_path = NULL, *act = NULL;
    const char *slope = NULL, *savew = NULL, *dtype = NULL, *algo = NULL, *fwd_path = NULL;
    const char *fwd_type = NULL, *backend = NULL, *pos[2];
    int json = 0, help = 0, npos = 0;
    cli_opt opts[] = {
        {"--type", &m.type, NULL},         {"--kernel", &m.kernel, NULL},
        {"--stride", &m.stride, NULL},     {"--padding", &m.padding, NULL},
        {"--dilation", &m.dilation, NULL}, {"--out-channels", &outc, NULL},
        {"--weights", &weights, NULL},     {"--random-weights", &seed, NULL},
        {"--bias", &bias_path, NULL},      {"--activation", &act, NULL},
        {"--leaky-slope", &slope, NULL},   {"--save-weights", &savew, NULL},
        {"--dtype", &dtype, NULL},         {"--algo", &algo, NULL},
        {"--forward-input", &fwd_path, NULL}, {"--forward-type", &fwd_type, NULL},
        {"--json", NULL, &json},           {"--backend", &backend, NULL}};
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &npos,
                       &help);
    if (rc) return rc;
    if (help) {
        fputs(CONV_HELP, stdout);
        return CLI_OK;
    }
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and OUT.vxt (see voxconv conv --help)");
    vc_conv_desc cd = VC_CONV_DESC_INIT;
    vc_map_desc md = VC_MAP_DESC_INIT;
    md.kernel[0] = md.kernel[1] = md.kernel[2] = 3;
    if (parse_map(cmd, &m, MAP_NAMES, &md)) return CLI_USAGE;
    int64_t c_out = 0;
    if (outc && cli_parse_i64(cmd, "--out-channels", outc, 1, 1 << 20, &c_out)) return CLI_USAGE;
    if (!weights == !seed)
        return cli_usage_error(cmd, "give exactly one of --weights and --random-weights");
    if (!weights && !outc) return cli_usage_error(cmd, "--out-channels is required");
    int v = 0;
    if (act) {
        if (cli_parse_choice(cmd, "--activation", act, ACTIVATIONS, &v)) return CLI_USAGE;
        cd.activation = (vc_activation)v;
    }
    if (slope && cli_parse_float(cmd, "--leaky-slope", slope, &cd.leaky_slope)) return CLI_USAGE;
    int want_dtype = -1;
    if (dtype && cli_parse_choice(cmd, "--dtype", dtype, DTYPES, &want_dtype)) return CLI_USAGE;
    if (algo) {
        if (cli_parse_choice(cmd, "--algo", algo, ALGOS, &v)) return CLI_USAGE;
        cd.algo = (vc_algo)v;
    }
    int fwd_t = 0;
    if (fwd_type && cli_parse_choice(cmd, "--forward-type", fwd_type, (const char *const[]){
                                         "strided", "downsample", NULL}, &fwd_t))
        return CLI_USAGE;
    if (md.type == VC_MAP_INVERSE && !fwd_path)
        return cli_usage_error(cmd, "--type inverse needs --forward-input FWD.vxt");
    if (md.type != VC_MAP_INVERSE && (fwd_path || fwd_type))
        return cli_usage_error(cmd, "--forward-input and --forward-type are for --type inverse");
    if (seed) {
        uint64_t s;
        if (cli_parse_u64(cmd, "--random-weights", seed, &s)) return CLI_USAGE;
    }

    vc_context *ctx = NULL;
    if ((rc = open_context(cmd, backend, &ctx))) return rc;
    vc_tensor *in = NULL, *fwd_in = NULL, *work = NULL, *cast = NULL, *out = NULL;
    vc_kmap *fwd_map = NULL, *map = NULL;
    void *w = NULL;
    float *bias = NULL;
    void *host_feats = NULL;
    vc_dtype wdt = VC_DTYPE_FP32;
    vc_status st;
    vc_tensor_info ii, oi;
    vc_coords_info ici, oci;
    vc_kmap_info ki;

    if ((rc = load_tensor(cmd, ctx, pos[0], &in))) goto done;
    vc_tensor_get_info(in, &ii);
    work = in;
    vc_coords *map_in = ii.coords;
    if (md.type == VC_MAP_INVERSE) {
        if ((rc = load_tensor(cmd, ctx, fwd_path, &fwd_in))) goto done;
        vc_tensor_info fi;
        vc_tensor_get_info(fwd_in, &fi);
        vc_map_desc fd = md;
        fd.type = fwd_t == 0 ? VC_MAP_STRIDED : VC_MAP_DOWNSAMPLE;
        st = vc_kmap_build(ctx, fi.coords, &fd, &fwd_map);
        if (st != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot build the forward map");
            goto done;
        }
        vc_kmap_info fki;
        vc_kmap_get_info(fwd_map, &fki);
        int err = 0;
        if (!same_coords(ctx, ii.coords, fki.out_coords, &err)) {
            rc = err ? cli_vc_error(cmd, ctx, VC_ERR_INTERNAL, "cannot compare coordinates")
                     : cli_error(cmd, "the coordinates of '%s' (%lld voxels) are not the output "
                                      "of the forward %s map of '%s' (%lld voxels)",
                                 pos[0], (long long)ii.count, fwd_t ? "downsample" : "strided",
                                 fwd_path, (long long)fki.out_count);
            goto done;
        }
        /* Put IN's features on the forward map's output set (the same rows). */
        size_t bytes = (size_t)ii.count * (size_t)ii.channels * vc_dtype_size(ii.dtype);
        host_feats = xcalloc(bytes, 1);
        if (!host_feats) {
            rc = cli_error(cmd, "out of memory");
            goto done;
        }
        st = vc_tensor_copy_out(ctx, in, host_feats, ii.dtype, VC_MEMORY_HOST);
        if (st == VC_OK)
            st = vc_tensor_create(ctx, fki.out_coords, ii.channels, ii.dtype, host_feats,
                                  VC_MEMORY_HOST, &cast);
        if (st != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot move the input onto the forward map");
            goto done;
        }
        work = cast;
        map_in = fki.out_coords;
        md.inverse_of = fwd_map;
    }
    if (want_dtype >= 0 && (vc_dtype)want_dtype != ii.dtype) {
        vc_tensor *c = NULL;
        st = vc_tensor_cast(ctx, work, (vc_dtype)want_dtype, &c);
        if (st != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "cannot convert the input features");
            goto done;
        }
        if (cast) vc_tensor_destroy(cast);
        cast = c;
        work = c;
    }
    if ((rc = get_weights(cmd, ctx, weights, seed, &c_out, ii.channels, md.kernel, &w, &wdt)))
        goto done;
    if (bias_path && (rc = get_bias(cmd, ctx, bias_path, c_out, &bias))) goto done;
    st = vc_kmap_build(ctx, map_in, &md, &map);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "cannot build the kernel map");
        goto done;
    }
    cd.map = md;
    cd.kmap = map;
    cd.out_channels = c_out;
    cd.weights = w;
    cd.weight_dtype = wdt;
    cd.weight_memory = VC_MEMORY_HOST;
    cd.bias = bias;
    st = vc_conv_forward(ctx, &cd, work, &out);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "convolution failed");
        goto done;
    }
    if ((rc = save_tensor(cmd, ctx, out, pos[1]))) goto done;
    if (savew) {
        int64_t shape[5] = {c_out, md.kernel[0], md.kernel[1], md.kernel[2], ii.channels};
        if ((rc = write_npy(cmd, ctx, savew, w, wdt, 5, shape))) goto done;
    }
    vc_tensor_get_info(out, &oi);
    vc_coords_get_info(map_in, &ici);
    vc_coords_get_info(oi.coords, &oci);
    vc_kmap_get_info(map, &ki);
    if (json) {
        printf("{\"input\": ");
        cli_json_string(stdout, pos[0]);
        printf(", \"output\": ");
        cli_json_string(stdout, pos[1]);
        printf(", ");
        print_map_json(&md, MAP_NAMES[md.type]);
        printf(", \"in_voxels\": %lld, \"out_voxels\": %lld, \"in_channels\": %lld, "
               "\"out_channels\": %lld, \"pairs\": %lld, \"dtype\": \"%s\", \"in_shape\": ",
               (long long)ii.count, (long long)oi.count, (long long)ii.channels,
               (long long)oi.channels, (long long)ki.pair_count, dtype_name(oi.dtype));
        print_int3_json(stdout, ici.spatial_shape);
        printf(", \"out_shape\": ");
        print_int3_json(stdout, oci.spatial_shape);
        printf(", \"activation\": \"%s\"}\n", ACTIVATIONS[cd.activation]);
    } else {
        printf("conv ");
        print_map_text(&md, MAP_NAMES[md.type]);
        printf(": %lld -> %lld voxels, %lld -> %lld channels, %lld pairs, %s, shape "
               "%dx%dx%d -> %dx%dx%d (z,y,x)\n",
               (long long)ii.count, (long long)oi.count, (long long)ii.channels,
               (long long)oi.channels, (long long)ki.pair_count, dtype_name(oi.dtype),
               ici.spatial_shape[0], ici.spatial_shape[1], ici.spatial_shape[2],
               oci.spatial_shape[0], oci.spatial_shape[1], oci.spatial_shape[2]);
    }
done:
    vc_tensor_destroy(out);
    vc_kmap_destroy(map);
    vc_tensor_destroy(cast);
    vc_kmap_destroy(fwd_map);
    vc_tensor_destroy(fwd_in);
    vc_tensor_destroy(in);
    free(w);
    free(bias);
    free(host_feats);
    vc_context_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* pool                                                                                       */
/* ---------------------------------------------------------------------------------------- */

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
    "  --json                  print a JSON summary\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n";

int cmd_pool(int argc, char **argv)
{
    const char *cmd = "pool";
    map_opts m = {0};
    const char *mode = NULL, *backend = NULL, *pos[2];
    int json = 0, help = 0, npos = 0, global = 0;
    cli_opt opts[] = {{"--type", &m.type, NULL},         {"--kernel", &m.kernel, NULL},
                      {"--stride", &m.stride, NULL},     {"--padding", &m.padding, NULL},
                      {"--dilation", &m.dilation, NULL}, {"--mode", &mode, NULL},
                      {"--global", NULL, &global},       {"--json", NULL, &json},
                      {"--backend", &backend, NULL}};
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 2, &npos,
                       &help);
    if (rc) return rc;
    if (help) {
        fputs(POOL_HELP, stdout);
        return CLI_OK;
    }
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and OUT (see voxconv pool --help)");
    int pm = 0;
    if (mode && cli_parse_choice(cmd, "--mode", mode, POOL_MODES, &pm)) return CLI_USAGE;
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.mode = (vc_pool_mode)pm;
    if (global) {
        if (m.type || m.kernel || m.stride || m.padding || m.dilation)
            return cli_usage_error(cmd, "--global takes no --type/--kernel/--stride/--padding/"
                                        "--dilation");
    } else if (parse_map(cmd, &m, POOL_TYPES, &pd.map)) {
        return CLI_USAGE;
    }
    vc_context *ctx = NULL;
    if ((rc = open_context(cmd, backend, &ctx))) return rc;
    vc_tensor *in = NULL, *out = NULL;
    vc_kmap *map = NULL;
    float *dense = NULL;
    vc_status st;
    vc_tensor_info ii, oi;
    vc_coords_info ici, oci;
    if ((rc = load_tensor(cmd, ctx, pos[0], &in))) goto done;
    vc_tensor_get_info(in, &ii);
    vc_coords_get_info(ii.coords, &ici);
    if (global) {
        int32_t b = ici.batch_size;
        dense = xcalloc((size_t)b * (size_t)ii.channels, sizeof(float));
        if (!dense) {
            rc = cli_error(cmd, "out of memory");
            goto done;
        }
        st = vc_global_pool(ctx, pd.mode, in, dense, VC_MEMORY_HOST);
        if (st != VC_OK) {
            rc = cli_vc_error(cmd, ctx, st, "global pooling failed");
            goto done;
        }
        int64_t shape[2] = {b, ii.channels};
        if ((rc = write_npy(cmd, ctx, pos[1], dense, VC_DTYPE_FP32, 2, shape))) goto done;
        if (json) {
            printf("{\"input\": ");
            cli_json_string(stdout, pos[0]);
            printf(", \"output\": ");
            cli_json_string(stdout, pos[1]);
            printf(", \"mode\": \"%s\", \"global\": true, \"voxels\": %lld, "
                   "\"batch_size\": %d, \"channels\": %lld}\n",
                   POOL_MODES[pm], (long long)ii.count, b, (long long)ii.channels);
        } else {
            printf("pool global %s: %lld voxels -> [%d, %lld] float32\n", POOL_MODES[pm],
                   (long long)ii.count, b, (long long)ii.channels);
        }
        goto done;
    }
    st = vc_kmap_build(ctx, ii.coords, &pd.map, &map);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "cannot build the kernel map");
        goto done;
    }
    pd.kmap = map;
    st = vc_pool_forward(ctx, &pd, in, &out);
    if (st != VC_OK) {
        rc = cli_vc_error(cmd, ctx, st, "pooling failed");
        goto done;
    }
    if ((rc = save_tensor(cmd, ctx, out, pos[1]))) goto done;
    vc_tensor_get_info(out, &oi);
    vc_coords_get_info(oi.coords, &oci);
    if (json) {
        printf("{\"input\": ");
        cli_json_string(stdout, pos[0]);
        printf(", \"output\": ");
        cli_json_string(stdout, pos[1]);
        printf(", \"mode\": \"%s\", ", POOL_MODES[pm]);
        print_map_json(&pd.map, POOL_TYPES[pd.map.type]);
        printf(", \"in_voxels\": %lld, \"out_voxels\": %lld, \"channels\": %lld, \"in_shape\": ",
               (long long)ii.count, (long long)oi.count, (long long)oi.channels);
        print_int3_json(stdout, ici.spatial_shape);
        printf(", \"out_shape\": ");
        print_int3_json(stdout, oci.spatial_shape);
        printf("}\n");
    } else {
        printf("pool %s ", POOL_MODES[pm]);
        print_map_text(&pd.map, POOL_TYPES[pd.map.type]);
        printf(": %lld -> %lld voxels, %lld channels, shape %dx%dx%d -> %dx%dx%d (z,y,x)\n",
               (long long)ii.count, (long long)oi.count, (long long)oi.channels,
               ici.spatial_shape[0], ici.spatial_shape[1], ici.spatial_shape[2],
               oci.spatial_shape[0], oci.spatial_shape[1], oci.spatial_shape[2]);
    }
done:
    free(dense);
    vc_tensor_destroy(out);
    vc_kmap_destroy(map);
    vc_tensor_destroy(in);
    vc_context_destroy(ctx);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* export                                                                                     */
/* ---------------------------------------------------------------------------------------- */

static const char EXPORT_HELP[] =
    "usage: voxconv export IN.vxt PREFIX [--json] [--backend auto|cpu|cuda]\n"
    "\n"
    "Writes PREFIX.coords.npy (int32 [N, 4], rows batch, z, y, x) and PREFIX.feats.npy\n"
    "(float32 [N, C]; fp16 and bf16 features are converted to float32).\n";

int cmd_export(int argc, char **argv)
{
    const char *cmd = "export";
    const char *backend = NULL, *pos[2];
    int json = 0, help = 0, npos = 0;
    cli_opt opts[] = {{"--json", NULL, &json}, {"--backend", &backend, NULL}};
    int rc = cli_parse(cmd, argc, argv, opts, 2, pos, 2, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(EXPORT_HELP, stdout);
        return CLI_OK;
    }
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and PREFIX (see voxconv export --help)");
    vc_context *ctx = NULL;
    if ((rc = open_context(cmd, backend, &ctx))) return rc;
    vc_tensor *t = NULL;
    int32_t *coords = NULL;
    float *feats = NULL;
    size_t plen = strlen(pos[1]) + 16;
    char *cpath = xcalloc(plen, 1), *fpath = xcalloc(plen, 1);
    if (!cpath || !fpath) {
        rc = cli_error(cmd, "out of memory");
        goto done;
    }
    snprintf(cpath, plen, "%s.coords.npy", pos[1]);
    snprintf(fpath, plen, "%s.feats.npy", pos[1]);
    if ((rc = load_tensor(cmd, ctx, pos[0], &t))) goto done;
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    if ((rc = tensor_to_host(cmd, ctx, t, &coords, &feats))) goto done;
    int64_t cshape[2] = {ti.count, 4}, fshape[2] = {ti.count, ti.channels};
    if ((rc = write_npy(cmd, ctx, cpath, coords, VC_DTYPE_INT32, 2, cshape))) goto done;
    if ((rc = write_npy(cmd, ctx, fpath, feats, VC_DTYPE_FP32, 2, fshape))) goto done;
    if (json) {
        printf("{\"input\": ");
        cli_json_string(stdout, pos[0]);
        printf(", \"coords\": ");
        cli_json_string(stdout, cpath);
        printf(", \"feats\": ");
        cli_json_string(stdout, fpath);
        printf(", \"voxels\": %lld, \"channels\": %lld, \"dtype\": \"%s\"}\n",
               (long long)ti.count, (long long)ti.channels, dtype_name(ti.dtype));
    } else {
        printf("export: %lld voxels, %lld channels (%s) -> %s, %s\n", (long long)ti.count,
               (long long)ti.channels, dtype_name(ti.dtype), cpath, fpath);
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
