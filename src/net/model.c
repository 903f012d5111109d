/* src/net/model.c - the model description parser (JSON through cJSON; format: docs/networks.md).
 * Everything a run relies on is checked here, once: known ops and fields, ids unique, inputs
 * that name earlier layers (so the layer list is already in execution order and has no
 * cycle), channel counts that agree, indice_key uses that make sense, dense results read by no
 * layer, outputs that name layers. Every message names the layer (index and id) and the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "src/net/net_internal.h"

static const char *const nop_names[VC_NOP_COUNT] = {
    "subm", "conv", "downsample", "inverse", "transposed", "batchnorm", "relu", "leaky_relu",
    "add", "concat", "maxpool", "avgpool", "global_maxpool", "global_avgpool", "dense"};

const char *vc_nop_name(vc_nop op) { return op < VC_NOP_COUNT ? nop_names[op] : "?"; }

int vc_nop_is_conv(vc_nop op) { return op <= VC_NOP_TRANSPOSED; }

static int nop_is_pool(vc_nop op) { return op == VC_NOP_MAXPOOL || op == VC_NOP_AVGPOOL; }

/* Parser state: the message prefix of the layer being parsed. */
typedef struct mp {
    vc_err *err;
    const char *what;
    char where[160];
    const cJSON *layers;      /* the "layers" array: a reference to a later id is told apart */
} mp;

static vc_status mp_fail(mp *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static vc_status mp_fail(mp *p, const char *fmt, ...)
{
    char buf[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return vc_fail(p->err, VC_ERR_FORMAT, "%s: %s%s", p->what, p->where, buf);
}

static char *mp_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* An integer field in [lo, hi]; absent gives `def` (def < lo: required). */
static vc_status mp_int(mp *p, const cJSON *o, const char *key, int64_t lo, int64_t hi,
                        int64_t def, int64_t *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j) {
        if (def < lo) return mp_fail(p, "\"%s\" is missing", key);
        *out = def;
        return VC_OK;
    }
    if (!cJSON_IsNumber(j) || floor(j->valuedouble) != j->valuedouble ||
        !(j->valuedouble >= (double)lo && j->valuedouble <= (double)hi))
        return mp_fail(p, "\"%s\" must be an integer in [%lld, %lld]", key, (long long)lo,
                       (long long)hi);
    *out = (int64_t)j->valuedouble;
    return VC_OK;
}

/* An int or [z, y, x] field, each in [lo, hi]; absent gives `def` (def < lo: required). */
static vc_status mp_triple(mp *p, const cJSON *o, const char *key, int32_t lo, int32_t hi,
                           int32_t def, int32_t out[3])
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j) {
        if (def < lo) return mp_fail(p, "\"%s\" is missing", key);
        out[0] = out[1] = out[2] = def;
        return VC_OK;
    }
    if (cJSON_IsNumber(j)) {
        int64_t v;
        vc_status s = mp_int(p, o, key, lo, hi, def, &v);
        if (s == VC_OK) out[0] = out[1] = out[2] = (int32_t)v;
        return s;
    }
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 3)
        return mp_fail(p, "\"%s\" must be an integer or [z, y, x]", key);
    for (int i = 0; i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(j, i);
        if (!cJSON_IsNumber(x) || floor(x->valuedouble) != x->valuedouble ||
            !(x->valuedouble >= lo && x->valuedouble <= hi))
            return mp_fail(p, "\"%s\"[%d] must be an integer in [%d, %d]", key, i, lo, hi);
        out[i] = (int32_t)x->valuedouble;
    }
    return VC_OK;
}

/* A string field (NULL when absent and not required). */
static vc_status mp_str(mp *p, const cJSON *o, const char *key, int required, const char **out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!j) return required ? mp_fail(p, "\"%s\" is missing", key) : VC_OK;
    if (!cJSON_IsString(j) || !j->valuestring[0])
        return mp_fail(p, "\"%s\" must be a non-empty string", key);
    *out = j->valuestring;
    return VC_OK;
}

/* Floats of an array field of exactly n numbers. */
static vc_status mp_floats(mp *p, const cJSON *o, const char *key, int n, float *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != n)
        return mp_fail(p, "\"%s\" must be an array of %d numbers", key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(j, i);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            return mp_fail(p, "\"%s\"[%d] must be a finite number", key, i);
        out[i] = (float)x->valuedouble;
    }
    return VC_OK;
}

