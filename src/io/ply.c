/* src/io/ply.c - PLY point clouds: format ascii 1.0 and binary_little_endian 1.0. The vertex
 * element's scalar properties become columns (x, y, z first); elements declared before the
 * vertex element are skipped by parsing them, elements after it are not read. List properties
 * in the vertex element and binary_big_endian are VC_ERR_UNSUPPORTED. See docs/formats.md. */
#include <stdlib.h>
#include <string.h>

#include "src/io/io.h"

typedef struct ply_prop {
    char name[VC_IO_MAX_NAME + 1];
    int is_list;
    vc_io_kind kind;       /* scalar kind, or the list's item kind */
    vc_io_kind count_kind; /* list only */
} ply_prop;

typedef struct ply_elem {
    char name[VC_IO_MAX_NAME + 1];
    int64_t count;
    ply_prop *props;
    int nprops, cap;
} ply_elem;

typedef struct ply_hdr {
    ply_elem *elems;
    int nelems, cap;
    int binary;
} ply_hdr;

static int parse_kind(const char *t, size_t l, vc_io_kind *k)
{
    static const struct { const char *name; vc_io_kind kind; } map[] = {
        {"char", VC_IO_I8},    {"int8", VC_IO_I8},     {"uchar", VC_IO_U8},
        {"uint8", VC_IO_U8},   {"short", VC_IO_I16},   {"int16", VC_IO_I16},
        {"ushort", VC_IO_U16}, {"uint16", VC_IO_U16},  {"int", VC_IO_I32},
        {"int32", VC_IO_I32},  {"uint", VC_IO_U32},    {"uint32", VC_IO_U32},
        {"float", VC_IO_F32},  {"float32", VC_IO_F32}, {"double", VC_IO_F64},
        {"float64", VC_IO_F64}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (vc_tok_eq(t, l, map[i].name)) {
            *k = map[i].kind;
            return 0;
        }
    return -1;
}

static void free_hdr(ply_hdr *h)
{
    for (int i = 0; i < h->nelems; i++) free(h->elems[i].props);
    free(h->elems);
}

static vc_status parse_header(const vc_io_src *src, vc_text *t, ply_hdr *h)
{
    const char *line, *s, *end, *tok;
    size_t len, tl;
    if (!vc_text_line(t, &line, &len) || !vc_tok_eq(line, len, "ply"))
        return vc_io_fail(src, VC_ERR_FORMAT, "line 1: no 'ply' magic");
    int have_format = 0;
    long long big_endian = 0, bad_version = 0;
    char version[20] = "";
    for (;;) {
        if (!vc_text_line(t, &line, &len))
            return vc_io_fail(src, VC_ERR_FORMAT, "header ends without end_header");
        long long ln = (long long)t->line;
        s = line;
        end = line + len;
        if (!vc_tok(&s, end, &tok, &tl)) continue;
        if (vc_tok_eq(tok, tl, "comment") || vc_tok_eq(tok, tl, "obj_info")) continue;
        if (vc_tok_eq(tok, tl, "end_header")) break;
        if (vc_tok_eq(tok, tl, "format")) {
            const char *ver;
            size_t vl;
            if (have_format)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: format given twice", ln);
            if (!vc_tok(&s, end, &tok, &tl) || !vc_tok(&s, end, &ver, &vl))
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: incomplete format line", ln);
            /* Unsupported variants are reported once the header is known to be complete,
             * so that a truncated file is always VC_ERR_FORMAT. */
            if (vc_tok_eq(tok, tl, "ascii")) h->binary = 0;
            else if (vc_tok_eq(tok, tl, "binary_little_endian")) h->binary = 1;
            else if (vc_tok_eq(tok, tl, "binary_big_endian")) big_endian = ln;
            else
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: unknown format '%.*s'", ln,
                                  (int)(tl > 32 ? 32 : tl), tok);
            if (!vc_tok_eq(ver, vl, "1.0")) {
                bad_version = ln;
                snprintf(version, sizeof version, "%.*s", (int)(vl > 16 ? 16 : vl), ver);
            }
            have_format = 1;
        } else if (vc_tok_eq(tok, tl, "element")) {
            const char *name, *cnt;
            size_t nl, cl;
            int64_t count;
            if (!vc_tok(&s, end, &name, &nl) || !vc_tok(&s, end, &cnt, &cl))
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: incomplete element line", ln);
            if (vc_parse_i64(cnt, cl, &count) != 0 || count < 0)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: element count '%.*s' is not "
                                  "a non-negative integer", ln, (int)(cl > 32 ? 32 : cl), cnt);
            if (nl > VC_IO_MAX_NAME)
                return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: element name of %zu bytes",
                                  ln, nl);
            if (h->nelems == VC_IO_MAX_FIELDS)
                return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: more than %d elements", ln,
                                  VC_IO_MAX_FIELDS);
            if (h->nelems == h->cap) {
                int nc = h->cap ? h->cap * 2 : 4;
                ply_elem *ne = realloc(h->elems, (size_t)nc * sizeof *ne);
                if (!ne) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory");
                h->elems = ne;
                h->cap = nc;
            }
            ply_elem *e = &h->elems[h->nelems++];
            memset(e, 0, sizeof *e);
            memcpy(e->name, name, nl);
            e->count = count;
        } else if (vc_tok_eq(tok, tl, "property")) {
            if (h->nelems == 0)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: property before any element",
                                  ln);
            ply_elem *e = &h->elems[h->nelems - 1];
            ply_prop pr;
            memset(&pr, 0, sizeof pr);
            if (!vc_tok(&s, end, &tok, &tl))
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: incomplete property", ln);
            if (vc_tok_eq(tok, tl, "list")) {
                pr.is_list = 1;
                if (!vc_tok(&s, end, &tok, &tl) || parse_kind(tok, tl, &pr.count_kind) != 0)
                    return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: bad list count type", ln);
                if (pr.count_kind == VC_IO_F32 || pr.count_kind == VC_IO_F64)
                    return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: list count type must be "
                                      "an integer", ln);
                if (!vc_tok(&s, end, &tok, &tl))
                    return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: incomplete property", ln);
            }
            if (parse_kind(tok, tl, &pr.kind) != 0)
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: unknown property type '%.*s'",
                                  ln, (int)(tl > 32 ? 32 : tl), tok);
            const char *name;
            size_t nl;
            if (!vc_tok(&s, end, &name, &nl))
                return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: property without a name", ln);
            if (nl > VC_IO_MAX_NAME)
                return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: property name of %zu bytes",
                                  ln, nl);
            memcpy(pr.name, name, nl);
            if (e->nprops == VC_IO_MAX_FIELDS)
                return vc_io_fail(src, VC_ERR_LIMIT, "line %lld: more than %d properties", ln,
                                  VC_IO_MAX_FIELDS);
            if (e->nprops == e->cap) {
                int nc = e->cap ? e->cap * 2 : 8;
                ply_prop *np = realloc(e->props, (size_t)nc * sizeof *np);
                if (!np) return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory");
                e->props = np;
                e->cap = nc;
            }
            e->props[e->nprops++] = pr;
        } else {
            return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: unknown header keyword '%.*s'",
                              ln, (int)(tl > 32 ? 32 : tl), tok);
        }
    }
    if (!have_format) return vc_io_fail(src, VC_ERR_FORMAT, "header has no format line");
    if (big_endian)
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "line %lld: binary_big_endian PLY is not "
                          "supported", big_endian);
    if (bad_version)
        return vc_io_fail(src, VC_ERR_UNSUPPORTED, "line %lld: PLY version '%s' (only 1.0)",
                          bad_version, version);
    return VC_OK;
}

