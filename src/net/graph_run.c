/* src/net/graph_run.c - the frame of a net's graph mode (graph.h): the input copied into the
 * fixed buffers and its count written by a kernel, then the frame queued - the bounded
 * voxelization (points), each map's bounded build over its input level's device count, every
 * step over its level's extent (convs through vc_conv_gpu_bounded, pools over the map's view,
 * the tensor operations over extent rows, the dense output scattering the live rows), and one
 * gather of every status word into mapped host memory. The first frame of each input kind
 * (voxels, points) runs eagerly and is then captured as a CUDA graph; later frames replay it.
 * Nothing here waits for the device except the frame's one check (frame_check): on the first
 * output call after a run, or at once for the per-call runs of graph_auto.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/graph.h"

#ifdef VOXCONV_HAVE_CUDA
#include "conv/conv_gpu.h"
#include "core/dtype.h"
#include "core/elementwise.h"
#include "pool/pool.h"
#include "tensor/tensor_ops.h"

typedef struct vc_net_graph net_graph;

static vc_status step_fail(vc_net *net, const net_step *st, vc_status s, const vc_err *err)
{
    const vc_net_layer *L = &net->model.layers[st->head];
    return vc_ctx_fail(net->ctx, s, "vc_net_run: layer '%s' (%s): %s", L->id, st->op, err->msg);
}

static vc_status cuda_fail(vc_net *net, cudaError_t e, const char *what)
{
    cudaGetLastError();
    return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: %s: %s", what, cudaGetErrorString(e));
}

/* Whether map k makes its output level (a new-output map; SUBM and INVERSE maps write rows of
 * levels that exist). */
static int makes_level(const net_graph *g, int32_t k)
{
    return g->lv[g->maps[k].level_out].map == k;
}

/* Every map's bounded build over its input level's live rows, in creation order (a level's
 * maker before the maps on it), forked from s onto two map streams: the maps that make levels
 * in a chain on map_stream[0], the others (the subm maps of each level, the inverses) on
 * map_stream[1], each waiting only for the map that makes its input level (for an inverse, its
 * forward map: setup_inverse checks it). Deeper levels' maps build while the shallower levels' convs run, and a
 * level's own maps while the next level is made. No more than two builds run at once: a
 * build's sort blocks wait at barriers for one another (kmap/sort_pairs.cu, at most one per
 * SM a build), which stays deadlock-free while every waiting block of every build in flight
 * fits on the device at once. Event k marks map k built. */
static vc_status queue_maps(vc_net *net, net_graph *g, cudaStream_t s)
{
    const int32_t fork = g->n_maps;
    cudaError_t e = cudaEventRecord(g->ev[fork], s);
    for (int i = 0; i < VC_GRAPH_MAP_STREAMS && e == cudaSuccess; i++)
        e = cudaStreamWaitEvent(g->map_stream[i], g->ev[fork], 0);
    if (e != cudaSuccess) return cuda_fail(net, e, "forking the map builds");
    for (int32_t k = 0; k < g->n_maps; k++) {
        graph_map *gm = &g->maps[k];
        const graph_level *li = &g->lv[gm->level_in];
        const int side = !makes_level(g, k);
        cudaStream_t ms = g->map_stream[side];
        /* the maker of the input level runs on map_stream[0]: the other stream waits for it */
        if (li->map >= 0 && side != 0 && (e = cudaStreamWaitEvent(ms, g->ev[li->map], 0)))
            return cuda_fail(net, e, "ordering the map builds");
        vc_err err = {{0}};
        /* an inverse after the map it inverts (created, so queued, before it) */
        vc_status st = gm->fwd >= 0 ? vc_kmap_build_gpu_bounded_inverse(
                                          &gm->b, &g->maps[gm->fwd].b, ms, &err)
                                    : vc_kmap_build_gpu_bounded_dev(&gm->b, li->coords,
                                                                    li->d_count, ms, &err);
        if (st != VC_OK)
            return vc_ctx_fail(net->ctx, st, "vc_net_run: the map of layer '%s': %s",
                               net->model.layers[gm->layer].id, err.msg);
        if ((e = cudaEventRecord(g->ev[k], ms)) != cudaSuccess)
            return cuda_fail(net, e, "marking a map built");
        gm->waited = 0;
        gm->order_stale = 1;
    }
    return VC_OK;
}

