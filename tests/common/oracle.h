/* tests/common/oracle.h - helpers of the oracle tests (test_conv, test_pool) that share no code
 * with the library: values rounded to fp32/fp16/bf16 and their bit patterns computed in double,
 * random feature buffers that are never all zero, and random distinct grid sites with the
 * corners included. */
#ifndef VC_TEST_ORACLE_H
#define VC_TEST_ORACLE_H

#include "testutil.h"
#include "voxconv.h"

/* ---- values stored in fp32 / fp16 / bf16, computed without the library ------------------- */

/* x rounded to nearest even with `bits` significant bits and smallest quantum 2^qmin. */
static double round_sig(double x, int bits, int qmin)
{
    if (x == 0) return x;
    int e;
    frexp(fabs(x), &e);
    int qe = e - bits < qmin ? qmin : e - bits;
    double q = ldexp(1.0, qe);
    return copysign(rint(fabs(x) / q) * q, x);
}

static double round_dt(double x, vc_dtype dt)
{
    if (dt == VC_DTYPE_FP16) return round_sig(x, 11, -24);
    if (dt == VC_DTYPE_BF16) return round_sig(x, 8, -133);
    return (double)(float)x;
}

/* Bits of an exactly representable value (|v| < 65504 for fp16). */
static uint16_t enc_f16(double v)
{
    uint16_t s = signbit(v) ? 0x8000u : 0;
    double a = fabs(v);
    if (a == 0) return s;
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    if (e - 1 < -14) return s | (uint16_t)(a * ldexp(1.0, 24));
    return s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((a * ldexp(1.0, -(e - 1)) - 1) * 1024);
}

static uint16_t enc_bf16(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static size_t dt_size(vc_dtype dt) { return dt == VC_DTYPE_FP32 ? 4 : 2; }

/* Fills vals[n] with random values rounded to dt and returns the raw buffer of dt. */
static void *rand_buffer(vc_rng *rng, int64_t n, vc_dtype dt, double scale, double *vals)
{
    void *buf = malloc((size_t)(n > 0 ? n : 1) * dt_size(dt));
    for (int64_t i = 0; i < n; i++) {
        double v = round_dt(vc_rng_float(rng) * scale, dt);
        if (v == 0) v = round_dt(0.5 * scale, dt); /* never all zero */
        vals[i] = v;
        if (dt == VC_DTYPE_FP32) ((float *)buf)[i] = (float)v;
        else if (dt == VC_DTYPE_FP16) ((uint16_t *)buf)[i] = enc_f16(v);
        else ((uint16_t *)buf)[i] = enc_bf16(v);
    }
    return buf;
}

static const char *dt_name(vc_dtype dt)
{
    return dt == VC_DTYPE_FP32 ? "fp32" : dt == VC_DTYPE_FP16 ? "fp16" : "bf16";
}

/* ---- coordinates --------------------------------------------------------------------------- */

/* n distinct random sites of [B, Z, Y, X] in random order, corners included when n >= 2;
 * batch items listed in skip_batch (bit mask) get no site. */
static int32_t *rand_coords(vc_rng *rng, const int32_t shape[3], int32_t B, int64_t n,
                            unsigned skip_batch, int64_t *n_out)
{
    int64_t per = (int64_t)shape[0] * shape[1] * shape[2], total = 0;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(B * per));
    for (int32_t b = 0; b < B; b++)
        if (!(skip_batch >> b & 1u))
            for (int64_t s = 0; s < per; s++) idx[total++] = b * per + s;
    if (n > total) n = total;
    if (n >= 2) { /* first and last allowed sites */
        int64_t t = idx[1];
        idx[1] = idx[total - 1];
        idx[total - 1] = t;
    }
    for (int64_t i = n >= 2 ? 2 : 0; i < n; i++) {
        int64_t j = i + vc_rng_int(rng, total - i), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    int32_t *c = malloc(sizeof(int32_t) * 4 * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        int64_t s = idx[i];
        c[i * 4 + 3] = (int32_t)(s % shape[2]);
        s /= shape[2];
        c[i * 4 + 2] = (int32_t)(s % shape[1]);
        s /= shape[1];
        c[i * 4 + 1] = (int32_t)(s % shape[0]);
        c[i * 4 + 0] = (int32_t)(s / shape[0]);
    }
    free(idx);
    *n_out = n;
    return c;
}

static int64_t site(const int32_t *c, const int32_t shape[3])
{
    return (((int64_t)c[0] * shape[0] + c[1]) * shape[1] + c[2]) * shape[2] + c[3];
}

#endif
