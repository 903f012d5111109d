// kmap/bounded.cu - the bounded, graph-capturable GPU map builds (kmap_gpu.h, variant 2): sized
// once by caller-given bounds, queued without host synchronisation, checked afterwards; the
// bounded INVERSE of a bounded forward map, built from its arrays and device counts.
#include "kmap/kmap_internal.cuh"

using namespace kmap_gpu;

namespace {

// n elements of T (at least one) through the map's allocator, ordered on the legacy stream
// (create waits for it before returning, so any stream may use them).
template <typename T> cudaError_t dev_alloc_n(const vc_allocator *a, T **p, int64_t n)
{
    *p = NULL;
    return vc_dev_alloc_n(a, p, n, NULL);
}

// Output-table capacity of a bounded build: at least 8 x max_out slots, at most 1/8 full, near
// the regular build's strided table (sized for 4 x n_in keys). At half full (the capacity of
// max_out keys) the graph replay's strided insert and scatter measured much slower than the
// regular call's: the claims and lookups of keys that several inputs share walk longer probe
// sequences.
int64_t bounded_cap_out(int64_t max_out)
{
    return max_out > INT64_MAX / 8 ? 0 : vc_hash_capacity_for(4 * max_out);
}

// Sizes of a bounded build's temporaries (the same at create and at every build).
Sizes bounded_sizes(const Job &j, const vc_kmap_gpu_bounded *b)
{
    Sizes z;
    memset(&z, 0, sizeof z);
    z.cub_bytes = b->sort_bytes; // sized at create
    if (b->fwd) { // INVERSE: no hash tables, the row passes over the extent
        z.K = j.K;
        z.words = j.words;
        z.rows = b->max_out;
        return z;
    }
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(b->max_in, z.packed_in);
    z.K = j.K;
    z.words = j.words;
    if (j.new_out && b->dense) {
        z.dense_bits = b->dense;
        z.out_bound = b->max_out;
        z.rows = b->max_out;
    } else if (j.new_out) {
        z.packed_out = j.bits_out <= VC_HASH_GPU_PACKED_BITS;
        z.ukey32 = z.packed_out;
        z.key_bits = j.bits_out;
        z.cap_out = bounded_cap_out(b->max_out);
        z.ucap = b->max_out;
        z.nsort = b->max_out;
        z.end_bit_out = j.bits_out + 1; // the all-ones padding sorts after every key
        z.rows = b->max_out;
    } else {
        z.rows = b->max_in;
    }
    return z;
}

// Rows of the guarantee (kmap_gpu.h): the output extent.
int64_t extent_of(const vc_kmap_gpu_bounded *b)
{
    return b->desc.type == VC_MAP_SUBM ? b->max_in : b->max_out;
}

// The tile order of the extent's block count, allocated once at create so that every build of
// it in a captured graph (vc_kmap_tile_order_gpu on a view, vc_kmap_gpu_bounded_view) runs in
// place: the order, the kernel's costs, then its ticket, which starts at zero.
cudaError_t alloc_tile_order(vc_kmap_data *m, int64_t extent)
{
    const int64_t blocks = (extent + VC_KMAP_ORDER_ROWS - 1) / VC_KMAP_ORDER_ROWS;
    if (blocks == 0) return cudaSuccess;
    cudaError_t e = dev_alloc_n(m->alloc, &m->tile_order, 2 * blocks + 1);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(m->tile_order + 2 * blocks, 0, sizeof(int32_t), NULL);
    if (e == cudaSuccess) m->order_blocks = blocks;
    return e;
}

// Allocates t's arrays (out_coords for the new-output types, out_in [n_entries], the pairs
// [max_pairs], masks [n_words], perm and the tile order over the extent), its workspace and its
// cleared status block, then waits for the legacy stream. On failure frees what it made.
vc_status alloc_bounded(const Job &j, vc_kmap_gpu_bounded *t, int64_t n_entries,
                        int64_t n_words, vc_err *err)
{
    Sizes z = bounded_sizes(j, t);
    Bufs bf;
    memset(&bf, 0, sizeof bf);
    cudaGetLastError();
    cudaError_t e = cub_bytes_for(&z);
    t->sort_bytes = z.cub_bytes;
    const vc_allocator *a = t->map.alloc;
    vc_kmap_data *m = &t->map;
    if (e == cudaSuccess && j.new_out) e = dev_alloc_n(a, &m->out_coords, 4 * t->max_out);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->out_in, n_entries);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->offsets, (int64_t)j.K + 1);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->in_rows, t->max_pairs);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->out_rows, t->max_pairs);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->masks, n_words);
    if (e == cudaSuccess) e = dev_alloc_n(a, &m->perm, t->max_out);
    if (e == cudaSuccess) e = alloc_tile_order(m, extent_of(t));
    if (e == cudaSuccess) {
        t->workspace_bytes = carve(z, true, true, NULL, &bf);
        e = (cudaError_t)vc_dev_alloc(a, &t->workspace, t->workspace_bytes, NULL);
    }
    if (e == cudaSuccess) {
        carve(z, true, true, (char *)t->workspace, &bf);
        t->d_status = bf.scr;
        // Clear the status so that a check before any build reports nothing stale.
        e = cudaMemsetAsync(t->d_status, 0, S_WORDS * sizeof(int64_t), NULL);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(NULL);
    if (e != cudaSuccess) {
        vc_status st = vc_cuda_fail(err, e, kArea, "allocating the bounded map");
        free_map_arrays(m);
        vc_dev_free(a, t->workspace, NULL);
        t->workspace = NULL;
        return st;
    }
    m->n_in = 0;
    m->n_out = 0;
    m->n_pairs = 0;
    return VC_OK;
}

