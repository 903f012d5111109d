/*
 * cmd_info.c - voxconv info: describes a point cloud (points, columns, per-column bounds), a
 * .npy array (dtype, shape; float [N, D>=3] also as a cloud) or a .vxt tensor (voxels,
 * channels, shape, per-batch counts, coordinate bounds, feature statistics).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const NPY_DTYPES[] = {"float32", "float16", "bfloat16", "int32"};

static const char INFO_HELP[] =
    "usage: voxconv info FILE [--format auto|kitti|pcd|ply|npy|vxt] [--json]\n"
    "                         [--load-dim N] [--use-dim N|I,J,K,...]\n"
    "                         [--backend auto|cpu|cuda]\n"
    "\n"
    "Describes a file. Point clouds (raw .bin, .pcd, .ply, float .npy [N, D>=3]): the\n"
    "number of points, the columns, and min/max of every column over the finite points.\n"
    ".npy arrays: dtype and shape. .vxt voxel tensors: voxels, channels, dtype, spatial shape\n"
    "(z,y,x), batch size, voxels per batch item (the first 16 items, then how many more and\n"
    "how many of those are empty), coordinate bounds and feature statistics. Text output\n"
    "lists at most 32 columns of a point cloud.\n"
    "The kind of file is chosen by extension (.vxt, .npy, else a point cloud) unless --format\n"
    "names it; --load-dim or --use-dim reads a .npy as a point cloud.\n"
    "\n"
    "  --format F              file format (default auto)\n"
    "  --json                  print one JSON object instead of text\n"
    CLI_READ_OPTIONS_HELP
    "  --backend B             context backend (default auto)\n";

/* A float [N, D] .npy is described as a point cloud when 3 <= D <= INFO_MAX_COLUMNS (the
 * readers' column limit, docs/formats.md); text output lists at most INFO_COLUMNS columns. */
#define INFO_MAX_COLUMNS 4096
#define INFO_COLUMNS 32

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
    double *lo = cli_xcalloc((size_t)dim, sizeof(double));
    double *hi = cli_xcalloc((size_t)dim, sizeof(double));
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
        int32_t shown = dim < INFO_COLUMNS ? dim : INFO_COLUMNS;
        printf("columns:    %d (", (int)dim);
        for (int32_t c = 0; c < shown; c++)
            printf("%s%s", c ? " " : "", names && names[c] ? names[c] : "?");
        printf("%s)\n", shown < dim ? " ..." : "");
        for (int32_t c = 0; c < shown; c++) {
            char label[64];
            snprintf(label, sizeof label, "%s:", names && names[c] ? names[c] : "?");
            if (lo[c] <= hi[c]) printf("%-11s %.6g .. %.6g\n", label, lo[c], hi[c]);
            else printf("%-11s (no finite values)\n", label);
        }
        if (shown < dim) printf("... %d more columns\n", (int)(dim - shown));
        printf("non-finite: %lld\n", (long long)nonfinite);
    }
    free(lo);
    free(hi);
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

/* Voxels per batch item are printed for the first INFO_BATCHES items; the rest are summed up
 * (how many more, how many of them empty), so a header's batch size never sets the output's
 * length or the memory used. */
#define INFO_BATCHES 16

/* What info says about a tensor, from its host copy. */
typedef struct tensor_stats {
    int64_t head[INFO_BATCHES];  /* voxels of batch items 0..INFO_BATCHES-1                  */
    int64_t more, more_empty;    /* batch items after those, and how many of them are empty  */
    int32_t cmin[4], cmax[4];    /* coordinate bounds (b, z, y, x); valid when count > 0     */
    double fmin, fmax, fsum;     /* over the finite features                                 */
    int64_t nfinite, nonfinite;  /* features                                                 */
} tensor_stats;

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* head[], more and more_empty from the batch column: O(count) memory whatever the batch size. */
static int batch_counts(const char *cmd, const int32_t *coords, int64_t count, int32_t batch,
                        tensor_stats *s)
{
    int32_t *tail = cli_xcalloc((size_t)(count > 0 ? count : 1), sizeof(int32_t));
    if (!tail) return cli_error(cmd, "out of memory");
    int64_t nt = 0, distinct = 0;
    for (int64_t i = 0; i < count; i++) {
        int32_t b = coords[i * 4];
        if (b >= 0 && b < INFO_BATCHES) s->head[b]++;
        else if (b >= INFO_BATCHES && b < batch) tail[nt++] = b;
    }
    qsort(tail, (size_t)nt, sizeof *tail, cmp_i32);
    for (int64_t i = 0; i < nt; i++) distinct += i == 0 || tail[i] != tail[i - 1];
    free(tail);
    s->more = batch > INFO_BATCHES ? (int64_t)batch - INFO_BATCHES : 0;
    s->more_empty = s->more - distinct;
    return CLI_OK;
}

