/* src/io/cloud.c - the point-cloud entry points: vc_cloud_read(_ex) (format by extension, then
 * by magic bytes), vc_cloud_read_memory(_ex), vc_cloud_free, the read options (record width of
 * a raw .bin, columns to keep), and the raw .bin reader (float32 little-endian records, KITTI's
 * x, y, z, intensity by default) and the KITTI writer. See docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "src/io/io.h"

/* The record widths of 3..8 float32 other than `skip` that divide n bytes, as "5" or "5 or 6"
 * (empty when none does). */
static void fitting_widths(size_t n, int32_t skip, char *buf, size_t cap)
{
    int fit[6], nfit = 0;
    for (int w = 3; w <= 8; w++)
        if (w != skip && n % (size_t)(4 * w) == 0) fit[nfit++] = w;
    buf[0] = 0;
    for (int i = 0; i < nfit; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%d", i == 0 ? "" : (i == nfit - 1 ? " or " : ", "), fit[i]);
    }
}

/* The failure of a .bin whose size is not a whole number of records. */
static vc_status bin_size_fail(const vc_io_src *src, size_t n, int32_t load_dim)
{
    int32_t dim = load_dim ? load_dim : 4;
    size_t rec = (size_t)dim * 4, rest = n % rec;
    char fits[64];
    fitting_widths(n, dim, fits, sizeof fits);
    if (load_dim == 0 && fits[0])
        return vc_io_fail(src, VC_ERR_FORMAT,
                          "raw .bin size %zu bytes is not a multiple of 16 (4 float32 per point, "
                          "the KITTI default; %zu trailing bytes at byte offset %zu) but fits %s "
                          "float32 per point: pass --load-dim %s (vc_read_options.load_dim)%s",
                          n, rest, n - rest, fits, fits,
                          strchr(fits, ' ') ? ", whichever is the file's record width"
                                            : " if that is the file's record width");
    if (load_dim == 0)
        return vc_io_fail(src, VC_ERR_FORMAT,
                          "raw .bin size %zu bytes is not a multiple of 16 (4 float32 per point, "
                          "the KITTI default); %zu trailing bytes at byte offset %zu (no record "
                          "width of 3 to 8 float32 fits; --load-dim sets it)",
                          n, rest, n - rest);
    return vc_io_fail(src, VC_ERR_FORMAT,
                      "raw .bin size %zu bytes is not a multiple of %zu (load_dim %d float32 "
                      "per point); %zu trailing bytes at byte offset %zu%s%s%s",
                      n, rec, (int)dim, rest, n - rest, fits[0] ? " (it fits " : "", fits,
                      fits[0] ? " float32 per point)" : "");
}

vc_status vc_io_read_kitti(const vc_io_src *src, const uint8_t *p, size_t n, int32_t load_dim,
                           vc_cloud *out)
{
    int32_t dim = load_dim ? load_dim : 4;
    if (n % ((size_t)dim * 4) != 0) return bin_size_fail(src, n, load_dim);
    static const char *const names[4] = {"x", "y", "z", "intensity"};
    vc_cloud c;
    vc_status st = vc_io_cloud_alloc_named(src, &c, (int64_t)(n / ((size_t)dim * 4)), dim, names,
                                           dim < 4 ? dim : 4);
    if (st != VC_OK) return st;
    for (size_t i = 0; i < n / 4; i++) {
        uint32_t u = vc_ld_u32(p + 4 * i);
        memcpy(&c.data[i], &u, 4);
    }
    *out = c;
    return VC_OK;
}

/* The caller's options over the defaults, checked where they do not depend on the file. */
static vc_status take_options(const vc_io_src *src, const vc_read_options *opts,
                              vc_read_options *o)
{
    vc_read_options d = VC_READ_OPTIONS_INIT;
    if (opts) {
        if (opts->struct_size != sizeof d)
            return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                              "vc_read_options.struct_size is %u, expected %zu (initialise the "
                              "options with VC_READ_OPTIONS_INIT)",
                              (unsigned)opts->struct_size, sizeof d);
        d = *opts;
    }
    if (d.load_dim != 0 && (d.load_dim < 3 || d.load_dim > VC_IO_MAX_COLUMNS))
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                          "load_dim %d: expected 3..%d float32 per point (0 = the default, 4)",
                          (int)d.load_dim, VC_IO_MAX_COLUMNS);
    if (d.n_use_dim != 0 && (d.n_use_dim < 3 || d.n_use_dim > VC_IO_MAX_COLUMNS))
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                          "use_dim keeps %d columns: expected 3..%d (x, y, z at least; 0 = all)",
                          (int)d.n_use_dim, VC_IO_MAX_COLUMNS);
    if (d.use_dim && d.n_use_dim == 0)
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT, "use_dim is set but n_use_dim is 0");
    *o = d;
    return VC_OK;
}

/* "0 x, 1 y, 2 z, 3 intensity" (the first 8 columns, then "..."). */
static void column_list(const vc_cloud *c, char *buf, size_t cap)
{
    buf[0] = 0;
    for (int32_t i = 0; i < c->dim && i < 8; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%d %s", i ? ", " : "", (int)i, c->names[i]);
    }
    if (c->dim > 8) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, ", ...");
    }
}