/* Fields each op accepts (besides "op", "id", "input", "inputs", "name", "comment"). */
static const char *const conv_fields[] = {"out_channels", "kernel", "stride", "padding",
                                          "dilation", "bias", "indice_key", NULL};
static const char *const pool_fields[] = {"kernel", "stride", "padding", "dilation",
                                          "indice_key", "map", NULL};
static const char *const bn_fields[] = {"eps", NULL};
static const char *const leaky_fields[] = {"slope", NULL};
static const char *const dense_fields[] = {"layout", NULL};
static const char *const no_fields[] = {NULL};

static const char *const *op_fields(vc_nop op)
{
    if (vc_nop_is_conv(op)) return conv_fields;
    if (nop_is_pool(op)) return pool_fields;
    if (op == VC_NOP_BATCHNORM) return bn_fields;
    if (op == VC_NOP_LEAKY_RELU) return leaky_fields;
    if (op == VC_NOP_DENSE) return dense_fields;
    return no_fields;
}

static vc_status mp_check_fields(mp *p, const cJSON *o, vc_nop op)
{
    static const char *const common[] = {"op", "id", "input", "inputs", "name", "comment", NULL};
    const char *const *own = op_fields(op);
    const cJSON *f;
    cJSON_ArrayForEach(f, o)
    {
        int ok = 0;
        for (int i = 0; common[i] && !ok; i++) ok = strcmp(f->string, common[i]) == 0;
        for (int i = 0; own[i] && !ok; i++) ok = strcmp(f->string, own[i]) == 0;
        if (!ok) return mp_fail(p, "unknown field \"%.64s\" for op \"%s\"", f->string, vc_nop_name(op));
    }
    return VC_OK;
}

/* The map of a conv or pool layer. */
static vc_status mp_map(mp *p, const cJSON *o, vc_net_layer *L)
{
    vc_map_desc d = VC_MAP_DESC_INIT;
    vc_status s;
    int need_kernel = L->op != VC_NOP_INVERSE;
    if ((s = mp_triple(p, o, "kernel", 1, 7, need_kernel ? 0 : 1, d.kernel)) != VC_OK ||
        (s = mp_triple(p, o, "stride", 1, 64, 1, d.stride)) != VC_OK ||
        (s = mp_triple(p, o, "padding", 0, 64, 0, d.padding)) != VC_OK ||
        (s = mp_triple(p, o, "dilation", 1, 64, 1, d.dilation)) != VC_OK)
        return s;
    switch (L->op) {
    case VC_NOP_SUBM: d.type = VC_MAP_SUBM; break;
    case VC_NOP_CONV: d.type = VC_MAP_STRIDED; break;
    case VC_NOP_DOWNSAMPLE: d.type = VC_MAP_DOWNSAMPLE; break;
    case VC_NOP_INVERSE: d.type = VC_MAP_INVERSE; break;
    case VC_NOP_TRANSPOSED: d.type = VC_MAP_TRANSPOSED; break;
    default: {
        const char *m;
        if ((s = mp_str(p, o, "map", 0, &m)) != VC_OK) return s;
        if (!m || strcmp(m, "strided") == 0) d.type = VC_MAP_STRIDED;
        else if (strcmp(m, "subm") == 0) d.type = VC_MAP_SUBM;
        else if (strcmp(m, "downsample") == 0) d.type = VC_MAP_DOWNSAMPLE;
        else return mp_fail(p, "\"map\" must be \"strided\", \"subm\" or \"downsample\"");
    }
    }
    if (d.type == VC_MAP_SUBM) {
        for (int i = 0; i < 3; i++)
            if (d.kernel[i] % 2 == 0) return mp_fail(p, "a subm map needs odd kernels");
        if (d.stride[0] != 1 || d.stride[1] != 1 || d.stride[2] != 1)
            return mp_fail(p, "a subm map has stride 1");
    }
    if (d.type == VC_MAP_DOWNSAMPLE && (d.padding[0] || d.padding[1] || d.padding[2]))
        return mp_fail(p, "a downsample map has padding 0");
    L->map = d;
    return VC_OK;
}

