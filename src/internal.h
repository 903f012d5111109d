/* src/internal.h - the handles behind include/voxconv.h and the helpers the API layer shares
 * (context errors, memory in either place, the kernel-map cache, the operations' prologue).
 * Only src/ includes this. */
#ifndef VC_SRC_INTERNAL_H
#define VC_SRC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "voxconv.h"
#include "core/elementwise.h"
#include "core/options.h"
#include "core/status.h"
#include "conv/tune.h"
#include "kmap/kmap.h"

struct vc_context {
    vc_backend backend;        /* CPU or CUDA, never AUTO                                     */
    int32_t device;
    struct CUstream_st *stream;
    int32_t num_threads;
    vc_allocator allocator;
    int has_allocator;
    vc_engine_options opts;    /* per-context engine choices (core/options.h)                  */
    vc_tune_table tune;        /* tuned choices (conv/tune.h): opts.tune points here            */
    vc_conv_choice choice;     /* what the last GPU convolution ran: opts.choice points here    */
    char warning[512];         /* vc_context_warning: why the tune cache was ignored, or ""    */
    vc_err err;
    int64_t live_handles;      /* coordinate sets and tensors not yet destroyed               */
    uint64_t next_id;
};

struct vc_coords {
    vc_context *ctx;
    int64_t refs;
    uint64_t id;               /* unique within the context: cache keys never reuse it         */
    int64_t count;
    int32_t shape[3];
    int32_t batch_size;
    vc_memory memory;
    int32_t *data;
    int owned;
    struct vc_kmap **maps;     /* the kernel-map cache of this set (strong references)        */
    int32_t n_maps, cap_maps;
};

/* Ownership of kernel maps: a map is owned by the cache of its input set (an INVERSE map by the
 * forward map it inverts). It holds a strong reference to its output set when that set is new
 * (STRIDED, DOWNSAMPLE, TRANSPOSED). A user reference (vc_kmap_build) also retains `root`, the
 * set whose cache owns the map (directly or through the forward map), so the map outlives it. */
struct vc_kmap {
    vc_context *ctx;
    int64_t user_refs;
    vc_coords *in;             /* weak                                                         */
    vc_coords *out;            /* strong when owns_out                                         */
    int owns_out;
    vc_coords *root;           /* weak; retained once per user reference                       */
    vc_map_desc desc;          /* inverse_of cleared; see fwd                                  */
    struct vc_kmap *fwd;       /* INVERSE: the forward map                                     */
    struct vc_kmap *inverse;   /* the cached inverse of this map, owned                        */
    vc_kmap_data data;         /* host arrays (CPU backend) or device arrays (CUDA backend)    */
    vc_memory memory;          /* where data's arrays live                                     */
};

struct vc_tensor {
    vc_context *ctx;
    vc_coords *coords;         /* strong                                                       */
    int64_t channels;
    vc_dtype dtype;
    vc_memory memory;
    void *data;
    int owned;
};

/* The context's engine options, writable (tests and benchmarks pick kernels through them).
 * Set them between calls, never while a call on the context runs. */
vc_engine_options *vc_context_options(vc_context *ctx);

/* ---- the tune cache (tune_op.c) ------------------------------------------------------------ */

/* Loads the tune cache at `path` into ctx->tune at creation; a cache that cannot be read or is
 * corrupt, stale or foreign leaves the table empty and says why in ctx->warning. Never fails. */
void vc_tune_cache_load(vc_context *ctx, const char *path);

/* Records a message on ctx (if not NULL) and returns status. */
vc_status vc_ctx_fail(vc_context *ctx, vc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Copies an internal vc_err into the context and returns status. */
vc_status vc_ctx_err(vc_context *ctx, vc_status status, const vc_err *err);
/* Clears the context's message (start of every API call). */
void vc_ctx_clear(vc_context *ctx);

/* The memory a context computes in: host for CPU, device for CUDA. */
vc_memory vc_ctx_native(const vc_context *ctx);

/* Allocation in either place through the context's allocator. NULL on failure (no message). */
void *vc_mem_alloc(vc_context *ctx, size_t bytes, vc_memory where);
void vc_mem_free(vc_context *ctx, void *p, vc_memory where);
/* Copies bytes between any two places; synchronous. */
vc_status vc_mem_copy(vc_context *ctx, void *dst, vc_memory dst_where, const void *src,
                      vc_memory src_where, size_t bytes);
/* A device copy of a caller array that may live on the host (NULL stays NULL). *tmp receives
 * what to free (NULL when `p` was already on the device). */
vc_status vc_mem_to_device(vc_context *ctx, const void *p, vc_memory where, size_t bytes,
                           const void **dev, void **tmp);

/* A new coordinate set holding a copy of rows that voxconv produced itself (sorted, distinct,
 * in range): no validation pass. `src` is in `where`; the set is in the context's memory. */
vc_status vc_coords_trusted(vc_context *ctx, const int32_t *src, vc_memory where, int64_t count,
                            const int32_t shape[3], int32_t batch_size, vc_coords **out);

/* A set over rows that voxconv made and keeps (in the context's memory; not copied, not
 * owned, not validated): the live rows of a bounded frame's fixed buffer (src/net/graph.c). */
vc_status vc_coords_view(vc_context *ctx, int32_t *data, int64_t count, const int32_t shape[3],
                         int32_t batch_size, vc_coords **out);

/* A new tensor on `coords` whose features (in the context's memory) are not initialised: for
 * operations that write every element. Checks as vc_tensor_create does, messages naming fn. */
vc_status vc_tensor_alloc(vc_context *ctx, const char *fn, vc_coords *coords, int64_t channels,
                          vc_dtype dtype, vc_tensor **out);
/* A tensor argument of an operation: not NULL, of this context. */
vc_status vc_tensor_check(vc_context *ctx, const char *fn, const char *what, const vc_tensor *t);

/* ---- the kernel-map cache (kmap_cache.c) ---------------------------------------------------
 * The coordinate set owns its cache (coords.c calls these two); the operations reach maps
 * through vc_kmap_build and vc_kmap_resolve. */

/* Frees every map cached on c, with the cache array: c is being destroyed. */
void vc_kmap_cache_release(vc_coords *c);
/* Frees the cached maps that no user reference reaches (directly or through an inverse). */
void vc_kmap_cache_trim(vc_coords *c);
/* The map of a conv or pool: the caller's (`given`, checked against `in`), or one built
 * (cached) from `d`. On success *held is a user reference to release with vc_kmap_destroy (NULL
 * when the caller's map). */
vc_status vc_kmap_resolve(vc_context *ctx, const char *fn, const vc_tensor *in,
                          const vc_kmap *given, const vc_map_desc *d, const vc_kmap **map,
                          vc_kmap **held);

/* ---- operation prologue ---------------------------------------------------------------------- */

/* Copies a caller's descriptor over the defaults; refuses a struct_size it does not know. */
#define VC_TAKE_DESC(ctx, fn, dst, src, init_type)                                             \
    do {                                                                                       \
        init_type vc_init_ = dst;                                                              \
        (void)vc_init_;                                                                        \
        if (!(src)) return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: desc is NULL", fn);  \
        if ((src)->struct_size != sizeof(init_type))                                           \
            return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT,                                   \
                               "%s: desc->struct_size is %u, expected %zu (initialise the "    \
                               "descriptor with its _INIT macro)",                             \
                               fn, (unsigned)(src)->struct_size, sizeof(init_type));           \
        dst = *(src);                                                                          \
    } while (0)

#endif
