/* src/context.c - version, status names, the context and error recording (the message of each
 * failed call on the context; of a failed vc_context_create, per thread). Memory in either place
 * is memory.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "core/alloc.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define VC_STR2(x) #x
#define VC_STR(x) VC_STR2(x)

const char *vc_version(void)
{
    return VC_STR(VC_VERSION_MAJOR) "." VC_STR(VC_VERSION_MINOR) "." VC_STR(VC_VERSION_PATCH);
}

int vc_version_number(void) { return VC_VERSION_NUMBER; }

const char *vc_status_string(vc_status s)
{
    switch (s) {
    case VC_OK: return "VC_OK: success";
    case VC_ERR_INVALID_ARGUMENT: return "VC_ERR_INVALID_ARGUMENT: invalid argument";
    case VC_ERR_OUT_OF_MEMORY: return "VC_ERR_OUT_OF_MEMORY: out of memory";
    case VC_ERR_OUT_OF_RANGE: return "VC_ERR_OUT_OF_RANGE: coordinate out of range";
    case VC_ERR_SHAPE_MISMATCH: return "VC_ERR_SHAPE_MISMATCH: shapes do not agree";
    case VC_ERR_UNSUPPORTED: return "VC_ERR_UNSUPPORTED: not supported";
    case VC_ERR_IO: return "VC_ERR_IO: input/output error";
    case VC_ERR_FORMAT: return "VC_ERR_FORMAT: malformed file";
    case VC_ERR_CUDA: return "VC_ERR_CUDA: CUDA error";
    case VC_ERR_NO_DEVICE: return "VC_ERR_NO_DEVICE: no usable CUDA device";
    case VC_ERR_CAPACITY: return "VC_ERR_CAPACITY: capacity exceeded";
    case VC_ERR_LIMIT: return "VC_ERR_LIMIT: size over the limits";
    case VC_ERR_DUPLICATE: return "VC_ERR_DUPLICATE: duplicate coordinates";
    case VC_ERR_INTERNAL: return "VC_ERR_INTERNAL: internal error";
    }
    return "VC_ERR_UNKNOWN: unknown status value";
}

size_t vc_dtype_size(vc_dtype t)
{
    switch (t) {
    case VC_DTYPE_FP32: return 4;
    case VC_DTYPE_FP16: return 2;
    case VC_DTYPE_BF16: return 2;
    case VC_DTYPE_INT32: return 4;
    }
    return 0;
}

/* Thread-local storage: C11's keyword, else the compiler's own spelling; a compiler with
 * neither (none that builds voxconv today) would share one message among the threads. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define VC_THREAD_LOCAL _Thread_local
#elif defined(_MSC_VER)
#define VC_THREAD_LOCAL __declspec(thread)
#elif defined(__GNUC__)
#define VC_THREAD_LOCAL __thread
#else
#define VC_THREAD_LOCAL
#endif

/* Message of the last failed vc_context_create on this thread (no context to hold it). */
static VC_THREAD_LOCAL char g_create_error[512];

vc_status vc_ctx_fail(vc_context *ctx, vc_status status, const char *fmt, ...)
{
    char *buf = ctx ? ctx->err.msg : g_create_error;
    size_t n = ctx ? sizeof ctx->err.msg : sizeof g_create_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return status;
}

vc_status vc_ctx_err(vc_context *ctx, vc_status status, const vc_err *err)
{
    if (status == VC_OK) return VC_OK;
    if (ctx) {
        if (err && err->msg[0])
            memcpy(ctx->err.msg, err->msg, sizeof ctx->err.msg);
        else
            snprintf(ctx->err.msg, sizeof ctx->err.msg, "%s", vc_status_string(status));
    }
    return status;
}

void vc_ctx_clear(vc_context *ctx)
{
    if (ctx) ctx->err.msg[0] = '\0';
}

vc_memory vc_ctx_native(const vc_context *ctx)
{
    return ctx->backend == VC_BACKEND_CUDA ? VC_MEMORY_DEVICE : VC_MEMORY_HOST;
}

vc_engine_options *vc_context_options(vc_context *ctx)
{
    return ctx ? &ctx->opts : NULL;
}

const char *vc_context_last_error(const vc_context *ctx)
{
    return ctx ? ctx->err.msg : g_create_error;
}

const char *vc_context_warning(const vc_context *ctx)
{
    return ctx ? ctx->warning : "";
}

#ifdef VOXCONV_HAVE_CUDA
/* VC_OK when `device` can be used, else VC_ERR_NO_DEVICE and why in err. */
static vc_status cuda_device_check(int device, vc_err *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        vc_status s = vc_fail(err, VC_ERR_NO_DEVICE, "cudaGetDeviceCount failed: %s",
                              cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky error */
        return s;
    }
    if (device < 0 || device >= count)
        return vc_fail(err, VC_ERR_NO_DEVICE, "CUDA device %d requested, %d present", device,
                       count);
    return VC_OK;
}
#endif

