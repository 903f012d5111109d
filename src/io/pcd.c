/* src/io/pcd.c - PCD point clouds (PCL's format, v0.7 and older headers): DATA ascii, binary
 * (array of structs) and binary_compressed (LZF, structure of arrays). Fields of COUNT > 1
 * become one column per element (name_0, name_1, ...); a 4-byte rgb or rgba field is unpacked
 * into r, g, b (and a) columns of 0..255; fields named "_" (padding) are skipped. Every size in
 * the header is checked against the bytes present before anything is allocated.
 * See docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "src/io/io.h"

typedef struct pcd_field {
    char name[VC_IO_MAX_NAME + 1];
    int size;           /* bytes per element */
    char type;          /* F, I or U */
    int64_t count;      /* elements */
    vc_io_kind kind;
    int64_t offset;     /* byte offset in a binary (AoS) point */
    int64_t soa_offset; /* byte offset of the field block in binary_compressed data */
} pcd_field;

typedef struct pcd_col {
    int field;
    int64_t elem;
    int rgb_shift; /* >= 0: byte (shift in bits) of a packed rgb/rgba value; -1: plain */
    char name[VC_IO_MAX_NAME + 24];
} pcd_col;

typedef struct pcd_hdr {
    pcd_field *fields;
    int nfields;
    int have_size, have_type, have_count;
    int64_t width, height, points;
    int have_width, have_height, have_points;
    enum { PCD_ASCII, PCD_BINARY, PCD_COMPRESSED } data;
    pcd_col *cols;
    int ncols;
} pcd_hdr;

static int count_tokens(const char *s, const char *end)
{
    const char *t;
    size_t l;
    int n = 0;
    while (vc_tok(&s, end, &t, &l)) n++;
    return n;
}

static int kind_of(char type, int size, vc_io_kind *k)
{
    switch (type) {
    case 'F':
        if (size == 4) { *k = VC_IO_F32; return 0; }
        if (size == 8) { *k = VC_IO_F64; return 0; }
        return -1;
    case 'I':
        switch (size) {
        case 1: *k = VC_IO_I8; return 0;
        case 2: *k = VC_IO_I16; return 0;
        case 4: *k = VC_IO_I32; return 0;
        case 8: *k = VC_IO_I64; return 0;
        default: return -1;
        }
    case 'U':
        switch (size) {
        case 1: *k = VC_IO_U8; return 0;
        case 2: *k = VC_IO_U16; return 0;
        case 4: *k = VC_IO_U32; return 0;
        case 8: *k = VC_IO_U64; return 0;
        default: return -1;
        }
    default: return -1;
    }
}

