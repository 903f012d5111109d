/* src/tune_op.c - the context's tune table and its cache file (src/tune_cache.h): the identity
 * of the context's device, loading a cache at creation (one warning, never a failure), saving
 * one. vc_conv_tune is in conv_op.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "src/io/io.h"
#include "src/tune_cache.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gemm/gemm.h"
#endif

/* Most configuration names a build has (gemm/gemm.cu's table is far smaller). */
#define MAX_CONFIGS 256

/* The configuration names of this build, index = configuration; the count (0 without CUDA). */
static int32_t config_names(const char *names[MAX_CONFIGS])
{
#ifdef VOXCONV_HAVE_CUDA
    const vc_gemm_config *t = NULL;
    int32_t n = vc_gemm_configs(&t);
    if (n > MAX_CONFIGS) n = MAX_CONFIGS;
    for (int32_t i = 0; i < n; i++) names[i] = t[i].name;
    return n;
#else
    (void)names;
    return 0;
#endif
}

#ifdef VOXCONV_HAVE_CUDA
/* The kernel driver's version from the first line of /proc/driver/nvidia/version ("NVRM
 * version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."): its first token of digits and
 * dots with a dot; "" where the file is absent (not Linux) or says otherwise. */
static void driver_version(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    const char *p = fgets(line, sizeof line, f) ? line : "";
    fclose(f);
    while (*p) {
        size_t n = strspn(p, "0123456789.");
        if (n > 2 && n < cap && memchr(p, '.', n) && (p == line || p[-1] == ' ')) {
            memcpy(out, p, n);
            out[n] = '\0';
            return;
        }
        p += n ? n : 1;
    }
}
#endif

/* The identity a cache made on this context must have (src/tune_cache.h): the device's for
 * CUDA, an empty device name for the CPU backend. */
static void ident_here(const vc_context *ctx, vc_tune_ident *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->library, sizeof id->library, "%s", vc_version());
#ifdef VOXCONV_HAVE_CUDA
    struct cudaDeviceProp p;
    int rt = 0, drv = 0;
    if (ctx->backend != VC_BACKEND_CUDA) return;
    if (cudaGetDeviceProperties(&p, ctx->device) != cudaSuccess ||
        cudaRuntimeGetVersion(&rt) != cudaSuccess || cudaDriverGetVersion(&drv) != cudaSuccess) {
        cudaGetLastError();
        snprintf(id->device, sizeof id->device, "unknown CUDA device %d", (int)ctx->device);
        return;
    }
    snprintf(id->device, sizeof id->device, "%s", p.name);
    id->sm_count = p.multiProcessorCount;
    id->cc_major = p.major;
    id->cc_minor = p.minor;
    id->cuda_runtime = rt;
    id->cuda_driver = drv;
    driver_version(id->driver, sizeof id->driver);
#else
    (void)ctx;
#endif
}

void vc_tune_cache_load(vc_context *ctx, const char *path)
{
    const char *tail = "ignored; the planner's own choices apply";
    uint8_t *data = NULL;
    size_t size = 0;
    vc_status st =
        vc_io_read_file_max(ctx, path, (int64_t)VC_TUNE_CACHE_MAX_BYTES, &data, &size);
    if (st != VC_OK) {
        snprintf(ctx->warning, sizeof ctx->warning, "tune cache is unreadable (%s): %s",
                 ctx->err.msg, tail);
        ctx->err.msg[0] = '\0';
        return;
    }
    vc_tune_ident here;
    ident_here(ctx, &here);
    const char *names[MAX_CONFIGS];
    const int32_t n = config_names(names);
    char why[400];
    vc_tune_table t = {NULL, 0, 0};
    const vc_tune_verdict v =
        vc_tune_cache_parse((const char *)data, size, &here, names, n, &t, why, sizeof why);
    free(data);
    if (v != VC_TUNE_LOADED) {
        snprintf(ctx->warning, sizeof ctx->warning, "tune cache '%s' is %s (%s): %s", path,
                 vc_tune_verdict_name(v), why, tail);
        return;
    }
    vc_tune_table_clear(&ctx->tune);
    ctx->tune = t;
}

vc_status vc_tune_cache_count(const vc_context *ctx, int32_t *count)
{
    if (!ctx || !count) return VC_ERR_INVALID_ARGUMENT;
    *count = ctx->tune.n;
    return VC_OK;
}

vc_status vc_tune_cache_save_output(vc_context *ctx, vc_output *out)
{
    const char *fn = "vc_tune_cache_save";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!out) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_UNSUPPORTED, "%s: a tune cache belongs to a GPU; this "
                           "context runs on the CPU backend", fn);
    vc_tune_ident id;
    ident_here(ctx, &id);
    const char *names[MAX_CONFIGS];
    const int32_t n = config_names(names);
    char *text = vc_tune_cache_format(&id, &ctx->tune, names, n);
    if (!text) return vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    vc_io_writer w;
    vc_status st = vc_io_writer_attach(&w, ctx, out);
    if (st == VC_OK) {
        vc_io_writer_put(&w, text, strlen(text));
        vc_io_writer_put(&w, "\n", 1);
        st = vc_io_writer_close(&w);
    }
    free(text);
    return st;
}

vc_status vc_tune_cache_save(vc_context *ctx, const char *path)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    if (!path)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "vc_tune_cache_save: path is NULL");
    vc_output *out = NULL;
    vc_status st = vc_output_open(ctx, path, &out);
    if (st != VC_OK) return st;
    st = vc_tune_cache_save_output(ctx, out);
    if (st != VC_OK) {
        vc_output_discard(out);
        return st;
    }
    return vc_output_publish(ctx, out);
}
