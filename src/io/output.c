/* src/io/output.c - atomic output files (vc_output), the one way the library writes a file.
 *
 * A file is written to a temporary ".NAME.XXXXXX" in the directory of its target, flushed,
 * synced and closed with every step checked, and only then renamed over the target. A failure
 * at any step removes the temporary and nothing else: the path the caller gave, and whatever
 * was there (a file, a symlink, a device node), is never unlinked or truncated.
 *
 * - A symlink at the path is followed (as fopen would), up to 40 links: the temporary goes
 *   beside the link's final target and replaces that target; the link itself is left alone.
 * - An existing regular target keeps its mode (and, where permitted, its owner and group); one
 *   that is not writable by the caller is refused as fopen would refuse it. A new file gets
 *   0666 less the umask (the kernel applies it at creation; the umask is never changed).
 * - A target that exists and is not a regular file (a character device, a FIFO) cannot be
 *   replaced atomically: it is opened and written in place, never created, truncated or
 *   removed. A directory is refused.
 * Nothing here prints, aborts, installs signal handlers or changes process state. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/io/io.h"

enum { OUT_OPEN = 0, OUT_WRITTEN = 1, OUT_FAILED = 2 };

struct vc_output {
    char *name;   /* the path as the caller gave it (messages) */
    char *target; /* the file replaced: name, or the final target of a symlink at name */
    char *tmp;    /* the temporary beside target; NULL when writing a non-regular file in place */
    FILE *f;
    int state;
};

/* Records "NAME: WHAT[ 'PATH']: strerror(err)"; PATH is left out when it is NAME. */
static vc_status out_fail(vc_context *ctx, const char *name, vc_status st, const char *what,
                          const char *path, int err)
{
    vc_io_src src = {ctx, name};
    int same = !path || strcmp(path, name) == 0;
    return vc_io_fail(&src, st, "%s%s%s%s: %s", what, same ? "" : " '", same ? "" : path,
                      same ? "" : "'", strerror(err));
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Length of the directory part of p, including its last '/' (0: no directory part). */
static size_t dir_len(const char *p)
{
    const char *slash = strrchr(p, '/');
    return slash ? (size_t)(slash - p) + 1 : 0;
}

/* The directory of p as a malloc'ed path ("." when p has none), without a trailing '/'. */
static char *dir_of(const char *p)
{
    size_t dl = dir_len(p);
    return dl ? dup_n(p, dl > 1 ? dl - 1 : dl) : dup_n(".", 1);
}

/* Follows symlinks from `path` to the file they finally name (which may not exist yet).
 * Returns a malloc'ed path, or NULL with *err set (ENOMEM, ELOOP, or readlink's error). */
static char *resolve_links(const char *path, int *err)
{
    char *cur = dup_n(path, strlen(path));
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
        if (hops == 40) {
            free(cur);
            *err = ELOOP;
            return NULL;
        }
        size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 256;
        char *link = malloc(cap);
        ssize_t n = link ? readlink(cur, link, cap) : -1;
        if (n < 0 || (size_t)n >= cap) { /* vanished, or changed under us: report it */
            *err = !link ? ENOMEM : n < 0 ? errno : EAGAIN;
            free(link);
            free(cur);
            return NULL;
        }
        size_t dl = link[0] == '/' ? 0 : dir_len(cur);
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, link, (size_t)n);
            next[dl + (size_t)n] = 0;
        }
        free(link);
        free(cur);
        cur = next;
    }
    *err = ENOMEM;
    return NULL;
}

/* Six characters for a temporary's name, from getrandom or, failing that, the clock, the
 * process id and the attempt number. */
static void temp_suffix(char *s, unsigned attempt)
{
    static const char AL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[6];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                     ((uint64_t)getpid() << 20) ^ ((uint64_t)attempt * 0x9E3779B97F4A7C15u);
        for (int i = 0; i < 6; i++, x = x * 6364136223846793005u + 1442695040888963407u)
            r[i] = (unsigned char)(x >> 56);
    }
    for (int i = 0; i < 6; i++) s[i] = AL[r[i] % (sizeof AL - 1)];
}

/* Creates the temporary ".BASE.XXXXXX" beside o->target (mode 0666 less the umask, or the
 * existing target's mode in `old`). Returns the fd, or -1 with errno set. */
static int create_temp(vc_output *o, const struct stat *old)
{
    size_t dl = dir_len(o->target), bl = strlen(o->target + dl);
    o->tmp = malloc(dl + bl + 9);
    if (!o->tmp) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(o->tmp, o->target, dl);
    o->tmp[dl] = '.';
    memcpy(o->tmp + dl + 1, o->target + dl, bl);
    o->tmp[dl + 1 + bl] = '.';
    o->tmp[dl + bl + 8] = 0;
    int fd = -1;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        temp_suffix(o->tmp + dl + bl + 2, attempt);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return -1;
    if (old) {
        /* Owner and group where we may set them (root, or a group we are in); the mode after,
         * as chown clears the set-id bits. */
        if (old->st_uid != geteuid() || old->st_gid != getegid())
            if (fchown(fd, old->st_uid, old->st_gid) != 0) (void)fchown(fd, (uid_t)-1, old->st_gid);
        if (fchmod(fd, old->st_mode & 07777) != 0) {
            int e = errno;
            close(fd);
            unlink(o->tmp);
            errno = e;
            return -1;
        }
    }
    return fd;
}

/* Opens o->target for writing: a temporary for a regular or new file, the target itself for
 * a device or FIFO. Records the failure on ctx. */
