/* tests/unit/test_kmap.c - CPU kernel maps (conv/kmap.h) against an independent brute-force
 * oracle: every output site of the grid is enumerated in (b, z, y, x) order and every kernel
 * offset resolved by a linear scan of the input rows (no hashing, no division tricks shared with
 * the library). Covers SUBM, STRIDED, DOWNSAMPLE, TRANSPOSED and INVERSE on random small clouds,
 * the pair lists, masks and mask order, thread-count determinism, N = 0, 1, 31, 33, duplicates,
 * bad descriptors and out-of-range rows. With CUDA built in, also the GPU kernels' target
 * arithmetic (run on the host through vc_kmap_gpu_debug_targets) against the definitions, row
 * by row, over a sweep of kernels, strides, paddings, dilations and shapes up to 2^20. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmap/kmap.h"
#ifdef VOXCONV_HAVE_CUDA
#include "kmap/kmap_gpu.h"
#endif
#include "map_desc.h"
#include "testutil.h"

static const char *type_name(vc_map_type t)
{
    switch (t) {
    case VC_MAP_SUBM: return "SUBM";
    case VC_MAP_STRIDED: return "STRIDED";
    case VC_MAP_DOWNSAMPLE: return "DOWNSAMPLE";
    case VC_MAP_INVERSE: return "INVERSE";
    case VC_MAP_TRANSPOSED: return "TRANSPOSED";
    }
    return "?";
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_kmap: out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- the oracle ------------------------------------------------------------------------- */

typedef struct oracle {
    int valid;
    int32_t out_shape[3];
    int64_t n_out;
    int32_t *out_coords; /* [n_out, 4] */
    int32_t *out_in;     /* [n_out, K] */
    int32_t K;
} oracle;

static void oracle_free(oracle *o)
{
    free(o->out_coords);
    free(o->out_in);
    memset(o, 0, sizeof *o);
}

/* Row of (b, z, y, x) among coords[n] by linear scan, or -1. */
static int32_t scan_row(const int32_t *coords, int64_t n, int64_t b, int64_t z, int64_t y,
                        int64_t x)
{
    for (int64_t i = 0; i < n; i++) {
        const int32_t *c = coords + 4 * i;
        if (c[0] == b && c[1] == z && c[2] == y && c[3] == x) return (int32_t)i;
    }
    return -1;
}

/* Output shape of one axis by the definitions, -1 if empty / invalid. */
static int64_t axis_out(vc_map_type t, int64_t in, int64_t ks, int64_t s, int64_t pad,
                        int64_t dil)
{
    if (t == VC_MAP_SUBM) return ks % 2 ? in : -1;
    if (t == VC_MAP_STRIDED) {
        /* every p whose window [p*s - pad, p*s - pad + dil*(ks-1)] lies in [-pad, in-1+pad] */
        int64_t n = 0;
        while (n * s - pad + dil * (ks - 1) <= in - 1 + pad) n++;
        return n > 0 ? n : -1;
    }
    if (t == VC_MAP_DOWNSAMPLE) {
        if (pad != 0) return -1;
        int64_t n = 0;
        while (n * s < in) n++; /* every p that is floor(q/s) of some q in [0, in) */
        return n;
    }
    /* TRANSPOSED: the output the last input reaches at the last offset, plus one, minus the
       padding cropped at both ends */
    int64_t n = (in - 1) * s + dil * (ks - 1) + 1 - 2 * pad;
    return n > 0 ? n : -1;
}

static int oracle_source(const vc_map_desc *d, const int32_t *shape, int64_t b, const int64_t p[3],
                         int k, const int32_t *in, int64_t n_in)
{
    int kd[3] = {k / (d->kernel[1] * d->kernel[2]), (k / d->kernel[2]) % d->kernel[1],
                 k % d->kernel[2]};
    if (d->type == VC_MAP_TRANSPOSED) {
        /* input q writes output q*s - pad + d*dil: look for q with that equality */
        for (int64_t i = 0; i < n_in; i++) {
            const int32_t *q = in + 4 * i;
            if (q[0] != b) continue;
            int hit = 1;
            for (int a = 0; a < 3 && hit; a++)
                if ((int64_t)q[1 + a] * d->stride[a] - d->padding[a] +
                        (int64_t)kd[a] * d->dilation[a] != p[a])
                    hit = 0;
            if (hit) return (int32_t)i;
        }
        return -1;
    }
    int64_t c[3];
    for (int a = 0; a < 3; a++) {
        int64_t ks = d->kernel[a], dil = d->dilation[a], s = d->stride[a];
        if (d->type == VC_MAP_SUBM)
            c[a] = p[a] + (kd[a] - (ks - 1) / 2) * dil;
        else if (d->type == VC_MAP_STRIDED)
            c[a] = p[a] * s - d->padding[a] + kd[a] * dil;
        else /* DOWNSAMPLE */
            c[a] = p[a] * s + (kd[a] - ((ks & 1) ? (ks - 1) / 2 : 0)) * dil;
        if (c[a] < 0 || c[a] >= shape[a]) return -1;
    }
    return scan_row(in, n_in, b, c[0], c[1], c[2]);
}