/* s waits for map k (once a frame). */
static vc_status wait_map(vc_net *net, net_graph *g, int32_t k, cudaStream_t s)
{
    if (g->maps[k].waited) return VC_OK;
    cudaError_t e = cudaStreamWaitEvent(s, g->ev[k], 0);
    if (e != cudaSuccess) return cuda_fail(net, e, "waiting for a map");
    g->maps[k].waited = 1;
    return VC_OK;
}

static vc_status queue_conv(vc_net *net, net_graph *g, const net_step *st, cudaStream_t s)
{
    const vc_net_layer *L = &net->model.layers[st->head];
    graph_map *gm = &g->maps[g->layer_map[st->head]];
    vc_status r = wait_map(net, g, g->layer_map[st->head], s);
    if (r != VC_OK) return r;
    vc_conv_args a;
    memset(&a, 0, sizeof a);
    a.map = &gm->view;
    a.map_cache = &gm->view;
    a.in = vc_graph_data(net, L->inputs[0]);
    a.in_dtype = net->dtype;
    a.c_in = L->in_channels;
    a.out = g->buf[st->last];
    a.out_dtype = net->dtype;
    a.c_out = L->channels;
    a.weights = net->ls[st->head].weights;
    a.w_dtype = net->dtype;
    a.bias = net->ls[st->head].bias;
    a.residual = st->residual == NO_RESIDUAL ? NULL : vc_graph_data(net, st->residual);
    a.res_dtype = net->dtype;
    a.act = st->act;
    a.slope = st->slope;
    vc_err err = {{0}};
    r = vc_conv_gpu_bounded(&a, 0, &g->opts, vc_kmap_gpu_bounded_out_count(&gm->b),
                            gm->plan_rows, &gm->order_stale, s, &err);
    return r == VC_OK ? VC_OK : step_fail(net, st, r, &err);
}

/* A max / average pool over its bounded map's view: tail outputs have no taps (they get 0). */
static vc_status queue_pool(vc_net *net, net_graph *g, const net_step *st, cudaStream_t s)
{
    const vc_net_layer *L = &net->model.layers[st->head];
    const int32_t k = g->layer_map[st->head];
    vc_status q = wait_map(net, g, k, s);
    if (q != VC_OK) return q;
    vc_err err = {{0}};
    q = vc_pool_gpu(&g->maps[k].view, L->op == VC_NOP_MAXPOOL ? VC_POOL_MAX : VC_POOL_AVG,
                    vc_graph_data(net, L->inputs[0]), net->dtype, L->channels, g->buf[st->last],
                    &g->opts, s, &err);
    return q == VC_OK ? VC_OK : step_fail(net, st, q, &err);
}

/* BN apart, a lone activation, add, concat, dense: over the level's extent rows (tail rows
 * compute garbage nobody reads), dense over the live rows (device count). */
