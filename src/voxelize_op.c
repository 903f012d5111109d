/* src/voxelize_op.c - vc_voxelize: checks the arguments, runs the CPU twin or (CUDA context)
 * the GPU voxelizer on points staged to the device, and wraps the voxels in a new tensor on a
 * new coordinate set. */
#include <string.h>

#include "internal.h"
#include "voxelize/voxelize.h"

#ifdef VOXCONV_HAVE_CUDA
#include "voxelize/voxelize_gpu.h"

/* The GPU voxelizer; host points travel to the device for the call. */
static vc_status voxelize_device(vc_context *ctx, const char *fn, const vc_voxelize_desc *d,
                                 const vc_points *points, vc_voxels *vox,
                                 vc_voxelize_stats *st)
{
    vc_err err = {{0}};
    vc_status s;
    vc_points p = *points;
    void *tmp_pts = NULL, *tmp_batch = NULL;
    int64_t total;
    if (p.count < 0 || p.dim < 3 || vc_mul_overflow_i64(p.count, p.dim, &total))
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad point count or dim", fn);
    s = vc_mem_to_device(ctx, p.data, p.memory, (size_t)total * sizeof(float),
                         (const void **)&p.data, &tmp_pts);
    if (s == VC_OK)
        s = vc_mem_to_device(ctx, p.batch, p.memory, (size_t)p.count * sizeof(int32_t),
                             (const void **)&p.batch, &tmp_batch);
    p.memory = VC_MEMORY_DEVICE;
    if (s == VC_OK)
        s = vc_ctx_err(ctx, vc_voxelize_gpu(d, &p, &ctx->opts, ctx->stream, vox, st, &err), &err);
    vc_mem_free(ctx, tmp_pts, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, tmp_batch, VC_MEMORY_DEVICE);
    return s;
}
#endif

vc_status vc_voxelize(vc_context *ctx, const vc_voxelize_desc *desc, const vc_points *points,
                      vc_tensor **out, vc_voxelize_stats *stats)
{
    const char *fn = "vc_voxelize";
    if (!ctx) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(ctx);
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    VC_TAKE_DESC(ctx, fn, d, desc, vc_voxelize_desc);
    if (!points || !out)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: points or out is NULL", fn);
    if (points->memory == VC_MEMORY_DEVICE && ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(ctx, VC_ERR_INVALID_ARGUMENT, "%s: device points on a CPU context", fn);

    vc_status s;
    vc_err err = {{0}};
    vc_voxels vox;
    memset(&vox, 0, sizeof vox);
    vc_voxelize_stats st;
    memset(&st, 0, sizeof st);
    vc_memory vox_where = vc_ctx_native(ctx);
#ifdef VOXCONV_HAVE_CUDA
    if (ctx->backend == VC_BACKEND_CUDA)
        s = voxelize_device(ctx, fn, &d, points, &vox, &st);
    else
#endif
        s = vc_ctx_err(ctx, vc_voxelize_cpu(&d, points, &ctx->opts, &vox, &st, &err), &err);
    if (s != VC_OK) return s;

    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    s = vc_coords_trusted(ctx, vox.coords, vox_where, vox.n, vox.shape, vox.batch_size, &c);
    if (s == VC_OK)
        s = vc_tensor_create(ctx, c, vox.channels, d.dtype, vox.features, vox_where, &t);
    vc_coords_destroy(c); /* the tensor holds the set */
#ifdef VOXCONV_HAVE_CUDA
    if (vox_where == VC_MEMORY_DEVICE)
        vc_voxels_free_gpu(&vox);
    else
#endif
        vc_voxels_free(&vox);
    if (s != VC_OK) return s;
    *out = t;
    if (stats) *stats = st;
    return VC_OK;
}
