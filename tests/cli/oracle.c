/*
 * oracle.c - an independent checker for the voxconv CLI tests (tests/cli/run_cli_tests.sh).
 *
 * Shares no code with the library: it has its own .npy reader, recomputes voxelization
 * directly from the points of a KITTI .bin, and recomputes sparse convolutions in double with a
 * brute-force neighbour search (sorted coordinates + binary search).
 *
 *   oracle shape VX,VY,VZ XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX
 *       prints the spatial shape "Z,Y,X" = round((max - min) / size)
 *   oracle voxelize CLOUD.bin VX,VY,VZ RANGE6 COORDS.npy FEATS.npy
 *       checks a voxelization with mean features over the 4 KITTI columns
 *   oracle conv subm|strided K S P D SHAPE IN.coords.npy IN.feats.npy W.npy OUT.coords.npy
 *               OUT.feats.npy
 *       checks one convolution (no bias, no activation); K, S, P, D and SHAPE are "A" or
 *       "Z,Y,X"
 *
 * Coordinates must be identical; features must satisfy ||out - ref|| / ||ref|| <= 1e-5.
 * Prints one line ("ok: ..." or "FAIL: ...") and exits 0 on success, 1 on a mismatch, 2 on a
 * usage or file error. Build: cc -O2 -std=c11 -o oracle oracle.c -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

typedef struct {
    char kind;       /* 'f' or 'i' */
    int size;        /* bytes per element */
    int ndim;
    long long shape[8];
    long long count; /* elements */
    void *data;
} npy;

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "oracle: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    exit(2);
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) die("out of memory", NULL);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    fclose(f);
    *size = n;
    return buf;
}

static npy load_npy(const char *path)
{
    size_t size;
    unsigned char *b = read_all(path, &size);
    npy a;
    memset(&a, 0, sizeof a);
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0) die("not a .npy file:", path);
    size_t hlen, hstart;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | ((size_t)b[9] << 8);
        hstart = 10;
    } else {
        if (size < 12) die("truncated .npy:", path);
        hlen = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
        hstart = 12;
    }
    if (hstart + hlen > size) die("truncated .npy header:", path);
    char *h = calloc(hlen + 1, 1);
    memcpy(h, b + hstart, hlen);
    char *d = strstr(h, "'descr'");
    if (!d) die("no descr in", path);
    d = strchr(d + 7, '\'');
    if (!d) die("bad descr in", path);
    if (d[1] != '<' && d[1] != '|') die("not little-endian:", path);
    a.kind = d[2];
    a.size = d[3] - '0';
    if (!((a.kind == 'f' && a.size == 4) || (a.kind == 'i' && a.size == 4)))
        die("only <f4 and <i4 are supported:", path);
    if (strstr(h, "'fortran_order': True")) die("fortran order:", path);
    char *s = strstr(h, "'shape'");
    if (!s) die("no shape in", path);
    s = strchr(s, '(');
    if (!s) die("bad shape in", path);
    s++;
    a.count = 1;
    while (*s && *s != ')') {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || a.ndim >= 8) die("bad shape in", path);
        a.shape[a.ndim++] = v;
        a.count *= v;
        s = end;
    }
    size_t bytes = (size_t)a.count * (size_t)a.size;
    if (hstart + hlen + bytes > size) die("truncated .npy data:", path);
    a.data = malloc(bytes ? bytes : 1);
    memcpy(a.data, b + hstart + hlen, bytes);
    free(h);
    free(b);
    return a;
}

static void parse_list(const char *text, int n, double *out, int allow_one)
{
    int k = 0;
    const char *p = text;
    while (*p && k < n) {
        char *end;
        out[k++] = strtod(p, &end);
        if (end == p) die("bad number list:", text);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') die("bad number list:", text);
    }
    if (k == 1 && allow_one) {
        for (int i = 1; i < n; i++) out[i] = out[0];
    } else if (k != n || *p) {
        die("wrong number of values in", text);
    }
}

static void parse_int3(const char *text, long long out[3])
{
    double v[3];
    parse_list(text, 3, v, 1);
    for (int i = 0; i < 3; i++) out[i] = (long long)v[i];
}