static vc_status queue_tensor_op(vc_net *net, net_graph *g, const net_step *st, cudaStream_t s)
{
    const vc_model *m = &net->model;
    const vc_net_layer *L = &m->layers[st->head];
    const int32_t r = st->last, in = L->inputs[0];
    const size_t es = vc_dtype_size(net->dtype);
    vc_err err = {{0}};
    vc_status q = VC_OK;
    if (L->op == VC_NOP_DENSE) {
        const graph_level *l = &g->lv[in == VC_NET_INPUT ? 0 : net->layer_level[in]];
        const int64_t ch = in == VC_NET_INPUT ? m->in_channels : m->layers[in].channels;
        if (l->map >= 0 && (q = wait_map(net, g, l->map, s)) != VC_OK) return q;
        q = vc_to_dense_gpu_dev(l->coords, l->extent, l->d_count, l->shape, g->batch,
                                vc_graph_data(net, in), net->dtype, ch, g->dense[r], net->dtype,
                                s, &err);
        return q == VC_OK ? VC_OK : step_fail(net, st, q, &err);
    }
    const int64_t rows = g->lv[net->layer_level[r]].extent, ch = m->layers[r].channels;
    if (L->op == VC_NOP_ADD) {
        q = vc_add_gpu(vc_graph_data(net, in), vc_graph_data(net, L->inputs[1]), g->buf[r],
                       net->dtype, rows * ch, st->act, st->slope, s, &err);
    } else if (L->op == VC_NOP_CONCAT) {
        const void *parts[VC_NET_MAX_INPUTS];
        int64_t chans[VC_NET_MAX_INPUTS];
        for (int32_t k = 0; k < L->n_inputs; k++) {
            parts[k] = vc_graph_data(net, L->inputs[k]);
            chans[k] = L->inputs[k] == VC_NET_INPUT ? m->in_channels
                                                    : m->layers[L->inputs[k]].channels;
        }
        q = vc_concat_gpu(parts, chans, L->n_inputs, rows, net->dtype, g->buf[r], s, &err);
    } else { /* BN or a lone activation, in place on its buffer (a copy of the input first) */
        const void *src = vc_graph_data(net, in);
        if (src != g->buf[r] &&
            cudaMemcpyAsync(g->buf[r], src, (size_t)(rows * ch) * es, cudaMemcpyDeviceToDevice,
                            s) != cudaSuccess)
            return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: layer '%s': copy: %s", L->id,
                               cudaGetErrorString(cudaGetLastError()));
        q = vc_affine_gpu(g->buf[r], net->dtype, rows, ch, net->ls[st->head].scale,
                          net->ls[st->head].shift, st->act, st->slope, s, &err);
    }
    return q == VC_OK ? VC_OK : step_fail(net, st, q, &err);
}

/* The whole frame on stream s (points: from the fixed points buffer), the map builds forked
 * onto the map stream and joined before the status gather. */
static vc_status queue_frame(vc_net *net, net_graph *g, cudaStream_t s, int points)
{
    vc_err err = {{0}};
    vc_status q = VC_OK;
    if (points) {
        q = vc_voxelize_gpu_bounded_run(&g->vox, g->pts, NULL, g->pts_count, s, &err);
        if (q != VC_OK)
            return vc_ctx_fail(net->ctx, q, "vc_net_run_points: voxelization: %s", err.msg);
    }
    q = queue_maps(net, g, s);
    for (int32_t k = 0; k < net->n_steps && q == VC_OK; k++) {
        const net_step *st = &net->steps[k];
        const vc_nop op = net->model.layers[st->head].op;
        q = vc_nop_is_conv(op) ? queue_conv(net, g, st, s)
            : op == VC_NOP_MAXPOOL || op == VC_NOP_AVGPOOL ? queue_pool(net, g, st, s)
                                                           : queue_tensor_op(net, g, st, s);
    }
    /* the join: the status words are the maps' too */
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < VC_GRAPH_MAP_STREAMS && q == VC_OK && e == cudaSuccess; i++)
        if ((e = cudaEventRecord(g->ev[g->n_maps + 1 + i], g->map_stream[i])) == cudaSuccess)
            e = cudaStreamWaitEvent(s, g->ev[g->n_maps + 1 + i], 0);
    if (q == VC_OK && e != cudaSuccess) q = cuda_fail(net, e, "joining the map builds");
    if (q != VC_OK) return q;
    vc_frame_gather fg;
    memset(&fg, 0, sizeof fg);
    for (int32_t l = 0; l < g->n_levels; l++) {
        fg.src[fg.n] = g->lv[l].d_count;
        fg.words[fg.n++] = 1;
    }
    for (int32_t k = 0; k < g->n_maps; k++) {
        fg.src[fg.n] = g->maps[k].b.d_status;
        fg.words[fg.n++] = VC_KMAP_GPU_STATUS_WORDS;
    }
    q = vc_frame_gather_words(&fg, g->stat_dev, s, &err);
    return q == VC_OK ? VC_OK : vc_ctx_fail(net->ctx, q, "vc_net_run: %s", err.msg);
}

/* The frame of input kind `mode` (0 voxels, 1 points): a replay, or - the first time - an eager
 * run (it settles what the first run of each kernel allocates: the arena's blocks, the maps'
 * tile orders, the GEMMs' one-time setup), then the same work captured (not run again). */
