/* tests/unit/test_read_options.c - vc_read_options and vc_cloud_read(_memory)_ex: the record
 * width of a raw .bin (load_dim) and the columns kept (use_dim). 5- and 6-float files read with
 * load_dim 5/6 and use_dim 4 equal their 4-float subsets bit for bit; a 5-float file whose
 * point count is a multiple of 4 (the size the KITTI default accepts, wrongly) reads right with
 * load_dim 5; sizes that fit 5 or 6 floats but not 4, and *.pcd.bin paths, are refused with a
 * message naming --load-dim; bad indices, bad counts and a wrong struct_size are
 * VC_ERR_INVALID_ARGUMENT and leave *out as it was; load_dim is refused for PCD, PLY and .npy,
 * whose columns use_dim selects. Temp files go to VC_TEST_TMP. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "voxconv.h"
#include "testutil.h"

static vc_context *ctx;

static const char *tmp_path(const char *name) { return vc_test_tmp_path("ropt_", name); }

/* Points of `width` columns whose first 4 are those of `base` [n, 4], the rest made up. */
static float *widen(const float *base, int n, int width)
{
    float *w = malloc((size_t)n * (size_t)width * sizeof *w);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < width; c++)
            w[i * width + c] = c < 4 ? base[i * 4 + c] : (float)(i % 32) + 0.25f * (float)c;
    return w;
}

static const unsigned char SENT = 0xA5;

static int is_sentinel(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != SENT) return 0;
    return 1;
}

static int msg_has(const char *needle)
{
    const char *m = vc_context_last_error(ctx);
    return m && strstr(m, needle) != NULL;
}

/* A read from memory that must fail with `want`, leaving *out untouched. */
static void expect_fail(const void *p, size_t n, vc_file_format fmt, const vc_read_options *o,
                        vc_status want, const char *needle)
{
    vc_cloud c;
    memset(&c, SENT, sizeof c);
    CHECK_STATUS(ctx, vc_cloud_read_memory_ex(ctx, p, n, fmt, o, &c), want);
    CHECK(is_sentinel(&c, sizeof c));
    CHECK_MSG(!needle || msg_has(needle), "message '%s' lacks '%s'", vc_context_last_error(ctx),
              needle);
}

/* 5- and 6-float records read with load_dim 5/6 and use_dim 4 (a count) equal the 4-float file;
 * without use_dim every column comes back, named x, y, z, intensity, c4, c5. */
static void test_widths(const float *base, int n)
{
    vc_cloud k;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, base, (size_t)n * 16, VC_FORMAT_KITTI, NULL, &k));
    for (int width = 3; width <= 6; width++) {
        float *w = widen(base, n, width);
        size_t bytes = (size_t)n * (size_t)width * 4;
        vc_read_options o = VC_READ_OPTIONS_INIT;
        o.load_dim = width;
        vc_cloud c;
        CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, w, bytes, VC_FORMAT_KITTI, &o, &c));
        CHECK(c.count == n && c.dim == width && memcmp(c.data, w, bytes) == 0);
        static const char *const names[6] = {"x", "y", "z", "intensity", "c4", "c5"};
        for (int i = 0; i < c.dim; i++) CHECK(strcmp(c.names[i], names[i]) == 0);
        vc_cloud_free(&c);
        if (width >= 4) {
            o.n_use_dim = 4;
            CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, w, bytes, VC_FORMAT_KITTI, &o, &c));
            CHECK(c.count == k.count && c.dim == 4 &&
                  memcmp(c.data, k.data, (size_t)n * 16) == 0);
            CHECK(strcmp(c.names[3], "intensity") == 0);
            vc_cloud_free(&c);
        }
        free(w);
    }
    vc_cloud_free(&k);
}

/* use_dim as a list: any order, names follow their columns. */
static void test_use_list(const float *base, int n)
{
    float *w = widen(base, n, 5);
    size_t bytes = (size_t)n * 20;
    vc_read_options o = VC_READ_OPTIONS_INIT;
    o.load_dim = 5;
    const int32_t order[4] = {2, 0, 1, 4};
    o.use_dim = order;
    o.n_use_dim = 4;
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, w, bytes, VC_FORMAT_KITTI, &o, &c));
    CHECK(c.count == n && c.dim == 4);
    int same = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 4; j++) same &= c.data[i * 4 + j] == w[i * 5 + order[j]];
    CHECK(same);
    CHECK(strcmp(c.names[0], "z") == 0 && strcmp(c.names[3], "c4") == 0);
    vc_cloud_free(&c);

    /* indices and counts the file does not have */
    const int32_t past[3] = {0, 1, 5}, negative[3] = {0, -1, 2};
    o.use_dim = past;
    o.n_use_dim = 3;
    expect_fail(w, bytes, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "use_dim[2] = 5");
    o.use_dim = negative;
    expect_fail(w, bytes, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "use_dim[1] = -1");
    o.use_dim = NULL;
    o.n_use_dim = 6;
    expect_fail(w, bytes, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "first 6 columns");
    o.n_use_dim = 2;
    expect_fail(w, bytes, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "x, y, z");
    o.use_dim = order;
    o.n_use_dim = 0;
    expect_fail(w, bytes, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "n_use_dim is 0");
    free(w);
}

