/* kmap/kmap_cpu.c - kernel maps on the CPU, the reference the GPU maps must match.
 * SUBM, STRIDED, DOWNSAMPLE and TRANSPOSED maps are built with the coordinate hash table in three
 * steps: insert the input keys (catching duplicates), collect the unique output keys and number
 * them by sorted (b, z, y, x) order, then fill out_in by lookup. INVERSE maps transpose a forward
 * map. vc_kmap_finish_cpu derives the pair lists, the masks and the mask order from out_in.
 * Results do not depend on the thread count: parallel loops only write distinct elements. */
#include "kmap/kmap.h"

#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const char *const axis_name[3] = {"z", "y", "x"};

/* n elements of `size` bytes (at least one, so that success is never NULL) through the map's
 * allocator; NULL on failure or when the byte count does not fit size_t. */
static void *alloc_n(const vc_allocator *a, int64_t n, size_t size)
{
    if (n < 1) n = 1;
    if ((uint64_t)n > SIZE_MAX / size) return NULL;
    return vc_host_alloc(a, (size_t)n * size);
}

static int thread_count(int num_threads)
{
#ifdef _OPENMP
    return num_threads > 0 ? num_threads : omp_get_max_threads();
#else
    (void)num_threads;
    return 1;
#endif
}

vc_status vc_kmap_check_desc(const vc_map_desc *d, const int32_t in_shape[3], int32_t out_shape[3],
                             vc_err *err)
{
    if (!d || !in_shape || !out_shape)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL descriptor or shape");
    switch (d->type) {
    case VC_MAP_SUBM:
    case VC_MAP_STRIDED:
    case VC_MAP_DOWNSAMPLE:
    case VC_MAP_TRANSPOSED:
        break;
    case VC_MAP_INVERSE:
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "kernel map: an INVERSE map is built from its forward map, not from a "
                       "descriptor");
    default:
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: unknown map type %d",
                       (int)d->type);
    }
    int64_t o[3];
    for (int a = 0; a < 3; a++) {
        const char *an = axis_name[a];
        int64_t in = in_shape[a], ks = d->kernel[a], s = d->stride[a], pad = d->padding[a],
                dil = d->dilation[a];
        if (in < 1)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "kernel map: spatial shape %s = %lld must be >= 1", an, (long long)in);
        if (ks < 1 || ks > VC_KMAP_MAX_KERNEL)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "kernel map: kernel size %s = %lld must be in 1..%d", an, (long long)ks,
                           VC_KMAP_MAX_KERNEL);
        if (s < 1)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "kernel map: stride %s = %lld must be >= 1", an, (long long)s);
        if (pad < 0)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "kernel map: padding %s = %lld must be >= 0", an, (long long)pad);
        if (dil < 1)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "kernel map: dilation %s = %lld must be >= 1", an, (long long)dil);
        switch (d->type) {
        case VC_MAP_SUBM:
            if (ks % 2 == 0)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "kernel map: a SUBM map needs odd kernel sizes (kernel size %s = "
                               "%lld)", an, (long long)ks);
            o[a] = in;
            break;
        case VC_MAP_STRIDED: {
            int64_t n = in + 2 * pad - dil * (ks - 1) - 1;
            if (n < 0)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "kernel map: STRIDED output would be empty along %s (shape %lld, "
                               "kernel %lld, dilation %lld, padding %lld)", an, (long long)in,
                               (long long)ks, (long long)dil, (long long)pad);
            o[a] = n / s + 1;
            break;
        }
        case VC_MAP_DOWNSAMPLE:
            if (pad != 0)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "kernel map: a DOWNSAMPLE map takes no padding (padding %s = %lld)",
                               an, (long long)pad);
            o[a] = (in + s - 1) / s;
            break;
        default: /* VC_MAP_TRANSPOSED */
            o[a] = (in - 1) * s - 2 * pad + dil * (ks - 1) + 1;
            if (o[a] < 1)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "kernel map: TRANSPOSED output would be empty along %s (shape "
                               "%lld, stride %lld, padding %lld)", an, (long long)in, (long long)s,
                               (long long)pad);
            break;
        }
        if (o[a] > INT32_MAX)
            return vc_fail(err, VC_ERR_LIMIT,
                           "kernel map: output shape %s = %lld does not fit int32", an,
                           (long long)o[a]);
    }
    for (int a = 0; a < 3; a++) out_shape[a] = (int32_t)o[a];
    return VC_OK;
}