static vc_status launch(vc_net *net, int mode)
{
    net_graph *g = net->graph;
    cudaStream_t s = net->ctx->stream;
    cudaError_t e;
    if (g->exec[mode]) {
        e = cudaGraphLaunch(g->exec[mode], s);
        if (e == cudaSuccess) return VC_OK;
        cudaGetLastError();
        return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: launching the frame's graph: %s",
                           cudaGetErrorString(e));
    }
    g->arena.next = 0;
    vc_status q = queue_frame(net, g, s, mode);
    if (q != VC_OK) return q;
    g->arena.next = 0;
    g->arena.frozen = 1;
    e = cudaStreamBeginCapture(g->cap_stream, cudaStreamCaptureModeThreadLocal);
    cudaGraph_t graph = NULL;
    if (e == cudaSuccess) {
        q = queue_frame(net, g, g->cap_stream, mode);
        e = cudaStreamEndCapture(g->cap_stream, &graph);
    }
    g->arena.frozen = 0;
    if (q == VC_OK && e == cudaSuccess) e = cudaGraphInstantiate(&g->exec[mode], graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (q != VC_OK) {
        char msg[sizeof net->ctx->err.msg];
        memcpy(msg, net->ctx->err.msg, sizeof msg);
        return vc_ctx_fail(net->ctx, q, "capturing the frame: %s", msg);
    }
    if (e != cudaSuccess) {
        g->exec[mode] = NULL;
        cudaGetLastError();
        return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: capturing the frame as a CUDA "
                           "graph: %s", cudaGetErrorString(e));
    }
    return VC_OK;
}

/* After a launch: the frame is pending (or failed, its message kept for the outputs). */
static vc_status queued(vc_net *net, vc_status s, int points)
{
    net_graph *g = net->graph;
    g->pending = s == VC_OK;
    g->points_frame = points;
    g->ran = 1;
    net->ran = 1;
    g->frame_status = s;
    snprintf(g->frame_msg, sizeof g->frame_msg, "%s", s == VC_OK ? "" : net->ctx->err.msg);
    return s;
}

/* Re-allocates for another batch size; on failure the net is back to per-call runs. */
static vc_status rebatch(vc_net *net, int32_t batch)
{
    net_graph *g = net->graph;
    if (g->batch == batch) return VC_OK;
    vc_graph_release(net, g);
    vc_status s = vc_graph_setup(net, g, batch);
    if (s != VC_OK) {
        free(net->graph);
        net->graph = NULL;
    }
    return s;
}

/* The caller's features into level 0's buffer in the net's dtype. */
static vc_status copy_features(vc_net *net, const vc_tensor *in, void *dst, cudaStream_t s)
{
    const int64_t n = in->coords->count * in->channels;
    const size_t es = vc_dtype_size(net->dtype);
    vc_err err = {{0}};
    cudaError_t e = cudaSuccess;
    if (n == 0) return VC_OK;
    if (in->dtype == net->dtype) {
        e = cudaMemcpyAsync(dst, in->data, (size_t)n * es, cudaMemcpyDefault, s);
    } else if (in->memory == VC_MEMORY_DEVICE) {
        vc_status q = vc_cuda_cast(in->data, in->dtype, dst, net->dtype, n, s, &err);
        if (q != VC_OK) return vc_ctx_fail(net->ctx, q, "vc_net_run: the input: %s", err.msg);
    } else {
        /* Host features of another dtype: converted on the host, then copied (the copy waits
         * for the stream: the conversion's buffer is freed after it). */
        void *tmp = malloc((size_t)n * es);
        if (!tmp) return vc_ctx_fail(net->ctx, VC_ERR_OUT_OF_MEMORY, "vc_net_run: out of memory");
        for (int64_t i = 0; i < n; i++)
            vc_store_f32(tmp, net->dtype, i, vc_load_f32(in->data, in->dtype, i));
        e = cudaMemcpyAsync(dst, tmp, (size_t)n * es, cudaMemcpyDefault, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        free(tmp);
    }
    if (e == cudaSuccess) return VC_OK;
    cudaGetLastError();
    return vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: copying the input: %s",
                       cudaGetErrorString(e));
}

