/*
 * cli.h - shared declarations of the voxconv command-line tool (src/cli/).
 *
 * The CLI uses only the public API (voxconv.h). args.c holds the option parser, the value
 * parsers and the error lines; common.c what the subcommands share (context, file loads and
 * saves, host copies, JSON pieces); outputs.c the output files (atomic, all or none) and the
 * signals; map_opts.c the kernel-map options of conv and pool; cmd_NAME.c one subcommand each; main.c the dispatcher. Every failure is reported as one line
 * "voxconv CMD: message" on stderr and a non-zero exit status.
 */
#ifndef VOXCONV_CLI_H
#define VOXCONV_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "voxconv.h"

/* Exit statuses. CLI_PARSE_ONLY: built with VOXCONV_CLI_PARSE_ONLY (the argument-parser fuzz
 * target), a command stops after parsing its options, where it would open a context. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_PARSE_ONLY = 3 };

/* The whole tool: main() calls it (main.c). */
int cli_main(int argc, char **argv);

/* One option of a subcommand. `value` is NULL for a flag (then *flag is set to 1). */
typedef struct cli_opt {
    const char *name;     /* "--kernel" */
    const char **value;   /* where the option's text goes, or NULL for a flag */
    int *flag;            /* for flags */
} cli_opt;

/* Parses argv[1..argc-1] of subcommand `cmd` (argv[0] is the subcommand name). Options may be
 * given as "--name VALUE" or "--name=VALUE", anywhere among the positional arguments; "--"
 * ends the options. Positional arguments go to pos[0..*npos-1] (at most max_pos). Sets *help
 * when -h/--help is seen. Returns CLI_OK or CLI_USAGE (after printing the error line). */
int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int nopts,
              const char **pos, int max_pos, int *npos, int *help);

/* Prints "voxconv CMD: message" to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "voxconv CMD: message" to stderr; returns CLI_FAIL. */
int cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "voxconv CMD: WHAT: <last error of ctx> [VC_ERR_...]" for a failed library call and
 * returns CLI_FAIL. */
int cli_vc_error(const char *cmd, const vc_context *ctx, vc_status st, const char *what);

/* Value parsers: on error they print the one-line message naming `flag` and return CLI_USAGE. */
/* "K" or "KZ,KY,KX", each in [lo, hi]; `what` describes the value ("K or KZ,KY,KX"). */
int cli_parse_int3(const char *cmd, const char *flag, const char *text, int lo, int hi,
                   const char *what, int32_t out[3]);
/* 1..max comma-separated integers in [lo, hi] into a malloc'ed array (*out, *n). */
int cli_parse_int_list(const char *cmd, const char *flag, const char *text, int32_t lo,
                       int32_t hi, int max, int32_t **out, int *n);
/* Exactly n comma-separated finite floats. */
int cli_parse_floats(const char *cmd, const char *flag, const char *text, int n, float *out);
/* An integer in [lo, hi]. */
int cli_parse_i64(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi,
                  int64_t *out);
/* An unsigned 64-bit integer (decimal or 0x hex). */
int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t *out);
/* One of the NULL-terminated `names`; *out = its index. */
int cli_parse_choice(const char *cmd, const char *flag, const char *text,
                     const char *const *names, int *out);
/* A finite float. */
int cli_parse_float(const char *cmd, const char *flag, const char *text, float *out);

/* JSON helpers. */
void cli_json_string(FILE *f, const char *s);

/* ---- shared by the subcommands (common.c) --------------------------------------------------- */

/* Accepted names, NULL-terminated; indices are the enum values (vc_dtype, vc_file_format). */
extern const char *const CLI_DTYPES[];  /* fp32 fp16 bf16 */
extern const char *const CLI_FORMATS[]; /* auto kitti pcd ply npy vxt */

/* cli_parse for a subcommand; on -h/--help prints `help` to stdout and sets *done (CLI_OK). */
int cli_parse_command(const char *cmd, int argc, char **argv, const cli_opt *opts, int nopts,
                      const char **pos, int max_pos, int *npos, const char *help, int *done);
/* A context for the --backend text (NULL: auto). Every command calls it after parsing all its
 * options and before touching any file (the parse-only seam relies on that). */
