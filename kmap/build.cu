// kmap/build.cu - the regular GPU map builds (kmap_gpu.h, variant 1): the workspace, the clear
// of the tables and the status block, its read-back, the SUBM and new-output drivers, the
// INVERSE, and the public entry points.
#include <chrono>

#include "kmap/kmap_internal.cuh"

namespace kmap_gpu {

namespace {

struct Fill {
    unsigned long long *p;
    int64_t words;
};

// Clears up to four regions to all ones (odd: one more int32 to -1, or NULL) and one to zero,
// and resets the status block, with a bounded build's input count (InCount).
__global__ void prep_kernel(Fill a, Fill b, Fill c, Fill d, int32_t *odd, Fill z, int64_t *scr,
                            int64_t n_out_init, InCount ic)
{
    pdl_enter();
    const int64_t t0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    if (t0 == 0) {
        int64_t n_out = n_out_init, n_in = 0, flags = 0;
        if (ic.max >= 0) {
            n_in = ic.d ? *ic.d : ic.host;
            if (n_in < 0 || n_in > ic.max) flags = VC_KMAP_GPU_F_IN_COUNT;
            if (ic.subm) n_out = n_in < 0 ? 0 : n_in > ic.max ? ic.max : n_in;
        }
        scr[S_BAD_ROW] = INT64_MAX;
        scr[S_FIRST_DUP] = INT64_MAX;
        scr[S_N_DUP] = 0;
        scr[S_N_OUT] = n_out;
        scr[S_N_PAIRS] = 0;
        scr[S_FLAGS] = flags;
        scr[S_N_LIVE] = n_out;
        scr[S_N_IN] = n_in;
        if (odd) *odd = -1;
    }
    for (int64_t i = t0; i < a.words; i += step) a.p[i] = ~0ull;
    for (int64_t i = t0; i < b.words; i += step) b.p[i] = ~0ull;
    for (int64_t i = t0; i < c.words; i += step) c.p[i] = ~0ull;
    for (int64_t i = t0; i < d.words; i += step) d.p[i] = ~0ull;
    for (int64_t i = t0; i < z.words; i += step) z.p[i] = 0ull;
}

// The read-back's posting where the build's own kernels do not post it (q_finish): one
// thread (a launch of one), queued behind the stage (post_status).
__global__ void status_kernel(const int64_t *scr, StatusPost post)
{
    pdl_enter();
    post_status(scr, post);
}

// INVERSE: out_in[q, k] = p for every forward entry (p -> q at k). out_in starts at -1.
// fwd_scr NULL: the regular build, n_entries and fwd_n_in exact. Else the bounded build: the
// forward map's status block, which bounds the entries by its live output rows (N_LIVE x K of
// the extent's n_entries) and the rows by its input count (N_IN, clamped to fwd_n_in, its
// max_in); a forward build that failed (flags, bad input rows) leaves out_in all -1 and raises
// F_FORWARD with its flags above VC_KMAP_GPU_FORWARD_SHIFT; thread 0 stores the inverse's
// input count (the forward's N_LIVE) at S_N_IN.
__global__ void inverse_kernel(const int32_t *fwd_out_in, int64_t n_entries, int32_t K,
                               int64_t fwd_n_in, const int64_t *fwd_scr, int32_t *out_in,
                               int64_t *scr)
{
    if (fwd_scr) {
        const int64_t ff = fwd_scr[S_FLAGS];
        const bool bad = ff != 0 || fwd_scr[S_N_DUP] != 0 || fwd_scr[S_BAD_ROW] != INT64_MAX;
        const int64_t live = dev_count(fwd_scr + S_N_LIVE, n_entries / K);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            scr[S_N_IN] = live;
            if (bad)
                raise_flag(scr, VC_KMAP_GPU_F_FORWARD |
                                    ((unsigned long long)ff << VC_KMAP_GPU_FORWARD_SHIFT));
        }
        if (bad) return;
        n_entries = live * K;
        fwd_n_in = dev_count(fwd_scr + S_N_IN, fwd_n_in);
    }
    GRID_LOOP(i, n_entries)
    {
        int32_t q = fwd_out_in[i];
        if (q < 0) continue;
        int64_t p = div_idx(i, K);
        int32_t k = (int32_t)(i - p * K);
        if (q >= fwd_n_in) {
            raise_flag(scr, VC_KMAP_GPU_F_BAD_ENTRY);
            continue;
        }
        int32_t old = atomicCAS(&out_in[(int64_t)q * K + k], -1, (int32_t)p);
        if (old != -1) raise_flag(scr, VC_KMAP_GPU_F_CONFLICT);
    }
}

// Stream-ordered scratch of `bytes` through the build's allocator (core/alloc.h).
cudaError_t pool_bytes(const vc_allocator *a, void **p, size_t bytes, cudaStream_t s)
{
    return (cudaError_t)vc_dev_alloc(a, p, bytes, s);
}

} // namespace

