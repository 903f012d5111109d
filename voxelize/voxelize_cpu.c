/* voxelize/voxelize_cpu.c - CPU voxelization: points -> sparse voxels (the reference for the GPU twin).
 *
 * Semantics (the GPU twin must give bit-identical coordinates and counts):
 *  - Grid: voxel_size (x, y, z) > 0 and finite; range (xmin, ymin, zmin, xmax, ymax, zmax)
 *    finite with max > min per axis. Shape per axis = (int)roundf((max - min) / size) evaluated
 *    in float32 (as spconv); it must be >= 1 (else VC_ERR_INVALID_ARGUMENT) and <= 2^30 (else
 *    VC_ERR_LIMIT). The shape is reported as (z, y, x).
 *  - Batch: b = batch ? batch[i] : 0 for every point i, including points later dropped as
 *    non-finite or out of range. b < 0 is VC_ERR_INVALID_ARGUMENT; with desc->batch_size > 0,
 *    b >= batch_size is VC_ERR_OUT_OF_RANGE; with desc->batch_size == 0 the result's batch size
 *    is 1 + the largest b of all points (1 when there are none).
 *  - Batch indices are validated first, over all points, then coordinates in input order: a
 *    batch error names the first point with a bad batch index, a coordinate error the first
 *    non-finite point.
 *    A point whose x, y or z is NaN or infinite is dropped and counted in points_nonfinite
 *    (VC_NONFINITE_SKIP) or is VC_ERR_INVALID_ARGUMENT naming its index (VC_NONFINITE_ERROR).
 *    Extra columns (dim > 3) are not checked: they are reduced as given.
 *  - Voxel index per axis c = (int)floorf((p - min) / size), a float32 division (not a multiply
 *    by the reciprocal). The point is kept when 0 <= c < shape on every axis, otherwise it is
 *    counted in points_out_of_range.
 *  - Points are grouped by (b, z, y, x) in the coordinate hash table (keys packed exactly by
 *    vc_keypack over (batch_size, shape); a layout over 63 bits is VC_ERR_OUT_OF_RANGE). Voxel
 *    ids are given in order of first appearance, so a voxel's id orders it by its first
 *    (smallest) point index.
 *  - Features over all `dim` columns: MEAN = (float)(sum in double / count); FIRST = the columns
 *    of the voxel's first point; COUNT = one channel, the point count as float. Stored in
 *    desc->dtype (fp32, fp16 or bf16, round to nearest even).
 *  - voxels_total = distinct voxels. When max_voxels > 0 and voxels_total > max_voxels, the
 *    max_voxels voxels whose first point comes earliest are kept (spconv keeps voxels in order
 *    of first appearance); points of dropped voxels do not count in points_used.
 *  - Output rows are sorted by (b, z, y, x): the packed keys are radix sorted.
 *  - No points (or none kept) gives n = 0 with NULL arrays, and is a success.
 *  - On failure nothing is written to *out or *stats.
 * Determinism: every pass is serial in input order (no OpenMP yet); sums run in input order
 * in double.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "voxelize/voxelize.h"
#include "core/dtype.h"
#include "hash/hash.h"
#include "core/alloc.h"

#define VC_VOX_MAX_SHAPE ((int64_t)1 << 30)

static const char *const vc_axis_name[3] = {"x", "y", "z"};

vc_status vc_voxelize_check(const vc_voxelize_desc *d, int32_t shape[3], vc_err *err)
{
    if (!d) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: descriptor is NULL");
    if (d->struct_size < sizeof(vc_voxelize_desc))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: desc struct_size %u is smaller than sizeof(vc_voxelize_desc) "
                       "%u (initialize it with VC_VOXELIZE_DESC_INIT)",
                       (unsigned)d->struct_size, (unsigned)sizeof(vc_voxelize_desc));
    int32_t s[3]; /* x, y, z */
    for (int a = 0; a < 3; a++) {
        float size = d->voxel_size[a];
        float lo = d->range[a], hi = d->range[a + 3];
        if (!isfinite(size) || !(size > 0.0f))
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "voxelize: voxel_size %s = %g must be finite and > 0",
                           vc_axis_name[a], (double)size);
        if (!isfinite(lo) || !isfinite(hi))
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "voxelize: range %s = [%g, %g] must be finite", vc_axis_name[a],
                           (double)lo, (double)hi);
        if (!(hi > lo))
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "voxelize: range %s = [%g, %g] needs max > min", vc_axis_name[a],
                           (double)lo, (double)hi);
        volatile float ext = hi - lo; /* float32 evaluation, as the GPU twin does */
        volatile float q = ext / size;
        float r = roundf(q);
        if (!(r <= (float)VC_VOX_MAX_SHAPE)) /* also catches inf */
            return vc_fail(err, VC_ERR_LIMIT,
                           "voxelize: grid along %s has round((%g - %g) / %g) = %g voxels, over "
                           "the limit 2^30",
                           vc_axis_name[a], (double)hi, (double)lo, (double)size, (double)r);
        if (!(r >= 1.0f))
            return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                           "voxelize: grid along %s has round((%g - %g) / %g) = 0 voxels "
                           "(voxel size larger than twice the range)",
                           vc_axis_name[a], (double)hi, (double)lo, (double)size);
        s[a] = (int32_t)r;
    }
    if ((unsigned)d->reduce > (unsigned)VC_REDUCE_COUNT)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: reduce %d is not a vc_reduce",
                       (int)d->reduce);
    if ((unsigned)d->nonfinite > (unsigned)VC_NONFINITE_ERROR)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: nonfinite %d is not a vc_nonfinite", (int)d->nonfinite);
    if (d->max_voxels < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: max_voxels %lld is negative",
                       (long long)d->max_voxels);
    if (d->batch_size < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: batch_size %d is negative",
                       (int)d->batch_size);
    if (!vc_is_float_dtype(d->dtype))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: dtype %d must be fp32, fp16 or bf16", (int)d->dtype);
    if (shape) {
        shape[0] = s[2];
        shape[1] = s[1];
        shape[2] = s[0];
    }
    return VC_OK;
}

