/*
 * voxconv.h - the whole public C API of voxconv, a sparse 3D convolution engine.
 *
 * C99, no CUDA headers: a CUDA stream is passed as `struct CUstream_st *` (the same type as
 * cudaStream_t), so callers compile this header with any C or C++ compiler.
 *
 * Conventions (see docs/api.md):
 *  - Every function returns vc_status (except vc_version, vc_status_string and
 *    vc_context_last_error, which return strings). Status values are never renumbered.
 *  - The library never aborts, exits or prints. On failure it returns a status, records a
 *    detailed message on the context (vc_context_last_error) and leaves every caller-owned
 *    buffer and every output handle pointer as it was.
 *  - Handles are opaque, reference counted where stated, and created/destroyed in pairs;
 *    every destroy accepts NULL.
 *  - Coordinates are int32 rows (batch, z, y, x); spatial shapes are (z, y, x); kernel sizes,
 *    strides, paddings and dilations are per axis in (z, y, x) order; voxelization parameters are
 *    in (x, y, z) order, as in spconv.
 *  - Features are row-major [N, C] in fp32, fp16 or bf16; arithmetic accumulates in fp32.
 *  - Weights are [C_out, kz, ky, kx, C_in] (spconv 2.x); kernel offset k of a kz*ky*kx kernel is
 *    ((dz*ky)+dy)*kx+dx.
 *  - Counts and offsets that can pass 2^31 are int64_t.
 *  - Thread safety: a context and every handle created on it are used by one thread at a time.
 *    Distinct contexts may be used concurrently from different threads.
 *  - Synchronisation: every call on the CPU backend completes before it returns. On the CUDA
 *    backend, calls are ordered on the context's stream; a call that must read a count back to
 *    the host says "Synchronises" in its comment.
 */
#ifndef VOXCONV_H
#define VOXCONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA stream type (cudaStream_t is `struct CUstream_st *`), declared without CUDA headers. */
struct CUstream_st;

#if defined(_WIN32) && !defined(VOXCONV_STATIC)
#  ifdef VOXCONV_BUILDING
#    define VC_API __declspec(dllexport)
#  else
#    define VC_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define VC_API __attribute__((visibility("default")))
#else
#  define VC_API
#endif

/* ------------------------------------------------------------------------------------------ */
/* Version                                                                                     */
/* ------------------------------------------------------------------------------------------ */

#define VC_VERSION_MAJOR 0
#define VC_VERSION_MINOR 1
#define VC_VERSION_PATCH 0
#define VC_VERSION_NUMBER (VC_VERSION_MAJOR * 10000 + VC_VERSION_MINOR * 100 + VC_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually linked; static storage. */
VC_API const char *vc_version(void);
/* VC_VERSION_NUMBER of the library actually linked. */
VC_API int vc_version_number(void);

/* ------------------------------------------------------------------------------------------ */
/* Status                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef enum vc_status {
    VC_OK = 0,
    VC_ERR_INVALID_ARGUMENT = 1, /* NULL where a value is needed, bad enum, bad parameter     */
    VC_ERR_OUT_OF_MEMORY = 2,    /* host or device allocation failed                          */
    VC_ERR_OUT_OF_RANGE = 3,     /* coordinate outside the spatial shape, key does not pack   */
    VC_ERR_SHAPE_MISMATCH = 4,   /* channels, counts or coordinate sets do not agree          */
    VC_ERR_UNSUPPORTED = 5,      /* valid request this build or backend cannot serve          */
    VC_ERR_IO = 6,               /* a file could not be opened, read or written               */
    VC_ERR_FORMAT = 7,           /* a file is truncated, corrupt or not of the expected kind  */
    VC_ERR_CUDA = 8,             /* a CUDA runtime call failed                                */
    VC_ERR_NO_DEVICE = 9,        /* the CUDA backend was asked for and no device is usable    */
    VC_ERR_CAPACITY = 10,        /* a hash table or caller-given bound is too small           */
    VC_ERR_LIMIT = 11,           /* a size is absurd (over the documented limits)             */
    VC_ERR_DUPLICATE = 12,       /* a coordinate set holds the same (b,z,y,x) twice           */
    VC_ERR_INTERNAL = 13         /* a bug in voxconv; please report it                        */
} vc_status;

/* A short constant name for a status ("VC_ERR_FORMAT: malformed file"); never NULL. */
VC_API const char *vc_status_string(vc_status status);

/* ------------------------------------------------------------------------------------------ */
/* Basic enums                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef enum vc_dtype {
    VC_DTYPE_FP32 = 0,
    VC_DTYPE_FP16 = 1,
    VC_DTYPE_BF16 = 2,
    VC_DTYPE_INT32 = 3 /* coordinates and index arrays only */
} vc_dtype;

/* Bytes per element of a dtype, 0 for an invalid value. */
VC_API size_t vc_dtype_size(vc_dtype dtype);

typedef enum vc_memory {
    VC_MEMORY_HOST = 0,  /* ordinary (or pinned) host memory     */
    VC_MEMORY_DEVICE = 1 /* device memory of the context's GPU   */
} vc_memory;

typedef enum vc_backend {
    VC_BACKEND_AUTO = 0, /* CUDA when the build has the GPU operations and a device is usable,
                            else CPU                                                          */
    VC_BACKEND_CPU = 1,
    VC_BACKEND_CUDA = 2
} vc_backend;

/* ------------------------------------------------------------------------------------------ */
/* Context                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct vc_context vc_context;

/* Optional caller allocator. `alloc` returns NULL on failure; `free` accepts NULL.
 * Device allocations are stream ordered on `stream` where the allocator supports it. */
typedef struct vc_allocator {
    void *(*alloc)(void *user, size_t bytes, vc_memory where, struct CUstream_st *stream);
    void (*free)(void *user, void *ptr, vc_memory where, struct CUstream_st *stream);
    void *user;
} vc_allocator;

typedef struct vc_context_desc {
    uint32_t struct_size;           /* sizeof(vc_context_desc): lets the struct grow          */
    vc_backend backend;             /* default AUTO                                            */
    int32_t device;                 /* CUDA device ordinal, default 0                          */
    struct CUstream_st *stream;     /* CUDA stream, NULL = the legacy default stream           */
    int32_t num_threads;            /* CPU threads, 0 = OpenMP's default                       */
    const vc_allocator *allocator;  /* NULL = the context's own allocator; copied at create    */
    const char *tune_cache;         /* a tuning cache file (vc_tune_cache_save) for the
                                       convolution planner to consult, or NULL. One that cannot
                                       be read, or is corrupt, stale (another library version) or
                                       foreign (another GPU, CUDA or driver) is ignored, and
                                       vc_context_warning says why; creation still succeeds    */
} vc_context_desc;

#define VC_CONTEXT_DESC_INIT {sizeof(vc_context_desc), VC_BACKEND_AUTO, 0, NULL, 0, NULL, NULL}

/* Creates a context. `desc` may be NULL (all defaults); a desc whose struct_size is that of an
 * earlier, shorter vc_context_desc (from `num_threads` on) is read up to its size, the later
 * fields taking their defaults. On failure *out is left unchanged. */
VC_API vc_status vc_context_create(const vc_context_desc *desc, vc_context **out);
/* Destroys a context. Handles created on it must be destroyed first: their count is checked
 * and VC_ERR_INVALID_ARGUMENT is returned (and nothing freed) while any remain. NULL is OK. */
VC_API vc_status vc_context_destroy(vc_context *ctx);
/* The backend the context resolved to (never AUTO). */
VC_API vc_status vc_context_backend(const vc_context *ctx, vc_backend *out);
/* Detailed message of the last failure on this context, "" if none; valid until the next call
 * on the context. NULL ctx gives the message of the last failed vc_context_create on this
 * thread, valid until the next failed vc_context_create on this thread. */
VC_API const char *vc_context_last_error(const vc_context *ctx);
/* The context's warning: why the tune cache named at creation was ignored, as one line, or ""
 * when none. Kept for the context's life (other calls do not clear it); static to the context.
 * The library never prints it: a caller that wants it shown prints it. */
VC_API const char *vc_context_warning(const vc_context *ctx);
/* Sets the stream later calls are ordered on (CUDA backend; ignored by CPU). */
VC_API vc_status vc_context_set_stream(vc_context *ctx, struct CUstream_st *stream);
/* Waits for all work queued on the context's stream. Synchronises. */
VC_API vc_status vc_context_synchronize(vc_context *ctx);

