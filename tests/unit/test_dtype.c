/* tests/unit/test_dtype.c - fp16 / bf16 conversions of conv/dtype.h against references computed
 * in double from the IEEE definitions: every fp16 and bf16 bit pattern decodes exactly and round
 * trips; fp32 -> fp16/bf16 rounds to nearest even (ties, subnormals, overflow at 65520). */
#include <float.h>

#include "core/dtype.h"
#include "testutil.h"

/* ---- references ------------------------------------------------------------------------ */

/* Value of an fp16 bit pattern from the definition; NaN for NaNs. */
static double ref_f16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp((double)(1024 + m), e - 25);
    return sign ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -133);
    else v = ldexp((double)(128 + m), e - 134);
    return sign ? -v : v;
}

/* Round-to-nearest-even pick between two neighbours lo < a < hi (magnitudes) with codes. */
static uint16_t rne_pick(double a, double lo, uint16_t lo_code, double hi, uint16_t hi_code)
{
    double dl = a - lo, dh = hi - a;
    if (dl < dh) return lo_code;
    if (dh < dl) return hi_code;
    return (lo_code & 1u) ? hi_code : lo_code;
}

/* fp16 code of float f (not NaN) by search over the ordered finite magnitudes. */
static uint16_t ref_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00u; /* 65504 + half an ulp (32) ties to 65536 = inf */
    unsigned lo = 0, hi = 0x7bffu; /* largest code with value <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_f16_value((uint16_t)mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    double vlo = ref_f16_value((uint16_t)lo);
    if (vlo == a) return sign | (uint16_t)lo;
    double vhi = lo == 0x7bffu ? 65536.0 : ref_f16_value((uint16_t)(lo + 1));
    return sign | rne_pick(a, vlo, (uint16_t)lo, vhi, (uint16_t)(lo + 1));
}

/* bf16 code of float f (not NaN): the neighbours are f's magnitude cut to 8 significant bits
 * (computed with frexp/ldexp in double) and the next one up. */
static uint16_t ref_f32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    double a = fabs((double)f);
    if (isinf(f)) return sign | 0x7f80u;
    if (a == 0) return sign;
    /* quantum: 2^(e-8) for normal magnitudes in [2^(e-1), 2^e), 2^-133 below 2^-126 */
    int e;
    frexp(a, &e);
    double q = e - 1 >= -126 ? ldexp(1.0, e - 8) : ldexp(1.0, -133);
    double vlo = floor(a / q) * q;
    double vhi = vlo + q;
    /* codes: find lo's code by decoding candidates around the float's own top bits */
    uint32_t u = vc_f32_bits((float)vlo);
    uint16_t clo = (uint16_t)(u >> 16);
    if (ref_bf16_value(clo) != vlo) return 0xffffu; /* reference itself broken: fails the test */
    if (vlo == a) return sign | clo;
    uint16_t chi = (uint16_t)(clo + 1);
    if (vhi >= ldexp(1.0, 128)) vhi = ldexp(1.0, 128); /* "value" of inf for the comparison */
    return sign | rne_pick(a, vlo, clo, vhi, chi);
}

static int is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
static int is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }

/* ---- tests ----------------------------------------------------------------------------- */

static void test_f16_all_patterns(void)
{
    int64_t bad_value = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = vc_f16_to_f32((uint16_t)h);
        double r = ref_f16_value((uint16_t)h);
        if (isnan(r)) {
            if (!isnan(f)) bad_value++;
            if (!is_f16_nan(vc_f32_to_f16(f))) bad_trip++;
            if ((vc_f32_to_f16(f) & 0x8000u) != (h & 0x8000u)) bad_trip++;
            continue;
        }
        if ((double)f != r || !signbit(f) != !signbit(r)) bad_value++;
        if (vc_f32_to_f16(f) != h) bad_trip++;
    }
    CHECK_MSG(bad_value == 0, "%lld fp16 patterns decode wrongly", (long long)bad_value);
    CHECK_MSG(bad_trip == 0, "%lld fp16 patterns do not round trip", (long long)bad_trip);
}