// Lays the temporaries out from `base` (NULL: just the size): the tables part (status block,
// hash tables, output-key list) and / or the rows part (sorted keys, counts, sort buffers).
size_t carve(const Sizes &z, bool tables, bool rows, char *base, Bufs *b)
{
    Carver c = {base, 0};
    if (tables) {
        b->scr = c.take<int64_t>(S_WORDS);
        b->hist = c.take<uint32_t>(2 * kMaxPasses * kMaxBins); // 16 KB: klbz follows at once
        const size_t zero_from = c.off - 2 * kMaxPasses * kMaxBins * sizeof(uint32_t);
        b->khist = base ? b->hist + kMaxPasses * kMaxBins : NULL;
        b->klbz_words = z.ucap > 0 && z.ukey32 ? key_plan(z).lb_words : 0;
        b->klbz = b->klbz_words > 0 ? c.take<unsigned long long>(b->klbz_words) : NULL;
        // the new-output types' done counter; 32 words (the carver's 256-byte alignment), so
        // that the dense path's bitmap follows it at once
        const int64_t bitmap_words = z.dense_bits ? dense_words(z) / 2 : 0;
        b->done = z.dense_bits || z.ucap > 0 ? c.take<unsigned long long>(32) : NULL;
        b->bits = bitmap_words > 0 ? (uint32_t *)c.take<unsigned long long>(bitmap_words) : NULL;
        // from hist to here, the carver's padding included
        b->zero_words = (int64_t)((c.off - zero_from) / sizeof(unsigned long long));
        b->dbase = z.dense_bits ? c.take<int32_t>(dense_groups(z)) : NULL;
        b->dtsum = z.dense_bits ? c.take<int32_t>(dense_tiles(z)) : NULL;
        b->dsub = z.dense_bits ? c.take<int32_t>(dense_tiles(z) * kRowWarps) : NULL;
        b->tin = c.take<unsigned long long>(table_words(z.cap_in, z.packed_in));
        b->tout = z.cap_out > 0 ? c.take<unsigned long long>(table_words(z.cap_out, z.packed_out))
                                : NULL;
        b->ukeys = z.ucap > 0 ? (void *)c.take<unsigned long long>(ukey_words(z.ucap, z.ukey32))
                              : NULL;
    }
    if (rows) {
        const int64_t nb = row_blocks(z.rows);
        b->usorted = z.nsort > 0
                         ? (void *)c.take<unsigned long long>(ukey_words(z.nsort, z.ukey32))
                         : NULL;
        b->cnt = c.take<int32_t>((int64_t)z.K * nb);
        b->base = c.take<int64_t>((int64_t)z.K * nb);
        b->tot = c.take<int64_t>(z.K);
        b->iota = c.take<int32_t>(z.rows);
        b->keys_a = c.take<uint32_t>(z.rows);
        b->keys_b = c.take<uint32_t>(z.rows);
        b->lbz_words = z.words == 1 ? perm_plan(z.K, z.rows).lb_words : 0;
        b->lbz = b->lbz_words > 0 ? c.take<unsigned long long>(b->lbz_words) : NULL;
        b->cub = c.take<char>((int64_t)z.cub_bytes);
        b->cub_bytes = z.cub_bytes;
    }
    return c.off + 256;
}

// minus1: an int32 array of n_minus1 entries to fill with -1 as well (INVERSE: out_in; SUBM's
// is filled in the insert's launch, q_insert), or NULL.
cudaError_t q_prep(const Sizes &z, const Bufs &b, int64_t n_out_init, cudaStream_t s,
                   int32_t *minus1, int64_t n_minus1, const InCount &ic)
{
    Fill f0 = {b.tin, z.cap_in > 0 ? table_words(z.cap_in, z.packed_in) : 0};
    Fill f1 = {b.tout, z.cap_out > 0 ? table_words(z.cap_out, z.packed_out) : 0};
    Fill f2 = {(unsigned long long *)b.ukeys, z.ucap > 0 ? ukey_words(z.ucap, z.ukey32) : 0};
    Fill f3 = {(unsigned long long *)minus1, minus1 ? n_minus1 / 2 : 0};
    int32_t *odd = minus1 && n_minus1 % 2 ? minus1 + n_minus1 - 1 : NULL;
    Fill fz = {(unsigned long long *)b.hist, b.zero_words};
    int64_t mx = f0.words > f1.words ? f0.words : f1.words;
    if (f2.words > mx) mx = f2.words;
    if (f3.words > mx) mx = f3.words;
    if (fz.words > mx) mx = fz.words;
    // a few stores per thread: a grid of at most 1024 blocks
    unsigned grid = grid_for(mx);
    if (grid > 1024) grid = 1024;
    return launch_k(b.pdl, prep_kernel, grid, kThreads, 0, s, f0, f1, f2, f3, odd, fz, b.scr,
                    n_out_init, ic);
}