// Queues a build over the input count *d_n_in (device) or, d_n_in NULL, host_n, which the prep
// kernel then stores in the status block (S_N_IN) for every later kernel: the launches cover
// launch_n rows (the extent max_in, or host_n), each kernel bounded by the stored count.
vc_status queue_build(vc_kmap_gpu_bounded *b, const int32_t *d_in, const int64_t *d_n_in,
                      int64_t host_n, cudaStream_t s, vc_err *err)
{
    const int64_t launch_n = d_n_in ? b->max_in : host_n;
    Job j;
    vc_status st = setup_job(&j, d_in, launch_n, b->in_shape, b->batch_size, &b->desc, err);
    if (st != VC_OK) return st;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    vc_kmap_data *m = &b->map;
    Sizes z = bounded_sizes(j, b);
    Bufs bf;
    memset(&bf, 0, sizeof bf);
    carve(z, true, true, (char *)b->workspace, &bf);
    j.d_n_in = bf.scr + S_N_IN;
    const InCount ic = {d_n_in, host_n, b->max_in, !j.new_out};
    const int64_t rows = extent_of(b);
    cudaError_t e = q_prep(z, bf, 0, s, NULL, 0, ic);
    if (e == cudaSuccess)
        e = j.new_out ? q_insert(j, z, bf, s)
                      : q_insert(j, z, bf, s, NULL, m->out_in, rows * (int64_t)j.K);
    if (!j.new_out) {
        if (e == cudaSuccess) e = q_subm_lookup(j, z, bf, m->out_in, s);
    } else {
        const void *sorted = NULL; // none on the dense path
        if (e == cudaSuccess) e = q_key_sort(z, bf, false, s, &sorted);
        if (e == cudaSuccess) e = q_rank_scatter(j, z, bf, m, rows, false, sorted, NULL, s);
    }
    if (e == cudaSuccess) e = q_finish(j, bf, m, rows, false, b->max_pairs, NULL, s);
    if (e != cudaSuccess) return vc_cuda_fail(err, e, kArea, "queueing the bounded build");
    b->last_in = d_in;
    return VC_OK;
}

} // namespace