vc_status vc_kmap_check_build(const int32_t *in_coords, int64_t n_in, const int32_t shape[3],
                              int32_t batch_size, const vc_map_desc *d, int32_t out_shape[3],
                              vc_err *err)
{
    if (!shape || !d)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL argument");
    if (n_in < 0 || (n_in > 0 && !in_coords))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: bad input (%lld rows, %s)",
                       (long long)n_in, in_coords ? "data" : "NULL data");
    if (n_in > VC_MAX_ROWS)
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld input rows exceed the limit %lld",
                       (long long)n_in, (long long)VC_MAX_ROWS);
    if (batch_size < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: batch size %d must be >= 1",
                       (int)batch_size);
    return vc_kmap_check_desc(d, shape, out_shape, err);
}

/* Kernel offset k -> (dz, dy, dx), z slowest and x fastest. */
static void kernel_offsets(const int32_t kernel[3], int32_t (*dk)[3])
{
    int32_t k = 0;
    for (int32_t dz = 0; dz < kernel[0]; dz++)
        for (int32_t dy = 0; dy < kernel[1]; dy++)
            for (int32_t dx = 0; dx < kernel[2]; dx++, k++) {
                dk[k][0] = dz;
                dk[k][1] = dy;
                dk[k][2] = dx;
            }
}

/* STRIDED / TRANSPOSED: the output site input row `q` (b, z, y, x) writes at offset d, if any.
 * Returns 1 and sets o[3] when it lies inside the output shape. */
static int scatter_target(const vc_kmap_data *m, const int32_t *q, const int32_t d[3],
                          int64_t o[3])
{
    for (int a = 0; a < 3; a++) {
        int64_t c = q[1 + a], s = m->stride[a], pad = m->padding[a], dil = m->dilation[a];
        int64_t t;
        if (m->type == VC_MAP_STRIDED) {
            /* q = p*s - pad + d*dil  <=>  p = (q + pad - d*dil) / s, exactly */
            t = c + pad - (int64_t)d[a] * dil;
            if (t < 0 || t % s != 0) return 0;
            t /= s;
        } else {
            t = c * s - pad + (int64_t)d[a] * dil;
            if (t < 0) return 0;
        }
        if (t >= m->out_shape[a]) return 0;
        o[a] = t;
    }
    return 1;
}

/* SUBM / DOWNSAMPLE: the input site output `p` (z, y, x) reads at offset d, if inside `shape`. */
static int gather_source(const vc_kmap_data *m, const int32_t *p, const int32_t d[3],
                         const int32_t shape[3], int64_t c[3])
{
    for (int a = 0; a < 3; a++) {
        int64_t ks = m->kernel[a], dil = m->dilation[a], t;
        if (m->type == VC_MAP_SUBM) {
            t = (int64_t)p[a] + ((int64_t)d[a] - ks / 2) * dil;
        } else {
            int64_t centre = (ks % 2 == 1) ? ks / 2 : 0;
            t = (int64_t)p[a] * m->stride[a] + ((int64_t)d[a] - centre) * dil;
        }
        if (t < 0 || t >= shape[a]) return 0;
        c[a] = t;
    }
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Index of `key` in the sorted array keys[n] (it must be there). */
static int64_t lower_bound_u64(const uint64_t *keys, int64_t n, uint64_t key)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static vc_status hash_status(vc_hash_result r, vc_err *err, const char *what)
{
    if (r == VC_HASH_NOMEM)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory growing the %s "
                       "hash table", what);
    return vc_fail(err, VC_ERR_CAPACITY, "kernel map: the %s hash table could not place a key "
                   "within its probe bound, even after growing", what);
}

/* State of one vc_kmap_build_cpu call: the validated arguments, the key layouts, the kernel
 * offsets, the two hash tables and the map being built. Every step reads the arguments and fills
 * its part of `m`; hin, hout and m start zeroed and the caller frees all three on any failure. */