/* ------------------------------------------------------------------------------------------ */
/* Coordinate sets                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* A coordinate set: N rows of int32 (batch, z, y, x), a spatial shape (z, y, x) and a batch size.
 * Every row satisfies 0 <= batch < batch_size and 0 <= z,y,x < shape. Rows are distinct for
 * every set voxconv produces; a set built from caller data may hold duplicates, which every
 * operation that hashes the set detects and reports as VC_ERR_DUPLICATE.
 * Reference counted: tensors and kernel maps that live on a set retain it. Kernel maps built
 * from a set are cached on it and die with it. */
typedef struct vc_coords vc_coords;

typedef struct vc_coords_info {
    int64_t count;
    int32_t spatial_shape[3]; /* z, y, x */
    int32_t batch_size;
    vc_memory memory;
    const int32_t *data;      /* [count, 4]; borrowed, valid while the set lives           */
} vc_coords_info;

/* Copies `count` rows from `coords` (host or device, per `where`) into a new set owned by the
 * context, in the context's native memory (device for CUDA, host for CPU). Validates every row
 * against the spatial shape and batch size (VC_ERR_OUT_OF_RANGE names the first bad row).
 * count may be 0 (coords may then be NULL). On the CUDA backend with host input this copies
 * synchronously. */
VC_API vc_status vc_coords_create(vc_context *ctx, const int32_t *coords, int64_t count,
                                  vc_memory where, const int32_t spatial_shape[3],
                                  int32_t batch_size, vc_coords **out);
/* Wraps a caller buffer without a copy. The caller keeps it alive and unchanged while the set
 * (and anything retaining it) lives. `where` must be the context's native memory. Validated as
 * in vc_coords_create (on the device that validation synchronises once). */
VC_API vc_status vc_coords_wrap(vc_context *ctx, const int32_t *coords, int64_t count,
                                vc_memory where, const int32_t spatial_shape[3],
                                int32_t batch_size, vc_coords **out);
/* Adds a reference. */
VC_API vc_status vc_coords_retain(vc_coords *coords);
/* Drops a reference; the last one frees the set and its cached maps. NULL is OK. */
VC_API vc_status vc_coords_destroy(vc_coords *coords);
VC_API vc_status vc_coords_get_info(const vc_coords *coords, vc_coords_info *out);
/* Drops the kernel maps cached on this set that no user reference holds (they would be freed
 * with the set anyway). */
VC_API vc_status vc_coords_clear_cache(vc_coords *coords);
/* Copies the rows to `dst` ([count, 4] int32, host or device per `where`). */
VC_API vc_status vc_coords_copy_out(vc_context *ctx, const vc_coords *coords, int32_t *dst,
                                    vc_memory where);

/* ------------------------------------------------------------------------------------------ */
/* Sparse tensors                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* A sparse tensor: a coordinate set (retained) plus a feature buffer [count, channels]. */
typedef struct vc_tensor vc_tensor;

typedef struct vc_tensor_info {
    int64_t count;            /* rows = the coordinate set's count                            */
    int64_t channels;
    vc_dtype dtype;
    vc_memory memory;
    vc_coords *coords;        /* borrowed                                                      */
    void *data;               /* [count, channels]; borrowed                                   */
} vc_tensor_info;

/* New tensor on `coords` with owned features in the context's native memory. If `features`
 * is not NULL its [count, channels] elements of `dtype` are copied in from `where`; otherwise
 * the features are zero. */
VC_API vc_status vc_tensor_create(vc_context *ctx, vc_coords *coords, int64_t channels,
                                  vc_dtype dtype, const void *features, vc_memory where,
                                  vc_tensor **out);
/* Wraps caller features without a copy (the caller keeps them alive); `where` must be the
 * context's native memory. Results written into a wrapped tensor land in the caller's buffer. */
VC_API vc_status vc_tensor_wrap(vc_context *ctx, vc_coords *coords, int64_t channels,
                                vc_dtype dtype, void *features, vc_memory where,
                                vc_tensor **out);
VC_API vc_status vc_tensor_destroy(vc_tensor *tensor);
VC_API vc_status vc_tensor_get_info(const vc_tensor *tensor, vc_tensor_info *out);
/* Copies features out to `dst` (host or device) converting to `dtype`. */
VC_API vc_status vc_tensor_copy_out(vc_context *ctx, const vc_tensor *tensor, void *dst,
                                    vc_dtype dtype, vc_memory where);
/* Copies features in from `src` (host or device) converting from `dtype`. */
VC_API vc_status vc_tensor_copy_in(vc_context *ctx, vc_tensor *tensor, const void *src,
                                   vc_dtype dtype, vc_memory where);
/* New tensor with the same coordinates and features converted to `dtype`. */
VC_API vc_status vc_tensor_cast(vc_context *ctx, const vc_tensor *tensor, vc_dtype dtype,
                                vc_tensor **out);
/* Sets every feature element to `value` (NaN is allowed: the tests poison outputs with it). */
VC_API vc_status vc_tensor_fill(vc_context *ctx, vc_tensor *tensor, float value);

/* What to do with NaN and infinite features. The layers propagate them as IEEE arithmetic
 * does; a caller that wants to know checks its inputs once with vc_tensor_check_finite. */
typedef enum vc_nonfinite_policy {
    VC_NONFINITE_REFUSE = 0,  /* any is an error (VC_ERR_INVALID_ARGUMENT naming the first)    */
    VC_NONFINITE_KEEP = 1,    /* counted, left as they are                                     */
    VC_NONFINITE_ZERO = 2     /* counted, replaced by +0                                       */
} vc_nonfinite_policy;

/* Counts the tensor's NaN and infinite features into *count (may be NULL) and applies
 * `policy`. Synchronises on the CUDA backend (the count is read back). */
VC_API vc_status vc_tensor_check_finite(vc_context *ctx, vc_tensor *tensor,
                                        vc_nonfinite_policy policy, int64_t *count);

/* ------------------------------------------------------------------------------------------ */
/* Tensor operations                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* The activation applied to a result in fp32 (convolutions, vc_tensor_add, vc_tensor_affine):
 * RELU max(v, 0), LEAKY_RELU v for v >= 0 and v * slope below. */
typedef enum vc_activation {
    VC_ACT_NONE = 0,
    VC_ACT_RELU = 1,
    VC_ACT_LEAKY_RELU = 2
} vc_activation;

/* The operations below take tensors of one context and give the same bits on the CPU and the
 * CUDA backend: their arithmetic is fp32 (a product and a sum are rounded apart, never fused),
 * stored in the tensor's dtype rounding to nearest even; their activations are v < 0 ? 0 : v
 * and v < 0 ? v * slope : v (a NaN stays NaN). On the CUDA backend they only queue
 * work on the context's stream (no synchronisation) except where a comment says otherwise. */

/* *out = a new tensor whose channels are the parts' channels side by side, in order: row i is
 * parts[0] row i, then parts[1] row i, ... `count` >= 1 parts, all on the same coordinate set
 * (the same vc_coords, pointer equal: VC_ERR_SHAPE_MISMATCH otherwise) and of one dtype (the
 * result's); total channels at most 2^20 (VC_ERR_LIMIT). */
VC_API vc_status vc_tensor_concat(vc_context *ctx, const vc_tensor *const *parts, int32_t count,
                                  vc_tensor **out);
/* *out = act(a + b) elementwise, a new tensor on their coordinate set; a and b must share the
 * coordinate set (pointer equal), the channel count and the dtype (VC_ERR_SHAPE_MISMATCH
 * otherwise). `slope` is LeakyReLU's (ignored by the other activations). */
VC_API vc_status vc_tensor_add(vc_context *ctx, const vc_tensor *a, const vc_tensor *b,
                               vc_activation act, float slope, vc_tensor **out);
/* In place, per channel c of every row: x = act(x * scale[c] + shift[c]) (the product rounded
 * to fp32, then the sum). scale and shift are fp32 [channels] in `where` memory; either may be
 * NULL, meaning no multiply (scale 1) or no add (shift 0): with both NULL it is a plain
 * activation, and -0 stays -0. On the CUDA backend, scale or shift in host memory is copied to
 * the device for the call, which synchronises; device arrays make it queue work only. */