static void test_bf16_all_patterns(void)
{
    int64_t bad_value = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = vc_bf16_to_f32((uint16_t)h);
        double r = ref_bf16_value((uint16_t)h);
        if (isnan(r)) {
            if (!isnan(f)) bad_value++;
            if (!is_bf16_nan(vc_f32_to_bf16(f))) bad_trip++;
            continue;
        }
        if ((double)f != r || !signbit(f) != !signbit(r)) bad_value++;
        if (vc_f32_to_bf16(f) != h) bad_trip++;
    }
    CHECK_MSG(bad_value == 0, "%lld bf16 patterns decode wrongly", (long long)bad_value);
    CHECK_MSG(bad_trip == 0, "%lld bf16 patterns do not round trip", (long long)bad_trip);
}

static int64_t f16_mismatch(float f, int64_t *shown)
{
    if (isnan(f)) return is_f16_nan(vc_f32_to_f16(f)) ? 0 : 1;
    uint16_t got = vc_f32_to_f16(f), want = ref_f32_to_f16(f);
    if (got == want) return 0;
    if ((*shown)++ < 5)
        fprintf(stderr, "f32->f16 %a (0x%08x): got 0x%04x, want 0x%04x\n", (double)f,
                (unsigned)vc_f32_bits(f), (unsigned)got, (unsigned)want);
    return 1;
}

static int64_t bf16_mismatch(float f, int64_t *shown)
{
    if (isnan(f)) return is_bf16_nan(vc_f32_to_bf16(f)) ? 0 : 1;
    uint16_t got = vc_f32_to_bf16(f), want = ref_f32_to_bf16(f);
    if (got == want) return 0;
    if ((*shown)++ < 5)
        fprintf(stderr, "f32->bf16 %a (0x%08x): got 0x%04x, want 0x%04x\n", (double)f,
                (unsigned)vc_f32_bits(f), (unsigned)got, (unsigned)want);
    return 1;
}

static void test_f16_rounding(vc_rng *rng)
{
    int64_t bad = 0, shown = 0, n = 0, inexact = 0;
    /* Every tie point between neighbouring finite fp16 values, and one float ulp either side. */
    for (uint32_t h = 0; h < 0x7bffu; h++) {
        double m = 0.5 * (ref_f16_value((uint16_t)h) + ref_f16_value((uint16_t)(h + 1)));
        float fm = (float)m;
        inexact += (double)fm != m; /* tie points are exact in fp32 */
        float cand[3] = {fm, nextafterf(fm, 0.0f), nextafterf(fm, INFINITY)};
        for (int i = 0; i < 3; i++) {
            bad += f16_mismatch(cand[i], &shown);
            bad += f16_mismatch(-cand[i], &shown);
            n += 2;
        }
    }
    CHECK_MSG(inexact == 0, "%lld fp16 tie points are not exact floats", (long long)inexact);
    /* Edges: zeros, subnormal boundaries, largest finite, overflow threshold, inf, NaN. */
    const float edge[] = {0.0f, -0.0f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.fffffep-26f,
                          0x1p-26f, 0x1.8p-24f, 0x1.4p-24f, 0x1p-14f, 0x1.ff8p-15f,
                          0x1.ffcp-15f, 0x1.ffep-15f, FLT_MIN, FLT_TRUE_MIN, 65504.0f,
                          65519.0f, 0x1.ffdffep15f, 65520.0f, 65536.0f, 1e9f, FLT_MAX,
                          INFINITY, -INFINITY, NAN, -NAN, 1.0f, 0x1.002p0f, 0x1.006p0f,
                          0x1.001p0f, 0x1.003p0f, 2049.0f, 2051.0f, 3.14159265f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        bad += f16_mismatch(edge[i], &shown);
        bad += f16_mismatch(-edge[i], &shown);
        n += 2;
    }
    CHECK(vc_f32_to_f16(65520.0f) == 0x7c00u);
    CHECK(vc_f32_to_f16(0x1.ffdffep15f) == 0x7bffu);
    CHECK(vc_f32_to_f16(-65520.0f) == 0xfc00u);
    CHECK(vc_f32_to_f16(0x1p-25f) == 0x0000u);          /* tie to even: 0 */
    CHECK(vc_f32_to_f16(0x1.000002p-25f) == 0x0001u);
    CHECK(vc_f32_to_f16(0x1.8p-24f) == 0x0002u);         /* 1.5 subnormal ulps: tie to 2 */
    CHECK(vc_f32_to_f16(1.0f) == 0x3c00u);
    /* A strided walk over every float bit pattern, and random floats of the fp16 range. */
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        bad += f16_mismatch(vc_bits_f32((uint32_t)u), &shown);
        n++;
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t e = 100u + (uint32_t)vc_rng_int(rng, 45); /* 2^-27 .. 2^17 */
        uint32_t u = ((uint32_t)vc_rng_int(rng, 2) << 31) | (e << 23) |
                     (uint32_t)vc_rng_int(rng, 1 << 23);
        bad += f16_mismatch(vc_bits_f32(u), &shown);
        n++;
    }
    CHECK_MSG(bad == 0, "%lld of %lld f32->f16 conversions differ from the reference",
              (long long)bad, (long long)n);
}

