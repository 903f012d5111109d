/*
 * layers.c - layer specs and layer suites (layers.h).
 */
#include "layers.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const CLI_LAYER_TYPES[] = {"subm",       "strided", "downsample", "inverse",
                                       "transposed", "maxpool", "avgpool",    NULL};

static int fail(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* "N" or "Z,Y,X", each in [lo, hi]; 0 or -1. */
static int parse_triple(const char *s, long lo, long hi, int32_t v[3])
{
    long x[3];
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        if (n == 3 || *p < '0' || *p > '9') return -1; /* no sign, no blank */
        x[n] = strtol(p, &end, 10);
        if (errno || end == p || x[n] < lo || x[n] > hi) return -1;
        n++;
        if (*end == '\0') break;
        if (*end != ',') return -1;
        p = end + 1;
    }
    if (n != 1 && n != 3) return -1;
    for (int a = 0; a < 3; a++) v[a] = (int32_t)(n == 1 ? x[0] : x[a]);
    return 0;
}

static int parse_channels(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') return -1;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 1 || v > CLI_LAYER_MAX_CHANNELS) return -1;
    *out = v;
    return 0;
}

/* The type's rules over the parsed fields. */
static int check_layer(const cli_layer *l, char *err, size_t errlen)
{
    const char *t = CLI_LAYER_TYPES[l->type];
    for (int a = 0; a < 3; a++) {
        if (l->type == CLI_LAYER_SUBM && l->kernel[a] % 2 == 0)
            return fail(err, errlen, "subm needs odd kernel sizes, got %d", (int)l->kernel[a]);
        if (l->type == CLI_LAYER_SUBM && l->stride[a] != 1)
            return fail(err, errlen, "subm needs stride 1, got %d", (int)l->stride[a]);
        if ((l->type == CLI_LAYER_DOWNSAMPLE || cli_layer_is_pool(l)) && l->padding[a] != 0)
            return fail(err, errlen, "%s needs padding 0, got %d", t, (int)l->padding[a]);
    }
    if (cli_layer_is_pool(l) && l->cin != l->cout)
        return fail(err, errlen, "%s keeps the channels: cin %lld != cout %lld", t,
                    (long long)l->cin, (long long)l->cout);
    return 0;
}

int cli_layer_parse(const char *text, int with_name, const int32_t default_dilation[3],
                    cli_layer *out, char *err, size_t errlen)
{
    static const char *const field_names[] = {"NAME", "TYPE", "K", "S", "P", "CIN", "COUT", "D"};
    char buf[512], *tok[9];
    int n = 0;
    memset(out, 0, sizeof *out);
    out->forward = -1;
    if (strlen(text) >= sizeof buf) return fail(err, errlen, "layer spec too long");
    strcpy(buf, text);
    for (char *p = strtok(buf, " \t\r\n"); p; p = strtok(NULL, " \t\r\n")) {
        if (n == 9) return fail(err, errlen, "too many fields in '%s'", text);
        tok[n++] = p;
    }
    const int base = with_name ? 1 : 0, need = base + 6;
    if (n < need || n > need + 1)
        return fail(err, errlen, "expected \"%sTYPE K S P CIN COUT [D]\", got '%s'",
                    with_name ? "NAME " : "", text);
    if (with_name) snprintf(out->name, sizeof out->name, "%s", tok[0]);
    int t = -1;
    for (int i = 0; CLI_LAYER_TYPES[i]; i++)
        if (!strcmp(tok[base], CLI_LAYER_TYPES[i])) t = i;
    if (t < 0)
        return fail(err, errlen, "unknown layer type '%s' (subm, strided, downsample, inverse, "
                    "transposed, maxpool, avgpool)", tok[base]);
    out->type = (cli_layer_type)t;
    int bad = -1;
    if (parse_triple(tok[base + 1], 1, CLI_LAYER_MAX_KERNEL, out->kernel)) bad = 2;
    else if (parse_triple(tok[base + 2], 1, CLI_LAYER_MAX_STRIDE, out->stride)) bad = 3;
    else if (parse_triple(tok[base + 3], 0, CLI_LAYER_MAX_STRIDE, out->padding)) bad = 4;
    else if (parse_channels(tok[base + 4], &out->cin)) bad = 5;
    else if (parse_channels(tok[base + 5], &out->cout)) bad = 6;
    else if (n == need + 1 && parse_triple(tok[base + 6], 1, CLI_LAYER_MAX_STRIDE, out->dilation))
        bad = 7;
    if (bad >= 0) {
        static const char *const ranges[] = {"", "", "1..7, one number or z,y,x",
                                             "1..64, one number or z,y,x",
                                             "0..64, one number or z,y,x", "1..1048576",
                                             "1..1048576", "1..64, one number or z,y,x"};
        return fail(err, errlen, "%s: expected %s, got '%s'", field_names[bad], ranges[bad],
                    tok[base + bad - 1]);
    }
    if (n == need)
        for (int a = 0; a < 3; a++) out->dilation[a] = default_dilation ? default_dilation[a] : 1;
    return check_layer(out, err, errlen);
}