vc_status vc_net_graph_run(vc_net *net, const vc_tensor *in)
{
    const vc_coords *c = in->coords;
    vc_status s = vc_net_check_input(net, in);
    if (s != VC_OK) return s;
    s = rebatch(net, c->batch_size);
    if (s != VC_OK) return s;
    net_graph *g = net->graph;
    g->pending = 0;
    if (c->count > g->lv[0].extent)
        return queued(net, vc_ctx_fail(net->ctx, VC_ERR_CAPACITY, "vc_net_run: level 0 (the input "
                                       "voxels) has %lld rows, its bound max_voxels[0] is %lld",
                                       (long long)c->count, (long long)g->lv[0].extent), 0);
    cudaStream_t st = net->ctx->stream;
    int64_t *count = g->has_vox ? g->vox.d_count : g->own_count;
    cudaError_t e = cudaSuccess;
    if (c->count > 0)
        e = cudaMemcpyAsync(g->lv[0].coords, c->data, (size_t)c->count * 4 * sizeof(int32_t),
                            cudaMemcpyDefault, st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return queued(net, vc_ctx_fail(net->ctx, VC_ERR_CUDA, "vc_net_run: copying the input: %s",
                                       cudaGetErrorString(e)), 0);
    }
    s = copy_features(net, in, vc_graph_data(net, VC_NET_INPUT), st);
    vc_err err = {{0}};
    if (s == VC_OK && (s = vc_frame_set_count(count, c->count, st, &err)) != VC_OK)
        s = vc_ctx_fail(net->ctx, s, "vc_net_run: %s", err.msg);
    if (s == VC_OK) s = launch(net, 0);
    return queued(net, s, 0);
}

vc_status vc_net_graph_run_points(vc_net *net, const vc_points *p)
{
    const char *fn = "vc_net_run_points";
    const vc_model *m = &net->model;
    vc_status s = rebatch(net, 1);
    if (s != VC_OK) return s;
    net_graph *g = net->graph;
    g->pending = 0;
    const int32_t use = m->use_dim ? m->use_dim : p->dim;
    if (!g->has_vox)
        s = vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: the bounds give no max_points: "
                        "graph mode runs points only with vc_net_bounds.max_points set", fn);
    else if (p->batch)
        s = vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "%s: graph mode takes points of one batch "
                        "(no batch index); run per call or voxelize apart", fn);
    else if (p->dim < use || use != g->pts_dim)
        s = vc_ctx_fail(net->ctx, VC_ERR_SHAPE_MISMATCH, "%s: points have %d columns, '%s' uses "
                        "%d", fn, p->dim, m->name, g->pts_dim);
    else if (p->count < 0 || (p->count > 0 && !p->data))
        s = vc_ctx_fail(net->ctx, VC_ERR_INVALID_ARGUMENT, "%s: bad points (count %lld, data %p)",
                        fn, (long long)p->count, (const void *)p->data);
    else if (p->count > g->bounds.max_points)
        s = vc_ctx_fail(net->ctx, VC_ERR_CAPACITY, "%s: %lld points exceed the bound max_points "
                        "%lld", fn, (long long)p->count, (long long)g->bounds.max_points);
    if (s != VC_OK) return queued(net, s, 1);
    cudaStream_t st = net->ctx->stream;
    cudaError_t e = cudaSuccess;
    /* the first `use` columns of each point, host or device: one plain copy where they are
     * all the columns, else one strided copy */
    if (p->count > 0 && p->dim == use)
        e = cudaMemcpyAsync(g->pts, p->data, (size_t)p->count * (size_t)use * sizeof(float),
                            cudaMemcpyDefault, st);
    else if (p->count > 0)
        e = cudaMemcpy2DAsync(g->pts, (size_t)use * sizeof(float), p->data,
                              (size_t)p->dim * sizeof(float), (size_t)use * sizeof(float),
                              (size_t)p->count, cudaMemcpyDefault, st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return queued(net, vc_ctx_fail(net->ctx, VC_ERR_CUDA, "%s: copying the points: %s", fn,
                                       cudaGetErrorString(e)), 1);
    }
    vc_err err = {{0}};
    if ((s = vc_frame_set_count(g->pts_count, p->count, st, &err)) != VC_OK)
        s = vc_ctx_fail(net->ctx, s, "%s: %s", fn, err.msg);
    if (s == VC_OK) s = launch(net, 1);
    return queued(net, s, 1);
}