extern "C" vc_status vc_kmap_gpu_bounded_create(const vc_map_desc *d, const int32_t shape[3],
                                                int32_t batch_size, int64_t max_in,
                                                int64_t max_out, int64_t max_pairs,
                                                const vc_engine_options *opt,
                                                vc_kmap_gpu_bounded *b, vc_err *err)
{
    if (!b) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: NULL argument");
    memset(b, 0, sizeof *b);
    Job j;
    vc_status st = setup_job(&j, NULL, 0, shape, batch_size, d, err);
    if (st != VC_OK) return st;
    if (max_in < 0 || max_in > VC_MAX_ROWS || max_out < 1 || max_out > VC_MAX_ROWS ||
        max_pairs < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: bounds max_in %lld, "
                       "max_out %lld, max_pairs %lld (need 0 <= max_in, 1 <= max_out <= %lld, "
                       "1 <= max_pairs)", (long long)max_in, (long long)max_out,
                       (long long)max_pairs, (long long)VC_MAX_ROWS);
    if (!j.new_out && max_out < max_in)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: a SUBM map has as many "
                       "outputs as inputs: max_out %lld < max_in %lld", (long long)max_out,
                       (long long)max_in);
    int64_t n_entries = 0, n_words = 0;
    if (vc_mul_overflow_i64(max_out, j.K, &n_entries) ||
        vc_mul_overflow_i64(max_out, j.words, &n_words) || max_pairs > INT64_MAX / 8)
        return vc_fail(err, VC_ERR_LIMIT, "bounded kernel map: bounds overflow");
    vc_kmap_gpu_bounded t;
    memset(&t, 0, sizeof t);
    t.desc = *d;
    for (int a = 0; a < 3; a++) t.in_shape[a] = shape[a];
    t.batch_size = batch_size;
    t.max_in = max_in;
    t.max_out = max_out;
    t.max_pairs = max_pairs;
    init_header(j, &t.map);
    t.opt = opt ? *opt : vc_engine_options_default();
    t.map.alloc = t.opt.allocator;
    t.dense = dense_bits_for(j, &t.opt);
    st = alloc_bounded(j, &t, n_entries, n_words, err);
    if (st != VC_OK) return st;
    *b = t;
    return VC_OK;
}

extern "C" vc_status vc_kmap_gpu_bounded_create_inverse(const vc_kmap_gpu_bounded *fwd,
                                                        const vc_engine_options *opt,
                                                        vc_kmap_gpu_bounded *b, vc_err *err)
{
    if (!b) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded inverse map: NULL argument");
    memset(b, 0, sizeof *b);
    if (!fwd || !fwd->workspace || fwd->fwd)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded inverse map: the forward map is "
                       "not a created bounded map");
    vc_kmap_gpu_bounded t;
    memset(&t, 0, sizeof t);
    vc_kmap_data hdr = fwd->map; // its header at zero counts: the inverse's header
    hdr.n_in = hdr.n_out = hdr.n_pairs = 0;
    vc_status st = vc_kmap_inverse_header(&hdr, fwd->in_shape, fwd->batch_size, &t.map, err);
    if (st != VC_OK) return st;
    t.desc = fwd->desc;
    t.desc.type = VC_MAP_INVERSE;
    t.desc.inverse_of = NULL;
    for (int a = 0; a < 3; a++) t.in_shape[a] = fwd->map.out_shape[a];
    t.batch_size = fwd->map.out_batch_size;
    t.max_in = fwd->max_out;
    t.max_out = fwd->max_in;
    t.max_pairs = fwd->max_pairs;
    t.fwd = fwd;
    t.opt = opt ? *opt : vc_engine_options_default();
    t.map.alloc = t.opt.allocator;
    Job j;
    memset(&j, 0, sizeof j);
    j.K = t.map.volume;
    j.words = t.map.mask_words;
    int64_t n_entries = 0, n_words = 0;
    if (vc_mul_overflow_i64(t.max_out, j.K, &n_entries) ||
        vc_mul_overflow_i64(t.max_out, j.words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "bounded inverse map: bounds overflow");
    st = alloc_bounded(j, &t, n_entries, n_words, err);
    if (st != VC_OK) return st;
    *b = t;
    return VC_OK;
}

