/* tests/fuzz/fuzz_cli.c - fuzz target: the voxconv CLI's argument parsing, for every
 * subcommand, with the sources of src/cli built with VOXCONV_CLI_PARSE_ONLY (a command stops
 * where it would open a context, before any file is touched). Input: the first byte picks the
 * subcommand (info, voxelize, conv, pool, export; none: the rest is argv[1..] as given; run;
 * tune);
 * the rest is split at NUL bytes into arguments (at most 64). Each argument lives in one
 * buffer of exactly the input's size + 1, so AddressSanitizer catches a read past its end.
 * Run with -close_fd_mask=3: the commands print usage errors and help texts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_mem.h"
#include "src/cli/cli.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const cmds[] = {"info", "voxelize", "conv", "pool", "export", NULL,
                                       "run",  "tune"};
    if (size < 1 || size > 4096) return 0;
    fuzz_mem_begin();
    char *buf = malloc(size); /* bytes 1..size-1, then a terminating NUL */
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *argv[MAX_ARGS + 3];
    int argc = 0;
    argv[argc++] = (char *)"voxconv";
    const int pick = data[0] % 8;
    if (cmds[pick]) argv[argc++] = (char *)cmds[pick];
    for (size_t i = 0; i < size && argc < MAX_ARGS + 2;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
        if (i >= size) break;
    }
    argv[argc] = NULL;
    cli_main(argc, argv);
    free(buf);
    fuzz_mem_end(size);
    return 0;
}