/* Keeps the columns the options name, in their order; *c is replaced (or left) as a whole. */
static vc_status keep_columns(const vc_io_src *src, const vc_read_options *o, vc_cloud *c)
{
    int32_t n = o->n_use_dim;
    if (n <= 0) return VC_OK; /* 0: every column (take_options refused negative counts) */
    char cols[256];
    column_list(c, cols, sizeof cols);
    if (!o->use_dim && n > c->dim)
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                          "use_dim keeps the first %d columns, the file has %d (%s)", (int)n,
                          (int)c->dim, cols);
    for (int32_t i = 0; o->use_dim && i < n; i++)
        if (o->use_dim[i] < 0 || o->use_dim[i] >= c->dim)
            return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                              "use_dim[%d] = %d is not a column of the file: it has %d (%s)",
                              (int)i, (int)o->use_dim[i], (int)c->dim, cols);
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate column names");
    for (int32_t i = 0; i < n; i++) names[i] = c->names[o->use_dim ? o->use_dim[i] : i];
    vc_cloud k;
    vc_status st = vc_io_cloud_alloc(src, &k, c->count, n, names);
    free(names);
    if (st != VC_OK) return st;
    for (int64_t r = 0; r < c->count; r++) {
        const float *in = c->data + r * c->dim;
        float *to = k.data + r * n;
        for (int32_t i = 0; i < n; i++) to[i] = in[o->use_dim ? o->use_dim[i] : i];
    }
    vc_io_cloud_release(c);
    *c = k;
    return VC_OK;
}

/* The name of a PCD, PLY or NPY format in messages. */
static const char *format_name(vc_file_format f)
{
    static const char *const names[] = {"auto", "raw .bin", "PCD", "PLY", ".npy", ".vxt"};
    return names[f];
}

static vc_status read_memory(const vc_io_src *src, const uint8_t *p, size_t n,
                             vc_file_format format, const vc_read_options *o, vc_cloud *out)
{
    if (o->load_dim != 0 &&
        (format == VC_FORMAT_PCD || format == VC_FORMAT_PLY || format == VC_FORMAT_NPY))
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT,
                          "load_dim (--load-dim) applies to raw .bin files only; a %s file "
                          "states its own columns (use_dim selects among them)",
                          format_name(format));
    vc_cloud c;
    memset(&c, 0, sizeof c);
    vc_status st;
    switch (format) {
    case VC_FORMAT_KITTI: st = vc_io_read_kitti(src, p, n, o->load_dim, &c); break;
    case VC_FORMAT_PCD: st = vc_io_read_pcd(src, p, n, &c); break;
    case VC_FORMAT_PLY: st = vc_io_read_ply(src, p, n, &c); break;
    case VC_FORMAT_NPY: st = vc_io_read_npy_cloud(src, p, n, &c); break;
    case VC_FORMAT_VXT:
        return vc_io_fail(src, VC_ERR_UNSUPPORTED,
                          "a .vxt file holds a voxel tensor, not a point cloud "
                          "(use vc_tensor_load)");
    default:
        return vc_io_fail(src, VC_ERR_INVALID_ARGUMENT, "invalid file format %d", (int)format);
    }
    if (st == VC_OK) st = keep_columns(src, o, &c);
    if (st != VC_OK) {
        vc_io_cloud_release(&c);
        return st;
    }
    *out = c;
    return VC_OK;
}

vc_status vc_cloud_read_memory_ex(vc_context *ctx, const void *bytes, size_t size,
                                  vc_file_format format, const vc_read_options *opts,
                                  vc_cloud *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, "<memory>"};
    vc_read_options o;
    if (!out || (!bytes && size > 0))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL bytes or output");
    if (format == VC_FORMAT_AUTO)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT,
                          "vc_cloud_read_memory needs an explicit format, not AUTO");
    vc_status st = take_options(&src, opts, &o);
    if (st != VC_OK) return st;
    static const uint8_t empty[1] = {0};
    return read_memory(&src, bytes ? bytes : empty, size, format, &o, out);
}

vc_status vc_cloud_read_memory(vc_context *ctx, const void *bytes, size_t size,
                               vc_file_format format, vc_cloud *out)
{
    return vc_cloud_read_memory_ex(ctx, bytes, size, format, NULL, out);
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

vc_status vc_cloud_read_ex(vc_context *ctx, const char *path, vc_file_format format,
                           const vc_read_options *opts, vc_cloud *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    vc_read_options o;
    if (!path || !out) return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL path or output");
    if ((int)format < VC_FORMAT_AUTO || (int)format > VC_FORMAT_VXT)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "invalid file format %d", (int)format);
    vc_status st = take_options(&src, opts, &o);
    if (st != VC_OK) return st;
    /* The name decides AUTO for a .bin, so this needs no read. */
    if ((format == VC_FORMAT_AUTO || format == VC_FORMAT_KITTI) && o.load_dim == 0 &&
        ends_with(path, ".pcd.bin"))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT,
                          "nuScenes .pcd.bin files hold 5 float32 per point (x, y, z, intensity, "
                          "ring index), not KITTI's 4: pass --load-dim 5 "
                          "(vc_read_options.load_dim), or --load-dim 4 if this one holds 4");
    uint8_t *data;
    size_t n;
    st = vc_io_read_file(ctx, path, &data, &n);
    if (st != VC_OK) return st;
    if (format == VC_FORMAT_AUTO) {
        format = guess_format(path, data, n);
        if (format == VC_FORMAT_AUTO) {
            free(data);
            return vc_io_fail(&src, VC_ERR_FORMAT,
                              "cannot tell the format (no known extension or magic bytes)");
        }
    }
    st = read_memory(&src, data, n, format, &o, out);
    free(data);
    return st;
}

vc_status vc_cloud_read(vc_context *ctx, const char *path, vc_file_format format,
                        vc_cloud *out)
{
    return vc_cloud_read_ex(ctx, path, format, NULL, out);
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