static int tensor_stats_compute(const char *cmd, const vc_tensor_info *ti,
                                const vc_coords_info *ci, const int32_t *coords,
                                const float *feats, tensor_stats *s)
{
    if (batch_counts(cmd, coords, ti->count, ci->batch_size, s)) return CLI_FAIL;
    for (int a = 0; a < 4; a++) s->cmin[a] = s->cmax[a] = 0;
    for (int64_t i = 0; i < ti->count; i++) {
        for (int a = 0; a < 4; a++) {
            int32_t v = coords[i * 4 + a];
            if (i == 0 || v < s->cmin[a]) s->cmin[a] = v;
            if (i == 0 || v > s->cmax[a]) s->cmax[a] = v;
        }
    }
    s->fmin = INFINITY;
    s->fmax = -INFINITY;
    s->fsum = 0.0;
    s->nonfinite = 0;
    int64_t nf = ti->count * ti->channels;
    for (int64_t i = 0; i < nf; i++) {
        float v = feats[i];
        if (!isfinite(v)) {
            s->nonfinite++;
            continue;
        }
        if (v < s->fmin) s->fmin = v;
        if (v > s->fmax) s->fmax = v;
        s->fsum += v;
    }
    s->nfinite = nf - s->nonfinite;
    return CLI_OK;
}

static void print_tensor_json(const char *path, const vc_tensor_info *ti,
                              const vc_coords_info *ci, const tensor_stats *s)
{
    printf("{\"file\": ");
    cli_json_string(stdout, path);
    printf(", \"kind\": \"tensor\", \"voxels\": %lld, \"channels\": %lld, \"dtype\": \"%s\", "
           "\"spatial_shape\": ",
           (long long)ti->count, (long long)ti->channels, cli_dtype_name(ti->dtype));
    cli_print_int3_json(stdout, ci->spatial_shape);
    printf(", \"batch_size\": %d, \"voxels_per_batch\": [", ci->batch_size);
    for (int32_t b = 0; b < ci->batch_size && b < INFO_BATCHES; b++)
        printf("%s%lld", b ? ", " : "", (long long)s->head[b]);
    printf("]");
    if (s->more)
        printf(", \"more_batches\": %lld, \"more_batches_empty\": %lld", (long long)s->more,
               (long long)s->more_empty);
    if (ti->count > 0)
        printf(", \"coord_min\": [%d, %d, %d, %d], \"coord_max\": [%d, %d, %d, %d]", s->cmin[0],
               s->cmin[1], s->cmin[2], s->cmin[3], s->cmax[0], s->cmax[1], s->cmax[2], s->cmax[3]);
    else
        printf(", \"coord_min\": null, \"coord_max\": null");
    if (s->nfinite > 0)
        printf(", \"feature_min\": %.9g, \"feature_max\": %.9g, \"feature_mean\": %.9g", s->fmin,
               s->fmax, s->fsum / (double)s->nfinite);
    else
        printf(", \"feature_min\": null, \"feature_max\": null, \"feature_mean\": null");
    printf(", \"nonfinite_features\": %lld}\n", (long long)s->nonfinite);
}

static void print_tensor_text(const char *path, const vc_tensor_info *ti,
                              const vc_coords_info *ci, const tensor_stats *s)
{
    printf("file:          %s\n", path);
    printf("kind:          sparse tensor\n");
    printf("voxels:        %lld\n", (long long)ti->count);
    printf("channels:      %lld\n", (long long)ti->channels);
    printf("dtype:         %s\n", cli_dtype_name(ti->dtype));
    printf("spatial shape: %d x %d x %d (z, y, x)\n", ci->spatial_shape[0],
           ci->spatial_shape[1], ci->spatial_shape[2]);
    printf("batch size:    %d\n", ci->batch_size);
    printf("per batch:    ");
    for (int32_t b = 0; b < ci->batch_size && b < INFO_BATCHES; b++)
        printf(" %lld", (long long)s->head[b]);
    if (s->more)
        printf(" ... %lld more batches, %lld empty", (long long)s->more,
               (long long)s->more_empty);
    printf("\n");
    if (ti->count > 0)
        printf("coord bounds:  b %d..%d, z %d..%d, y %d..%d, x %d..%d\n", s->cmin[0], s->cmax[0],
               s->cmin[1], s->cmax[1], s->cmin[2], s->cmax[2], s->cmin[3], s->cmax[3]);
    if (s->nfinite > 0)
        printf("features:      min %.6g, max %.6g, mean %.6g\n", s->fmin, s->fmax,
               s->fsum / (double)s->nfinite);
    printf("non-finite:    %lld\n", (long long)s->nonfinite);
}

