/* src/io/io_common.c - shared machinery of the file formats: whole-file reads with a size cap,
 * checked writes through atomic outputs (output.c), messages naming file and place, element
 * loads, the text cursor and number parsing (never past the token), CRC-32, LZF decoding and
 * the point-cloud builder. Nothing here prints, aborts or exits. */
#define _POSIX_C_SOURCE 200809L /* fstat, fileno */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/io/io.h"

vc_status vc_io_fail(const vc_io_src *src, vc_status status, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (src && src->ctx) vc_ctx_fail(src->ctx, status, "%s: %s", src->name, buf);
    return status;
}

void vc_io_begin(vc_context *ctx)
{
    if (ctx) vc_ctx_clear(ctx);
}

/* ---- whole files ------------------------------------------------------------------------ */

vc_status vc_io_read_file_max(vc_context *ctx, const char *path, int64_t max, uint8_t **data,
                              size_t *size)
{
    vc_io_src src = {ctx, path};
    FILE *f = fopen(path, "rb");
    if (!f) return vc_io_fail(&src, VC_ERR_IO, "cannot open for reading: %s", strerror(errno));
    /* A regular file's size is known before anything is read: refuse one over the limit at
     * once and allocate its size (+1 to see the end in one read). Pipes and devices grow the
     * buffer as they are read, up to the same limit. */
    size_t cap = 1 << 16, n = 0;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        if ((int64_t)sb.st_size > max) {
            fclose(f);
            return vc_io_fail(&src, VC_ERR_LIMIT, "file of %lld bytes is larger than the limit "
                              "of %lld bytes", (long long)sb.st_size, (long long)max);
        }
        cap = (size_t)sb.st_size + 1;
    }
    uint8_t *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return vc_io_fail(&src, VC_ERR_OUT_OF_MEMORY, "cannot allocate a read buffer");
    }
    for (;;) {
        if (n == cap) {
            if ((int64_t)cap >= max) {
                free(buf);
                fclose(f);
                return vc_io_fail(&src, VC_ERR_LIMIT, "file larger than %lld bytes",
                                  (long long)max);
            }
            size_t ncap = cap * 2;
            if ((int64_t)ncap > max + 1) ncap = (size_t)max + 1;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return vc_io_fail(&src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", ncap);
            }
            buf = nb;
            cap = ncap;
        }
        size_t want = cap - n;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want) { /* end of file or an error */
            if (ferror(f)) {
                int e = errno;
                free(buf);
                fclose(f);
                return vc_io_fail(&src, VC_ERR_IO, "read failed after %zu bytes: %s", n,
                                  strerror(e));
            }
            break;
        }
    }
    fclose(f);
    if ((int64_t)n > max) {
        free(buf);
        return vc_io_fail(&src, VC_ERR_LIMIT, "file larger than %lld bytes",
                          (long long)max);
    }
    *data = buf;
    *size = n;
    return VC_OK;
}

vc_status vc_io_read_file(vc_context *ctx, const char *path, uint8_t **data, size_t *size)
{
    return vc_io_read_file_max(ctx, path, VC_IO_MAX_FILE, data, size);
}

vc_status vc_io_writer_attach(vc_io_writer *w, vc_context *ctx, vc_output *out)
{
    w->ctx = ctx;
    w->out = out;
    w->own = 0;
    w->status = VC_OK;
    w->staged = 0;
    w->f = vc_io_output_file(out);
    if (!w->f) {
        vc_io_src src = {ctx, vc_io_output_name(out)};
        w->status = vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT,
                               out ? "output already written" : "NULL output");
    }
    return w->status;
}

vc_status vc_io_writer_open(vc_io_writer *w, vc_context *ctx, const char *path)
{
    vc_output *out = NULL;
    w->ctx = ctx;
    w->out = NULL;
    w->f = NULL;
    w->own = 0;
    w->staged = 0;
    w->status = vc_output_open(ctx, path, &out);
    if (w->status != VC_OK) return w->status;
    vc_io_writer_attach(w, ctx, out);
    w->own = 1;
    return w->status;
}

static void writer_write(vc_io_writer *w, const void *data, size_t n)
{
    if (w->status != VC_OK || !w->f || n == 0) return;
    if (fwrite(data, 1, n, w->f) != n) {
        vc_io_src src = {w->ctx, vc_io_output_name(w->out)};
        w->status = vc_io_fail(&src, VC_ERR_IO, "write failed: %s", strerror(errno));
    }
}

/* Writes the staged elements: before any other bytes, and at the close. */
static void writer_flush(vc_io_writer *w)
{
    size_t n = w->staged;
    w->staged = 0;
    writer_write(w, w->stage, n);
}

void vc_io_writer_put(vc_io_writer *w, const void *data, size_t n)
{
    writer_flush(w);
    writer_write(w, data, n);
}

