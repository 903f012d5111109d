/*
 * map_opts.c - the kernel-map options that conv and pool share (--type, --kernel, --stride,
 * --padding, --dilation): parsing into a vc_map_desc, and the map in text and JSON summaries.
 */
#include "cli.h"

#define KERNEL_WHAT "K or KZ,KY,KX"

int cli_parse_map(const char *cmd, const cli_map_opts *m, const char *const *types,
                  vc_map_desc *d)
{
    int t = 0;
    if (!m->type) return cli_usage_error(cmd, "--type is required");
    if (cli_parse_choice(cmd, "--type", m->type, types, &t)) return CLI_USAGE;
    d->type = (vc_map_type)t;
    if (!m->kernel) return cli_usage_error(cmd, "--kernel is required");
    if (cli_parse_int3(cmd, "--kernel", m->kernel, 1, 7, KERNEL_WHAT, d->kernel)) return CLI_USAGE;
    if (m->stride &&
        cli_parse_int3(cmd, "--stride", m->stride, 1, 64, "S or SZ,SY,SX", d->stride))
        return CLI_USAGE;
    if (m->padding &&
        cli_parse_int3(cmd, "--padding", m->padding, 0, 64, "P or PZ,PY,PX", d->padding))
        return CLI_USAGE;
    if (m->dilation &&
        cli_parse_int3(cmd, "--dilation", m->dilation, 1, 64, "D or DZ,DY,DX", d->dilation))
        return CLI_USAGE;
    if (d->type == VC_MAP_SUBM) {
        for (int i = 0; i < 3; i++) {
            if (d->kernel[i] % 2 == 0)
                return cli_usage_error(cmd, "--kernel: subm needs odd sizes, got '%s'",
                                       m->kernel);
            if (d->stride[i] != 1)
                return cli_usage_error(cmd, "--stride: subm needs stride 1, got '%s'",
                                       m->stride);
        }
    }
    return CLI_OK;
}

void cli_print_map_text(const vc_map_desc *d, const char *type)
{
    printf("%s k%d,%d,%d s%d,%d,%d p%d,%d,%d d%d,%d,%d", type, d->kernel[0], d->kernel[1],
           d->kernel[2], d->stride[0], d->stride[1], d->stride[2], d->padding[0], d->padding[1],
           d->padding[2], d->dilation[0], d->dilation[1], d->dilation[2]);
}

void cli_print_map_json(const vc_map_desc *d, const char *type)
{
    printf("\"type\": \"%s\", \"kernel\": ", type);
    cli_print_int3_json(stdout, d->kernel);
    printf(", \"stride\": ");
    cli_print_int3_json(stdout, d->stride);
    printf(", \"padding\": ");
    cli_print_int3_json(stdout, d->padding);
    printf(", \"dilation\": ");
    cli_print_int3_json(stdout, d->dilation);
}


void cli_print_shapes_json(const int32_t in_shape[3], const int32_t out_shape[3])
{
    printf("\"in_shape\": ");
    cli_print_int3_json(stdout, in_shape);
    printf(", \"out_shape\": ");
    cli_print_int3_json(stdout, out_shape);
}
