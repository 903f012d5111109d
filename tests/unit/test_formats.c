/* tests/unit/test_formats.c - file formats: KITTI, PCD (ascii, binary, binary_compressed with a
 * hand-made LZF stream), PLY (ascii, binary little-endian), NPY (every dtype and ndim 0..8,
 * conversions, refusals) and .vxt (save/load fp32/fp16/bf16, N = 0, corruption). Every
 * malformed input must give a status, never a crash, and leave *out as it was (checked against
 * a sentinel pattern); valid files are also truncated at every length. Temp files go to
 * VC_TEST_TMP. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "voxconv.h"
#include "testutil.h"

static vc_context *ctx;

static const char *tmp_path(const char *name) { return vc_test_tmp_path("fmt_", name); }

static int write_bytes(const char *path, const void *p, size_t n)
{
    return vc_test_write_file(path, p, n);
}

static uint8_t *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

/* A growable byte buffer for building files. */
typedef struct bb {
    uint8_t *p;
    size_t n, cap;
} bb;

static void bb_put(bb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void bb_str(bb *b, const char *s) { bb_put(b, s, strlen(s)); }
static void bb_f32(bb *b, float v) { bb_put(b, &v, 4); } /* tests run on little-endian hosts */
static void bb_f64(bb *b, double v) { bb_put(b, &v, 8); }
static void bb_u8(bb *b, uint8_t v) { bb_put(b, &v, 1); }
static void bb_u16(bb *b, uint16_t v) { bb_put(b, &v, 2); }
static void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }

static const uint8_t SENT = 0xA5;

static int is_sentinel(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != SENT) return 0;
    return 1;
}

static int bad_status(vc_status s) { return s == VC_ERR_FORMAT || s == VC_ERR_IO; }

/* Reads every prefix of a valid cloud file: each must succeed or fail with FORMAT, and a
 * failure must leave the output untouched. */
static void truncate_cloud(const uint8_t *p, size_t n, vc_file_format fmt, const char *what)
{
    int bad = 0;
    for (size_t len = 0; len <= n; len++) {
        uint8_t *copy = malloc(len ? len : 1); /* exact size so ASan sees overreads */
        memcpy(copy, p, len);
        vc_cloud c;
        memset(&c, SENT, sizeof c);
        vc_status s = vc_cloud_read_memory(ctx, copy, len, fmt, &c);
        if (s == VC_OK) {
            vc_cloud_free(&c);
        } else if (!bad_status(s) || !is_sentinel(&c, sizeof c)) {
            if (!bad++)
                fprintf(stderr, "%s truncated to %zu: %s (%s)\n", what, len,
                        vc_status_string(s), vc_context_last_error(ctx));
        }
        free(copy);
    }
    CHECK_MSG(bad == 0, "%s: %d bad truncations", what, bad);
    /* The full file reads. */
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, p, n, fmt, &c));
    if (c.data) vc_cloud_free(&c);
}

/* Expects a cloud read to fail with `want` and leave the output untouched. */
static void expect_cloud_fail(const void *p, size_t n, vc_file_format fmt, vc_status want,
                              const char *what)
{
    vc_cloud c;
    memset(&c, SENT, sizeof c);
    vc_status s = vc_cloud_read_memory(ctx, p, n, fmt, &c);
    CHECK_MSG(s == want, "%s: got %s, want %s (%s)", what, vc_status_string(s),
              vc_status_string(want), vc_context_last_error(ctx));
    if (s == VC_OK) vc_cloud_free(&c);
    else {
        CHECK_MSG(is_sentinel(&c, sizeof c), "%s: output written on failure", what);
        CHECK_MSG(vc_context_last_error(ctx)[0] != 0, "%s: no message", what);
    }
}

static int has_names(const vc_cloud *c, const char *const *names, int n)
{
    if (c->dim != n) return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(c->names[i], names[i]) != 0) return 0;
    return 1;
}

/* ---- KITTI ------------------------------------------------------------------------------- */