static void test_bf16_rounding(vc_rng *rng)
{
    int64_t bad = 0, shown = 0, n = 0;
    const float edge[] = {0.0f, -0.0f, FLT_TRUE_MIN, FLT_MIN, 0x1.fep-127f, 0x1.ff8p-127f,
                          FLT_MAX, 0x1.fep127f, 0x1.fefffep127f, 0x1.ff0000p127f,
                          INFINITY, -INFINITY, NAN, -NAN, 1.0f, 0x1.01p0f, 0x1.03p0f,
                          0x1.008p0f, 0x1.018p0f, 0x1.00fffep0f, 0x1.010002p0f, 3.14159265f,
                          65504.0f, 1e-30f, 1e30f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        bad += bf16_mismatch(edge[i], &shown);
        bad += bf16_mismatch(-edge[i], &shown);
        n += 2;
    }
    CHECK(vc_f32_to_bf16(1.0f) == 0x3f80u);
    CHECK(vc_f32_to_bf16(0x1.01p0f) == 0x3f80u);  /* tie, even below */
    CHECK(vc_f32_to_bf16(0x1.03p0f) == 0x3f82u);  /* tie, even above */
    CHECK(vc_f32_to_bf16(FLT_MAX) == 0x7f80u);    /* rounds past the largest bf16 */
    CHECK(vc_f32_to_bf16(0x1.fep127f) == 0x7f7fu);
    /* Ties and their neighbours between every pair of adjacent positive bf16 values. */
    for (uint32_t h = 0; h < 0x7f7fu; h++) {
        float t = vc_bits_f32((h << 16) | 0x8000u);
        float cand[3] = {t, nextafterf(t, 0.0f), nextafterf(t, INFINITY)};
        for (int i = 0; i < 3; i++) {
            bad += bf16_mismatch(cand[i], &shown);
            bad += bf16_mismatch(-cand[i], &shown);
            n += 2;
        }
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        bad += bf16_mismatch(vc_bits_f32((uint32_t)u), &shown);
        n++;
    }
    for (int i = 0; i < 2000000; i++) {
        bad += bf16_mismatch(vc_bits_f32((uint32_t)vc_rng_next(rng)), &shown);
        n++;
    }
    CHECK_MSG(bad == 0, "%lld of %lld f32->bf16 conversions differ from the reference",
              (long long)bad, (long long)n);
}

/* vc_load_f32 / vc_store_f32 dispatch on the dtype. */
static void test_load_store(vc_rng *rng)
{
    float f32[8];
    uint16_t h16[8], b16[8];
    float src[8];
    for (int i = 0; i < 8; i++) src[i] = vc_rng_float(rng) * 100.0f;
    for (int i = 0; i < 8; i++) {
        vc_store_f32(f32, VC_DTYPE_FP32, i, src[i]);
        vc_store_f32(h16, VC_DTYPE_FP16, i, src[i]);
        vc_store_f32(b16, VC_DTYPE_BF16, i, src[i]);
    }
    for (int i = 0; i < 8; i++) {
        CHECK(vc_load_f32(f32, VC_DTYPE_FP32, i) == src[i]);
        CHECK(h16[i] == ref_f32_to_f16(src[i]));
        CHECK(b16[i] == ref_f32_to_bf16(src[i]));
        CHECK((double)vc_load_f32(h16, VC_DTYPE_FP16, i) == ref_f16_value(h16[i]));
        CHECK((double)vc_load_f32(b16, VC_DTYPE_BF16, i) == ref_bf16_value(b16[i]));
    }
    CHECK(vc_is_float_dtype(VC_DTYPE_FP32) && vc_is_float_dtype(VC_DTYPE_FP16) &&
          vc_is_float_dtype(VC_DTYPE_BF16) && !vc_is_float_dtype(VC_DTYPE_INT32));
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_dtype");
    test_f16_all_patterns();
    test_bf16_all_patterns();
    test_f16_rounding(&rng);
    test_bf16_rounding(&rng);
    test_load_store(&rng);
    TEST_END();
}
