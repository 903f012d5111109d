/* cmd_bench.c - voxconv bench (being written). */
#include "cli.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("bench", "not in this build yet");
}
