/* src/net/graph.c - a net's graph mode (include/voxconv.h vc_net_set_bounds; docs/networks.md
 * "Graph mode"): the levels of a net (its coordinate sets), the bounds resolved per level, and
 * every resource of a bounded frame allocated once - one bounded map per distinct map, the
 * bounded voxelizer, the level-0 input buffers, a fixed buffer for every layer result at its
 * level's extent, the dense outputs, the mapped status block and the capture stream. The frame
 * itself (queue, capture, replay, check, outputs) is graph_run.c. */
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "src/net/graph.h"

/* ---- levels (every backend) ------------------------------------------------------------- */

static int has_map(const vc_net_layer *L)
{
    return vc_nop_is_conv(L->op) || L->op == VC_NOP_MAXPOOL || L->op == VC_NOP_AVGPOOL;
}

static int same_map(const vc_map_desc *a, const vc_map_desc *b)
{
    return a->type == b->type && !memcmp(a->kernel, b->kernel, sizeof a->kernel) &&
           !memcmp(a->stride, b->stride, sizeof a->stride) &&
           !memcmp(a->padding, b->padding, sizeof a->padding) &&
           !memcmp(a->dilation, b->dilation, sizeof a->dilation);
}

/* The level layer i reads (its first input's). */
static int32_t in_level(const vc_model *m, const int32_t *layer_level, int32_t i)
{
    const vc_net_layer *L = &m->layers[i];
    if (L->n_inputs < 1 || L->inputs[0] == VC_NET_INPUT) return 0;
    return layer_level[L->inputs[0]];
}

void vc_net_plan_levels(const vc_model *m, int32_t *layer_level, int32_t *n_levels,
                        int32_t *maker)
{
    int32_t n = 1;
    if (maker) maker[0] = -1;
    for (int32_t i = 0; i < m->n_layers; i++) {
        const vc_net_layer *L = &m->layers[i];
        const int32_t lin = in_level(m, layer_level, i);
        if (L->dense) {
            layer_level[i] = -1;
        } else if (!has_map(L) || L->map.type == VC_MAP_SUBM) {
            layer_level[i] = lin;
        } else if (L->op == VC_NOP_INVERSE) {
            layer_level[i] = L->key_owner >= 0 ? in_level(m, layer_level, L->key_owner) : lin;
        } else {
            int32_t found = -1;
            for (int32_t j = 0; j < i && found < 0; j++) {
                const vc_net_layer *J = &m->layers[j];
                if (has_map(J) && J->op != VC_NOP_INVERSE && J->map.type != VC_MAP_SUBM &&
                    !J->dense && in_level(m, layer_level, j) == lin && same_map(&J->map, &L->map))
                    found = layer_level[j];
            }
            if (found < 0) {
                if (maker && n < VC_NET_MAX_LEVELS) maker[n] = i;
                found = n++;
            }
            layer_level[i] = found;
        }
    }
    *n_levels = n;
}

vc_status vc_net_level_count(const vc_net *net, int32_t *count)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    if (!count)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_level_count: count is NULL");
    *count = net->n_levels;
    return VC_OK;
}

vc_status vc_net_level_rows(const vc_net *net, int64_t *counts, int32_t n)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    if (!counts || n < 0)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_level_rows: counts is NULL "
                           "or n < 0");
    if (!net->level_rows_set)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_level_rows: no per-call "
                           "run has completed (graph mode keeps its counts on the device)");
    for (int32_t l = 0; l < n; l++)
        counts[l] = l < net->n_levels && l < VC_NET_MAX_LEVELS ? net->level_rows[l] : 0;
    return VC_OK;
}

vc_status vc_net_bounds_get(const vc_net *net, vc_net_bounds *out)
{
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    if (!out)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_bounds_get: out is NULL");
    if (!net->graph)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_bounds_get: no bounds set");
#ifdef VOXCONV_HAVE_CUDA
    *out = net->graph->bounds;
#endif
    return VC_OK;
}

