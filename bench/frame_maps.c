/* bench/frame_maps.c - a frame's maps as one job: bounded builds captured as one CUDA graph,
 * serial or forked onto two streams (frame_maps.h). */
#include "frame_maps.h"

#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kmap/kmap_gpu.h"

/* One map of the frame, in creation order (a level's maker before the maps on the level, a
 * forward map before its inverse). */
typedef struct frame_map {
    vc_map_desc desc;         /* type and kernel (INVERSE: fwd names the forward map)         */
    int32_t in_level;         /* 0: the frame's input; L > 0: the level map maker[L] makes      */
    int32_t out_level;        /* the level it makes; -1: none (SUBM, INVERSE)                   */
    int32_t fwd;              /* INVERSE: index of its forward map here; else -1                */
    int32_t in_shape[3];
    const vc_kmap_data *ref;  /* its regular build (vc_kmap_build_gpu / vc_kmap_inverse_gpu)    */
} frame_map;

typedef struct fm_level {
    const int32_t *coords;    /* device [extent, 4]                                            */
    const int64_t *count;     /* device: its live rows                                         */
    int64_t extent;
} fm_level;

typedef struct fm_state {
    const frame_map *maps;
    int32_t n;
    vc_kmap_gpu_bounded *b;
    vc_kmap_data *view;
    fm_level lv[MAX_LEVELS];
    int32_t maker[MAX_LEVELS]; /* the map that makes each level (-1: level 0)                   */
} fm_state;

static int64_t extent_of(int64_t rows) { return rows + rows / 4 + 64; }

