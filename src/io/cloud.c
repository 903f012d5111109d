/* src/io/cloud.c - the point-cloud entry points: vc_cloud_read (format by extension, then by
 * magic bytes), vc_cloud_read_memory, vc_cloud_free, and the KITTI .bin reader and writer
 * (float32 little-endian x, y, z, intensity records). See docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "src/io/io.h"

vc_status vc_io_read_kitti(const vc_io_src *src, const uint8_t *p, size_t n, vc_cloud *out)
{
    if (n % 16 != 0)
        return vc_io_fail(src, VC_ERR_FORMAT,
                          "KITTI size %zu bytes is not a multiple of 16 (4 float32 per point); "
                          "%zu trailing bytes at byte offset %zu", n, n % 16, n - n % 16);
    static const char *const names[4] = {"x", "y", "z", "intensity"};
    vc_cloud c;
    vc_status st = vc_io_cloud_alloc(src, &c, (int64_t)(n / 16), 4, names);
    if (st != VC_OK) return st;
    for (size_t i = 0; i < n / 4; i++) {
        uint32_t u = vc_ld_u32(p + 4 * i);
        memcpy(&c.data[i], &u, 4);
    }
    *out = c;
    return VC_OK;
}

static vc_status read_memory(const vc_io_src *src, const uint8_t *p, size_t n,
                             vc_file_format format, vc_cloud *out)
{
    switch (format) {
    case VC_FORMAT_KITTI: return vc_io_read_kitti(src, p, n, out);
    case VC_FORMAT_PCD: return vc_io_read_pcd(src, p, n, out);
    case VC_FORMAT_PLY: return vc_io_read_ply(src, p, n, out);
    case VC_FORMAT_NPY: return vc_io_read_npy_cloud(src, p, n, out);
    case VC_FORMAT_VXT:
        return vc_io_fail(src, VC_ERR_UNSUPPORTED,
                          "a .vxt file holds a voxel tensor, not a point cloud "
                          "(use vc_tensor_load)");
    default:
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT, "invalid file format %d", (int)format);
    }
}

vc_status vc_cloud_read_memory(vc_context *ctx, const void *bytes, size_t size,
                               vc_file_format format, vc_cloud *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, "<memory>"};
    if (!out || (!bytes && size > 0))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL bytes or output");
    if (format == VC_FORMAT_AUTO)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT,
                          "vc_cloud_read_memory needs an explicit format, not AUTO");
    static const uint8_t empty[1] = {0};
    return read_memory(&src, bytes ? bytes : empty, size, format, out);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && vc_tok_ieq(s + a - b, b, suffix);
}

/* Guesses a format: extension first, then the leading bytes. AUTO when neither tells. */
static vc_file_format guess_format(const char *path, const uint8_t *p, size_t n)
{
    if (ends_with(path, ".bin")) return VC_FORMAT_KITTI;
    if (ends_with(path, ".pcd")) return VC_FORMAT_PCD;
    if (ends_with(path, ".ply")) return VC_FORMAT_PLY;
    if (ends_with(path, ".npy")) return VC_FORMAT_NPY;
    if (ends_with(path, ".vxt")) return VC_FORMAT_VXT;
    if (n >= 4 && memcmp(p, "ply", 3) == 0 && (p[3] == '\n' || p[3] == '\r')) return VC_FORMAT_PLY;
    if (n >= 6 && memcmp(p, "\x93NUMPY", 6) == 0) return VC_FORMAT_NPY;
    if (n >= 4 && memcmp(p, "VXCT", 4) == 0) return VC_FORMAT_VXT;
    static const char *const pcd_starts[] = {"# .PCD", "VERSION", "FIELDS", "COLUMNS"};
    for (int i = 0; i < 4; i++) {
        size_t l = strlen(pcd_starts[i]);
        if (n >= l && memcmp(p, pcd_starts[i], l) == 0) return VC_FORMAT_PCD;
    }
    return VC_FORMAT_AUTO;
}

vc_status vc_cloud_read(vc_context *ctx, const char *path, vc_file_format format,
                        vc_cloud *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    if (!path || !out) return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL path or output");
    if ((int)format < VC_FORMAT_AUTO || (int)format > VC_FORMAT_VXT)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "invalid file format %d", (int)format);
    uint8_t *data;
    size_t n;
    vc_status st = vc_io_read_file(ctx, path, &data, &n);
    if (st != VC_OK) return st;
    if (format == VC_FORMAT_AUTO) {
        format = guess_format(path, data, n);
        if (format == VC_FORMAT_AUTO) {
            free(data);
            return vc_io_fail(&src, VC_ERR_FORMAT,
                              "cannot tell the format (no known extension or magic bytes)");
        }
    }
    st = read_memory(&src, data, n, format, out);
    free(data);
    return st;
}

vc_status vc_cloud_write_kitti(vc_context *ctx, const char *path, const vc_cloud *cloud)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    if (!path || !cloud) return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL path or cloud");
    if (cloud->dim < 4)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT,
                          "KITTI needs at least 4 columns (x, y, z, intensity), cloud has %d",
                          (int)cloud->dim);
    if (cloud->count < 0 || (cloud->count > 0 && !cloud->data))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "bad cloud (count %lld, data %p)",
                          (long long)cloud->count, (void *)cloud->data);
    vc_io_writer w;
    if (vc_io_writer_open(&w, ctx, path) != VC_OK) return w.status;
    for (int64_t i = 0; i < cloud->count; i++)
        vc_io_writer_put_le(&w, cloud->data + i * (int64_t)cloud->dim, 4, 4);
    return vc_io_writer_close(&w);
}

vc_status vc_cloud_free(vc_cloud *cloud)
{
    vc_io_cloud_release(cloud);
    return VC_OK;
}
