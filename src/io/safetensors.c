/* src/io/safetensors.c - the safetensors reader (format and checks: safetensors.h). The JSON
 * header is parsed with cJSON; every size is checked against the bytes present before it is
 * used, so a hostile file costs at most its own size in memory. */
#include "src/io/safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/dtype.h"

const char *vc_st_dtype_name(vc_dtype dtype)
{
    switch (dtype) {
    case VC_DTYPE_FP32: return "F32";
    case VC_DTYPE_FP16: return "F16";
    case VC_DTYPE_BF16: return "BF16";
    default: return "?";
    }
}

float vc_st_load(const vc_st_tensor *t, int64_t i)
{
    const uint8_t *p = t->data + (size_t)i * (size_t)t->esize;
    switch (t->dtype) {
    case VC_DTYPE_FP16: return vc_f16_to_f32(vc_ld_u16(p));
    case VC_DTYPE_BF16: return vc_bf16_to_f32(vc_ld_u16(p));
    default: return vc_bits_f32(vc_ld_u32(p));
    }
}

void vc_st_free(vc_safetensors *st)
{
    if (!st) return;
    for (int64_t i = 0; i < st->count; i++) free(st->tensors[i].name);
    free(st->tensors);
    free(st->owned);
    memset(st, 0, sizeof *st);
}

vc_st_tensor *vc_st_find(const vc_safetensors *st, const char *name)
{
    for (int64_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

/* A JSON number that is a whole number in [0, 2^53]: 0 and *out, else -1. */
static int st_whole(const cJSON *j, int64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || floor(v) != v) return -1;
    *out = (int64_t)v;
    return 0;
}

typedef struct st_span {
    int64_t begin, end, index;
} st_span;

static int st_span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* The format's dtypes and their sizes; only the first three are readable (vc_st_load). */
static const struct {
    const char *name;
    int32_t size;
    vc_dtype dtype;
} st_dtypes[] = {
    {"F32", 4, VC_DTYPE_FP32}, {"F16", 2, VC_DTYPE_FP16}, {"BF16", 2, VC_DTYPE_BF16},
    {"F64", 8, (vc_dtype)-1},  {"I64", 8, (vc_dtype)-1},  {"U64", 8, (vc_dtype)-1},
    {"I32", 4, (vc_dtype)-1},  {"U32", 4, (vc_dtype)-1},  {"I16", 2, (vc_dtype)-1},
    {"U16", 2, (vc_dtype)-1},  {"I8", 1, (vc_dtype)-1},   {"U8", 1, (vc_dtype)-1},
    {"BOOL", 1, (vc_dtype)-1}, {"F8_E5M2", 1, (vc_dtype)-1}, {"F8_E4M3", 1, (vc_dtype)-1}};

static int st_dtype(const char *name, vc_st_tensor *t)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(name, st_dtypes[i].name) == 0) {
            t->dtype = st_dtypes[i].dtype;
            t->esize = st_dtypes[i].size;
            snprintf(t->dtype_name, sizeof t->dtype_name, "%s", name);
            return 0;
        }
    return -1;
}

/* One header entry into *t (name already set). data_size: bytes of the data section. */
static vc_status st_entry(const vc_io_src *src, const cJSON *e, vc_st_tensor *t,
                          int64_t data_size, const uint8_t *data, st_span *span)
{
    if (!cJSON_IsObject(e))
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': header entry is not an object", t->name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': needs \"dtype\" (string), \"shape\" "
                          "and \"data_offsets\" (arrays)", t->name);
    if (st_dtype(dt->valuestring, t) != 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': dtype \"%.32s\" is not a safetensors "
                          "dtype", t->name, dt->valuestring);
    int nd = cJSON_GetArraySize(sh);
    if (nd > VC_ST_MAX_DIMS)
        return vc_io_fail(src, VC_ERR_LIMIT, "tensor '%s': %d dimensions (at most %d)", t->name,
                          nd, VC_ST_MAX_DIMS);
    t->ndim = nd;
    int64_t count = 1;
    int d = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, sh)
    {
        int64_t v;
        if (st_whole(x, &v) != 0)
            return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': shape[%d] is not a non-negative "
                              "integer", t->name, d);
        t->shape[d++] = v;
        if (vc_mul_overflow_i64(count, v, &count))
            return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': shape's element count overflows",
                              t->name);
    }
    if (count > data_size) /* checked before the multiply below: it cannot overflow */
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': shape needs more bytes than the data "
                          "section has (%lld)", t->name, (long long)data_size);
    t->count = count;
    int64_t b, en;
    if (cJSON_GetArraySize(off) != 2 || st_whole(cJSON_GetArrayItem(off, 0), &b) != 0 ||
        st_whole(cJSON_GetArrayItem(off, 1), &en) != 0)
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': data_offsets is not [begin, end]",
                          t->name);
    if (b > en || en > data_size)
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': data_offsets [%lld, %lld] outside the "
                          "data section (%lld bytes)", t->name, (long long)b, (long long)en,
                          (long long)data_size);
    int64_t need = count * t->esize;
    if (en - b != need)
        return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': data_offsets give %lld bytes, dtype "
                          "%s and its shape need %lld", t->name, (long long)(en - b),
                          dt->valuestring, (long long)need);
    t->data = data + b;
    span->begin = b;
    span->end = en;
    return VC_OK;
}