static void oracle_build(const int32_t *in, int64_t n_in, const int32_t shape[3], int32_t batch,
                         const vc_map_desc *d, oracle *o)
{
    memset(o, 0, sizeof *o);
    o->K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    for (int a = 0; a < 3; a++) {
        if (d->kernel[a] < 1 || d->kernel[a] > 7 || d->stride[a] < 1 || d->padding[a] < 0 ||
            d->dilation[a] < 1)
            return;
        int64_t v = axis_out(d->type, shape[a], d->kernel[a], d->stride[a], d->padding[a],
                             d->dilation[a]);
        if (v < 1) return;
        o->out_shape[a] = (int32_t)v;
    }
    o->valid = 1;
    const int K = o->K;
    if (d->type == VC_MAP_SUBM) {
        o->n_out = n_in;
        o->out_coords = xmalloc((size_t)n_in * 16);
        memcpy(o->out_coords, in, (size_t)n_in * 16);
        o->out_in = xmalloc((size_t)n_in * K * 4);
        for (int64_t r = 0; r < n_in; r++) {
            int64_t p[3] = {in[4 * r + 1], in[4 * r + 2], in[4 * r + 3]};
            for (int k = 0; k < K; k++)
                o->out_in[r * K + k] = oracle_source(d, shape, in[4 * r], p, k, in, n_in);
        }
        return;
    }
    int64_t sites = (int64_t)batch * o->out_shape[0] * o->out_shape[1] * o->out_shape[2];
    int32_t *row = xmalloc((size_t)K * 4);
    int64_t cap = 64;
    o->out_coords = xmalloc((size_t)cap * 16);
    o->out_in = xmalloc((size_t)cap * K * 4);
    for (int64_t s = 0; s < sites; s++) {
        int64_t x = s % o->out_shape[2], y = (s / o->out_shape[2]) % o->out_shape[1];
        int64_t z = (s / ((int64_t)o->out_shape[2] * o->out_shape[1])) % o->out_shape[0];
        int64_t b = s / ((int64_t)o->out_shape[2] * o->out_shape[1] * o->out_shape[0]);
        int64_t p[3] = {z, y, x};
        int active = 0;
        if (d->type == VC_MAP_DOWNSAMPLE) {
            for (int64_t i = 0; i < n_in && !active; i++) {
                const int32_t *q = in + 4 * i;
                active = q[0] == b && q[1] / d->stride[0] == z && q[2] / d->stride[1] == y &&
                         q[3] / d->stride[2] == x;
            }
        }
        for (int k = 0; k < K; k++) {
            row[k] = oracle_source(d, shape, b, p, k, in, n_in);
            if (row[k] >= 0 && d->type != VC_MAP_DOWNSAMPLE) active = 1;
        }
        if (!active) continue;
        if (o->n_out == cap) {
            cap *= 2;
            int32_t *c2 = realloc(o->out_coords, (size_t)cap * 16);
            int32_t *o2 = realloc(o->out_in, (size_t)cap * K * 4);
            if (!c2 || !o2) {
                fprintf(stderr, "test_kmap: out of memory\n");
                exit(2);
            }
            o->out_coords = c2;
            o->out_in = o2;
        }
        int32_t *c = o->out_coords + 4 * o->n_out;
        c[0] = (int32_t)b;
        c[1] = (int32_t)z;
        c[2] = (int32_t)y;
        c[3] = (int32_t)x;
        memcpy(o->out_in + o->n_out * K, row, (size_t)K * 4);
        o->n_out++;
    }
    free(row);
}

/* ---- checks ------------------------------------------------------------------------------ */

