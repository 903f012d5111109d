/*
 * layers.h - layer specs and layer suites: the `--layer "TYPE K S P CIN COUT"` text of
 * `voxconv bench` and `voxconv tune`, and the suite files of datasets/layers (format in
 * datasets/layers/README.md). Plain C over the standard library (no voxconv.h): the benchmark
 * programs parse the same files with it.
 *
 * Every function reports a bad input by returning -1 with one line in err (no trailing
 * newline); 0 on success.
 */
#ifndef VOXCONV_CLI_LAYERS_H
#define VOXCONV_CLI_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* Layer types, in CLI_LAYER_TYPES order. The map of each: SUBM -> VC_MAP_SUBM, STRIDED ->
 * VC_MAP_STRIDED, DOWNSAMPLE and both pools -> VC_MAP_DOWNSAMPLE (Minkowski semantics: out =
 * ceil(in / stride)), INVERSE -> VC_MAP_INVERSE of an earlier layer, TRANSPOSED ->
 * VC_MAP_TRANSPOSED. */
typedef enum cli_layer_type {
    CLI_LAYER_SUBM = 0,
    CLI_LAYER_STRIDED = 1,
    CLI_LAYER_DOWNSAMPLE = 2,
    CLI_LAYER_INVERSE = 3,
    CLI_LAYER_TRANSPOSED = 4,
    CLI_LAYER_MAXPOOL = 5,
    CLI_LAYER_AVGPOOL = 6
} cli_layer_type;

/* "subm", "strided", "downsample", "inverse", "transposed", "maxpool", "avgpool", NULL. */
extern const char *const CLI_LAYER_TYPES[];

/* Limits of a spec's fields (the CLI's conv limits; channels as the library's). */
#define CLI_LAYER_MAX_KERNEL 7
#define CLI_LAYER_MAX_STRIDE 64
#define CLI_LAYER_MAX_CHANNELS ((int64_t)1 << 20)

typedef struct cli_layer {
    char name[64];
    cli_layer_type type;
    int32_t kernel[3], stride[3], padding[3], dilation[3]; /* z, y, x */
    int64_t cin, cout;
    /* Set by cli_suite_resolve. Levels are coordinate sets: 0 is the scene; every STRIDED,
     * DOWNSAMPLE, TRANSPOSED and pool layer makes a new one; INVERSE returns to the input level
     * of the layer it inverts; SUBM stays. */
    int in_level, out_level;
    int forward; /* INVERSE: the index of the layer it inverts; -1 otherwise */
} cli_layer;

static inline int cli_layer_is_pool(const cli_layer *l)
{
    return l->type == CLI_LAYER_MAXPOOL || l->type == CLI_LAYER_AVGPOOL;
}

/* A network: layers in execution order. */
typedef struct cli_suite {
    char name[128];
    cli_layer *layers;
    int n, cap;
    int n_levels; /* set by cli_suite_resolve */
} cli_suite;

/* One layer from "TYPE K S P CIN COUT [D]" (with_name 0) or "NAME TYPE K S P CIN COUT [D]"
 * (with_name 1, a suite line). K, S, P and the optional dilation D are one number or z,y,x.
 * default_dilation (NULL: 1,1,1) applies when D is absent. The name is "" without one. Checks
 * each field's range and the type's rules: subm needs odd kernels and stride 1, downsample and
 * the pools padding 0, pools cin == cout. */
int cli_layer_parse(const char *text, int with_name, const int32_t default_dilation[3],
                    cli_layer *out, char *err, size_t errlen);

/* "TYPE K S P CIN COUT" back, with "dD" appended when the dilation is not 1 (buf of 96 bytes
 * is enough). K, S, P as one number when the three agree. */
void cli_layer_format(const cli_layer *l, char *buf, size_t len);

/* Appends a copy of *l (named "L<index>" when its name is ""). */
int cli_suite_add(cli_suite *s, const cli_layer *l, char *err, size_t errlen);

/* A suite from the text of a suite file: one layer per line ("NAME TYPE K S P CIN COUT [D]"),
 * '#' starts a comment, blank lines skipped. Errors name `source` and the line number. Resolves
 * the levels (cli_suite_resolve). */
int cli_suite_parse(const char *text, const char *source, cli_suite *out, char *err,
                    size_t errlen);
/* cli_suite_parse of a file; the suite is named after the file's base name without ".txt". */
int cli_suite_read(const char *path, cli_suite *out, char *err, size_t errlen);

/* Fills in_level, out_level, forward and n_levels: the level stack of the layers. An INVERSE
 * layer inverts the most recent STRIDED, DOWNSAMPLE or pool layer not yet inverted (its kernel,
 * stride and padding must match it); one with nothing to invert is an error. */
int cli_suite_resolve(cli_suite *s, char *err, size_t errlen);

void cli_suite_free(cli_suite *s);

#endif /* VOXCONV_CLI_LAYERS_H */