VC_API vc_status vc_tensor_affine(vc_context *ctx, vc_tensor *t, const float *scale,
                                  const float *shift, vc_memory where, vc_activation act,
                                  float slope);
/* Sparse to dense: writes the dense [B, C, D, H, W] array of `dtype` (fp32, fp16 or bf16) at
 * dst (host or device, per `where`), with B = the coordinate set's batch size, C = the
 * tensor's channels, (D, H, W) = its spatial shape (z, y, x): element
 * [b, c, z, y, x] = t[row (b, z, y, x), c] converted to `dtype`, and 0 where no row is. The
 * same bytes are OpenPCDet's HeightCompression input viewed as [B, C*D, H, W].
 * `capacity`: dst's size in elements; VC_ERR_CAPACITY when it is below B*C*D*H*W (dst is then
 * untouched), VC_ERR_LIMIT when that product overflows int64. dst may be NULL only when the
 * product is 0. The set's rows must be distinct (every set voxconv builds is; duplicates are
 * not checked: the element then holds one of their rows). Deterministic. On the CUDA backend
 * a device dst only queues work (a fill and a scatter); a host dst is staged in device memory
 * and copied back, which synchronises. */
VC_API vc_status vc_tensor_to_dense(vc_context *ctx, const vc_tensor *t, void *dst,
                                    int64_t capacity, vc_dtype dtype, vc_memory where);

/* ------------------------------------------------------------------------------------------ */
/* Voxelization                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef enum vc_reduce {
    VC_REDUCE_MEAN = 0,  /* features = mean of the voxel's points' columns                    */
    VC_REDUCE_FIRST = 1, /* features = the columns of the voxel's first point (input order)  */
    VC_REDUCE_COUNT = 2  /* one channel: the number of points in the voxel                   */
} vc_reduce;

typedef enum vc_nonfinite {
    VC_NONFINITE_SKIP = 0,  /* points with a NaN or infinite x, y or z are dropped (counted)  */
    VC_NONFINITE_ERROR = 1  /* ... are an error (VC_ERR_INVALID_ARGUMENT)                     */
} vc_nonfinite;

/* Points: [count, dim] float32 rows, x, y, z first, then dim-3 extra columns (intensity...).
 * Features of a voxel are reduced over all `dim` columns (x,y,z included, as spconv does). */
typedef struct vc_points {
    const float *data;
    int64_t count;
    int32_t dim;              /* >= 3                                                          */
    const int32_t *batch;     /* per-point batch index, or NULL for batch 0 everywhere         */
    vc_memory memory;
} vc_points;

typedef struct vc_voxelize_desc {
    uint32_t struct_size;
    float voxel_size[3];      /* x, y, z (metres per voxel), > 0                               */
    float range[6];           /* xmin, ymin, zmin, xmax, ymax, zmax                            */
    vc_reduce reduce;
    int64_t max_voxels;       /* 0 = no cap; else keep the voxels whose first point comes
                                 earliest in input order (deterministic)                       */
    int32_t batch_size;       /* 0 = 1 + the largest batch index seen                          */
    vc_nonfinite nonfinite;
    vc_dtype dtype;           /* feature dtype of the result, default fp32                     */
} vc_voxelize_desc;

#define VC_VOXELIZE_DESC_INIT                                                                  \
    {sizeof(vc_voxelize_desc), {0.1f, 0.1f, 0.1f}, {0, 0, 0, 0, 0, 0}, VC_REDUCE_MEAN, 0, 0,     \
     VC_NONFINITE_SKIP, VC_DTYPE_FP32}

typedef struct vc_voxelize_stats {
    int64_t points_in;        /* points given                                                  */
    int64_t points_used;      /* points that landed in a kept voxel                            */
    int64_t points_out_of_range;
    int64_t points_nonfinite;
    int64_t voxels_total;     /* distinct voxels before the cap                                */
    int64_t voxels_kept;      /* rows of the result                                            */
} vc_voxelize_stats;

/* Voxelizes points. The result's coordinates are sorted by (batch, z, y, x); its spatial shape
 * is round((max - min) / size) per axis, given as (z, y, x). A point p lands in voxel
 * floor((p - min) / size) computed in float32 and is kept when 0 <= index < shape.
 * Non-finite points are handled per desc->nonfinite. `stats` may be NULL. Synchronises on the CUDA backend (the voxel count is read back). */
VC_API vc_status vc_voxelize(vc_context *ctx, const vc_voxelize_desc *desc,
                             const vc_points *points, vc_tensor **out,
                             vc_voxelize_stats *stats);

/* ------------------------------------------------------------------------------------------ */
/* Kernel maps                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef enum vc_map_type {
    /* output = input coordinates; output p reads input p + (k - kernel/2) * dilation; odd
       kernels only.                                                                           */
    VC_MAP_SUBM = 0,
    /* spconv semantics: output p reads input p*stride - padding + k*dilation; outputs are every
       p in [0, out_shape) reached by some input; out_shape per axis is
       (in + 2*padding - dilation*(kernel-1) - 1) / stride + 1.                                  */
    VC_MAP_STRIDED = 1,
    /* Minkowski semantics: outputs are the unique floor(q / stride) of the inputs q; output p
       reads input p*stride + (k - c)*dilation with c = kernel/2 for odd kernels, 0 for even
       ones (k2s2: the 8 children). out_shape = ceil(in / stride). padding must be 0.          */
    VC_MAP_DOWNSAMPLE = 2,
    /* The map of an earlier STRIDED or DOWNSAMPLE map with input and output swapped: the
       output coordinates are that map's input coordinates. Kernel parameters come from it.    */
    VC_MAP_INVERSE = 3,
    /* A true transposed conv: input q writes output q*stride - padding + k*dilation; outputs
       are every such site inside out_shape = (in-1)*stride - 2*padding + dilation*(kernel-1)+1. */
    VC_MAP_TRANSPOSED = 4
} vc_map_type;

typedef struct vc_kmap vc_kmap;

typedef struct vc_map_desc {
    uint32_t struct_size;
    vc_map_type type;
    int32_t kernel[3];        /* z, y, x; 1..7 each                                            */
    int32_t stride[3];        /* z, y, x; >= 1                                                 */
    int32_t padding[3];       /* z, y, x; >= 0                                                 */
    int32_t dilation[3];      /* z, y, x; >= 1                                                 */
    const vc_kmap *inverse_of; /* VC_MAP_INVERSE: the forward map (its output must be the
                                  input coordinate set); NULL otherwise                        */
} vc_map_desc;

#define VC_MAP_DESC_INIT                                                                       \
    {sizeof(vc_map_desc), VC_MAP_SUBM, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, NULL}

typedef struct vc_kmap_info {
    vc_map_type type;
    int32_t kernel[3], stride[3], padding[3], dilation[3];
    int32_t volume;           /* K = kz*ky*kx                                                  */
    int64_t in_count;
    int64_t out_count;
    int64_t pair_count;       /* total (input, output, offset) triples                         */
    int32_t mask_words;       /* ceil(K / 32)                                                  */
    vc_memory memory;
    vc_coords *in_coords;     /* borrowed                                                      */
    vc_coords *out_coords;    /* borrowed                                                      */
} vc_kmap_info;

/* Builds (or finds in the cache of `in`) the kernel map of `desc` over `in`, with all three
 * representations. Returns a new reference: release it with vc_kmap_destroy. The same input set
 * and parameters give the same handle; the map lives at least as long as `in` and every
 * reference. Output coordinates of STRIDED, DOWNSAMPLE and TRANSPOSED maps are sorted by
 * (batch, z, y, x). Fails with VC_ERR_DUPLICATE if `in` holds a coordinate twice.
 * Synchronises on the CUDA backend (output and pair counts are read back); the map's device
 * arrays are complete in the context stream's order (the build's last kernels may still run). */
VC_API vc_status vc_kmap_build(vc_context *ctx, vc_coords *in, const vc_map_desc *desc,
                               vc_kmap **out);
VC_API vc_status vc_kmap_destroy(vc_kmap *map);
VC_API vc_status vc_kmap_get_info(const vc_kmap *map, vc_kmap_info *out);
/* The output-stationary table: int32 [out_count, K], input row or -1. Borrowed. */
VC_API vc_status vc_kmap_out_in(const vc_kmap *map, const int32_t **out_in);
/* Per-offset pair lists: pairs of offset k are rows offsets[k] .. offsets[k+1]-1 of `in_rows`
 * and `out_rows` (int32), sorted by output row; offsets is int64 [K+1]. Borrowed. */