/* The result slot a reference names: a layer index < `before`, or VC_NET_INPUT. */
static vc_status mp_ref(mp *p, const vc_model *m, int32_t before, const char *ref, int32_t *out)
{
    if (strcmp(ref, "input") == 0) {
        *out = VC_NET_INPUT;
        return VC_OK;
    }
    for (int32_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].id && strcmp(m->layers[i].id, ref) == 0) {
            if (i >= before)
                return mp_fail(p, "input \"%.64s\" is not an earlier layer (layers are listed in "
                               "execution order: no forward reference, no cycle)", ref);
            *out = i;
            return VC_OK;
        }
    const cJSON *o;
    cJSON_ArrayForEach(o, p->layers)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        if (cJSON_IsString(id) && strcmp(id->valuestring, ref) == 0)
            return mp_fail(p, "input \"%.64s\" is not an earlier layer (layers are listed in "
                           "execution order: no forward reference, no cycle)", ref);
    }
    return mp_fail(p, "input \"%.64s\" names no layer (nor \"input\")", ref);
}

/* "input" / "inputs" of layer `idx`. */
static vc_status mp_inputs(mp *p, vc_model *m, int32_t idx, const cJSON *o, vc_net_layer *L)
{
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(o, "input");
    const cJSON *many = cJSON_GetObjectItemCaseSensitive(o, "inputs");
    int multi = L->op == VC_NOP_ADD || L->op == VC_NOP_CONCAT;
    if (one && many) return mp_fail(p, "give \"input\" or \"inputs\", not both");
    if (multi && !many) return mp_fail(p, "\"%s\" needs \"inputs\": [ids]", vc_nop_name(L->op));
    if (!multi && many) return mp_fail(p, "\"inputs\" is for add and concat; use \"input\"");
    int n = many ? (cJSON_IsArray(many) ? cJSON_GetArraySize(many) : -1) : 1;
    if (n < 1 || n > VC_NET_MAX_INPUTS)
        return mp_fail(p, "\"inputs\" must be an array of 1 to %d ids", VC_NET_MAX_INPUTS);
    if (L->op == VC_NOP_ADD && n != 2) return mp_fail(p, "add takes exactly 2 inputs");
    L->inputs = malloc((size_t)n * sizeof *L->inputs);
    if (!L->inputs) return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    L->n_inputs = n;
    if (!many && !one) {
        L->inputs[0] = idx == 0 ? VC_NET_INPUT : idx - 1;
        return VC_OK;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *r = many ? cJSON_GetArrayItem(many, i) : one;
        if (!cJSON_IsString(r)) return mp_fail(p, "inputs must be ids (strings)");
        vc_status s = mp_ref(p, m, idx, r->valuestring, &L->inputs[i]);
        if (s != VC_OK) return s;
    }
    return VC_OK;
}

static vc_status mp_op(mp *p, const cJSON *o, vc_nop *op)
{
    const char *s;
    vc_status st = mp_str(p, o, "op", 1, &s);
    if (st != VC_OK) return st;
    for (int i = 0; i < VC_NOP_COUNT; i++)
        if (strcmp(s, nop_names[i]) == 0) {
            *op = (vc_nop)i;
            return VC_OK;
        }
    return mp_fail(p, "unknown op \"%.64s\" (subm, conv, downsample, inverse, transposed, "
                   "batchnorm, relu, leaky_relu, add, concat, maxpool, avgpool, global_maxpool, "
                   "global_avgpool, dense)", s);
}

/* The op's own fields. */
static vc_status mp_params(mp *p, const cJSON *o, vc_net_layer *L)
{
    vc_status s;
    if (vc_nop_is_conv(L->op) || nop_is_pool(L->op)) {
        if ((s = mp_map(p, o, L)) != VC_OK) return s;
        const char *key;
        if ((s = mp_str(p, o, "indice_key", L->op == VC_NOP_INVERSE, &key)) != VC_OK) return s;
        if (key && !(L->indice_key = mp_strdup(key)))
            return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (vc_nop_is_conv(L->op)) {
        if ((s = mp_int(p, o, "out_channels", 1, VC_MAX_CHANNELS, 0, &L->channels)) != VC_OK)
            return s;
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "bias");
        if (b && !cJSON_IsBool(b)) return mp_fail(p, "\"bias\" must be true or false");
        L->bias = b && cJSON_IsTrue(b);
    }
    if (L->op == VC_NOP_BATCHNORM || L->op == VC_NOP_LEAKY_RELU) {
        const char *key = L->op == VC_NOP_BATCHNORM ? "eps" : "slope";
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
        double d = L->op == VC_NOP_BATCHNORM ? 1e-5 : 0.01;
        if (j && (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)))
            return mp_fail(p, "\"%s\" must be a finite number", key);
        if (j) d = j->valuedouble;
        if (L->op == VC_NOP_BATCHNORM && !(d > 0)) return mp_fail(p, "\"eps\" must be > 0");
        if (L->op == VC_NOP_BATCHNORM) L->eps = (float)d;
        else L->slope = (float)d;
    }
    if (L->op == VC_NOP_DENSE) {
        const char *lay;
        if ((s = mp_str(p, o, "layout", 0, &lay)) != VC_OK) return s;
        if (lay && strcmp(lay, "bev") != 0 && strcmp(lay, "bcdhw") != 0)
            return mp_fail(p, "\"layout\" must be \"bev\" or \"bcdhw\"");
        L->bcdhw = lay && strcmp(lay, "bcdhw") == 0;
    }
    L->dense = L->op == VC_NOP_DENSE || L->op == VC_NOP_GLOBAL_MAXPOOL ||
               L->op == VC_NOP_GLOBAL_AVGPOOL;
    return VC_OK;
}