/* ---- the check and the outputs ---------------------------------------------------------- */

/* Map k's status words in the gathered block (after the level counts). */
static const int64_t *map_words(const net_graph *g, int32_t k)
{
    return g->stat_host + g->n_levels + (int64_t)k * VC_KMAP_GPU_STATUS_WORDS;
}

static int map_clean(const int64_t *w)
{
    return w[VC_KMAP_GPU_BAD_ROW] == INT64_MAX && w[VC_KMAP_GPU_N_DUP] == 0 &&
           w[VC_KMAP_GPU_FLAGS] == 0;
}

/* The first problem of the frame's maps into msg (VC_OK: none). The status words came back in
 * the gather; a map with a problem is asked again through its own check for the message. */
static vc_status check_maps(vc_net *net, net_graph *g, char *msg, size_t cap)
{
    for (int32_t k = 0; k < g->n_maps; k++) {
        const int64_t *w = map_words(g, k);
        if (map_clean(w)) continue;
        const graph_map *gm = &g->maps[k];
        const char *id = net->model.layers[gm->layer].id;
        const int32_t lo = gm->level_out;
        if ((w[VC_KMAP_GPU_FLAGS] & VC_KMAP_GPU_F_OUT_OVERFLOW) && lo != gm->level_in) {
            snprintf(msg, cap, "vc_net_run: level %d needs %lld rows, its bound max_voxels[%d] "
                     "is %lld (made by layer '%s')", lo, (long long)w[VC_KMAP_GPU_N_OUT], lo,
                     (long long)g->lv[lo].extent, id);
            return VC_ERR_CAPACITY;
        }
        vc_err err = {{0}};
        vc_status s = vc_kmap_gpu_bounded_check(&g->maps[k].b, net->ctx->stream, &err);
        snprintf(msg, cap, "vc_net_run: the map of layer '%s' (level %d -> %d): %.380s", id,
                 gm->level_in, lo, s != VC_OK ? err.msg : "status flags set");
        return s != VC_OK ? s : VC_ERR_INTERNAL;
    }
    return VC_OK;
}

/* The sparse outputs of the checked frame: views of the fixed buffers at the live counts. */
static vc_status make_views(vc_net *net, net_graph *g)
{
    const vc_model *m = &net->model;
    vc_status s = VC_OK;
    for (int32_t o = 0; o < m->n_outputs && s == VC_OK; o++) {
        vc_tensor_destroy(g->views[o]);
        g->views[o] = NULL;
        const int32_t r = m->out_layers[o];
        if (m->layers[r].dense) continue;
        const int32_t lv = net->layer_level[r];
        vc_coords *c = NULL;
        s = vc_coords_view(net->ctx, g->lv[lv].coords, g->stat_host[lv], g->lv[lv].shape,
                           g->batch, &c);
        if (s == VC_OK)
            s = vc_tensor_wrap(net->ctx, c, m->layers[r].channels, net->dtype, g->buf[r],
                               VC_MEMORY_DEVICE, &g->views[o]);
        vc_coords_destroy(c);
    }
    return s;
}

/* The frame's one synchronisation and check (once per run; later calls return its verdict). */
static vc_status frame_check(vc_net *net)
{
    net_graph *g = net->graph;
    if (!g->pending)
        return g->frame_status == VC_OK
                   ? VC_OK
                   : vc_ctx_fail(net->ctx, g->frame_status, "%s", g->frame_msg);
    g->pending = 0;
    char msg[512] = "";
    vc_status s = VC_OK;
    cudaError_t e = cudaStreamSynchronize(net->ctx->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        s = VC_ERR_CUDA;
        snprintf(msg, sizeof msg, "vc_net_run: the frame failed on the device: %s",
                 cudaGetErrorString(e));
    }
    if (s == VC_OK && g->points_frame) {
        vc_err err = {{0}};
        s = vc_voxelize_gpu_bounded_check(&g->vox, net->ctx->stream, NULL, &err);
        if (s != VC_OK)
            snprintf(msg, sizeof msg, "vc_net_run_points: level 0 (the voxels): %.440s", err.msg);
    }
    if (s == VC_OK) s = check_maps(net, g, msg, sizeof msg);
    if (s == VC_OK && (s = make_views(net, g)) != VC_OK)
        snprintf(msg, sizeof msg, "%s", net->ctx->err.msg);
    g->frame_status = s;
    snprintf(g->frame_msg, sizeof g->frame_msg, "%s", msg);
    return s == VC_OK ? VC_OK : vc_ctx_fail(net->ctx, s, "%s", msg);
}

