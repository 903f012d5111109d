/*
 * cli.h - shared declarations of the voxconv command-line tool (src/cli/).
 *
 * The CLI uses only the public API (voxconv.h). args.c holds the option parser and the value
 * parsers, commands.c the subcommands, main.c the dispatcher. Every failure is reported as one
 * line "voxconv CMD: message" on stderr and a non-zero exit status.
 */
#ifndef VOXCONV_CLI_H
#define VOXCONV_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "voxconv.h"

/* Exit statuses. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

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

/* Subcommands: argv[0] is the subcommand name. */
int cmd_info(int argc, char **argv);
int cmd_voxelize(int argc, char **argv);
int cmd_conv(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif /* VOXCONV_CLI_H */