/* indice_key rules (spconv semantics): subm convs with one key share one map (same kernel and
 * dilation, the same input coordinates: checked at run time); an inverse names the key of an
 * earlier strided / downsample layer; any other reuse of a key is an error. */
static vc_status mp_key(mp *p, vc_model *m, int32_t idx, vc_net_layer *L)
{
    L->key_owner = -1;
    if (!L->indice_key) return VC_OK;
    int32_t owner = -1;
    for (int32_t i = 0; i < idx && owner < 0; i++)
        if (m->layers[i].indice_key && m->layers[i].op != VC_NOP_INVERSE &&
            strcmp(m->layers[i].indice_key, L->indice_key) == 0)
            owner = i;
    if (L->op == VC_NOP_INVERSE) {
        if (owner < 0)
            return mp_fail(p, "indice_key \"%.64s\" names no earlier conv", L->indice_key);
        const vc_net_layer *F = &m->layers[owner];
        if (F->map.type != VC_MAP_STRIDED && F->map.type != VC_MAP_DOWNSAMPLE)
            return mp_fail(p, "indice_key \"%.64s\" names layer '%s', whose map is not strided or "
                           "downsample", L->indice_key, F->id);
        L->key_owner = owner;
        L->map = F->map;
        L->map.type = VC_MAP_INVERSE;
        return VC_OK;
    }
    if (owner < 0) return VC_OK;
    const vc_net_layer *F = &m->layers[owner];
    if (L->map.type == VC_MAP_SUBM && F->map.type == VC_MAP_SUBM &&
        memcmp(L->map.kernel, F->map.kernel, sizeof L->map.kernel) == 0 &&
        memcmp(L->map.dilation, F->map.dilation, sizeof L->map.dilation) == 0)
        return VC_OK;
    return mp_fail(p, "indice_key \"%.64s\" is already layer '%s''s (only subm layers of one "
                   "kernel and dilation share a key)", L->indice_key, F->id);
}

/* Channels of the result, from the inputs'. */
static vc_status mp_channels(mp *p, vc_model *m, vc_net_layer *L)
{
    int64_t c[64];
    for (int i = 0; i < L->n_inputs; i++) {
        int32_t r = L->inputs[i];
        if (r != VC_NET_INPUT && m->layers[r].dense)
            return mp_fail(p, "reads '%s', a dense result (dense results can only be outputs)",
                           m->layers[r].id);
        c[i] = r == VC_NET_INPUT ? m->in_channels : m->layers[r].channels;
    }
    L->in_channels = c[0];
    if (vc_nop_is_conv(L->op)) return VC_OK;
    L->channels = c[0];
    if (L->op == VC_NOP_ADD && c[1] != c[0])
        return mp_fail(p, "add of %lld and %lld channels", (long long)c[0], (long long)c[1]);
    if (L->op == VC_NOP_CONCAT)
        for (int i = 1; i < L->n_inputs; i++) L->channels += c[i];
    if (L->channels > VC_MAX_CHANNELS) return mp_fail(p, "too many channels");
    return VC_OK;
}