// How long the host polls the read-back's sequence word before it synchronises the stream
// instead. Past it the synchronisation's later wake-up is a small part of the wait, the host
// stops spinning (a synchronisation honours the context's scheduling flags), and a failed
// kernel, which never stores the word, is reported by the synchronisation. The polling's
// gain and the bound's A/B: docs/benchmarks.md, "The read-back by a sequence word".
const std::chrono::microseconds kStatusSpin(200);

// The context's mapped pinned block for the read-back (S_WORDS words and a sequence word; made
// at its first read-back, kept in its engine cache and freed with the context:
// vc_engine_cache_free; none without a cache or where it cannot be made: dst NULL) and the
// next sequence number, not yet carried. A build takes one before it queues its stage's
// kernels (q_insert, q_finish: the one that makes the counts carries it) and hands it to
// read_status.
Posting status_post(vc_engine_cache *cache)
{
    if (cache && !cache->status_tried) {
        cache->status_tried = 1;
        void *p = NULL, *d = NULL;
        const size_t bytes = (S_WORDS + 1) * sizeof(int64_t);
        if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) ==
            cudaSuccess) {
            cache->status_pinned = (int64_t *)p;
            if (cudaHostGetDevicePointer(&d, p, 0) == cudaSuccess)
                cache->status_mapped = (int64_t *)d;
        } else if (cudaMallocHost(&p, bytes) == cudaSuccess) {
            // no mapping (a device that cannot map host memory): copies
            cache->status_pinned = (int64_t *)p;
        }
        cudaGetLastError();
    }
    Posting p = {{NULL, 0}, false};
    if (cache && cache->status_mapped) {
        p.post.dst = cache->status_mapped;
        p.post.seq = ++cache->status_seq;
        // The word reads 0 until this number is posted. Whatever it held (a number posted
        // before, or what the memory held when the block was made: cudaHostAlloc does not
        // clear, and freed pinned memory comes back as it was left) could otherwise equal
        // this number, and read_status would take stale words for the posting. A late store
        // of an earlier number (a build that failed before its read-back) cannot equal it.
        __atomic_store_n(cache->status_pinned + S_WORDS, (int64_t)0, __ATOMIC_RELAXED);
    }
    return p;
}

// Copies the status block back: THE synchronisation point of a stage. Into the context's mapped
// block (status_post; posting: the build's, else one taken here), posted by the kernel that
// finalises the counts where a launch carries it (posting->queued: q_finish's pair block, the
// new-output builds' first count) or else by a one-thread kernel queued behind the stage
// (status_kernel, overlapped with the stage's last kernel), each storing the call's sequence
// number last. The host polls for that number (for up to kStatusSpin, then synchronises the
// stream). A posting kernel runs after every kernel before it has finished (each waits for its
// predecessor: pdl_enter), so the counts are final; kernels queued after it may still run when
// the call returns (the map's arrays are complete in the stream's order), and the host sees the
// number before the stream's completion would wake a synchronisation. Where no mapped block
// could be made, a copy and a stream synchronisation (into pageable memory where there is no
// pinned block at all, through a staging buffer). release[0, n_release): workspaces to free,
// stream-ordered, once the status is read, queued before the wait so that the host's tail
// after it is shorter; each entry is NULL once its free is queued.
cudaError_t read_status(vc_engine_cache *cache, const vc_allocator *a, const int64_t *scr,
                        int64_t st[S_WORDS], cudaStream_t s, void **release, int n_release,
                        const Posting *posting)
{
    const StatusPost post = posting ? posting->post : status_post(cache).post;
    const bool by_build = posting && posting->queued;
    int64_t *pinned = cache ? cache->status_pinned : NULL;
    int64_t *dst = pinned ? pinned : st;
    cudaError_t e = cudaSuccess;
    if (!by_build)
        e = post.dst ? launch_k(true, status_kernel, 1, 1, 0, s, scr, post)
                     : cudaMemcpyAsync(dst, scr, S_WORDS * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess) return e;
    for (int i = 0; i < n_release; i++) {
        if (!release[i]) continue;
        e = (cudaError_t)vc_dev_free(a, release[i], s);
        release[i] = NULL;
        if (e != cudaSuccess) return e;
    }
    const int64_t *word = post.dst ? pinned + S_WORDS : NULL;
    bool arrived = false;
    if (post.dst) {
        const auto t0 = std::chrono::steady_clock::now();
        for (unsigned spin = 1; !(arrived = __atomic_load_n(word, __ATOMIC_ACQUIRE) == post.seq);
             spin++)
            if (spin % 256 == 0 && std::chrono::steady_clock::now() - t0 > kStatusSpin) break;
    }
    if (!arrived) {
        e = cudaStreamSynchronize(s);
        // the stream has finished, so the posting's stores are visible
        const bool stored = !post.dst || __atomic_load_n(word, __ATOMIC_ACQUIRE) == post.seq;
        if (e == cudaSuccess && !stored) e = cudaErrorUnknown;
    }
    if (e == cudaSuccess && pinned) memcpy(st, pinned, S_WORDS * sizeof(int64_t));
    return e;
}