extern "C" vc_status vc_kmap_build_gpu_bounded_inverse(vc_kmap_gpu_bounded *b,
                                                       const vc_kmap_gpu_bounded *fwd,
                                                       struct CUstream_st *stream, vc_err *err)
{
    if (!b || !b->workspace || !fwd || b->fwd != fwd)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded inverse map: not created over this "
                       "forward map");
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    const cudaStream_t s = (cudaStream_t)stream;
    Job j;
    memset(&j, 0, sizeof j);
    j.K = b->map.volume;
    j.words = b->map.mask_words;
    vc_kmap_data *m = &b->map;
    const Sizes z = bounded_sizes(j, b);
    Bufs bf;
    memset(&bf, 0, sizeof bf);
    carve(z, true, true, (char *)b->workspace, &bf);
    // The output count is the forward's input count, clamped like a SUBM build's (InCount).
    const InCount ic = {fwd->d_status + S_N_IN, 0, fwd->max_in, true};
    const int64_t rows = b->max_out;
    cudaError_t e = q_prep(z, bf, 0, s, m->out_in, rows * (int64_t)j.K, ic);
    if (e == cudaSuccess)
        e = q_inverse(fwd->map.out_in, fwd->max_out * (int64_t)j.K, j.K, fwd->max_in,
                      fwd->d_status, m->out_in, bf.scr, s);
    if (e == cudaSuccess) e = q_finish(j, bf, m, rows, false, b->max_pairs, NULL, s);
    if (e != cudaSuccess) return vc_cuda_fail(err, e, kArea, "queueing the bounded inverse");
    b->last_in = NULL;
    return VC_OK;
}

extern "C" vc_status vc_kmap_build_gpu_bounded(vc_kmap_gpu_bounded *b, const int32_t *d_in,
                                               int64_t n_in, struct CUstream_st *stream,
                                               vc_err *err)
{
    if (!b || !b->workspace || b->fwd)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: not created (or an "
                       "inverse: vc_kmap_build_gpu_bounded_inverse builds it)");
    if (n_in > b->max_in)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld input rows exceed max_in "
                       "%lld", (long long)n_in, (long long)b->max_in);
    return queue_build(b, d_in, NULL, n_in, (cudaStream_t)stream, err);
}

extern "C" vc_status vc_kmap_build_gpu_bounded_dev(vc_kmap_gpu_bounded *b, const int32_t *d_in,
                                                   const int64_t *d_n_in,
                                                   struct CUstream_st *stream, vc_err *err)
{
    if (!b || !b->workspace || b->fwd)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: not created (or an "
                       "inverse: vc_kmap_build_gpu_bounded_inverse builds it)");
    if (!d_n_in)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: NULL device count");
    return queue_build(b, d_in, d_n_in, 0, (cudaStream_t)stream, err);
}

extern "C" const int64_t *vc_kmap_gpu_bounded_out_count(const vc_kmap_gpu_bounded *b)
{
    return b && b->d_status ? b->d_status + S_N_LIVE : NULL;
}

extern "C" void vc_kmap_gpu_bounded_view(const vc_kmap_gpu_bounded *b, vc_kmap_data *view)
{
    *view = b->map;
    view->n_in = b->max_in;
    view->n_out = extent_of(b);
    view->n_pairs = b->max_pairs;
}