/* Sizes: a whole number of 5- or 6-float records but not of 4 names --load-dim; a 5-float file
 * of 4k points passes the KITTI default (nothing in the file says otherwise) and reads right
 * with load_dim 5; explicit widths that do not fit name the widths that do. */
static void test_sizes(const float *base)
{
    float *w5 = widen(base, 40, 5), *w6 = widen(base, 37, 6);
    expect_fail(w5, 37 * 20, VC_FORMAT_KITTI, NULL, VC_ERR_FORMAT, "--load-dim 5");
    expect_fail(w6, 37 * 24, VC_FORMAT_KITTI, NULL, VC_ERR_FORMAT, "fits 3 or 6 float32");
    expect_fail(w6, 37 * 24, VC_FORMAT_KITTI, NULL, VC_ERR_FORMAT, "--load-dim 3 or 6");
    expect_fail(w5, 17, VC_FORMAT_KITTI, NULL, VC_ERR_FORMAT, "1 trailing bytes at byte offset 16");

    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, w5, 40 * 20, VC_FORMAT_KITTI, NULL, &c));
    CHECK(c.count == 50 && c.dim == 4); /* the silent misread the option exists for */
    vc_cloud_free(&c);
    vc_read_options o = VC_READ_OPTIONS_INIT;
    o.load_dim = 5;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, w5, 40 * 20, VC_FORMAT_KITTI, &o, &c));
    CHECK(c.count == 40 && c.dim == 5 && memcmp(c.data, w5, 40 * 20) == 0);
    vc_cloud_free(&c);
    o.load_dim = 6;
    expect_fail(w5, 37 * 20, VC_FORMAT_KITTI, &o, VC_ERR_FORMAT, "it fits 5 float32");
    for (int bad = 0; bad < 3; bad++) {
        o.load_dim = (int32_t[]){2, -4, 4097}[bad];
        expect_fail(w5, 40 * 20, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "load_dim");
    }
    free(w5);
    free(w6);
}

/* A *.pcd.bin path (nuScenes) needs an explicit load_dim; the file variant refuses it before
 * reading, and a set load_dim (5, or 4 for a file that does hold 4) reads it. */
static void test_pcd_bin_name(const float *base, int n)
{
    float *w = widen(base, n, 5);
    const char *path = tmp_path("frame.pcd.bin");
    CHECK(vc_test_write_file(path, w, (size_t)n * 20) == 0);
    vc_cloud c;
    memset(&c, SENT, sizeof c);
    CHECK_STATUS(ctx, vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &c), VC_ERR_INVALID_ARGUMENT);
    CHECK(is_sentinel(&c, sizeof c));
    CHECK(msg_has("nuScenes .pcd.bin files hold 5 float32 per point") &&
          msg_has("--load-dim 5"));
    CHECK_STATUS(ctx, vc_cloud_read_ex(ctx, path, VC_FORMAT_KITTI, NULL, &c),
                 VC_ERR_INVALID_ARGUMENT);
    vc_read_options o = VC_READ_OPTIONS_INIT;
    o.load_dim = 5;
    CHECK_OK(ctx, vc_cloud_read_ex(ctx, path, VC_FORMAT_AUTO, &o, &c));
    CHECK(c.count == n && c.dim == 5 && memcmp(c.data, w, (size_t)n * 20) == 0);
    vc_cloud_free(&c);
    const char *four = tmp_path("four.PCD.BIN");
    CHECK(vc_test_write_file(four, base, (size_t)n * 16) == 0);
    o.load_dim = 4;
    CHECK_OK(ctx, vc_cloud_read_ex(ctx, four, VC_FORMAT_AUTO, &o, &c));
    CHECK(c.count == n && c.dim == 4 && memcmp(c.data, base, (size_t)n * 16) == 0);
    vc_cloud_free(&c);
    CHECK_STATUS(ctx, vc_cloud_read(ctx, four, VC_FORMAT_AUTO, &c), VC_ERR_INVALID_ARGUMENT);
    /* a plain .bin still reads with the unchanged entry point */
    const char *plain = tmp_path("plain.bin");
    CHECK(vc_test_write_file(plain, base, (size_t)n * 16) == 0);
    CHECK_OK(ctx, vc_cloud_read(ctx, plain, VC_FORMAT_AUTO, &c));
    CHECK(c.count == n && c.dim == 4 && memcmp(c.data, base, (size_t)n * 16) == 0);
    vc_cloud_free(&c);
    free(w);
}