#ifdef VOXCONV_HAVE_CUDA
/* What the graph cannot run: a message naming the layer, or VC_OK. */
static vc_status check_graphable(vc_net *net)
{
    const char *fn = "vc_net_set_bounds";
    const vc_model *m = &net->model;
    if (net->algo != VC_ALGO_AUTO && net->algo != VC_ALGO_IMPLICIT_GEMM)
        return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: graph mode runs the implicit GEMM; "
                           "the net was created with algo %d", fn, (int)net->algo);
    if (net->n_levels > VC_NET_MAX_LEVELS)
        return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: '%s' makes %d levels, graph mode "
                           "takes at most %d", fn, m->name, net->n_levels, VC_NET_MAX_LEVELS);
    for (int32_t i = 0; i < m->n_layers; i++) {
        const vc_net_layer *L = &m->layers[i];
        const char *why = NULL;
        if (L->op == VC_NOP_GLOBAL_MAXPOOL || L->op == VC_NOP_GLOBAL_AVGPOOL)
            why = "global pooling";
        if (why)
            return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: layer '%s' (%s): graph mode "
                               "does not run %s; run '%s' per call", fn, L->id,
                               vc_nop_name(L->op), why, m->name);
    }
    for (int32_t i = 0; i < m->n_outputs; i++)
        if (m->out_layers[i] == VC_NET_INPUT)
            return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: output '%s' is the input: "
                               "graph mode does not return it", fn, m->out_names[i]);
    return VC_OK;
}

/* The bounds with every level resolved (0 = the previous level's; [0] = the voxelize block's
 * max_voxels), checked. */
static vc_status resolve_bounds(vc_net *net, const vc_net_bounds *in, vc_net_bounds *out)
{
    const char *fn = "vc_net_set_bounds";
    const vc_model *m = &net->model;
    *out = *in;
    if (in->max_points < 0 || in->max_points > VC_MAX_ROWS)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: max_points %lld outside "
                           "[0, %lld]", fn, (long long)in->max_points, (long long)VC_MAX_ROWS);
    for (int32_t l = 0; l < VC_NET_MAX_LEVELS; l++) {
        int64_t v = in->max_voxels[l];
        if (l >= net->n_levels) {
            out->max_voxels[l] = 0;
            continue;
        }
        if (v == 0)
            v = l > 0 ? out->max_voxels[l - 1] : m->has_voxelize ? m->voxelize.max_voxels : 0;
        if (v < 1 || v > VC_MAX_ROWS)
            return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: max_voxels[%d] is %lld: "
                               "each level's bound must be in [1, %lld]%s", fn, l, (long long)v,
                               (long long)VC_MAX_ROWS,
                               l == 0 ? " (level 0 takes the voxelize block's max_voxels when 0)"
                                      : "");
        out->max_voxels[l] = v;
    }
    return VC_OK;
}
#endif

int vc_net_graphable(vc_net *net)
{
#ifdef VOXCONV_HAVE_CUDA
    if (net->ctx->backend != VC_BACKEND_CUDA) return 0;
    vc_status s = check_graphable(net);
    vc_ctx_clear(net->ctx);
    return s == VC_OK;
#else
    (void)net;
    return 0;
#endif
}

vc_status vc_net_set_bounds(vc_net *net, const vc_net_bounds *bounds)
{
    const char *fn = "vc_net_set_bounds";
    if (!net) return VC_ERR_INVALID_ARGUMENT;
    vc_ctx_clear(net->ctx);
    net->auto_graph = 0; /* the caller's bounds from now on (graph_auto.c sets it again) */
    if (!bounds) {
        vc_net_graph_free(net);
        net->ran = 0;
        return VC_OK;
    }
    vc_net_bounds b = VC_NET_BOUNDS_INIT;
    VC_TAKE_DESC(net->ctx, fn, b, bounds, vc_net_bounds);
    if (net->ctx->backend != VC_BACKEND_CUDA)
        return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: graph mode needs a CUDA context; "
                           "the CPU runs each frame per call", fn);