static void test_kitti(void)
{
    vc_rng r = vc_test_rng("test_formats");
    float pts[37 * 4];
    for (int i = 0; i < 37 * 4; i++) pts[i] = vc_rng_float(&r) * 50.f;
    char *names[4] = {"x", "y", "z", "intensity"};
    vc_cloud c = {pts, 37, 4, names};
    const char *path = tmp_path("kitti.bin");
    CHECK_OK(ctx, vc_cloud_write_kitti(ctx, path, &c));
    vc_cloud d;
    CHECK_OK(ctx, vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &d));
    CHECK(d.count == 37 && d.dim == 4 && memcmp(d.data, pts, sizeof pts) == 0);
    static const char *const kn[4] = {"x", "y", "z", "intensity"};
    CHECK(has_names(&d, kn, 4));
    vc_cloud_free(&d);
    CHECK(d.data == NULL && d.names == NULL);
    CHECK_OK(ctx, vc_cloud_free(NULL));

    c.dim = 3;
    CHECK_STATUS(ctx, vc_cloud_write_kitti(ctx, path, &c), VC_ERR_INVALID_ARGUMENT);
    c.dim = 4;
    CHECK_STATUS(ctx, vc_cloud_write_kitti(ctx, "/nonexistent-dir/x.bin", &c), VC_ERR_IO);
    memset(&d, SENT, sizeof d);
    CHECK_STATUS(ctx, vc_cloud_read(ctx, tmp_path("does-not-exist.bin"), VC_FORMAT_AUTO, &d),
                 VC_ERR_IO);
    CHECK(is_sentinel(&d, sizeof d));
    CHECK_STATUS(ctx, vc_cloud_read_memory(ctx, pts, 16, VC_FORMAT_AUTO, &d),
                 VC_ERR_INVALID_ARGUMENT);
    expect_cloud_fail(pts, 17, VC_FORMAT_KITTI, VC_ERR_FORMAT, "kitti 17 bytes");
    expect_cloud_fail(pts, 16, VC_FORMAT_VXT, VC_ERR_UNSUPPORTED, "cloud from vxt");
    truncate_cloud((const uint8_t *)pts, 5 * 16, VC_FORMAT_KITTI, "kitti");
    /* empty file: zero points */
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, pts, 0, VC_FORMAT_KITTI, &d));
    CHECK(d.count == 0 && d.dim == 4);
    vc_cloud_free(&d);
}

/* ---- PCD --------------------------------------------------------------------------------- */

static void test_pcd_ascii(void)
{
    const char *txt =
        "# .PCD v0.7 - Point Cloud Data file format\n"
        "VERSION 0.7\n"
        "FIELDS intensity x y z rgb n\n"
        "SIZE 4 4 4 4 4 2\n"
        "TYPE F F F F U I\n"
        "COUNT 1 1 1 1 1 2\n"
        "WIDTH 3\n"
        "HEIGHT 1\n"
        "VIEWPOINT 0 0 0 1 0 0 0\n"
        "POINTS 3\n"
        "DATA ascii\n"
        "0.5 1 2 3 16744512 -1 2\n"
        "0.25 4 5.5 -6 255 3 4\r\n"
        "1 nan nan nan 0 0 0\n";
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, txt, strlen(txt), VC_FORMAT_PCD, &c));
    static const char *const want[] = {"x", "y", "z", "intensity", "r", "g", "b", "n_0", "n_1"};
    CHECK(c.count == 3 && has_names(&c, want, 9));
    if (c.count == 3 && c.dim == 9) {
        const float r0[9] = {1, 2, 3, 0.5f, 255, 128, 64, -1, 2};
        const float r1[9] = {4, 5.5f, -6, 0.25f, 0, 0, 255, 3, 4};
        CHECK(memcmp(c.data, r0, sizeof r0) == 0);
        CHECK(memcmp(c.data + 9, r1, sizeof r1) == 0);
        CHECK(isnan(c.data[18]) && isnan(c.data[20]) && c.data[21] == 1);
    }
    vc_cloud_free(&c);
    const char *path = tmp_path("a.pcd");
    write_bytes(path, txt, strlen(txt));
    CHECK_OK(ctx, vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &c));
    CHECK(c.count == 3);
    vc_cloud_free(&c);
    truncate_cloud((const uint8_t *)txt, strlen(txt), VC_FORMAT_PCD, "pcd ascii");
}

/* Header of the binary test files: x y z F4, intensity U1, rgb F4, _ U1 (padding), t F8. */
static void pcd_binary_header(bb *b, int points, const char *data)
{
    char h[512];
    snprintf(h, sizeof h,
             "VERSION .7\nFIELDS x y z intensity rgb _ t\nSIZE 4 4 4 1 4 1 8\n"
             "TYPE F F F U F U F\nCOUNT 1 1 1 1 1 1 1\nWIDTH %d\nHEIGHT 1\n"
             "VIEWPOINT 0 0 0 1 0 0 0\nPOINTS %d\nDATA %s\n", points, points, data);
    bb_str(b, h);
}

static float rgb_float(uint32_t packed)
{
    float f;
    memcpy(&f, &packed, 4);
    return f;
}

static void test_pcd_binary(void)
{
    bb b = {0};
    pcd_binary_header(&b, 5, "binary");
    for (int i = 0; i < 5; i++) {
        bb_f32(&b, (float)i);
        bb_f32(&b, (float)i * 2);
        bb_f32(&b, i == 4 ? NAN : (float)-i);
        bb_u8(&b, (uint8_t)(200 + i));
        bb_f32(&b, rgb_float(0x00102030u + (uint32_t)i));
        bb_u8(&b, 0xee);
        bb_f64(&b, 0.5 * i);
    }
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, b.p, b.n, VC_FORMAT_PCD, &c));
    static const char *const want[] = {"x", "y", "z", "intensity", "r", "g", "b", "t"};
    CHECK(c.count == 5 && has_names(&c, want, 8));
    if (c.count == 5 && c.dim == 8) {
        const float r3[8] = {3, 6, -3, 203, 0x10, 0x20, 0x33, 1.5f};
        CHECK(memcmp(c.data + 3 * 8, r3, sizeof r3) == 0);
        CHECK(isnan(c.data[4 * 8 + 2]));
    }
    vc_cloud_free(&c);
    truncate_cloud(b.p, b.n, VC_FORMAT_PCD, "pcd binary");
    free(b.p);
}

