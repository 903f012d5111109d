/*
 * bench_plot.c - the SVG charts of voxconv bench (bench.h): one horizontal bar per layer (the
 * median, a whisker from p10 to p90, the floor as a red tick), one run or two side by side
 * with the ratio of their medians; the second form reads two JSON results with cJSON. SVG is
 * written by hand: a chart is a few hundred elements.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "bench.h"

typedef struct plot_row {
    char label[128];
    double med[2], p10[2], p90[2];
    double floor; /* 0: none */
} plot_row;

typedef struct plot {
    char title[256];
    char series[2][256]; /* the legend of each run */
    char foot[3][320];
    int nseries;
    plot_row *rows;
    int n;
} plot;

static const char *const COLOURS[2] = {"#4e79a7", "#f28e2b"};

/* Text with &, <, > and " escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* A round tick step for an axis up to xmax: 1, 2 or 5 times a power of ten, 4..10 ticks. */
static double tick_step(double xmax)
{
    double raw = xmax / 6.0, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return p * (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0);
}

static void draw_axis(FILE *f, double x0, double x1, double y0, double y1, double xmax)
{
    const double step = tick_step(xmax);
    for (double v = 0; v <= xmax * 1.0001; v += step) {
        double x = x0 + (x1 - x0) * v / xmax;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                y0, x, y1);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"t\">%g</text>\n",
                x, y1 + 14, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"t\">ms</text>\n",
            (x0 + x1) / 2, y1 + 30);
}

static void draw_row(FILE *f, const plot *p, const plot_row *r, double y, double rh, double x0,
                     double x1, double xmax)
{
    const double sx = (x1 - x0) / xmax;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" class=\"t\">", x0 - 6,
            y + rh * p->nseries / 2 + 4);
    xml_text(f, r->label);
    fprintf(f, "</text>\n");
    for (int s = 0; s < p->nseries; s++) {
        const double yy = y + s * rh;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                "<title>%.4f ms (p10 %.4f, p90 %.4f)</title></rect>\n", x0, yy + 2,
                r->med[s] * sx, rh - 4, COLOURS[s], r->med[s], r->p10[s], r->p90[s]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                x0 + r->p10[s] * sx, yy + rh / 2, x0 + r->p90[s] * sx, yy + rh / 2);
    }
    if (p->nseries == 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"t\" fill=\"#555\">%.3g</text>\n",
                x0 + fmax(r->med[0], r->p90[0]) * sx + 4, y + rh / 2 + 4, r->med[0]);
    if (r->floor > 0)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e15759\" "
                "stroke-width=\"2\"><title>floor %.4f ms</title></line>\n", x0 + r->floor * sx,
                y, x0 + r->floor * sx, y + rh * p->nseries, r->floor);
    if (p->nseries == 2 && r->med[0] > 0) {
        const double q = r->med[1] / r->med[0];
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"t\" fill=\"%s\">%.2fx</text>\n", x1 + 10,
                y + rh + 4, q < 0.97 ? "#2a7d2a" : q > 1.03 ? "#c0392b" : "#333", q);
    }
}