#ifdef VOXCONV_HAVE_CUDA
    vc_net_bounds r;
    vc_status s = check_graphable(net);
    if (s == VC_OK) s = resolve_bounds(net, &b, &r);
    if (s != VC_OK) return s;
    vc_net_graph_free(net);
    vc_net_release_run(net);
    net->ran = 0;
    struct vc_net_graph *g = calloc(1, sizeof *g);
    if (!g) return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    g->bounds = r;
    s = vc_graph_setup(net, g, 1);
    if (s != VC_OK) {
        free(g);
        return s;
    }
    net->graph = g;
    return VC_OK;
#else
    return VC_ERR_UNSUPPORTED;
#endif
}

#ifdef VOXCONV_HAVE_CUDA

/* ---- the arena (graph.h) ------------------------------------------------------------------ */

static int arena_keep(void ***arr, int32_t *n, int32_t *cap, void *p)
{
    if (*n == *cap) {
        int32_t c = *cap ? 2 * *cap : 16;
        void **a = realloc(*arr, (size_t)c * sizeof **arr);
        if (!a) return 0;
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return 1;
}

static void *arena_alloc(void *user, size_t bytes, vc_memory where, struct CUstream_st *stream)
{
    (void)stream;
    graph_arena *a = user;
    if (where == VC_MEMORY_HOST) return vc_mem_alloc(a->ctx, bytes, VC_MEMORY_HOST);
    if (a->next < a->n && a->size[a->next] >= bytes) return a->ptr[a->next++];
    if (a->frozen) return NULL;
    void *p = vc_mem_alloc(a->ctx, bytes, VC_MEMORY_DEVICE);
    if (!p) return NULL;
    if (a->next < a->n) { /* a larger block in this place; the old one may serve a graph */
        if (!arena_keep(&a->old, &a->n_old, &a->cap_old, a->ptr[a->next])) {
            vc_mem_free(a->ctx, p, VC_MEMORY_DEVICE);
            return NULL;
        }
        a->ptr[a->next] = p;
        a->size[a->next] = bytes;
        return a->ptr[a->next++];
    }
    int32_t cap = a->cap;
    if (!arena_keep(&a->ptr, &a->n, &a->cap, p)) {
        vc_mem_free(a->ctx, p, VC_MEMORY_DEVICE);
        return NULL;
    }
    if (a->cap != cap) {
        size_t *sz = realloc(a->size, (size_t)a->cap * sizeof *sz);
        if (!sz) {
            a->n--;
            vc_mem_free(a->ctx, p, VC_MEMORY_DEVICE);
            return NULL;
        }
        a->size = sz;
    }
    a->size[a->n - 1] = bytes;
    a->next = a->n;
    return p;
}

static void arena_free(void *user, void *p, vc_memory where, struct CUstream_st *stream)
{
    (void)stream;
    graph_arena *a = user;
    if (where == VC_MEMORY_HOST) vc_mem_free(a->ctx, p, VC_MEMORY_HOST);
    /* device blocks live as long as the graph that may use them */
}

static void arena_release(graph_arena *a)
{
    for (int32_t i = 0; i < a->n; i++) vc_mem_free(a->ctx, a->ptr[i], VC_MEMORY_DEVICE);
    for (int32_t i = 0; i < a->n_old; i++) vc_mem_free(a->ctx, a->old[i], VC_MEMORY_DEVICE);
    free(a->ptr);
    free(a->size);
    free(a->old);
    memset(a, 0, sizeof *a);
}

/* ---- setup and release ------------------------------------------------------------------- */

void *vc_graph_data(const vc_net *net, int32_t r)
{
    const struct vc_net_graph *g = net->graph;
    if (r != VC_NET_INPUT) return g->buf[r];
    return g->has_vox ? g->vox.features : g->own_feats;
}

static vc_status dev_buf(vc_net *net, const char *what, int64_t rows, int64_t cols, size_t es,
                         void **p)
{
    int64_t n = 0;
    if (vc_mul_overflow_i64(rows, cols, &n) || n > INT64_MAX / 16)
        return vc_ctx_fail(net->ctx, VC_ERR_LIMIT, "vc_net_set_bounds: %s: size overflows", what);
    *p = vc_mem_alloc(net->ctx, n > 0 ? (size_t)n * es : 1, VC_MEMORY_DEVICE);
    if (!*p)
        return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_set_bounds: out of device "
                           "memory for %s (%lld x %lld)", what, (long long)rows, (long long)cols);
    return VC_OK;
}