/* A small LZF compressor for the test: greedy back-references (found by brute force) and
 * literal runs. Counts the back-references it emits. */
static size_t lzf_encode(const uint8_t *in, size_t n, uint8_t *out, int *backrefs)
{
    size_t ip = 0, op = 0, lit_start = 0;
    *backrefs = 0;
    while (ip < n) {
        size_t best_len = 0, best_off = 0;
        for (size_t off = 1; off <= ip && off <= 8192; off++) {
            size_t l = 0;
            while (ip + l < n && l < 264 && in[ip + l] == in[ip + l - off]) l++;
            if (l > best_len) {
                best_len = l;
                best_off = off;
            }
        }
        if (best_len >= 3) {
            while (lit_start < ip) { /* flush literals */
                size_t run = ip - lit_start > 32 ? 32 : ip - lit_start;
                out[op++] = (uint8_t)(run - 1);
                memcpy(out + op, in + lit_start, run);
                op += run;
                lit_start += run;
            }
            size_t len = best_len - 2, off = best_off - 1;
            if (len < 7) {
                out[op++] = (uint8_t)((len << 5) | (off >> 8));
            } else {
                out[op++] = (uint8_t)((7 << 5) | (off >> 8));
                out[op++] = (uint8_t)(len - 7);
            }
            out[op++] = (uint8_t)(off & 0xff);
            ip += best_len;
            lit_start = ip;
            (*backrefs)++;
        } else {
            ip++;
        }
    }
    while (lit_start < n) {
        size_t run = n - lit_start > 32 ? 32 : n - lit_start;
        out[op++] = (uint8_t)(run - 1);
        memcpy(out + op, in + lit_start, run);
        op += run;
        lit_start += run;
    }
    return op;
}

static void test_pcd_compressed(void)
{
    enum { N = 40 };
    /* Structure of arrays: x[N] y[N] z[N] (F4) then label[N] (U2). */
    bb raw = {0};
    for (int i = 0; i < N; i++) bb_f32(&raw, (float)(i % 7));
    for (int i = 0; i < N; i++) bb_f32(&raw, 1.25f * (float)i);
    for (int i = 0; i < N; i++) bb_f32(&raw, 2.0f); /* repeats: back-references */
    for (int i = 0; i < N; i++) bb_u16(&raw, (uint16_t)(i * 3));
    uint8_t comp[4096];
    int backrefs;
    size_t cn = lzf_encode(raw.p, raw.n, comp, &backrefs);
    CHECK(backrefs >= 1);
    bb b = {0};
    char h[256];
    snprintf(h, sizeof h, "# .PCD v.7\nVERSION .7\nFIELDS x y z label\nSIZE 4 4 4 2\n"
             "TYPE F F F U\nCOUNT 1 1 1 1\nWIDTH %d\nHEIGHT 1\nPOINTS %d\n"
             "DATA binary_compressed\n", N, N);
    bb_str(&b, h);
    size_t hdr = b.n;
    bb_u32(&b, (uint32_t)cn);
    bb_u32(&b, (uint32_t)raw.n);
    bb_put(&b, comp, cn);
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, b.p, b.n, VC_FORMAT_PCD, &c));
    static const char *const want[] = {"x", "y", "z", "label"};
    CHECK(c.count == N && has_names(&c, want, 4));
    int ok = c.count == N && c.dim == 4;
    for (int i = 0; ok && i < N; i++)
        ok = c.data[4 * i] == (float)(i % 7) && c.data[4 * i + 1] == 1.25f * (float)i &&
             c.data[4 * i + 2] == 2.0f && c.data[4 * i + 3] == (float)(i * 3);
    CHECK(ok);
    vc_cloud_free(&c);
    truncate_cloud(b.p, b.n, VC_FORMAT_PCD, "pcd binary_compressed");

    /* Corruptions of the compressed stream. */
    bb e = {0};
    bb_put(&e, b.p, hdr);
    bb_u32(&e, 4);
    bb_u32(&e, (uint32_t)raw.n);
    const uint8_t badref[4] = {0x00, 0x41, 0x20, 0x05}; /* 1 literal, then offset 6 > 1 */
    bb_put(&e, badref, 4);
    expect_cloud_fail(e.p, e.n, VC_FORMAT_PCD, VC_ERR_FORMAT, "lzf back-reference before start");
    e.n = hdr;
    bb_u32(&e, 2);
    bb_u32(&e, (uint32_t)raw.n);
    const uint8_t shortlit[2] = {0x05, 0x41}; /* literal of 6 with 1 byte present */
    bb_put(&e, shortlit, 2);
    expect_cloud_fail(e.p, e.n, VC_FORMAT_PCD, VC_ERR_FORMAT, "lzf literal past end");
    e.n = hdr;
    bb_u32(&e, (uint32_t)cn);
    bb_u32(&e, (uint32_t)raw.n + 4); /* does not match POINTS x point size */
    bb_put(&e, comp, cn);
    expect_cloud_fail(e.p, e.n, VC_FORMAT_PCD, VC_ERR_FORMAT, "uncompressed size mismatch");
    e.n = hdr;
    bb_u32(&e, (uint32_t)cn + 100); /* more than present */
    bb_u32(&e, (uint32_t)raw.n);
    bb_put(&e, comp, cn);
    expect_cloud_fail(e.p, e.n, VC_FORMAT_PCD, VC_ERR_FORMAT, "compressed size past end");
    e.n = hdr;
    bb_u32(&e, (uint32_t)cn - 1); /* stream cut: decodes short */
    bb_u32(&e, (uint32_t)raw.n);
    bb_put(&e, comp, cn);
    expect_cloud_fail(e.p, e.n, VC_FORMAT_PCD, VC_ERR_FORMAT, "lzf stream short");
    free(e.p);
    free(b.p);
    free(raw.p);
}

