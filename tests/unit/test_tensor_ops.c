/* tests/unit/test_tensor_ops.c - vc_tensor_concat, vc_tensor_add, vc_tensor_affine and
 * vc_tensor_to_dense on a CPU context against plain oracles written here (values rounded to each
 * dtype in double by tests/common/oracle.h, no library code): every dtype, 0 / 1 / 31 / 33 / 200
 * rows, one and odd channel counts, three parts, batch 3, and every argument error with its
 * status and message, leaving outputs and caller buffers as they were. */
#include "oracle.h"

static vc_context *g_ctx;

/* ---- oracle helpers ------------------------------------------------------------------------- */

/* Writes the (exactly representable) value v as element i of a dt buffer. */
static void put(void *buf, vc_dtype dt, int64_t i, double v)
{
    if (dt == VC_DTYPE_FP32) ((float *)buf)[i] = (float)v;
    else if (dt == VC_DTYPE_FP16) ((uint16_t *)buf)[i] = enc_f16(v);
    else ((uint16_t *)buf)[i] = enc_bf16(v);
}

/* The fp32 activations: v is an fp32 value held in a double. */
static double act_ref(double v, vc_activation act, float slope)
{
    if (act == VC_ACT_RELU) return v < 0 ? 0.0 : v;
    if (act == VC_ACT_LEAKY_RELU) return v < 0 ? (double)(float)(v * slope) : v;
    return v;
}

static vc_coords *make_set(vc_rng *rng, int64_t n, int32_t B, const int32_t shape[3],
                           int32_t **rows)
{
    int64_t got = 0;
    *rows = rand_coords(rng, shape, B, n, 0, &got);
    CHECK(got == n);
    vc_coords *c = NULL;
    CHECK_OK(g_ctx, vc_coords_create(g_ctx, *rows, got, VC_MEMORY_HOST, shape, B, &c));
    return c;
}

/* A tensor of random values (never zero) rounded to dt; *vals receives them (malloc'd). */
static vc_tensor *make_tensor(vc_rng *rng, vc_coords *set, int64_t n, int64_t C, vc_dtype dt,
                              double scale, double **vals)
{
    *vals = malloc(sizeof(double) * (size_t)(n * C + 1));
    void *buf = rand_buffer(rng, n * C, dt, scale, *vals);
    vc_tensor *t = NULL;
    CHECK_OK(g_ctx, vc_tensor_create(g_ctx, set, C, dt, buf, VC_MEMORY_HOST, &t));
    free(buf);
    return t;
}

/* Whether tensor t holds exactly the bytes of `expect` ([n, C] of dt). */
static int same_bits(const vc_tensor *t, const void *expect, int64_t n, int64_t C, vc_dtype dt)
{
    vc_tensor_info ti;
    if (vc_tensor_get_info(t, &ti) != VC_OK) return 0;
    if (ti.count != n || ti.channels != C || ti.dtype != dt) return 0;
    return n * C == 0 || memcmp(ti.data, expect, (size_t)(n * C) * dt_size(dt)) == 0;
}