void vc_voxels_free(vc_voxels *v)
{
    if (!v) return;
    vc_host_free(v->alloc, v->coords);
    vc_host_free(v->alloc, v->features);
    memset(v, 0, sizeof *v);
}

/* Sorts keys[0..n) ascending (keys distinct, below 2^bits), carrying ids along. LSD radix sort
 * with 11-bit digits over the used bits only; tk/ti are scratch of n elements. The sorted
 * result ends up in keys/ids. */
static void vc_radix_sort_pairs(uint64_t *keys, int32_t *ids, uint64_t *tk, int32_t *ti,
                                int64_t n, int bits)
{
    enum { DIGIT = 11, BUCKETS = 1 << DIGIT };
    int64_t cnt[BUCKETS];
    uint64_t *sk = keys, *dk = tk;
    int32_t *si = ids, *di = ti;
    for (int shift = 0; shift < bits; shift += DIGIT) {
        memset(cnt, 0, sizeof cnt);
        for (int64_t i = 0; i < n; i++) cnt[(sk[i] >> shift) & (BUCKETS - 1)]++;
        int64_t sum = 0;
        for (int b = 0; b < BUCKETS; b++) {
            int64_t c = cnt[b];
            cnt[b] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t p = cnt[(sk[i] >> shift) & (BUCKETS - 1)]++;
            dk[p] = sk[i];
            di[p] = si[i];
        }
        uint64_t *tk2 = sk; sk = dk; dk = tk2;
        int32_t *ti2 = si; si = di; di = ti2;
    }
    if (sk != keys) {
        memcpy(keys, sk, (size_t)n * sizeof *keys);
        memcpy(ids, si, (size_t)n * sizeof *ids);
    }
}

/* Working memory of one call; freed together. */
typedef struct vc_vox_work {
    uint64_t *pkey;   /* [count] packed key of each point, or VC_HASH_EMPTY when dropped      */
    int32_t *vid;     /* [count] voxel id of each kept point, or -1                            */
    vc_hash hash;
    int hash_live;
    int64_t *first;   /* [nvox] first point of each voxel                                     */
    int64_t *npts;    /* [nvox] points per voxel                                               */
    uint64_t *vkey;   /* [kept] packed key per kept voxel, then sorted                         */
    int32_t *order;   /* [kept] voxel ids, sorted alongside vkey                               */
    uint64_t *tkey;   /* radix scratch                                                         */
    int32_t *tord;
    double *sums;     /* [kept, dim] for MEAN                                                  */
    const vc_allocator *a; /* where every array of the call comes from (core/alloc.h)         */
} vc_vox_work;

