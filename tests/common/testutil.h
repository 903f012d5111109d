/* tests/common/testutil.h - tiny test harness shared by the C test programs.
 * CHECK records a failure and goes on; each program ends with TEST_END(), which prints
 * "N passed, N failed" and returns 1 on any failure. Random tests take their seed from
 * VC_TEST_SEED (default: time) and print it first, so a failure can be replayed. */
#ifndef VC_TESTUTIL_H
#define VC_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

static int vc_t_pass, vc_t_fail;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (cond) {                                                                            \
            vc_t_pass++;                                                                       \
        } else {                                                                               \
            vc_t_fail++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                   \
    do {                                                                                       \
        if (cond) {                                                                            \
            vc_t_pass++;                                                                       \
        } else {                                                                               \
            vc_t_fail++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

/* Checks a vc_status equals the expected one, printing the context message if not. */
#define CHECK_STATUS(ctx, expr, expected)                                                      \
    do {                                                                                       \
        vc_status s_ = (expr);                                                                 \
        if (s_ == (expected)) {                                                                \
            vc_t_pass++;                                                                       \
        } else {                                                                               \
            vc_t_fail++;                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__,   \
                    #expr, vc_status_string(s_), vc_status_string(expected),                   \
                    vc_context_last_error(ctx));                                               \
        }                                                                                      \
    } while (0)

#define CHECK_OK(ctx, expr) CHECK_STATUS(ctx, expr, VC_OK)

#define TEST_END()                                                                             \
    do {                                                                                       \
        printf("%d passed, %d failed\n", vc_t_pass, vc_t_fail);                                \
        return vc_t_fail ? 1 : 0;                                                              \
    } while (0)

/* "$VC_TEST_TMP/PREFIXNAME" (VC_TEST_TMP unset: the current directory), in one of 4 rotating
 * static buffers. */
static inline const char *vc_test_tmp_path(const char *prefix, const char *name)
{
    static char buf[4][1024];
    static int k;
    const char *dir = getenv("VC_TEST_TMP");
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s%s", dir ? dir : ".", prefix, name);
    return b;
}

/* Writes n bytes to a new file at path; 0 on success, -1 on failure. */
static inline int vc_test_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Reads VC_TEST_SEED or the clock, prints it, returns a generator. */
static inline vc_rng vc_test_rng(const char *name)
{
    const char *e = getenv("VC_TEST_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
    printf("%s: seed %llu (replay with VC_TEST_SEED=%llu)\n", name, (unsigned long long)seed,
           (unsigned long long)seed);
    vc_rng r = {seed * 0x9E3779B97F4A7C15ull + 1u};
    if (!r.s) r.s = 1;
    return r;
}

/* fp32 -> tf32 as cvt.rna does (nearest, ties away from zero), kept in an fp32: the reference of
 * TF32 math uses operands rounded this way, so a comparison sees the accumulation error only (a
 * tiny output can otherwise miss the tf32 tolerance by chance alone). */
static inline float vc_round_tf32(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&v, &u, 4);
    return v;
}

/* ||a - b|| / ||b|| in double; returns INFINITY if any NaN appears. */
static inline double vc_rel_err(const float *a, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(ref[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

#endif