static int lex_cmp(const int32_t *a, const int32_t *b)
{
    for (int i = 0; i < 4; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* The offsets in the order of perm's sort key (kmap.h), most significant first, worked out here
 * independently of the library: by the L1 distance from the kernel's centre in
 * half-offsets, farthest first, then by offset descending (an insertion sort). */
static void key_order(const vc_kmap_data *m, int32_t *order)
{
    const int32_t kz = m->kernel[0], ky = m->kernel[1], kx = m->kernel[2], K = kz * ky * kx;
    int32_t far[VC_KMAP_MAX_VOLUME];
    for (int32_t z = 0, k = 0; z < kz; z++)
        for (int32_t y = 0; y < ky; y++)
            for (int32_t x = 0; x < kx; x++, k++)
                far[k] = abs(2 * z - (kz - 1)) + abs(2 * y - (ky - 1)) + abs(2 * x - (kx - 1));
    for (int32_t i = 0; i < K; i++) {
        int32_t k = K - 1 - i, at = i; /* offsets arrive descending: ties stay in that order */
        while (at > 0 && far[order[at - 1]] < far[k]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = k;
    }
}

/* 1 if output a comes strictly before output b in perm order: the first offset in key order
 * (order) where their masks differ belongs to a, else (same masks) a is the lower row. */
static int perm_before(const vc_kmap_data *m, const int32_t *order, int32_t a, int32_t b)
{
    const uint32_t *ma = m->masks + (int64_t)a * m->mask_words;
    const uint32_t *mb = m->masks + (int64_t)b * m->mask_words;
    for (int32_t i = 0; i < m->volume; i++) {
        const int32_t k = order[i];
        const uint32_t x = ma[k / 32] >> (k % 32) & 1u, y = mb[k / 32] >> (k % 32) & 1u;
        if (x != y) return x > y;
    }
    return a < b;
}

/* perm is a permutation of 0..n-1 sorted by perm_before; returns the problems. */
static int check_order(const vc_kmap_data *m, const int32_t *perm)
{
    const int64_t n = m->n_out;
    int bad = 0;
    int32_t order[VC_KMAP_MAX_VOLUME];
    key_order(m, order);
    char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!seen) return 1;
    for (int64_t i = 0; i < n; i++) {
        int32_t r = perm[i];
        if (r < 0 || r >= n || seen[r]) {
            bad++;
            break;
        }
        seen[r] = 1;
        if (i > 0 && !perm_before(m, order, perm[i - 1], r)) bad++;
    }
    free(seen);
    return bad;
}

/* Pair lists, masks and perm are consistent with out_in. Returns the number of problems. */
static int check_derived(const vc_kmap_data *m)
{
    int bad = 0;
    const int K = m->volume;
    const int64_t n = m->n_out;
    if (!m->offsets) return 1;
    if (m->offsets[0] != 0 || m->offsets[K] != m->n_pairs) bad++;
    if (m->mask_words != (K + 31) / 32) bad++;
    int64_t total = 0;
    for (int k = 0; k < K && !bad; k++) {
        int64_t cnt = 0;
        for (int64_t p = 0; p < n; p++) cnt += m->out_in[p * K + k] >= 0;
        if (m->offsets[k + 1] - m->offsets[k] != cnt) {
            bad++;
            break;
        }
        for (int64_t j = m->offsets[k]; j < m->offsets[k + 1]; j++) {
            int32_t o = m->out_rows[j], i = m->in_rows[j];
            if (o < 0 || o >= n || m->out_in[(int64_t)o * K + k] != i) bad++;
            if (j > m->offsets[k] && m->out_rows[j - 1] >= o) bad++;
        }
        total += cnt;
    }
    if (total != m->n_pairs) bad++;
    /* masks */
    for (int64_t p = 0; p < n && !bad; p++) {
        for (int w = 0; w < m->mask_words; w++) {
            uint32_t want = 0;
            for (int b = 0; b < 32; b++) {
                int k = w * 32 + b;
                if (k < K && m->out_in[p * K + k] >= 0) want |= (uint32_t)1 << b;
            }
            if (m->masks[p * m->mask_words + w] != want) bad++;
        }
    }
    /* perm: a permutation in mask order */
    if (n > 0) bad += check_order(m, m->perm);
    return bad;
}

/* Compares a built map with the oracle; returns the number of problems. */
static int check_against(const vc_kmap_data *m, const oracle *o, const vc_map_desc *d,
                         int64_t n_in, int32_t batch)
{
    int bad = 0;
    const int K = o->K;
    if (m->type != d->type || m->volume != K || m->n_in != n_in || m->out_batch_size != batch)
        bad++;
    for (int a = 0; a < 3; a++)
        if (m->kernel[a] != d->kernel[a] || m->stride[a] != d->stride[a] ||
            m->padding[a] != d->padding[a] || m->dilation[a] != d->dilation[a] ||
            m->out_shape[a] != o->out_shape[a])
            bad++;
    if (m->n_out != o->n_out) return bad + 1;
    if (d->type == VC_MAP_SUBM) {
        if (m->out_coords != NULL) bad++;
    } else {
        if (o->n_out > 0 && memcmp(m->out_coords, o->out_coords, (size_t)o->n_out * 16) != 0)
            bad++;
        for (int64_t p = 1; p < m->n_out; p++)
            if (lex_cmp(m->out_coords + 4 * (p - 1), m->out_coords + 4 * p) >= 0) bad++;
    }
    if (o->n_out > 0 && memcmp(m->out_in, o->out_in, (size_t)o->n_out * K * 4) != 0) bad++;
    return bad + check_derived(m);
}

static int maps_equal(const vc_kmap_data *a, const vc_kmap_data *b)
{
    if (a->type != b->type || a->volume != b->volume || a->n_in != b->n_in ||
        a->n_out != b->n_out || a->n_pairs != b->n_pairs || a->mask_words != b->mask_words ||
        memcmp(a->out_shape, b->out_shape, sizeof a->out_shape) != 0)
        return 0;
    int64_t n = a->n_out, K = a->volume;
    if ((a->out_coords == NULL) != (b->out_coords == NULL)) return 0;
    if (n > 0 && a->out_coords && memcmp(a->out_coords, b->out_coords, (size_t)n * 16)) return 0;
    if (n > 0 && memcmp(a->out_in, b->out_in, (size_t)(n * K * 4))) return 0;
    if (memcmp(a->offsets, b->offsets, (size_t)(K + 1) * 8)) return 0;
    if (a->n_pairs > 0 && (memcmp(a->in_rows, b->in_rows, (size_t)a->n_pairs * 4) ||
                           memcmp(a->out_rows, b->out_rows, (size_t)a->n_pairs * 4)))
        return 0;
    if (n > 0 && (memcmp(a->masks, b->masks, (size_t)(n * a->mask_words * 4)) ||
                  memcmp(a->perm, b->perm, (size_t)n * 4)))
        return 0;
    return 1;
}

/* Checks the INVERSE of fwd (built from coordinates `in`) by brute force. */
static int check_inverse(const vc_kmap_data *inv, const vc_kmap_data *fwd,
                         const int32_t shape[3], int32_t batch)
{
    int bad = 0;
    const int K = fwd->volume;
    if (inv->type != VC_MAP_INVERSE || inv->volume != K || inv->n_in != fwd->n_out ||
        inv->n_out != fwd->n_in || inv->out_coords != NULL || inv->out_batch_size != batch)
        return 1;
    for (int a = 0; a < 3; a++)
        if (inv->out_shape[a] != shape[a] || inv->kernel[a] != fwd->kernel[a] ||
            inv->stride[a] != fwd->stride[a] || inv->padding[a] != fwd->padding[a] ||
            inv->dilation[a] != fwd->dilation[a])
            bad++;
    for (int64_t q = 0; q < inv->n_out; q++)
        for (int k = 0; k < K; k++) {
            int32_t want = -1;
            for (int64_t p = 0; p < fwd->n_out; p++)
                if (fwd->out_in[p * K + k] == q) want = (int32_t)p;
            if (inv->out_in[q * K + k] != want) bad++;
        }
    /* pair lists are the forward ones swapped */
    if (inv->n_pairs != fwd->n_pairs) bad++;
    for (int k = 0; k <= K && !bad; k++)
        if (inv->offsets[k] != fwd->offsets[k]) bad++;
    for (int k = 0; k < K && !bad; k++)
        for (int64_t j = fwd->offsets[k]; j < fwd->offsets[k + 1]; j++)
            if (inv->out_in[(int64_t)fwd->in_rows[j] * K + k] != fwd->out_rows[j]) bad++;
    return bad + check_derived(inv);
}

/* ---- inputs ------------------------------------------------------------------------------ */

/* n distinct random rows in batch x shape, corners first, in shuffled order. */
static int32_t *random_cloud(vc_rng *rng, int64_t n, const int32_t shape[3], int32_t batch)
{
    int64_t vol = (int64_t)batch * shape[0] * shape[1] * shape[2];
    if (n > vol) n = vol;
    int64_t *sites = xmalloc((size_t)vol * 8);
    for (int64_t i = 0; i < vol; i++) sites[i] = i;
    /* corners (edges of the shape, first and last batch) go first */
    int64_t corner[4] = {0, vol - 1,
                         (int64_t)(shape[1] - 1) * shape[2],
                         (vol - 1) - (int64_t)(shape[1] - 1) * shape[2]};
    int64_t placed = 0;
    for (int c = 0; c < 4 && placed < n; c++) {
        int64_t j;
        for (j = placed; j < vol && sites[j] != corner[c]; j++) {}
        if (j == vol) continue;
        int64_t t = sites[placed];
        sites[placed] = sites[j];
        sites[j] = t;
        placed++;
    }
    for (int64_t i = placed; i < n; i++) {
        int64_t j = i + vc_rng_int(rng, vol - i);
        int64_t t = sites[i];
        sites[i] = sites[j];
        sites[j] = t;
    }
    /* shuffle the chosen rows so the input is not sorted */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        int64_t t = sites[i];
        sites[i] = sites[j];
        sites[j] = t;
    }
    int32_t *c = xmalloc((size_t)n * 16);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = sites[i];
        c[4 * i + 3] = (int32_t)(s % shape[2]);
        c[4 * i + 2] = (int32_t)((s / shape[2]) % shape[1]);
        c[4 * i + 1] = (int32_t)((s / ((int64_t)shape[2] * shape[1])) % shape[0]);
        c[4 * i + 0] = (int32_t)(s / ((int64_t)shape[2] * shape[1] * shape[0]));
    }
    free(sites);
    return c;
}

