/* src/io/npy.c - NumPy .npy arrays: read versions 1.0, 2.0 and 3.0 (C order, little-endian
 * float32, float16, int32; int64 and float64 converted when every value fits), write version
 * 1.0; and float32 [N, D >= 3] arrays read as point clouds. The header dict is parsed by hand,
 * never evaluated. See docs/formats.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "src/io/io.h"

#define NPY_MAX_DIMS 8

typedef struct npy_hdr {
    char descr[16];
    int fortran;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int have_descr, have_fortran, have_shape;
} npy_hdr;

typedef struct npy_cur {
    const char *s, *end;
    size_t base; /* byte offset of the header text in the file, for messages */
} npy_cur;

static void skip_ws(npy_cur *c)
{
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r'))
        c->s++;
}

static size_t at(const npy_cur *c, const char *hdr) { return c->base + (size_t)(c->s - hdr); }

/* A quoted string ('...' or "...", no escapes); 0 on success. */
static int parse_str(npy_cur *c, const char **str, size_t *len)
{
    if (c->s >= c->end || (*c->s != '\'' && *c->s != '"')) return -1;
    char q = *c->s++;
    const char *b = c->s;
    while (c->s < c->end && *c->s != q) {
        if (*c->s == '\\') return -1;
        c->s++;
    }
    if (c->s >= c->end) return -1;
    *str = b;
    *len = (size_t)(c->s - b);
    c->s++;
    return 0;
}

static int parse_word(npy_cur *c, const char *w)
{
    size_t l = strlen(w);
    if ((size_t)(c->end - c->s) < l || memcmp(c->s, w, l) != 0) return -1;
    c->s += l;
    return 0;
}

static vc_status parse_dict(const vc_io_src *src, const char *hdr, size_t len, size_t base,
                            npy_hdr *h)
{
    npy_cur c = {hdr, hdr + len, base};
    skip_ws(&c);
    if (c.s >= c.end || *c.s != '{')
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: header is not a dict", at(&c, hdr));
    c.s++;
    for (;;) {
        skip_ws(&c);
        if (c.s < c.end && *c.s == '}') {
            c.s++;
            break;
        }
        const char *key;
        size_t kl;
        if (parse_str(&c, &key, &kl) != 0)
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: expected a quoted key or '}'",
                              at(&c, hdr));
        skip_ws(&c);
        if (c.s >= c.end || *c.s != ':')
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: expected ':'", at(&c, hdr));
        c.s++;
        skip_ws(&c);
        if (vc_tok_eq(key, kl, "descr")) {
            const char *v;
            size_t vl;
            if (h->have_descr)
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'descr' given twice",
                                  at(&c, hdr));
            if (c.s < c.end && *c.s == '[')
                return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte %zu: structured dtypes are "
                                  "not supported", at(&c, hdr));
            if (parse_str(&c, &v, &vl) != 0 || vl >= sizeof h->descr)
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'descr' is not a short "
                                  "string", at(&c, hdr));
            memcpy(h->descr, v, vl);
            h->descr[vl] = 0;
            h->have_descr = 1;
        } else if (vc_tok_eq(key, kl, "fortran_order")) {
            if (h->have_fortran)
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'fortran_order' given twice",
                                  at(&c, hdr));
            if (parse_word(&c, "True") == 0) h->fortran = 1;
            else if (parse_word(&c, "False") == 0) h->fortran = 0;
            else
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'fortran_order' is not True "
                                  "or False", at(&c, hdr));
            h->have_fortran = 1;
        } else if (vc_tok_eq(key, kl, "shape")) {
            if (h->have_shape)
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'shape' given twice",
                                  at(&c, hdr));
            if (c.s >= c.end || *c.s != '(')
                return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: 'shape' is not a tuple",
                                  at(&c, hdr));
            c.s++;
            for (;;) {
                skip_ws(&c);
                if (c.s < c.end && *c.s == ')') {
                    c.s++;
                    break;
                }
                const char *d = c.s;
                while (c.s < c.end && *c.s >= '0' && *c.s <= '9') c.s++;
                int64_t v;
                if (c.s == d || vc_parse_i64(d, (size_t)(c.s - d), &v) != 0)
                    return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: bad shape dimension",
                                      at(&c, hdr));
                if (c.s < c.end && *c.s == 'L') c.s++; /* Python 2 long */
                if (h->ndim == NPY_MAX_DIMS)
                    return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte %zu: more than %d "
                                      "dimensions", at(&c, hdr), NPY_MAX_DIMS);
                h->shape[h->ndim++] = v;
                skip_ws(&c);
                if (c.s < c.end && *c.s == ',') {
                    c.s++;
                } else if (c.s >= c.end || *c.s != ')') {
                    return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: expected ',' or ')' in "
                                      "shape", at(&c, hdr));
                }
            }
            h->have_shape = 1;
        } else {
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: unexpected key '%.*s'",
                              at(&c, hdr), (int)(kl > 32 ? 32 : kl), key);
        }
        skip_ws(&c);
        if (c.s < c.end && *c.s == ',') {
            c.s++;
        } else if (c.s >= c.end || *c.s != '}') {
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: expected ',' or '}'", at(&c, hdr));
        }
    }
    skip_ws(&c);
    if (c.s != c.end && !(c.s + 1 == c.end && *c.s == 0))
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: text after the header dict",
                          at(&c, hdr));
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return vc_io_fail(src, VC_ERR_FORMAT, "header lacks %s", !h->have_descr ? "'descr'" :
                          !h->have_fortran ? "'fortran_order'" : "'shape'");
    return VC_OK;
}

