/*
 * args.c - option parsing and value parsing of the voxconv CLI, and its error reporting.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void vprint_error(const char *cmd, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* One line, whatever the message holds. */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "voxconv%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "", buf);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_error(cmd, fmt, ap);
    va_end(ap);
    return CLI_USAGE;
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint_error(cmd, fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

int cli_vc_error(const char *cmd, const vc_context *ctx, vc_status st, const char *what)
{
    const char *full = vc_status_string(st);
    char name[64];
    size_t n = strcspn(full, ":");
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, full, n);
    name[n] = '\0';
    const char *detail = vc_context_last_error(ctx);
    if (!detail || !*detail) detail = full;
    /* The library's message may already start with the status name; do not repeat it. */
    if (strncmp(detail, name, n) == 0 && detail[n] == ':')
        return cli_error(cmd, "%s: %s", what, detail);
    return cli_error(cmd, "%s: %s [%s]", what, detail, name);
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int nopts,
              const char **pos, int max_pos, int *npos, int *help)
{
    int only_pos = 0;
    *npos = 0;
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            *help = 1;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] != '\0') {
            size_t len = strcspn(a, "=");
            const cli_opt *o = NULL;
            for (int k = 0; k < nopts; k++) {
                if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0) {
                    o = &opts[k];
                    break;
                }
            }
            if (!o)
                return cli_usage_error(cmd, "unknown option '%.*s' (see voxconv %s --help)",
                                       (int)len, a, cmd);
            if (!o->value) {
                if (a[len] == '=')
                    return cli_usage_error(cmd, "%s takes no value", o->name);
                *o->flag = 1;
                continue;
            }
            if (a[len] == '=') {
                *o->value = a + len + 1;
            } else {
                if (i + 1 >= argc)
                    return cli_usage_error(cmd, "%s: missing value", o->name);
                *o->value = argv[++i];
            }
            continue;
        }
        if (*npos >= max_pos)
            return cli_usage_error(cmd, "unexpected argument '%s' (see voxconv %s --help)", a,
                                   cmd);
        pos[(*npos)++] = a;
    }
    return CLI_OK;
}

/* Splits `text` at commas into at most `max` fields; returns the count, -1 on too many. */
static int split_commas(const char *text, char fields[][64], int max)
{
    int n = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (n >= max || len >= 64) return -1;
        memcpy(fields[n], p, len);
        fields[n][len] = '\0';
        n++;
        if (p[len] == '\0') break;
        p += len + 1;
    }
    return n;
}

static int parse_long(const char *s, long long *out)
{
    char *end;
    errno = 0;
    if (!*s) return 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

int cli_parse_int3(const char *cmd, const char *flag, const char *text, int lo, int hi,
                   const char *what, int32_t out[3])
{
    char f[4][64];
    int n = split_commas(text, f, 4);
    long long v[3];
    int ok = (n == 1 || n == 3);
    for (int i = 0; ok && i < n; i++)
        ok = parse_long(f[i], &v[i]) && v[i] >= lo && v[i] <= hi;
    if (!ok)
        return cli_usage_error(cmd, "%s: expected %s with %d..%d, got '%s'", flag, what, lo, hi,
                               text);
    for (int i = 0; i < 3; i++) out[i] = (int32_t)(n == 1 ? v[0] : v[i]);
    return CLI_OK;
}

int cli_parse_int_list(const char *cmd, const char *flag, const char *text, int32_t lo,
                       int32_t hi, int max, int32_t **out, int *n)
{
    int count = 1;
    for (const char *c = text; *c; c++) count += *c == ',';
    int32_t *v = count <= max ? malloc((size_t)count * sizeof *v) : NULL;
    int ok = v != NULL;
    const char *p = text;
    for (int i = 0; ok && i < count; i++) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        ok = end != p && !errno && (*end == ',' || *end == '\0') && x >= lo && x <= hi;
        v[i] = (int32_t)x;
        p = end + 1;
    }
    if (!ok) {
        free(v);
        return cli_usage_error(cmd, "%s: expected at most %d comma-separated integers in %d..%d, "
                               "got '%s'", flag, max, (int)lo, (int)hi, text);
    }
    *out = v;
    *n = count;
    return CLI_OK;
}

static int parse_float_text(const char *s, float *out)
{
    char *end;
    if (!*s) return 0;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || fabs(v) > 3.0e38) return 0;
    *out = (float)v;
    return 1;
}

int cli_parse_floats(const char *cmd, const char *flag, const char *text, int n, float *out)
{
    char f[8][64];
    int got = split_commas(text, f, 8);
    int ok = got == n;
    for (int i = 0; ok && i < n; i++) ok = parse_float_text(f[i], &out[i]);
    if (!ok)
        return cli_usage_error(cmd, "%s: expected %d comma-separated numbers, got '%s'", flag, n,
                               text);
    return CLI_OK;
}

int cli_parse_float(const char *cmd, const char *flag, const char *text, float *out)
{
    if (!parse_float_text(text, out))
        return cli_usage_error(cmd, "%s: expected a number, got '%s'", flag, text);
    return CLI_OK;
}

int cli_parse_i64(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi,
                  int64_t *out)
{
    long long v;
    if (!parse_long(text, &v) || v < lo || v > hi)
        return cli_usage_error(cmd, "%s: expected an integer in %lld..%lld, got '%s'", flag,
                               (long long)lo, (long long)hi, text);
    *out = (int64_t)v;
    return CLI_OK;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*text || *text == '-')
        return cli_usage_error(cmd, "%s: expected a non-negative integer, got '%s'", flag, text);
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || *end)
        return cli_usage_error(cmd, "%s: expected a non-negative integer, got '%s'", flag, text);
    *out = (uint64_t)v;
    return CLI_OK;
}

int cli_parse_choice(const char *cmd, const char *flag, const char *text,
                     const char *const *names, int *out)
{
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(text, names[i]) == 0) {
            *out = i;
            return CLI_OK;
        }
        if (i) strncat(list, "|", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
    }
    return cli_usage_error(cmd, "%s: expected %s, got '%s'", flag, list, text);
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}