VC_API vc_status vc_kmap_pairs(const vc_kmap *map, const int32_t **in_rows,
                               const int32_t **out_rows, const int64_t **offsets);
/* Per-output neighbour masks: uint32 [out_count, mask_words]; bit (k % 32) of word k / 32 is set
 * when offset k has an input. `perm` (int32 [out_count]) lists output rows sorted by their mask's
 * sort key, largest first, ties by row ascending: the mask's bits reordered so that offsets
 * farther from the kernel's centre are more significant (offset k = (iz * ky + iy) * kx + ix lies
 * |2 iz - kz + 1| + |2 iy - ky + 1| + |2 ix - kx + 1| half-offsets out; the offsets ranked by that,
 * then by k, both descending, take the key's bits from the top; docs/api.md). Borrowed. */
VC_API vc_status vc_kmap_masks(const vc_kmap *map, const uint32_t **masks, const int32_t **perm);

/* Bounded kernel maps (CUDA backend): a map whose device arrays are sized once, by caller-given
 * bounds, and rebuilt in place from device coordinates. A build only queues kernels on the
 * context's stream - no allocation, no host synchronisation, no read-back - so it can be captured
 * in a CUDA graph and replayed on whatever coordinates the input buffer then holds. Its counts
 * stay on the device until vc_kmap_bounded_check, the variant's one synchronisation point.
 * The arrays are the three representations of vc_kmap_build, bit-identical to it for the same
 * input (output coordinates of new-output types sorted by (batch, z, y, x)). SUBM, STRIDED,
 * DOWNSAMPLE and TRANSPOSED; a CPU context gets VC_ERR_UNSUPPORTED. */
typedef struct vc_kmap_bounded vc_kmap_bounded;

typedef struct vc_kmap_bounded_desc {
    uint32_t struct_size;
    vc_map_desc map;          /* type and kernel parameters (not INVERSE)                      */
    int32_t shape[3];         /* input spatial shape z, y, x                                   */
    int32_t batch_size;
    int64_t max_in;           /* input rows per build, at most                                 */
    int64_t max_out;          /* output rows, at most (SUBM: >= max_in)                        */
    int64_t max_pairs;        /* (input, output, offset) triples, at most                      */
} vc_kmap_bounded_desc;

#define VC_KMAP_BOUNDED_DESC_INIT                                                              \
    {sizeof(vc_kmap_bounded_desc), VC_MAP_DESC_INIT, {0, 0, 0}, 1, 0, 0, 0}

/* Device arrays of a bounded map; fixed for its life, valid for the counts of the last build. */
typedef struct vc_kmap_bounded_arrays {
    int32_t volume;           /* K                                                             */
    int32_t mask_words;
    int32_t out_shape[3];     /* output spatial shape (SUBM: the input's)                      */
    int32_t out_batch_size;
    const int32_t *out_coords; /* [max_out, 4]; NULL for SUBM (outputs = inputs)               */
    const int32_t *out_in;    /* [max_out, K], as vc_kmap_out_in                               */
    const int64_t *offsets;   /* [K + 1]; with in_rows / out_rows [max_pairs], as vc_kmap_pairs */
    const int32_t *in_rows;
    const int32_t *out_rows;
    const uint32_t *masks;    /* [max_out, mask_words]; with perm [max_out], as vc_kmap_masks   */
    const int32_t *perm;
    /* int64 [8] on the device: word 3 the output count, word 4 the pair count, word 5 flags
       (0 for a valid map). Device code may read the counts here instead of calling
       vc_kmap_bounded_check, at its own risk: nonzero flags mean the map must not be used.   */
    const int64_t *status;
    /* int64 on the device: the output row count of the last build, clamped to the bound (SUBM:
       the input count): the `count` of the next level's vc_kmap_bounded_build_dev.          */
    const int64_t *out_count;
} vc_kmap_bounded_arrays;

/* Allocates a bounded map's arrays (synchronous; the only allocation it ever makes). */
VC_API vc_status vc_kmap_bounded_create(vc_context *ctx, const vc_kmap_bounded_desc *desc,
                                        vc_kmap_bounded **out);
/* Queues a build over `count` rows of device coordinates [count, 4] (b, z, y, x), count <=
 * max_in, on the context's stream. The rows are read when the work runs. Argument errors are
 * returned at once; what the data decides (bounds, duplicates, rows out of range) is reported
 * by vc_kmap_bounded_check. Allowed under CUDA stream capture. The build's kernels let
 * dependents launch early (griddepcontrol.launch_dependents): a kernel the caller launches
 * after it with programmatic stream serialization must, as CUDA requires of any such kernel,
 * call cudaGridDependencySynchronize before it reads the map; plain launches are unaffected. */
VC_API vc_status vc_kmap_bounded_build(vc_kmap_bounded *map, const int32_t *coords,
                                       int64_t count);
/* The same over a DEVICE count: `count` points to an int64 in device memory, read when the
 * build runs, so a captured graph rebuilds for whatever count (and rows) the buffers then hold;
 * coords holds max_in rows, of which rows from *count on are ignored. A count above max_in is
 * reported by vc_kmap_bounded_check as VC_ERR_CAPACITY (never read past max_in). After either
 * build, rows past the output count (up to max_out; SUBM: max_in) have out_in -1 and masks 0,
 * and perm lists the live rows first, then those rows in order. */
VC_API vc_status vc_kmap_bounded_build_dev(vc_kmap_bounded *map, const int32_t *coords,
                                           const int64_t *count);
/* Waits for the context's stream and reads the last build's status back: VC_OK with the counts
 * (either pointer may be NULL), or what vc_kmap_build would report - VC_ERR_DUPLICATE,
 * VC_ERR_OUT_OF_RANGE - or VC_ERR_CAPACITY when a bound was too small (the message names the
 * count needed). Synchronises. */
VC_API vc_status vc_kmap_bounded_check(vc_kmap_bounded *map, int64_t *out_count,
                                       int64_t *pair_count);
VC_API vc_status vc_kmap_bounded_arrays_get(const vc_kmap_bounded *map,
                                            vc_kmap_bounded_arrays *out);
/* Waits for the device, frees the arrays. NULL is fine. */
VC_API vc_status vc_kmap_bounded_destroy(vc_kmap_bounded *map);

/* ------------------------------------------------------------------------------------------ */
/* Convolution                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* CUDA backend (the CPU backend runs one algorithm whatever this says):
 * IMPLICIT_GEMM: output-stationary, the gathers in the GEMM's main loop, fused epilogue; no
 *   synchronisation. The planner (AUTO) picks it for every layer measured (docs/benchmarks.md).
 * GATHER_GEMM_SCATTER: one GEMM per kernel offset into an fp32 accumulator; reads the pair
 *   counts back (one stream synchronisation per call).
 * GATHER_GEMM_SCATTER_GROUPED: one GEMM over the pairs of all offsets into fp32 partial products
 *   (pairs x C_out x 4 bytes of scratch), one reduction per output in offset order; no
 *   synchronisation. All three sum an output's offsets in the same order (deterministic). */
typedef enum vc_algo {
    VC_ALGO_AUTO = 0,
    VC_ALGO_GATHER_GEMM_SCATTER = 1,
    VC_ALGO_IMPLICIT_GEMM = 2,
    VC_ALGO_GATHER_GEMM_SCATTER_GROUPED = 3
} vc_algo;

typedef struct vc_conv_desc {
    uint32_t struct_size;
    vc_map_desc map;          /* type and kernel parameters (map.type INVERSE: map.inverse_of) */
    const vc_kmap *kmap;      /* optional prebuilt map (overrides `map`); must have the input's
                                 coordinate set as its input                                   */
    int64_t in_channels;      /* C_in the weights were made for; must equal the input tensor's
                                 channels (VC_ERR_SHAPE_MISMATCH); 0 = take the input's        */
    int64_t out_channels;     /* C_out >= 1                                                    */
    const void *weights;      /* [C_out, kz, ky, kx, C_in] of weight_dtype                     */
    vc_dtype weight_dtype;    /* fp32, fp16 or bf16                                            */
    vc_memory weight_memory;
    const float *bias;        /* [C_out] fp32 or NULL, in weight_memory                        */
    vc_activation activation; /* applied after bias and residual                               */
    float leaky_slope;        /* LeakyReLU slope, default 0.01                                 */
    const vc_tensor *residual; /* added before the activation; same coords and C_out; or NULL  */
    vc_dtype out_dtype;       /* dtype of the result; -1 (default) = the input's dtype         */
    vc_algo algo;
    int32_t allow_tf32;       /* CUDA: fp32 features may use tf32 tensor cores (about 5e-4
                                 relative error); default 0 = exact fp32 arithmetic            */
    int32_t untuned;          /* 1: the planner's own rules even where the context's tune
                                 cache has the layer's bucket (an A/B of the cache against
                                 the planner in one process: voxconv bench --ab-cache);
                                 default 0                                                     */
} vc_conv_desc;

