/* src/net/weights.c - a network's parameters: read from safetensors (the PyTorch state_dict
 * names: "<name>.weight" [out, kz, ky, kx, in] and "<name>.bias" [out] for convs, "<name>.weight",
 * ".bias", ".running_mean", ".running_var" [C] for BatchNorm) or made at random from a seed;
 * checked (every error names the tensor); BatchNorm folded into the conv it follows. All
 * arithmetic in fp32 on the host; net.c converts and uploads the result once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/io/safetensors.h"
#include "src/net/net_internal.h"

static const char *const bn_suffix[4] = {"weight", "bias", "running_mean", "running_var"};

/* ---- deterministic random parameters ------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One stream per tensor, from the seed and the tensor's name: a tensor's values do not depend
 * on which other tensors the description has. */
static uint64_t stream_of(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    uint64_t s = seed ^ h;
    splitmix64(&s);
    return s;
}

static void fill_uniform(float *x, int64_t n, uint64_t seed, const char *name, float lo, float hi)
{
    uint64_t s = stream_of(seed, name);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&s) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct wsrc {
    vc_context *ctx;
    const vc_net_desc *desc;
    vc_safetensors st;        /* unused with random weights                                    */
    const char *file;         /* for messages                                                  */
} wsrc;

/* Tensor `full` of `ndim` dims `shape` into x (n = product). Random: uniform in [lo, hi]. */
static vc_status take(wsrc *w, const char *full, int ndim, const int64_t *shape, float *x,
                      float lo, float hi)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if (w->desc->random_weights) {
        fill_uniform(x, n, w->desc->seed, full, lo, hi);
        return VC_OK;
    }
    char want[96], got[96];
    int at = 0;
    for (int i = 0; i < ndim && at < 80; i++)
        at += snprintf(want + at, sizeof want - (size_t)at, "%s%lld", i ? ", " : "",
                       (long long)shape[i]);
    want[at] = 0;
    vc_st_tensor *t = vc_st_find(&w->st, full);
    if (!t)
        return vc_ctx_fail(w->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_create: %s: tensor '%s' "
                           "[%s] is missing", w->file, full, want);
    t->used = 1;
    if ((int)t->dtype < 0)
        return vc_ctx_fail(w->ctx, VC_ERR_UNSUPPORTED, "vc_net_create: %s: tensor '%s' has dtype "
                           "%s (F32, F16 or BF16 needed)", w->file, full, t->dtype_name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        at = 0;
        for (int i = 0; i < t->ndim && at < 80; i++)
            at += snprintf(got + at, sizeof got - (size_t)at, "%s%lld", i ? ", " : "",
                           (long long)t->shape[i]);
        got[at] = 0;
        return vc_ctx_fail(w->ctx, VC_ERR_SHAPE_MISMATCH, "vc_net_create: %s: tensor '%s' has "
                           "shape [%s], the description needs [%s]", w->file, full, got, want);
    }
    for (int64_t i = 0; i < n; i++) {
        x[i] = vc_st_load(t, i);
        if (!isfinite(x[i]))
            return vc_ctx_fail(w->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_create: %s: tensor '%s' "
                               "has a non-finite value (%g at element %lld)", w->file, full,
                               (double)x[i], (long long)i);
    }
    return VC_OK;
}

static vc_status take_named(wsrc *w, const char *prefix, const char *suffix, int ndim,
                            const int64_t *shape, float *x, float lo, float hi)
{
    char full[512];
    snprintf(full, sizeof full, "%s.%s", prefix, suffix);
    return take(w, full, ndim, shape, x, lo, hi);
}