static int n_cases, n_inverse;

/* Builds with 1 and 2 threads, checks against the oracle, and the inverse where it applies. */
static void run_case(const char *what, const int32_t *in, int64_t n, const int32_t shape[3],
                     int32_t batch, const vc_map_desc *d)
{
    oracle o;
    oracle_build(in, n, shape, batch, d, &o);
    vc_kmap_data m1, m2;
    vc_err err = {{0}};
    memset(&m1, 0, sizeof m1);
    memset(&m2, 0, sizeof m2);
    vc_status s1 = vc_kmap_build_cpu(in, n, shape, batch, d, NULL, 1, &m1, &err);
    char desc[256];
    snprintf(desc, sizeof desc, "%s %s n=%lld shape %dx%dx%d batch %d kernel %dx%dx%d "
             "stride %d,%d,%d pad %d,%d,%d dil %d,%d,%d", what, type_name(d->type), (long long)n,
             shape[0], shape[1], shape[2], batch, d->kernel[0], d->kernel[1], d->kernel[2],
             d->stride[0], d->stride[1], d->stride[2], d->padding[0], d->padding[1],
             d->padding[2], d->dilation[0], d->dilation[1], d->dilation[2]);
    n_cases++;
    if (!o.valid) {
        CHECK_MSG(s1 == VC_ERR_INVALID_ARGUMENT, "%s: status %d, want INVALID_ARGUMENT", desc,
                  (int)s1);
        CHECK(err.msg[0] != 0);
        if (s1 == VC_OK) vc_kmap_data_free(&m1);
        oracle_free(&o);
        return;
    }
    CHECK_MSG(s1 == VC_OK, "%s: status %d (%s)", desc, (int)s1, err.msg);
    if (s1 != VC_OK) {
        oracle_free(&o);
        return;
    }
    int bad = check_against(&m1, &o, d, n, batch);
    CHECK_MSG(bad == 0, "%s: %d differences from the oracle (n_out %lld vs %lld)", desc, bad,
              (long long)m1.n_out, (long long)o.n_out);
    vc_status s2 = vc_kmap_build_cpu(in, n, shape, batch, d, NULL, 2, &m2, &err);
    CHECK_MSG(s2 == VC_OK && maps_equal(&m1, &m2), "%s: 1 and 2 threads differ", desc);
    if (d->type == VC_MAP_STRIDED || d->type == VC_MAP_DOWNSAMPLE) {
        vc_kmap_data inv;
        memset(&inv, 0, sizeof inv);
        vc_status si = vc_kmap_inverse_cpu(&m1, shape, batch, NULL, &inv, &err);
        CHECK_MSG(si == VC_OK, "%s: inverse status %d (%s)", desc, (int)si, err.msg);
        if (si == VC_OK) {
            int bi = check_inverse(&inv, &m1, shape, batch);
            CHECK_MSG(bi == 0, "%s: inverse has %d problems", desc, bi);
            n_inverse++;
        }
        vc_kmap_data_free(&inv);
    }
    vc_kmap_data_free(&m1);
    vc_kmap_data_free(&m2);
    oracle_free(&o);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_random(vc_rng *rng, int cases)
{
    static const vc_map_type types[4] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE,
                                         VC_MAP_TRANSPOSED};
    for (int c = 0; c < cases; c++) {
        vc_map_type t = types[c % 4];
        int32_t shape[3], batch = 1 + (int32_t)vc_rng_int(rng, 3);
        if (vc_rng_int(rng, 3) == 0) {
            shape[0] = 5;
            shape[1] = 7;
            shape[2] = 6;
        } else {
            for (int a = 0; a < 3; a++) shape[a] = 1 + (int32_t)vc_rng_int(rng, 7);
        }
        vc_map_desc d = mkdesc_zyx(t, 3, 3, 3, 1, 0, 1);
        for (int a = 0; a < 3; a++) {
            int big = vc_rng_int(rng, 4) == 0; /* mostly small kernels, sometimes up to 7 */
            int32_t ks = 1 + (int32_t)vc_rng_int(rng, big ? 7 : 3);
            if (t == VC_MAP_SUBM && ks % 2 == 0) ks++;
            d.kernel[a] = ks;
            d.stride[a] = 1 + (int32_t)vc_rng_int(rng, 3);
            d.padding[a] = t == VC_MAP_DOWNSAMPLE ? 0 : (int32_t)vc_rng_int(rng, 3);
            d.dilation[a] = 1 + (int32_t)vc_rng_int(rng, 2);
        }
        /* keep the oracle's work bounded: output sites x K x rows */
        int64_t osites = batch, K = (int64_t)d.kernel[0] * d.kernel[1] * d.kernel[2];
        for (int a = 0; a < 3; a++) {
            int64_t v = (int64_t)(shape[a] - 1) * d.stride[a] + d.dilation[a] * (d.kernel[a] - 1)
                        + 1;
            osites *= v > shape[a] ? v : shape[a];
        }
        if (osites * K > 1000000) {
            c--;
            continue;
        }
        int64_t vol = (int64_t)batch * shape[0] * shape[1] * shape[2];
        int64_t n = vc_rng_int(rng, (vol < 48 ? vol : 48) + 1);
        int32_t *in = random_cloud(rng, n, shape, batch);
        run_case("random", in, n, shape, batch, &d);
        free(in);
    }
}