static const vc_dtype kDtypes[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
static const int64_t kRows[5] = {0, 1, 31, 33, 200};

/* ---- concat --------------------------------------------------------------------------------- */

static void test_concat(vc_rng *rng)
{
    static const int64_t widths[4][3] = {{1, 0, 0}, {3, 7, 16}, {5, 1, 2}, {8, 8, 0}};
    static const int32_t nparts[4] = {1, 3, 3, 2};
    const int32_t shape[3] = {5, 7, 9};
    for (int d = 0; d < 3; d++)
        for (int ni = 0; ni < 5; ni++)
            for (int w = 0; w < 4; w++) {
                const vc_dtype dt = kDtypes[d];
                const int64_t n = kRows[ni];
                const int32_t B = ni % 2 ? 3 : 1;
                int32_t *rows = NULL;
                vc_coords *set = make_set(rng, n, B, shape, &rows);
                vc_tensor *parts[3] = {NULL, NULL, NULL};
                double *vals[3] = {NULL, NULL, NULL};
                int64_t total = 0;
                for (int p = 0; p < nparts[w]; p++) {
                    parts[p] = make_tensor(rng, set, n, widths[w][p], dt, 4.0, &vals[p]);
                    total += widths[w][p];
                }
                void *expect = malloc((size_t)(n * total + 1) * dt_size(dt));
                for (int64_t r = 0; r < n; r++) {
                    int64_t o = r * total;
                    for (int p = 0; p < nparts[w]; p++)
                        for (int64_t c = 0; c < widths[w][p]; c++)
                            put(expect, dt, o++, vals[p][r * widths[w][p] + c]);
                }
                vc_tensor *out = NULL;
                CHECK_OK(g_ctx, vc_tensor_concat(g_ctx, (const vc_tensor *const *)parts,
                                                 nparts[w], &out));
                CHECK_MSG(out && same_bits(out, expect, n, total, dt),
                          "concat %s, %lld rows, widths %d", dt_name(dt), (long long)n, w);
                vc_tensor_destroy(out);
                for (int p = 0; p < 3; p++) {
                    vc_tensor_destroy(parts[p]);
                    free(vals[p]);
                }
                free(expect);
                vc_coords_destroy(set);
                free(rows);
            }
}

/* ---- add ------------------------------------------------------------------------------------ */

static void test_add(vc_rng *rng)
{
    const int32_t shape[3] = {4, 6, 5};
    static const int64_t chans[3] = {1, 7, 16};
    for (int d = 0; d < 3; d++)
        for (int ni = 0; ni < 5; ni++)
            for (int act = VC_ACT_NONE; act <= VC_ACT_LEAKY_RELU; act++) {
                const vc_dtype dt = kDtypes[d];
                const int64_t n = kRows[ni], C = chans[(ni + act) % 3];
                const float slope = 0.1f;
                int32_t *rows = NULL;
                vc_coords *set = make_set(rng, n, ni % 2 ? 3 : 2, shape, &rows);
                double *va = NULL, *vb = NULL;
                vc_tensor *a = make_tensor(rng, set, n, C, dt, 3.0, &va);
                vc_tensor *b = make_tensor(rng, set, n, C, dt, 3.0, &vb);
                void *expect = malloc((size_t)(n * C + 1) * dt_size(dt));
                for (int64_t i = 0; i < n * C; i++)
                    put(expect, dt, i,
                        round_dt(act_ref((double)(float)(va[i] + vb[i]), (vc_activation)act,
                                         slope), dt));
                vc_tensor *out = NULL;
                CHECK_OK(g_ctx, vc_tensor_add(g_ctx, a, b, (vc_activation)act, slope, &out));
                CHECK_MSG(out && same_bits(out, expect, n, C, dt), "add %s, %lld x %lld, act %d",
                          dt_name(dt), (long long)n, (long long)C, act);
                vc_tensor_destroy(out);
                /* a + a: the same tensor twice is allowed */
                CHECK_OK(g_ctx, vc_tensor_add(g_ctx, a, a, VC_ACT_NONE, 0.0f, &out));
                for (int64_t i = 0; i < n * C; i++)
                    put(expect, dt, i, round_dt((double)(float)(va[i] + va[i]), dt));
                CHECK_MSG(out && same_bits(out, expect, n, C, dt), "add a + a %s", dt_name(dt));
                vc_tensor_destroy(out);
                vc_tensor_destroy(a);
                vc_tensor_destroy(b);
                free(va);
                free(vb);
                free(expect);
                vc_coords_destroy(set);
                free(rows);
            }
}

/* ---- affine --------------------------------------------------------------------------------- */

static void test_affine(vc_rng *rng)
{
    const int32_t shape[3] = {3, 8, 8};
    static const int64_t chans[3] = {1, 5, 16};
    for (int d = 0; d < 3; d++)
        for (int ni = 0; ni < 5; ni++)
            for (int form = 0; form < 4; form++) /* scale and shift, scale only, shift, none */
                for (int act = VC_ACT_NONE; act <= VC_ACT_LEAKY_RELU; act++) {
                    const vc_dtype dt = kDtypes[d];
                    const int64_t n = kRows[ni], C = chans[(ni + form) % 3];
                    const float slope = 0.01f;
                    int32_t *rows = NULL;
                    vc_coords *set = make_set(rng, n, 3, shape, &rows);
                    double *vx = NULL;
                    vc_tensor *t = make_tensor(rng, set, n, C, dt, 2.0, &vx);
                    float *scale = malloc(sizeof(float) * (size_t)C);
                    float *shift = malloc(sizeof(float) * (size_t)C);
                    for (int64_t c = 0; c < C; c++) {
                        scale[c] = vc_rng_float(rng) * 1.7f;
                        shift[c] = vc_rng_float(rng) * 0.9f;
                    }
                    const float *s = form == 0 || form == 1 ? scale : NULL;
                    const float *h = form == 0 || form == 2 ? shift : NULL;
                    void *expect = malloc((size_t)(n * C + 1) * dt_size(dt));
                    for (int64_t i = 0; i < n * C; i++) {
                        double v = vx[i];
                        if (s) v = (double)(float)(v * s[i % C]);
                        if (h) v = (double)(float)(v + h[i % C]);
                        put(expect, dt, i, round_dt(act_ref(v, (vc_activation)act, slope), dt));
                    }
                    CHECK_OK(g_ctx, vc_tensor_affine(g_ctx, t, s, h, VC_MEMORY_HOST,
                                                     (vc_activation)act, slope));
                    CHECK_MSG(same_bits(t, expect, n, C, dt), "affine %s, %lld x %lld, form %d, "
                              "act %d", dt_name(dt), (long long)n, (long long)C, form, act);
                    vc_tensor_destroy(t);
                    free(vx);
                    free(scale);
                    free(shift);
                    free(expect);
                    vc_coords_destroy(set);
                    free(rows);
                }
}

/* The values the activations must keep: -0 stays -0 without scale and shift, NaN stays NaN
 * through ReLU, a negative input gets 0 (ReLU) or v * slope (LeakyReLU). */
static void test_special_values(void)
{
    const int32_t shape[3] = {1, 1, 4}, rows[16] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3};
    vc_coords *set = NULL;
    CHECK_OK(g_ctx, vc_coords_create(g_ctx, rows, 4, VC_MEMORY_HOST, shape, 1, &set));
    const float in[4] = {-0.0f, NAN, -2.0f, 3.0f};
    vc_tensor *t = NULL;
    CHECK_OK(g_ctx, vc_tensor_create(g_ctx, set, 1, VC_DTYPE_FP32, in, VC_MEMORY_HOST, &t));
    CHECK_OK(g_ctx, vc_tensor_affine(g_ctx, t, NULL, NULL, VC_MEMORY_HOST, VC_ACT_NONE, 0.0f));
    float got[4];
    CHECK_OK(g_ctx, vc_tensor_copy_out(g_ctx, t, got, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(got[0] == 0.0f && signbit(got[0]) && isnan(got[1]) && got[2] == -2.0f);
    CHECK_OK(g_ctx, vc_tensor_affine(g_ctx, t, NULL, NULL, VC_MEMORY_HOST, VC_ACT_RELU, 0.0f));
    CHECK_OK(g_ctx, vc_tensor_copy_out(g_ctx, t, got, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(signbit(got[0]) && isnan(got[1]) && got[2] == 0.0f && got[3] == 3.0f);
    vc_tensor *u = NULL, *o = NULL;
    CHECK_OK(g_ctx, vc_tensor_create(g_ctx, set, 1, VC_DTYPE_FP32, in, VC_MEMORY_HOST, &u));
    CHECK_OK(g_ctx, vc_tensor_add(g_ctx, u, u, VC_ACT_LEAKY_RELU, 0.25f, &o));
    CHECK_OK(g_ctx, vc_tensor_copy_out(g_ctx, o, got, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(got[0] == 0.0f && isnan(got[1]) && got[2] == -1.0f && got[3] == 6.0f);
    vc_tensor_destroy(o);
    vc_tensor_destroy(u);
    vc_tensor_destroy(t);
    vc_coords_destroy(set);
}

/* ---- to_dense ------------------------------------------------------------------------------- */

static void test_to_dense(vc_rng *rng)
{
    static const int32_t shapes[3][3] = {{2, 3, 5}, {1, 1, 1}, {5, 4, 7}};
    static const int64_t chans[3] = {1, 3, 16};
    for (int d = 0; d < 3; d++)
        for (int od = 0; od < 3; od++)
            for (int ni = 0; ni < 5; ni++) {
                const vc_dtype dt = kDtypes[d], ot = kDtypes[od];
                const int32_t *shape = shapes[(ni + od) % 3];
                const int32_t B = ni % 2 ? 3 : 1;
                const int64_t cells = (int64_t)B * shape[0] * shape[1] * shape[2];
                const int64_t n = kRows[ni] < cells ? kRows[ni] : cells;
                const int64_t C = chans[(ni + d) % 3];
                int32_t *rows = NULL;
                vc_coords *set = make_set(rng, n, B, shape, &rows);
                double *vals = NULL;
                vc_tensor *t = make_tensor(rng, set, n, C, dt, 5.0, &vals);
                const int64_t total = cells * C, extra = 3;
                const size_t es = dt_size(ot);
                unsigned char *expect = calloc((size_t)(total + extra), es);
                unsigned char *dst = malloc((size_t)(total + extra) * es);
                memset(dst, 0xA5, (size_t)(total + extra) * es); /* poisoned */
                memset(expect + total * es, 0xA5, (size_t)extra * es); /* untouched past the end */
                for (int64_t r = 0; r < n; r++) {
                    const int32_t *q = rows + 4 * r;
                    for (int64_t c = 0; c < C; c++) {
                        int64_t o = (((q[0] * C + c) * shape[0] + q[1]) * shape[1] + q[2]) *
                                        shape[2] + q[3];
                        put(expect, ot, o, round_dt(vals[r * C + c], ot));
                    }
                }
                CHECK_OK(g_ctx, vc_tensor_to_dense(g_ctx, t, dst, total + extra, ot,
                                                   VC_MEMORY_HOST));
                CHECK_MSG(memcmp(dst, expect, (size_t)(total + extra) * es) == 0,
                          "to_dense %s -> %s, %lld rows x %lld ch, batch %d, shape %dx%dx%d",
                          dt_name(dt), dt_name(ot), (long long)n, (long long)C, (int)B,
                          (int)shape[0], (int)shape[1], (int)shape[2]);
                /* exactly the capacity needed is enough */
                CHECK_OK(g_ctx, vc_tensor_to_dense(g_ctx, t, dst, total, ot, VC_MEMORY_HOST));
                vc_tensor_destroy(t);
                free(vals);
                free(expect);
                free(dst);
                vc_coords_destroy(set);
                free(rows);
            }
}

/* ---- argument errors ------------------------------------------------------------------------ */

/* The call returned `want` and the context's message holds `text`. */
#define CHECK_FAIL(expr, want, text)                                                           \
    do {                                                                                       \
        vc_status got_ = (expr);                                                               \
        const char *m_ = vc_context_last_error(g_ctx);                                         \
        CHECK_MSG(got_ == (want) && m_ && strstr(m_, text), "%s: %s, message '%s'", #expr,     \
                  vc_status_string(got_), m_ ? m_ : "(none)");                                 \
    } while (0)

/* The tensors the error cases take: a [10, 4] fp32, b [10, 4] fp16 on a's set, c [10, 4] fp32 on
 * another set, d [10, 3] fp32 on a's set, `foreign` on another context. */
typedef struct fixture {
    vc_tensor *a, *b, *c, *d, *foreign;
} fixture;

static vc_tensor *const kSentinel = (vc_tensor *)(uintptr_t)0x1234;
static const int32_t kErrShape[3] = {3, 4, 5};

static void errors_concat(vc_rng *rng, const fixture *f)
{
    vc_tensor *a = f->a, *b = f->b, *c = f->c, *d = f->d, *foreign = f->foreign;
    vc_tensor *out = kSentinel;
    const vc_tensor *pa[3] = {a, d, a}, *pnull[2] = {a, NULL}, *pother[2] = {a, c},
                    *pdt[2] = {a, b}, *pfor[2] = {a, foreign};
    CHECK(vc_tensor_concat(NULL, pa, 2, &out) == VC_ERR_INVALID_ARGUMENT);
    CHECK_FAIL(vc_tensor_concat(g_ctx, NULL, 2, &out), VC_ERR_INVALID_ARGUMENT, "parts is NULL");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pa, 0, &out), VC_ERR_INVALID_ARGUMENT, "count 0");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pa, 2, NULL), VC_ERR_INVALID_ARGUMENT, "out is NULL");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pnull, 2, &out), VC_ERR_INVALID_ARGUMENT,
               "parts[1] is NULL");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pfor, 2, &out), VC_ERR_INVALID_ARGUMENT,
               "parts[1] belongs to another context");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pother, 2, &out), VC_ERR_SHAPE_MISMATCH,
               "different coordinate sets");
    CHECK_FAIL(vc_tensor_concat(g_ctx, pdt, 2, &out), VC_ERR_SHAPE_MISMATCH,
               "parts[1] is fp16 but parts[0] is fp32");
    { /* more than 2^20 channels in all (on an empty set: no memory needed) */
        int32_t *r0 = NULL;
        vc_coords *s0 = make_set(rng, 0, 1, kErrShape, &r0);
        vc_tensor *w = NULL;
        CHECK_OK(g_ctx, vc_tensor_create(g_ctx, s0, (int64_t)1 << 20, VC_DTYPE_FP32, NULL,
                                         VC_MEMORY_HOST, &w));
        const vc_tensor *pw[2] = {w, w};
        CHECK_FAIL(vc_tensor_concat(g_ctx, pw, 2, &out), VC_ERR_LIMIT, "2097152 channels");
        CHECK_OK(g_ctx, vc_tensor_concat(g_ctx, pw, 1, &out)); /* 2^20 alone is fine */
        vc_tensor_destroy(out);
        out = kSentinel;
        vc_tensor_destroy(w);
        vc_coords_destroy(s0);
        free(r0);
    }
}