vc_status vc_io_read_npy(const vc_io_src *src, const uint8_t *p, size_t n, vc_array *out)
{
    if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "no \\x93NUMPY magic (not a .npy file)");
    int major = p[6], minor = p[7];
    size_t pre, hlen;
    if (major == 1) {
        pre = 10;
        hlen = vc_ld_u16(p + 8);
    } else if (major == 2 || major == 3) {
        if (n < 12) return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: truncated preamble", n);
        pre = 12;
        hlen = vc_ld_u32(p + 8);
    } else {
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte 6: .npy version %d.%d (1.0, 2.0 and "
                          "3.0 are read)", major, minor);
    }
    if (minor != 0)
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte 7: .npy version %d.%d", major, minor);
    if (hlen > n - pre)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte 8: header length %zu but only %zu bytes "
                          "follow", hlen, n - pre);
    npy_hdr h;
    memset(&h, 0, sizeof h);
    vc_status st = parse_dict(src, (const char *)p + pre, hlen, pre, &h);
    if (st != VC_OK) return st;
    if (h.fortran)
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "fortran_order True is not supported (save "
                          "a C-order array)");
    const char *d = h.descr;
    if (d[0] == '>' || d[0] == '=')
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "dtype '%s': only little-endian ('<') "
                          "arrays are read", d);
    int in_size;
    vc_dtype dt;
    if (strcmp(d, "<f4") == 0) { in_size = 4; dt = VC_DTYPE_FP32; }
    else if (strcmp(d, "<f2") == 0) { in_size = 2; dt = VC_DTYPE_FP16; }
    else if (strcmp(d, "<i4") == 0) { in_size = 4; dt = VC_DTYPE_INT32; }
    else if (strcmp(d, "<f8") == 0) { in_size = 8; dt = VC_DTYPE_FP32; }
    else if (strcmp(d, "<i8") == 0) { in_size = 8; dt = VC_DTYPE_INT32; }
    else
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "dtype '%s' (read: <f4 <f2 <i4, and <f8 <i8 "
                          "converted)", d);
    int64_t elems = 1, bytes;
    for (int i = 0; i < h.ndim; i++)
        if (h.shape[i] > VC_IO_MAX_DIM)
            return vc_io_fail(src, VC_ERR_LIMIT, "shape dimension %d is %lld (at most %lld)", i,
                              (long long)h.shape[i], (long long)VC_IO_MAX_DIM);
    for (int i = 0; i < h.ndim; i++)
        if (vc_mul_overflow_i64(elems, h.shape[i], &elems))
            return vc_io_fail(src, VC_ERR_FORMAT, "shape product overflows");
    size_t data_at = pre + hlen;
    if (vc_mul_overflow_i64(elems, in_size, &bytes) || bytes != (int64_t)(n - data_at))
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: %lld elements of %d bytes, but %zu "
                          "data bytes are present", data_at, (long long)elems, in_size,
                          n - data_at);
    int64_t out_bytes = elems * (dt == VC_DTYPE_FP16 ? 2 : 4);
    if (out_bytes > VC_IO_MAX_ALLOC)
        return vc_io_fail(src, VC_ERR_LIMIT, "%lld bytes of data", (long long)out_bytes);
    void *buf = malloc(out_bytes > 0 ? (size_t)out_bytes : 1);
    if (!buf)
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                          (long long)out_bytes);
    const uint8_t *q = p + data_at;
    for (int64_t i = 0; i < elems; i++) {
        const uint8_t *e = q + i * in_size;
        if (in_size == 2) {
            ((uint16_t *)buf)[i] = vc_ld_u16(e);
        } else if (in_size == 4) {
            uint32_t u = vc_ld_u32(e);
            memcpy((char *)buf + 4 * i, &u, 4);
        } else if (dt == VC_DTYPE_FP32) {
            double v = vc_io_load(e, VC_IO_F64);
            float f = (float)v;
            if (isfinite(v) && !isfinite(f)) {
                free(buf);
                return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte %lld: float64 element %lld "
                                  "(%g) does not fit in float32", (long long)(data_at + 8 * i),
                                  (long long)i, v);
            }
            ((float *)buf)[i] = f;
        } else {
            int64_t v = (int64_t)vc_ld_u64(e);
            if (v < INT32_MIN || v > INT32_MAX) {
                free(buf);
                return vc_io_fail(src, VC_ERR_UNSUPPORTED, "byte %lld: int64 element %lld "
                                  "(%lld) does not fit in int32", (long long)(data_at + 8 * i),
                                  (long long)i, (long long)v);
            }
            ((int32_t *)buf)[i] = (int32_t)v;
        }
    }
    out->data = buf;
    out->dtype = dt;
    out->ndim = h.ndim;
    for (int i = 0; i < NPY_MAX_DIMS; i++) out->shape[i] = i < h.ndim ? h.shape[i] : 0;
    return VC_OK;
}

