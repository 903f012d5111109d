/*
 * net_bounds.c - the --bounds option of voxconv run and voxconv bench --model (graph mode,
 * docs/networks.md "Graph mode"): "N0[,N1,...]" bounds per level (a level without a number
 * takes the previous one's), or "auto[:MARGIN]": one per-call frame first, then each level's
 * rows (and the frame's points) times MARGIN (default 1.25), rounded up.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_parse_bounds(const char *cmd, const char *text, cli_bounds *b)
{
    memset(b, 0, sizeof *b);
    b->set = 1;
    b->margin = 1.25;
    if (!strncmp(text, "auto", 4) && (text[4] == '\0' || text[4] == ':')) {
        b->automatic = 1;
        if (text[4] == ':') {
            char *end = NULL;
            double m = strtod(text + 5, &end);
            if (!*(text + 5) || *end || !(m >= 1.0 && m <= 100.0))
                return cli_usage_error(cmd, "--bounds auto:MARGIN: MARGIN is a number in 1..100, "
                                       "got '%s'", text + 5);
            b->margin = m;
        }
        return CLI_OK;
    }
    const char *p = text;
    while (*p) {
        if (b->n == VC_NET_MAX_LEVELS)
            return cli_usage_error(cmd, "--bounds: at most %d levels", VC_NET_MAX_LEVELS);
        char num[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof num)
            return cli_usage_error(cmd, "--bounds: expected N0[,N1,...] or auto[:MARGIN], got "
                                   "'%s'", text);
        memcpy(num, p, len);
        num[len] = '\0';
        if (cli_parse_i64(cmd, "--bounds", num, 1, (int64_t)INT32_MAX - 1, &b->voxels[b->n]))
            return CLI_USAGE;
        b->n++;
        p += len;
        if (*p == ',' && !*++p)
            return cli_usage_error(cmd, "--bounds: a trailing comma in '%s'", text);
    }
    if (b->n == 0) return cli_usage_error(cmd, "--bounds: no value");
    return CLI_OK;
}

/* n x margin, rounded up, at least 1 (0 stays 0 only for points: none given). */
static int64_t grow(int64_t n, double margin)
{
    double v = ceil((double)n * margin);
    return v < 1 ? 1 : v > (double)(INT32_MAX - 1) ? (int64_t)INT32_MAX - 1 : (int64_t)v;
}

int cli_set_bounds(const char *cmd, vc_context *ctx, vc_net *net, const cli_bounds *b,
                   const vc_tensor *t, const vc_points *pts, int quiet)
{
    vc_net_bounds nb = VC_NET_BOUNDS_INIT;
    int32_t levels = 0;
    vc_net_level_count(net, &levels);
    if (levels > VC_NET_MAX_LEVELS) levels = VC_NET_MAX_LEVELS;
    vc_status st = VC_OK;
    if (b->automatic) {
        int64_t rows[VC_NET_MAX_LEVELS] = {0};
        st = t ? vc_net_run(net, t) : vc_net_run_points(net, pts);
        if (st == VC_OK) st = vc_net_level_rows(net, rows, levels);
        if (st != VC_OK)
            return cli_vc_error(cmd, ctx, st, "--bounds auto: the sample frame failed");
        for (int32_t l = 0; l < levels; l++) nb.max_voxels[l] = grow(rows[l], b->margin);
        if (pts) nb.max_points = grow(pts->count, b->margin);
    } else {
        for (int32_t l = 0; l < b->n; l++) nb.max_voxels[l] = b->voxels[l];
        if (pts) nb.max_points = pts->count > 0 ? pts->count : 1;
    }
    st = vc_net_set_bounds(net, &nb);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot set the bounds");
    vc_net_bounds_get(net, &nb);
    if (!quiet) {
        printf("%s: graph mode, bounds", cmd);
        for (int32_t l = 0; l < levels; l++)
            printf("%s%lld", l ? "," : " ", (long long)nb.max_voxels[l]);
        if (nb.max_points) printf(" voxels, %lld points\n", (long long)nb.max_points);
        else printf(" voxels\n");
    }
    return CLI_OK;
}