static void vc_vox_work_free(vc_vox_work *w)
{
    vc_host_free(w->a, w->pkey);
    vc_host_free(w->a, w->vid);
    if (w->hash_live) vc_hash_free(&w->hash);
    vc_host_free(w->a, w->first);
    vc_host_free(w->a, w->npts);
    vc_host_free(w->a, w->vkey);
    vc_host_free(w->a, w->order);
    vc_host_free(w->a, w->tkey);
    vc_host_free(w->a, w->tord);
    vc_host_free(w->a, w->sums);
}

/* n elements of `size` bytes through a, with an overflow check; NULL for n == 0 is not an
 * error the callers see (they only call with n > 0). */
static void *vc_alloc_n(const vc_allocator *a, int64_t n, size_t size)
{
    int64_t bytes;
    if (n <= 0) n = 1;
    if (vc_mul_overflow_i64(n, (int64_t)size, &bytes) || (uint64_t)bytes > SIZE_MAX) return NULL;
    return vc_host_alloc(a, (size_t)bytes);
}

vc_status vc_voxelize_check_args(const vc_voxelize_desc *d, const vc_points *pts,
                                 const vc_voxels *out, vc_memory where, int32_t shape[3],
                                 int64_t *total_elems, vc_err *err)
{
    vc_status st = vc_voxelize_check(d, shape, err);
    if (st != VC_OK) return st;
    if (!pts) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: points is NULL");
    if (!out) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: output is NULL");
    if (pts->memory != where)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       where == VC_MEMORY_HOST ? "voxelize (CPU): points must be in host memory"
                                               : "voxelize (GPU): points must be in device memory");
    if (pts->dim < 3 || (int64_t)pts->dim > VC_MAX_CHANNELS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: points dim %d must be in [3, %lld] (x, y, z, extra columns)",
                       (int)pts->dim, (long long)VC_MAX_CHANNELS);
    if (pts->count < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "voxelize: points count %lld is negative",
                       (long long)pts->count);
    if (pts->count > 0 && !pts->data)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "voxelize: points data is NULL with count %lld", (long long)pts->count);
    if (vc_mul_overflow_i64(pts->count, pts->dim, total_elems))
        return vc_fail(err, VC_ERR_LIMIT, "voxelize: %lld points x %d columns overflows",
                       (long long)pts->count, (int)pts->dim);
    return VC_OK;
}

/* Pass 1: validates the batch index of every point, in input order, and settles the batch size.
 * Invariant on VC_OK: every point's index b satisfies 0 <= b < *batch_size_out, which is
 * d->batch_size when set, else 1 + the largest index (1 with no points or no batch array). */
static vc_status vc_vox_batch_size(const vc_voxelize_desc *d, const int32_t *B, int64_t n,
                                   int32_t *batch_size_out, vc_err *err)
{
    int32_t batch_size = d->batch_size;
    int32_t maxb = 0;
    if (B) {
        for (int64_t i = 0; i < n; i++) {
            int32_t b = B[i];
            if (b < 0)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "voxelize: point %lld has negative batch index %d", (long long)i,
                               (int)b);
            if (d->batch_size > 0 && b >= d->batch_size)
                return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                               "voxelize: point %lld has batch index %d, batch_size is %d",
                               (long long)i, (int)b, (int)d->batch_size);
            if (b > maxb) maxb = b;
        }
    }
    if (batch_size == 0) {
        if (maxb == INT32_MAX)
            return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                           "voxelize: batch index %d leaves no room for a batch size", (int)maxb);
        batch_size = maxb + 1;
    }
    *batch_size_out = batch_size;
    return VC_OK;
}

/* How pass 2 classified the points: each point is counted in exactly one field. */
typedef struct vc_vox_tally {
    int64_t nonfinite;
    int64_t out_of_range;
    int64_t valid;
} vc_vox_tally;