static vc_status mp_layer(mp *p, vc_model *m, int32_t idx, const cJSON *o)
{
    vc_net_layer *L = &m->layers[idx];
    snprintf(p->where, sizeof p->where, "layer %d: ", idx);
    if (!cJSON_IsObject(o)) return mp_fail(p, "not an object");
    vc_status s;
    if ((s = mp_op(p, o, &L->op)) != VC_OK) return s;
    const char *id, *name;
    if ((s = mp_str(p, o, "id", 0, &id)) != VC_OK) return s;
    char autoid[24];
    snprintf(autoid, sizeof autoid, "#%d", idx);
    if (!(L->id = mp_strdup(id ? id : autoid)))
        return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(p->where, sizeof p->where, "layer %d ('%.64s', %s): ", idx, L->id, vc_nop_name(L->op));
    if (strcmp(L->id, "input") == 0) return mp_fail(p, "\"input\" is reserved for the net's input");
    for (int32_t i = 0; i < idx; i++)
        if (strcmp(m->layers[i].id, L->id) == 0) return mp_fail(p, "id repeats layer %d's", i);
    if ((s = mp_check_fields(p, o, L->op)) != VC_OK) return s;
    int needs_name = vc_nop_is_conv(L->op) || L->op == VC_NOP_BATCHNORM;
    if ((s = mp_str(p, o, "name", needs_name, &name)) != VC_OK) return s;
    if (name && !needs_name) return mp_fail(p, "\"name\" is for layers with parameters");
    if (name && !(L->name = mp_strdup(name)))
        return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    if ((s = mp_params(p, o, L)) != VC_OK) return s;
    if ((s = mp_inputs(p, m, idx, o, L)) != VC_OK) return s;
    if ((s = mp_key(p, m, idx, L)) != VC_OK) return s;
    return mp_channels(p, m, L);
}

static vc_status mp_voxelize(mp *p, vc_model *m, const cJSON *v)
{
    snprintf(p->where, sizeof p->where, "input.voxelize: ");
    if (!cJSON_IsObject(v)) return mp_fail(p, "not an object");
    vc_voxelize_desc d = VC_VOXELIZE_DESC_INIT;
    vc_status s;
    if ((s = mp_floats(p, v, "voxel_size", 3, d.voxel_size)) != VC_OK ||
        (s = mp_floats(p, v, "range", 6, d.range)) != VC_OK)
        return s;
    const char *red;
    if ((s = mp_str(p, v, "reduce", 0, &red)) != VC_OK) return s;
    if (!red || strcmp(red, "mean") == 0) d.reduce = VC_REDUCE_MEAN;
    else if (strcmp(red, "first") == 0) d.reduce = VC_REDUCE_FIRST;
    else if (strcmp(red, "count") == 0) d.reduce = VC_REDUCE_COUNT;
    else return mp_fail(p, "\"reduce\" must be \"mean\", \"first\" or \"count\"");
    int64_t mv, ud;
    if ((s = mp_int(p, v, "max_voxels", 0, VC_MAX_ROWS, 0, &mv)) != VC_OK ||
        (s = mp_int(p, v, "use_dim", 3, 4096, 3, &ud)) != VC_OK)
        return s;
    if (!cJSON_GetObjectItemCaseSensitive(v, "use_dim")) ud = 0;
    d.max_voxels = mv;
    m->use_dim = (int32_t)ud;
    int64_t want = d.reduce == VC_REDUCE_COUNT ? 1 : ud;
    if (want && want != m->in_channels)
        return mp_fail(p, "gives %lld feature columns, input.channels is %lld", (long long)want,
                       (long long)m->in_channels);
    m->voxelize = d;
    m->has_voxelize = 1;
    return VC_OK;
}

static vc_status mp_header(mp *p, vc_model *m, const cJSON *root)
{
    const char *fmt, *name;
    int64_t ver;
    vc_status s;
    if ((s = mp_str(p, root, "format", 1, &fmt)) != VC_OK) return s;
    if (strcmp(fmt, "voxconv-model") != 0)
        return mp_fail(p, "\"format\" is \"%.64s\", expected \"voxconv-model\"", fmt);
    if ((s = mp_int(p, root, "version", 1, 1000000, 0, &ver)) != VC_OK) return s;
    if (ver != 1) return mp_fail(p, "version %lld is not supported (1)", (long long)ver);
    if ((s = mp_str(p, root, "name", 0, &name)) != VC_OK) return s;
    if (!(m->name = mp_strdup(name ? name : "unnamed")))
        return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    snprintf(p->where, sizeof p->where, "input: ");
    if (!cJSON_IsObject(in)) return mp_fail(p, "missing or not an object");
    if ((s = mp_int(p, in, "channels", 1, VC_MAX_CHANNELS, 0, &m->in_channels)) != VC_OK ||
        (s = mp_triple(p, in, "spatial_shape", 1, INT32_MAX, 0, m->shape)) != VC_OK)
        return s;
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(in, "spatial_shape")))
        return mp_fail(p, "\"spatial_shape\" must be [z, y, x]");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, "voxelize");
    return v ? mp_voxelize(p, m, v) : VC_OK;
}