static void errors_add(const fixture *f)
{
    vc_tensor *a = f->a, *b = f->b, *c = f->c, *d = f->d, *foreign = f->foreign;
    vc_tensor *out = kSentinel;
    CHECK(vc_tensor_add(NULL, a, a, VC_ACT_NONE, 0.0f, &out) == VC_ERR_INVALID_ARGUMENT);
    CHECK_FAIL(vc_tensor_add(g_ctx, NULL, a, VC_ACT_NONE, 0.0f, &out), VC_ERR_INVALID_ARGUMENT,
               "a is NULL");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, NULL, VC_ACT_NONE, 0.0f, &out), VC_ERR_INVALID_ARGUMENT,
               "b is NULL");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, foreign, VC_ACT_NONE, 0.0f, &out),
               VC_ERR_INVALID_ARGUMENT, "b belongs to another context");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, c, VC_ACT_NONE, 0.0f, &out), VC_ERR_SHAPE_MISMATCH,
               "different coordinate sets");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, d, VC_ACT_NONE, 0.0f, &out), VC_ERR_SHAPE_MISMATCH,
               "b has 3 channels but a has 4");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, b, VC_ACT_NONE, 0.0f, &out), VC_ERR_SHAPE_MISMATCH,
               "b is fp16 but a is fp32");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, a, (vc_activation)7, 0.0f, &out),
               VC_ERR_INVALID_ARGUMENT, "bad activation 7");
    CHECK_FAIL(vc_tensor_add(g_ctx, a, a, VC_ACT_NONE, 0.0f, NULL), VC_ERR_INVALID_ARGUMENT,
               "out is NULL");
    CHECK(out == kSentinel);
}