/* Level 0: the bounded voxelizer's buffers where the net voxelizes points, else its own. */
static vc_status setup_input(vc_net *net, struct vc_net_graph *g)
{
    const vc_model *m = &net->model;
    graph_level *l0 = &g->lv[0];
    vc_err err = {{0}};
    vc_status s = VC_OK;
    l0->extent = g->bounds.max_voxels[0];
    memcpy(l0->shape, m->shape, sizeof l0->shape);
    l0->map = -1;
    if (m->has_voxelize && g->bounds.max_points > 0) {
        vc_voxelize_desc vd = m->voxelize;
        vd.dtype = net->dtype;
        vd.batch_size = g->batch;
        g->pts_dim = m->use_dim ? m->use_dim : (int32_t)m->in_channels;
        s = vc_voxelize_gpu_bounded_create(&vd, g->bounds.max_points, g->pts_dim, l0->extent,
                                           &net->ctx->opts, &g->vox, &err);
        if (s != VC_OK)
            return vc_ctx_fail(net->ctx, s, "vc_net_set_bounds: the voxelizer: %s", err.msg);
        g->has_vox = 1;
        l0->coords = g->vox.coords;
        l0->d_count = g->vox.d_count;
        s = dev_buf(net, "the points", g->bounds.max_points, g->pts_dim, sizeof(float),
                    (void **)&g->pts);
        if (s == VC_OK) s = dev_buf(net, "a count", 1, 1, sizeof(int64_t), (void **)&g->pts_count);
        return s;
    }
    s = dev_buf(net, "the input coordinates", l0->extent, 4, sizeof(int32_t),
                (void **)&g->own_coords);
    if (s == VC_OK)
        s = dev_buf(net, "the input features", l0->extent, m->in_channels,
                    vc_dtype_size(net->dtype), &g->own_feats);
    if (s == VC_OK) s = dev_buf(net, "a count", 1, 1, sizeof(int64_t), (void **)&g->own_count);
    l0->coords = g->own_coords;
    l0->d_count = g->own_count;
    return s;
}

/* An inverse conv's map: the bounded INVERSE of its key owner's map (made before it: the
 * owner comes first), shared by the inverses of one owner; its levels exist already. */
static vc_status setup_inverse(vc_net *net, struct vc_net_graph *g, int32_t i, graph_map *gm)
{
    const vc_net_layer *L = &net->model.layers[i];
    const int32_t fwd = L->key_owner >= 0 ? g->layer_map[L->key_owner] : -1;
    if (fwd < 0)
        return vc_ctx_fail(net->ctx, VC_ERR_INTERNAL, "vc_net_set_bounds: layer '%s': its key "
                           "owner has no map", L->id);
    if (g->maps[fwd].level_out != gm->level_in)
        return vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "vc_net_set_bounds: layer '%s' "
                           "reads level %d, but the map of '%s' (indice_key \"%s\") makes level "
                           "%d: an inverse's input must be its key owner's output set", L->id,
                           gm->level_in, net->model.layers[L->key_owner].id, L->indice_key,
                           g->maps[fwd].level_out);
    for (int32_t k = 0; k < g->n_maps; k++)
        if (g->maps[k].fwd == fwd) {
            g->layer_map[i] = k;
            return VC_OK;
        }
    gm->fwd = fwd;
    vc_err err = {{0}};
    vc_status s = vc_kmap_gpu_bounded_create_inverse(&g->maps[fwd].b, &net->ctx->opts, &gm->b,
                                                     &err);
    if (s != VC_OK)
        return vc_ctx_fail(net->ctx, s, "vc_net_set_bounds: the inverse map of layer '%s' (level "
                           "%d -> %d): %s", L->id, gm->level_in, gm->level_out, err.msg);
    vc_kmap_gpu_bounded_view(&gm->b, &gm->view);
    g->layer_map[i] = g->n_maps++;
    return VC_OK;
}