#define VC_CONV_DESC_INIT                                                                      \
    {sizeof(vc_conv_desc), VC_MAP_DESC_INIT, NULL, 0, 0, NULL, VC_DTYPE_FP32, VC_MEMORY_HOST,    \
     NULL, VC_ACT_NONE, 0.01f, NULL, (vc_dtype)-1, VC_ALGO_AUTO, 0, 0}

/* out = act(conv(in, weights) + bias + residual), on the map's output coordinates.
 * out[p, co] = sum over k, ci of in[out_in[p,k], ci] * W[co, k, ci], accumulated in fp32.
 * *out is a new tensor on the map's output coordinate set. On the CUDA backend, weights and bias
 * may be in host or device memory. Weights and bias in host memory must be finite (a NaN or
 * infinite one is VC_ERR_INVALID_ARGUMENT naming it); device ones are not read back to check.
 * NaN and infinite features propagate (check inputs with vc_tensor_check_finite). Synchronises on the CUDA backend when the map is not cached
 * yet, when weights or bias are in host memory, or with VC_ALGO_GATHER_GEMM_SCATTER (the pair
 * counts are read back); otherwise it only queues work. */
VC_API vc_status vc_conv_forward(vc_context *ctx, const vc_conv_desc *desc,
                                 const vc_tensor *in, vc_tensor **out);

/* Tuning (CUDA backend; docs/tune.md). The planner picks each layer's GEMM configuration and
 * tap split by rules; tuning times every compiled choice for a layer on the GPU at hand and
 * keeps the fastest for the layer's bucket (C_in, C_out, math, map type, kernel volume, output
 * count and taps per output, by octave: docs/tune.md) in the context's tune table, which the
 * planner then consults for every layer of that bucket. vc_tune_cache_save writes the table,
 * keyed by the GPU, its SM count, the CUDA runtime and driver and the library version, and a
 * context created with vc_context_desc.tune_cache loads it. Results may differ in their last
 * bits between two choices (docs/tune.md says how far); for one cache they are deterministic. */
typedef struct vc_tune_options {
    uint32_t struct_size;
    int32_t runs;             /* timed launches a choice (their median), 1..64; default 5      */
    float margin;             /* a choice replaces the planner's only when faster by more than
                                 this fraction and by more than twice the spread of its A/B
                                 rounds, on every member layer; 0 .. 0.5, default 0.03        */
    int32_t skip_known;       /* 1: a layer whose bucket the table holds already is not timed
                                 again (report->known = 1); default 0: timed, and replaced     */
    int32_t rounds;           /* interleaved A/B rounds confirming the finalist against the
                                 planner's choice on each member, 1..64; default 7             */
} vc_tune_options;

#define VC_TUNE_OPTIONS_INIT {sizeof(vc_tune_options), 5, 0.03f, 0, 7}

typedef struct vc_tune_report {
    int32_t candidates;       /* choices timed, the planner's included (1: nothing to choose:
                                 exact fp32, or a layer with no pairs)                          */
    int32_t changed;          /* 1: the layer's bucket now overrides the planner               */
    int32_t stored;           /* 1: the bucket was put into the context's table               */
    int32_t known;            /* 1: skipped, its bucket was in the table (skip_known)          */
    char bucket[96];          /* the layer's bucket, as text ("fp16 subm K27 32->32 out 2^17
                                 taps 2^2.5"); "" for a layer that has none (no pairs)        */
    char planner[64];         /* the planner's choice, "CONFIG/GROUPS" ("" where no GEMM ran) */
    char tuned[64];           /* the kept choice (the planner's where it stayed), with
                                 " no-order" / " two-pass" where it turns the tile order off or
                                 runs a clustered tap split in two passes                      */
    double planner_ms;        /* this layer's medians: of the A/B rounds where the finalist
                                 was confirmed, else the planner's median (both)              */
    double tuned_ms;
    char finalist[64];        /* the choice confirmed against the planner's, kept or not; ""
                                 where none beat it by the margin in the sweep                */
    int32_t members;          /* the layers of the bucket tuned together                       */
    int32_t rounds;           /* A/B rounds run (0: no finalist)                               */
    double gain;              /* this layer: median over the rounds of planner / finalist
                                 times; 0 without rounds                                       */
    double spread;            /* the median absolute deviation of those ratios over the gain  */
} vc_tune_report;

/* Times the layer `desc` on `in` (as vc_conv_forward would run it, with the implicit GEMM)
 * under the planner's choice and every compiled GEMM configuration and tap split of its dtype,
 * and puts the result into the context's tune table for the layer's bucket (replacing an
 * earlier entry of that bucket); later convolutions on the context use it. The layer's output
 * is discarded. Takes seconds for large layers; synchronises after every launch. The CPU
 * backend has nothing to tune: VC_ERR_UNSUPPORTED. `opts` NULL = VC_TUNE_OPTIONS_INIT.
 * vc_conv_tune_layers(ctx, 1, desc, &in, opts, report). */
VC_API vc_status vc_conv_tune(vc_context *ctx, const vc_conv_desc *desc, const vc_tensor *in,
                              const vc_tune_options *opts, vc_tune_report *report);
/* Most layers vc_conv_tune_layers tunes one bucket over. */
#define VC_TUNE_MAX_MEMBERS 16

/* Tunes one bucket over n of its layers (1..VC_TUNE_MAX_MEMBERS; every one must fall in the bucket of the
 * first, vc_conv_bucket: else VC_ERR_INVALID_ARGUMENT): candidates found on the first are
 * ranked by their worst ratio to the planner's time over all of them, and the finalist is
 * confirmed on each by opts->rounds interleaved A/B rounds against the planner's choice; the
 * bucket keeps it only where every layer gains more than max(margin, 2 x the spread of its
 * rounds), else it records that the planner's choice stays (docs/tune.md). reports[i] is
 * layer i's (bucket, choices and verdict alike). */
VC_API vc_status vc_conv_tune_layers(vc_context *ctx, int32_t n, const vc_conv_desc *descs,
                                     const vc_tensor *const *ins, const vc_tune_options *opts,
                                     vc_tune_report *reports);
/* The tune bucket of a layer of desc over `map` with input features of `in_dtype` and
 * desc->in_channels channels, as text (vc_tune_report.bucket); "" for a layer that has none
 * (no outputs or no pairs). Layers of one text share a bucket. Any backend. */
VC_API vc_status vc_conv_bucket(vc_context *ctx, const vc_conv_desc *desc, const vc_kmap *map,
                                vc_dtype in_dtype, char *buf, size_t len);
/* Buckets in the context's tune table (loaded or tuned). */
VC_API vc_status vc_tune_cache_count(const vc_context *ctx, int32_t *count);
/* Writes the context's tune table as a cache file (JSON, docs/formats.md), keyed by this
 * context's device; atomically, as every file the library writes (vc_tune_cache_save_output
 * writes into an open output). CUDA backend only (VC_ERR_UNSUPPORTED on the CPU). */
VC_API vc_status vc_tune_cache_save(vc_context *ctx, const char *path);

/* ------------------------------------------------------------------------------------------ */
/* Pooling                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum vc_pool_mode {
    VC_POOL_MAX = 0,
    VC_POOL_AVG = 1           /* mean over the inputs present (not over the kernel volume)    */
} vc_pool_mode;

typedef struct vc_pool_desc {
    uint32_t struct_size;
    vc_map_desc map;
    const vc_kmap *kmap;      /* optional prebuilt map                                         */
    vc_pool_mode mode;
} vc_pool_desc;