/* Reads one number of kind k at the cursor (binary: bytes, ascii: a token). */
static vc_status read_value(const vc_io_src *src, vc_text *t, int binary, vc_io_kind k,
                            double *v)
{
    if (binary) {
        size_t sz = (size_t)vc_io_kind_size(k);
        if (t->n - t->pos < sz)
            return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: data ends early", t->pos);
        *v = vc_io_load(t->p + t->pos, k);
        t->pos += sz;
        return VC_OK;
    }
    const char *tok;
    size_t tl;
    if (!vc_text_token(t, &tok, &tl))
        return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: data ends early", (long long)t->line);
    if (vc_parse_double(tok, tl, v) != 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "line %lld: '%.*s' is not a number",
                          (long long)t->line, (int)(tl > 32 ? 32 : tl), tok);
    return VC_OK;
}

/* Skips every instance of an element before the vertex element. */
static vc_status skip_element(const vc_io_src *src, vc_text *t, int binary, const ply_elem *e)
{
    if (e->nprops == 0 || e->count == 0) return VC_OK;
    /* Each instance takes at least one byte: refuse counts the file cannot hold. */
    if (e->count > (int64_t)(t->n - t->pos))
        return vc_io_fail(src, VC_ERR_FORMAT, "element %s: %lld instances cannot fit in the "
                          "%zu bytes left", e->name, (long long)e->count, t->n - t->pos);
    for (int64_t i = 0; i < e->count; i++) {
        for (int j = 0; j < e->nprops; j++) {
            const ply_prop *pr = &e->props[j];
            double v;
            vc_status st;
            if (!pr->is_list) {
                if ((st = read_value(src, t, binary, pr->kind, &v)) != VC_OK) return st;
                continue;
            }
            if ((st = read_value(src, t, binary, pr->count_kind, &v)) != VC_OK) return st;
            if (!(v >= 0) || v > (double)(t->n - t->pos) || v != (double)(int64_t)v)
                return vc_io_fail(src, VC_ERR_FORMAT, "element %s: list length %g past the end "
                                  "of the data", e->name, v);
            int64_t items = (int64_t)v;
            if (binary) {
                size_t bytes = (size_t)items * (size_t)vc_io_kind_size(pr->kind);
                if (bytes > t->n - t->pos)
                    return vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: list past the end of the "
                                      "data", t->pos);
                t->pos += bytes;
            } else {
                for (int64_t k = 0; k < items; k++)
                    if ((st = read_value(src, t, 0, pr->kind, &v)) != VC_OK) return st;
            }
        }
    }
    return VC_OK;
}

