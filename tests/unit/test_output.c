/* tests/unit/test_output.c - atomic outputs (vc_output) and the library's writers
 * (vc_tensor_save, vc_npy_write, vc_cloud_write_kitti). Each writer fails part-way with a file
 * already at its path - a symlink to /dev/full, a file-size limit (SIGXFSZ ignored here, as the
 * CLI does), a read-only directory (not as root: root writes there; the reason is printed) -
 * and the old bytes, the link and /dev/full must stay as they were, with no temporary left.
 * On success: the mode of a replaced file is kept, a new file gets 0666 less the umask, a
 * symlink is written through (the link stays), a directory is refused. Then vc_output itself:
 * discard, publishing an unwritten or failed output, writing an output twice. Work files go
 * to a fresh directory under VC_TEST_TMP. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "voxconv.h"
#include "testutil.h"

static vc_context *ctx;
static char g_dir[1024];
static vc_tensor *g_tensor;
static float g_data[4000 * 4]; /* 64 KiB of points / features */
static const uint8_t OLD[] = "the previous contents, which must survive";

enum { W_VXT, W_NPY, W_KITTI, NWRITERS };
static const char *const WNAME[NWRITERS] = {"vc_tensor_save", "vc_npy_write",
                                            "vc_cloud_write_kitti"};
static const char *const WEXT[NWRITERS] = {"vxt", "npy", "bin"};

static vc_status write_with(int w, const char *path)
{
    if (w == W_VXT) return vc_tensor_save(ctx, g_tensor, path);
    if (w == W_NPY) {
        vc_array a = {g_data, VC_DTYPE_FP32, 2, {4000, 4}};
        return vc_npy_write(ctx, path, &a);
    }
    vc_cloud c = {g_data, 4000, 4, NULL};
    return vc_cloud_write_kitti(ctx, path, &c);
}

static const char *path_in(const char *dir, const char *name, int w)
{
    static char buf[4][1200];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s.%s", dir, name, WEXT[w]);
    return b;
}

static int put_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = fwrite(p, 1, n, f);
    return fclose(f) == 0 && k == n ? 0 : -1;
}

/* 1 when the file holds exactly OLD. */
static int holds_old(const char *path)
{
    uint8_t buf[sizeof OLD + 8];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n == sizeof OLD && memcmp(buf, OLD, n) == 0;
}

/* Entries of dir whose name starts with '.', other than . and .. (temporaries). */
static int hidden_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void check_failure(int w, const char *why, const char *dir, const char *path, vc_status st)
{
    const char *msg = vc_context_last_error(ctx);
    CHECK_MSG(st == VC_ERR_IO, "%s, %s: status %s", WNAME[w], why, vc_status_string(st));
    CHECK_MSG(msg && strstr(msg, path), "%s, %s: message '%s' names no path", WNAME[w], why,
              msg ? msg : "");
    CHECK_MSG(hidden_entries(dir) == 0, "%s, %s: a temporary is left in %s", WNAME[w], why, dir);
}

/* A symlink to /dev/full at the path: the write fails, the link and the device stay. */
static void case_dev_full(int w)
{
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) {
        printf("SKIP %s, /dev/full: no /dev/full here\n", WNAME[w]);
        return;
    }
    const char *p = path_in(g_dir, "full", w);
    unlink(p);
    CHECK(symlink("/dev/full", p) == 0);
    check_failure(w, "symlink to /dev/full", g_dir, p, write_with(w, p));
    char target[64] = {0};
    struct stat ls;
    CHECK_MSG(lstat(p, &ls) == 0 && S_ISLNK(ls.st_mode) &&
              readlink(p, target, sizeof target - 1) == 9 && strcmp(target, "/dev/full") == 0,
              "%s: the symlink to /dev/full was changed", WNAME[w]);
    CHECK_MSG(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode), "%s: /dev/full is gone",
              WNAME[w]);
    unlink(p);
}

/* A file-size limit below the file's size, SIGXFSZ ignored: EFBIG, the old file intact. */
static void case_fsize(int w)
{
    const char *p = path_in(g_dir, "limit", w);
    CHECK(put_file(p, OLD, sizeof OLD) == 0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 16384;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    vc_status st = write_with(w, p);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    check_failure(w, "file-size limit", g_dir, p, st);
    CHECK_MSG(holds_old(p), "%s, file-size limit: the old file was changed", WNAME[w]);
}

/* A read-only directory: no temporary can be made; the old file intact. */
static void case_readonly_dir(int w)
{
    if (geteuid() == 0) {
        printf("SKIP %s, read-only directory: running as root, which writes into 0555 "
               "directories (tests/cli/data_safety.sh covers it on a read-only mount)\n",
               WNAME[w]);
        return;
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/ro_%s", g_dir, WEXT[w]);
    CHECK(mkdir(dir, 0755) == 0);
    const char *p = path_in(dir, "keep", w);
    CHECK(put_file(p, OLD, sizeof OLD) == 0);
    CHECK(chmod(dir, 0555) == 0);
    check_failure(w, "read-only directory", dir, p, write_with(w, p));
    CHECK_MSG(holds_old(p), "%s, read-only directory: the old file was changed", WNAME[w]);
    chmod(dir, 0755);
}

static off_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Successful writes: modes, symlinks written through, a directory refused. */
static void case_success(int w)
{
    const char *p = path_in(g_dir, "mode", w);
    CHECK(put_file(p, OLD, sizeof OLD) == 0 && chmod(p, 0640) == 0);
    CHECK_OK(ctx, write_with(w, p));
    struct stat st;
    CHECK_MSG(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_size > 60000,
              "%s: replaced file has mode %o size %lld", WNAME[w], (unsigned)st.st_mode & 07777,
              (long long)st.st_size);
    off_t full = st.st_size;
    mode_t mask = umask(022);
    umask(mask);
    const char *fresh = path_in(g_dir, "fresh", w);
    unlink(fresh);
    CHECK_OK(ctx, write_with(w, fresh));
    CHECK_MSG(stat(fresh, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask),
              "%s: new file mode %o, umask %o", WNAME[w], (unsigned)st.st_mode & 0777,
              (unsigned)mask);
    /* a link to an existing file, and a dangling one: the target is (re)written, the link stays */
    const char *real = path_in(g_dir, "real", w), *link = path_in(g_dir, "link", w);
    const char *dang = path_in(g_dir, "dangling", w), *made = path_in(g_dir, "made", w);
    unlink(link);
    unlink(dang);
    unlink(made);
    CHECK(put_file(real, OLD, sizeof OLD) == 0);
    CHECK(symlink(strrchr(real, '/') + 1, link) == 0 && symlink(strrchr(made, '/') + 1, dang) == 0);
    CHECK_OK(ctx, write_with(w, link));
    CHECK_OK(ctx, write_with(w, dang));
    struct stat ls;
    CHECK_MSG(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode) && size_of(real) == full &&
              lstat(dang, &ls) == 0 && S_ISLNK(ls.st_mode) && size_of(made) == full,
              "%s: symlinks not written through", WNAME[w]);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/isdir.%s", g_dir, WEXT[w]);
    CHECK(mkdir(dir, 0755) == 0);
    check_failure(w, "directory target", g_dir, dir, write_with(w, dir));
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && rmdir(dir) == 0);
    CHECK(hidden_entries(g_dir) == 0);
}