// The CPU's verdict on bad input rows: whichever of the first row outside the limits and the
// first row repeating an earlier one comes first. VC_OK when there is neither.
vc_status input_error(const int64_t st[S_WORDS], const int32_t *d_in, int64_t n_in,
                      const int32_t shape[3], int32_t batch_size, vc_err *err)
{
    const int64_t bad = st[S_BAD_ROW];
    int64_t dup = st[S_N_DUP] > 0 ? st[S_FIRST_DUP] : -1;
    if (st[S_N_DUP] > 0 && (dup < 0 || dup >= n_in)) dup = INT64_MAX - 1; // not located
    if (bad != INT64_MAX && bad >= 0 && bad < n_in && (dup < 0 || bad < dup)) {
        int32_t c[4] = {0, 0, 0, 0};
        if (cudaMemcpy(c, d_in + 4 * bad, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess)
            cudaGetLastError();
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: input row %lld (%d, %d, %d, %d) "
                       "lies outside batch size %d, shape %dx%dx%d", (long long)bad, (int)c[0],
                       (int)c[1], (int)c[2], (int)c[3], (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    }
    if (dup >= 0) {
        int32_t c[4] = {0, 0, 0, 0};
        if (dup < n_in &&
            cudaMemcpy(c, d_in + 4 * dup, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess)
            cudaGetLastError();
        return vc_fail(err, VC_ERR_DUPLICATE, "kernel map: input row %lld repeats the "
                       "coordinate (%d, %d, %d, %d) of an earlier row (%lld duplicates)",
                       (long long)dup, (int)c[0], (int)c[1], (int)c[2], (int)c[3],
                       (long long)st[S_N_DUP]);
    }
    return VC_OK;
}

void free_map_arrays(vc_kmap_data *m)
{
    void *p[8] = {m->out_coords, m->out_in, m->offsets, m->in_rows, m->out_rows, m->masks,
                  m->perm, m->tile_order};
    bool any = false;
    for (int i = 0; i < 8; i++) any = any || p[i];
    if (!any) return;
    // Stream-ordered blocks (the pool's, an allocator's) are freed without an implicit
    // synchronisation: wait for every user first, then free on the legacy stream.
    cudaDeviceSynchronize();
    for (int i = 0; i < 8; i++)
        if (p[i]) vc_dev_free(m->alloc, p[i], NULL);
    cudaGetLastError();
    m->out_coords = m->out_in = m->in_rows = m->out_rows = m->perm = NULL;
    m->tile_order = NULL;
    m->order_blocks = 0;
    m->offsets = NULL;
    m->masks = NULL;
}

// Queues the inverse scatter of fwd_out_in [n_entries / K rows, K] into out_in (all -1 by
// then; inverse_kernel says what fwd_scr, the bounded build's, changes). No launch for none.
cudaError_t q_inverse(const int32_t *fwd_out_in, int64_t n_entries, int32_t K, int64_t fwd_n_in,
                      const int64_t *fwd_scr, int32_t *out_in, int64_t *scr, cudaStream_t s)
{
    if (n_entries <= 0) return cudaSuccess;
    inverse_kernel<<<grid_for(n_entries), kThreads, 0, s>>>(fwd_out_in, n_entries, K, fwd_n_in,
                                                            fwd_scr, out_in, scr);
    return cudaGetLastError();
}

namespace {

#define EV(i)                                                                                  \
    do {                                                                                       \
        if (ev) VC_CUDA_TRY(cudaEventRecord(ev[i], s), "recording an event");                  \
    } while (0)

// SUBM, regular: one read-back at the end.
vc_status subm_regular(const Job &j, cudaStream_t s, vc_kmap_data *m, cudaEvent_t *ev,
                       vc_err *err)
{
    vc_status st = VC_OK;
    const int64_t n = j.n_in;
    const int32_t K = j.K;
    int64_t n_entries = 0, n_words = 0;
    int64_t stat[S_WORDS];
    Sizes z;
    Bufs b;
    void *ws = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(n, K, &n_entries) || vc_mul_overflow_i64(n, j.words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                       (long long)n, (int)K);
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(n, z.packed_in);
    z.rows = n;
    z.K = K;
    z.words = j.words;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    // out_in and the workspace first: the first three kernels are queued before the other
    // arrays are allocated, so the host's allocations overlap the GPU's work
    // instead of delaying its start.
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->out_in, n_entries, s), "allocating out_in");
    for (int attempt = 0;; attempt++) {
        if (z.cap_in == 0 || z.cap_in > INT64_MAX / 64) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: hash table too large");
            goto fail;
        }
        VC_CUDA_TRY(pool_bytes(j.alloc, &ws, carve(z, true, true, NULL, &b), s),
                    "allocating workspace");
        carve(z, true, true, (char *)ws, &b);
        EV(0);
        // out_in all -1 by blocks of the insert's launch (one contiguous fill: clearing only
        // the upper half, row by row in the insert's threads, measured slower)
        VC_CUDA_TRY(q_prep(z, b, n, s), "clearing the tables");
        VC_CUDA_TRY(q_insert(j, z, b, s, NULL, m->out_in, n_entries), "inserting the input keys");
        EV(1);
        EV(2);
        VC_CUDA_TRY(q_subm_lookup(j, z, b, m->out_in, s), "looking neighbours up");
        EV(3);
        if (!m->offsets) {
            VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->offsets, (int64_t)K + 1, s),
                        "allocating offsets");
            VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->masks, n_words, s), "allocating masks");
            VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->perm, n, s), "allocating perm");
            // Pairs: at most n * K (sized without reading the count back).
            VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->in_rows, n_entries, s), "allocating in_rows");
            VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->out_rows, n_entries, s),
                        "allocating out_rows");
        }
        Posting post = status_post(j.cache);
        VC_CUDA_TRY(q_finish(j, b, m, n, true, n_entries, ev ? ev[4] : NULL, s, &post),
                    "pairs and masks");
        // SYNC POINT (the only one): n_pairs, the checks of the input rows, the flags.
        VC_CUDA_TRY(read_status(j.cache, j.alloc, b.scr, stat, s, &ws, 1, &post),
                    "reading the counts back");
        EV(5);
        st = input_error(stat, j.d_in, n, j.shape, j.batch, err);
        if (st != VC_OK) goto fail;
        if (stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_IN) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the input hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            z.cap_in *= 2;
            continue;
        }
        if (stat[S_FLAGS] != 0) {
            st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: status flags 0x%llx",
                         (unsigned long long)stat[S_FLAGS]);
            goto fail;
        }
        break;
    }
    m->n_out = n;
    m->n_pairs = stat[S_N_PAIRS];
    return VC_OK;

