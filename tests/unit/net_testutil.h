/* tests/unit/net_testutil.h - what the network tests share (tests/unit/test_net.c,
 * tests/gpu/test_gpu_net.c): a store of named fp32 parameters written as safetensors bytes,
 * host copies of tensors, and the test models' descriptions. */
#ifndef VC_NET_TESTUTIL_H
#define VC_NET_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "voxconv.h"

typedef struct ptensor {
    char name[96];
    char dtype[8];            /* as written: "F32" unless a test changes it                    */
    int ndim;
    int64_t shape[5];
    int64_t n;
    float *v;
} ptensor;

typedef struct pstore {
    ptensor t[96];
    int n;
} pstore;

/* Adds a tensor of uniform values in [lo, hi). */
static inline float *pst_add(pstore *p, vc_rng *r, const char *name, int ndim,
                             const int64_t *shape, float lo, float hi)
{
    ptensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "F32");
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++) t->n *= (t->shape[i] = shape[i]);
    t->v = malloc((size_t)(t->n ? t->n : 1) * sizeof(float));
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = lo + (hi - lo) * (float)(0.5 * (vc_rng_float(r) + 1.0));
    return t->v;
}

static inline ptensor *pst_find(pstore *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, name) == 0) return &p->t[i];
    return NULL;
}

static inline float *pst_get(pstore *p, const char *name)
{
    ptensor *t = pst_find(p, name);
    if (!t) {
        fprintf(stderr, "test: no parameter %s\n", name);
        abort();
    }
    return t->v;
}

/* A conv's weight [out, k, k, k, in] (He-like) and optional bias. */
static inline void pst_conv(pstore *p, vc_rng *r, const char *name, int64_t out, const int k[3],
                            int64_t in, int bias)
{
    char n[128];
    int64_t sh[5] = {out, k[0], k[1], k[2], in};
    float a = 1.0f / sqrtf((float)(in * (k[0] * k[1] * k[2] < 9 ? k[0] * k[1] * k[2] : 9)));
    snprintf(n, sizeof n, "%s.weight", name);
    pst_add(p, r, n, 5, sh, -a, a);
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", name);
        pst_add(p, r, n, 1, &out, -0.3f, 0.3f);
    }
}

/* A BatchNorm with statistics far from the identity (and num_batches_tracked when `nbt`). */
static inline void pst_bn(pstore *p, vc_rng *r, const char *name, int64_t c)
{
    static const char *const suf[4] = {"weight", "bias", "running_mean", "running_var"};
    static const float lo[4] = {0.3f, -0.5f, -0.8f, 0.2f}, hi[4] = {1.8f, 0.5f, 0.8f, 2.5f};
    char n[128];
    for (int q = 0; q < 4; q++) {
        snprintf(n, sizeof n, "%s.%s", name, suf[q]);
        pst_add(p, r, n, 1, &c, lo[q], hi[q]);
    }
}

static inline void pst_free(pstore *p)
{
    for (int i = 0; i < p->n; i++) free(p->t[i].v);
    p->n = 0;
}

static inline void pst_put_le(uint8_t *d, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) d[i] = (uint8_t)(v >> (8 * i));
}

