/*
 * suite_levels.h - a layer suite (layers.h) laid over a scene through the public API
 * (suite_levels.c): every layer's kernel map and every level's coordinate set.
 */
#ifndef VOXCONV_CLI_SUITE_LEVELS_H
#define VOXCONV_CLI_SUITE_LEVELS_H

#include "cli.h"
#include "layers.h"

typedef struct cli_suite_levels {
    vc_kmap **maps;      /* [n_layers]: layer i's map (its input is levels[in_level])        */
    vc_coords **levels;  /* [n_levels]: 0 is the scene; each retained                          */
    int n_layers, n_levels;
} cli_suite_levels;

/* The map description of a layer (INVERSE: inverse_of left NULL for the caller). */
void cli_layer_map_desc(const cli_layer *l, vc_map_desc *md);
/* Builds every layer's map in order over `scene` (a resolved suite). One error line and
 * CLI_FAIL on a failure, nothing left held. */
int cli_suite_levels_build(const char *cmd, vc_context *ctx, const cli_suite *s,
                           vc_coords *scene, cli_suite_levels *lv);
void cli_suite_levels_free(cli_suite_levels *lv);

#endif