/* Pass 2: allocates w->pkey and w->vid and fills w->pkey with the packed voxel key of every
 * point, in input order. Invariant: w->pkey[i] != VC_HASH_EMPTY exactly for the tally->valid points
 * that are finite and inside the grid; under VC_NONFINITE_ERROR the first non-finite point is the
 * one reported. On failure the caller frees w. */
static vc_status vc_vox_point_keys(const vc_voxelize_desc *d, const vc_points *pts,
                                   const int32_t shape[3], const vc_keypack *kp, vc_vox_work *w,
                                   vc_vox_tally *tally, vc_err *err)
{
    const int64_t n = pts->count;
    const int64_t dim = pts->dim;
    const float *P = pts->data;
    const int32_t *B = pts->batch;
    int64_t n_nonfinite = 0, n_out_of_range = 0, n_valid = 0;

    if (n > 0) {
        w->pkey = vc_alloc_n(w->a, n, sizeof *w->pkey);
        w->vid = vc_alloc_n(w->a, n, sizeof *w->vid);
        if (!w->pkey || !w->vid)
            return vc_fail(err, VC_ERR_OUT_OF_MEMORY,
                           "voxelize: out of memory for %lld points", (long long)n);
    }
    const float lo[3] = {d->range[0], d->range[1], d->range[2]};
    const float vs[3] = {d->voxel_size[0], d->voxel_size[1], d->voxel_size[2]};
    const float lim[3] = {(float)shape[2], (float)shape[1], (float)shape[0]}; /* x, y, z */
    for (int64_t i = 0; i < n; i++) {
        const float *p = P + i * dim;
        w->pkey[i] = VC_HASH_EMPTY;
        if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) {
            if (d->nonfinite == VC_NONFINITE_ERROR)
                return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                               "voxelize: point %lld has a non-finite coordinate (%g, %g, %g)",
                               (long long)i, (double)p[0], (double)p[1], (double)p[2]);
            n_nonfinite++;
            continue;
        }
        int32_t c[3];
        int inside = 1;
        for (int a = 0; a < 3; a++) {
            volatile float t = p[a] - lo[a]; /* float32, no contraction or excess precision */
            volatile float q = t / vs[a];
            float f = floorf(q);
            if (!(f >= 0.0f && f < lim[a])) {
                inside = 0;
                break;
            }
            c[a] = (int32_t)f;
        }
        if (!inside) {
            n_out_of_range++;
            continue;
        }
        w->pkey[i] = vc_key_pack(kp, B ? B[i] : 0, c[2], c[1], c[0]);
        n_valid++;
    }
    tally->nonfinite = n_nonfinite;
    tally->out_of_range = n_out_of_range;
    tally->valid = n_valid;
    return VC_OK;
}

/* Pass 3 (n_valid > 0): groups the kept points by key through the hash table. Invariant:
 * w->vid[i] is point i's voxel id, or -1 for a dropped point; ids are given in order of first
 * appearance, so voxel v's first point comes before voxel v+1's. Sets *nvox_out to the number of
 * distinct voxels. The table is freed on success; on failure the caller frees w. */
static vc_status vc_vox_group(vc_vox_work *w, int64_t n, int64_t n_valid, int64_t *nvox_out,
                              vc_err *err)
{
    int64_t nvox = 0;
    if (vc_hash_init(&w->hash, n_valid, w->a) != VC_HASH_INSERTED)
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY,
                       "voxelize: out of memory for a hash table of %lld keys",
                       (long long)n_valid);
    w->hash_live = 1;
    for (int64_t i = 0; i < n; i++) {
        w->vid[i] = -1;
        if (w->pkey[i] == VC_HASH_EMPTY) continue;
        if (nvox >= VC_MAX_ROWS)
            return vc_fail(err, VC_ERR_LIMIT, "voxelize: more than %lld distinct voxels",
                           (long long)VC_MAX_ROWS);
        int32_t existing = -1;
        vc_hash_result hr = vc_hash_insert_grow(&w->hash, w->pkey[i], (int32_t)nvox, &existing);
        if (hr == VC_HASH_INSERTED) {
            w->vid[i] = (int32_t)nvox++;
        } else if (hr == VC_HASH_EXISTS) {
            w->vid[i] = existing;
        } else {
            if (hr == VC_HASH_NOMEM)
                return vc_fail(err, VC_ERR_OUT_OF_MEMORY,
                               "voxelize: out of memory growing the voxel hash table");
            return vc_fail(err, VC_ERR_CAPACITY,
                           "voxelize: voxel hash table probe limit hit at point %lld "
                           "(result %d)",
                           (long long)i, (int)hr);
        }
    }
    vc_hash_free(&w->hash);
    w->hash_live = 0;
    *nvox_out = nvox;
    return VC_OK;
}

