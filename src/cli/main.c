/*
 * main.c - entry point of the voxconv command-line tool: dispatches to the subcommands
 * (cmd_NAME.c). See docs/cli.md.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"info", cmd_info, "describe a point file (.bin .pcd .ply .npy) or a .vxt voxel tensor"},
    {"voxelize", cmd_voxelize, "voxelize a point file into a .vxt sparse tensor"},
    {"conv", cmd_conv, "run one sparse convolution layer on a .vxt tensor"},
    {"pool", cmd_pool, "run one sparse pooling layer (or global pooling) on a .vxt tensor"},
    {"export", cmd_export, "write a .vxt tensor as NumPy coords/feats .npy files"},
    {"run", cmd_run, "run a network (model description + weights) on points or a .vxt"},
    {"synth", cmd_synth, "write a deterministic synthetic scene (.vxt voxels or points)"},
    {"bench", cmd_bench, "time layers (flags, a suite file) on a scene, with floors"},
    {"tune", cmd_tune, "time every GEMM configuration of a suite's layers; write a tune cache"},
};
#define NCOMMANDS ((int)(sizeof COMMANDS / sizeof COMMANDS[0]))

static void usage(FILE *f)
{
    fprintf(f,
            "usage: voxconv COMMAND [ARGS...] [--help]\n"
            "       voxconv --version | --help\n"
            "\n"
            "Sparse 3D convolution on point clouds and voxel tensors (library %s).\n"
            "\n"
            "commands:\n",
            vc_version());
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f,
            "\n"
            "Run 'voxconv COMMAND --help' for a command's options. Exit status: 0 on success,\n"
            "1 when the work failed, 2 on a usage error; errors are one line on stderr.\n");
}

int cli_main(int argc, char **argv)
{
    cli_signals_init();
    if (argc < 2) return cli_usage_error(NULL, "missing command (see voxconv --help)");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("voxconv %s\n", vc_version());
        return CLI_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 1, argv + 1);
    if (name[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s' (see voxconv --help)", name);
    return cli_usage_error(NULL, "unknown command '%s' (see voxconv --help)", name);
}

#ifndef VOXCONV_CLI_PARSE_ONLY
int main(int argc, char **argv) { return cli_main(argc, argv); }
#endif