fail:
    vc_dev_free(j.alloc, ws, s);
    free_map_arrays(m);
    return st;
}

// STRIDED / DOWNSAMPLE / TRANSPOSED, step 1: clears the tables, inserts the input rows and
// collects the output keys (in *ws1, the workspace's tables part, replaced on each attempt),
// then reads the status back (SYNC POINT 1): *n_out (it sizes the outputs), the checks of the
// input rows, the flags. A hash table past its probe bound (or the output table past half
// full) is grown and the step repeated.
vc_status newout_collect(const Job &j, Sizes &z, Bufs &b, void **ws1, int64_t *n_out,
                         cudaStream_t s, cudaEvent_t *ev, vc_err *err)
{
    vc_status st = VC_OK;
    int64_t stat[S_WORDS];
    for (int attempt = 0;; attempt++) {
        if (z.cap_in == 0 || (!z.dense_bits && z.cap_out == 0) || z.cap_in > INT64_MAX / 64 ||
            z.cap_out > INT64_MAX / 64) {
            st = vc_fail(err, VC_ERR_LIMIT, "kernel map: hash table too large");
            goto fail;
        }
        z.ucap = z.cap_out / 2;
        vc_dev_free(j.alloc, *ws1, s);
        *ws1 = NULL;
        VC_CUDA_TRY(pool_bytes(j.alloc, ws1, carve(z, true, false, NULL, &b), s),
                    "allocating workspace");
        carve(z, true, false, (char *)*ws1, &b);
        EV(0);
        VC_CUDA_TRY(q_prep(z, b, 0, s), "clearing the tables");
        Posting post = status_post(j.cache);
        VC_CUDA_TRY(q_insert(j, z, b, s, &post), "inserting the keys");
        // SYNC POINT 1
        VC_CUDA_TRY(read_status(j.cache, j.alloc, b.scr, stat, s, NULL, 0, &post),
                    "reading the output count back");
        st = input_error(stat, j.d_in, j.n_in, j.shape, j.batch, err);
        if (st != VC_OK) goto fail;
        *n_out = stat[S_N_OUT];
        if (stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_IN) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the input hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            z.cap_in *= 2;
            continue;
        }
        if (!z.dense_bits &&
            ((stat[S_FLAGS] & (VC_KMAP_GPU_F_PROBE_OUT | VC_KMAP_GPU_F_OUT_OVERFLOW)) ||
             *n_out > z.cap_out / 2)) {
            if (attempt >= kRetries) {
                st = vc_fail(err, VC_ERR_CAPACITY, "kernel map: the output hash table could not "
                             "place a key within its probe bound, even after growing");
                goto fail;
            }
            int64_t cap = vc_hash_capacity_for(*n_out);
            if ((stat[S_FLAGS] & VC_KMAP_GPU_F_PROBE_OUT) && cap <= z.cap_out) cap = 2 * z.cap_out;
            z.cap_out = cap;
            continue;
        }
        if (stat[S_FLAGS] != 0) {
            st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: status flags 0x%llx",
                         (unsigned long long)stat[S_FLAGS]);
            goto fail;
        }
        break;
    }
    return VC_OK;