void vc_io_writer_put_le(vc_io_writer *w, const void *data, size_t n, size_t esz)
{
    const uint8_t *e = data;
    for (size_t i = 0; i < n; i++, e += esz) {
        if (w->staged + esz > sizeof w->stage) writer_flush(w);
        if (esz == 2) {
            uint16_t v;
            memcpy(&v, e, 2);
            vc_st_u16(w->stage + w->staged, v);
        } else {
            uint32_t v;
            memcpy(&v, e, 4);
            vc_st_u32(w->stage + w->staged, v);
        }
        w->staged += esz;
    }
}

vc_status vc_io_writer_close(vc_io_writer *w)
{
    if (!w->out) return w->status;
    if (w->f) {
        writer_flush(w);
        w->status = vc_io_output_finish(w->ctx, w->out, w->status);
        w->f = NULL;
    }
    if (w->own) {
        if (w->status == VC_OK) w->status = vc_output_publish(w->ctx, w->out);
        else vc_output_discard(w->out);
    }
    w->out = NULL;
    return w->status;
}

/* ---- elements --------------------------------------------------------------------------- */

int vc_io_kind_size(vc_io_kind k)
{
    switch (k) {
    case VC_IO_I8: case VC_IO_U8: return 1;
    case VC_IO_I16: case VC_IO_U16: return 2;
    case VC_IO_I32: case VC_IO_U32: case VC_IO_F32: return 4;
    default: return 8;
    }
}

