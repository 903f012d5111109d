/*
 * suite_levels.c - a layer suite (layers.h) laid over a scene: the kernel map of every layer and
 * the coordinate set of every level, built in execution order through the public API, for the
 * commands that run suites (tune; bench may share it).
 */
#include <stdlib.h>
#include <string.h>

#include "suite_levels.h"

void cli_layer_map_desc(const cli_layer *l, vc_map_desc *md)
{
    vc_map_desc d = VC_MAP_DESC_INIT;
    static const vc_map_type types[] = {VC_MAP_SUBM,       VC_MAP_STRIDED, VC_MAP_DOWNSAMPLE,
                                        VC_MAP_INVERSE,    VC_MAP_TRANSPOSED,
                                        VC_MAP_DOWNSAMPLE, VC_MAP_DOWNSAMPLE};
    d.type = types[l->type];
    memcpy(d.kernel, l->kernel, sizeof d.kernel);
    memcpy(d.stride, l->stride, sizeof d.stride);
    memcpy(d.padding, l->padding, sizeof d.padding);
    memcpy(d.dilation, l->dilation, sizeof d.dilation);
    *md = d;
}

void cli_suite_levels_free(cli_suite_levels *lv)
{
    for (int i = 0; i < lv->n_layers; i++) vc_kmap_destroy(lv->maps ? lv->maps[i] : NULL);
    for (int i = 0; i < lv->n_levels; i++) vc_coords_destroy(lv->levels ? lv->levels[i] : NULL);
    free(lv->maps);
    free(lv->levels);
    memset(lv, 0, sizeof *lv);
}

int cli_suite_levels_build(const char *cmd, vc_context *ctx, const cli_suite *s,
                           vc_coords *scene, cli_suite_levels *lv)
{
    memset(lv, 0, sizeof *lv);
    lv->maps = cli_xcalloc((size_t)s->n, sizeof *lv->maps);
    lv->levels = cli_xcalloc((size_t)s->n_levels + 1, sizeof *lv->levels);
    if (!lv->maps || !lv->levels) {
        cli_suite_levels_free(lv);
        return cli_error(cmd, "out of memory");
    }
    lv->n_layers = s->n;
    lv->n_levels = s->n_levels + 1;
    vc_coords_retain(scene);
    lv->levels[0] = scene;
    for (int i = 0; i < s->n; i++) {
        const cli_layer *l = &s->layers[i];
        vc_coords *in = l->in_level < lv->n_levels ? lv->levels[l->in_level] : NULL;
        if (!in) {
            cli_suite_levels_free(lv);
            return cli_error(cmd, "%s: layer '%s' reads level %d, which no layer made", s->name,
                             l->name, l->in_level);
        }
        vc_map_desc md;
        cli_layer_map_desc(l, &md);
        if (md.type == VC_MAP_INVERSE) md.inverse_of = lv->maps[l->forward];
        vc_status st = vc_kmap_build(ctx, in, &md, &lv->maps[i]);
        if (st != VC_OK) {
            char what[256];
            snprintf(what, sizeof what, "%s: cannot build the map of layer '%s'", s->name,
                     l->name);
            int rc = cli_vc_error(cmd, ctx, st, what);
            cli_suite_levels_free(lv);
            return rc;
        }
        vc_kmap_info ki;
        vc_kmap_get_info(lv->maps[i], &ki);
        if (l->out_level < lv->n_levels && !lv->levels[l->out_level]) {
            vc_coords_retain(ki.out_coords);
            lv->levels[l->out_level] = ki.out_coords;
        }
    }
    return CLI_OK;
}