static vc_status alloc_f(vc_context *ctx, float **p, int64_t n)
{
    *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    return *p ? VC_OK
              : vc_ctx_fail(ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_create: out of memory for weights");
}

/* A conv's weight (and bias); `bn_channels` > 0 adds a bias array for the fold. */
static vc_status load_conv(wsrc *w, const vc_model *m, int32_t i, int folded, vc_net_params *P)
{
    const vc_net_layer *L = &m->layers[i];
    const int32_t *k = L->map.kernel;
    int64_t K = (int64_t)k[0] * k[1] * k[2];
    int64_t shape[5] = {L->channels, k[0], k[1], k[2], L->in_channels};
    P->weight_count = L->channels * K * L->in_channels;
    vc_status s = alloc_f(w->ctx, &P->weights, P->weight_count);
    /* He-like scale over the taps a sparse site typically has (surfaces fill about a third of
     * a 3x3x3 neighbourhood): activations stay O(1) through deep stacks. */
    double taps = K < 9 ? (double)K : 9.0;
    float a = (float)sqrt(3.0 / (taps * (double)L->in_channels));
    if (s == VC_OK) s = take_named(w, L->name, "weight", 5, shape, P->weights, -a, a);
    if (s == VC_OK && (L->bias || folded)) {
        s = alloc_f(w->ctx, &P->bias, L->channels);
        if (s == VC_OK && L->bias)
            s = take_named(w, L->name, "bias", 1, &L->channels, P->bias, -0.1f, 0.1f);
        else if (s == VC_OK)
            memset(P->bias, 0, (size_t)L->channels * sizeof(float));
    }
    return s;
}

/* A BN's four tensors into bn[4 * C]: gamma, beta, mean, var. */
static vc_status load_bn(wsrc *w, const vc_net_layer *L, float *bn)
{
    static const float lo[4] = {0.5f, -0.2f, -0.2f, 0.5f}, hi[4] = {1.5f, 0.2f, 0.2f, 1.5f};
    vc_status s = VC_OK;
    for (int q = 0; q < 4 && s == VC_OK; q++)
        s = take_named(w, L->name, bn_suffix[q], 1, &L->channels, bn + q * L->channels, lo[q],
                       hi[q]);
    for (int64_t c = 0; s == VC_OK && c < L->channels; c++)
        if (!(bn[3 * L->channels + c] + L->eps > 0))
            s = vc_ctx_fail(w->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_create: %s: tensor "
                            "'%s.running_var' has var + eps <= 0 at channel %lld", w->file,
                            L->name, (long long)c);
    return s;
}

void vc_net_bn_affine(const float *gamma, const float *beta, const float *mean,
                      const float *var, float eps, int64_t c, float *scale, float *shift)
{
    for (int64_t i = 0; i < c; i++) {
        float s = gamma[i] / sqrtf(var[i] + eps);
        scale[i] = s;
        shift[i] = beta[i] - mean[i] * s;
    }
}

/* W'[o, ...] = W[o, ...] * s[o]; b'[o] = (b[o] - mean[o]) * s[o] + beta[o]. */
static void fold(const vc_net_layer *B, const float *bn, vc_net_params *P, int64_t per_out)
{
    int64_t C = B->channels;
    for (int64_t o = 0; o < C; o++) {
        float s = bn[o] / sqrtf(bn[3 * C + o] + B->eps);
        for (int64_t j = 0; j < per_out; j++) P->weights[o * per_out + j] *= s;
        P->bias[o] = (P->bias[o] - bn[2 * C + o]) * s + bn[C + o];
    }
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Whether BN layer j is folded into some conv. */
static int is_folded(const int32_t *bn_of, const vc_model *m, int32_t j)
{
    for (int32_t i = 0; i < m->n_layers; i++)
        if (bn_of[i] == j) return 1;
    return 0;
}

static vc_status load_all(wsrc *w, const vc_model *m, const int32_t *bn_of, vc_net_params *params)
{
    vc_status s = VC_OK;
    float *bn = NULL;
    for (int32_t i = 0; i < m->n_layers && s == VC_OK; i++) {
        const vc_net_layer *L = &m->layers[i];
        if (vc_nop_is_conv(L->op)) {
            int32_t b = bn_of[i];
            s = load_conv(w, m, i, b >= 0, &params[i]);
            if (s == VC_OK && b >= 0) {
                const vc_net_layer *B = &m->layers[b];
                free(bn);
                bn = NULL;
                s = alloc_f(w->ctx, &bn, 4 * B->channels);
                if (s == VC_OK) s = load_bn(w, B, bn);
                if (s == VC_OK)
                    fold(B, bn, &params[i], params[i].weight_count / L->channels);
            }
        } else if (L->op == VC_NOP_BATCHNORM && !is_folded(bn_of, m, i)) {
            vc_net_params *P = &params[i];
            free(bn);
            bn = NULL;
            s = alloc_f(w->ctx, &bn, 4 * L->channels);
            if (s == VC_OK) s = alloc_f(w->ctx, &P->scale, L->channels);
            if (s == VC_OK) s = alloc_f(w->ctx, &P->shift, L->channels);
            if (s == VC_OK) s = load_bn(w, L, bn);
            if (s == VC_OK)
                vc_net_bn_affine(bn, bn + L->channels, bn + 2 * L->channels,
                                 bn + 3 * L->channels, L->eps, L->channels, P->scale, P->shift);
        }
    }
    free(bn);
    if (s != VC_OK || w->desc->random_weights) return s;
    for (int64_t t = 0; t < w->st.count; t++)
        if (!w->st.tensors[t].used && !ends_with(w->st.tensors[t].name, ".num_batches_tracked") &&
            strcmp(w->st.tensors[t].name, "num_batches_tracked") != 0)
            return vc_ctx_fail(w->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_create: %s: tensor '%s' "
                               "is not used by the description (extra or misnamed)", w->file,
                               w->st.tensors[t].name);
    return VC_OK;
}

vc_status vc_net_load_params(vc_context *ctx, const vc_model *m, const int32_t *bn_of,
                             const vc_net_desc *desc, vc_net_params *params)
{
    wsrc w = {ctx, desc, {0}, "<random weights>"};
    vc_status s = VC_OK;
    vc_io_src src = {ctx, "<memory>"};
    if (!desc->random_weights && desc->weights_path) {
        w.file = desc->weights_path;
        s = vc_st_read(&src, desc->weights_path, &w.st);
    } else if (!desc->random_weights) {
        w.file = "<weights in memory>";
        src.name = w.file;
        s = vc_st_parse(&src, desc->weights_data, desc->weights_size, &w.st);
    }
    if (s == VC_OK) s = load_all(&w, m, bn_of, params);
    vc_st_free(&w.st);
    if (s != VC_OK) vc_net_free_params(m, params);
    return s;
}

void vc_net_free_params(const vc_model *m, vc_net_params *params)
{
    if (!params) return;
    for (int32_t i = 0; i < m->n_layers; i++) {
        free(params[i].weights);
        free(params[i].bias);
        free(params[i].scale);
        free(params[i].shift);
        memset(&params[i], 0, sizeof params[i]);
    }
}