vc_status vc_io_read_npy_cloud(const vc_io_src *src, const uint8_t *p, size_t n,
                               vc_cloud *out)
{
    vc_array a;
    vc_status st = vc_io_read_npy(src, p, n, &a);
    if (st != VC_OK) return st;
    if (a.ndim != 2 || a.shape[1] < 3 || a.dtype == VC_DTYPE_INT32) {
        st = vc_io_fail(src, a.dtype == VC_DTYPE_INT32 ? VC_ERR_UNSUPPORTED : VC_ERR_FORMAT,
                        "a point cloud .npy must be float [N, D >= 3]; this one is %s of %d "
                        "dimensions", a.dtype == VC_DTYPE_INT32 ? "int" : "float", (int)a.ndim);
        free(a.data);
        return st;
    }
    if (a.shape[1] > VC_IO_MAX_COLUMNS) {
        free(a.data);
        return vc_io_fail(src, VC_ERR_LIMIT, "%lld columns (at most %d)",
                          (long long)a.shape[1], VC_IO_MAX_COLUMNS);
    }
    int32_t dim = (int32_t)a.shape[1];
    char(*nbuf)[16] = malloc((size_t)dim * sizeof *nbuf);
    const char **names = malloc((size_t)dim * sizeof *names);
    vc_cloud c;
    if (!nbuf || !names) {
        st = vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int32_t i = 0; i < dim; i++) {
            if (i < 3) snprintf(nbuf[i], sizeof nbuf[i], "%c", "xyz"[i]);
            else snprintf(nbuf[i], sizeof nbuf[i], "c%d", (int)i);
            names[i] = nbuf[i];
        }
        st = vc_io_cloud_alloc(src, &c, a.shape[0], dim, names);
    }
    if (st == VC_OK) {
        int64_t total = a.shape[0] * dim;
        if (a.dtype == VC_DTYPE_FP32)
            memcpy(c.data, a.data, (size_t)total * 4);
        else
            for (int64_t i = 0; i < total; i++)
                c.data[i] = vc_f16_to_f32(((const uint16_t *)a.data)[i]);
        *out = c;
    }
    free(nbuf);
    free(names);
    free(a.data);
    return st;
}