typedef struct kmap_build {
    const int32_t *in_coords;
    int64_t n_in;
    const int32_t *shape;
    int32_t batch_size;
    const vc_map_desc *d;
    int32_t K;            /* kernel volume                                       */
    int nt;               /* OpenMP threads                                      */
    int new_out;          /* every type but SUBM makes new output coordinates    */
    vc_keypack kin, kout; /* kout is set only when new_out                       */
    int32_t dk[VC_KMAP_MAX_VOLUME][3];
    vc_hash hin, hout;
    vc_kmap_data m;
} kmap_build;

/* Setup, after vc_kmap_check_build: the input (and, for new outputs, output) key layouts, the
 * map header (type, geometry, out_shape = oshape, volume, n_in, batch size) and the kernel
 * offsets. Invariant on VC_OK: every in-range coordinate packs into 63 bits under b->kin (and
 * every output coordinate under b->kout when b->new_out). */
static vc_status kmap_build_setup(kmap_build *b, const int32_t oshape[3], int num_threads,
                                  vc_err *err)
{
    const vc_map_desc *d = b->d;
    const int32_t *shape = b->shape;
    const int32_t batch_size = b->batch_size;
    if (vc_keypack_init(&b->kin, batch_size, shape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: coordinates of batch %d, shape "
                       "%dx%dx%d do not pack into 63 bits", (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    b->new_out = d->type != VC_MAP_SUBM;
    if (b->new_out && vc_keypack_init(&b->kout, batch_size, oshape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: output coordinates of batch %d, "
                       "shape %dx%dx%d do not pack into 63 bits", (int)batch_size,
                       (int)oshape[0], (int)oshape[1], (int)oshape[2]);

    vc_kmap_data *m = &b->m;
    m->type = d->type;
    for (int a = 0; a < 3; a++) {
        m->kernel[a] = d->kernel[a];
        m->stride[a] = d->stride[a];
        m->padding[a] = d->padding[a];
        m->dilation[a] = d->dilation[a];
        m->out_shape[a] = oshape[a];
    }
    b->K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    m->volume = b->K;
    m->n_in = b->n_in;
    m->out_batch_size = batch_size;
    kernel_offsets(d->kernel, b->dk);
    b->nt = thread_count(num_threads);
    return VC_OK;
}

/* Step 1: input keys -> rows in b->hin, in input order. Invariant on VC_OK: every input row is
 * inside (batch size, shape) and no two rows share a coordinate; the first offending row (and
 * for a duplicate, the earlier row holding it) is the one reported. */
static vc_status kmap_insert_inputs(kmap_build *b, vc_err *err)
{
    const int32_t *in_coords = b->in_coords;
    const int64_t n_in = b->n_in;
    const int32_t *shape = b->shape;
    if (vc_hash_init(&b->hin, n_in, b->m.alloc) != VC_HASH_INSERTED)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory for a hash table of "
                       "%lld keys", (long long)n_in);
    for (int64_t i = 0; i < n_in; i++) {
        const int32_t *c = in_coords + 4 * i;
        if (!vc_key_in_range(&b->kin, c[0], c[1], c[2], c[3]))
            return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: input row %lld (%d, %d, %d, "
                           "%d) lies outside batch size %d, shape %dx%dx%d", (long long)i,
                           (int)c[0], (int)c[1], (int)c[2], (int)c[3], (int)b->batch_size,
                           (int)shape[0], (int)shape[1], (int)shape[2]);
        int32_t prev = -1;
        vc_hash_result r = vc_hash_insert_grow(&b->hin,
                                               vc_key_pack(&b->kin, c[0], c[1], c[2], c[3]),
                                               (int32_t)i, &prev);
        if (r == VC_HASH_EXISTS)
            return vc_fail(err, VC_ERR_DUPLICATE, "kernel map: input rows %d and %lld hold the "
                           "same coordinate (%d, %d, %d, %d)", (int)prev, (long long)i,
                           (int)c[0], (int)c[1], (int)c[2], (int)c[3]);
        if (r != VC_HASH_INSERTED) return hash_status(r, err, "input");
    }
    return VC_OK;
}

/* Step 2a (new outputs): every output site some input row reaches, as a key in b->hout (values
 * not yet meaningful), in input-row then offset order. Invariant on VC_OK: b->hout.count, the
 * number of distinct output sites, is at most VC_MAX_ROWS. */
static vc_status kmap_collect_out_keys(kmap_build *b, vc_err *err)
{
    const vc_map_desc *d = b->d;
    const int64_t n_in = b->n_in;
    if (vc_hash_init(&b->hout, n_in, b->m.alloc) != VC_HASH_INSERTED)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory for a hash table "
                       "of %lld keys", (long long)n_in);
    for (int64_t i = 0; i < n_in; i++) {
        const int32_t *c = b->in_coords + 4 * i;
        int32_t nk = d->type == VC_MAP_DOWNSAMPLE ? 1 : b->K;
        for (int32_t k = 0; k < nk; k++) {
            int64_t o[3];
            if (d->type == VC_MAP_DOWNSAMPLE) {
                for (int a = 0; a < 3; a++) o[a] = c[1 + a] / d->stride[a];
            } else if (!scatter_target(&b->m, c, b->dk[k], o)) {
                continue;
            }
            uint64_t key = vc_key_pack(&b->kout, c[0], (int32_t)o[0], (int32_t)o[1],
                                       (int32_t)o[2]);
            vc_hash_result r = vc_hash_insert_grow(&b->hout, key, 0, NULL);
            if (r != VC_HASH_INSERTED && r != VC_HASH_EXISTS)
                return hash_status(r, err, "output");
            if (b->hout.count > VC_MAX_ROWS)
                return vc_fail(err, VC_ERR_LIMIT, "kernel map: more than %lld output rows",
                               (long long)VC_MAX_ROWS);
        }
    }
    return VC_OK;
}

/* Step 2b (new outputs): numbers the collected output keys by rank in sorted (b, z, y, x)
 * order. Invariant on VC_OK: m.n_out = hout.count, m.out_coords[p] is the p-th smallest key
 * unpacked, and hout maps each key to its rank p. */
static vc_status kmap_number_outputs(kmap_build *b, vc_err *err)
{
    vc_kmap_data *m = &b->m;
    m->n_out = b->hout.count;
    uint64_t *okeys = alloc_n(m->alloc, m->n_out, sizeof *okeys);
    m->out_coords = alloc_n(m->alloc, m->n_out, 4 * sizeof(int32_t));
    if (!okeys || !m->out_coords) {
        vc_host_free(m->alloc, okeys);
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory for %lld output "
                       "coordinates", (long long)m->n_out);
    }
    vc_hash_keys(&b->hout, okeys);
    qsort(okeys, (size_t)m->n_out, sizeof *okeys, cmp_u64);
    const int64_t cap = b->hout.capacity, n_out = m->n_out;
    const uint64_t *hkeys = b->hout.keys;
    int32_t *hvals = b->hout.vals;
#ifdef _OPENMP
#pragma omp parallel for num_threads(b->nt) schedule(static)
#endif
    for (int64_t s = 0; s < cap; s++)
        if (hkeys[s] != VC_HASH_EMPTY)
            hvals[s] = (int32_t)lower_bound_u64(okeys, n_out, hkeys[s]);
    for (int64_t p = 0; p < n_out; p++) vc_key_unpack(&b->kout, okeys[p], m->out_coords + 4 * p);
    vc_host_free(m->alloc, okeys);
    return VC_OK;
}

/* Step 3, SUBM / DOWNSAMPLE (output-stationary): out_in[p, k] = the input row at output p's
 * offset k, or -1. Every out_in element is written by its own iteration, so the result does not
 * depend on the thread count. */
static void kmap_gather_out_in(kmap_build *b)
{
    const vc_kmap_data *m = &b->m;
    const int32_t K = b->K;
    const int32_t *oc = b->d->type == VC_MAP_SUBM ? b->in_coords : m->out_coords;
    const int64_t n_out = m->n_out;
    int32_t *out_in = m->out_in;
#ifdef _OPENMP
#pragma omp parallel for num_threads(b->nt) schedule(static)
#endif
    for (int64_t p = 0; p < n_out; p++) {
        const int32_t *pc = oc + 4 * p;
        int32_t *row = out_in + p * K;
        for (int32_t k = 0; k < K; k++) {
            int64_t c[3];
            int32_t v = -1;
            if (gather_source(m, pc + 1, b->dk[k], b->shape, c)) {
                uint64_t key = vc_key_pack(&b->kin, pc[0], (int32_t)c[0], (int32_t)c[1],
                                           (int32_t)c[2]);
                /* PROBE_LIMIT here also means absent: inserts obey the same bound */
                if (vc_hash_find(&b->hin, key, &v) != VC_HASH_FOUND) v = -1;
            }
            row[k] = v;
        }
    }
}

/* Step 3, STRIDED / TRANSPOSED (input-stationary): out_in[p, k] = the input row q that reaches
 * output p at offset k, or -1. (p, k) has at most one input q, so the writes never collide.
 * Returns nonzero when an output key from step 2 was not found (an internal error). */
static int kmap_scatter_out_in(kmap_build *b, int64_t n_entries)
{
    const vc_kmap_data *m = &b->m;
    const int32_t K = b->K;
    const int32_t *in_coords = b->in_coords;
    const int64_t n_in = b->n_in;
    int32_t *out_in = m->out_in;
    for (int64_t e = 0; e < n_entries; e++) out_in[e] = -1;
    int missing = 0;
#ifdef _OPENMP
#pragma omp parallel for num_threads(b->nt) schedule(static)
#endif
    for (int64_t q = 0; q < n_in; q++) {
        const int32_t *c = in_coords + 4 * q;
        for (int32_t k = 0; k < K; k++) {
            int64_t o[3];
            if (!scatter_target(m, c, b->dk[k], o)) continue;
            uint64_t key = vc_key_pack(&b->kout, c[0], (int32_t)o[0], (int32_t)o[1],
                                       (int32_t)o[2]);
            int32_t p;
            if (vc_hash_find(&b->hout, key, &p) != VC_HASH_FOUND) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
                missing = 1;
                continue;
            }
            out_in[(int64_t)p * K + k] = (int32_t)q;
        }
    }
    return missing;
}