/* fp32 -> bf16 / fp16 bits (round to nearest even; finite normal values only, enough here). */
static inline uint16_t pst_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The store as a safetensors file (malloc'ed, *size bytes). Each tensor is written in its
 * dtype: F32, or BF16 (values rounded), or any other name with 4-byte elements copied from
 * the floats' bits (for the wrong-dtype test). `extra_i64`: a "<x>.num_batches_tracked" I64
 * scalar is added for this name. */
static inline uint8_t *pst_serialize(const pstore *p, const char *extra_i64, size_t *size)
{
    size_t hcap = 256 + (size_t)p->n * 256, hn = 0, dn = 0;
    char *h = malloc(hcap);
    hn += (size_t)snprintf(h + hn, hcap - hn, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < p->n; i++) {
        const ptensor *t = &p->t[i];
        size_t es = strcmp(t->dtype, "BF16") == 0 ? 2 : 4;
        hn += (size_t)snprintf(h + hn, hcap - hn, ", \"%s\": {\"dtype\": \"%s\", \"shape\": [",
                               t->name, t->dtype);
        for (int k = 0; k < t->ndim; k++)
            hn += (size_t)snprintf(h + hn, hcap - hn, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        hn += (size_t)snprintf(h + hn, hcap - hn, "], \"data_offsets\": [%zu, %zu]}", dn,
                               dn + es * (size_t)t->n);
        dn += es * (size_t)t->n;
    }
    if (extra_i64) {
        hn += (size_t)snprintf(h + hn, hcap - hn, ", \"%s.num_batches_tracked\": {\"dtype\": "
                               "\"I64\", \"shape\": [], \"data_offsets\": [%zu, %zu]}", extra_i64,
                               dn, dn + 8);
        dn += 8;
    }
    hn += (size_t)snprintf(h + hn, hcap - hn, "}  ");
    uint8_t *b = malloc(8 + hn + dn + 1);
    pst_put_le(b, hn, 8);
    memcpy(b + 8, h, hn);
    uint8_t *d = b + 8 + hn;
    for (int i = 0; i < p->n; i++) {
        const ptensor *t = &p->t[i];
        int bf = strcmp(t->dtype, "BF16") == 0;
        for (int64_t k = 0; k < t->n; k++) {
            uint32_t u;
            memcpy(&u, &t->v[k], 4);
            if (bf) {
                pst_put_le(d, pst_bf16(t->v[k]), 2);
                d += 2;
            } else {
                pst_put_le(d, u, 4);
                d += 4;
            }
        }
    }
    if (extra_i64) pst_put_le(d, 12345, 8);
    free(h);
    *size = 8 + hn + dn;
    return b;
}

/* Host copies of a tensor: coords int32 [n, 4] and fp32 features [n, c]. */
static inline void net_host(vc_context *ctx, const vc_tensor *t, int32_t **coords, float **feats,
                            int64_t *n, int64_t *c)
{
    vc_tensor_info ti;
    vc_tensor_get_info(t, &ti);
    *n = ti.count;
    *c = ti.channels;
    *coords = malloc((size_t)(ti.count ? ti.count : 1) * 16);
    *feats = malloc((size_t)(ti.count * ti.channels ? ti.count * ti.channels : 1) * 4);
    vc_coords_copy_out(ctx, ti.coords, *coords, VC_MEMORY_HOST);
    vc_tensor_copy_out(ctx, t, *feats, VC_DTYPE_FP32, VC_MEMORY_HOST);
}

/* A new tensor on ctx with the first n rows of t (n < 0: all of them) as fp32 features, on
 * coordinates of spatial shape `shape` (NULL: t's) and t's batch size; NULL where a call failed
 * (vc_context_last_error(ctx) says why). */
static inline vc_tensor *net_retensor(vc_context *ctx, const vc_tensor *t, int64_t n,
                                      const int32_t *shape)
{
    int32_t *rows = NULL;
    float *feats = NULL;
    int64_t count = 0, ch = 0;
    net_host(ctx, t, &rows, &feats, &count, &ch);
    if (n < 0 || n > count) n = count;
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    vc_coords *c = NULL;
    vc_tensor *h = NULL;
    if (vc_coords_create(ctx, rows, n, VC_MEMORY_HOST, shape ? shape : ci.spatial_shape,
                         ci.batch_size, &c) != VC_OK ||
        vc_tensor_create(ctx, c, ch, VC_DTYPE_FP32, feats, VC_MEMORY_HOST, &h) != VC_OK)
        h = NULL;
    vc_coords_destroy(c);
    free(rows), free(feats);
    return h;
}

/* The residual test model: subm + BN + ReLU stem, a residual block (its add fused), a strided
 * conv with BN and LeakyReLU, a BN applied apart (its input has three readers) with a ReLU,
 * a global average pool and a BEV dense output. %d: the spatial shape z, y, x. */
static const char NET_RES_MODEL[] =
    "{\"format\": \"voxconv-model\", \"version\": 1, \"name\": \"res-test\",\n"
    " \"input\": {\"channels\": 4, \"spatial_shape\": [%d, %d, %d]%s},\n"
    " \"layers\": [\n"
    "  {\"op\": \"subm\", \"id\": \"c0\", \"name\": \"c0\", \"out_channels\": 16, \"kernel\": 3, \"indice_key\": \"s1\"},\n"
    "  {\"op\": \"batchnorm\", \"id\": \"b0\", \"name\": \"b0\", \"eps\": 0.001},\n"
    "  {\"op\": \"relu\", \"id\": \"stem\"},\n"
    "  {\"op\": \"subm\", \"id\": \"r1\", \"input\": \"stem\", \"name\": \"r1\", \"out_channels\": 16, \"kernel\": 3, \"bias\": true, \"indice_key\": \"s1\"},\n"
    "  {\"op\": \"batchnorm\", \"name\": \"rb1\", \"eps\": 0.001},\n"
    "  {\"op\": \"relu\"},\n"
    "  {\"op\": \"subm\", \"id\": \"r2\", \"name\": \"r2\", \"out_channels\": 16, \"kernel\": 3, \"bias\": true, \"indice_key\": \"s1\"},\n"
    "  {\"op\": \"batchnorm\", \"id\": \"rb2\", \"name\": \"rb2\", \"eps\": 0.001},\n"
    "  {\"op\": \"add\", \"inputs\": [\"rb2\", \"stem\"]},\n"
    "  {\"op\": \"relu\", \"id\": \"block\"},\n"
    "  {\"op\": \"conv\", \"id\": \"down\", \"name\": \"down\", \"out_channels\": 24, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"indice_key\": \"sp2\"},\n"
    "  {\"op\": \"batchnorm\", \"name\": \"db\", \"eps\": 0.001},\n"
    "  {\"op\": \"leaky_relu\", \"id\": \"d\", \"slope\": 0.1},\n"
    "  {\"op\": \"batchnorm\", \"id\": \"side\", \"input\": \"stem\", \"name\": \"side\"},\n"
    "  {\"op\": \"relu\", \"id\": \"side_act\"},\n"
    "  {\"op\": \"global_avgpool\", \"id\": \"gap\", \"input\": \"d\"},\n"
    "  {\"op\": \"dense\", \"id\": \"bev\", \"input\": \"d\"}\n"
    " ],\n"
    " \"outputs\": {\"block\": \"block\", \"d\": \"d\", \"side\": \"side_act\", \"gap\": \"gap\", \"bev\": \"bev\"}}\n";

static inline void net_res_params(pstore *p, vc_rng *r)
{
    const int k3[3] = {3, 3, 3};
    pst_conv(p, r, "c0", 16, k3, 4, 0);
    pst_bn(p, r, "b0", 16);
    pst_conv(p, r, "r1", 16, k3, 16, 1);
    pst_bn(p, r, "rb1", 16);
    pst_conv(p, r, "r2", 16, k3, 16, 1);
    pst_bn(p, r, "rb2", 16);
    pst_conv(p, r, "down", 24, k3, 16, 0);
    pst_bn(p, r, "db", 24);
    pst_bn(p, r, "side", 16);
}

/* The U-Net-like test model: an encoder level (strided k2 s2), a subm, the inverse conv back to
 * the encoder's coordinates, a skip concat, a 1x1x1 head; a max pool and a lone add + ReLU. */
static const char NET_UNET_MODEL[] =
    "{\"format\": \"voxconv-model\", \"version\": 1, \"name\": \"unet-test\",\n"
    " \"input\": {\"channels\": 4, \"spatial_shape\": [%d, %d, %d]%s},\n"
    " \"layers\": [\n"
    "  {\"op\": \"subm\", \"id\": \"e0c\", \"name\": \"e0c\", \"out_channels\": 16, \"kernel\": 3, \"bias\": true},\n"
    "  {\"op\": \"batchnorm\", \"name\": \"e0b\"},\n"
    "  {\"op\": \"relu\", \"id\": \"e0\"},\n"
    "  {\"op\": \"conv\", \"id\": \"down\", \"name\": \"down\", \"out_channels\": 32, \"kernel\": 2, \"stride\": 2, \"indice_key\": \"d1\"},\n"
    "  {\"op\": \"batchnorm\", \"name\": \"downb\"},\n"
    "  {\"op\": \"relu\", \"id\": \"e1\"},\n"
    "  {\"op\": \"subm\", \"id\": \"mid\", \"name\": \"mid\", \"out_channels\": 32, \"kernel\": 3},\n"
    "  {\"op\": \"relu\", \"id\": \"m\"},\n"
    "  {\"op\": \"inverse\", \"id\": \"up\", \"name\": \"up\", \"out_channels\": 16, \"indice_key\": \"d1\"},\n"
    "  {\"op\": \"batchnorm\", \"name\": \"upb\"},\n"
    "  {\"op\": \"relu\", \"id\": \"u0\"},\n"
    "  {\"op\": \"concat\", \"id\": \"cat\", \"inputs\": [\"u0\", \"e0\"]},\n"
    "  {\"op\": \"subm\", \"id\": \"head\", \"name\": \"head\", \"out_channels\": 5, \"kernel\": 1, \"bias\": true},\n"
    "  {\"op\": \"maxpool\", \"id\": \"pool\", \"input\": \"e0\", \"kernel\": 2, \"stride\": 2},\n"
    "  {\"op\": \"add\", \"id\": \"sum\", \"inputs\": [\"e1\", \"m\"]},\n"
    "  {\"op\": \"relu\", \"id\": \"sumr\"}\n"
    " ],\n"
    " \"outputs\": {\"head\": \"head\", \"e1\": \"e1\", \"cat\": \"cat\", \"pool\": \"pool\", \"sum\": \"sumr\"}}\n";

static inline void net_unet_params(pstore *p, vc_rng *r)
{
    const int k3[3] = {3, 3, 3}, k2[3] = {2, 2, 2}, k1[3] = {1, 1, 1};
    pst_conv(p, r, "e0c", 16, k3, 4, 1);
    pst_bn(p, r, "e0b", 16);
    pst_conv(p, r, "down", 32, k2, 16, 0);
    pst_bn(p, r, "downb", 32);
    pst_conv(p, r, "mid", 32, k3, 32, 0);
    pst_conv(p, r, "up", 16, k2, 32, 0);
    pst_bn(p, r, "upb", 16);
    pst_conv(p, r, "head", 5, k1, 32, 1);
}

/* A model text with the shape and an optional extra "input" field filled in (malloc'ed). */
static inline char *net_model_text(const char *fmt, const int32_t shape[3], const char *extra)
{
    size_t n = strlen(fmt) + 512;
    char *s = malloc(n);
    snprintf(s, n, fmt, shape[0], shape[1], shape[2], extra ? extra : "");
    return s;
}

#endif