// The check's verdict on an inverse's status flags f (its counts already in b->map).
static vc_status inverse_verdict(const vc_kmap_gpu_bounded *b, int64_t f, int64_t n_pairs,
                                 vc_err *err)
{
    const unsigned long long cap_bits = VC_KMAP_GPU_F_IN_COUNT | VC_KMAP_GPU_F_OUT_OVERFLOW |
                                        VC_KMAP_GPU_F_PAIR_OVERFLOW | VC_KMAP_GPU_F_PROBE_IN |
                                        VC_KMAP_GPU_F_PROBE_OUT;
    if (f & VC_KMAP_GPU_F_FORWARD) {
        const unsigned long long ff = (unsigned long long)f >> VC_KMAP_GPU_FORWARD_SHIFT;
        return vc_fail(err, ff & cap_bits ? VC_ERR_CAPACITY : VC_ERR_INVALID_ARGUMENT,
                       "bounded inverse map: its forward map's build failed (%s, forward flags "
                       "0x%llx): its check names the cause",
                       ff & cap_bits ? "a bound" : ff ? "a malformed build" : "bad input rows",
                       ff);
    }
    if (f & VC_KMAP_GPU_F_PAIR_OVERFLOW)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded inverse map: %lld pairs exceed max_pairs "
                       "%lld", (long long)n_pairs, (long long)b->max_pairs);
    if (f != 0)
        return vc_fail(err, VC_ERR_INTERNAL, "bounded inverse map: malformed forward map "
                       "(status flags 0x%llx)", (unsigned long long)f);
    return VC_OK;
}

extern "C" vc_status vc_kmap_gpu_bounded_check(vc_kmap_gpu_bounded *b, struct CUstream_st *stream,
                                               vc_err *err)
{
    if (!b || !b->workspace)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: not created");
    int64_t stat[S_WORDS];
    // THE synchronisation point of the bounded variant.
    cudaError_t e = read_status(b->opt.cache, b->map.alloc, b->d_status, stat,
                                (cudaStream_t)stream);
    if (e != cudaSuccess) return vc_cuda_fail(err, e, kArea, "reading the bounded map's status");
    const int64_t n_req = stat[S_N_IN], f = stat[S_FLAGS];
    const int64_t n_in = n_req < 0 ? 0 : n_req > b->max_in ? b->max_in : n_req;
    b->map.n_in = n_in;
    b->map.n_out = stat[S_N_OUT];
    b->map.n_pairs = stat[S_N_PAIRS];
    if (b->fwd) return inverse_verdict(b, f, stat[S_N_PAIRS], err);
    if ((f & VC_KMAP_GPU_F_IN_COUNT) && n_req < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "bounded kernel map: the input count %lld "
                       "is negative", (long long)n_req);
    if (f & VC_KMAP_GPU_F_IN_COUNT)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld input rows exceed max_in "
                       "%lld", (long long)n_req, (long long)b->max_in);
    vc_status st = input_error(stat, b->last_in, n_in, b->in_shape, b->batch_size, err);
    if (st != VC_OK) return st;
    if (f & VC_KMAP_GPU_F_OUT_OVERFLOW)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld output rows exceed max_out "
                       "%lld", (long long)stat[S_N_OUT], (long long)b->max_out);
    if (f & (VC_KMAP_GPU_F_PROBE_IN | VC_KMAP_GPU_F_PROBE_OUT))
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: a hash table overflowed its "
                       "probe bound (flags 0x%llx)", (unsigned long long)f);
    if (f & VC_KMAP_GPU_F_PAIR_OVERFLOW)
        return vc_fail(err, VC_ERR_CAPACITY, "bounded kernel map: %lld pairs exceed max_pairs "
                       "%lld", (long long)stat[S_N_PAIRS], (long long)b->max_pairs);
    if (f != 0)
        return vc_fail(err, VC_ERR_INTERNAL, "bounded kernel map: status flags 0x%llx",
                       (unsigned long long)f);
    return VC_OK;
}

extern "C" void vc_kmap_gpu_bounded_destroy(vc_kmap_gpu_bounded *b)
{
    if (!b) return;
    if (b->workspace || b->map.out_in) cudaDeviceSynchronize();
    free_map_arrays(&b->map);
    vc_dev_free(b->map.alloc, b->workspace, NULL);
    cudaGetLastError();
    memset(b, 0, sizeof *b);
}