/* Step 3: allocates m.out_in [n_out, K] and fills it by lookup. Invariant on VC_OK: every
 * element is an input row or -1. */
static vc_status kmap_fill_out_in(kmap_build *b, vc_err *err)
{
    vc_kmap_data *m = &b->m;
    int64_t n_entries;
    if (vc_mul_overflow_i64(m->n_out, b->K, &n_entries))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: %lld outputs x %d offsets overflows",
                       (long long)m->n_out, (int)b->K);
    m->out_in = alloc_n(m->alloc, n_entries, sizeof(int32_t));
    if (!m->out_in)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory for out_in [%lld, "
                       "%d]", (long long)m->n_out, (int)b->K);
    if (b->d->type == VC_MAP_SUBM || b->d->type == VC_MAP_DOWNSAMPLE) {
        kmap_gather_out_in(b);
    } else if (kmap_scatter_out_in(b, n_entries)) {
        return vc_fail(err, VC_ERR_INTERNAL, "kernel map: an output key collected in step 2 "
                       "was not found in step 3");
    }
    return VC_OK;
}

vc_status vc_kmap_build_cpu(const int32_t *in_coords, int64_t n_in, const int32_t shape[3],
                            int32_t batch_size, const vc_map_desc *d,
                            const vc_engine_options *opt, int num_threads, vc_kmap_data *out,
                            vc_err *err)
{
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: NULL argument");
    int32_t oshape[3];
    vc_status st = vc_kmap_check_build(in_coords, n_in, shape, batch_size, d, oshape, err);
    if (st != VC_OK) return st;

    kmap_build b;
    memset(&b, 0, sizeof b);
    b.m.alloc = vc_opt_allocator(opt);
    b.in_coords = in_coords;
    b.n_in = n_in;
    b.shape = shape;
    b.batch_size = batch_size;
    b.d = d;
    st = kmap_build_setup(&b, oshape, num_threads, err);
    if (st != VC_OK) return st;

    st = kmap_insert_inputs(&b, err);
    if (st != VC_OK) goto fail;
    if (b.new_out) {
        st = kmap_collect_out_keys(&b, err);
        if (st != VC_OK) goto fail;
        st = kmap_number_outputs(&b, err);
        if (st != VC_OK) goto fail;
    } else {
        b.m.n_out = n_in;
    }
    st = kmap_fill_out_in(&b, err);
    if (st != VC_OK) goto fail;
    vc_hash_free(&b.hin);
    vc_hash_free(&b.hout);

    st = vc_kmap_finish_cpu(&b.m, err);
    if (st != VC_OK) goto fail;
    *out = b.m;
    return VC_OK;

fail:
    vc_hash_free(&b.hin);
    vc_hash_free(&b.hout);
    vc_kmap_data_free(&b.m);
    return st;
}