vc_status vc_npy_read_memory(vc_context *ctx, const void *bytes, size_t size, vc_array *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, "<memory>"};
    if (!out || (!bytes && size > 0))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL bytes or output");
    static const uint8_t empty[1] = {0};
    return vc_io_read_npy(&src, bytes ? bytes : empty, size, out);
}

vc_status vc_npy_read(vc_context *ctx, const char *path, vc_array *out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    if (!path || !out) return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL path or output");
    uint8_t *data;
    size_t n;
    vc_status st = vc_io_read_file(ctx, path, &data, &n);
    if (st != VC_OK) return st;
    st = vc_io_read_npy(&src, data, n, out);
    free(data);
    return st;
}

/* vc_npy_write (to `path`, published at the end) and vc_npy_write_output (into `out`). */
static vc_status write_npy(vc_context *ctx, const char *path, vc_output *out, const vc_array *a)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : out ? vc_io_output_name(out) : "(null)"};
    if ((!path && !out) || !a)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL path or array");
    const char *descr;
    switch (a->dtype) {
    case VC_DTYPE_FP32: descr = "<f4"; break;
    case VC_DTYPE_FP16: descr = "<f2"; break;
    case VC_DTYPE_INT32: descr = "<i4"; break;
    case VC_DTYPE_BF16:
        return vc_io_fail(&src, VC_ERR_UNSUPPORTED, "bf16 has no NumPy dtype; cast to fp32");
    default:
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)a->dtype);
    }
    if (a->ndim < 0 || a->ndim > NPY_MAX_DIMS)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "ndim %d (0..8)", (int)a->ndim);
    int64_t elems = 1;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] < 0 || vc_mul_overflow_i64(elems, a->shape[i], &elems))
            return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "bad shape (dimension %d is %lld "
                              "or the product overflows)", i, (long long)a->shape[i]);
    int64_t bytes;
    if (vc_mul_overflow_i64(elems, a->dtype == VC_DTYPE_FP16 ? 2 : 4, &bytes) ||
        (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return vc_io_fail(&src, VC_ERR_LIMIT, "array too large");
    if (bytes > 0 && !a->data)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL data");
    char hdr[512];
    int l = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < a->ndim; i++)
        l += snprintf(hdr + l, sizeof hdr - (size_t)l, "%lld%s", (long long)a->shape[i],
                      a->ndim == 1 ? "," : i + 1 < a->ndim ? ", " : "");
    l += snprintf(hdr + l, sizeof hdr - (size_t)l, "), }");
    /* Pad with spaces and end with '\n' so that the data starts at a multiple of 64. */
    int total = 10 + l + 1;
    int padded = (total + 63) / 64 * 64;
    while (10 + l + 1 < padded) hdr[l++] = ' ';
    hdr[l++] = '\n';
    uint8_t pre[10];
    memcpy(pre, "\x93NUMPY\x01\x00", 8);
    vc_st_u16(pre + 8, (uint16_t)l);
    vc_io_writer w;
    if ((path ? vc_io_writer_open(&w, ctx, path) : vc_io_writer_attach(&w, ctx, out)) != VC_OK)
        return vc_io_writer_close(&w);
    vc_io_writer_put(&w, pre, 10);
    vc_io_writer_put(&w, hdr, (size_t)l);
    /* Data as little-endian. */
    vc_io_writer_put_le(&w, a->data, (size_t)elems, a->dtype == VC_DTYPE_FP16 ? 2 : 4);
    return vc_io_writer_close(&w);
}

vc_status vc_npy_write(vc_context *ctx, const char *path, const vc_array *a)
{
    return write_npy(ctx, path, NULL, a);
}

vc_status vc_npy_write_output(vc_context *ctx, vc_output *out, const vc_array *a)
{
    if (!out) {
        vc_io_begin(ctx);
        vc_io_src src = {ctx, "(null)"};
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL output");
    }
    return write_npy(ctx, NULL, out, a);
}

vc_status vc_array_free(vc_array *array)
{
    if (!array) return VC_OK;
    free(array->data);
    memset(array, 0, sizeof *array);
    return VC_OK;
}