vc_status vc_context_create(const vc_context_desc *desc, vc_context **out)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    if (!out) return vc_ctx_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_context_create: out is NULL");
    if (desc) {
        /* Every struct_size from the first published layout (up to `allocator`) on: the fields
         * the caller's struct has are read, the later ones keep their defaults. */
        if (desc->struct_size < offsetof(vc_context_desc, allocator) + sizeof(void *))
            return vc_ctx_fail(NULL, VC_ERR_INVALID_ARGUMENT,
                               "vc_context_create: desc->struct_size %u is too small "
                               "(use VC_CONTEXT_DESC_INIT)", (unsigned)desc->struct_size);
        memcpy(&d, desc, desc->struct_size < sizeof d ? desc->struct_size : sizeof d);
        d.struct_size = sizeof d;
    }
    if (d.backend != VC_BACKEND_AUTO && d.backend != VC_BACKEND_CPU &&
        d.backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(NULL, VC_ERR_INVALID_ARGUMENT, "vc_context_create: bad backend %d",
                           (int)d.backend);
    if (d.num_threads < 0)
        return vc_ctx_fail(NULL, VC_ERR_INVALID_ARGUMENT,
                           "vc_context_create: num_threads %d < 0", (int)d.num_threads);
    if (d.allocator && (!d.allocator->alloc || !d.allocator->free))
        return vc_ctx_fail(NULL, VC_ERR_INVALID_ARGUMENT,
                           "vc_context_create: allocator needs both alloc and free");

    vc_backend backend = d.backend;
#ifdef VOXCONV_HAVE_CUDA
    vc_err why = {{0}};
    if (backend == VC_BACKEND_CUDA && cuda_device_check(d.device, &why) != VC_OK)
        return vc_ctx_fail(NULL, VC_ERR_NO_DEVICE, "vc_context_create: %s", why.msg);
    if (backend == VC_BACKEND_AUTO)
        backend = cuda_device_check(d.device, &why) == VC_OK ? VC_BACKEND_CUDA : VC_BACKEND_CPU;
    if (backend == VC_BACKEND_CUDA) {
        cudaError_t e = cudaSetDevice(d.device);
        if (e != cudaSuccess)
            return vc_ctx_fail(NULL, VC_ERR_CUDA, "vc_context_create: cudaSetDevice(%d): %s",
                               (int)d.device, cudaGetErrorString(e));
    }
#else
    if (backend == VC_BACKEND_CUDA)
        return vc_ctx_fail(NULL, VC_ERR_UNSUPPORTED,
                           "vc_context_create: this build of voxconv has no CUDA backend "
                           "(configured with VOXCONV_CUDA=OFF or without nvcc)");
    backend = VC_BACKEND_CPU;
#endif

    vc_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return vc_ctx_fail(NULL, VC_ERR_OUT_OF_MEMORY, "vc_context_create: out of memory");
    ctx->backend = backend;
    ctx->device = d.device;
    ctx->stream = d.stream;
    ctx->num_threads = d.num_threads;
    ctx->opts = vc_engine_options_default();
    if (d.allocator) {
        ctx->allocator = *d.allocator;
        ctx->has_allocator = 1;
        ctx->opts.allocator = &ctx->allocator; /* every bulk array of the engine (core/alloc.h) */
    }
    ctx->opts.cache = vc_engine_cache_new();
    if (!ctx->opts.cache) {
        free(ctx);
        return vc_ctx_fail(NULL, VC_ERR_OUT_OF_MEMORY, "vc_context_create: out of memory");
    }
    ctx->next_id = 1;
    ctx->opts.tune = &ctx->tune;
    ctx->opts.choice = &ctx->choice;
    ctx->choice.config = -1;
    ctx->choice.groups = 1;
    if (d.tune_cache) vc_tune_cache_load(ctx, d.tune_cache);
    *out = ctx;
    return VC_OK;
}

vc_status vc_context_destroy(vc_context *ctx)
{
    if (!ctx) return VC_OK;
    if (ctx->live_handles > 0)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,
                           "vc_context_destroy: %lld coordinate sets, tensors or bounded maps "
                           "are still alive; destroy them first", (long long)ctx->live_handles);
    vc_engine_cache_free(ctx->opts.cache);
    vc_tune_table_clear(&ctx->tune);
    free(ctx);
    return VC_OK;
}

vc_status vc_context_backend(const vc_context *ctx, vc_backend *out)
{
    if (!ctx || !out) return VC_ERR_INVALID_ARGUMENT;
    *out = ctx->backend;
    return VC_OK;
}

vc_status vc_context_set_stream(vc_context *ctx, struct CUstream_st *stream)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    ctx->stream = stream;
    return VC_OK;
}

vc_status vc_context_synchronize(vc_context *ctx)
{
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
#ifdef VOXCONV_HAVE_CUDA
    if (ctx->backend == VC_BACKEND_CUDA) {
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
        if (e != cudaSuccess)
            return vc_ctx_fail(ctx, VC_ERR_CUDA, "vc_context_synchronize: %s",
                               cudaGetErrorString(e));
    }
#endif
    return VC_OK;
}