vc_status vc_kmap_inverse_header(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                                 int32_t fwd_in_batch_size, vc_kmap_data *m, vc_err *err)
{
    if (!fwd || !fwd_in_shape || !m)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: NULL argument");
    if (fwd->type != VC_MAP_STRIDED && fwd->type != VC_MAP_DOWNSAMPLE)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: the forward map must be "
                       "STRIDED or DOWNSAMPLE (type %d)", (int)fwd->type);
    const int32_t K = fwd->volume;
    if (K < 1 || K > VC_KMAP_MAX_VOLUME || fwd->n_in < 0 || fwd->n_in > VC_MAX_ROWS ||
        fwd->n_out < 0 || fwd->n_out > VC_MAX_ROWS || fwd->n_pairs < 0 ||
        (fwd->n_out > 0 && !fwd->out_in))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: malformed forward map");
    if (fwd_in_batch_size < 1)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: batch size %d must be >= 1",
                       (int)fwd_in_batch_size);
    for (int a = 0; a < 3; a++)
        if (fwd_in_shape[a] < 1)
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: shape %s = %d must be "
                           ">= 1", axis_name[a], (int)fwd_in_shape[a]);
    memset(m, 0, sizeof *m);
    m->type = VC_MAP_INVERSE;
    for (int a = 0; a < 3; a++) {
        m->kernel[a] = fwd->kernel[a];
        m->stride[a] = fwd->stride[a];
        m->padding[a] = fwd->padding[a];
        m->dilation[a] = fwd->dilation[a];
        m->out_shape[a] = fwd_in_shape[a];
    }
    m->volume = K;
    m->n_in = fwd->n_out;
    m->n_out = fwd->n_in;
    m->out_batch_size = fwd_in_batch_size;
    m->mask_words = (K + 31) / 32;
    return VC_OK;
}