/* Parses the header; on success t->pos is at the first data byte. */
static vc_status parse_header(const vc_io_src *src, vc_text *t, pcd_hdr *h)
{
    const char *line;
    size_t len;
    int have_fields = 0, have_data = 0;
    while (!have_data && vc_text_line(t, &line, &len)) {
        const char *s = line, *end = line + len, *key;
        size_t klen;
        if (len > 0 && line[0] == '#') continue;
        if (!vc_tok(&s, end, &key, &klen)) continue; /* blank line */
        long long ln = (long long)t->line;
        if (vc_tok_ieq(key, klen, "VERSION") || vc_tok_ieq(key, klen, "VIEWPOINT")) {
            continue;
        } else if (vc_tok_ieq(key, klen, "FIELDS") || vc_tok_ieq(key, klen, "COLUMNS")) {
            if (have_fields)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: FIELDS given twice", ln);
            int n = count_tokens(s, end);
            if (n == 0) return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: FIELDS is empty", ln);
            if (n > VC_IO_MAX_FIELDS)
                return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: %d fields (at most %d)", ln, n,
                                  VC_IO_MAX_FIELDS);
            h->fields = calloc((size_t)n, sizeof *h->fields);
            if (!h->fields)
                return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %d fields", n);
            h->nfields = n;
            for (int i = 0; i < n; i++) {
                const char *tok;
                size_t tl;
                vc_tok(&s, end, &tok, &tl);
                if (tl > VC_IO_MAX_NAME)
                    return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: field name of %zu bytes",
                                      ln, tl);
                memcpy(h->fields[i].name, tok, tl);
                h->fields[i].name[tl] = 0;
                h->fields[i].size = 4;
                h->fields[i].type = 'F';
                h->fields[i].count = 1;
            }
            have_fields = 1;
        } else if (vc_tok_ieq(key, klen, "SIZE") || vc_tok_ieq(key, klen, "TYPE") ||
                   vc_tok_ieq(key, klen, "COUNT")) {
            char which = (char)(key[0] & ~0x20);
            if (!have_fields)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: %.*s before FIELDS", ln,
                                  (int)klen, key);
            if (count_tokens(s, end) != h->nfields)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: %.*s has %d values for %d "
                                  "fields", ln, (int)klen, key, count_tokens(s, end),
                                  h->nfields);
            for (int i = 0; i < h->nfields; i++) {
                const char *tok;
                size_t tl;
                int64_t v;
                vc_tok(&s, end, &tok, &tl);
                if (which == 'T') {
                    if (tl != 1 || (tok[0] != 'F' && tok[0] != 'I' && tok[0] != 'U'))
                        return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: TYPE '%.*s' of field "
                                          "%s is not F, I or U", ln, (int)(tl > 16 ? 16 : tl),
                                          tok, h->fields[i].name);
                    h->fields[i].type = tok[0];
                    continue;
                }
                if (vc_parse_i64(tok, tl, &v) != 0 || v < 1)
                    return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: %.*s of field %s is not "
                                      "a positive integer", ln, (int)klen, key,
                                      h->fields[i].name);
                if (which == 'S') {
                    if (v > 8)
                        return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: SIZE %lld of field "
                                          "%s", ln, (long long)v, h->fields[i].name);
                    h->fields[i].size = (int)v;
                } else {
                    if (v > VC_IO_MAX_COLUMNS)
                        return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: COUNT %lld of field "
                                          "%s (at most %d)", ln, (long long)v,
                                          h->fields[i].name, VC_IO_MAX_COLUMNS);
                    h->fields[i].count = v;
                }
            }
        } else if (vc_tok_ieq(key, klen, "WIDTH") || vc_tok_ieq(key, klen, "HEIGHT") ||
                   vc_tok_ieq(key, klen, "POINTS")) {
            const char *tok;
            size_t tl;
            int64_t v;
            if (count_tokens(s, end) != 1 || !vc_tok(&s, end, &tok, &tl) ||
                vc_parse_i64(tok, tl, &v) != 0 || v < 0)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: %.*s needs one non-negative "
                                  "integer", ln, (int)klen, key);
            char which = (char)(key[0] & ~0x20);
            if (which == 'W') { h->width = v; h->have_width = 1; }
            else if (which == 'H') { h->height = v; h->have_height = 1; }
            else { h->points = v; h->have_points = 1; }
        } else if (vc_tok_ieq(key, klen, "DATA")) {
            const char *tok;
            size_t tl;
            if (!vc_tok(&s, end, &tok, &tl))
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: DATA without a kind", ln);
            if (t->pos == 0 || t->p[t->pos - 1] != '\n')
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: the DATA line does not end "
                                  "with a newline (truncated file)", ln);
            if (vc_tok_ieq(tok, tl, "ascii")) h->data = PCD_ASCII;
            else if (vc_tok_ieq(tok, tl, "binary")) h->data = PCD_BINARY;
            else if (vc_tok_ieq(tok, tl, "binary_compressed")) h->data = PCD_COMPRESSED;
            else
                return vc_io_fail(src, VC_ERR_UNSUPPORTED, "line %lld: DATA '%.*s' is not ascii,"
                                  " binary or binary_compressed", ln, (int)(tl > 32 ? 32 : tl),
                                  tok);
            have_data = 1;
        } else {
            return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: unknown header line '%.*s'", ln,
                              (int)(klen > 32 ? 32 : klen), key);
        }
    }
    if (!have_fields) return vc_io_fail(src, VC_ERR_FORMAT, "no FIELDS line (not a PCD file?)");
    if (!have_data) return vc_io_fail(src, VC_ERR_FORMAT, "header ends without a DATA line");
    if (!h->have_points && !h->have_width)
        return vc_io_fail(src, VC_ERR_FORMAT, "header has neither POINTS nor WIDTH");
    if (!h->have_height) h->height = 1;
    if (!h->have_width) { h->width = h->points; h->height = 1; }
    int64_t wh;
    if (vc_mul_overflow_i64(h->width, h->height, &wh))
        return vc_io_fail(src, VC_ERR_FORMAT, "WIDTH %lld x HEIGHT %lld overflows",
                          (long long)h->width, (long long)h->height);
    if (!h->have_points) h->points = wh;
    if (h->points != wh)
        return vc_io_fail(src, VC_ERR_FORMAT, "POINTS %lld != WIDTH %lld x HEIGHT %lld",
                          (long long)h->points, (long long)h->width, (long long)h->height);
    int64_t off = 0;
    for (int i = 0; i < h->nfields; i++) {
        pcd_field *f = &h->fields[i];
        if (kind_of(f->type, f->size, &f->kind) != 0)
            return vc_io_fail(src, VC_ERR_FORMAT, "field %s: TYPE %c with SIZE %d", f->name,
                              f->type, f->size);
        f->offset = off;
        off += f->size * f->count; /* <= 1024 * 8 * 4096: no overflow */
    }
    return VC_OK;
}