double vc_io_load(const uint8_t *p, vc_io_kind k)
{
    switch (k) {
    case VC_IO_I8: return (double)(int8_t)p[0];
    case VC_IO_U8: return (double)p[0];
    case VC_IO_I16: return (double)(int16_t)vc_ld_u16(p);
    case VC_IO_U16: return (double)vc_ld_u16(p);
    case VC_IO_I32: return (double)(int32_t)vc_ld_u32(p);
    case VC_IO_U32: return (double)vc_ld_u32(p);
    case VC_IO_I64: return (double)(int64_t)vc_ld_u64(p);
    case VC_IO_U64: return (double)vc_ld_u64(p);
    case VC_IO_F32: {
        uint32_t u = vc_ld_u32(p);
        float f;
        memcpy(&f, &u, 4);
        return (double)f;
    }
    default: {
        uint64_t u = vc_ld_u64(p);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
}

/* ---- text ------------------------------------------------------------------------------- */

static int is_space(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' ||
                                    c == '\v' || c == '\f'; }

int vc_text_line(vc_text *t, const char **s, size_t *len)
{
    if (t->pos >= t->n) return 0;
    const uint8_t *start = t->p + t->pos;
    const uint8_t *nl = memchr(start, '\n', t->n - t->pos);
    size_t l = nl ? (size_t)(nl - start) : t->n - t->pos;
    t->pos += l + (nl ? 1 : 0);
    t->line++;
    if (l > 0 && start[l - 1] == '\r') l--;
    *s = (const char *)start;
    *len = l;
    return 1;
}

int vc_text_token(vc_text *t, const char **s, size_t *len)
{
    while (t->pos < t->n && is_space(t->p[t->pos])) {
        if (t->p[t->pos] == '\n') t->line++;
        t->pos++;
    }
    if (t->pos >= t->n) return 0;
    size_t b = t->pos;
    while (t->pos < t->n && !is_space(t->p[t->pos])) t->pos++;
    *s = (const char *)t->p + b;
    *len = t->pos - b;
    return 1;
}

int vc_tok(const char **s, const char *end, const char **tok, size_t *len)
{
    const char *q = *s;
    while (q < end && is_space((unsigned char)*q)) q++;
    if (q >= end) {
        *s = q;
        return 0;
    }
    const char *b = q;
    while (q < end && !is_space((unsigned char)*q)) q++;
    *tok = b;
    *len = (size_t)(q - b);
    *s = q;
    return 1;
}

int vc_tok_eq(const char *tok, size_t len, const char *word)
{
    return strlen(word) == len && memcmp(tok, word, len) == 0;
}

int vc_tok_ieq(const char *tok, size_t len, const char *word)
{
    if (strlen(word) != len) return 0;
    for (size_t i = 0; i < len; i++) {
        int a = (unsigned char)tok[i], b = (unsigned char)word[i];
        if (a >= 'A' && a <= 'Z') a += 32;
        if (b >= 'A' && b <= 'Z') b += 32;
        if (a != b) return 0;
    }
    return 1;
}

int vc_parse_double(const char *tok, size_t len, double *out)
{
    /* strtod needs a terminated string: copy the token (the stack for the usual short one, the
     * heap for a long one, so a number of any length parses and nothing past it is read). */
    char small[80], *buf = small;
    if (len == 0) return -1;
    if (len >= sizeof small) {
        if (len == SIZE_MAX || !(buf = malloc(len + 1))) return -1;
    }
    memcpy(buf, tok, len);
    buf[len] = 0;
    /* strtod also takes hex floats and leading spaces; tokens have no spaces, and hex is
     * harmless. Refuse anything that is not entirely a number. */
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    int ok = end == buf + len && !(errno == ERANGE && isinf(v)); /* underflow to 0 is fine */
    if (buf != small) free(buf);
    if (!ok) return -1;
    *out = v;
    return 0;
}

int vc_parse_i64(const char *tok, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (len == 0) return -1;
    if (tok[0] == '+' || tok[0] == '-') {
        neg = tok[0] == '-';
        i = 1;
    }
    if (i >= len) return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9') return -1;
        uint64_t d = (uint64_t)(tok[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* ---- CRC-32 ----------------------------------------------------------------------------- */

uint32_t vc_crc32(uint32_t crc, const void *data, size_t n)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* ---- LZF -------------------------------------------------------------------------------- */

/* A fault at input byte `at` of the compressed data (file byte base + at). */
static vc_status lzf_fault(const vc_io_src *src, size_t base, size_t at, const char *why)
{
    return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: corrupt LZF data: %s", base + at, why);
}

vc_status vc_lzf_decode(const vc_io_src *src, size_t base, const uint8_t *in, size_t in_n,
                        uint8_t *out, size_t out_n)
{
    size_t ip = 0, op = 0;
    while (ip < in_n) {
        size_t at = ip;
        unsigned c = in[ip++];
        if (c < 32) { /* literal run of c + 1 bytes */
            size_t len = (size_t)c + 1;
            if (len > in_n - ip)
                return lzf_fault(src, base, at, "literal run past the end of the compressed data");
            if (len > out_n - op)
                return lzf_fault(src, base, at, "literal run past the declared uncompressed size");
            memcpy(out + op, in + ip, len);
            ip += len;
            op += len;
        } else { /* back-reference */
            size_t len = c >> 5;
            if (len == 7) {
                if (ip >= in_n)
                    return lzf_fault(src, base, at, "back-reference length past the end of the "
                                     "compressed data");
                len += in[ip++];
            }
            if (ip >= in_n)
                return lzf_fault(src, base, at, "back-reference offset past the end of the "
                                 "compressed data");
            size_t off = ((size_t)(c & 0x1fu) << 8) + in[ip++] + 1;
            len += 2;
            if (off > op)
                return lzf_fault(src, base, at, "back-reference before the start of the output");
            if (len > out_n - op)
                return lzf_fault(src, base, at, "back-reference past the declared uncompressed "
                                 "size");
            const uint8_t *ref = out + op - off;
            for (size_t i = 0; i < len; i++) out[op + i] = ref[i]; /* may overlap: bytewise */
            op += len;
        }
    }
    if (op != out_n)
        return lzf_fault(src, base, in_n, "decoded size is smaller than the declared "
                         "uncompressed size");
    return VC_OK;
}

/* ---- clouds ----------------------------------------------------------------------------- */

void vc_io_cloud_release(vc_cloud *c)
{
    if (!c) return;
    if (c->names) {
        for (int32_t i = 0; i < c->dim; i++) free(c->names[i]);
        free(c->names);
    }
    free(c->data);
    memset(c, 0, sizeof *c);
}

vc_status vc_io_cloud_alloc(const vc_io_src *src, vc_cloud *c, int64_t count, int32_t dim,
                            const char *const *names)
{
    return vc_io_cloud_alloc_named(src, c, count, dim, names, dim);
}

vc_status vc_io_cloud_alloc_named(const vc_io_src *src, vc_cloud *c, int64_t count,
                                  int32_t dim, const char *const *names, int32_t nnamed)
{
    memset(c, 0, sizeof *c);
    if (dim < 3 || dim > VC_IO_MAX_COLUMNS)
        return vc_io_fail(src, VC_ERR_LIMIT, "%d columns (at most %d)", (int)dim,
                          VC_IO_MAX_COLUMNS);
    int64_t elems, bytes;
    if (count < 0 || vc_mul_overflow_i64(count, dim, &elems) ||
        vc_mul_overflow_i64(elems, 4, &bytes) || bytes > VC_IO_MAX_ALLOC)
        return vc_io_fail(src, VC_ERR_LIMIT, "%lld points of %d columns exceed %lld bytes",
                          (long long)count, (int)dim, (long long)VC_IO_MAX_ALLOC);
    c->data = malloc(bytes > 0 ? (size_t)bytes : 1);
    c->names = calloc((size_t)dim, sizeof(char *));
    if (!c->data || !c->names) {
        free(c->data);
        free(c->names);
        memset(c, 0, sizeof *c);
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes of points",
                          (long long)bytes);
    }
    c->count = count;
    c->dim = dim;
    for (int32_t i = 0; i < dim; i++) {
        char numbered[16];
        snprintf(numbered, sizeof numbered, "c%d", (int)i);
        const char *name = i < nnamed ? names[i] : numbered;
        size_t l = strlen(name);
        c->names[i] = malloc(l + 1);
        if (!c->names[i]) {
            vc_io_cloud_release(c);
            return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate column names");
        }
        memcpy(c->names[i], name, l + 1);
    }
    return VC_OK;
}