/* The rows a frame's level typically has, for planning its convs: the level's rows in the last
 * per-call run (what auto bounds grow from), or 0 (plan on the extent) before any. */
static int64_t plan_rows(const vc_net *net, int32_t level)
{
    return net->level_rows_set && level >= 0 && level < VC_NET_MAX_LEVELS
               ? net->level_rows[level]
               : 0;
}

/* The map of conv or pool layer i: an existing one of the same key, or a new bounded map. */
static vc_status setup_map(vc_net *net, struct vc_net_graph *g, int32_t i)
{
    const vc_model *m = &net->model;
    const vc_net_layer *L = &m->layers[i];
    const int32_t lin = in_level(m, net->layer_level, i), lout = net->layer_level[i];
    for (int32_t k = 0; k < g->n_maps && L->op != VC_NOP_INVERSE; k++)
        if (g->maps[k].level_in == lin && same_map(&g->maps[k].desc, &L->map)) {
            g->layer_map[i] = k;
            return VC_OK;
        }
    graph_map *gm = &g->maps[g->n_maps];
    memset(gm, 0, sizeof *gm);
    gm->desc = L->map;
    gm->desc.inverse_of = NULL;
    gm->level_in = lin;
    gm->level_out = lout;
    gm->plan_rows = plan_rows(net, lout);
    gm->layer = i;
    gm->fwd = -1;
    if (L->op == VC_NOP_INVERSE) return setup_inverse(net, g, i, gm);
    graph_level *li = &g->lv[lin], *lo = &g->lv[lout];
    const int64_t max_in = li->extent;
    const int64_t max_out = L->map.type == VC_MAP_SUBM ? max_in : g->bounds.max_voxels[lout];
    const int64_t K = (int64_t)L->map.kernel[0] * L->map.kernel[1] * L->map.kernel[2];
    /* Every pair has an output row and an input row, each with at most K pairs. */
    int64_t max_pairs = (max_in < max_out ? max_in : max_out) * K;
    vc_err err = {{0}};
    vc_status s = vc_kmap_gpu_bounded_create(&gm->desc, li->shape, g->batch, max_in, max_out,
                                             max_pairs, &net->ctx->opts, &gm->b, &err);
    if (s != VC_OK)
        return vc_ctx_fail(net->ctx, s, "vc_net_set_bounds: the map of layer '%s' (level %d -> "
                           "%d): %s", L->id, lin, lout, err.msg);
    vc_kmap_gpu_bounded_view(&gm->b, &gm->view);
    g->layer_map[i] = g->n_maps++;
    if (lout != lin) {
        lo->extent = max_out;
        lo->coords = gm->b.map.out_coords;
        lo->d_count = vc_kmap_gpu_bounded_out_count(&gm->b);
        memcpy(lo->shape, gm->b.map.out_shape, sizeof lo->shape);
        lo->map = g->layer_map[i];
    }
    return VC_OK;
}

/* Per step: its result's buffer at its level's extent (an in-place affine shares its input's),
 * or its dense array. */