/* vc_output: discard, publish unwritten, write twice, publish a failed write. */
static void case_output_api(void)
{
    const char *p = path_in(g_dir, "api", W_NPY);
    CHECK(put_file(p, OLD, sizeof OLD) == 0);
    vc_array a = {g_data, VC_DTYPE_FP32, 2, {4000, 4}};
    vc_output *o = NULL;
    const char *tmp = NULL;
    CHECK_OK(ctx, vc_output_open(ctx, p, &o));
    CHECK_OK(ctx, vc_output_temp_path(o, &tmp));
    CHECK_MSG(tmp && strstr(tmp, "/.api.npy.") && size_of(tmp) == 0, "temporary '%s'",
              tmp ? tmp : "(null)");
    CHECK(hidden_entries(g_dir) == 1);
    CHECK_OK(ctx, vc_npy_write_output(ctx, o, &a));
    CHECK_STATUS(ctx, vc_npy_write_output(ctx, o, &a), VC_ERR_INVALID_ARGUMENT);
    CHECK(holds_old(p)); /* written, not yet published */
    CHECK_OK(ctx, vc_output_discard(o));
    CHECK(holds_old(p) && hidden_entries(g_dir) == 0);

    CHECK_OK(ctx, vc_output_open(ctx, p, &o));
    CHECK_STATUS(ctx, vc_output_publish(ctx, o), VC_ERR_INVALID_ARGUMENT); /* nothing written */
    CHECK(holds_old(p) && hidden_entries(g_dir) == 0);

    CHECK_OK(ctx, vc_output_open(ctx, p, &o));
    CHECK_OK(ctx, vc_tensor_save_output(ctx, g_tensor, o));
    CHECK_OK(ctx, vc_output_publish(ctx, o));
    CHECK(size_of(p) > 60000 && hidden_entries(g_dir) == 0);

    const char *f = path_in(g_dir, "apifull", W_NPY);
    unlink(f);
    struct stat st;
    if (stat("/dev/full", &st) == 0 && symlink("/dev/full", f) == 0) {
        CHECK_OK(ctx, vc_output_open(ctx, f, &o));
        CHECK_OK(ctx, vc_output_temp_path(o, &tmp));
        CHECK(tmp == NULL); /* a device is written in place */
        CHECK_STATUS(ctx, vc_npy_write_output(ctx, o, &a), VC_ERR_IO);
        CHECK_STATUS(ctx, vc_output_publish(ctx, o), VC_ERR_IO);
        CHECK(lstat(f, &st) == 0 && S_ISLNK(st.st_mode) && unlink(f) == 0);
    }
    CHECK_STATUS(ctx, vc_output_open(ctx, "", &o), VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_npy_write_output(ctx, NULL, &a), VC_ERR_INVALID_ARGUMENT);
    CHECK_OK(ctx, vc_output_discard(NULL));
}

int main(void)
{
    const char *base = getenv("VC_TEST_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/output_test.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    for (int i = 0; i < 4000 * 4; i++) g_data[i] = (float)i * 0.25f;
    int32_t *co = malloc(2000 * 4 * sizeof *co);
    for (int i = 0; i < 2000; i++) {
        co[4 * i] = 0;
        co[4 * i + 1] = i / 400;
        co[4 * i + 2] = (i / 20) % 20;
        co[4 * i + 3] = i % 20;
    }
    int32_t shape[3] = {8, 20, 20};
    vc_coords *cs = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, co, 2000, VC_MEMORY_HOST, shape, 1, &cs));
    CHECK_OK(ctx, vc_tensor_create(ctx, cs, 4, VC_DTYPE_FP32, g_data, VC_MEMORY_HOST, &g_tensor));
    vc_coords_destroy(cs);
    free(co);
    for (int w = 0; w < NWRITERS; w++) {
        case_dev_full(w);
        case_fsize(w);
        case_readonly_dir(w);
        case_success(w);
    }
    case_output_api();
    vc_tensor_destroy(g_tensor);
    vc_context_destroy(ctx);
    if (!vc_t_fail) { /* keep the evidence of a failure */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) printf("note: could not remove %s\n", g_dir);
    }
    TEST_END();
}
