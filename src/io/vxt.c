/* src/io/vxt.c - the voxconv voxel-tensor file (.vxt), version 1: a 64-byte little-endian
 * header (magic "VXCT", version, header size, dtype, count, channels, spatial shape, batch
 * size, payload size, payload CRC-32, header CRC-32), then int32 coordinates [N, 4] and the
 * features [N, C] in the tensor's dtype. The byte-by-byte layout and the version rules are in
 * docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "src/io/io.h"

#define VXT_VERSION 1u
#define VXT_HEADER_SIZE 64u

static int host_is_le(void)
{
    uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Converts `n` elements of `esize` (2 or 4) bytes between host order and little-endian in
 * place (the same swap both ways). */
static void swap_le(void *data, int64_t n, int esize)
{
    if (host_is_le()) return;
    uint8_t *p = data;
    for (int64_t i = 0; i < n; i++, p += esize)
        for (int k = 0; k < esize / 2; k++) {
            uint8_t t = p[k];
            p[k] = p[esize - 1 - k];
            p[esize - 1 - k] = t;
        }
}

static int dtype_bytes(uint32_t dt)
{
    switch (dt) {
    case VC_DTYPE_FP32: return 4;
    case VC_DTYPE_FP16: case VC_DTYPE_BF16: return 2;
    default: return 0;
    }
}

vc_status vc_io_read_vxt(const vc_io_src *src, const uint8_t *p, size_t n, vc_tensor **out)
{
    if (n >= 4 && memcmp(p, "VXCT", 4) != 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 0: no VXCT magic (not a .vxt file)");
    if (n < VXT_HEADER_SIZE)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: file ends inside the %u-byte header",
                          n, VXT_HEADER_SIZE);
    uint32_t version = vc_ld_u32(p + 4), hsize = vc_ld_u32(p + 8);
    if (version != VXT_VERSION)
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte 4: .vxt version %u (this library "
                          "reads version %u)", version, VXT_VERSION);
    if (hsize < VXT_HEADER_SIZE || hsize > n)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 8: header size %u (at least %u, at most "
                          "the %zu bytes of the file)", hsize, VXT_HEADER_SIZE, n);
    uint32_t hcrc = vc_crc32(vc_crc32(0, p, 60), p + VXT_HEADER_SIZE, hsize - VXT_HEADER_SIZE);
    if (hcrc != vc_ld_u32(p + 60))
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 60: header checksum mismatch (stored "
                          "0x%08x, computed 0x%08x): corrupt header", vc_ld_u32(p + 60), hcrc);
    uint32_t dt = vc_ld_u32(p + 12);
    int64_t count = (int64_t)vc_ld_u64(p + 16), channels = (int64_t)vc_ld_u64(p + 24);
    int32_t shape[3] = {(int32_t)vc_ld_u32(p + 32), (int32_t)vc_ld_u32(p + 36),
                        (int32_t)vc_ld_u32(p + 40)};
    int32_t batch = (int32_t)vc_ld_u32(p + 44);
    uint64_t psize = vc_ld_u64(p + 48);
    uint32_t pcrc = vc_ld_u32(p + 56);
    int esize = dtype_bytes(dt);
    if (!esize)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 12: dtype %u (0 fp32, 1 fp16, 2 bf16)", dt);
    if (count < 0 || channels < 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %d: negative %s", count < 0 ? 16 : 24,
                          count < 0 ? "count" : "channels");
    if (count > VC_MAX_ROWS || channels > VC_MAX_CHANNELS)
        return vc_io_fail(src, VC_ERR_LIMIT, "byte %d: %s %lld over the limit %lld",
                          count > VC_MAX_ROWS ? 16 : 24, count > VC_MAX_ROWS ? "count" :
                          "channels", (long long)(count > VC_MAX_ROWS ? count : channels),
                          (long long)(count > VC_MAX_ROWS ? VC_MAX_ROWS : VC_MAX_CHANNELS));
    for (int a = 0; a < 3; a++)
        if (shape[a] < 1)
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %d: spatial shape %d", 32 + 4 * a,
                              (int)shape[a]);
    if (batch < 1)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 44: batch size %d", (int)batch);
    int64_t cbytes = count * 16, fbytes, total; /* count <= 2^31: no overflow */
    if (vc_mul_overflow_i64(count, channels, &fbytes) ||
        vc_mul_overflow_i64(fbytes, esize, &fbytes) || fbytes > INT64_MAX - cbytes)
        return vc_io_fail(src, VC_ERR_LIMIT, "byte 16: %lld x %lld features overflow",
                          (long long)count, (long long)channels);
    total = cbytes + fbytes;
    if (psize != (uint64_t)total)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 48: payload size %llu != %lld implied by "
                          "count and channels", (unsigned long long)psize, (long long)total);
    if ((uint64_t)total != (uint64_t)(n - hsize))
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %u: payload of %lld bytes, but %zu bytes "
                          "follow the header (%s)", hsize, (long long)total, n - hsize,
                          (uint64_t)total > (uint64_t)(n - hsize) ? "truncated" :
                          "trailing bytes");
    const uint8_t *pay = p + hsize;
    uint32_t crc = vc_crc32(0, pay, (size_t)total);
    if (crc != pcrc)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 56: payload checksum mismatch (stored "
                          "0x%08x, computed 0x%08x): corrupt data", pcrc, crc);
    int32_t *coords = malloc(cbytes > 0 ? (size_t)cbytes : 1);
    void *feats = malloc(fbytes > 0 ? (size_t)fbytes : 1);
    if (!coords || !feats) {
        free(coords);
        free(feats);
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                          (long long)total);
    }
    memcpy(coords, pay, (size_t)cbytes);
    memcpy(feats, pay + cbytes, (size_t)fbytes);
    swap_le(coords, count * 4, 4);
    swap_le(feats, count * channels, esize);
    vc_coords *cs = NULL;
    vc_tensor *t = NULL;
    vc_status st = vc_coords_create(src->ctx, coords, count, VC_MEMORY_HOST, shape, batch, &cs);
    if (st == VC_OK) {
        st = vc_tensor_create(src->ctx, cs, channels, (vc_dtype)dt, feats, VC_MEMORY_HOST, &t);
        vc_coords_destroy(cs); /* the tensor holds the only reference now */
    }
    free(coords);
    free(feats);
    if (st != VC_OK) {
        /* Keep the constructor's message and say which file it came from. */
        const char *m = vc_context_last_error(src->ctx);
        char buf[400];
        snprintf(buf, sizeof buf, "%s", m ? m : "");
        return vc_io_fail(src, st, "%s", buf);
    }
    *out = t;
    return VC_OK;
}