static vc_status setup_results(vc_net *net, struct vc_net_graph *g)
{
    const vc_model *m = &net->model;
    const size_t es = vc_dtype_size(net->dtype);
    vc_status s = VC_OK;
    for (int32_t k = 0; k < net->n_steps && s == VC_OK; k++) {
        const net_step *st = &net->steps[k];
        const vc_net_layer *L = &m->layers[st->head];
        const int32_t r = st->last;
        if (L->op == VC_NOP_DENSE) {
            const int32_t lv = in_level(m, net->layer_level, st->head);
            const graph_level *l = &g->lv[lv];
            const int64_t ch = L->inputs[0] == VC_NET_INPUT ? m->in_channels
                                                            : m->layers[L->inputs[0]].channels;
            int64_t *sh = g->dense_shape[r];
            if (L->bcdhw) {
                int64_t v[5] = {g->batch, ch, l->shape[0], l->shape[1], l->shape[2]};
                memcpy(sh, v, sizeof v);
                g->dense_ndim[r] = 5;
            } else {
                int64_t v[4] = {g->batch, ch * l->shape[0], l->shape[1], l->shape[2]};
                memcpy(sh, v, sizeof v);
                g->dense_ndim[r] = 4;
            }
            s = dev_buf(net, "a dense output", (int64_t)g->batch * ch * l->shape[0],
                        (int64_t)l->shape[1] * l->shape[2], es, &g->dense[r]);
            continue;
        }
        const int32_t in = L->inputs[0];
        const int is_affine = L->op == VC_NOP_BATCHNORM ||
                              ((L->op == VC_NOP_RELU || L->op == VC_NOP_LEAKY_RELU) &&
                               st->last == st->head);
        if (is_affine && in != VC_NET_INPUT && m->layers[in].readers == 1) {
            g->buf[r] = g->buf[in];
            continue;
        }
        s = dev_buf(net, m->layers[r].id, g->lv[net->layer_level[r]].extent,
                    m->layers[r].channels, es, &g->buf[r]);
        if (s == VC_OK) g->buf_owned[r] = 1;
    }
    return s;
}

static vc_status setup_tables(vc_net *net, struct vc_net_graph *g)
{
    const size_t n = (size_t)net->model.n_layers;
    g->maps = calloc(n ? n : 1, sizeof *g->maps);
    g->layer_map = malloc((n ? n : 1) * sizeof *g->layer_map);
    g->buf = calloc(n ? n : 1, sizeof *g->buf);
    g->buf_owned = calloc(n ? n : 1, 1);
    g->dense = calloc(n ? n : 1, sizeof *g->dense);
    g->dense_shape = calloc(n ? n : 1, sizeof *g->dense_shape);
    g->dense_ndim = calloc(n ? n : 1, sizeof *g->dense_ndim);
    g->views = calloc((size_t)net->model.n_outputs + 1, sizeof *g->views);
    g->ev = calloc(n + 1 + VC_GRAPH_MAP_STREAMS, sizeof *g->ev);
    if (!g->maps || !g->layer_map || !g->buf || !g->buf_owned || !g->dense || !g->dense_shape ||
        !g->dense_ndim || !g->views || !g->ev)
        return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_set_bounds: out of memory");
    for (size_t i = 0; i < n; i++) g->layer_map[i] = -1;
    return VC_OK;
}

/* The status block: each level's count, then each map's VC_KMAP_GPU_STATUS_WORDS words. */
static vc_status setup_status(vc_net *net, struct vc_net_graph *g)
{
    const size_t words = (size_t)g->n_levels + (size_t)g->n_maps * VC_KMAP_GPU_STATUS_WORDS;
    if (g->n_levels + g->n_maps > VC_FRAME_GATHER_MAX)
        return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "vc_net_set_bounds: %d levels and %d "
                           "maps: graph mode gathers at most %d status blocks", g->n_levels,
                           g->n_maps, VC_FRAME_GATHER_MAX);
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, words * sizeof(int64_t), cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&d, h, 0);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&g->cap_stream, cudaStreamNonBlocking);
    for (int i = 0; i < VC_GRAPH_MAP_STREAMS && e == cudaSuccess; i++)
        e = cudaStreamCreateWithFlags(&g->map_stream[i], cudaStreamNonBlocking);
    for (int32_t k = 0; k < g->n_maps + 1 + VC_GRAPH_MAP_STREAMS && e == cudaSuccess; k++)
        e = cudaEventCreateWithFlags(&g->ev[k], cudaEventDisableTiming);
    if (e != cudaSuccess) {
        if (h) cudaFreeHost(h);
        cudaGetLastError();
        return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_set_bounds: the status block: %s",
                           cudaGetErrorString(e));
    }
    memset(h, 0, words * sizeof(int64_t));
    g->stat_host = h;
    g->stat_dev = d;
    return VC_OK;
}