/* Chooses the columns: x, y, z first, then the other fields in order. */
static vc_status plan_columns(const vc_io_src *src, pcd_hdr *h)
{
    int xyz[3] = {-1, -1, -1};
    static const char *const axis[3] = {"x", "y", "z"};
    for (int a = 0; a < 3; a++) {
        for (int i = 0; i < h->nfields && xyz[a] < 0; i++)
            if (strcmp(h->fields[i].name, axis[a]) == 0) xyz[a] = i;
        if (xyz[a] < 0) return vc_io_fail(src, VC_ERR_FORMAT, "no field named %s", axis[a]);
        if (h->fields[xyz[a]].count != 1)
            return vc_io_fail(src, VC_ERR_FORMAT, "field %s has COUNT %lld (must be 1)",
                              axis[a], (long long)h->fields[xyz[a]].count);
    }
    int64_t total = 3;
    for (int i = 0; i < h->nfields; i++) {
        pcd_field *f = &h->fields[i];
        if (i == xyz[0] || i == xyz[1] || i == xyz[2] || strcmp(f->name, "_") == 0) continue;
        int rgb = (strcmp(f->name, "rgb") == 0 || strcmp(f->name, "rgba") == 0) &&
                  f->size == 4 && f->count == 1;
        total += rgb ? (f->name[3] ? 4 : 3) : f->count;
        if (total > VC_IO_MAX_COLUMNS)
            return vc_io_fail(src, VC_ERR_LIMIT, "more than %d columns", VC_IO_MAX_COLUMNS);
    }
    h->cols = calloc((size_t)total, sizeof *h->cols);
    if (!h->cols) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate columns");
    int n = 0;
    for (int a = 0; a < 3; a++) {
        h->cols[n].field = xyz[a];
        h->cols[n].rgb_shift = -1;
        strcpy(h->cols[n].name, axis[a]);
        n++;
    }
    for (int i = 0; i < h->nfields; i++) {
        pcd_field *f = &h->fields[i];
        if (i == xyz[0] || i == xyz[1] || i == xyz[2] || strcmp(f->name, "_") == 0) continue;
        int rgb = (strcmp(f->name, "rgb") == 0 || strcmp(f->name, "rgba") == 0) &&
                  f->size == 4 && f->count == 1;
        if (rgb) { /* packed 0xAARRGGBB */
            static const char *const ch[4] = {"r", "g", "b", "a"};
            static const int shift[4] = {16, 8, 0, 24};
            int nc = f->name[3] ? 4 : 3;
            for (int k = 0; k < nc; k++, n++) {
                h->cols[n].field = i;
                h->cols[n].rgb_shift = shift[k];
                strcpy(h->cols[n].name, ch[k]);
            }
        } else {
            for (int64_t e = 0; e < f->count; e++, n++) {
                h->cols[n].field = i;
                h->cols[n].elem = e;
                h->cols[n].rgb_shift = -1;
                if (f->count == 1)
                    strcpy(h->cols[n].name, f->name);
                else
                    snprintf(h->cols[n].name, sizeof h->cols[n].name, "%s_%lld", f->name,
                             (long long)e);
            }
        }
    }
    h->ncols = n;
    return VC_OK;
}