static void test_fixed(vc_rng *rng)
{
    const int32_t shape[3] = {5, 7, 6};
    const int64_t sizes[4] = {0, 1, 31, 33};
    for (int si = 0; si < 4; si++) {
        int32_t *in = random_cloud(rng, sizes[si], shape, 2);
        vc_map_desc ds[] = {
            mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1),
            mkdesc_zyx(VC_MAP_SUBM, 3, 1, 1, 1, 0, 1),
            mkdesc_zyx(VC_MAP_SUBM, 1, 3, 1, 1, 0, 2),
            mkdesc_zyx(VC_MAP_SUBM, 7, 7, 7, 1, 0, 1),   /* K = 343: 11 mask words */
            mkdesc_zyx(VC_MAP_SUBM, 5, 3, 1, 1, 0, 1),
            mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1),
            mkdesc_zyx(VC_MAP_STRIDED, 3, 1, 1, 2, 0, 1),
            mkdesc_zyx(VC_MAP_STRIDED, 1, 3, 1, 1, 1, 2),
            mkdesc_zyx(VC_MAP_STRIDED, 2, 2, 2, 2, 0, 1),
            mkdesc_zyx(VC_MAP_STRIDED, 5, 5, 5, 1, 2, 1),
            mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 0, 1),
            mkdesc_zyx(VC_MAP_DOWNSAMPLE, 3, 3, 3, 2, 0, 1),
            mkdesc_zyx(VC_MAP_DOWNSAMPLE, 3, 1, 1, 3, 0, 2),
            mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 2, 1, 1),
            mkdesc_zyx(VC_MAP_TRANSPOSED, 2, 2, 2, 2, 0, 1),
            mkdesc_zyx(VC_MAP_TRANSPOSED, 1, 3, 1, 3, 2, 2),
        };
        for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
            run_case("fixed", in, sizes[si], shape, 2, &ds[i]);
        free(in);
    }
    /* A grid of one voxel. */
    const int32_t one[3] = {1, 1, 1};
    int32_t single[8] = {0, 0, 0, 0, 1, 0, 0, 0};
    vc_map_desc d = mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1);
    run_case("one voxel", single, 2, one, 2, &d);
    d = mkdesc_zyx(VC_MAP_STRIDED, 1, 1, 1, 1, 0, 1);
    run_case("one voxel", single, 2, one, 2, &d);
    d = mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 1, 1, 1);
    run_case("one voxel", single, 2, one, 2, &d);
}

static void test_n0(void)
{
    const int32_t shape[3] = {5, 7, 6};
    vc_map_desc d = mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1);
    vc_kmap_data m;
    vc_err err = {{0}};
    memset(&m, 0, sizeof m);
    CHECK(vc_kmap_build_cpu(NULL, 0, shape, 1, &d, NULL, 0, &m, &err) == VC_OK);
    CHECK(m.n_out == 0 && m.n_pairs == 0 && m.offsets != NULL && m.volume == 27);
    int zeros = 1;
    for (int k = 0; k <= 27 && m.offsets; k++) zeros &= m.offsets[k] == 0;
    CHECK(zeros);
    CHECK(m.out_shape[0] == 3 && m.out_shape[1] == 4 && m.out_shape[2] == 3);
    vc_kmap_data_free(&m);
    vc_kmap_data zero;
    memset(&zero, 0, sizeof zero);
    CHECK(memcmp(&m, &zero, sizeof m) == 0);
    vc_kmap_data_free(NULL);
}

/* The sort key's bits (kmap.h: vc_kmap_key_bits) against key_order's, on kernels of every
 * parity and size, and whether it calls the key the mask; by hand for 3x3x3 (a corner first,
 * the centre last) and 2x2x2 (the mask). */
static void test_key_bits(void)
{
    static const int32_t shapes[][3] = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {1, 3, 3}, {3, 1, 1},
                                        {5, 5, 5}, {3, 5, 7}, {2, 3, 4}, {7, 7, 7}, {6, 1, 7}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        vc_kmap_data m;
        memset(&m, 0, sizeof m);
        memcpy(m.kernel, shapes[s], sizeof m.kernel);
        m.volume = shapes[s][0] * shapes[s][1] * shapes[s][2];
        int32_t order[VC_KMAP_MAX_VOLUME], kbit[VC_KMAP_MAX_VOLUME];
        key_order(&m, order);
        const int ident = vc_kmap_key_bits(m.kernel, kbit);
        int bad = 0, own = 1;
        for (int32_t i = 0; i < m.volume; i++) {
            bad += kbit[order[i]] != m.volume - 1 - i;
            own = own && order[i] == m.volume - 1 - i;
        }
        CHECK_MSG(bad == 0, "kernel %dx%dx%d: %d key bits differ from the oracle's", shapes[s][0],
                  shapes[s][1], shapes[s][2], bad);
        CHECK_MSG(ident == own, "kernel %dx%dx%d: key called the mask %d, oracle %d",
                  shapes[s][0], shapes[s][1], shapes[s][2], ident, own);
        if (s == 1)
            for (int32_t k = 0; k < 8; k++) CHECK(kbit[k] == k);
        if (s == 2) {
            CHECK(order[0] == 26 && order[26] == 13); /* corner (2, 2, 2) first, centre last */
            CHECK(order[8] == 25 && order[20] == 22); /* the edges, then the faces, descending */
        }
    }
}

/* The tile order (kmap.h) of a hand-made map: blocks of 128 positions of perm, by the taps
 * their rows' masks have, descending, ties by block; two mask words count both. */