/* The entries, sorted by offset, must tile [0, data_size) exactly. */
static vc_status st_check_tiling(const vc_io_src *src, vc_safetensors *st, st_span *spans,
                                 int64_t data_size)
{
    qsort(spans, (size_t)st->count, sizeof *spans, st_span_cmp);
    int64_t at = 0;
    for (int64_t i = 0; i < st->count; i++) {
        const char *name = st->tensors[spans[i].index].name;
        if (spans[i].begin < at)
            return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': its data [%lld, %lld] overlaps "
                              "another tensor's", name, (long long)spans[i].begin,
                              (long long)spans[i].end);
        if (spans[i].begin > at)
            return vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s': a gap before its data (at %lld, "
                              "expected %lld)", name, (long long)spans[i].begin, (long long)at);
        at = spans[i].end;
    }
    if (at != data_size)
        return vc_io_fail(src, VC_ERR_FORMAT, "the tensors cover %lld bytes of a %lld-byte data "
                          "section", (long long)at, (long long)data_size);
    return VC_OK;
}

static vc_status st_parse_header(const vc_io_src *src, const cJSON *root, const uint8_t *data,
                                 int64_t data_size, vc_safetensors *st)
{
    int n = cJSON_GetArraySize(root);
    st->tensors = calloc((size_t)n + 1, sizeof *st->tensors);
    st_span *spans = calloc((size_t)n + 1, sizeof *spans);
    if (!st->tensors || !spans) {
        free(spans);
        return vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory for %d header entries", n);
    }
    vc_status s = VC_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        for (int64_t i = 0; i < st->count; i++)
            if (strcmp(st->tensors[i].name, e->string) == 0) {
                s = vc_io_fail(src, VC_ERR_FORMAT, "tensor '%s' appears twice", e->string);
                goto done;
            }
        vc_st_tensor *t = &st->tensors[st->count];
        t->name = malloc(strlen(e->string) + 1);
        if (!t->name) {
            s = vc_io_fail(src, VC_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        strcpy(t->name, e->string);
        spans[st->count].index = st->count;
        st->count++;
        s = st_entry(src, e, t, data_size, data, &spans[st->count - 1]);
        if (s != VC_OK) goto done;
    }
    s = st_check_tiling(src, st, spans, data_size);
done:
    free(spans);
    return s;
}

vc_status vc_st_parse(const vc_io_src *src, const uint8_t *p, size_t n, vc_safetensors *out)
{
    memset(out, 0, sizeof *out);
    if (n < 8)
        return vc_io_fail(src, VC_ERR_FORMAT, "%zu bytes: too short for a safetensors file "
                          "(8-byte header length)", n);
    uint64_t hlen = vc_ld_u64(p);
    if (hlen > (uint64_t)(n - 8))
        return vc_io_fail(src, VC_ERR_FORMAT, "header length %llu runs past the end of the file "
                          "(%zu bytes)", (unsigned long long)hlen, n);
    if (hlen > VC_ST_MAX_HEADER)
        return vc_io_fail(src, VC_ERR_LIMIT, "header length %llu over the %llu-byte limit",
                          (unsigned long long)hlen, (unsigned long long)VC_ST_MAX_HEADER);
    const char *h = (const char *)p + 8;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= h ? (size_t)(end - h) : 0; /* cJSON sets it on failure too */
        return vc_io_fail(src, VC_ERR_FORMAT, "header is not valid JSON (near header byte %zu)",
                          at);
    }
    /* The format pads the header with spaces; anything else after the object is an error. */
    for (const char *q = end; q < h + hlen; q++)
        if (*q != ' ' && *q != '\n' && *q != '\r' && *q != '\t' && *q != '\0') {
            cJSON_Delete(root);
            return vc_io_fail(src, VC_ERR_FORMAT, "header has bytes after its JSON object (at "
                              "header byte %zu)", (size_t)(q - h));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vc_io_fail(src, VC_ERR_FORMAT, "header is not a JSON object");
    }
    vc_status s = st_parse_header(src, root, p + 8 + hlen, (int64_t)(n - 8 - hlen), out);
    cJSON_Delete(root);
    if (s != VC_OK) vc_st_free(out);
    return s;
}

vc_status vc_st_read(const vc_io_src *src, const char *path, vc_safetensors *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *bytes = NULL;
    size_t n = 0;
    vc_status s = vc_io_read_file(src->ctx, path, &bytes, &n);
    if (s != VC_OK) return s;
    vc_io_src fsrc = {src->ctx, path};
    s = vc_st_parse(&fsrc, bytes, n, out);
    if (s != VC_OK) {
        free(bytes);
        return s;
    }
    out->owned = bytes;
    return VC_OK;
}