/* Allocates, for kept > 0 voxels of `channels` output channels, the per-voxel work arrays
 * (w->sums only for MEAN) and the output arrays res->coords and res->features. Invariant on
 * VC_OK: w->npts and w->sums are zeroed, and kept x channels fits int64. On failure the caller
 * frees w and res. */
static vc_status vc_vox_alloc_kept(const vc_voxelize_desc *d, int64_t kept, int64_t channels,
                                   vc_vox_work *w, vc_voxels *res, vc_err *err)
{
    int64_t feat_elems;
    if (vc_mul_overflow_i64(kept, channels, &feat_elems))
        return vc_fail(err, VC_ERR_LIMIT, "voxelize: %lld voxels x %lld channels overflows",
                       (long long)kept, (long long)channels);
    w->first = vc_alloc_n(w->a, kept, sizeof *w->first);
    w->npts = vc_alloc_n(w->a, kept, sizeof *w->npts);
    w->vkey = vc_alloc_n(w->a, kept, sizeof *w->vkey);
    w->order = vc_alloc_n(w->a, kept, sizeof *w->order);
    w->tkey = vc_alloc_n(w->a, kept, sizeof *w->tkey);
    w->tord = vc_alloc_n(w->a, kept, sizeof *w->tord);
    if (d->reduce == VC_REDUCE_MEAN) w->sums = vc_alloc_n(w->a, feat_elems, sizeof *w->sums);
    res->coords = vc_alloc_n(w->a, kept * 4, sizeof *res->coords);
    res->features = vc_alloc_n(w->a, feat_elems, d->dtype == VC_DTYPE_FP32 ? 4 : 2);
    if (!w->first || !w->npts || !w->vkey || !w->order || !w->tkey || !w->tord || !res->coords ||
        !res->features || (d->reduce == VC_REDUCE_MEAN && !w->sums))
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY,
                       "voxelize: out of memory for %lld voxels x %lld channels",
                       (long long)kept, (long long)channels);
    memset(w->npts, 0, (size_t)kept * sizeof *w->npts);
    if (w->sums) memset(w->sums, 0, (size_t)feat_elems * sizeof *w->sums);
    return VC_OK;
}

/* Pass 4: for each kept voxel v < kept, in input order: its first point w->first[v], its key
 * w->vkey[v] (w->order[v] = v, ready for the sort), its point count w->npts[v] and, for MEAN,
 * the column sums in double in input order. Points of voxels >= kept (capped) and dropped
 * points are skipped. */
static void vc_vox_accumulate(const float *P, int64_t n, int64_t dim, int64_t kept,
                              vc_vox_work *w)
{
    int64_t next_new = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = w->vid[i];
        if (v < 0 || v >= kept) continue;
        if (v == next_new) { /* ids appear first in increasing order */
            w->first[v] = i;
            w->vkey[v] = w->pkey[i];
            w->order[v] = v;
            next_new++;
        }
        w->npts[v]++;
        if (w->sums) {
            const float *p = P + i * dim;
            double *s = w->sums + (int64_t)v * dim;
            for (int64_t c = 0; c < dim; c++) s[c] += (double)p[c];
        }
    }
}

/* Output rows, after the sort: row r is voxel w->order[r] with key w->vkey[r]; writes its
 * (b, z, y, x) and its reduced features in d->dtype. Returns the points of the kept voxels
 * (points_used). */