static int info_tensor(const char *cmd, vc_context *ctx, const char *path, int json)
{
    vc_tensor *t = NULL;
    int rc = cli_load_tensor(cmd, ctx, path, &t);
    if (rc) return rc;
    vc_tensor_info ti;
    vc_coords_info ci;
    int32_t *coords = NULL;
    float *feats = NULL;
    tensor_stats s;
    memset(&s, 0, sizeof s);
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    rc = cli_tensor_to_host(cmd, ctx, t, &coords, &feats);
    if (!rc) rc = tensor_stats_compute(cmd, &ti, &ci, coords, feats, &s);
    if (!rc) {
        if (json) print_tensor_json(path, &ti, &ci, &s);
        else print_tensor_text(path, &ti, &ci, &s);
    }
    free(coords);
    free(feats);
    vc_tensor_destroy(t);
    return rc;
}

static int info_npy(const char *cmd, vc_context *ctx, const char *path, int json)
{
    vc_array a;
    int rc = cli_read_npy(cmd, ctx, path, "cannot read", &a);
    if (rc) return rc;
    const char *dt = (unsigned)a.dtype <= VC_DTYPE_INT32 ? NPY_DTYPES[a.dtype] : "?";
    int cloud = a.dtype == VC_DTYPE_FP32 && a.ndim == 2 && a.shape[1] >= 3 &&
                a.shape[1] <= INFO_MAX_COLUMNS;
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
        char **names = cli_xcalloc((size_t)dim, sizeof(char *));
        char (*buf)[16] = cli_xcalloc((size_t)dim, sizeof *buf);
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
    int json = 0, done = 0, npos = 0;
    cli_read_opts r = {0};
    cli_opt opts[] = {{"--format", &format, NULL}, {"--json", NULL, &json},
                      {"--backend", &backend, NULL}, CLI_READ_OPTIONS(r)};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               1, &npos, INFO_HELP, &done);
    if (rc || done) return rc;
    if (npos != 1) return cli_usage_error(cmd, "expected one FILE (see voxconv info --help)");
    int fmt = 0;
    if (format && cli_parse_choice(cmd, "--format", format, CLI_FORMATS, &fmt)) return CLI_USAGE;
    if (fmt == VC_FORMAT_AUTO) {
        if (ends_with(pos[0], ".vxt")) fmt = VC_FORMAT_VXT;
        else if (ends_with(pos[0], ".npy")) fmt = VC_FORMAT_NPY;
    }
    int read_opts = r.load_dim || r.use_dim; /* a .npy is then read as a point cloud */
    if (read_opts && fmt == VC_FORMAT_VXT)
        return cli_usage_error(cmd, "--load-dim and --use-dim apply to point files, not to a "
                                    ".vxt voxel tensor");
    if (cli_parse_read_opts(cmd, &r)) return CLI_USAGE;
    vc_context *ctx = NULL;
    if ((rc = cli_open_context(cmd, backend, &ctx))) {
        cli_read_opts_free(&r);
        return rc;
    }
    if (fmt == VC_FORMAT_VXT) {
        rc = info_tensor(cmd, ctx, pos[0], json);
    } else if (fmt == VC_FORMAT_NPY && !read_opts) {
        rc = info_npy(cmd, ctx, pos[0], json);
    } else {
        vc_cloud cl;
        memset(&cl, 0, sizeof cl);
        rc = cli_read_cloud(cmd, ctx, pos[0], fmt, &r, &cl);
        if (rc == CLI_OK) {
            print_cloud(pos[0], "point cloud", cl.data, cl.count, cl.dim, cl.names, json, 0);
            vc_cloud_free(&cl);
        }
    }
    vc_context_destroy(ctx);
    cli_read_opts_free(&r);
    return rc;
}