vc_status vc_kmap_inverse_cpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                              int32_t fwd_in_batch_size, const vc_engine_options *opt,
                              vc_kmap_data *out, vc_err *err)
{
    vc_kmap_data m;
    vc_status hs = vc_kmap_inverse_header(fwd, fwd_in_shape, fwd_in_batch_size, &m, err);
    if (hs != VC_OK) return hs;
    m.alloc = vc_opt_allocator(opt);
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: NULL argument");
    const int32_t K = m.volume;
    int64_t n_entries;
    if (vc_mul_overflow_i64(m.n_out, K, &n_entries))
        return vc_fail(err, VC_ERR_LIMIT, "inverse map: %lld outputs x %d offsets overflows",
                       (long long)m.n_out, (int)K);
    m.out_in = alloc_n(m.alloc, n_entries, sizeof(int32_t));
    if (!m.out_in)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "inverse map: out of memory for out_in "
                       "[%lld, %d]", (long long)m.n_out, (int)K);
    for (int64_t e = 0; e < n_entries; e++) m.out_in[e] = -1;
    vc_status st;
    for (int64_t p = 0; p < fwd->n_out; p++) {
        for (int32_t k = 0; k < K; k++) {
            int32_t q = fwd->out_in[p * K + k];
            if (q < 0) continue;
            if (q >= fwd->n_in) {
                st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: forward entry [%lld, "
                             "%d] = %d is not an input row", (long long)p, (int)k, (int)q);
                goto fail;
            }
            int32_t *slot = m.out_in + (int64_t)q * K + k;
            if (*slot != -1) {
                st = vc_fail(err, VC_ERR_INVALID_ARGUMENT, "inverse map: input %d feeds outputs "
                             "%d and %lld at offset %d", (int)q, (int)*slot, (long long)p,
                             (int)k);
                goto fail;
            }
            *slot = (int32_t)p;
        }
    }
    st = vc_kmap_finish_cpu(&m, err);
    if (st != VC_OK) goto fail;
    *out = m;
    return VC_OK;

