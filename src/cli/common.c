/*
 * common.c - what the subcommands of the voxconv CLI share: the context (--backend), names of
 * dtypes, file loads and saves that fail with one line naming the file, host copies of a
 * tensor, and small JSON pieces.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char *const BACKENDS[] = {"auto", "cpu", "cuda", NULL};
const char *const CLI_DTYPES[] = {"fp32", "fp16", "bf16", NULL};
const char *const CLI_FORMATS[] = {"auto", "kitti", "pcd", "ply", "npy", "vxt", NULL};

int cli_parse_command(const char *cmd, int argc, char **argv, const cli_opt *opts, int nopts,
                      const char **pos, int max_pos, int *npos, const char *help, int *done)
{
    int h = 0;
    *done = 0;
    int rc = cli_parse(cmd, argc, argv, opts, nopts, pos, max_pos, npos, &h);
    if (rc) return rc;
    if (h) {
        fputs(help, stdout);
        *done = 1;
    }
    return CLI_OK;
}

int cli_open_context(const char *cmd, const char *backend_text, vc_context **ctx)
{
    return cli_open_context_tuned(cmd, backend_text, NULL, ctx);
}

int cli_open_context_tuned(const char *cmd, const char *backend_text, const char *tune_cache,
                           vc_context **ctx)
{
    int b = 0;
    if (backend_text && cli_parse_choice(cmd, "--backend", backend_text, BACKENDS, &b))
        return CLI_USAGE;
#ifdef VOXCONV_CLI_PARSE_ONLY
    /* The argument-parser fuzz target (tests/fuzz/fuzz_cli.c): every command has parsed and
     * checked all its options by now and touches no file before this point; stop here. */
    *ctx = NULL;
    return CLI_PARSE_ONLY;
#else
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = (vc_backend)b;
    d.tune_cache = tune_cache;
    vc_status st = vc_context_create(&d, ctx);
    if (st != VC_OK) return cli_vc_error(cmd, NULL, st, "cannot create a context");
    /* The library never prints: a cache it ignored is the one warning line here. */
    if (vc_context_warning(*ctx)[0])
        fprintf(stderr, "voxconv %s: warning: %s\n", cmd, vc_context_warning(*ctx));
    return CLI_OK;
#endif
}

const char *cli_dtype_name(vc_dtype t)
{
    return (unsigned)t <= VC_DTYPE_BF16 ? CLI_DTYPES[t] : (t == VC_DTYPE_INT32 ? "int32" : "?");
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void *cli_xcalloc(size_t n, size_t size)
{
    if (n == 0) n = 1;
    return calloc(n, size ? size : 1);
}

int cli_file_error(const char *cmd, const vc_context *ctx, vc_status st, const char *verb,
                   const char *path)
{
    /* "VERB 'PATH'", or just "VERB" when the library's message names the path. */
    char what[1200];
    const char *detail = vc_context_last_error(ctx);
    if (detail && strstr(detail, path)) snprintf(what, sizeof what, "%s", verb);
    else snprintf(what, sizeof what, "%s '%s'", verb, path);
    return cli_vc_error(cmd, ctx, st, what);
}

int cli_load_tensor(const char *cmd, vc_context *ctx, const char *path, vc_tensor **t)
{
    vc_status st = vc_tensor_load(ctx, path, t);
    return st == VC_OK ? CLI_OK : cli_file_error(cmd, ctx, st, "cannot load", path);
}

int cli_parse_nonfinite(const char *cmd, const char *text, vc_nonfinite_policy *out)
{
    static const char *const names[] = {"refuse", "keep", "zero", NULL};
    int v = 0;
    if (text && cli_parse_choice(cmd, "--nonfinite", text, names, &v)) return CLI_USAGE;
    *out = (vc_nonfinite_policy)v;
    return CLI_OK;
}

int cli_check_features(const char *cmd, vc_context *ctx, vc_tensor *t, vc_nonfinite_policy p,
                       const char *path)
{
    int64_t n = 0;
    vc_status st = vc_tensor_check_finite(ctx, t, p, &n);
    if (st != VC_OK)
        return cli_file_error(cmd, ctx, st, "refusing (see --nonfinite) the features of", path);
    if (n) fprintf(stderr, "voxconv %s: '%s': %lld NaN or infinite feature%s %s\n", cmd, path,
                   (long long)n, n == 1 ? "" : "s", p == VC_NONFINITE_ZERO ? "set to 0" : "kept");
    return CLI_OK;
}

int cli_save_tensor(const char *cmd, vc_context *ctx, const vc_tensor *t, const char *path)
{
    cli_output o;
    memset(&o, 0, sizeof o);
    o.path = path;
    o.tensor = t;
    return cli_write_outputs(cmd, ctx, &o, 1);
}

int cli_read_npy(const char *cmd, vc_context *ctx, const char *path, const char *verb,
                 vc_array *a)
{
    memset(a, 0, sizeof *a);
    vc_status st = vc_npy_read(ctx, path, a);
    return st == VC_OK ? CLI_OK : cli_file_error(cmd, ctx, st, verb, path);
}

vc_array cli_array(void *data, vc_dtype dtype, int ndim, const int64_t *shape)
{
    vc_array a;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = dtype;
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) a.shape[i] = shape[i];
    return a;
}