static void test_tile_order(void)
{
    vc_kmap_data m;
    vc_err err = {{0}};
    memset(&m, 0, sizeof m);
    CHECK(vc_kmap_tile_order_cpu(&m, &err) == VC_OK); /* no outputs: no order */
    CHECK(m.tile_order == NULL && m.order_blocks == 0);
    m.n_out = 5;
    CHECK(vc_kmap_tile_order_cpu(&m, &err) == VC_ERR_INVALID_ARGUMENT); /* no masks */
    const int64_t n = 300; /* blocks of 128, 128, 44 */
    m.n_out = n;
    m.volume = 40;
    m.mask_words = 2;
    m.masks = calloc((size_t)n * 2, sizeof *m.masks);
    m.perm = malloc((size_t)n * sizeof *m.perm);
    for (int64_t i = 0; i < n; i++) m.perm[i] = (int32_t)(n - 1 - i); /* reversed rows */
    /* perm positions p hold row n - 1 - p. Block 0 (rows 299..172): taps 0, 1 and 33 (3);
     * block 1 (rows 171..44): taps 2..6 (5); block 2 (rows 43..0): taps 7, 8, 9 (3) */
    m.masks[299 * 2] = 1u;
    m.masks[172 * 2] = 2u;
    m.masks[200 * 2 + 1] = 2u;
    m.masks[171 * 2] = 0x7cu & 0x0cu;
    m.masks[44 * 2] = 0x7cu & 0x70u;
    m.masks[43 * 2] = 0x380u;
    m.masks[0] = 0x380u;
    CHECK(vc_kmap_tile_order_cpu(&m, &err) == VC_OK);
    CHECK(m.order_blocks == 3 && m.tile_order && m.tile_order[0] == 1 && m.tile_order[1] == 0 &&
          m.tile_order[2] == 2);
    /* rebuilt: block 2 gains taps 10 and 11 (5, tied with block 1: block 1 first) */
    m.masks[10 * 2] = 0xc00u;
    CHECK(vc_kmap_tile_order_cpu(&m, &err) == VC_OK);
    CHECK(m.order_blocks == 3 && m.tile_order[0] == 1 && m.tile_order[1] == 2 &&
          m.tile_order[2] == 0);
    vc_kmap_data_free(&m); /* frees the order too (ASan in ./run.sh sanitize) */
}