fail:
    vc_kmap_data_free(&m);
    return st;
}

/* Compares outputs a and b by sort key (kmap.h), largest first, then by row ascending: a total
 * order. */
static int key_before(const uint32_t *keys, int32_t words, int32_t a, int32_t b)
{
    const uint32_t *ka = keys + (int64_t)a * words, *kb = keys + (int64_t)b * words;
    for (int32_t w = words - 1; w >= 0; w--) {
        const uint32_t x = ka[w], y = kb[w];
        if (x != y) return x > y;
    }
    return a < b;
}

/* Bottom-up merge sort of the rows 0..n-1 into rows[n] by key_before; tmp has room for n. */
static void sort_by_key(int32_t *rows, int32_t *tmp, int64_t n, const uint32_t *keys,
                        int32_t words)
{
    for (int64_t p = 0; p < n; p++) rows[p] = (int32_t)p;
    int32_t *src = rows, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = key_before(keys, words, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != rows) memcpy(rows, src, (size_t)n * sizeof *rows);
}

vc_status vc_kmap_finish_cpu(vc_kmap_data *m, vc_err *err)
{
    if (!m || m->volume < 1 || m->volume > VC_KMAP_MAX_VOLUME || m->n_out < 0 ||
        m->n_out > VC_MAX_ROWS || (m->n_out > 0 && !m->out_in))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map: malformed map to finish");
    const int32_t K = m->volume;
    const int64_t n = m->n_out;
    const int32_t words = (K + 31) / 32;
    int64_t n_words;
    if (vc_mul_overflow_i64(n, words, &n_words))
        return vc_fail(err, VC_ERR_LIMIT, "kernel map: mask array size overflows");
    int64_t *offsets = vc_host_calloc(m->alloc, (size_t)K + 1, sizeof *offsets);
    int64_t *pos = alloc_n(m->alloc, K, sizeof *pos);
    uint32_t *masks = alloc_n(m->alloc, n_words, sizeof *masks);
    int32_t *perm = alloc_n(m->alloc, n, sizeof *perm);
    int32_t *tmp = alloc_n(m->alloc, n, sizeof *tmp);
    uint32_t *keys = alloc_n(m->alloc, n_words, sizeof *keys);
    int32_t key_bit[VC_KMAP_MAX_VOLUME];
    int32_t *in_rows = NULL, *out_rows = NULL;
    if (!offsets || !pos || !masks || !perm || !tmp || !keys) goto oom;
    vc_kmap_key_bits(m->kernel, key_bit);

    /* Counts per offset, masks and sort keys in one pass over out_in. */
    memset(masks, 0, (size_t)(n_words > 0 ? n_words : 1) * sizeof *masks);
    memset(keys, 0, (size_t)(n_words > 0 ? n_words : 1) * sizeof *keys);
    for (int64_t p = 0; p < n; p++) {
        const int32_t *row = m->out_in + p * K;
        uint32_t *mk = masks + p * words, *ky = keys + p * words;
        for (int32_t k = 0; k < K; k++) {
            if (row[k] < 0) continue;
            offsets[k + 1]++;
            mk[k / 32] |= (uint32_t)1 << (k % 32);
            ky[key_bit[k] / 32] |= (uint32_t)1 << (key_bit[k] % 32);
        }
    }
    for (int32_t k = 0; k < K; k++) offsets[k + 1] += offsets[k];
    const int64_t n_pairs = offsets[K];
    in_rows = alloc_n(m->alloc, n_pairs, sizeof *in_rows);
    out_rows = alloc_n(m->alloc, n_pairs, sizeof *out_rows);
    if (!in_rows || !out_rows) goto oom;
    /* Pairs in output-row order within each offset. */
    memcpy(pos, offsets, (size_t)K * sizeof *pos);
    for (int64_t p = 0; p < n; p++) {
        const int32_t *row = m->out_in + p * K;
        for (int32_t k = 0; k < K; k++) {
            if (row[k] < 0) continue;
            in_rows[pos[k]] = row[k];
            out_rows[pos[k]] = (int32_t)p;
            pos[k]++;
        }
    }
    sort_by_key(perm, tmp, n, keys, words);
    vc_host_free(m->alloc, pos);
    vc_host_free(m->alloc, tmp);
    vc_host_free(m->alloc, keys);

    vc_host_free(m->alloc, m->offsets);
    vc_host_free(m->alloc, m->in_rows);
    vc_host_free(m->alloc, m->out_rows);
    vc_host_free(m->alloc, m->masks);
    vc_host_free(m->alloc, m->perm);
    m->offsets = offsets;
    m->in_rows = in_rows;
    m->out_rows = out_rows;
    m->n_pairs = n_pairs;
    m->mask_words = words;
    m->masks = masks;
    m->perm = perm;
    return VC_OK;

oom:
    vc_host_free(m->alloc, offsets);
    vc_host_free(m->alloc, pos);
    vc_host_free(m->alloc, masks);
    vc_host_free(m->alloc, perm);
    vc_host_free(m->alloc, tmp);
    vc_host_free(m->alloc, keys);
    vc_host_free(m->alloc, in_rows);
    vc_host_free(m->alloc, out_rows);
    return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "kernel map: out of memory for the pair lists and "
                   "masks of %lld outputs", (long long)n);
}