#define VC_POOL_DESC_INIT {sizeof(vc_pool_desc), VC_MAP_DESC_INIT, NULL, VC_POOL_MAX}

/* Pools over a kernel map; the result has the input's channels and dtype. Synchronises on the
 * CUDA backend only when the map is not cached yet. */
VC_API vc_status vc_pool_forward(vc_context *ctx, const vc_pool_desc *desc,
                                 const vc_tensor *in, vc_tensor **out);
/* Global pooling per batch item into a dense [batch_size, C] array of fp32 at `dst`
 * (host or device per `where`). Batch items with no voxels give 0. Synchronises on the CUDA
 * backend. */
VC_API vc_status vc_global_pool(vc_context *ctx, vc_pool_mode mode, const vc_tensor *in,
                                float *dst, vc_memory where);

/* ------------------------------------------------------------------------------------------ */
/* Synthetic scenes                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Deterministic scenes for benchmarks and tests: one description gives the same bytes on every
 * run (on one platform: the LiDAR rays use the C library's cos and sin). They are the scenes of
 * the benchmark programs and the tests (docs/bench.md). */
typedef enum vc_synth_kind {
    VC_SYNTH_LIDAR = 0,   /* one sweep of a 128-beam spinning LiDAR 1.73 m above the ground among
                             buildings, walls and 35 parked cars: 6144 azimuth steps, returns
                             out to 80 m (~100k voxels on the KITTI grid)                      */
    VC_SYNTH_INDOOR = 1,  /* a 10 x 8 x 3 m room at 3 cm as a depth camera sees its surfaces:
                             floor, ceiling with gaps, four walls, eight boxes (shape
                             100 x 267 x 334, ~320k voxels); its own grid                      */
    VC_SYNTH_UNIFORM = 2  /* distinct voxels drawn uniformly over the grid (default 100000)   */
} vc_synth_kind;

typedef enum vc_synth_grid {
    VC_SYNTH_GRID_KITTI = 0,   /* SECOND / KITTI: 0.05 x 0.05 x 0.1 m over x [0, 70.4),
                                  y [-40, 40), z [-3, 1); shape 41 x 1600 x 1408               */
    VC_SYNTH_GRID_NUSCENES = 1 /* CenterPoint nuScenes: 0.075 x 0.075 x 0.2 m over x, y
                                  [-54, 54), z [-5, 3); shape 40 x 1440 x 1440                 */
} vc_synth_grid;

typedef struct vc_synth_desc {
    uint32_t struct_size;
    vc_synth_kind kind;
    uint64_t seed;            /* the generator's state; 0 = 0x5eed5eed12345 (bench_conv's)     */
    int64_t voxels;           /* 0 = the kind's own size; else the size to aim at: UNIFORM
                                 exactly (at most a quarter of the grid), LIDAR through the
                                 azimuth steps, INDOOR through the room's size (both within a
                                 few percent where the geometry allows; 1..2^28)               */
    int32_t frame;            /* 0..255: frame f continues the draws of frames 0..f-1 (the
                                 LiDAR also turns 0.0007 rad a frame)                          */
    vc_synth_grid grid;       /* LIDAR and UNIFORM                                             */
    int32_t channels;         /* features of vc_synth_voxels, uniform in [-1, 1) from their
                                 own draws (the geometry does not depend on them); 1..1024    */
} vc_synth_desc;

#define VC_SYNTH_DESC_INIT                                                                     \
    {sizeof(vc_synth_desc), VC_SYNTH_LIDAR, 0, 0, 0, VC_SYNTH_GRID_KITTI, 4}

/* A scene as a tensor of fp32 features on a new coordinate set (batch size 1; rows in the
 * generator's order, distinct). */
VC_API vc_status vc_synth_voxels(vc_context *ctx, const vc_synth_desc *desc, vc_tensor **out);
struct vc_cloud; /* under Files */
/* A scene as points x, y, z, intensity (float32, metres): LIDAR every return of the sweep in the
 * sensor frame (intensity 1 / (1 + range / 10)); INDOOR and UNIFORM the centres of the voxels of
 * vc_synth_voxels (intensity 0). Free with vc_cloud_free. */
VC_API vc_status vc_synth_points(vc_context *ctx, const vc_synth_desc *desc,
                                 struct vc_cloud *out);

/* ------------------------------------------------------------------------------------------ */
/* Benchmarking: timers, the planner's choice, floors                                          */
/* ------------------------------------------------------------------------------------------ */

/* A timer of the work queued on a context. CUDA: two events on the context's stream, so a time
 * is the device's between the two marks, without the host's launch and synchronisation
 * latency that a host clock around a synchronised call would add (tens of microseconds, as
 * much as a small layer takes). CPU: the host's monotonic clock (CPU calls return when their
 * work is done). voxconv bench and the benchmark programs time with it. */
typedef struct vc_timer vc_timer;

VC_API vc_status vc_timer_create(vc_context *ctx, vc_timer **out);
/* Marks the start (queues an event on the context's stream, or reads the clock). */
VC_API vc_status vc_timer_start(vc_timer *timer);
/* Marks the end, waits for it and sets *ms to the milliseconds since the start. Synchronises. */
VC_API vc_status vc_timer_stop(vc_timer *timer, double *ms);
/* Evicts the caches before a timed run: CUDA queues a 256 MB memset (more than any L2) on the
 * context's stream; CPU writes a 256 MB host buffer. The buffer is allocated on first use. */
VC_API vc_status vc_timer_flush_cache(vc_timer *timer);
VC_API vc_status vc_timer_destroy(vc_timer *timer);

/* The context's device as a report names it: the GPU's name, or "cpu". */
VC_API vc_status vc_context_device_name(const vc_context *ctx, char *buf, size_t len);

/* What vc_conv_forward with VC_ALGO_AUTO runs for a layer on this context. */
typedef struct vc_conv_plan_info {
    vc_algo algo;             /* CUDA: the planner's algorithm (never AUTO); CPU: AUTO (the
                                 CPU twin runs one algorithm)                                  */
    char config[64];          /* the implicit GEMM's first tile configuration for the layer
                                 (gemm/gemm.h names; a later one runs only where it does not
                                 fit), "" for the others, "cpu" on a CPU context             */
    int32_t tap_split;        /* implicit GEMM: 0 none, N > 0 that many groups, -N up to N
                                 groups as the device's SM count allows                        */
    int32_t tuned;            /* 1: config and tap_split come from the context's tune cache
                                 (vc_context_desc.tune_cache, vc_conv_tune)                    */
} vc_conv_plan_info;

/* The plan of a layer of desc (out_channels, allow_tf32; desc->algo is ignored) over `map`
 * with input features of `in_dtype` and desc->in_channels channels (> 0). Does not launch. */
VC_API vc_status vc_conv_plan(vc_context *ctx, const vc_conv_desc *desc, const vc_kmap *map,
                              vc_dtype in_dtype, vc_conv_plan_info *out);

/* The floor model of docs/benchmarks.md ("Floors"): the least time a layer can take. */
typedef struct vc_layer_floor {
    double flops;             /* useful work: 2 x pairs x C_in x C_out (0 for pooling)        */
    double bytes;             /* the fewest a layer moves: input and output features, weights,
                                 out_in (int32 [n_out, K]), each once                          */
    double peak_flops;        /* the rates behind ms (FLOP/s, bytes/s); 0 where the device or
                                 the dtype has none on record                                   */
    double peak_bytes;
    double ms;                /* max(flops / peak_flops, bytes / peak_bytes) in ms; 0 where a
                                 rate it needs is unknown                                       */
} vc_layer_floor;

/* The floor of a convolution (pool 0) or pooling (pool 1) layer over `map`, C_in to C_out
 * channels of `dtype` (allow_tf32: fp32 on tensor cores). Rates on record: an H100 (CUDA
 * context, device name containing "H100"): 650 TFLOP/s for fp16 and bf16 (mma.sync m16n8k16
 * from registers), 3.0 TB/s; other devices, fp32 and tf32 have none (give your own to
 * vc_layer_floor_rates). */
VC_API vc_status vc_layer_floor_get(vc_context *ctx, const vc_kmap *map, int64_t c_in,
                                    int64_t c_out, vc_dtype dtype, int32_t allow_tf32,
                                    int32_t pool, vc_layer_floor *out);
