/* tests/unit/test_hostile.c - tiny files that ask for a lot (issue 27): .npy shapes with huge
 * dimensions, a .vxt whose batch size is 2^31-1, a file over the size limit (refused by its
 * size before a byte is read), and ascii PCD / PLY numbers longer than any fixed buffer,
 * which must parse to the right values. Deterministic (no random input). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>

#include "src/io/io.h"
#include "testutil.h"
#include "voxconv.h"

/* A version 1.0 .npy header of a float32 array of the given shape, no data. */
static size_t npy_header(uint8_t *out, size_t cap, const char *shape)
{
    char dict[256];
    int l = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(%s), }\n", shape);
    if (l <= 0 || (size_t)l + 10 > cap) return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    vc_st_u16(out + 8, (uint16_t)l);
    memcpy(out + 10, dict, (size_t)l);
    return (size_t)l + 10;
}

static void test_npy_dims(vc_context *ctx)
{
    uint8_t b[300];
    vc_array a;
    size_t n = npy_header(b, sizeof b, "0, 9223372036854775807");
    CHECK_STATUS(ctx, vc_npy_read_memory(ctx, b, n, &a), VC_ERR_LIMIT);
    n = npy_header(b, sizeof b, "0, 4294967299"); /* 2^32 + 3: once read as 3 columns */
    CHECK_STATUS(ctx, vc_npy_read_memory(ctx, b, n, &a), VC_ERR_LIMIT);
    CHECK(strstr(vc_context_last_error(ctx), "4294967299") != NULL);
    n = npy_header(b, sizeof b, "0, 50000000");
    CHECK_OK(ctx, vc_npy_read_memory(ctx, b, n, &a));
    CHECK(a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 50000000);
    vc_array_free(&a);
    vc_cloud c;
    CHECK_STATUS(ctx, vc_cloud_read_memory(ctx, b, n, VC_FORMAT_NPY, &c), VC_ERR_LIMIT);
}

/* A 96-byte .vxt: one voxel of 4 fp32 channels, batch size 2^31 - 1. */
static void test_vxt_batch(vc_context *ctx)
{
    uint8_t f[96];
    memset(f, 0, sizeof f);
    memcpy(f, "VXCT", 4);
    vc_st_u32(f + 4, 1);
    vc_st_u32(f + 8, 64);
    vc_st_u64(f + 16, 1);
    vc_st_u64(f + 24, 4);
    for (int a = 0; a < 3; a++) vc_st_u32(f + 32 + 4 * a, 8);
    vc_st_u32(f + 44, 0x7fffffffu);
    vc_st_u64(f + 48, 32);
    const int32_t coord[4] = {0, 1, 2, 3};
    const float feat[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        uint32_t u;
        memcpy(&u, &feat[i], 4);
        vc_st_u32(f + 64 + 4 * i, (uint32_t)coord[i]);
        vc_st_u32(f + 80 + 4 * i, u);
    }
    vc_st_u32(f + 56, vc_crc32(0, f + 64, 32));
    vc_st_u32(f + 60, vc_crc32(0, f, 60));
    vc_tensor *t = NULL;
    CHECK_OK(ctx, vc_tensor_load_memory(ctx, f, sizeof f, &t));
    if (!t) return;
    vc_tensor_info ti;
    vc_coords_info ci;
    vc_tensor_get_info(t, &ti);
    vc_coords_get_info(ti.coords, &ci);
    CHECK(ti.count == 1 && ti.channels == 4 && ci.batch_size == INT32_MAX);
    vc_tensor_destroy(t);
}

/* A regular file one byte over VC_IO_MAX_FILE (sparse) is refused by its size. */
static void test_file_limit(vc_context *ctx)
{
    const char *tmp = getenv("VC_TEST_TMP");
    char path[1024];
    snprintf(path, sizeof path, "%s/hostile_big.npy", tmp ? tmp : ".");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)VC_IO_MAX_FILE + 1) != 0) {
        printf("SKIP file limit: cannot make a sparse file at %s\n", path);
        if (fd >= 0) close(fd);
        unlink(path);
        return;
    }
    close(fd);
    vc_array a;
    clock_t t0 = clock();
    CHECK_STATUS(ctx, vc_npy_read(ctx, path, &a), VC_ERR_LIMIT);
    CHECK(strstr(vc_context_last_error(ctx), "larger than the limit") != NULL);
    CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 1.0); /* nothing was read */
    unlink(path);
}

/* "0000...0002.5" style tokens longer than any fixed buffer. */
static void long_numbers(char *x, char *y, char *z, size_t len)
{
    memset(x, '0', len);
    memcpy(x + len - 3, "2.5", 4); /* 2.5 after len-3 zeros */
    memcpy(y, "-1.5", 4);
    memset(y + 4, '0', len - 4);
    y[len] = 0;                    /* -1.5000... */
    /* "3" + nz zeros + "e-<nz>", exactly len characters: 3 */
    size_t nz = len - 3;
    char e[24];
    while (nz > 0 && 1 + nz + (size_t)snprintf(e, sizeof e, "e-%zu", nz) != len) nz--;
    z[0] = '3';
    memset(z + 1, '0', nz);
    memcpy(z + 1 + nz, e, strlen(e) + 1);
}

static void check_cloud(vc_context *ctx, const char *text, vc_file_format fmt, int ok)
{
    vc_cloud c;
    vc_status st = vc_cloud_read_memory(ctx, text, strlen(text), fmt, &c);
    CHECK_STATUS(ctx, st, ok ? VC_OK : VC_ERR_FORMAT);
    if (st != VC_OK) return;
    CHECK(c.count == 1 && c.dim == 3);
    CHECK_MSG(c.data[0] == 2.5f && c.data[1] == -1.5f && c.data[2] == 3.0f, "%g %g %g",
              c.data[0], c.data[1], c.data[2]);
    vc_cloud_free(&c);
}

static void test_long_decimals(vc_context *ctx)
{
    static const char *pcd = "# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\n"
                             "COUNT 1 1 1\nWIDTH 1\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n"
                             "POINTS 1\nDATA ascii\n";
    static const char *ply = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                             "property double y\nproperty float z\nend_header\n";
    const size_t lens[] = {79, 80, 81, 200, 5000};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            size_t len = lens[i];
            char *x = malloc(len + 1), *y = malloc(len + 1), *z = malloc(len + 1);
            char *text = malloc(3 * len + 400);
            long_numbers(x, y, z, len);
            sprintf(text, "%s%s %s %s\n", k ? ply : pcd, x, y, z);
            check_cloud(ctx, text, k ? VC_FORMAT_PLY : VC_FORMAT_PCD, 1);
            x[len / 2] = 'x'; /* still refused when not a number */
            sprintf(text, "%s%s %s %s\n", k ? ply : pcd, x, y, z);
            check_cloud(ctx, text, k ? VC_FORMAT_PLY : VC_FORMAT_PCD, 0);
            free(x);
            free(y);
            free(z);
            free(text);
        }
    }
}

int main(void)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        printf("cannot create a CPU context\n");
        return 1;
    }
    test_npy_dims(ctx);
    test_vxt_batch(ctx);
    test_file_limit(ctx);
    test_long_decimals(ctx);
    vc_context_destroy(ctx);
    TEST_END();
}