fail:
    return st;
}

// STRIDED / DOWNSAMPLE / TRANSPOSED, regular: read-backs after collecting the output keys
// (n_out) and at the end.
vc_status newout_regular(const Job &j, const vc_engine_options *opt, cudaStream_t s,
                         vc_kmap_data *m, cudaEvent_t *ev, vc_err *err)
{
    vc_status st = VC_OK;
    const int32_t K = j.K;
    int64_t stat[S_WORDS];
    int64_t n_out = 0, n_entries = 0, n_words = 0, est = 0, pair_bound = 0, reach_total = 0;
    Posting post = {{NULL, 0}, false};
    Sizes z;
    Bufs b;
    void *ws1 = NULL, *ws2 = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(j.n_in, j.reach, &reach_total))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld inputs x %lld offsets overflows",
                       (long long)j.n_in, (long long)j.reach);
    // Output table: sized for the outputs expected (every input's targets for TRANSPOSED, one
    // per input for DOWNSAMPLE, up to 4 per input for STRIDED); a larger output count is
    // caught at the read-back and the step repeated with the exact count.
    est = reach_total;
    if (j.desc.type == VC_MAP_DOWNSAMPLE) est = j.n_in;
    if (j.desc.type == VC_MAP_STRIDED && est > 4 * j.n_in) est = 4 * j.n_in;
    z.packed_in = j.bits_in <= VC_HASH_GPU_PACKED_BITS;
    z.cap_in = input_cap(j.n_in, z.packed_in);
    z.packed_out = j.bits_out <= VC_HASH_GPU_PACKED_BITS;
    z.ukey32 = z.packed_out;
    z.key_bits = j.bits_out;
    z.dense_bits = dense_bits_for(j, opt);
    z.cap_out = z.dense_bits ? 0 : vc_hash_capacity_for(est);
    z.K = K;
    z.words = j.words;
    st = newout_collect(j, z, b, &ws1, &n_out, s, ev, err);
    if (st != VC_OK) goto fail;
    EV(1);
    if (n_out > VC_MAX_ROWS) {
        st = vc_fail(err, VC_ERR_LIMIT, "kernel map: more than %lld output rows",
                     (long long)VC_MAX_ROWS);
        goto fail;
    }
    if (vc_mul_overflow_i64(n_out, K, &n_entries) ||
        vc_mul_overflow_i64(n_out, j.words, &n_words)) {
        st = vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                     (long long)n_out, (int)K);
        goto fail;
    }
    m->n_out = n_out;
    pair_bound = reach_total < n_entries ? reach_total : n_entries;
    z.nsort = z.dense_bits ? 0 : n_out; // the dense path's outputs come in order
    z.end_bit_out = j.bits_out > 0 ? j.bits_out : 1;
    z.rows = n_out;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    // What the output step needs first; the rest is allocated while the GPU runs it.
    VC_CUDA_TRY(pool_bytes(j.alloc, &ws2, carve(z, false, true, NULL, &b), s),
                "allocating workspace");
    carve(z, false, true, (char *)ws2, &b);
    {
        // the key sort first: the output arrays are allocated while it runs
        const void *sorted = NULL;
        VC_CUDA_TRY(q_key_sort(z, b, true, s, &sorted), "sorting the output keys");
        VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->out_coords, 4 * n_out, s),
                    "allocating output coordinates");
        VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->out_in, n_entries, s), "allocating out_in");
        VC_CUDA_TRY(q_rank_scatter(j, z, b, m, n_out, true, sorted, ev ? ev[2] : NULL, s),
                    "output coordinates and out_in");
    }
    EV(3);
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->offsets, (int64_t)K + 1, s), "allocating offsets");
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->masks, n_words, s), "allocating masks");
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->perm, n_out, s), "allocating perm");
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->in_rows, pair_bound, s), "allocating in_rows");
    VC_CUDA_TRY(vc_dev_alloc_n(m->alloc, &m->out_rows, pair_bound, s), "allocating out_rows");
    post = status_post(j.cache);
    VC_CUDA_TRY(q_finish(j, b, m, n_out, true, pair_bound, ev ? ev[4] : NULL, s, &post),
                "pairs and masks");
    // SYNC POINT 2: n_pairs and the flags.
    {
        void *rel[2] = {ws1, ws2};
        const cudaError_t e = read_status(j.cache, j.alloc, b.scr, stat, s, rel, 2, &post);
        ws1 = rel[0];
        ws2 = rel[1];
        VC_CUDA_TRY(e, "reading the counts back");
    }
    EV(5);
    if (stat[S_FLAGS] != 0) {
        st = vc_fail(err, VC_ERR_INTERNAL, "kernel map: an output key collected in step 2 was "
                     "not found in step 3 (status flags 0x%llx)",
                     (unsigned long long)stat[S_FLAGS]);
        goto fail;
    }
    m->n_pairs = stat[S_N_PAIRS];
    return VC_OK;