static void test_pcd_bad_headers(void)
{
    static const struct { const char *txt; vc_status want; const char *what; } cases[] = {
        {"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 99999999999\nHEIGHT 1\n"
         "POINTS 99999999999\nDATA binary\n\x01\x02", VC_ERR_FORMAT, "huge POINTS binary"},
        {"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 99999999999\nHEIGHT 1\n"
         "POINTS 99999999999\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "huge POINTS ascii"},
        {"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 4000000000\nHEIGHT 1\n"
         "POINTS 4000000000\nDATA binary_compressed\n\x01\x00\x00\x00\x00\x00\x00\x00\x00",
         VC_ERR_FORMAT, "huge POINTS compressed"},
        {"FIELDS x y z\nWIDTH -3\nDATA ascii\n", VC_ERR_FORMAT, "negative WIDTH"},
        {"FIELDS x y z\nWIDTH 4294967296\nHEIGHT 4294967296\nDATA ascii\n", VC_ERR_FORMAT,
         "WIDTH x HEIGHT overflow"},
        {"FIELDS x y z\nWIDTH 9223372036854775807\nHEIGHT 3\nDATA ascii\n", VC_ERR_FORMAT,
         "WIDTH x HEIGHT overflow 2"},
        {"FIELDS x y z\nWIDTH 99999999999999999999999\nDATA ascii\n", VC_ERR_FORMAT,
         "WIDTH beyond int64"},
        {"FIELDS x y z\nWIDTH 2\nHEIGHT 2\nPOINTS 3\nDATA ascii\n", VC_ERR_FORMAT,
         "POINTS != WIDTH*HEIGHT"},
        {"FIELDS x y w\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "no z"},
        {"FIELDS x y z\nTYPE F F X\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "TYPE X"},
        {"FIELDS x y z\nSIZE 4 4 3\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "SIZE 3 F"},
        {"FIELDS x y z\nSIZE 4 4\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "SIZE count"},
        {"FIELDS x y z\nWIDTH 1\nDATA lzma\n", VC_ERR_UNSUPPORTED, "DATA lzma"},
        {"FIELDS x y z h\nCOUNT 1 1 1 99999999\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_LIMIT,
         "absurd COUNT"},
        {"FIELDS x y z\nCOUNT 1 1 0\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "COUNT 0"},
        {"FIELDS x y z\nWIDTH 1\n", VC_ERR_FORMAT, "no DATA"},
        {"WIDTH 1\nDATA ascii\n", VC_ERR_FORMAT, "no FIELDS"},
        {"FIELDS x y z\nDATA ascii\n", VC_ERR_FORMAT, "no POINTS or WIDTH"},
        {"FIELDS x y z\nBOGUS 1\nWIDTH 1\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "unknown key"},
        {"FIELDS x y z\nWIDTH 1\nDATA ascii\n1 2 zz\n", VC_ERR_FORMAT, "bad number"},
        {"FIELDS x y z\nWIDTH 1\nDATA ascii\n1 2 3 4\n", VC_ERR_FORMAT, "extra value"},
        {"FIELDS x y z\nWIDTH 2\nDATA ascii\n1 2 3\n", VC_ERR_FORMAT, "missing point"},
        {"FIELDS x y z\nWIDTH 1\nDATA ascii\n1 2 1e999\n", VC_ERR_FORMAT, "overflowing value"},
        {"FIELDS x y z\nWIDTH 0\nDATA binary\n", VC_OK, "empty binary"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].txt);
        if (strstr(cases[i].what, "compressed")) len += 8; /* embedded NULs */
        expect_cloud_fail(cases[i].txt, len, VC_FORMAT_PCD, cases[i].want, cases[i].what);
    }
}

/* ---- PLY --------------------------------------------------------------------------------- */

static void test_ply(void)
{
    const char *txt =
        "ply\nformat ascii 1.0\ncomment made by hand\n"
        "element vertex 3\nproperty float intensity\nproperty float x\nproperty float y\n"
        "property float z\nproperty uchar red\n"
        "element face 1\nproperty list uchar int vertex_indices\nend_header\n"
        "0.5 1 2 3 255\n0.25 -1 -2 -3 0\n1 4 5 nan 7\n3 0 1 2\n";
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, txt, strlen(txt), VC_FORMAT_PLY, &c));
    static const char *const want[] = {"x", "y", "z", "intensity", "red"};
    CHECK(c.count == 3 && has_names(&c, want, 5));
    if (c.count == 3 && c.dim == 5) {
        const float r1[5] = {-1, -2, -3, 0.25f, 0};
        CHECK(memcmp(c.data + 5, r1, sizeof r1) == 0);
        CHECK(isnan(c.data[12]) && c.data[14] == 7);
    }
    vc_cloud_free(&c);
    const char *path = tmp_path("a.ply");
    write_bytes(path, txt, strlen(txt));
    CHECK_OK(ctx, vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &c));
    vc_cloud_free(&c);
    truncate_cloud((const uint8_t *)txt, strlen(txt), VC_FORMAT_PLY, "ply ascii");

    /* binary little-endian, with an element before the vertex element to skip */
    bb b = {0};
    bb_str(&b, "ply\r\nformat binary_little_endian 1.0\r\nelement camera 2\r\n"
               "property list uint8 float32 k\r\nproperty int16 id\r\n"
               "element vertex 4\r\nproperty double x\r\nproperty float y\r\n"
               "property short z\r\nproperty uint8 label\r\nproperty int32 idx\r\n"
               "element face 1\r\nproperty list uchar int vertex_indices\r\nend_header\r\n");
    bb_u8(&b, 2);
    bb_f32(&b, 1);
    bb_f32(&b, 2);
    bb_u16(&b, 7);
    bb_u8(&b, 0);
    bb_u16(&b, 8);
    for (int i = 0; i < 4; i++) {
        bb_f64(&b, 0.5 * i);
        bb_f32(&b, -1.0f * (float)i);
        bb_u16(&b, (uint16_t)(int16_t)(-100 * i));
        bb_u8(&b, (uint8_t)(250 + i));
        bb_u32(&b, (uint32_t)(-70000 * i));
    }
    bb_u8(&b, 3);
    bb_u32(&b, 0);
    bb_u32(&b, 1);
    bb_u32(&b, 2);
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, b.p, b.n, VC_FORMAT_PLY, &c));
    static const char *const wb[] = {"x", "y", "z", "label", "idx"};
    CHECK(c.count == 4 && has_names(&c, wb, 5));
    if (c.count == 4 && c.dim == 5) {
        const float r3[5] = {1.5f, -3, -300, 253, -210000};
        CHECK(memcmp(c.data + 15, r3, sizeof r3) == 0);
    }
    vc_cloud_free(&c);
    truncate_cloud(b.p, b.n, VC_FORMAT_PLY, "ply binary");
    free(b.p);

    static const struct { const char *txt; vc_status want; const char *what; } cases[] = {
        {"ply\nformat binary_big_endian 1.0\nelement vertex 1\nproperty float x\n"
         "property float y\nproperty float z\nend_header\n", VC_ERR_UNSUPPORTED, "big endian"},
        {"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
         "property float z\nproperty list uchar int n\nend_header\n1 2 3 0\n",
         VC_ERR_UNSUPPORTED, "list in vertex"},
        {"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
         "end_header\n1 2\n", VC_ERR_FORMAT, "no z"},
        {"ply\nformat ascii 1.0\nelement vertex 99999999999999\nproperty float x\n"
         "property float y\nproperty float z\nend_header\n1 2 3\n", VC_ERR_FORMAT, "huge count"},
        {"ply\nformat binary_little_endian 1.0\nelement vertex 4611686018427387904\n"
         "property double x\nproperty double y\nproperty double z\nend_header\n", VC_ERR_FORMAT,
         "count x size overflow"},
        {"ply\nformat ascii 1.0\nelement vertex -1\nproperty float x\nproperty float y\n"
         "property float z\nend_header\n", VC_ERR_FORMAT, "negative count"},
        {"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
         "property float z\n", VC_ERR_FORMAT, "no end_header"},
        {"plx\nformat ascii 1.0\n", VC_ERR_FORMAT, "bad magic"},
        {"ply\nformat ascii 2.0\nend_header\n", VC_ERR_UNSUPPORTED, "version 2.0"},
        {"ply\nformat ascii 1.0\nelement vertex 1\nproperty float128 x\nend_header\n",
         VC_ERR_FORMAT, "bad type"},
        {"ply\nformat ascii 1.0\nelement face 2\nproperty list uchar int v\n"
         "element vertex 1\nproperty float x\nproperty float y\nproperty float z\n"
         "end_header\n200 1 2\n", VC_ERR_FORMAT, "list count past end"},
        {"ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\nproperty float y\n"
         "property float z\nend_header\n", VC_OK, "zero vertices"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_cloud_fail(cases[i].txt, strlen(cases[i].txt), VC_FORMAT_PLY, cases[i].want,
                          cases[i].what);
}

/* ---- NPY --------------------------------------------------------------------------------- */

static void npy_file(bb *b, int major, const char *dict, const void *data, size_t n)
{
    b->n = 0;
    size_t pre = major == 1 ? 10 : 12;
    size_t hl = strlen(dict) + 1;
    size_t pad = (64 - (pre + hl) % 64) % 64;
    bb_str(b, "\x93NUMPY");
    bb_u8(b, (uint8_t)major);
    bb_u8(b, 0);
    if (major == 1) bb_u16(b, (uint16_t)(hl + pad));
    else bb_u32(b, (uint32_t)(hl + pad));
    bb_str(b, dict);
    for (size_t i = 0; i < pad; i++) bb_u8(b, ' ');
    bb_u8(b, '\n');
    bb_put(b, data, n);
}

static void expect_npy_fail(const void *p, size_t n, vc_status want, const char *what)
{
    vc_array a;
    memset(&a, SENT, sizeof a);
    vc_status s = vc_npy_read_memory(ctx, p, n, &a);
    CHECK_MSG(s == want, "%s: got %s, want %s (%s)", what, vc_status_string(s),
              vc_status_string(want), vc_context_last_error(ctx));
    if (s == VC_OK) vc_array_free(&a);
    else CHECK_MSG(is_sentinel(&a, sizeof a), "%s: output written on failure", what);
}

static void test_npy(void)
{
    vc_rng r = vc_test_rng("test_formats npy");
    const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_INT32};
    for (int di = 0; di < 3; di++) {
        for (int nd = 0; nd <= 8; nd++) {
            vc_array a;
            memset(&a, 0, sizeof a);
            a.dtype = dts[di];
            a.ndim = nd;
            int64_t elems = 1;
            for (int i = 0; i < nd; i++) {
                a.shape[i] = nd <= 3 ? 3 + i : 1 + (i & 1);
                elems *= a.shape[i];
            }
            size_t es = dts[di] == VC_DTYPE_FP16 ? 2 : 4;
            a.data = malloc((size_t)elems * es);
            for (size_t i = 0; i < (size_t)elems * es; i++)
                ((uint8_t *)a.data)[i] = (uint8_t)vc_rng_next(&r);
            const char *path = tmp_path("rt.npy");
            CHECK_OK(ctx, vc_npy_write(ctx, path, &a));
            size_t fn = 0;
            uint8_t *fb = read_bytes(path, &fn);
            CHECK(fb && fn >= 10 && (fn - (size_t)elems * es) % 64 == 0 &&
                  fb[fn - (size_t)elems * es - 1] == '\n');
            vc_array b;
            CHECK_OK(ctx, vc_npy_read(ctx, path, &b));
            int same = b.dtype == a.dtype && b.ndim == a.ndim &&
                       memcmp(b.data, a.data, (size_t)elems * es) == 0;
            for (int i = 0; same && i < nd; i++) same = b.shape[i] == a.shape[i];
            CHECK_MSG(same, "npy round trip dtype %d ndim %d", (int)dts[di], nd);
            vc_array_free(&b);
            CHECK(b.data == NULL);
            if (di == 0 && nd == 2 && fb) truncate_cloud(fb, fn, VC_FORMAT_NPY, "npy cloud");
            if (nd == 3 && fb) { /* every truncation of a valid file fails cleanly */
                int bad = 0;
                for (size_t len = 0; len < fn; len++) {
                    uint8_t *cp = malloc(len ? len : 1);
                    memcpy(cp, fb, len);
                    vc_array x;
                    memset(&x, SENT, sizeof x);
                    vc_status s = vc_npy_read_memory(ctx, cp, len, &x);
                    if (s != VC_ERR_FORMAT || !is_sentinel(&x, sizeof x)) bad++;
                    if (s == VC_OK) vc_array_free(&x);
                    free(cp);
                }
                CHECK_MSG(bad == 0, "npy truncations: %d bad", bad);
            }
            free(fb);
            free(a.data);
        }
    }
    /* zero-size array and bf16 */
    vc_array z = {NULL, VC_DTYPE_FP32, 2, {0, 3}};
    CHECK_OK(ctx, vc_npy_write(ctx, tmp_path("zero.npy"), &z));
    vc_array zb;
    CHECK_OK(ctx, vc_npy_read(ctx, tmp_path("zero.npy"), &zb));
    CHECK(zb.ndim == 2 && zb.shape[0] == 0 && zb.shape[1] == 3);
    vc_array_free(&zb);
    float one = 1;
    vc_array bf = {&one, VC_DTYPE_BF16, 1, {1}};
    CHECK_STATUS(ctx, vc_npy_write(ctx, tmp_path("bf.npy"), &bf), VC_ERR_UNSUPPORTED);

    /* hand-made headers */
    bb b = {0};
    const double d3[3] = {1.5, -2, 1e30};
    npy_file(&b, 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d3, 24);
    vc_array a;
    CHECK_OK(ctx, vc_npy_read_memory(ctx, b.p, b.n, &a));
    CHECK(a.dtype == VC_DTYPE_FP32 && a.ndim == 1 && a.shape[0] == 3 &&
          ((float *)a.data)[1] == -2.0f && ((float *)a.data)[2] == 1e30f);
    vc_array_free(&a);
    const double big[1] = {1e300};
    npy_file(&b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", big, 8);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "f8 overflow");
    const int64_t i8[2] = {-5, 2147483647};
    npy_file(&b, 3, "{\"descr\":\"<i8\",\"fortran_order\":False,\"shape\":(1L,2L)}", i8, 16);
    CHECK_OK(ctx, vc_npy_read_memory(ctx, b.p, b.n, &a));
    CHECK(a.dtype == VC_DTYPE_INT32 && a.ndim == 2 && ((int32_t *)a.data)[0] == -5 &&
          ((int32_t *)a.data)[1] == 2147483647);
    vc_array_free(&a);
    const int64_t i8b[1] = {(int64_t)1 << 40};
    npy_file(&b, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", i8b, 8);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "i8 out of range");
    float f4[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    npy_file(&b, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "big endian");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "fortran order");
    npy_file(&b, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", f4, 6);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "uint8");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f4, 25);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "trailing byte");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
             "4294967296, 4294967296), }", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "shape overflow");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "negative dimension");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6), }",
             f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "9 dimensions");
    npy_file(&b, 1, "{'descr': '<f4', 'shape': (6,), }", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "no fortran_order");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "unknown key");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", f4, 24);
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "unclosed dict");
    npy_file(&b, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", f4,
             24);
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "structured");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f4, 24);
    b.p[0] = 'N';
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "bad magic");
    b.p[0] = 0x93;
    b.p[6] = 9;
    expect_npy_fail(b.p, b.n, VC_ERR_UNSUPPORTED, "version 9");
    b.p[6] = 1;
    b.p[8] = 0xff;
    b.p[9] = 0xff;
    expect_npy_fail(b.p, b.n, VC_ERR_FORMAT, "header length past end");
    /* point cloud from .npy */
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f4, 24);
    expect_cloud_fail(b.p, b.n, VC_FORMAT_NPY, VC_ERR_FORMAT, "1-d npy cloud");
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4, 24);
    vc_cloud c;
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, b.p, b.n, VC_FORMAT_NPY, &c));
    CHECK(c.count == 2 && c.dim == 3 && c.data[5] == 6 && strcmp(c.names[2], "z") == 0);
    vc_cloud_free(&c);
    float f8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    npy_file(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", f8, 32);
    CHECK_OK(ctx, vc_cloud_read_memory(ctx, b.p, b.n, VC_FORMAT_NPY, &c));
    CHECK(c.dim == 4 && strcmp(c.names[3], "c3") == 0);
    vc_cloud_free(&c);
    free(b.p);
}