vc_status vc_graph_setup(vc_net *net, struct vc_net_graph *g, int32_t batch)
{
    const vc_model *m = &net->model;
    g->batch = batch;
    g->n_levels = net->n_levels;
    g->arena.ctx = net->ctx;
    g->arena_alloc.alloc = arena_alloc;
    g->arena_alloc.free = arena_free;
    g->arena_alloc.user = &g->arena;
    g->opts = net->ctx->opts;
    g->opts.allocator = &g->arena_alloc;
    g->opts.choice = NULL;
    vc_status s = setup_tables(net, g);
    if (s == VC_OK) s = setup_input(net, g);
    for (int32_t i = 0; i < m->n_layers && s == VC_OK; i++)
        if (has_map(&m->layers[i])) s = setup_map(net, g, i);
    if (s == VC_OK) s = setup_results(net, g);
    if (s == VC_OK) s = setup_status(net, g);
    /* Every allocation above was stream ordered: done before a frame runs on another stream. */
    if (s == VC_OK && cudaStreamSynchronize(net->ctx->stream) != cudaSuccess)
        s = vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_set_bounds: %s",
                        cudaGetErrorString(cudaGetLastError()));
    if (s != VC_OK) {
        char msg[sizeof net->ctx->err.msg];
        memcpy(msg, net->ctx->err.msg, sizeof msg);
        vc_graph_release(net, g);
        vc_ctx_fail(net->ctx, s, "%s", msg);
    }
    return s;
}

void vc_graph_release(vc_net *net, struct vc_net_graph *g)
{
    vc_context *ctx = net->ctx;
    cudaStreamSynchronize(ctx->stream);
    for (int i = 0; i < VC_GRAPH_MAP_STREAMS; i++) /* a frame that failed unjoined */
        if (g->map_stream[i]) cudaStreamSynchronize(g->map_stream[i]);
    for (int k = 0; k < 2; k++)
        if (g->exec[k]) cudaGraphExecDestroy(g->exec[k]);
    for (int32_t i = 0; g->views && i < net->model.n_outputs; i++) vc_tensor_destroy(g->views[i]);
    for (int32_t k = 0; k < g->n_maps; k++) {
        vc_kmap_gpu_bounded_destroy(&g->maps[k].b);
    }
    for (int32_t i = 0; i < net->model.n_layers; i++) {
        if (g->buf && g->buf_owned && g->buf_owned[i])
            vc_mem_free(ctx, g->buf[i], VC_MEMORY_DEVICE);
        if (g->dense) vc_mem_free(ctx, g->dense[i], VC_MEMORY_DEVICE);
    }
    if (g->has_vox) vc_voxelize_gpu_bounded_destroy(&g->vox);
    vc_mem_free(ctx, g->pts, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, g->pts_count, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, g->own_coords, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, g->own_feats, VC_MEMORY_DEVICE);
    vc_mem_free(ctx, g->own_count, VC_MEMORY_DEVICE);
    arena_release(&g->arena);
    if (g->stat_host) cudaFreeHost(g->stat_host);
    if (g->cap_stream) cudaStreamDestroy(g->cap_stream);
    for (int i = 0; i < VC_GRAPH_MAP_STREAMS; i++)
        if (g->map_stream[i]) cudaStreamDestroy(g->map_stream[i]);
    for (int32_t k = 0; g->ev && k < net->model.n_layers + 1 + VC_GRAPH_MAP_STREAMS; k++)
        if (g->ev[k]) cudaEventDestroy(g->ev[k]);
    free(g->ev);
    cudaStreamSynchronize(ctx->stream);
    cudaGetLastError();
    free(g->maps);
    free(g->layer_map);
    free(g->buf);
    free(g->buf_owned);
    free(g->dense);
    free(g->dense_shape);
    free(g->dense_ndim);
    free(g->views);
    vc_net_bounds keep = g->bounds;
    memset(g, 0, sizeof *g);
    g->bounds = keep;
}

void vc_net_graph_free(vc_net *net)
{
    if (!net->graph) return;
    vc_graph_release(net, net->graph);
    free(net->graph);
    net->graph = NULL;
}

#else /* no CUDA: graph mode is never entered (vc_net_set_bounds refuses) */

void vc_net_graph_free(vc_net *net) { (void)net; }

#endif