/* Recomputes f->ms with the rates given (either 0: that term is left out). */
VC_API vc_status vc_layer_floor_rates(vc_layer_floor *f, double peak_flops, double peak_bytes);

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Every file the library writes is written atomically: to a temporary ".NAME.XXXXXX" in the
 * target's directory, flushed, synced and closed (each step checked), then renamed over the
 * target. On any failure the temporary is removed and the target, whatever it was, is left
 * exactly as it was; the library never unlinks or truncates a path it is given. A symlink at
 * the path is followed: the file it finally names is replaced, the link stays. An existing
 * file keeps its mode; one the caller may not write is refused (as fopen would); a new one
 * gets 0666 less the umask. A target that is not a regular file (a device, a FIFO) is written
 * in place (never created, truncated or removed); a directory is refused. Writing needs a
 * writable directory. Hard links to a replaced file keep the old contents. */

/* An output file being written: its temporary exists until vc_output_publish renames it over
 * the target or vc_output_discard removes it. Callers that write several files together
 * (all or none) open one output per file, write each (vc_tensor_save_output,
 * vc_npy_write_output), and publish them only when every write succeeded. Owned by the caller,
 * not by a context; one thread at a time. */
typedef struct vc_output vc_output;

/* Creates the temporary for `path` (or opens a non-regular target for writing in place). */
VC_API vc_status vc_output_open(vc_context *ctx, const char *path, vc_output **out);
/* The temporary's path (*path NULL for a target written in place), valid until the output is
 * published or discarded: a caller's signal handler may unlink a copy of it. */
VC_API vc_status vc_output_temp_path(const vc_output *out, const char **path);
/* Renames the written temporary over the target (and syncs its directory). Always frees
 * `out`; on failure, or when the output's write failed or never happened, removes the
 * temporary and returns an error, the target untouched. */
VC_API vc_status vc_output_publish(vc_context *ctx, vc_output *out);
/* Removes the temporary and frees `out` (NULL is OK); the target is untouched. */
VC_API vc_status vc_output_discard(vc_output *out);
/* Writes `size` bytes as the whole content of an open output (once), which the caller then
 * publishes or discards: the atomic writer for files voxconv does not format itself (the CSV,
 * JSON and SVG reports of voxconv bench). */
VC_API vc_status vc_output_write_bytes(vc_context *ctx, vc_output *out, const void *data,
                                       size_t size);

/* Point clouds read from files live in host memory owned by the library. */
typedef struct vc_cloud {
    float *data;              /* [count, dim]: x, y, z, then `dim - 3` more columns            */
    int64_t count;
    int32_t dim;
    char **names;             /* dim column names ("x", "y", "z", "intensity", ...)            */
} vc_cloud;

typedef enum vc_file_format {
    VC_FORMAT_AUTO = 0,       /* by extension, then by magic bytes                             */
    VC_FORMAT_KITTI = 1,      /* raw .bin: float32 records, x, y, z, intensity by default
                                 (vc_read_options.load_dim sets the record width)             */
    VC_FORMAT_PCD = 2,        /* ascii, binary, binary_compressed                              */
    VC_FORMAT_PLY = 3,        /* ascii, binary_little_endian                                   */
    VC_FORMAT_NPY = 4,        /* NumPy .npy                                                    */
    VC_FORMAT_VXT = 5         /* voxconv voxel-tensor file (docs/formats.md)                   */
} vc_file_format;

/* Reads a point cloud (KITTI, PCD or PLY; a float32 [N, D>=3] .npy too), with the default
 * vc_read_options (a .bin of 4-float records; see vc_cloud_read_ex). Fields other than
 * x, y, z that are scalar numbers become extra columns as float32. On success *out holds owned
 * arrays; free them with vc_cloud_free. `ctx` may be NULL (no message is recorded then). */
VC_API vc_status vc_cloud_read(vc_context *ctx, const char *path, vc_file_format format,
                               vc_cloud *out);
/* Reads from memory (the fuzz targets' entry); `format` must not be AUTO. */
VC_API vc_status vc_cloud_read_memory(vc_context *ctx, const void *bytes, size_t size,
                                      vc_file_format format, vc_cloud *out);
/* Options of the point-cloud readers. A raw .bin carries no header, so its record width is the
 * caller's to state; mmdetection3d's LoadPointsFromFile names them the same way. */
typedef struct vc_read_options {
    uint32_t struct_size;     /* sizeof(vc_read_options): lets the struct grow                  */
    int32_t load_dim;         /* float32 per record of a raw .bin (VC_FORMAT_KITTI), 3..4096.
                                 0 (default) = 4, the KITTI layout, except that a path ending
                                 in ".pcd.bin" (nuScenes: 5 floats) is refused until it is set.
                                 Other formats state their own columns: nonzero is
                                 VC_ERR_INVALID_ARGUMENT for them                              */
    const int32_t *use_dim;   /* the columns to keep, in this order (0-based indices into the
                                 file's columns, any format); NULL = the first n_use_dim       */
    int32_t n_use_dim;        /* 0 (default) = keep every column; else 3..4096                 */
} vc_read_options;

#define VC_READ_OPTIONS_INIT {sizeof(vc_read_options), 0, NULL, 0}

/* vc_cloud_read with options (`opts` NULL = VC_READ_OPTIONS_INIT). A .bin whose size is not a
 * whole number of records is VC_ERR_FORMAT, with the record widths that would fit named; an
 * index of use_dim outside the file's columns is VC_ERR_INVALID_ARGUMENT; a struct_size this
 * library does not know is VC_ERR_INVALID_ARGUMENT. */
VC_API vc_status vc_cloud_read_ex(vc_context *ctx, const char *path, vc_file_format format,
                                  const vc_read_options *opts, vc_cloud *out);
/* vc_cloud_read_memory with options (no path: the ".pcd.bin" check does not apply). */
VC_API vc_status vc_cloud_read_memory_ex(vc_context *ctx, const void *bytes, size_t size,
                                         vc_file_format format, const vc_read_options *opts,
                                         vc_cloud *out);
/* Writes a cloud as KITTI .bin (needs dim >= 4: x, y, z, and the 4th column as intensity). */
VC_API vc_status vc_cloud_write_kitti(vc_context *ctx, const char *path, const vc_cloud *cloud);
/* Frees the arrays of a cloud and zeroes it. NULL is OK. */
VC_API vc_status vc_cloud_free(vc_cloud *cloud);

/* A host array as read from or written to .npy. */
typedef struct vc_array {
    void *data;
    vc_dtype dtype;           /* fp32, fp16 or int32 (bf16 has no NumPy dtype: writing it is
                                 VC_ERR_UNSUPPORTED; cast to fp32 first)                        */
    int32_t ndim;             /* 0..8                                                          */
    int64_t shape[8];
} vc_array;

/* Reads a C-order, little-endian .npy of float32, float16 or int32 (int64 and float64 are
 * converted when every value fits). Free with vc_array_free. */
VC_API vc_status vc_npy_read(vc_context *ctx, const char *path, vc_array *out);
VC_API vc_status vc_npy_read_memory(vc_context *ctx, const void *bytes, size_t size,
                                    vc_array *out);
/* Writes a .npy (version 1.0). The _output form writes into an open output (once), which the
 * caller then publishes or discards. */
VC_API vc_status vc_npy_write(vc_context *ctx, const char *path, const vc_array *array);
VC_API vc_status vc_npy_write_output(vc_context *ctx, vc_output *out, const vc_array *array);
VC_API vc_status vc_array_free(vc_array *array);

/* Saves a sparse tensor (coordinates, features, spatial shape, batch size, dtype) as a .vxt
 * file. Synchronises on the CUDA backend. */
VC_API vc_status vc_tensor_save(vc_context *ctx, const vc_tensor *tensor, const char *path);
/* The same into an open output (once), which the caller then publishes or discards. */
VC_API vc_status vc_tensor_save_output(vc_context *ctx, const vc_tensor *tensor, vc_output *out);
/* vc_tune_cache_save into an open output (once), which the caller then publishes. */
VC_API vc_status vc_tune_cache_save_output(vc_context *ctx, vc_output *out);
/* Loads a .vxt file into a new coordinate set and tensor on the context. */
VC_API vc_status vc_tensor_load(vc_context *ctx, const char *path, vc_tensor **out);
VC_API vc_status vc_tensor_load_memory(vc_context *ctx, const void *bytes, size_t size,
                                       vc_tensor **out);