/* Coordinates as packed 64-bit keys: (b, z, y, x) each in 16 bits (b) or 16 bits (z, y, x). */
typedef struct {
    int32_t c[4];
} coord;

static int cmp_coord(const void *pa, const void *pb)
{
    const coord *a = pa, *b = pb;
    for (int i = 0; i < 4; i++)
        if (a->c[i] != b->c[i]) return a->c[i] < b->c[i] ? -1 : 1;
    return 0;
}

/* Row of `key` in sorted `set` (n rows), or -1. */
static long long find(const coord *set, const long long *rows, long long n, const coord *key)
{
    long long lo = 0, hi = n - 1;
    while (lo <= hi) {
        long long mid = lo + (hi - lo) / 2;
        int c = cmp_coord(&set[mid], key);
        if (c == 0) return rows ? rows[mid] : mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static long long shape_axis(float lo, float hi, float size)
{
    return (long long)lroundf((hi - lo) / size);
}

static int cmd_shape(char **argv)
{
    double vs[3], r[6];
    parse_list(argv[2], 3, vs, 0);
    parse_list(argv[3], 6, r, 0);
    long long s[3];
    for (int a = 0; a < 3; a++) s[a] = shape_axis((float)r[a], (float)r[a + 3], (float)vs[a]);
    printf("%lld,%lld,%lld\n", s[2], s[1], s[0]);
    return 0;
}

static int compare_coords(const npy *got, const coord *ref, long long n, const char *what)
{
    if (got->kind != 'i' || got->ndim != 2 || got->shape[1] != 4) {
        printf("FAIL: %s: coordinates are not int32 [N, 4]\n", what);
        return 1;
    }
    if (got->shape[0] != n) {
        printf("FAIL: %s: %lld voxels, expected %lld\n", what, got->shape[0], n);
        return 1;
    }
    const int32_t *g = got->data;
    for (long long i = 0; i < n; i++)
        for (int a = 0; a < 4; a++)
            if (g[i * 4 + a] != ref[i].c[a]) {
                printf("FAIL: %s: row %lld is (%d,%d,%d,%d), expected (%d,%d,%d,%d)\n", what, i,
                       g[i * 4], g[i * 4 + 1], g[i * 4 + 2], g[i * 4 + 3], ref[i].c[0],
                       ref[i].c[1], ref[i].c[2], ref[i].c[3]);
                return 1;
            }
    return 0;
}

static int compare_feats(const npy *got, const double *ref, long long n, long long c,
                         const char *what)
{
    if (got->kind != 'f' || got->ndim != 2 || got->shape[0] != n || got->shape[1] != c) {
        printf("FAIL: %s: features are not float32 [%lld, %lld]\n", what, n, c);
        return 1;
    }
    const float *g = got->data;
    double num = 0, den = 0;
    for (long long i = 0; i < n * c; i++) {
        if (!isfinite(g[i])) {
            printf("FAIL: %s: non-finite feature at row %lld\n", what, i / c);
            return 1;
        }
        double d = (double)g[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) {
        printf("FAIL: %s: the reference is all zero (bad test data)\n", what);
        return 1;
    }
    double rel = sqrt(num / den);
    if (!(rel <= TOL)) {
        printf("FAIL: %s: ||out-ref||/||ref|| = %.3g > %.0e\n", what, rel, TOL);
        return 1;
    }
    printf("ok: %s: %lld rows x %lld channels, ||out-ref||/||ref|| = %.3g\n", what, n, c, rel);
    return 0;
}

static int cmd_voxelize(char **argv)
{
    double vs[3], r[6];
    parse_list(argv[3], 3, vs, 0);
    parse_list(argv[4], 6, r, 0);
    size_t size;
    unsigned char *raw = read_all(argv[2], &size);
    if (size % 16) die("not a KITTI .bin (size not a multiple of 16):", argv[2]);
    long long np = (long long)(size / 16);
    float *pts = (float *)raw;
    float fmin[3], fsize[3];
    long long shape[3];
    for (int a = 0; a < 3; a++) {
        fmin[a] = (float)r[a];
        fsize[a] = (float)vs[a];
        shape[a] = shape_axis((float)r[a], (float)r[a + 3], (float)vs[a]);
    }
    /* (voxel, point) pairs sorted by voxel then point index. */
    typedef struct {
        coord v;
        long long p;
    } vp;
    vp *list = malloc(sizeof(vp) * (size_t)(np ? np : 1));
    long long m = 0;
    for (long long i = 0; i < np; i++) {
        const float *p = pts + i * 4;
        if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) continue;
        long long idx[3];
        int in = 1;
        for (int a = 0; a < 3; a++) {
            volatile float t = (p[a] - fmin[a]) / fsize[a];
            float f = floorf(t);
            if (!(f >= 0) || f >= (float)shape[a]) {
                in = 0;
                break;
            }
            idx[a] = (long long)f;
        }
        if (!in) continue;
        list[m].v.c[0] = 0;
        list[m].v.c[1] = (int32_t)idx[2];
        list[m].v.c[2] = (int32_t)idx[1];
        list[m].v.c[3] = (int32_t)idx[0];
        list[m].p = i;
        m++;
    }
    qsort(list, (size_t)m, sizeof(vp), cmp_coord); /* coord is the first member */
    coord *ref = malloc(sizeof(coord) * (size_t)(m ? m : 1));
    double *feat = calloc((size_t)(m ? m : 1) * 4, sizeof(double));
    long long nv = 0;
    for (long long i = 0; i < m;) {
        long long j = i;
        double sum[4] = {0, 0, 0, 0};
        while (j < m && cmp_coord(&list[j].v, &list[i].v) == 0) {
            for (int c = 0; c < 4; c++) sum[c] += pts[list[j].p * 4 + c];
            j++;
        }
        ref[nv] = list[i].v;
        for (int c = 0; c < 4; c++) feat[nv * 4 + c] = sum[c] / (double)(j - i);
        nv++;
        i = j;
    }
    npy gc = load_npy(argv[5]), gf = load_npy(argv[6]);
    if (compare_coords(&gc, ref, nv, "voxelize coords")) return 1;
    return compare_feats(&gf, feat, nv, 4, "voxelize feats");
}

static int cmd_conv(char **argv)
{
    const char *type = argv[2];
    int subm = strcmp(type, "subm") == 0;
    if (!subm && strcmp(type, "strided") != 0) die("type must be subm or strided, got", type);
    long long k[3], s[3], p[3], d[3], shape[3];
    parse_int3(argv[3], k);
    parse_int3(argv[4], s);
    parse_int3(argv[5], p);
    parse_int3(argv[6], d);
    parse_int3(argv[7], shape);
    npy ic = load_npy(argv[8]), inf = load_npy(argv[9]), w = load_npy(argv[10]);
    npy oc = load_npy(argv[11]), of = load_npy(argv[12]);
    if (ic.kind != 'i' || ic.ndim != 2 || ic.shape[1] != 4) die("bad input coords", argv[8]);
    long long n = ic.shape[0];
    if (inf.kind != 'f' || inf.ndim != 2 || inf.shape[0] != n) die("bad input feats", argv[9]);
    long long cin = inf.shape[1];
    long long kvol = k[0] * k[1] * k[2];
    if (w.kind != 'f' || w.ndim != 5 || w.shape[1] != k[0] || w.shape[2] != k[1] ||
        w.shape[3] != k[2] || w.shape[4] != cin)
        die("weights are not float32 [C_out, kz, ky, kx, C_in]:", argv[10]);
    long long cout = w.shape[0];
    const float *W = w.data, *X = inf.data;

    /* Sorted input set with its original rows. */
    coord *in_sorted = malloc(sizeof(coord) * (size_t)(n ? n : 1));
    long long *in_rows = malloc(sizeof(long long) * (size_t)(n ? n : 1));
    {
        typedef struct {
            coord c;
            long long row;
        } cr;
        cr *t = malloc(sizeof(cr) * (size_t)(n ? n : 1));
        for (long long i = 0; i < n; i++) {
            memcpy(t[i].c.c, (int32_t *)ic.data + i * 4, sizeof(coord));
            t[i].row = i;
        }
        qsort(t, (size_t)n, sizeof(cr), cmp_coord);
        for (long long i = 0; i < n; i++) {
            in_sorted[i] = t[i].c;
            in_rows[i] = t[i].row;
            if (i && cmp_coord(&in_sorted[i], &in_sorted[i - 1]) == 0)
                die("duplicate input coordinates in", argv[8]);
        }
        free(t);
    }
    /* Reference output coordinates. */
    coord *out;
    long long nout = 0;
    long long oshape[3];
    if (subm) {
        out = malloc(sizeof(coord) * (size_t)(n ? n : 1));
        memcpy(out, ic.data, sizeof(coord) * (size_t)n);
        nout = n;
        for (int a = 0; a < 3; a++) oshape[a] = shape[a];
    } else {
        for (int a = 0; a < 3; a++)
            oshape[a] = (shape[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) / s[a] + 1;
        out = malloc(sizeof(coord) * (size_t)(n * kvol > 0 ? n * kvol : 1));
        for (long long i = 0; i < n; i++) {
            const int32_t *q = (int32_t *)ic.data + i * 4;
            for (long long kz = 0; kz < k[0]; kz++)
                for (long long ky = 0; ky < k[1]; ky++)
                    for (long long kx = 0; kx < k[2]; kx++) {
                        long long kk[3] = {kz, ky, kx}, o[3];
                        int ok = 1;
                        for (int a = 0; a < 3 && ok; a++) {
                            long long t = q[a + 1] + p[a] - kk[a] * d[a];
                            if (t < 0 || t % s[a]) ok = 0;
                            else if ((o[a] = t / s[a]) >= oshape[a]) ok = 0;
                        }
                        if (!ok) continue;
                        coord c = {{q[0], (int32_t)o[0], (int32_t)o[1], (int32_t)o[2]}};
                        out[nout++] = c;
                    }
        }
        qsort(out, (size_t)nout, sizeof(coord), cmp_coord);
        long long u = 0;
        for (long long i = 0; i < nout; i++)
            if (u == 0 || cmp_coord(&out[i], &out[u - 1]) != 0) out[u++] = out[i];
        nout = u;
    }
    char what[64];
    snprintf(what, sizeof what, "conv %s coords", type);
    if (compare_coords(&oc, out, nout, what)) return 1;
    /* Reference features in double. */
    double *ref = calloc((size_t)(nout * cout > 0 ? nout * cout : 1), sizeof(double));
    for (long long i = 0; i < nout; i++) {
        for (long long kz = 0; kz < k[0]; kz++)
            for (long long ky = 0; ky < k[1]; ky++)
                for (long long kx = 0; kx < k[2]; kx++) {
                    long long kk[3] = {kz, ky, kx};
                    coord q;
                    q.c[0] = out[i].c[0];
                    for (int a = 0; a < 3; a++) {
                        long long v = subm ? out[i].c[a + 1] + (kk[a] - k[a] / 2) * d[a]
                                           : out[i].c[a + 1] * s[a] - p[a] + kk[a] * d[a];
                        q.c[a + 1] = (int32_t)v;
                    }
                    long long row = find(in_sorted, in_rows, n, &q);
                    if (row < 0) continue;
                    long long koff = (kz * k[1] + ky) * k[2] + kx;
                    for (long long co = 0; co < cout; co++) {
                        double acc = 0;
                        const float *wr = W + (co * kvol + koff) * cin;
                        for (long long ci = 0; ci < cin; ci++)
                            acc += (double)X[row * cin + ci] * (double)wr[ci];
                        ref[i * cout + co] += acc;
                    }
                }
    }
    snprintf(what, sizeof what, "conv %s feats", type);
    return compare_feats(&of, ref, nout, cout, what);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "shape") == 0) return cmd_shape(argv);
    if (argc == 7 && strcmp(argv[1], "voxelize") == 0) return cmd_voxelize(argv);
    if (argc == 13 && strcmp(argv[1], "conv") == 0) return cmd_conv(argv);
    fprintf(stderr, "usage: oracle shape VS RANGE | voxelize CLOUD VS RANGE COORDS FEATS |\n"
                    "       conv TYPE K S P D SHAPE INC INF W OUTC OUTF\n");
    return 2;
}