fail:
    vc_dev_free(j.alloc, ws1, s);
    vc_dev_free(j.alloc, ws2, s);
    free_map_arrays(m);
    return st;
}

vc_status build_impl(const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                     int32_t batch_size, const vc_map_desc *d, const vc_engine_options *opt,
                     cudaStream_t s, vc_kmap_data *out, vc_kmap_gpu_timing *timing, vc_err *err)
{
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL argument");
    Job j;
    vc_status st = setup_job(&j, d_in, n_in, shape, batch_size, d, err);
    if (st != VC_OK) return st;
    j.alloc = vc_opt_allocator(opt);
    j.cache = opt ? opt->cache : NULL;
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    cudaEvent_t evs[6] = {0, 0, 0, 0, 0, 0};
    cudaEvent_t *ev = NULL;
    if (timing) {
        memset(timing, 0, sizeof *timing);
        for (int i = 0; i < 6; i++)
            if (cudaEventCreate(&evs[i]) != cudaSuccess) {
                st = vc_cuda_fail(err, cudaGetLastError(), kArea, "creating events");
                for (int k = 0; k < i; k++) cudaEventDestroy(evs[k]);
                return st;
            }
        ev = evs;
    }
    vc_kmap_data m;
    init_header(j, &m);
    m.alloc = j.alloc;
    st = j.new_out ? newout_regular(j, opt, s, &m, ev, err) : subm_regular(j, s, &m, ev, err);
    if (st == VC_OK && timing) {
        cudaError_t e = cudaEventSynchronize(evs[5]);
        float *f[6] = {&timing->insert_ms, &timing->out_coords_ms, &timing->out_in_ms,
                       &timing->pairs_ms, &timing->masks_ms, &timing->total_ms};
        for (int i = 0; e == cudaSuccess && i < 5; i++)
            e = cudaEventElapsedTime(f[i], evs[i], evs[i + 1]);
        if (e == cudaSuccess) e = cudaEventElapsedTime(f[5], evs[0], evs[5]);
        if (e != cudaSuccess) {
            st = vc_cuda_fail(err, e, kArea, "timing");
            free_map_arrays(&m);
        }
    }
    for (int i = 0; i < 6; i++)
        if (evs[i]) cudaEventDestroy(evs[i]);
    if (st == VC_OK) *out = m;
    return st;
}

} // namespace

} // namespace kmap_gpu

using namespace kmap_gpu;


extern "C" vc_status vc_kmap_build_gpu(const int32_t *d_in_coords, int64_t n_in,
                                       const int32_t shape[3], int32_t batch_size,
                                       const vc_map_desc *d, const vc_engine_options *opt,
                                       struct CUstream_st *stream, vc_kmap_data *out,
                                       vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, opt, (cudaStream_t)stream, out,
                      NULL, err);
}