/* ------------------------------------------------------------------------------------------ */
/* Networks                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* A network: a model description (JSON, docs/networks.md) bound to its weights (safetensors,
 * the PyTorch state_dict names; BatchNorm folded into the preceding conv at create), its weights
 * uploaded once in the net's dtype to the context's memory. Runs frame after frame; every kernel
 * map of a frame is built once and shared by the layers that use it. */
typedef struct vc_net vc_net;

typedef struct vc_net_desc {
    uint32_t struct_size;
    const char *model_path;    /* JSON description file, or NULL and:                          */
    const char *model_json;    /* the description's text (NUL-terminated)                      */
    const char *weights_path;  /* safetensors file, or NULL and:                               */
    const void *weights_data;  /* safetensors bytes in memory (weights_size of them), or NULL
                                  with random_weights set                                       */
    size_t weights_size;
    int32_t random_weights;    /* 1: deterministic random weights from `seed` (BN stats too)   */
    uint64_t seed;
    vc_dtype dtype;            /* feature dtype the layers run in; -1 = fp16 on CUDA, fp32 on
                                  CPU                                                           */
    vc_algo algo;              /* passed to every conv                                         */
} vc_net_desc;

#define VC_NET_DESC_INIT                                                                       \
    {sizeof(vc_net_desc), NULL, NULL, NULL, NULL, 0, 0, 0, (vc_dtype)-1, VC_ALGO_AUTO}

/* Parses the description, binds and checks the weights (a missing, extra, mis-shaped or
 * non-finite tensor is an error naming it) and uploads them. On failure *out is unchanged and
 * nothing is left allocated. Synchronises on the CUDA backend (the weight upload). */
VC_API vc_status vc_net_create(vc_context *ctx, const vc_net_desc *desc, vc_net **out);
/* Frees the net, its weights and its outputs. NULL is OK. */
VC_API vc_status vc_net_destroy(vc_net *net);
/* Runs one frame on a voxel tensor (channels = the description's input channels; its coordinate
 * set's spatial shape may be smaller than the description's, then it is placed in the
 * description's shape; any dtype: cast to the net's). Outputs stay valid until the next run or
 * destroy. On the CUDA backend, without bounds set (vc_net_set_bounds): the net's first frame
 * runs step by step (a synchronisation per kernel map built, and for dense outputs of global
 * pooling); from the second frame on, where graph mode can run the net, the frame runs as a
 * CUDA graph under bounds the net sets itself from the largest level counts seen (plus a
 * quarter), and the run checks it before returning: ONE synchronisation a frame. A frame that
 * outgrows those bounds is run again after they grow to what it needed (never truncated).
 * vc_net_set_auto_bounds(net, 0) or profiling keep every frame step by step. */
VC_API vc_status vc_net_run(vc_net *net, const vc_tensor *in);
/* Voxelizes points per the description's "voxelize" block (VC_ERR_INVALID_ARGUMENT without
 * one), then runs. */
VC_API vc_status vc_net_run_points(vc_net *net, const vc_points *points);

typedef enum vc_net_output_kind { VC_NET_SPARSE = 0, VC_NET_DENSE = 1 } vc_net_output_kind;

typedef struct vc_net_output {
    const char *name;
    vc_net_output_kind kind;
    const vc_tensor *tensor;   /* SPARSE: borrowed until the next run / destroy                */
    const void *data;          /* DENSE: borrowed, in the context's memory                      */
    vc_dtype dtype;            /* DENSE                                                        */
    int32_t ndim;              /* DENSE: 2 (global pool), 4 (bev) or 5 (bcdhw)                 */
    int64_t shape[5];
} vc_net_output;

/* Named outputs, in the description's order. Before the first run, tensor and data are NULL and
 * the shape is 0. */
VC_API vc_status vc_net_output_count(const vc_net *net, int32_t *count);
VC_API vc_status vc_net_get_output(const vc_net *net, int32_t index, vc_net_output *out);
/* Copies a DENSE output of the last run (its whole array, `bytes` = the product of its shape
 * times its dtype's size: VC_ERR_CAPACITY when smaller) to dst, host or device per `where`.
 * Synchronises on the CUDA backend. */
VC_API vc_status vc_net_copy_output(vc_net *net, int32_t index, void *dst, size_t bytes,
                                    vc_memory where);
/* VC_ERR_INVALID_ARGUMENT when no output has that name. */
VC_API vc_status vc_net_find_output(const vc_net *net, const char *name, int32_t *index);

/* Graph mode (CUDA; docs/networks.md "Graph mode"). With upper bounds set, every buffer of a
 * frame has a fixed row extent (its bound) and the live row counts stay on the device: a frame
 * then runs with no host synchronisation, is captured once as a CUDA graph (the first run after
 * vc_net_set_bounds runs eagerly, then is captured) and later runs replay it on frames of any
 * size within the bounds. A "level" is a coordinate set of the frame, in the order the network
 * makes them: [0] the input voxels, then each strided / downsampling / transposed conv's new
 * set (vc_net_level_count). */
#define VC_NET_MAX_LEVELS 16
typedef struct vc_net_bounds {
    uint32_t struct_size;
    int64_t max_points;                    /* points per frame (vc_net_run_points); 0 if only
                                              vc_net_run is used                               */
    int64_t max_voxels[VC_NET_MAX_LEVELS]; /* rows per level; 0 = the previous level's bound
                                              ([0]: the description's voxelize max_voxels)     */
} vc_net_bounds;
#define VC_NET_BOUNDS_INIT {sizeof(vc_net_bounds), 0, {0}}
/* Fixes the net's bounds: allocates every buffer of a frame once (batch size 1; a frame of
 * another batch size allocates and captures again). With bounds set, vc_net_run and
 * vc_net_run_points copy the input into the fixed buffers, queue the frame (or launch its graph)
 * and return WITHOUT synchronising; an input over level 0's bound known on the host fails at
 * once (VC_ERR_CAPACITY). The first of vc_net_get_output / vc_net_copy_output after a run
 * synchronises once and checks the whole frame: a level over its bound is VC_ERR_CAPACITY
 * naming the level and the rows it needed (never truncated), duplicate / out-of-range input
 * rows as per call; that status is then returned by every output call until the next run, and
 * the next good frame works. Sparse outputs are then views of the fixed buffers with the live
 * row counts (valid until the next run). NULL returns the net to per-call runs. CUDA only (CPU:
 * VC_ERR_UNSUPPORTED); nets with global pooling: VC_ERR_UNSUPPORTED naming the layer (inverse
 * convs run: their maps invert their key owners' in the frame); the implicit GEMM only (algo
 * AUTO or IMPLICIT_GEMM). */
VC_API vc_status vc_net_set_bounds(vc_net *net, const vc_net_bounds *bounds);
/* The bounds in force (VC_ERR_INVALID_ARGUMENT when none), each level's resolved. */
VC_API vc_status vc_net_bounds_get(const vc_net *net, vc_net_bounds *out);
/* Levels of the net's frame (1 + the convs that make a new coordinate set, shared sets counted
 * once); needs no bounds. */
VC_API vc_status vc_net_level_count(const vc_net *net, int32_t *count);
/* On (the default) / off: per-call runs through graph mode with bounds the net grows itself
 * (vc_net_run). Off gives back the memory of those bounds. */
VC_API vc_status vc_net_set_auto_bounds(vc_net *net, int32_t on);
/* Rows of each level in the last per-call run (counts[0 .. level_count)), for bounds from a
 * sample frame (the CLI's --bounds auto). VC_ERR_INVALID_ARGUMENT before a per-call run. */
VC_API vc_status vc_net_level_rows(const vc_net *net, int64_t *counts, int32_t n);

/* Profiling: when on, the next runs time every step (CUDA events / host clock; adds syncs). */
typedef struct vc_net_step_info {
    const char *name;          /* layer id                                                     */
    const char *op;
    int64_t voxels_in, voxels_out, pairs;
    double ms;                 /* last run; the map build of a conv is timed apart:            */
    double map_ms;
} vc_net_step_info;

VC_API vc_status vc_net_set_profiling(vc_net *net, int32_t on);
VC_API vc_status vc_net_step_count(const vc_net *net, int32_t *count);
VC_API vc_status vc_net_get_step(const vc_net *net, int32_t index, vc_net_step_info *out);

#ifdef __cplusplus
}
#endif

#endif /* VOXCONV_H */