/* Creates every bounded map (extents from the regular builds' counts) and the levels. */
static void fm_create(fm_state *st, const int32_t *coords0, int64_t n0,
                      const vc_engine_options *opt, cudaStream_t s)
{
    int32_t *c0;
    int64_t *cnt0;
    const int64_t e0 = extent_of(n0);
    CUDA_CHECK(cudaMalloc((void **)&c0, (size_t)e0 * 16));
    CUDA_CHECK(cudaMalloc((void **)&cnt0, sizeof(int64_t)));
    CUDA_CHECK(cudaMemsetAsync(c0, 0, (size_t)e0 * 16, s));
    CUDA_CHECK(cudaMemcpyAsync(c0, coords0, (size_t)n0 * 16, cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(cnt0, &n0, sizeof n0, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    st->lv[0] = (fm_level){c0, cnt0, e0};
    st->maker[0] = -1;
    for (int32_t i = 0; i < st->n; i++) {
        const frame_map *m = &st->maps[i];
        vc_err err = {{0}};
        vc_status r;
        if (m->fwd >= 0) {
            r = vc_kmap_gpu_bounded_create_inverse(&st->b[m->fwd], opt, &st->b[i], &err);
        } else {
            const int64_t max_in = st->lv[m->in_level].extent, K = m->ref->volume;
            const int64_t max_out = m->out_level < 0 ? max_in : extent_of(m->ref->n_out);
            const int64_t max_pairs = (max_in < max_out ? max_in : max_out) * K;
            r = vc_kmap_gpu_bounded_create(&m->desc, m->in_shape, 1, max_in, max_out, max_pairs,
                                           opt, &st->b[i], &err);
        }
        DIE_IF(r != VC_OK, "frame maps: map %d: %s", (int)i, err.msg);
        vc_kmap_gpu_bounded_view(&st->b[i], &st->view[i]);
        const int32_t L = m->out_level;
        if (L >= 0) {
            st->lv[L] = (fm_level){st->b[i].map.out_coords, vc_kmap_gpu_bounded_out_count(&st->b[i]),
                                   st->b[i].max_out};
            st->maker[L] = i;
        }
    }
}

/* Queues the frame's builds: serial on s0, or forked (level makers on s0, the rest on s1). */
static void fm_queue(fm_state *st, int forked, cudaStream_t s0, cudaStream_t s1, cudaEvent_t *ev)
{
    const int32_t n = st->n;
    int on1[MAX_MAPS] = {0};
    CUDA_CHECK(cudaEventRecord(ev[n], s0));
    CUDA_CHECK(cudaStreamWaitEvent(s1, ev[n], 0));
    for (int32_t i = 0; i < n; i++) {
        const frame_map *m = &st->maps[i];
        on1[i] = forked && m->out_level < 0;
        cudaStream_t s = on1[i] ? s1 : s0;
        /* the map that makes the input level (an inverse's: its forward map), on s0 */
        const int32_t dep = m->fwd >= 0 ? m->fwd : st->maker[m->in_level];
        if (dep >= 0 && on1[i]) CUDA_CHECK(cudaStreamWaitEvent(s, ev[dep], 0));
        vc_err err = {{0}};
        vc_status r = m->fwd >= 0 ? vc_kmap_build_gpu_bounded_inverse(&st->b[i], &st->b[m->fwd],
                                                                      s, &err)
                                  : vc_kmap_build_gpu_bounded_dev(&st->b[i], st->lv[m->in_level].coords,
                                                                  st->lv[m->in_level].count, s, &err);
        DIE_IF(r != VC_OK, "frame maps: build %d: %s", (int)i, err.msg);
        if (m->ref->tile_order) /* the layers took one: so does the frame */
            DIE_IF(vc_kmap_tile_order_gpu(&st->view[i], s, &err) != VC_OK, "tile order: %s",
                   err.msg);
        CUDA_CHECK(cudaEventRecord(ev[i], s));
    }
    CUDA_CHECK(cudaEventRecord(ev[n + 1], s1));
    CUDA_CHECK(cudaStreamWaitEvent(s0, ev[n + 1], 0));
}

/* Rows [0, rows) of two device int32 arrays of `cols` columns: 1 where they differ. */
static int differ(const int32_t *a, const int32_t *b, int64_t rows, int64_t cols)
{
    const size_t bytes = (size_t)(rows * cols) * 4;
    if (bytes == 0) return 0;
    int32_t *ha = malloc(bytes), *hb = malloc(bytes);
    DIE_IF(!ha || !hb, "out of memory");
    CUDA_CHECK(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    const int d = memcmp(ha, hb, bytes) != 0;
    free(ha);
    free(hb);
    return d;
}

/* Maps whose last build differs from its regular one (counts, out_in, perm, out_coords). */
static int fm_mismatches(fm_state *st, cudaStream_t s)
{
    int bad = 0;
    for (int32_t i = 0; i < st->n; i++) {
        const vc_kmap_data *r = st->maps[i].ref;
        vc_err err = {{0}};
        vc_kmap_gpu_bounded *b = &st->b[i];
        int d = vc_kmap_gpu_bounded_check(b, s, &err) != VC_OK;
        d = d || b->map.n_out != r->n_out || b->map.n_pairs != r->n_pairs;
        d = d || differ(b->map.out_in, r->out_in, r->n_out, r->volume) ||
            differ(b->map.perm, r->perm, r->n_out, 1);
        if (!d && r->out_coords) d = differ(b->map.out_coords, r->out_coords, r->n_out, 4);
        if (d) printf("frame maps: map %d differs from its regular build%s%s\n", (int)i,
                      err.msg[0] ? ": " : "", err.msg);
        bad += d;
    }
    return bad;
}

/* Captures the frame in one schedule and returns the median of `runs` replays (L2 flushed
 * before each); checks the maps after the warm-up replays. */
static double fm_time(fm_state *st, int forked, int runs, cudaStream_t s0, cudaStream_t s1,
                      cudaEvent_t *ev, int *mismatches)
{
    cudaGraph_t g;
    cudaGraphExec_t x;
    CUDA_CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    fm_queue(st, forked, s0, s1, ev);
    CUDA_CHECK(cudaStreamEndCapture(s0, &g));
    CUDA_CHECK(cudaGraphInstantiate(&x, g, 0));
    bench_timer t;
    bench_timer_init(&t, s0);
    float *ms = malloc(sizeof(float) * (size_t)runs);
    DIE_IF(!ms, "out of memory");
    for (int r = -3; r < runs; r++) {
        if (r == 0) *mismatches += fm_mismatches(st, s0);
        bench_flush_l2(s0);
        bench_timer_start(&t);
        CUDA_CHECK(cudaGraphLaunch(x, s0));
        bench_timer_stop(&t, r >= 0 ? &ms[r] : NULL);
    }
    const double med = median(ms, runs);
    free(ms);
    bench_timer_free(&t);
    CUDA_CHECK(cudaGraphExecDestroy(x));
    CUDA_CHECK(cudaGraphDestroy(g));
    return med;
}

/* Times maps[0..n) over the frame's input coords0 [n0, 4] (device). */
static void frame_maps_time(const int32_t *coords0, int64_t n0, const frame_map *maps, int32_t n,
                            int runs, const vc_engine_options *opt, cudaStream_t s,
                            frame_maps_result *res)
{
    DIE_IF(n < 1 || n > MAX_MAPS, "frame maps: %d maps", (int)n);
    fm_state st;
    memset(&st, 0, sizeof st);
    st.maps = maps;
    st.n = n;
    st.b = calloc((size_t)n, sizeof *st.b);
    st.view = calloc((size_t)n, sizeof *st.view);
    cudaEvent_t *ev = calloc((size_t)n + 2, sizeof *ev);
    DIE_IF(!st.b || !st.view || !ev, "out of memory");
    for (int32_t i = 0; i < n + 2; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    cudaStream_t s1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    fm_create(&st, coords0, n0, opt, s);
    /* the tile orders are built once outside capture (their first build allocates nothing on a
       view, but the view's kernel scratch is set up by it) */
    fm_queue(&st, 0, s, s1, ev);
    CUDA_CHECK(cudaStreamSynchronize(s));
    res->mismatches = 0;
    res->serial_ms = fm_time(&st, 0, runs, s, s1, ev, &res->mismatches);
    res->forked_ms = fm_time(&st, 1, runs, s, s1, ev, &res->mismatches);
    for (int32_t i = 0; i < n; i++) vc_kmap_gpu_bounded_destroy(&st.b[i]);
    CUDA_CHECK(cudaFree((void *)st.lv[0].coords));
    CUDA_CHECK(cudaFree((void *)st.lv[0].count));
    for (int32_t i = 0; i < n + 2; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    CUDA_CHECK(cudaStreamDestroy(s1));
    free(ev);
    free(st.b);
    free(st.view);
}

void frame_maps_of(const frame_state *fs, const int *map_of, int n_layers, int runs,
                   const vc_engine_options *opt, cudaStream_t s, frame_maps_result *res)
{
    int used[MAX_MAPS] = {0}, idx[MAX_MAPS], lvl[MAX_LEVELS], n = 0, nlv = 1;
    for (int i = 0; i < n_layers; i++) used[map_of[i]] = 1;
    for (int e = fs->nmaps - 1; e >= 0; e--) { /* dependencies come earlier */
        const map_entry *me = &fs->maps[e];
        if (!used[e]) continue;
        if (me->type == VC_MAP_INVERSE) used[me->fwd] = 1;
        for (int d = 0; d < e; d++)
            if (fs->maps[d].out_level == me->in_level && fs->maps[d].type != VC_MAP_SUBM &&
                fs->maps[d].type != VC_MAP_INVERSE)
                used[d] = 1;
    }
    frame_map fm[MAX_MAPS];
    lvl[0] = 0;
    for (int e = 0; e < fs->nmaps; e++) {
        if (!used[e]) continue;
        const map_entry *me = &fs->maps[e];
        const int makes = me->type != VC_MAP_SUBM && me->type != VC_MAP_INVERSE;
        idx[e] = n;
        fm[n] = (frame_map){desc_of(me->type, me->k, me->s, me->p),
                            me->type == VC_MAP_INVERSE ? 0 : lvl[me->in_level], makes ? nlv : -1,
                            me->type == VC_MAP_INVERSE ? idx[me->fwd] : -1,
                            {0, 0, 0}, &me->m};
        memcpy(fm[n].in_shape, fs->lv[me->in_level].shape, sizeof fm[n].in_shape);
        if (makes) lvl[me->out_level] = nlv++;
        n++;
    }
    frame_maps_time(fs->lv[0].coords, fs->lv[0].n, fm, n, runs, opt, s, res);
}
