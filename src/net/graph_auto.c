/* src/net/graph_auto.c - per-call runs on the CUDA backend through graph mode, with bounds the
 * net sets and grows itself (docs/networks.md "Per-call runs"): the first frame runs step by
 * step and gives every level's row count; later frames run as the captured graph with bounds a
 * quarter above the largest counts seen, and the run checks the frame before it returns - one
 * host synchronisation a frame. A frame that outgrows a bound is not lost: the bounds grow to
 * what it needed (the check reports it) and the frame runs again. Explicit bounds
 * (vc_net_set_bounds) turn this off; so does vc_net_set_auto_bounds(net, 0), profiling, a CPU
 * context, and a net that graph mode cannot run. */
#include <string.h>

#include "src/net/net_internal.h"

/* Headroom over the counts seen, so that frames of the same scene rarely regrow. */
static int64_t grown(int64_t rows)
{
    const int64_t r = rows + rows / 4 + 64;
    return r > VC_MAX_ROWS ? VC_MAX_ROWS : r;
}

int vc_net_auto_ready(vc_net *net)
{
    if (!net->auto_bounds || net->profiling || net->ctx->backend != VC_BACKEND_CUDA) return 0;
    if (net->graph) return net->auto_graph;
    return net->level_rows_set && vc_net_graphable(net);
}

/* Bounds covering `rows` (per level) and the points, never below the current ones. */
static vc_status grow_to(vc_net *net, const int64_t *rows, int64_t points)
{
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    if (net->graph) vc_net_bounds_get(net, &b);
    int changed = !net->graph;
    for (int32_t l = 0; l < net->n_levels; l++)
        if (rows[l] > b.max_voxels[l]) {
            b.max_voxels[l] = grown(rows[l]);
            changed = 1;
        }
    if (points > b.max_points) {
        b.max_points = grown(points);
        changed = 1;
    }
    if (!changed) return VC_OK;
    vc_status s = vc_net_set_bounds(net, &b);
    net->auto_graph = s == VC_OK;
    return s;
}

vc_status vc_net_auto_run(vc_net *net, const vc_tensor *in, const vc_points *pts)
{
    int64_t rows[VC_NET_MAX_LEVELS];
    for (int32_t l = 0; l < net->n_levels; l++) rows[l] = net->level_rows[l];
    if (in) rows[0] = in->coords->count > rows[0] ? in->coords->count : rows[0];
    vc_status s = grow_to(net, rows, pts ? pts->count : 0);
    /* Each retry grows at least one level past what overflowed. A level fed by an overflowed
     * one may only show its need on the next attempt, and a build whose output table overflowed
     * may undercount what it needed: two tries per level. */
    for (int32_t attempt = 0; s == VC_OK && attempt <= 2 * net->n_levels; attempt++) {
        s = in ? vc_net_graph_run(net, in) : vc_net_graph_run_points(net, pts);
        if (s == VC_OK) s = vc_net_graph_check(net);
        if (s != VC_ERR_CAPACITY) break;
        int64_t need[VC_NET_MAX_LEVELS];
        if (!vc_net_graph_needs(net, need)) break; /* not a bound of ours: report it */
        s = grow_to(net, need, pts ? pts->count : 0);
    }
    if (s == VC_OK) {
        vc_net_graph_needs(net, rows);
        for (int32_t l = 0; l < net->n_levels; l++) net->level_rows[l] = rows[l];
        net->level_rows_set = 1;
    }
    return s;
}

vc_status vc_net_set_auto_bounds(vc_net *net, int32_t on)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    net->auto_bounds = on != 0;
    if (!net->auto_bounds && net->auto_graph) {
        vc_net_graph_free(net);
        net->auto_graph = 0;
        net->ran = 0;
    }
    return VC_OK;
}