static void test_errors(void)
{
    const int32_t shape[3] = {5, 7, 6};
    int32_t in[5 * 4] = {0, 0, 0, 0, 0, 4, 6, 5, 1, 2, 3, 4, 0, 1, 1, 1, 1, 2, 3, 4};
    vc_kmap_data m, sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    vc_err err;
    static const vc_map_type types[4] = {VC_MAP_SUBM, VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE,
                                         VC_MAP_TRANSPOSED};
    /* duplicates: rows 2 and 4 */
    for (int t = 0; t < 4; t++) {
        vc_map_desc d = mkdesc_zyx(types[t], 3, 3, 3, 2, 0, 1);
        m = sentinel;
        err.msg[0] = 0;
        CHECK(vc_kmap_build_cpu(in, 5, shape, 2, &d, NULL, 1, &m, &err) == VC_ERR_DUPLICATE);
        CHECK_MSG(strstr(err.msg, "2 and 4") != NULL, "message: %s", err.msg);
        CHECK(memcmp(&m, &sentinel, sizeof m) == 0);
    }
    /* no duplicates in the first four rows */
    {
        vc_map_desc d = mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1);
        memset(&m, 0, sizeof m);
        CHECK(vc_kmap_build_cpu(in, 4, shape, 2, &d, NULL, 1, &m, &err) == VC_OK);
        vc_kmap_data_free(&m);
    }
    /* out of range rows */
    int32_t oor[6][4] = {{0, 5, 0, 0}, {0, 0, 7, 0}, {0, 0, 0, 6}, {2, 0, 0, 0},
                         {-1, 0, 0, 0}, {0, 0, -1, 0}};
    for (int i = 0; i < 6; i++) {
        vc_map_desc d = mkdesc_zyx(types[i % 4], 3, 3, 3, 1, 0, 1);
        int32_t two[8] = {0, 1, 1, 1, oor[i][0], oor[i][1], oor[i][2], oor[i][3]};
        m = sentinel;
        CHECK(vc_kmap_build_cpu(two, 2, shape, 2, &d, NULL, 1, &m, &err) == VC_ERR_OUT_OF_RANGE);
        CHECK(memcmp(&m, &sentinel, sizeof m) == 0);
    }
    /* bad descriptors */
    struct {
        vc_map_desc d;
        const char *field;
    } bad[] = {
        {mkdesc_zyx(VC_MAP_SUBM, 2, 3, 3, 1, 0, 1), "kernel"},
        {mkdesc_zyx(VC_MAP_SUBM, 3, 3, 4, 1, 0, 1), "kernel"},
        {mkdesc_zyx(VC_MAP_STRIDED, 8, 3, 3, 1, 0, 1), "kernel"},
        {mkdesc_zyx(VC_MAP_STRIDED, 3, 0, 3, 1, 0, 1), "kernel"},
        {mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 0, 0, 1), "stride"},
        {mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, -2, 0, 1), "stride"},
        {mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 1, -1, 1), "padding"},
        {mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 1, 1), "padding"},
        {mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 1, 0, 0), "dilation"},
        {mkdesc_zyx(VC_MAP_STRIDED, 7, 3, 3, 1, 0, 1), "STRIDED"}, /* 5 - 6 - 1 < 0 along z */
        {mkdesc_zyx(VC_MAP_TRANSPOSED, 1, 1, 1, 1, 3, 1), "TRANSPOSED"}, /* 5 - 6 < 1 */
        {mkdesc_zyx(VC_MAP_INVERSE, 3, 3, 3, 2, 0, 1), "INVERSE"},
        {mkdesc_zyx((vc_map_type)42, 3, 3, 3, 1, 0, 1), "type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = sentinel;
        err.msg[0] = 0;
        vc_status s = vc_kmap_build_cpu(in, 4, shape, 2, &bad[i].d, NULL, 1, &m, &err);
        CHECK_MSG(s == VC_ERR_INVALID_ARGUMENT, "bad descriptor %zu: status %d", i, (int)s);
        CHECK_MSG(strstr(err.msg, bad[i].field) != NULL, "bad descriptor %zu: message '%s' "
                  "does not name '%s'", i, err.msg, bad[i].field);
        CHECK(memcmp(&m, &sentinel, sizeof m) == 0);
        int32_t os[3] = {-9, -9, -9};
        CHECK(vc_kmap_check_desc(&bad[i].d, shape, os, &err) == VC_ERR_INVALID_ARGUMENT);
        CHECK(os[0] == -9 && os[1] == -9 && os[2] == -9);
    }
    /* bad arguments */
    vc_map_desc d = mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1);
    m = sentinel;
    CHECK(vc_kmap_build_cpu(NULL, 3, shape, 1, &d, NULL, 1, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_build_cpu(in, -1, shape, 1, &d, NULL, 1, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_build_cpu(in, 4, shape, 0, &d, NULL, 1, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_build_cpu(in, 4, shape, 2, NULL, NULL, 1, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_build_cpu(in, 4, shape, 2, &d, NULL, 1, NULL, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_build_cpu(in, VC_MAX_ROWS + 1, shape, 2, &d, NULL, 1, &m, &err) == VC_ERR_LIMIT);
    const int32_t zero_shape[3] = {5, 0, 6};
    CHECK(vc_kmap_build_cpu(in, 4, zero_shape, 2, &d, NULL, 1, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    /* a shape that does not pack into 63 bits */
    const int32_t huge[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    CHECK(vc_kmap_build_cpu(in, 4, huge, 2, &d, NULL, 1, &m, &err) == VC_ERR_OUT_OF_RANGE);
    /* an output shape past int32 */
    vc_map_desc dt = mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 1 << 20, 0, 1);
    CHECK(vc_kmap_build_cpu(in, 4, (const int32_t[3]){4096, 4, 4}, 2, &dt, NULL, 1, &m, &err) ==
          VC_ERR_LIMIT);
    CHECK(memcmp(&m, &sentinel, sizeof m) == 0);
    /* NULL err is allowed */
    CHECK(vc_kmap_build_cpu(in, 5, shape, 2, &d, NULL, 1, &m, NULL) == VC_ERR_DUPLICATE);

    /* inverse of a map that is neither STRIDED nor DOWNSAMPLE */
    vc_kmap_data sub;
    memset(&sub, 0, sizeof sub);
    CHECK(vc_kmap_build_cpu(in, 4, shape, 2, &d, NULL, 1, &sub, &err) == VC_OK);
    m = sentinel;
    CHECK(vc_kmap_inverse_cpu(&sub, shape, 2, NULL, &m, &err) == VC_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&m, &sentinel, sizeof m) == 0);
    vc_kmap_data_free(&sub);
}

static void test_check_desc(void)
{
    vc_err err;
    int32_t os[3];
    /* SECOND's first downsampling layer on the KITTI grid */
    const int32_t kitti[3] = {41, 1600, 1408};
    vc_map_desc d = mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1);
    CHECK(vc_kmap_check_desc(&d, kitti, os, &err) == VC_OK);
    CHECK(os[0] == 21 && os[1] == 800 && os[2] == 704);
    d = mkdesc_zyx(VC_MAP_STRIDED, 3, 1, 1, 2, 0, 1);
    d.padding[0] = 0;
    CHECK(vc_kmap_check_desc(&d, (const int32_t[3]){5, 200, 176}, os, &err) == VC_OK);
    CHECK(os[0] == 2 && os[1] == 100 && os[2] == 88);
    d = mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 0, 1);
    CHECK(vc_kmap_check_desc(&d, (const int32_t[3]){5, 7, 6}, os, &err) == VC_OK);
    CHECK(os[0] == 3 && os[1] == 4 && os[2] == 3);
    d = mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 2, 1, 1);
    CHECK(vc_kmap_check_desc(&d, (const int32_t[3]){5, 7, 6}, os, &err) == VC_OK);
    CHECK(os[0] == 9 && os[1] == 13 && os[2] == 11);
    d = mkdesc_zyx(VC_MAP_SUBM, 3, 5, 7, 4, 2, 3);
    CHECK(vc_kmap_check_desc(&d, (const int32_t[3]){5, 7, 6}, os, &err) == VC_OK);
    CHECK(os[0] == 5 && os[1] == 7 && os[2] == 6);
}

/* A larger cloud: thread-count determinism and a sampled oracle check. */
static void test_large(vc_rng *rng)
{
    const int32_t shape[3] = {21, 96, 80};
    const int32_t batch = 2;
    const int64_t n = 20000;
    int32_t *in = random_cloud(rng, n, shape, batch);
    vc_map_desc ds[3] = {mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1),
                         mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1),
                         mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 0, 1)};
    for (int t = 0; t < 3; t++) {
        vc_kmap_data a, b;
        vc_err err;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        CHECK(vc_kmap_build_cpu(in, n, shape, batch, &ds[t], NULL, 1, &a, &err) == VC_OK);
        CHECK(vc_kmap_build_cpu(in, n, shape, batch, &ds[t], NULL, 2, &b, &err) == VC_OK);
        CHECK_MSG(maps_equal(&a, &b), "large %s: 1 and 2 threads differ", type_name(ds[t].type));
        CHECK(check_derived(&a) == 0);
        /* sampled rows against the oracle's per-site lookup */
        int bad = 0;
        for (int i = 0; i < 100 && a.n_out > 0; i++) {
            int64_t p = vc_rng_int(rng, a.n_out);
            const int32_t *pc = ds[t].type == VC_MAP_SUBM ? in + 4 * p : a.out_coords + 4 * p;
            int64_t site[3] = {pc[1], pc[2], pc[3]};
            for (int k = 0; k < a.volume; k++)
                if (a.out_in[p * a.volume + k] != oracle_source(&ds[t], shape, pc[0], site, k,
                                                                in, n))
                    bad++;
        }
        CHECK_MSG(bad == 0, "large %s: %d sampled entries differ", type_name(ds[t].type), bad);
        if (t > 0) {
            for (int64_t p = 1; p < a.n_out; p++)
                if (lex_cmp(a.out_coords + 4 * (p - 1), a.out_coords + 4 * p) >= 0) bad++;
            CHECK(bad == 0);
        }
        printf("large %s: %lld in, %lld out, %lld pairs\n", type_name(ds[t].type), (long long)n,
               (long long)a.n_out, (long long)a.n_pairs);
        vc_kmap_data_free(&a);
        vc_kmap_data_free(&b);
    }
    free(in);
}

#ifdef VOXCONV_HAVE_CUDA
/* The outputs input row c (b, z, y, x) reaches by the definitions (oracle_source's equalities
 * solved for the output), as out_of[k] = (b, z, y, x) or b = -1 where offset k has none. */