int cli_write_npy(const char *cmd, vc_context *ctx, const char *path, void *data,
                  vc_dtype dtype, int ndim, const int64_t *shape)
{
    cli_output o = {path, NULL, cli_array(data, dtype, ndim, shape), NULL, 0};
    return cli_write_outputs(cmd, ctx, &o, 1);
}

int cli_tensor_to_host(const char *cmd, vc_context *ctx, const vc_tensor *t, int32_t **coords,
                       float **feats)
{
    vc_tensor_info ti;
    vc_status st = vc_tensor_get_info(t, &ti);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot inspect the tensor");
    *coords = cli_xcalloc((size_t)ti.count * 4, sizeof(int32_t));
    *feats = cli_xcalloc((size_t)ti.count * (size_t)ti.channels, sizeof(float));
    int rc = CLI_OK;
    if (!*coords || !*feats) {
        rc = cli_error(cmd, "out of memory copying %lld voxels", (long long)ti.count);
    } else {
        st = vc_coords_copy_out(ctx, ti.coords, *coords, VC_MEMORY_HOST);
        if (st == VC_OK) st = vc_tensor_copy_out(ctx, t, *feats, VC_DTYPE_FP32, VC_MEMORY_HOST);
        if (st != VC_OK) rc = cli_vc_error(cmd, ctx, st, "cannot copy the tensor out");
    }
    if (rc != CLI_OK) {
        free(*coords);
        free(*feats);
        *coords = NULL;
        *feats = NULL;
    }
    return rc;
}

int cli_parse_read_opts(const char *cmd, cli_read_opts *r)
{
    vc_read_options init = VC_READ_OPTIONS_INIT;
    int64_t v;
    r->o = init;
    r->use = NULL;
    if (r->load_dim) {
        if (cli_parse_i64(cmd, "--load-dim", r->load_dim, 3, 4096, &v)) return CLI_USAGE;
        r->o.load_dim = (int32_t)v;
    }
    if (!r->use_dim) return CLI_OK;
    if (!strchr(r->use_dim, ',')) { /* a count, as mmdetection3d's use_dim=N */
        if (cli_parse_i64(cmd, "--use-dim", r->use_dim, 3, 4096, &v)) return CLI_USAGE;
        r->o.n_use_dim = (int32_t)v;
        return CLI_OK;
    }
    int n = 0;
    if (cli_parse_int_list(cmd, "--use-dim", r->use_dim, 0, 4095, 4096, &r->use, &n))
        return CLI_USAGE;
    if (n < 3) {
        cli_read_opts_free(r);
        return cli_usage_error(cmd, "--use-dim: keep at least 3 columns (x, y, z), got '%s'",
                               r->use_dim);
    }
    r->o.use_dim = r->use;
    r->o.n_use_dim = n;
    return CLI_OK;
}

void cli_read_opts_free(cli_read_opts *r)
{
    free(r->use);
    r->use = NULL;
    r->o.use_dim = NULL;
}

int cli_read_cloud(const char *cmd, vc_context *ctx, const char *path, int fmt,
                   const cli_read_opts *r, vc_cloud *out)
{
    vc_status st = vc_cloud_read_ex(ctx, path, (vc_file_format)fmt, &r->o, out);
    return st == VC_OK ? CLI_OK : cli_file_error(cmd, ctx, st, "cannot read", path);
}

void cli_print_int3_json(FILE *f, const int32_t v[3])
{
    fprintf(f, "[%d, %d, %d]", v[0], v[1], v[2]);
}

void cli_json_io(const char *key_in, const char *in, const char *key_out, const char *out)
{
    printf("{\"%s\": ", key_in);
    cli_json_string(stdout, in);
    printf(", \"%s\": ", key_out);
    cli_json_string(stdout, out);
}