static void errors_affine(const fixture *f)
{
    vc_tensor *a = f->a, *foreign = f->foreign;
    /* a failed call leaves the tensor as it was */
    vc_tensor_info ai;
    vc_tensor_get_info(a, &ai);
    float before[40], scale[4] = {2, 2, 2, 2};
    memcpy(before, ai.data, sizeof before);
    CHECK(vc_tensor_affine(NULL, a, scale, NULL, VC_MEMORY_HOST, VC_ACT_NONE, 0.0f) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK_FAIL(vc_tensor_affine(g_ctx, NULL, scale, NULL, VC_MEMORY_HOST, VC_ACT_NONE, 0.0f),
               VC_ERR_INVALID_ARGUMENT, "tensor is NULL");
    CHECK_FAIL(vc_tensor_affine(g_ctx, foreign, scale, NULL, VC_MEMORY_HOST, VC_ACT_NONE, 0.0f),
               VC_ERR_INVALID_ARGUMENT, "tensor belongs to another context");
    CHECK_FAIL(vc_tensor_affine(g_ctx, a, scale, NULL, VC_MEMORY_DEVICE, VC_ACT_NONE, 0.0f),
               VC_ERR_INVALID_ARGUMENT, "device memory given to a CPU context");
    CHECK_FAIL(vc_tensor_affine(g_ctx, a, scale, NULL, (vc_memory)5, VC_ACT_NONE, 0.0f),
               VC_ERR_INVALID_ARGUMENT, "bad memory kind 5");
    CHECK_FAIL(vc_tensor_affine(g_ctx, a, scale, NULL, VC_MEMORY_HOST, (vc_activation)-1, 0.0f),
               VC_ERR_INVALID_ARGUMENT, "bad activation -1");
    CHECK(memcmp(before, ai.data, sizeof before) == 0);
}

static void errors_dense(vc_rng *rng, const fixture *f)
{
    vc_tensor *a = f->a, *foreign = f->foreign;
    const int64_t need = 2 * 4 * 3 * 4 * 5;
    float *dst = malloc(sizeof(float) * (size_t)need);
    for (int64_t i = 0; i < need; i++) dst[i] = 7.0f;
    CHECK(vc_tensor_to_dense(NULL, a, dst, need, VC_DTYPE_FP32, VC_MEMORY_HOST) ==
          VC_ERR_INVALID_ARGUMENT);
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, NULL, dst, need, VC_DTYPE_FP32, VC_MEMORY_HOST),
               VC_ERR_INVALID_ARGUMENT, "tensor is NULL");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, foreign, dst, need, VC_DTYPE_FP32, VC_MEMORY_HOST),
               VC_ERR_INVALID_ARGUMENT, "another context");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, a, dst, need, VC_DTYPE_INT32, VC_MEMORY_HOST),
               VC_ERR_INVALID_ARGUMENT, "dtype must be fp32, fp16 or bf16 (got 3)");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, a, dst, need, VC_DTYPE_FP32, VC_MEMORY_DEVICE),
               VC_ERR_INVALID_ARGUMENT, "dst in device memory given to a CPU context");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, a, dst, -1, VC_DTYPE_FP32, VC_MEMORY_HOST),
               VC_ERR_INVALID_ARGUMENT, "capacity -1 is negative");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, a, dst, need - 1, VC_DTYPE_FP32, VC_MEMORY_HOST),
               VC_ERR_CAPACITY, "dst holds 479 elements, the dense array needs 480");
    CHECK_FAIL(vc_tensor_to_dense(g_ctx, a, NULL, need, VC_DTYPE_FP32, VC_MEMORY_HOST),
               VC_ERR_INVALID_ARGUMENT, "dst is NULL");
    int untouched = 1;
    for (int64_t i = 0; i < need; i++) untouched &= dst[i] == 7.0f;
    CHECK(untouched);
    { /* B*C*D*H*W past int64 */
        const int32_t huge[3] = {1 << 30, 1 << 30, 1 << 30};
        const int32_t row[4] = {0, 0, 0, 0};
        vc_coords *sh = NULL;
        vc_tensor *th = NULL;
        CHECK_OK(g_ctx, vc_coords_create(g_ctx, row, 1, VC_MEMORY_HOST, huge, 1, &sh));
        CHECK_OK(g_ctx, vc_tensor_create(g_ctx, sh, 2, VC_DTYPE_FP16, NULL, VC_MEMORY_HOST, &th));
        CHECK_FAIL(vc_tensor_to_dense(g_ctx, th, dst, need, VC_DTYPE_FP16, VC_MEMORY_HOST),
                   VC_ERR_LIMIT, "overflows 64 bits");
        vc_tensor_destroy(th);
        vc_coords_destroy(sh);
    }
    { /* an empty dense array needs no dst */
        int32_t *r0 = NULL;
        vc_coords *s0 = make_set(rng, 0, 1, kErrShape, &r0);
        vc_tensor *t0 = NULL;
        CHECK_OK(g_ctx, vc_tensor_create(g_ctx, s0, 2, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &t0));
        CHECK_OK(g_ctx, vc_tensor_to_dense(g_ctx, t0, dst, need, VC_DTYPE_FP32, VC_MEMORY_HOST));
        CHECK(dst[0] == 0.0f && dst[2 * 60 - 1] == 0.0f && dst[2 * 60] == 7.0f);
        vc_tensor_destroy(t0);
        vc_coords_destroy(s0);
        free(r0);
    }
    free(dst);
}