static void targets_by_definition(const vc_map_desc *d, const int32_t os[3], const int32_t *c,
                                  int32_t (*out_of)[4])
{
    const int K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    for (int k = 0; k < K; k++) {
        const int64_t kd[3] = {k / (d->kernel[1] * d->kernel[2]),
                               (k / d->kernel[2]) % d->kernel[1], k % d->kernel[2]};
        out_of[k][0] = c[0];
        for (int a = 0; a < 3 && out_of[k][0] >= 0; a++) {
            const int64_t s = d->stride[a], dil = d->dilation[a], ks = d->kernel[a];
            int64_t p = -1, t;
            if (d->type == VC_MAP_TRANSPOSED) {
                p = (int64_t)c[1 + a] * s - d->padding[a] + kd[a] * dil;
            } else {
                /* STRIDED c = p*s - pad + kd*dil; DOWNSAMPLE c = p*s + (kd - centre)*dil */
                t = d->type == VC_MAP_STRIDED ? c[1 + a] + d->padding[a] - kd[a] * dil
                                              : c[1 + a] - (kd[a] - (ks & 1 ? ks / 2 : 0)) * dil;
                if (t >= 0 && t % s == 0) p = t / s;
            }
            if (p < 0 || p >= os[a])
                out_of[k][0] = -1;
            else
                out_of[k][1 + a] = (int32_t)p;
        }
    }
}

static void test_gpu_targets(vc_rng *rng)
{
    enum { kMaxK = 343 };
    static int32_t ks[kMaxK], outs[kMaxK][4], want[kMaxK][4];
    const vc_map_type types[3] = {VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE, VC_MAP_TRANSPOSED};
    int64_t rows = 0, pairs = 0, geoms = 0, bad = 0;
    for (int g = 0; g < 3000; g++) {
        vc_map_desc d = VC_MAP_DESC_INIT;
        d.type = types[g % 3];
        int32_t shape[3];
        const int big = g % 10 == 9;
        for (int a = 0; a < 3; a++) {
            d.kernel[a] = 1 + (int)vc_rng_int(rng, 7);
            d.stride[a] = 1 + (int)vc_rng_int(rng, g % 4 == 0 ? 12 : 4);
            d.padding[a] = d.type == VC_MAP_DOWNSAMPLE ? 0 : (int)vc_rng_int(rng, 5);
            d.dilation[a] = 1 + (int)vc_rng_int(rng, 4);
            /* big: output keys still pack into 63 bits (a TRANSPOSED output is up to ~12x
               its input) */
            shape[a] = big ? (d.type == VC_MAP_TRANSPOSED ? 1 << 16 : (1 << 20) - 16) -
                                 (int32_t)vc_rng_int(rng, 5)
                           : 1 + (int32_t)vc_rng_int(rng, 40);
        }
        const int32_t batch = 1 + (int32_t)vc_rng_int(rng, 3);
        int32_t os[3];
        vc_err err;
        const int ok = vc_kmap_check_desc(&d, shape, os, &err) == VC_OK;
        const int32_t probe[4] = {0, 0, 0, 0};
        const int n0 = vc_kmap_gpu_debug_targets(&d, shape, batch, probe, ks, outs, kMaxK, &err);
        CHECK_MSG((n0 >= 0) == ok, "targets: geometry %d accepted by %s only (%s)", g,
                  ok ? "the CPU check" : "the GPU hook", err.msg);
        if (!ok || n0 < 0) continue;
        geoms++;
        const int K = d.kernel[0] * d.kernel[1] * d.kernel[2];
        for (int r = 0; r < 40; r++) {
            int32_t c[4] = {(int32_t)vc_rng_int(rng, batch), 0, 0, 0};
            for (int a = 0; a < 3; a++) {
                /* the edges (0, 1, last, last - 1) a third of the time, else anywhere */
                const int64_t e = vc_rng_int(rng, 12);
                c[1 + a] = e < 2 ? (int32_t)e : e < 4 ? shape[a] - 1 - (int32_t)(e - 2)
                                                      : (int32_t)vc_rng_int(rng, shape[a]);
                if (c[1 + a] < 0) c[1 + a] = 0;
            }
            targets_by_definition(&d, os, c, want);
            const int n = vc_kmap_gpu_debug_targets(&d, shape, batch, c, ks, outs, kMaxK, &err);
            int expected = 0, wrong = n < 0 || n > K;
            for (int k = 0; k < K; k++) expected += want[k][0] >= 0;
            for (int i = 0; !wrong && i < n; i++) {
                const int k = ks[i];
                wrong = k < 0 || k >= K || want[k][0] < 0 ||
                        memcmp(want[k], outs[i], sizeof outs[i]) != 0;
                if (!wrong) want[k][0] = -2; /* each offset once */
            }
            wrong = wrong || n != expected;
            if (wrong && bad++ < 5)
                fprintf(stderr, "targets: type %d kernel %dx%dx%d stride %dx%dx%d pad %dx%dx%d "
                        "dil %dx%dx%d shape %dx%dx%d row (%d,%d,%d,%d): %d pairs, %d expected\n",
                        (int)d.type, d.kernel[0], d.kernel[1], d.kernel[2], d.stride[0],
                        d.stride[1], d.stride[2], d.padding[0], d.padding[1], d.padding[2],
                        d.dilation[0], d.dilation[1], d.dilation[2], shape[0], shape[1],
                        shape[2], c[0], c[1], c[2], c[3], n, expected);
            rows++;
            pairs += expected;
        }
    }
    CHECK_MSG(bad == 0, "targets: %lld of %lld rows differ from the definitions", (long long)bad,
              (long long)rows);
    printf("GPU target arithmetic: %lld geometries, %lld rows, %lld pairs\n", (long long)geoms,
           (long long)rows, (long long)pairs);
}
#endif

int main(void)
{
    vc_rng rng = vc_test_rng("test_kmap");
    test_check_desc();
    test_n0();
    test_key_bits();
    test_tile_order();
    test_errors();
    test_fixed(&rng);
    test_random(&rng, 400);
    test_large(&rng);
#ifdef VOXCONV_HAVE_CUDA
    test_gpu_targets(&rng);
#endif
    printf("%d map cases, %d inverses checked\n", n_cases, n_inverse);
    TEST_END();
}