int cli_open_context(const char *cmd, const char *backend_text, vc_context **ctx);
/* The same with a tune cache for the planner (--tune-cache; NULL: none): a cache the library
 * ignores (unreadable, corrupt, stale, foreign) is one "warning:" line on stderr, and the
 * command goes on with the planner's own choices. */
int cli_open_context_tuned(const char *cmd, const char *backend_text, const char *tune_cache,
                           vc_context **ctx);
/* "fp32", "fp16", "bf16", "int32" or "?". */
const char *cli_dtype_name(vc_dtype t);
/* The host's monotonic clock in milliseconds (host-side frame and run times). */
double cli_now_ms(void);
/* calloc that never asks for 0 bytes. */
void *cli_xcalloc(size_t n, size_t size);
/* The error line of a failed file call: "VERB 'PATH': <detail>", the path left out when the
 * library's message names it already. Returns CLI_FAIL. */
int cli_file_error(const char *cmd, const vc_context *ctx, vc_status st, const char *verb,
                   const char *path);
/* vc_tensor_load, vc_tensor_save, vc_npy_read (`verb` as "cannot read weights"), vc_npy_write,
 * each reporting its failure with cli_file_error (the saves through cli_write_outputs). */
int cli_load_tensor(const char *cmd, vc_context *ctx, const char *path, vc_tensor **t);
int cli_save_tensor(const char *cmd, vc_context *ctx, const vc_tensor *t, const char *path);
/* --nonfinite refuse|keep|zero (NULL: refuse), and its check of a loaded input's features: a
 * refusal is the command's one error line; kept or zeroed features are counted on stderr. */
int cli_parse_nonfinite(const char *cmd, const char *text, vc_nonfinite_policy *out);
int cli_check_features(const char *cmd, vc_context *ctx, vc_tensor *t, vc_nonfinite_policy p,
                       const char *path);
int cli_read_npy(const char *cmd, vc_context *ctx, const char *path, const char *verb,
                 vc_array *a);
int cli_write_npy(const char *cmd, vc_context *ctx, const char *path, void *data,
                  vc_dtype dtype, int ndim, const int64_t *shape);
/* A vc_array over `data` (not copied). */
vc_array cli_array(void *data, vc_dtype dtype, int ndim, const int64_t *shape);
/* ---- output files and signals (outputs.c) ------------------------------------------------ */

/* One file a command writes: a tensor as .vxt (tensor non-NULL), text (text non-NULL: a report
 * of text_len bytes), else `array` as .npy. */
typedef struct cli_output {
    const char *path;
    const vc_tensor *tensor;
    vc_array array;
    const char *text;
    size_t text_len;
} cli_output;
#define CLI_MAX_OUTPUTS 64 /* voxconv run writes one file per named output */

/* Ignores SIGXFSZ; SIGINT/SIGTERM/SIGHUP remove the registered temporaries, then kill. */
void cli_signals_init(void);
/* Writes every output to its temporary, then publishes them all (renames over the targets),
 * or, after any failure, none: the temporaries go, the targets stay as they were. One error
 * line; returns CLI_OK or CLI_FAIL. */
int cli_write_outputs(const char *cmd, vc_context *ctx, const cli_output *outs, int n);
/* The same for one file, the context's tune cache (vc_tune_cache_save_output). */
int cli_write_tune_cache(const char *cmd, vc_context *ctx, const char *path);
/* CLI_USAGE (after the error line) when `path` ends in a known extension (.vxt .npy .bin .pcd
 * .ply, any case) other than `ext`; `what` names the argument ("OUT", "--save-weights"). */
int cli_check_extension(const char *cmd, const char *what, const char *path, const char *ext);

/* Host copies of a tensor's coordinates (int32 [N,4]) and features (fp32 [N,C]), malloc'ed;
 * both NULL on failure. */
int cli_tensor_to_host(const char *cmd, vc_context *ctx, const vc_tensor *t, int32_t **coords,
                       float **feats);
/* "[a, b, c]". */
void cli_print_int3_json(FILE *f, const int32_t v[3]);
/* Opens a JSON summary on stdout: {"KEY_IN": "IN", "KEY_OUT": "OUT" (no closing brace). */
void cli_json_io(const char *key_in, const char *in, const char *key_out, const char *out);

/* ---- point-file options of the commands that read points (common.c) ------------------------ */