/* The value of a column from an element's raw little-endian bytes. */
static float col_value(const pcd_col *c, const pcd_field *f, const uint8_t *p)
{
    if (c->rgb_shift >= 0) return (float)((vc_ld_u32(p) >> c->rgb_shift) & 0xffu);
    if (f->kind == VC_IO_F32) { /* keep the exact bits (NaN payloads included) */
        uint32_t u = vc_ld_u32(p);
        float v;
        memcpy(&v, &u, 4);
        return v;
    }
    return (float)vc_io_load(p, f->kind);
}

static vc_status alloc_cloud(const vc_io_src *src, const pcd_hdr *h, vc_cloud *c)
{
    const char **names = malloc((size_t)h->ncols * sizeof *names);
    if (!names) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate names");
    for (int i = 0; i < h->ncols; i++) names[i] = h->cols[i].name;
    vc_status st = vc_io_cloud_alloc(src, c, h->points, h->ncols, names);
    free(names);
    return st;
}

static vc_status read_ascii(const vc_io_src *src, vc_text *t, const pcd_hdr *h, vc_cloud *c)
{
    int64_t elems = 0; /* tokens per point */
    for (int i = 0; i < h->nfields; i++) elems += h->fields[i].count;
    /* Every token takes at least one byte plus a separator. */
    int64_t remaining = (int64_t)(t->n - t->pos), tokens;
    if (vc_mul_overflow_i64(h->points, elems, &tokens) || tokens > remaining / 2 + 1)
        return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: %lld points of %lld values cannot "
                          "fit in the %lld bytes left", (long long)t->line + 1,
                          (long long)h->points, (long long)elems, (long long)remaining);
    vc_status st = alloc_cloud(src, h, c);
    if (st != VC_OK) return st;
    /* One parsed row, and where each field's elements start in it. */
    double *vals = malloc((size_t)elems * sizeof *vals);
    int64_t base = 0;
    int64_t *fbase = malloc((size_t)h->nfields * sizeof *fbase);
    if (!vals || !fbase) {
        free(fbase);
        free(vals);
        vc_io_cloud_release(c);
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate a row buffer");
    }
    for (int i = 0; i < h->nfields; i++) {
        fbase[i] = base;
        base += h->fields[i].count;
    }
    for (int64_t p = 0; p < h->points; p++) {
        for (int64_t e = 0; e < elems; e++) {
            const char *tok;
            size_t tl;
            if (!vc_text_token(t, &tok, &tl)) {
                st = vc_io_fail(src, VC_ERR_FORMAT, "line %lld: data ends at point %lld of "
                                "%lld", (long long)t->line, (long long)p, (long long)h->points);
                goto done;
            }
            if (vc_parse_double(tok, tl, &vals[e]) != 0) {
                st = vc_io_fail(src, VC_ERR_FORMAT, "line %lld: '%.*s' is not a number",
                                (long long)t->line, (int)(tl > 32 ? 32 : tl), tok);
                goto done;
            }
        }
        float *row = c->data + p * h->ncols;
        for (int k = 0; k < h->ncols; k++) {
            const pcd_col *col = &h->cols[k];
            const pcd_field *f = &h->fields[col->field];
            double v = vals[fbase[col->field] + col->elem];
            if (col->rgb_shift >= 0) {
                uint32_t u;
                if (f->type == 'F') {
                    float fv = (float)v;
                    memcpy(&u, &fv, 4);
                } else {
                    u = (uint32_t)(int64_t)(v >= 0 && v < 4294967296.0 ? v : 0);
                }
                row[k] = (float)((u >> col->rgb_shift) & 0xffu);
            } else {
                row[k] = (float)v;
            }
        }
    }
    {
        const char *tok;
        size_t tl;
        if (vc_text_token(t, &tok, &tl))
            st = vc_io_fail(src, VC_ERR_FORMAT, "line %lld: data after the last of %lld points",
                            (long long)t->line, (long long)h->points);
    }
done:
    free(vals);
    free(fbase);
    if (st != VC_OK) vc_io_cloud_release(c);
    return st;
}