static vc_status mp_outputs(mp *p, vc_model *m, const cJSON *outs)
{
    snprintf(p->where, sizeof p->where, "outputs: ");
    int n = cJSON_IsObject(outs) ? cJSON_GetArraySize(outs) : 0;
    if (n < 1) return mp_fail(p, "must be an object of at least one name: layer id");
    m->out_names = calloc((size_t)n, sizeof *m->out_names);
    m->out_layers = calloc((size_t)n, sizeof *m->out_layers);
    if (!m->out_names || !m->out_layers)
        return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    const cJSON *o;
    cJSON_ArrayForEach(o, outs)
    {
        int32_t k = m->n_outputs;
        if (!o->string[0] || strchr(o->string, '/') || strcmp(o->string, ".") == 0 ||
            strcmp(o->string, "..") == 0)
            return mp_fail(p, "output name \"%.64s\" is not a plain file name", o->string);
        for (int32_t i = 0; i < k; i++)
            if (strcmp(m->out_names[i], o->string) == 0)
                return mp_fail(p, "output \"%.64s\" is named twice", o->string);
        if (!cJSON_IsString(o)) return mp_fail(p, "\"%.64s\" must name a layer id", o->string);
        int32_t r = vc_model_find(m, o->valuestring);
        if (r < 0)
            return mp_fail(p, "\"%.64s\": \"%.64s\" names no layer", o->string, o->valuestring);
        if (!(m->out_names[k] = mp_strdup(o->string)))
            return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
        m->out_layers[k] = r;
        m->n_outputs++;
        m->layers[r].readers++;
    }
    return VC_OK;
}

static vc_status mp_model(mp *p, vc_model *m, const cJSON *root)
{
    vc_status s;
    if (!cJSON_IsObject(root)) return mp_fail(p, "not a JSON object");
    if ((s = mp_header(p, m, root)) != VC_OK) return s;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    snprintf(p->where, sizeof p->where, "layers: ");
    int n = cJSON_IsArray(layers) ? cJSON_GetArraySize(layers) : 0;
    if (n < 1 || n > 100000) return mp_fail(p, "must be an array of 1 to 100000 layers");
    m->layers = calloc((size_t)n, sizeof *m->layers);
    if (!m->layers) return vc_fail(p->err, VC_ERR_OUT_OF_MEMORY, "out of memory");
    p->layers = layers;
    const cJSON *o;
    cJSON_ArrayForEach(o, layers)
    {
        m->n_layers++;
        if ((s = mp_layer(p, m, m->n_layers - 1, o)) != VC_OK) return s;
    }
    for (int32_t i = 0; i < m->n_layers; i++)
        for (int32_t k = 0; k < m->layers[i].n_inputs; k++)
            if (m->layers[i].inputs[k] >= 0) m->layers[m->layers[i].inputs[k]].readers++;
    return mp_outputs(p, m, cJSON_GetObjectItemCaseSensitive(root, "outputs"));
}

vc_status vc_model_parse(const char *text, size_t len, const char *what, vc_model *out,
                         vc_err *err)
{
    memset(out, 0, sizeof *out);
    mp p = {err, what ? what : "<model>", "", NULL};
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < at && i < len; i++) line += text[i] == '\n';
        return vc_fail(err, VC_ERR_FORMAT, "%s: not valid JSON (line %d, byte %zu)", p.what, line,
                       at);
    }
    vc_status s = mp_model(&p, out, root);
    cJSON_Delete(root);
    if (s != VC_OK) vc_model_free(out);
    return s;
}

int32_t vc_model_find(const vc_model *m, const char *id)
{
    if (strcmp(id, "input") == 0) return VC_NET_INPUT;
    for (int32_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].id && strcmp(m->layers[i].id, id) == 0) return i;
    return -2;
}

void vc_model_free(vc_model *m)
{
    if (!m) return;
    for (int32_t i = 0; i < m->n_layers; i++) {
        free(m->layers[i].id);
        free(m->layers[i].name);
        free(m->layers[i].indice_key);
        free(m->layers[i].inputs);
    }
    free(m->layers);
    for (int32_t i = 0; i < m->n_outputs; i++) free(m->out_names[i]);
    free(m->out_names);
    free(m->out_layers);
    free(m->name);
    memset(m, 0, sizeof *m);
}