void vc_kmap_data_free(vc_kmap_data *m)
{
    if (!m) return;
    vc_host_free(m->alloc, m->out_coords);
    vc_host_free(m->alloc, m->out_in);
    vc_host_free(m->alloc, m->offsets);
    vc_host_free(m->alloc, m->in_rows);
    vc_host_free(m->alloc, m->out_rows);
    vc_host_free(m->alloc, m->masks);
    vc_host_free(m->alloc, m->perm);
    vc_host_free(m->alloc, m->tile_order);
    memset(m, 0, sizeof *m);
}

vc_status vc_kmap_tile_order_cpu(vc_kmap_data *m, vc_err *err)
{
    if (!m || m->n_out < 0 || (m->n_out > 0 && (!m->masks || !m->perm || m->mask_words < 1)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "tile order: map without masks or perm");
    vc_host_free(m->alloc, m->tile_order);
    m->tile_order = NULL;
    m->order_blocks = 0;
    if (m->n_out == 0) return VC_OK;
    const int64_t blocks = (m->n_out + VC_KMAP_ORDER_ROWS - 1) / VC_KMAP_ORDER_ROWS;
    const int32_t words = m->mask_words, most = 32 * words; /* costs 0 .. most */
    int32_t *order = alloc_n(m->alloc, blocks, sizeof *order);
    int32_t *cost = alloc_n(m->alloc, blocks, sizeof *cost);
    int64_t *start = vc_host_calloc(m->alloc, (size_t)most + 2, sizeof *start);
    if (!order || !cost || !start) {
        vc_host_free(m->alloc, order);
        vc_host_free(m->alloc, cost);
        vc_host_free(m->alloc, start);
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "tile order of %lld blocks",
                       (long long)blocks);
    }
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t lo = b * VC_KMAP_ORDER_ROWS;
        const int64_t hi = lo + VC_KMAP_ORDER_ROWS < m->n_out ? lo + VC_KMAP_ORDER_ROWS : m->n_out;
        int32_t c = 0;
        for (int32_t w = 0; w < words; w++) {
            uint32_t v = 0;
            for (int64_t i = lo; i < hi; i++) v |= m->masks[(int64_t)m->perm[i] * words + w];
            for (; v; v &= v - 1) c++;
        }
        cost[b] = c;
        start[most - c + 1]++; /* bucket most - c: cost descending */
    }
    for (int32_t c = 0; c <= most; c++) start[c + 1] += start[c];
    for (int64_t b = 0; b < blocks; b++) order[start[most - cost[b]]++] = (int32_t)b;
    vc_host_free(m->alloc, cost);
    vc_host_free(m->alloc, start);
    m->tile_order = order;
    m->order_blocks = blocks;
    return VC_OK;
}
