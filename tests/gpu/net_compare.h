/* tests/gpu/net_compare.h - what the GPU network tests share (test_gpu_net.c,
 * test_gpu_net_graph.c): dense outputs to the host as fp32, a scan's points with a given column
 * count, and every named output of one net against another's (sparse rows exactly, features and
 * dense outputs by relative error), one line per output. Include inside the test's
 * VOXCONV_HAVE_CUDA block, after testutil.h and net_testutil.h. */
#ifndef VC_NET_COMPARE_H
#define VC_NET_COMPARE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "testutil.h"

/* Output i of net (dense) as fp32 host values, *n of them; NULL when the output call fails. */
static inline float *net_dense_host(vc_context *ctx, vc_net *net, int32_t i, int64_t *n)
{
    vc_net_output o;
    *n = 0;
    if (vc_net_get_output(net, i, &o) != VC_OK) return NULL;
    *n = 1;
    for (int k = 0; k < o.ndim; k++) *n *= o.shape[k];
    size_t es = vc_dtype_size(o.dtype);
    void *raw = malloc((size_t)*n * es + 4);
    float *f = malloc((size_t)*n * 4 + 4);
    CHECK_OK(ctx, vc_net_copy_output(net, i, raw, (size_t)*n * es, VC_MEMORY_HOST));
    for (int64_t k = 0; k < *n; k++)
        f[k] = o.dtype == VC_DTYPE_FP32   ? ((float *)raw)[k]
               : o.dtype == VC_DTYPE_FP16 ? vc_f16_to_f32(((uint16_t *)raw)[k])
                                          : vc_bf16_to_f32(((uint16_t *)raw)[k]);
    free(raw);
    return f;
}

/* A scan's points with `dim` columns (extra columns zero), *n of them, or NULL (printed). */
static inline float *net_scan_points(const char *file, int dim, int64_t *n)
{
    const char *root = getenv("VC_DATA_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s%sdatasets/data/%s", root ? root : "", root ? "/" : "", file);
    vc_cloud cl;
    if (vc_cloud_read(NULL, path, VC_FORMAT_AUTO, &cl) != VC_OK) {
        printf("SKIP: %s not readable (run datasets/fetch)\n", path);
        return NULL;
    }
    float *p = calloc((size_t)cl.count * (size_t)dim + 1, 4);
    for (int64_t i = 0; i < cl.count; i++)
        for (int k = 0; k < dim && k < cl.dim; k++) p[i * dim + k] = cl.data[i * cl.dim + k];
    *n = cl.count;
    vc_cloud_free(&cl);
    return p;
}

/* Every output of net a (on context ca) against net b's (on cb, the reference), tolerance tol
 * on the relative error; returns the worst error. */
static inline double net_compare(vc_context *ca, vc_net *a, vc_context *cb, vc_net *b,
                                 double tol, const char *what)
{
    int32_t n = 0;
    double worst = 0;
    vc_net_output_count(b, &n);
    for (int32_t i = 0; i < n; i++) {
        vc_net_output ob, oa;
        CHECK_OK(cb, vc_net_get_output(b, i, &ob));
        CHECK_OK(ca, vc_net_get_output(a, i, &oa));
        float *fa = NULL, *fb = NULL;
        int64_t cnt = 0, m = 0;
        if (ob.kind == VC_NET_SPARSE) {
            CHECK_MSG(oa.kind == VC_NET_SPARSE && oa.tensor && ob.tensor, "%s %s: no tensor",
                      what, ob.name);
            if (!oa.tensor || !ob.tensor) continue;
            int32_t *ra, *rb;
            int64_t na, nb, cha, chb;
            net_host(ca, oa.tensor, &ra, &fa, &na, &cha);
            net_host(cb, ob.tensor, &rb, &fb, &nb, &chb);
            CHECK_MSG(na == nb && cha == chb, "%s %s: %lld x %lld vs %lld x %lld", what, ob.name,
                      (long long)na, (long long)cha, (long long)nb, (long long)chb);
            CHECK_MSG(na == nb && memcmp(ra, rb, (size_t)nb * 16) == 0, "%s %s: rows differ",
                      what, ob.name);
            cnt = na == nb && cha == chb ? nb * chb : 0;
            free(ra), free(rb);
        } else {
            fa = net_dense_host(ca, a, i, &m);
            fb = net_dense_host(cb, b, i, &cnt);
            CHECK_MSG(fa && fb && m == cnt, "%s %s: dense sizes %lld vs %lld", what, ob.name,
                      (long long)m, (long long)cnt);
            if (!fa || !fb || m != cnt) cnt = 0;
        }
        double *ref = malloc((size_t)(cnt ? cnt : 1) * sizeof(double));
        for (int64_t k = 0; k < cnt; k++) ref[k] = fb[k];
        double e = cnt ? vc_rel_err(fa, ref, cnt) : 0;
        if (e > worst) worst = e;
        printf("  %s %-24s %12lld values, relative error %.2e (tolerance %.0e)\n", what, ob.name,
               (long long)cnt, e, tol);
        CHECK_MSG(e <= tol, "%s %s: relative error %.3g > %.3g", what, ob.name, e, tol);
        free(ref), free(fa), free(fb);
    }
    return worst;
}

#endif