static int64_t vc_vox_write_rows(const vc_voxelize_desc *d, const float *P, int64_t dim,
                                 const vc_keypack *kp, const vc_vox_work *w, int64_t kept,
                                 int64_t channels, vc_voxels *res)
{
    int64_t points_used = 0;
    for (int64_t r = 0; r < kept; r++) {
        int32_t v = w->order[r];
        vc_key_unpack(kp, w->vkey[r], res->coords + r * 4);
        points_used += w->npts[v];
        int64_t o = r * channels;
        switch (d->reduce) {
        case VC_REDUCE_MEAN: {
            const double *s = w->sums + (int64_t)v * dim;
            double cnt = (double)w->npts[v];
            for (int64_t c = 0; c < dim; c++)
                vc_store_f32(res->features, d->dtype, o + c, (float)(s[c] / cnt));
            break;
        }
        case VC_REDUCE_FIRST: {
            const float *p = P + w->first[v] * dim;
            for (int64_t c = 0; c < dim; c++) vc_store_f32(res->features, d->dtype, o + c, p[c]);
            break;
        }
        default:
            vc_store_f32(res->features, d->dtype, o, (float)w->npts[v]);
            break;
        }
    }
    return points_used;
}

vc_status vc_voxelize_cpu(const vc_voxelize_desc *d, const vc_points *pts,
                          const vc_engine_options *opt, vc_voxels *out,
                          vc_voxelize_stats *stats, vc_err *err)
{
    int32_t shape[3];
    int64_t total_elems;
    vc_status st = vc_voxelize_check_args(d, pts, out, VC_MEMORY_HOST, shape, &total_elems, err);
    if (st != VC_OK) return st;

    const int64_t n = pts->count;
    const int64_t dim = pts->dim;
    const float *P = pts->data;

    int32_t batch_size;
    st = vc_vox_batch_size(d, pts->batch, n, &batch_size, err);
    if (st != VC_OK) return st;

    vc_keypack kp;
    if (vc_keypack_init(&kp, batch_size, shape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                       "voxelize: batch size %d and grid %d x %d x %d (z, y, x) do not pack "
                       "into a 63-bit key",
                       (int)batch_size, (int)shape[0], (int)shape[1], (int)shape[2]);

    vc_vox_work w;
    memset(&w, 0, sizeof w);
    w.a = vc_opt_allocator(opt);
    vc_vox_tally tally;
    st = vc_vox_point_keys(d, pts, shape, &kp, &w, &tally, err);
    if (st != VC_OK) {
        vc_vox_work_free(&w);
        return st;
    }

    int64_t nvox = 0;
    if (tally.valid > 0) {
        st = vc_vox_group(&w, n, tally.valid, &nvox, err);
        if (st != VC_OK) {
            vc_vox_work_free(&w);
            return st;
        }
    }

    /* The cap: ids below `kept` are the voxels whose first point comes earliest. */
    int64_t kept = nvox;
    if (d->max_voxels > 0 && kept > d->max_voxels) kept = d->max_voxels;
    const int64_t channels = d->reduce == VC_REDUCE_COUNT ? 1 : dim;

    vc_voxels res;
    memset(&res, 0, sizeof res);
    res.alloc = w.a;
    res.n = kept;
    res.channels = channels;
    memcpy(res.shape, shape, sizeof res.shape);
    res.batch_size = batch_size;
    int64_t points_used = 0;

    if (kept > 0) {
        st = vc_vox_alloc_kept(d, kept, channels, &w, &res, err);
        if (st != VC_OK) {
            vc_vox_work_free(&w);
            vc_voxels_free(&res);
            return st;
        }
        vc_vox_accumulate(P, n, dim, kept, &w);
        /* Sort the kept voxels by (b, z, y, x). */
        int key_bits = kp.bits[0] + kp.bits[1] + kp.bits[2] + kp.bits[3];
        vc_radix_sort_pairs(w.vkey, w.order, w.tkey, w.tord, kept, key_bits);
        points_used = vc_vox_write_rows(d, P, dim, &kp, &w, kept, channels, &res);
    }
    vc_vox_work_free(&w);

    *out = res;
    if (stats) {
        stats->points_in = n;
        stats->points_used = points_used;
        stats->points_out_of_range = tally.out_of_range;
        stats->points_nonfinite = tally.nonfinite;
        stats->voxels_total = nvox;
        stats->voxels_kept = kept;
    }
    return VC_OK;
}