static vc_status open_target(vc_context *ctx, vc_output *o)
{
    struct stat st;
    int have = stat(o->target, &st) == 0;
    if (!have && errno != ENOENT)
        return out_fail(ctx, o->name, VC_ERR_IO, "not writable", o->target, errno);
    if (have && S_ISDIR(st.st_mode))
        return out_fail(ctx, o->name, VC_ERR_IO, "not writable", o->target, EISDIR);
    if (have && faccessat(AT_FDCWD, o->target, W_OK, AT_EACCESS) != 0)
        return out_fail(ctx, o->name, VC_ERR_IO, "not writable", o->target, errno);
    int fd;
    if (have && !S_ISREG(st.st_mode)) {
        fd = open(o->target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) return out_fail(ctx, o->name, VC_ERR_IO, "cannot open", o->target, errno);
    } else {
        fd = create_temp(o, have ? &st : NULL);
        if (fd < 0) {
            int e = errno;
            char *dir = dir_of(o->target);
            vc_status r = out_fail(ctx, o->name, VC_ERR_IO, "cannot create a temporary file in",
                                   dir ? dir : "?", e);
            free(dir);
            return r;
        }
    }
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        int e = errno;
        close(fd);
        if (o->tmp) unlink(o->tmp);
        return out_fail(ctx, o->name, VC_ERR_IO, "cannot open", o->target, e);
    }
    return VC_OK;
}

static void output_free(vc_output *o)
{
    if (!o) return;
    if (o->f) fclose(o->f);
    free(o->name);
    free(o->target);
    free(o->tmp);
    free(o);
}

vc_status vc_output_open(vc_context *ctx, const char *path, vc_output **out)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, path ? path : "(null)"};
    if (!path || !out || !*path)
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL or empty path, or NULL output");
    vc_output *o = calloc(1, sizeof *o);
    int err = ENOMEM;
    if (o) o->name = dup_n(path, strlen(path));
    if (o && o->name) o->target = resolve_links(path, &err);
    if (!o || !o->target) {
        output_free(o);
        return out_fail(ctx, path, err == ENOMEM ? VC_ERR_OUT_OF_MEMORY : VC_ERR_IO,
                        "cannot follow the link", path, err);
    }
    vc_status st = open_target(ctx, o);
    if (st != VC_OK) {
        output_free(o);
        return st;
    }
    *out = o;
    return VC_OK;
}

vc_status vc_output_temp_path(const vc_output *out, const char **path)
{
    if (!out || !path) return VC_ERR_INVALID_ARGUMENT;
    *path = out->tmp;
    return VC_OK;
}

vc_status vc_output_discard(vc_output *out)
{
    if (!out) return VC_OK;
    if (out->f) {
        fclose(out->f);
        out->f = NULL;
    }
    if (out->tmp) unlink(out->tmp);
    output_free(out);
    return VC_OK;
}

vc_status vc_output_publish(vc_context *ctx, vc_output *out)
{
    vc_io_begin(ctx);
    if (!out) {
        vc_io_src src = {ctx, "(null)"};
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL output");
    }
    vc_status st = VC_OK;
    if (out->state != OUT_WRITTEN) {
        vc_io_src src = {ctx, out->name};
        st = vc_io_fail(&src, out->state == OUT_FAILED ? VC_ERR_IO : VC_ERR_INVALID_ARGUMENT,
                        out->state == OUT_FAILED ? "not published: its write failed"
                                                 : "not published: nothing was written to it");
    } else if (out->tmp) {
        if (rename(out->tmp, out->target) != 0) {
            st = out_fail(ctx, out->name, VC_ERR_IO, "cannot rename the temporary over",
                          out->target, errno);
        } else {
            /* Make the rename durable; a directory that cannot be synced is not an error. */
            char *dir = dir_of(out->target);
            int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            if (dfd >= 0) {
                (void)fsync(dfd);
                close(dfd);
            }
            free(dir);
            free(out->tmp);
            out->tmp = NULL;
        }
    }
    vc_output_discard(out);
    return st;
}

/* ---- the internal writer (io.h) ------------------------------------------------------------ */

FILE *vc_io_output_file(vc_output *out) { return out && out->state == OUT_OPEN ? out->f : NULL; }
const char *vc_io_output_name(const vc_output *out) { return out ? out->name : "(null)"; }

vc_status vc_io_output_finish(vc_context *ctx, vc_output *out, vc_status st)
{
    if (!out->f) return out->state == OUT_WRITTEN ? VC_OK : VC_ERR_IO;
    vc_io_src src = {ctx, out->name};
    if (st == VC_OK && fflush(out->f) != 0)
        st = vc_io_fail(&src, VC_ERR_IO, "write failed: %s", strerror(errno));
    if (st == VC_OK && fsync(fileno(out->f)) != 0 && (out->tmp || (errno != EINVAL &&
                                                                  errno != ENOTSUP)))
        st = vc_io_fail(&src, VC_ERR_IO, "sync failed: %s", strerror(errno));
    int closed = fclose(out->f);
    out->f = NULL;
    if (st == VC_OK && closed != 0)
        st = vc_io_fail(&src, VC_ERR_IO, "close failed: %s", strerror(errno));
    out->state = st == VC_OK ? OUT_WRITTEN : OUT_FAILED;
    return st;
}

vc_status vc_output_write_bytes(vc_context *ctx, vc_output *out, const void *data, size_t size)
{
    vc_io_begin(ctx);
    vc_io_src src = {ctx, out ? out->name : "(null)"};
    if (!out || (!data && size))
        return vc_io_fail(&src, VC_ERR_INVALID_ARGUMENT, "NULL output or data");
    vc_io_writer w;
    vc_status st = vc_io_writer_attach(&w, ctx, out);
    if (st != VC_OK) return st;
    vc_io_writer_put(&w, data, size);
    return vc_io_writer_close(&w);
}