/* struct_size must be this header's; the file variant checks it before opening the file. */
static void test_struct_size(const float *base)
{
    vc_read_options o = VC_READ_OPTIONS_INIT;
    CHECK(o.struct_size == sizeof o && o.load_dim == 0 && !o.use_dim && o.n_use_dim == 0);
    o.struct_size = sizeof o - 4;
    expect_fail(base, 64, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "struct_size");
    o.struct_size = 0;
    expect_fail(base, 64, VC_FORMAT_KITTI, &o, VC_ERR_INVALID_ARGUMENT, "VC_READ_OPTIONS_INIT");
    vc_cloud c;
    memset(&c, SENT, sizeof c);
    CHECK_STATUS(ctx, vc_cloud_read_ex(ctx, tmp_path("absent.bin"), VC_FORMAT_AUTO, &o, &c),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK(is_sentinel(&c, sizeof c));
    CHECK_STATUS(ctx, vc_cloud_read_memory_ex(ctx, base, 64, VC_FORMAT_AUTO, NULL, &c),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(NULL, vc_cloud_read_memory_ex(NULL, base, 64, VC_FORMAT_KITTI, &o, &c),
                 VC_ERR_INVALID_ARGUMENT);
}

/* Formats with a header: load_dim is refused (their columns are stated), use_dim selects. */
static void test_other_formats(void)
{
    static const char pcd[] = "VERSION .7\nFIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\n"
                              "COUNT 1 1 1 1\nWIDTH 2\nHEIGHT 1\nPOINTS 2\nDATA ascii\n"
                              "1 2 3 4\n5 6 7 8\n";
    static const char ply[] = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                              "property float y\nproperty float z\nend_header\n1 2 3\n";
    vc_read_options o = VC_READ_OPTIONS_INIT;
    o.load_dim = 4;
    expect_fail(pcd, strlen(pcd), VC_FORMAT_PCD, &o, VC_ERR_INVALID_ARGUMENT, "PCD file");
    expect_fail(ply, strlen(ply), VC_FORMAT_PLY, &o, VC_ERR_INVALID_ARGUMENT, "raw .bin");
    /* a float32 [1, 3] .npy: 10 bytes of preamble, a 118-byte header, 12 bytes of data */
    char npy[140];
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }";
    memset(npy, ' ', sizeof npy);
    memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(npy + 10, hdr, strlen(hdr));
    npy[127] = '\n';
    const float one[3] = {1, 2, 3};
    memcpy(npy + 128, one, 12);
    expect_fail(npy, sizeof npy, VC_FORMAT_NPY, &o, VC_ERR_INVALID_ARGUMENT, ".npy file");
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, npy, sizeof npy, VC_FORMAT_NPY, NULL, &c));
    CHECK(c.count == 1 && c.dim == 3);
    vc_cloud_free(&c);

    o.load_dim = 0;
    const int32_t keep[3] = {3, 1, 0};
    o.use_dim = keep;
    o.n_use_dim = 3;
    CHECK_OK(ctx, vc_cloud_read_memory_ex(ctx, pcd, strlen(pcd), VC_FORMAT_PCD, &o, &c));
    CHECK(c.count == 2 && c.dim == 3 && c.data[0] == 4 && c.data[1] == 2 && c.data[2] == 1 &&
          c.data[3] == 8 && c.data[5] == 5 && strcmp(c.names[0], "intensity") == 0);
    vc_cloud_free(&c);
    o.use_dim = NULL;
    o.n_use_dim = 4;
    expect_fail(ply, strlen(ply), VC_FORMAT_PLY, &o, VC_ERR_INVALID_ARGUMENT, "first 4");
}

int main(void)
{
    vc_rng r = vc_test_rng("test_read_options");
    vc_context_desc cd = VC_CONTEXT_DESC_INIT; /* the readers run on the host: any backend */
    cd.backend = VC_BACKEND_CPU;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    if (!ctx) TEST_END();
    enum { N = 403 };
    float *base = malloc(N * 4 * sizeof *base);
    for (int i = 0; i < N * 4; i++) base[i] = (vc_rng_float(&r) - 0.5f) * 80.f;
    test_widths(base, N);
    test_use_list(base, N);
    test_sizes(base);
    test_pcd_bin_name(base, N);
    test_struct_size(base);
    test_other_formats();
    free(base);
    CHECK_OK(ctx, vc_context_destroy(ctx));
    TEST_END();
}