/* ---- VXT --------------------------------------------------------------------------------- */

static void fix_crcs(uint8_t *p, size_t n); /* below */

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void fix_crcs(uint8_t *p, size_t n)
{
    uint32_t h;
    memcpy(&h, p + 8, 4);
    uint32_t pc = crc32_ref(p + h, n - h);
    memcpy(p + 56, &pc, 4);
    uint32_t hc = crc32_ref(p, 60);
    memcpy(p + 60, &hc, 4);
}

static void expect_vxt_fail(const uint8_t *p, size_t n, vc_status want, const char *what)
{
    uint8_t *cp = malloc(n ? n : 1);
    memcpy(cp, p, n);
    vc_tensor *t = (vc_tensor *)(uintptr_t)0x5a5a5a5a;
    vc_status s = vc_tensor_load_memory(ctx, cp, n, &t);
    CHECK_MSG(s == want, "%s: got %s, want %s (%s)", what, vc_status_string(s),
              vc_status_string(want), vc_context_last_error(ctx));
    if (s == VC_OK) vc_tensor_destroy(t);
    else CHECK_MSG(t == (vc_tensor *)(uintptr_t)0x5a5a5a5a, "%s: output written", what);
    free(cp);
}

static void test_vxt(void)
{
    vc_rng r = vc_test_rng("test_formats vxt");
    const vc_dtype dts[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};
    const int64_t counts[3] = {0, 1, 33};
    for (int di = 0; di < 3; di++) {
        for (int ci = 0; ci < 3; ci++) {
            int64_t n = counts[ci], ch = 5;
            const int32_t shape[3] = {7, 9, 11};
            int32_t *co = malloc((size_t)(n * 16 + 1));
            for (int64_t i = 0; i < n; i++) { /* distinct rows */
                co[4 * i] = (int32_t)(i % 2);
                co[4 * i + 1] = (int32_t)(i / 2 % 7);
                co[4 * i + 2] = (int32_t)(i / 14);
                co[4 * i + 3] = (int32_t)vc_rng_int(&r, 11);
            }
            size_t es = dts[di] == VC_DTYPE_FP32 ? 4 : 2;
            uint8_t *fe = malloc((size_t)(n * ch) * es + 1);
            for (int64_t i = 0; i < n * ch; i++) {
                float v = vc_rng_float(&r) * 4 + 0.25f; /* never all zero */
                if (es == 4) memcpy(fe + 4 * i, &v, 4);
                else {
                    uint16_t h = (uint16_t)(0x3c00u + (vc_rng_next(&r) & 0x3ff)); /* finite */
                    memcpy(fe + 2 * i, &h, 2);
                }
            }
            vc_coords *cs = NULL;
            vc_tensor *t = NULL, *u = NULL;
            CHECK_OK(ctx, vc_coords_create(ctx, co, n, VC_MEMORY_HOST, shape, 2, &cs));
            CHECK_OK(ctx, vc_tensor_create(ctx, cs, ch, dts[di], fe, VC_MEMORY_HOST, &t));
            vc_coords_destroy(cs);
            const char *path = tmp_path("t.vxt");
            CHECK_OK(ctx, vc_tensor_save(ctx, t, path));
            CHECK_OK(ctx, vc_tensor_load(ctx, path, &u));
            if (u) {
                vc_tensor_info ti;
                vc_coords_info ci2;
                vc_tensor_get_info(u, &ti);
                vc_coords_get_info(ti.coords, &ci2);
                int32_t *co2 = malloc((size_t)(n * 16 + 1));
                uint8_t *fe2 = malloc((size_t)(n * ch) * es + 1);
                if (n > 0) {
                    CHECK_OK(ctx, vc_coords_copy_out(ctx, ti.coords, co2, VC_MEMORY_HOST));
                    CHECK_OK(ctx, vc_tensor_copy_out(ctx, u, fe2, dts[di], VC_MEMORY_HOST));
                }
                CHECK_MSG(ti.count == n && ti.channels == ch && ti.dtype == dts[di] &&
                          ci2.spatial_shape[0] == 7 && ci2.spatial_shape[2] == 11 &&
                          ci2.batch_size == 2 && memcmp(co2, co, (size_t)n * 16) == 0 &&
                          memcmp(fe2, fe, (size_t)(n * ch) * es) == 0,
                          "vxt round trip dtype %d n %lld", (int)dts[di], (long long)n);
                free(co2);
                free(fe2);
                vc_tensor_destroy(u);
            }
            if (di == 1 && ci == 2) { /* corruptions of a valid file */
                size_t fn = 0;
                uint8_t *fb = read_bytes(path, &fn);
                int bad = 0;
                for (size_t len = 0; len < fn; len++) {
                    vc_tensor *x = (vc_tensor *)(uintptr_t)0x5a5a5a5a;
                    uint8_t *cp = malloc(len ? len : 1);
                    memcpy(cp, fb, len);
                    vc_status s = vc_tensor_load_memory(ctx, cp, len, &x);
                    if (s != VC_ERR_FORMAT || x != (vc_tensor *)(uintptr_t)0x5a5a5a5a) bad++;
                    free(cp);
                }
                CHECK_MSG(bad == 0, "vxt truncations: %d bad", bad);
                expect_vxt_fail(fb, fn, VC_OK, "vxt intact");
                fb[0] = 'X';
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt magic");
                fb[0] = 'V';
                fb[fn - 1] ^= 1;
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt payload checksum");
                fb[fn - 1] ^= 1;
                fb[20] ^= 1;
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt header checksum");
                fb[20] ^= 1;
                uint8_t *big = malloc(fn + 1);
                memcpy(big, fb, fn);
                big[fn] = 0;
                expect_vxt_fail(big, fn + 1, VC_ERR_FORMAT, "vxt trailing byte");
                free(big);
                uint8_t v2[4] = {2, 0, 0, 0};
                memcpy(fb + 4, v2, 4);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_UNSUPPORTED, "vxt version 2");
                v2[0] = 1;
                memcpy(fb + 4, v2, 4);
                int64_t huge = (int64_t)1 << 40;
                memcpy(fb + 16, &huge, 8);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_LIMIT, "vxt huge count");
                huge = -1;
                memcpy(fb + 16, &huge, 8);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt negative count");
                huge = n - 1;
                memcpy(fb + 16, &huge, 8);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt count mismatch");
                huge = n;
                memcpy(fb + 16, &huge, 8);
                uint32_t dt = 3;
                memcpy(fb + 12, &dt, 4);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt dtype int32");
                dt = 1;
                memcpy(fb + 12, &dt, 4);
                int32_t badx = 11; /* x == shape: out of range, checksums right */
                memcpy(fb + 64 + 12, &badx, 4);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_OUT_OF_RANGE, "vxt coordinate out of range");
                int32_t shape0 = 0;
                memcpy(fb + 32, &shape0, 4);
                fix_crcs(fb, fn);
                expect_vxt_fail(fb, fn, VC_ERR_FORMAT, "vxt zero shape");
                free(fb);
            }
            vc_tensor_destroy(t);
            free(co);
            free(fe);
        }
    }
    vc_tensor *x = NULL;
    CHECK_STATUS(ctx, vc_tensor_load(ctx, tmp_path("missing.vxt"), &x), VC_ERR_IO);
    CHECK(x == NULL);
}

int main(void)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    test_kitti();
    test_pcd_ascii();
    test_pcd_binary();
    test_pcd_compressed();
    test_pcd_bad_headers();
    test_ply();
    test_npy();
    test_vxt();
    CHECK_OK(ctx, vc_context_destroy(ctx));
    TEST_END();
}