vc_status vc_io_read_ply(const vc_io_src *src, const uint8_t *p, size_t n, vc_cloud *out)
{
    ply_hdr h;
    memset(&h, 0, sizeof h);
    vc_text t = {p, n, 0, 0};
    vc_cloud c;
    memset(&c, 0, sizeof c);
    const char **names = NULL;
    int *order = NULL;
    vc_status st = parse_header(src, &t, &h);
    if (st != VC_OK) goto done;
    int vi = -1;
    for (int i = 0; i < h.nelems && vi < 0; i++)
        if (strcmp(h.elems[i].name, "vertex") == 0) vi = i;
    if (vi < 0) {
        st = vc_io_fail(src, VC_ERR_FORMAT, "no vertex element");
        goto done;
    }
    const ply_elem *v = &h.elems[vi];
    int xyz[3] = {-1, -1, -1};
    static const char *const axis[3] = {"x", "y", "z"};
    int64_t vsize = 0;
    for (int j = 0; j < v->nprops; j++) {
        if (v->props[j].is_list) {
            st = vc_io_fail(src, VC_ERR_UNSUPPORTED, "vertex property %s is a list",
                            v->props[j].name);
            goto done;
        }
        vsize += vc_io_kind_size(v->props[j].kind);
        for (int a = 0; a < 3; a++)
            if (xyz[a] < 0 && strcmp(v->props[j].name, axis[a]) == 0) xyz[a] = j;
    }
    for (int a = 0; a < 3; a++)
        if (xyz[a] < 0) {
            st = vc_io_fail(src, VC_ERR_FORMAT, "vertex element has no property %s", axis[a]);
            goto done;
        }
    /* Column order: x, y, z, then the other properties in order. */
    if (v->nprops > VC_IO_MAX_COLUMNS) {
        st = vc_io_fail(src, VC_ERR_LIMIT, "%d vertex properties (at most %d)", v->nprops,
                        VC_IO_MAX_COLUMNS);
        goto done;
    }
    names = malloc((size_t)v->nprops * sizeof *names);
    order = malloc((size_t)v->nprops * sizeof *order); /* column of each property */
    if (!names || !order) {
        st = vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    int nc = 3;
    for (int j = 0; j < v->nprops; j++) {
        int a = j == xyz[0] ? 0 : j == xyz[1] ? 1 : j == xyz[2] ? 2 : -1;
        order[j] = a >= 0 ? a : nc++;
        names[order[j]] = v->props[j].name;
    }
    for (int i = 0; i < vi; i++)
        if ((st = skip_element(src, &t, h.binary, &h.elems[i])) != VC_OK) goto done;
    int64_t remaining = (int64_t)(t.n - t.pos), need;
    if (h.binary ? (vc_mul_overflow_i64(v->count, vsize, &need) || need > remaining)
                 : (vc_mul_overflow_i64(v->count, v->nprops, &need) || need > remaining / 2 + 1)) {
        st = vc_io_fail(src, VC_ERR_FORMAT, "byte %zu: %lld vertices cannot fit in the %lld "
                        "bytes left", t.pos, (long long)v->count, (long long)remaining);
        goto done;
    }
    if ((st = vc_io_cloud_alloc(src, &c, v->count, v->nprops, names)) != VC_OK) goto done;
    for (int64_t i = 0; i < v->count; i++) {
        float *row = c.data + i * v->nprops;
        for (int j = 0; j < v->nprops; j++) {
            const ply_prop *pr = &v->props[j];
            if (h.binary && pr->kind == VC_IO_F32) { /* exact bits (NaN payloads kept) */
                uint32_t u = vc_ld_u32(t.p + t.pos);
                memcpy(&row[order[j]], &u, 4);
                t.pos += 4;
                continue;
            }
            double d;
            if ((st = read_value(src, &t, h.binary, pr->kind, &d)) != VC_OK) goto done;
            row[order[j]] = (float)d;
        }
    }
done:
    free(names);
    free(order);
    free_hdr(&h);
    if (st == VC_OK)
        *out = c;
    else
        vc_io_cloud_release(&c);
    return st;
}