static vc_status read_binary(const vc_io_src *src, const uint8_t *d, size_t n, size_t at,
                             const pcd_hdr *h, int64_t point_size, vc_cloud *c)
{
    int64_t need;
    if (vc_mul_overflow_i64(h->points, point_size, &need) || need > (int64_t)n)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: %lld points of %lld bytes need more "
                          "than the %zu bytes present", at, (long long)h->points,
                          (long long)point_size, n);
    vc_status st = alloc_cloud(src, h, c);
    if (st != VC_OK) return st;
    for (int64_t p = 0; p < h->points; p++) {
        const uint8_t *pt = d + p * point_size;
        float *row = c->data + p * h->ncols;
        for (int k = 0; k < h->ncols; k++) {
            const pcd_col *col = &h->cols[k];
            const pcd_field *f = &h->fields[col->field];
            row[k] = col_value(col, f, pt + f->offset + col->elem * f->size);
        }
    }
    return VC_OK;
}

static vc_status read_compressed(const vc_io_src *src, const uint8_t *d, size_t n, size_t at,
                                 const pcd_hdr *h, int64_t point_size, vc_cloud *c)
{
    if (n < 8)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: binary_compressed data shorter than "
                          "its 8-byte size header", at);
    uint32_t csize = vc_ld_u32(d), usize = vc_ld_u32(d + 4);
    int64_t need;
    if (vc_mul_overflow_i64(h->points, point_size, &need) || need != (int64_t)usize)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: uncompressed size %u != %lld points "
                          "x %lld bytes", at + 4, usize, (long long)h->points,
                          (long long)point_size);
    if (csize > n - 8)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: compressed size %u but only %zu bytes "
                          "follow", at, csize, n - 8);
    /* An LZF back-reference emits at most 264 bytes from 3 input bytes. */
    if ((uint64_t)usize > (uint64_t)csize * 89 + 32)
        return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: %u compressed bytes cannot expand to "
                          "%u", at, csize, usize);
    uint8_t *raw = malloc(usize > 0 ? usize : 1);
    if (!raw) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate %u bytes", usize);
    vc_status st = vc_lzf_decode(src, at + 8, d + 8, csize, raw, usize);
    if (st != VC_OK) {
        free(raw);
        return st;
    }
    st = alloc_cloud(src, h, c);
    if (st != VC_OK) {
        free(raw);
        return st;
    }
    /* Structure of arrays: field i's block holds all points' elements of field i. */
    int64_t block = 0;
    int64_t *starts = malloc((size_t)h->nfields * sizeof *starts);
    if (!starts) {
        free(raw);
        vc_io_cloud_release(c);
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "cannot allocate field offsets");
    }
    for (int i = 0; i < h->nfields; i++) {
        starts[i] = block;
        block += h->points * h->fields[i].size * h->fields[i].count;
    }
    for (int k = 0; k < h->ncols; k++) {
        const pcd_col *col = &h->cols[k];
        const pcd_field *f = &h->fields[col->field];
        int64_t stride = f->size * f->count;
        const uint8_t *b = raw + starts[col->field] + col->elem * f->size;
        for (int64_t p = 0; p < h->points; p++)
            c->data[p * h->ncols + k] = col_value(col, f, b + p * stride);
    }
    free(starts);
    free(raw);
    return VC_OK;
}

vc_status vc_io_read_pcd(const vc_io_src *src, const uint8_t *p, size_t n, vc_cloud *out)
{
    pcd_hdr h;
    memset(&h, 0, sizeof h);
    vc_text t = {p, n, 0, 0};
    vc_cloud c;
    vc_status st = parse_header(src, &t, &h);
    if (st == VC_OK) st = plan_columns(src, &h);
    if (st == VC_OK) {
        int64_t point_size = 0;
        for (int i = 0; i < h.nfields; i++) point_size += h.fields[i].size * h.fields[i].count;
        if (h.data == PCD_ASCII)
            st = read_ascii(src, &t, &h, &c);
        else if (h.data == PCD_BINARY)
            st = read_binary(src, p + t.pos, n - t.pos, t.pos, &h, point_size, &c);
        else
            st = read_compressed(src, p + t.pos, n - t.pos, t.pos, &h, point_size, &c);
    }
    free(h.fields);
    free(h.cols);
    if (st == VC_OK) *out = c;
    return st;
}