extern "C" vc_status vc_kmap_build_gpu_timed(const int32_t *d_in_coords, int64_t n_in,
                                             const int32_t shape[3], int32_t batch_size,
                                             const vc_map_desc *d, const vc_engine_options *opt,
                                             struct CUstream_st *stream, vc_kmap_data *out,
                                             vc_kmap_gpu_timing *timing, vc_err *err)
{
    return build_impl(d_in_coords, n_in, shape, batch_size, d, opt, (cudaStream_t)stream, out,
                      timing, err);
}

extern "C" vc_status vc_kmap_inverse_gpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                                         int32_t fwd_in_batch_size, const vc_engine_options *opt,
                                         struct CUstream_st *stream, vc_kmap_data *out,
                                         vc_err *err)
{
    vc_kmap_data m;
    vc_status st = vc_kmap_inverse_header(fwd, fwd_in_shape, fwd_in_batch_size, &m, err);
    if (st != VC_OK) return st;
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: NULL argument");
    const int32_t K = m.volume;
    cudaStream_t s = (cudaStream_t)stream;
    Job j;
    memset(&j, 0, sizeof j);
    j.K = K;
    j.words = m.mask_words;
    j.alloc = m.alloc = vc_opt_allocator(opt);
    j.cache = opt ? opt->cache : NULL;
    const int64_t n = m.n_out, fwd_entries = fwd->n_out * (int64_t)K;
    int64_t n_entries = 0, n_words = 0;
    int64_t stat[S_WORDS];
    Posting post = {{NULL, 0}, false};
    Sizes z;
    Bufs b;
    void *ws = NULL;
    memset(&z, 0, sizeof z);
    memset(&b, 0, sizeof b);
    b.pdl = true;
    if (vc_mul_overflow_i64(n, K, &n_entries) || vc_mul_overflow_i64(n, j.words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "inverse map: %lld outputs x %d offsets overflows",
                       (long long)n, (int)K);
    cudaGetLastError(); // drop a stale, non-sticky error of an unrelated earlier call
    z.rows = n;
    z.K = K;
    z.words = j.words;
    VC_CUDA_TRY(cub_bytes_for(&z), "sizing the sorts");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.out_in, n_entries, s), "allocating out_in");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.offsets, (int64_t)K + 1, s), "allocating offsets");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.masks, n_words, s), "allocating masks");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.perm, n, s), "allocating perm");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.in_rows, fwd->n_pairs, s), "allocating in_rows");
    VC_CUDA_TRY(vc_dev_alloc_n(m.alloc, &m.out_rows, fwd->n_pairs, s), "allocating out_rows");
    VC_CUDA_TRY(pool_bytes(j.alloc, &ws, carve(z, true, true, NULL, &b), s),
                "allocating workspace");
    carve(z, true, true, (char *)ws, &b);
    VC_CUDA_TRY(q_prep(z, b, n, s, m.out_in, n_entries), "clearing the status and out_in");
    VC_CUDA_TRY(q_inverse(fwd->out_in, fwd_entries, K, fwd->n_in, NULL, m.out_in, b.scr, s),
                "inverse kernel");
    post = status_post(j.cache);
    VC_CUDA_TRY(q_finish(j, b, &m, n, true, fwd->n_pairs, NULL, s, &post), "pairs and masks");
    // SYNC POINT (the only one): n_pairs and the flags.
    VC_CUDA_TRY(read_status(j.cache, j.alloc, b.scr, stat, s, NULL, 0, &post),
                "reading the counts back");
    if (stat[S_FLAGS] & VC_KMAP_GPU_F_BAD_ENTRY) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: a forward entry is not an input "
                     "row");
        goto fail;
    }
    if (stat[S_FLAGS] & VC_KMAP_GPU_F_CONFLICT) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: an input feeds two outputs at "
                     "the same offset");
        goto fail;
    }
    if (stat[S_FLAGS] != 0) {
        st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: malformed forward map (%lld "
                     "pairs, %lld given)", (long long)stat[S_N_PAIRS], (long long)fwd->n_pairs);
        goto fail;
    }
    m.n_pairs = stat[S_N_PAIRS];
    vc_dev_free(j.alloc, ws, s);
    *out = m;
    return VC_OK;

fail:
    vc_dev_free(j.alloc, ws, s);
    free_map_arrays(&m);
    return st;
}

extern "C" void vc_kmap_data_free_gpu(vc_kmap_data *m)
{
    if (!m) return;
    free_map_arrays(m);
    memset(m, 0, sizeof *m);
}