static void draw(FILE *f, const plot *p)
{
    const double rh = p->nseries == 2 ? 11 : 16, gap = 5, W = 1100, x0 = 330;
    const double x1 = W - (p->nseries == 2 ? 90 : 30), top = 92;
    const double y1 = top + p->n * (rh * p->nseries + gap);
    const double H = y1 + 50 + 18 * 3;
    double xmax = 0;
    for (int i = 0; i < p->n; i++) {
        for (int s = 0; s < p->nseries; s++) xmax = fmax(xmax, p->rows[i].p90[s]);
        xmax = fmax(xmax, p->rows[i].floor);
    }
    xmax = xmax > 0 ? xmax * 1.05 : 1.0;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n<style>.t{font-size:11px}"
            " .h{font-size:15px;font-weight:bold}</style>\n<rect width=\"100%%\" "
            "height=\"100%%\" fill=\"white\"/>\n<text x=\"12\" y=\"22\" class=\"h\">", W, H, W, H);
    xml_text(f, p->title);
    fprintf(f, "</text>\n");
    for (int s = 0; s < p->nseries; s++) {
        fprintf(f, "<rect x=\"12\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text "
                "x=\"30\" y=\"%d\" class=\"t\">", 34 + 16 * s, COLOURS[s], 43 + 16 * s);
        xml_text(f, p->series[s]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "<line x1=\"12\" y1=\"%d\" x2=\"24\" y2=\"%d\" stroke=\"#e15759\" "
            "stroke-width=\"2\"/><text x=\"30\" y=\"%d\" class=\"t\">floor (docs/benchmarks.md)"
            "; whiskers p10..p90%s</text>\n", 39 + 16 * p->nseries, 39 + 16 * p->nseries,
            43 + 16 * p->nseries, p->nseries == 2 ? "; right: median B / A" : "");
    draw_axis(f, x0, x1, top - 4, y1, xmax);
    for (int i = 0; i < p->n; i++) {
        const double y = top + i * (rh * p->nseries + gap);
        if (i % 2)
            fprintf(f, "<rect x=\"8\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"#f4f4f4\"/>"
                    "\n", y - gap / 2, W - 16, rh * p->nseries + gap);
        draw_row(f, p, &p->rows[i], y, rh, x0, x1, xmax);
    }
    for (int k = 0; k < 3; k++) {
        if (!p->foot[k][0]) continue;
        fprintf(f, "<text x=\"12\" y=\"%.1f\" class=\"t\">", y1 + 50 + 18 * k);
        xml_text(f, p->foot[k]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
}

void bench_write_svg(FILE *f, const bench_run *r)
{
    plot p;
    memset(&p, 0, sizeof p);
    p.nseries = 1;
    p.n = r->suite->n;
    p.rows = calloc((size_t)p.n, sizeof *p.rows);
    if (!p.rows) return;
    snprintf(p.title, sizeof p.title, "voxconv bench: %s on %s (%lld %s)", r->suite->name,
             r->scene, (long long)r->voxels, r->model && r->shape[0] == 0 ? "points" : "voxels");
    snprintf(p.series[0], sizeof p.series[0], "%s (%s), %s, algo %s, median of %d runs%s",
             r->device, r->backend, r->dtype, r->algo, r->runs,
             r->flush ? ", caches flushed" : "");
    for (int i = 0; i < p.n; i++) {
        const cli_layer *l = &r->suite->layers[i];
        const bench_layer *b = &r->layers[i];
        plot_row *row = &p.rows[i];
        char spec[96];
        if (r->model) snprintf(spec, sizeof spec, "%s", b->plan.config); /* the step's op */
        else cli_layer_format(l, spec, sizeof spec);
        snprintf(row->label, sizeof row->label, "%s  %s", l->name, spec);
        row->med[0] = b->t.median;
        row->p10[0] = b->t.p10;
        row->p90[0] = b->t.p90;
        row->floor = b->floor.ms;
    }
    snprintf(p.foot[0], sizeof p.foot[0], "sum of %s medians %.4f ms; %s %.4f ms; map builds "
             "%.4f ms", r->model ? "step" : "layer", r->sum_ms,
             r->model ? "frame (unprofiled)" : "back to back", r->network.median, r->sum_maps_ms);
    draw(f, &p);
    free(p.rows);
}

/* ---- --compare ---------------------------------------------------------------------------- */

static char *read_small(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    enum { MAX_RESULT = 64 << 20 };
    char *t = malloc(MAX_RESULT + 1);
    size_t n = t ? fread(t, 1, MAX_RESULT + 1, f) : 0;
    int bad = ferror(f) || n > MAX_RESULT;
    fclose(f);
    if (!t || bad) {
        free(t);
        snprintf(err, errlen, "cannot read '%s': %s", path, !t ? "out of memory"
                 : n > MAX_RESULT ? "over 64 MiB" : "read error");
        return NULL;
    }
    t[n] = 0;
    return t;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : "?";
}

/* A result file's document and its layer array; NULL with a message in err. */
static cJSON *load_result(const char *path, const cJSON **layers, char *err, size_t errlen)
{
    char *text = read_small(path, err, errlen);
    if (!text) return NULL;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    *layers = doc ? cJSON_GetObjectItemCaseSensitive(doc, "layers") : NULL;
    const cJSON *total = doc ? cJSON_GetObjectItemCaseSensitive(doc, "total") : NULL;
    if (!cJSON_IsArray(*layers) || !cJSON_IsObject(total)) {
        snprintf(err, errlen, "'%s' is not a voxconv bench JSON result (%s)", path,
                 doc ? "no \"layers\" array or \"total\" object" : "not JSON");
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* The rows of A and B, layer by layer; -1 with a message when they time different layers. */
static int compare_rows(const cJSON *la, const cJSON *lb, plot *p, char *err, size_t errlen)
{
    p->n = cJSON_GetArraySize(la);
    if (p->n != cJSON_GetArraySize(lb) || p->n == 0) {
        snprintf(err, errlen, "the results time different layers (%d and %d)", p->n,
                 cJSON_GetArraySize(lb));
        return -1;
    }
    p->rows = calloc((size_t)p->n, sizeof *p->rows);
    if (!p->rows) return snprintf(err, errlen, "out of memory"), -1;
    for (int i = 0; i < p->n; i++) {
        const cJSON *x[2] = {cJSON_GetArrayItem(la, i), cJSON_GetArrayItem(lb, i)};
        if (strcmp(str(x[0], "name"), str(x[1], "name")) ||
            num(x[0], "cin") != num(x[1], "cin") || num(x[0], "cout") != num(x[1], "cout")) {
            snprintf(err, errlen, "the results time different layers (layer %d: %s %g->%g and "
                     "%s %g->%g)", i, str(x[0], "name"), num(x[0], "cin"), num(x[0], "cout"),
                     str(x[1], "name"), num(x[1], "cin"), num(x[1], "cout"));
            return -1;
        }
        plot_row *r = &p->rows[i];
        snprintf(r->label, sizeof r->label, "%s  %s %g->%g", str(x[0], "name"),
                 str(x[0], "type"), num(x[0], "cin"), num(x[0], "cout"));
        for (int s = 0; s < 2; s++) {
            r->med[s] = num(x[s], "median_ms");
            r->p10[s] = num(x[s], "p10_ms");
            r->p90[s] = num(x[s], "p90_ms");
        }
        r->floor = num(x[0], "floor_ms");
    }
    return 0;
}

/* Titles, legends and the totals' line of the comparison. */
static void compare_text(plot *p, const cJSON *doc[2], const char *path[2])
{
    const char *what = cJSON_GetObjectItemCaseSensitive(doc[0], "model") ? "model" : "suite";
    snprintf(p->title, sizeof p->title, "voxconv bench: %s, A against B", str(doc[0], what));
    double sum[2], net[2], lg = 0;
    for (int s = 0; s < 2; s++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc[s], "total");
        sum[s] = num(t, "sum_median_ms");
        net[s] = num(t, "network_median_ms");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(doc[s], "scene");
        snprintf(p->series[s], sizeof p->series[s], "%c: %s - %s (%s), %s, algo %s, %s", 'A' + s,
                 path[s], str(doc[s], "device"), str(doc[s], "backend"), str(doc[s], "dtype"),
                 str(doc[s], "algo"), str(sc, "source"));
    }
    int nr = 0;
    for (int i = 0; i < p->n; i++)
        if (p->rows[i].med[0] > 0 && p->rows[i].med[1] > 0)
            lg += log(p->rows[i].med[1] / p->rows[i].med[0]), nr++;
    snprintf(p->foot[0], sizeof p->foot[0], "sum of layer medians: A %.4f ms, B %.4f ms (B/A "
             "%.3f); back to back: A %.4f ms, B %.4f ms (B/A %.3f)", sum[0], sum[1],
             sum[0] > 0 ? sum[1] / sum[0] : 0.0, net[0], net[1],
             net[0] > 0 ? net[1] / net[0] : 0.0);
    snprintf(p->foot[1], sizeof p->foot[1], "geometric mean of the per-layer ratios B/A: %.3f "
             "over %d layers", nr ? exp(lg / nr) : 0.0, nr);
}

int bench_compare(const char *cmd, vc_context *ctx, const char *a, const char *b,
                  const char *plot_path)
{
    char err[600];
    const cJSON *layers[2];
    const char *path[2] = {a, b};
    cJSON *doc[2] = {NULL, NULL};
    plot p;
    memset(&p, 0, sizeof p);
    p.nseries = 2;
    int rc = CLI_OK;
    for (int s = 0; s < 2 && rc == CLI_OK; s++)
        if (!(doc[s] = load_result(path[s], &layers[s], err, sizeof err)))
            rc = cli_error(cmd, "%s", err);
    if (rc == CLI_OK && compare_rows(layers[0], layers[1], &p, err, sizeof err))
        rc = cli_error(cmd, "--compare: %s", err);
    if (rc == CLI_OK) {
        const cJSON *d[2] = {doc[0], doc[1]};
        compare_text(&p, d, path);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (!mem) {
            rc = cli_error(cmd, "out of memory");
        } else {
            draw(mem, &p);
            fclose(mem);
            cli_output o = {plot_path, NULL, {0}, text, len};
            rc = cli_write_outputs(cmd, ctx, &o, 1);
            if (rc == CLI_OK) printf("%s\n%s\n", p.foot[0], p.foot[1]);
        }
        free(text);
    }
    free(p.rows);
    cJSON_Delete(doc[0]);
    cJSON_Delete(doc[1]);
    return rc;
}