static void format_triple(const int32_t v[3], char *buf, size_t len)
{
    if (v[0] == v[1] && v[1] == v[2]) snprintf(buf, len, "%d", (int)v[0]);
    else snprintf(buf, len, "%d,%d,%d", (int)v[0], (int)v[1], (int)v[2]);
}

void cli_layer_format(const cli_layer *l, char *buf, size_t len)
{
    char k[24], s[24], p[24], d[24];
    format_triple(l->kernel, k, sizeof k);
    format_triple(l->stride, s, sizeof s);
    format_triple(l->padding, p, sizeof p);
    format_triple(l->dilation, d, sizeof d);
    int dil = l->dilation[0] != 1 || l->dilation[1] != 1 || l->dilation[2] != 1;
    snprintf(buf, len, "%s %s %s %s %lld %lld%s%s", CLI_LAYER_TYPES[l->type], k, s, p,
             (long long)l->cin, (long long)l->cout, dil ? " d" : "", dil ? d : "");
}

int cli_suite_add(cli_suite *s, const cli_layer *l, char *err, size_t errlen)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        cli_layer *p = realloc(s->layers, (size_t)cap * sizeof *p);
        if (!p) return fail(err, errlen, "out of memory");
        s->layers = p;
        s->cap = cap;
    }
    cli_layer *d = &s->layers[s->n];
    *d = *l;
    if (!d->name[0]) snprintf(d->name, sizeof d->name, "L%d", s->n);
    s->n++;
    return 0;
}

int cli_suite_parse(const char *text, const char *source, cli_suite *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", source);
    int line = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        char buf[512];
        line++;
        if (len >= sizeof buf) {
            cli_suite_free(out);
            return fail(err, errlen, "%s line %d: line too long", source, line);
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        p += len + (p[len] == '\n');
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        if (buf[strspn(buf, " \t\r")] == '\0') continue;
        cli_layer l;
        char why[400];
        if (cli_layer_parse(buf, 1, NULL, &l, why, sizeof why) ||
            cli_suite_add(out, &l, why, sizeof why)) {
            cli_suite_free(out);
            return fail(err, errlen, "%s line %d: %s", source, line, why);
        }
    }
    if (out->n == 0) return fail(err, errlen, "%s: no layers", source);
    if (cli_suite_resolve(out, err, errlen)) {
        cli_suite_free(out);
        return -1;
    }
    return 0;
}

int cli_suite_read(const char *path, cli_suite *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    /* suites are a few kilobytes; a larger file is not one */
    enum { MAX_SUITE_BYTES = 1 << 20 };
    char *text = malloc(MAX_SUITE_BYTES + 1);
    size_t n = text ? fread(text, 1, MAX_SUITE_BYTES + 1, f) : 0;
    int rd_err = ferror(f);
    fclose(f);
    if (!text) return fail(err, errlen, "out of memory");
    if (rd_err || n > MAX_SUITE_BYTES || memchr(text, 0, n)) {
        free(text);
        return fail(err, errlen, "'%s' is not a layer suite (%s)", path,
                    rd_err ? "read error" : n > MAX_SUITE_BYTES ? "over 1 MiB" : "binary");
    }
    text[n] = 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int rc = cli_suite_parse(text, path, out, err, errlen);
    free(text);
    if (rc == 0) {
        size_t bl = strlen(base);
        if (bl > 4 && !strcmp(base + bl - 4, ".txt")) bl -= 4;
        snprintf(out->name, sizeof out->name, "%.*s", (int)bl, base);
    }
    return rc;
}

int cli_suite_resolve(cli_suite *s, char *err, size_t errlen)
{
    int *stack = malloc(sizeof(int) * (size_t)(s->n > 0 ? s->n : 1));
    if (!stack) return fail(err, errlen, "out of memory");
    int sp = 0, cur = 0, levels = 1;
    for (int i = 0; i < s->n; i++) {
        cli_layer *l = &s->layers[i];
        l->in_level = cur;
        l->forward = -1;
        if (l->type == CLI_LAYER_SUBM) {
            l->out_level = cur;
        } else if (l->type == CLI_LAYER_INVERSE) {
            if (sp == 0) {
                free(stack);
                return fail(err, errlen, "layer %s: inverse with no strided, downsample or "
                            "pool layer before it left to invert", l->name);
            }
            const cli_layer *f = &s->layers[stack[--sp]];
            if (memcmp(f->kernel, l->kernel, sizeof l->kernel) ||
                memcmp(f->stride, l->stride, sizeof l->stride) ||
                memcmp(f->padding, l->padding, sizeof l->padding)) {
                free(stack);
                return fail(err, errlen, "layer %s: an inverse repeats the kernel, stride and "
                            "padding of the layer it inverts (%s)", l->name, f->name);
            }
            if (f->out_level != cur) {
                free(stack);
                return fail(err, errlen, "layer %s: inverts %s, whose output level the layers "
                            "before it have left", l->name, f->name);
            }
            l->forward = stack[sp];
            l->out_level = f->in_level;
        } else {
            l->out_level = levels++;
            if (l->type != CLI_LAYER_TRANSPOSED) stack[sp++] = i;
        }
        cur = l->out_level;
    }
    s->n_levels = levels;
    free(stack);
    return 0;
}

void cli_suite_free(cli_suite *s)
{
    free(s->layers);
    memset(s, 0, sizeof *s);
}