vc_status vc_net_graph_check(vc_net *net)
{
    return frame_check(net);
}

int vc_net_graph_needs(const vc_net *net, int64_t *need)
{
    const net_graph *g = net->graph;
    int bound_only = 1, over = 0;
    for (int32_t l = 0; l < g->n_levels; l++) need[l] = g->stat_host[l];
    if (g->points_frame && g->vox.voxels_needed > need[0]) {
        need[0] = g->vox.voxels_needed;
        over |= need[0] > g->lv[0].extent;
    }
    for (int32_t k = 0; k < g->n_maps; k++) {
        const int64_t *w = map_words(g, k);
        if (map_clean(w)) continue;
        const graph_map *gm = &g->maps[k];
        const int64_t f = w[VC_KMAP_GPU_FLAGS];
        /* an inverse only carries its forward map's failure: that map's words decide */
        if (gm->fwd >= 0 && (f & VC_KMAP_GPU_F_FORWARD)) continue;
        /* outputs past the bound; the other flags such a build raises follow from it (its
         * pairs' bound follows max_out, its output table is sized for max_out keys) */
        if ((f & VC_KMAP_GPU_F_OUT_OVERFLOW) && gm->level_out != gm->level_in &&
            w[VC_KMAP_GPU_BAD_ROW] == INT64_MAX &&
            w[VC_KMAP_GPU_N_DUP] == 0) {
            if (w[VC_KMAP_GPU_N_OUT] > need[gm->level_out])
                need[gm->level_out] = w[VC_KMAP_GPU_N_OUT];
            over = 1;
        } else {
            bound_only = 0;
        }
    }
    return over && bound_only;
}

vc_status vc_net_graph_output(vc_net *net, int32_t index, vc_net_output *out)
{
    net_graph *g = net->graph;
    const vc_model *m = &net->model;
    const int32_t r = m->out_layers[index];
    const int dense = m->layers[r].dense;
    memset(out, 0, sizeof *out);
    out->name = m->out_names[index];
    out->kind = dense ? VC_NET_DENSE : VC_NET_SPARSE;
    out->dtype = dense && m->layers[r].op != VC_NOP_DENSE ? VC_DTYPE_FP32 : net->dtype;
    if (!g->ran) return VC_OK;
    vc_status s = frame_check(net);
    if (s != VC_OK) return s;
    if (!dense) {
        out->tensor = g->views[index];
        return VC_OK;
    }
    out->data = g->dense[r];
    out->ndim = g->dense_ndim[r];
    memcpy(out->shape, g->dense_shape[r], sizeof out->shape);
    return VC_OK;
}

#else /* no CUDA: never reached (vc_net_set_bounds refuses) */

vc_status vc_net_graph_check(vc_net *net)
{
    return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "vc_net_run: no graph mode without CUDA");
}

int vc_net_graph_needs(const vc_net *net, int64_t *need)
{
    (void)net;
    (void)need;
    return 0;
}

vc_status vc_net_graph_run(vc_net *net, const vc_tensor *in)
{
    (void)in;
    return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "vc_net_run: no graph mode without CUDA");
}

vc_status vc_net_graph_run_points(vc_net *net, const vc_points *points)
{
    (void)points;
    return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "vc_net_run_points: no graph mode without "
                       "CUDA");
}

vc_status vc_net_graph_output(vc_net *net, int32_t index, vc_net_output *out)
{
    (void)index;
    (void)out;
    return vc_ctx_fail(net->ctx, VC_ERR_UNSUPPORTED, "vc_net_get_output: no graph mode without "
                       "CUDA");
}

#endif