static void test_errors(vc_rng *rng)
{
    const int32_t *shape = kErrShape;
    int32_t *r1 = NULL, *r2 = NULL;
    vc_coords *s1 = make_set(rng, 10, 2, shape, &r1), *s2 = make_set(rng, 10, 2, shape, &r2);
    double *v[5] = {NULL};
    vc_tensor *a = make_tensor(rng, s1, 10, 4, VC_DTYPE_FP32, 1.0, &v[0]);
    vc_tensor *b = make_tensor(rng, s1, 10, 4, VC_DTYPE_FP16, 1.0, &v[1]);
    vc_tensor *c = make_tensor(rng, s2, 10, 4, VC_DTYPE_FP32, 1.0, &v[2]);
    vc_tensor *d = make_tensor(rng, s1, 10, 3, VC_DTYPE_FP32, 1.0, &v[3]);
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *other = NULL;
    CHECK_OK(NULL, vc_context_create(&cd, &other));
    int32_t *r3 = NULL;
    vc_coords *so = NULL;
    vc_tensor *foreign = NULL;
    { /* a tensor of another context */
        int64_t got = 0;
        r3 = rand_coords(rng, shape, 1, 4, 0, &got);
        CHECK_OK(other, vc_coords_create(other, r3, got, VC_MEMORY_HOST, shape, 1, &so));
        CHECK_OK(other, vc_tensor_create(other, so, 4, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST,
                                         &foreign));
    }
    const fixture f = {a, b, c, d, foreign};
    errors_concat(rng, &f);
    errors_add(&f);
    errors_affine(&f);
    errors_dense(rng, &f);
    vc_tensor_destroy(foreign);
    vc_coords_destroy(so);
    CHECK_OK(NULL, vc_context_destroy(other));
    vc_tensor_destroy(a);
    vc_tensor_destroy(b);
    vc_tensor_destroy(c);
    vc_tensor_destroy(d);
    for (int i = 0; i < 5; i++) free(v[i]);
    vc_coords_destroy(s1);
    vc_coords_destroy(s2);
    free(r1);
    free(r2);
    free(r3);
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_tensor_ops");
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    cd.num_threads = 3; /* uneven splits of the rows and channels */
    CHECK_OK(NULL, vc_context_create(&cd, &g_ctx));
    if (!g_ctx) TEST_END();
    test_concat(&rng);
    test_add(&rng);
    test_affine(&rng);
    test_special_values();
    test_to_dense(&rng);
    test_errors(&rng);
    CHECK_OK(g_ctx, vc_context_destroy(g_ctx));
    TEST_END();
}