typedef struct cli_read_opts {
    const char *load_dim, *use_dim; /* the option texts                                    */
    vc_read_options o;              /* parsed by cli_parse_read_opts                        */
    int32_t *use;                   /* the parsed --use-dim list, malloc'ed (or NULL)       */
} cli_read_opts;

/* The option-table entries of --load-dim and --use-dim, into a cli_read_opts `r`. */
#define CLI_READ_OPTIONS(r) {"--load-dim", &(r).load_dim, NULL}, {"--use-dim", &(r).use_dim, NULL}
/* Their --help lines. */
#define CLI_READ_OPTIONS_HELP                                                                  \
    "  --load-dim N            float32 per point of a raw .bin (default 4, KITTI; nuScenes\n"  \
    "                          .pcd.bin 5; mmdetection3d's Waymo and ScanNet .bin 6); .bin\n"  \
    "                          only\n"                                                          \
    "  --use-dim N|I,J,K,...   keep the first N columns, or these columns in this order\n"    \
    "                          (0-based; at least x, y, z), any point format\n"
/* Parses r->load_dim and r->use_dim into r->o (CLI_USAGE after the error line). */
int cli_parse_read_opts(const char *cmd, cli_read_opts *r);
/* Frees what cli_parse_read_opts allocated. */
void cli_read_opts_free(cli_read_opts *r);
/* vc_cloud_read_ex with the parsed options; a failure is reported with cli_file_error. */
int cli_read_cloud(const char *cmd, vc_context *ctx, const char *path, int fmt,
                   const cli_read_opts *r, vc_cloud *out);

/* ---- kernel-map options of conv and pool (map_opts.c) --------------------------------------- */

typedef struct cli_map_opts {
    const char *type, *kernel, *stride, *padding, *dilation;
} cli_map_opts;

/* The option-table entries of the map options, into a cli_map_opts `m`. */
#define CLI_MAP_OPTIONS(m)                                                                     \
    {"--type", &(m).type, NULL}, {"--kernel", &(m).kernel, NULL},                              \
        {"--stride", &(m).stride, NULL}, {"--padding", &(m).padding, NULL},                    \
        {"--dilation", &(m).dilation, NULL}

/* Fills `d` from the texts; `types` is the list of accepted type names (indices = map types). */
int cli_parse_map(const char *cmd, const cli_map_opts *m, const char *const *types,
                  vc_map_desc *d);
/* "TYPE kK,K,K sS,S,S pP,P,P dD,D,D" and the JSON fields "type" .. "dilation". */
void cli_print_map_text(const vc_map_desc *d, const char *type);
void cli_print_map_json(const vc_map_desc *d, const char *type);
/* The JSON fields "in_shape" and "out_shape". */
void cli_print_shapes_json(const int32_t in_shape[3], const int32_t out_shape[3]);

/* Subcommands: argv[0] is the subcommand name. */
int cmd_info(int argc, char **argv);
int cmd_voxelize(int argc, char **argv);
int cmd_conv(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);

/* ---- synthetic scenes (cmd_synth.c) ------------------------------------------------------- */

extern const char *const CLI_SYNTH_KINDS[]; /* lidar indoor uniform */
/* "KIND" or "KIND:N" (N voxels to aim at) into d->kind and d->voxels. */
int cli_parse_synth(const char *cmd, const char *flag, const char *text, vc_synth_desc *d);

/* ---- graph mode's --bounds (net_bounds.c) --------------------------------------------------- */

typedef struct cli_bounds {
    int set, automatic;       /* automatic: "auto[:MARGIN]"                                    */
    double margin;
    int64_t voxels[VC_NET_MAX_LEVELS];
    int32_t n;
} cli_bounds;

/* "N0[,N1,...]" or "auto[:MARGIN]" (default margin 1.25). */
int cli_parse_bounds(const char *cmd, const char *text, cli_bounds *b);
/* Puts the net in graph mode. auto: one per-call frame on t (voxels) or pts first, then every
 * level's rows (and the points) x margin; explicit: the levels given, max_points = the points'
 * count. Prints the bounds unless quiet. CLI_OK, or CLI_FAIL after the error line. */
int cli_set_bounds(const char *cmd, vc_context *ctx, vc_net *net, const cli_bounds *b,
                   const vc_tensor *t, const vc_points *pts, int quiet);

#endif /* VOXCONV_CLI_H */