vc_status vc_tensor_load_memory(vc_context *ctx, const void *bytes, size_t size,
                                vc_tensor **out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, "<memory>"};
    if (!ctx || !out || (!bytes && size > 0))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL context, bytes or output");
    static const uint8_t empty[1] = {0};
    return vc_io_read_vxt(&src, bytes ? bytes : empty, size, out);
}

vc_status vc_tensor_load(vc_context *ctx, const char *path, vc_tensor **out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    if (!ctx || !path || !out)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL context, path or output");
    uint8_t *data;
    size_t n;
    vc_status st = vc_io_read_file(ctx, path, &data, &n);
    if (st != VC_OK) return st;
    st = vc_io_read_vxt(&src, data, n, out);
    free(data);
    return st;
}

/* vc_tensor_save (to `path`, published at the end) and vc_tensor_save_output (into `out`). */
static vc_status save_tensor(vc_context *ctx, const vc_tensor *tensor, const char *path,
                             vc_output *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : out ? vc_io_output_name(out) : "(null)"};
    if (!ctx || !tensor || (!path && !out))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL context, tensor or path");
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_status st = vc_tensor_get_info(tensor, &ti);
    if (st == VC_OK) st = vc_coords_get_info(ti.coords, &ci);
    if (st != VC_OK) return st;
    int esize = dtype_bytes((uint32_t)ti.dtype);
    if (!esize)
        return vc_io_fail(&src, VC_ERR_UNSUPPORTED, "tensor dtype %d cannot be saved",
                          (int)ti.dtype);
    int64_t cbytes, fbytes, total;
    if (vc_mul_overflow_i64(ti.count, 16, &cbytes) ||
        vc_mul_overflow_i64(ti.count, ti.channels, &fbytes) ||
        vc_mul_overflow_i64(fbytes, esize, &fbytes) || fbytes > INT64_MAX - cbytes ||
        (uint64_t)(total = cbytes + fbytes) > (uint64_t)SIZE_MAX)
        return vc_io_fail(&src, VC_ERR_LIMIT, "tensor too large");
    uint8_t *pay = malloc(total > 0 ? (size_t)total : 1);
    if (!pay)
        return vc_io_fail(&src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                          (long long)total);
    if (ti.count > 0) {
        st = vc_coords_copy_out(ctx, ti.coords, (int32_t *)pay, VC_MEMORY_HOST);
        if (st == VC_OK && fbytes > 0)
            st = vc_tensor_copy_out(ctx, tensor, pay + cbytes, ti.dtype, VC_MEMORY_HOST);
        if (st != VC_OK) {
            free(pay);
            return st;
        }
    }
    swap_le(pay, ti.count * 4, 4);
    swap_le(pay + cbytes, ti.count * ti.channels, esize);
    uint8_t h[VXT_HEADER_SIZE];
    memset(h, 0, sizeof h);
    memcpy(h, "VXCT", 4);
    vc_st_u32(h + 4, VXT_VERSION);
    vc_st_u32(h + 8, VXT_HEADER_SIZE);
    vc_st_u32(h + 12, (uint32_t)ti.dtype);
    vc_st_u64(h + 16, (uint64_t)ti.count);
    vc_st_u64(h + 24, (uint64_t)ti.channels);
    for (int a = 0; a < 3; a++) vc_st_u32(h + 32 + 4 * a, (uint32_t)ci.spatial_shape[a]);
    vc_st_u32(h + 44, (uint32_t)ci.batch_size);
    vc_st_u64(h + 48, (uint64_t)total);
    vc_st_u32(h + 56, vc_crc32(0, pay, (size_t)total));
    vc_st_u32(h + 60, vc_crc32(0, h, 60));
    vc_io_writer w;
    if ((path ? vc_io_writer_open(&w, ctx, path) : vc_io_writer_attach(&w, ctx, out)) != VC_OK) {
        free(pay);
        return vc_io_writer_close(&w);
    }
    vc_io_writer_put(&w, h, sizeof h);
    vc_io_writer_put(&w, pay, (size_t)total);
    free(pay);
    return vc_io_writer_close(&w);
}

vc_status vc_tensor_save(vc_context *ctx, const vc_tensor *tensor, const char *path)
{
    return save_tensor(ctx, tensor, path, NULL);
}

vc_status vc_tensor_save_output(vc_context *ctx, const vc_tensor *tensor, vc_output *out)
{
    if (!out) {
        vc_io_begin(ctx);
        vc_io_src src = {ctx, "(null)"};
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL output");
    }
    return save_tensor(ctx, tensor, NULL, out);
}
