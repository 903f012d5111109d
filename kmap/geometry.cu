// kmap/geometry.cu - a GPU build's description: the argument checks, the key layouts, the
// geometry (Geom) the kernels' target arithmetic reads, the map's header, the choice of the
// dense output path; and vc_kmap_gpu_debug_targets, the target arithmetic run on the host.
#include "kmap/kmap_internal.cuh"

namespace kmap_gpu {

// The dense output path (discover.cu) serves new-output maps whose output keys have at
// most kDenseMaxBits bits: a bitmap of at most 8 MB, whose clear, count and unpack move ~24 MB,
// which costs less than the output table's claims, the key sort and the ranks of a typical
// scan (measured, see docs/benchmarks.md).
// vc_engine_options.kmap_dense: 1 takes it up to kDenseForceBits (tests), -1 never (A/B).
const int32_t kDenseMaxBits = 26, kDenseForceBits = 28;

// Sizes.dense_bits of a build of j: its output key bits (at least 1), or 0 for the hash path.
int32_t dense_bits_for(const Job &j, const vc_engine_options *opt)
{
    if (!j.new_out) return 0;
    const int mode = opt ? opt->kmap_dense : 0;
    const int32_t most = mode > 0 ? kDenseForceBits : mode < 0 ? -1 : kDenseMaxBits;
    if (j.bits_out > most) return 0;
    return j.bits_out > 0 ? j.bits_out : 1;
}

namespace {

// Offsets per axis that one input coordinate can use at most: every one for SUBM and
// TRANSPOSED; for STRIDED and DOWNSAMPLE those d with d*dil in one residue class mod stride.
int64_t reach_of(const vc_map_desc *d)
{
    int64_t t = 1;
    for (int a = 0; a < 3; a++) {
        int64_t best = d->kernel[a];
        if (d->type == VC_MAP_STRIDED || d->type == VC_MAP_DOWNSAMPLE) {
            best = 0;
            for (int32_t i = 0; i < d->kernel[a]; i++) {
                int64_t c = 0;
                for (int32_t j = 0; j < d->kernel[a]; j++)
                    if (((int64_t)i * d->dilation[a]) % d->stride[a] ==
                        ((int64_t)j * d->dilation[a]) % d->stride[a])
                        c++;
                if (c > best) best = c;
            }
        }
        t *= best;
    }
    return t;
}

} // namespace

vc_status setup_job(Job *j, const int32_t *d_in, int64_t n_in, const int32_t shape[3],
                    int32_t batch_size, const vc_map_desc *d, vc_err *err)
{
    int32_t oshape[3];
    vc_status st = vc_kmap_check_build(d_in, n_in, shape, batch_size, d, oshape, err);
    if (st != VC_OK) return st;
    memset(j, 0, sizeof *j);
    if (vc_keypack_init(&j->kin, batch_size, shape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: coordinates of batch %d, shape "
                       "%dx%dx%d do not pack into 63 bits", (int)batch_size, (int)shape[0],
                       (int)shape[1], (int)shape[2]);
    j->new_out = d->type != VC_MAP_SUBM;
    if (j->new_out && vc_keypack_init(&j->kout, batch_size, oshape) != 0)
        return vc_fail(err, VC_ERR_OUT_OF_RANGE, "kernel map: output coordinates of batch %d, "
                       "shape %dx%dx%d do not pack into 63 bits", (int)batch_size,
                       (int)oshape[0], (int)oshape[1], (int)oshape[2]);
    if (!j->new_out) j->kout = j->kin;
    j->d_in = d_in;
    j->n_in = n_in;
    j->batch = batch_size;
    j->desc = *d;
    for (int a = 0; a < 3; a++) {
        j->shape[a] = shape[a];
        j->g.kernel[a] = d->kernel[a];
        j->g.stride[a] = d->stride[a];
        j->g.padding[a] = d->padding[a];
        j->g.dilation[a] = d->dilation[a];
        j->g.in_shape[a] = shape[a];
        j->g.out_shape[a] = oshape[a];
    }
    j->K = d->kernel[0] * d->kernel[1] * d->kernel[2];
    j->g.K = j->K;
    j->g.type = (int32_t)d->type;
    j->g.mag[0] = (65536u + (uint32_t)d->kernel[2] - 1u) / (uint32_t)d->kernel[2];
    j->g.mag[1] = (65536u + (uint32_t)d->kernel[1] - 1u) / (uint32_t)d->kernel[1];
    for (int a = 0; a < 3; a++) {
        const int64_t ks = d->kernel[a], st = d->stride[a], dil = d->dilation[a];
        j->g.t_off[a] = d->type == VC_MAP_STRIDED     ? (int64_t)d->padding[a]
                        : d->type == VC_MAP_DOWNSAMPLE ? (ks % 2 == 1 ? ks / 2 : 0) * dil
                                                       : -(int64_t)d->padding[a];
        const bool tr = d->type == VC_MAP_TRANSPOSED;
        const int sh = j->kout.shift[a + 1];
        j->g.smag[a] = st > 1 ? UINT64_MAX / (uint64_t)st + 1u : 0;
        for (int64_t k = 0; k < ks && k < kMaxKernel; k++) {
            j->g.eq[a][k] = k * dil / st;
            j->g.er[a][k] = (int32_t)(k * dil % st);
            if (!tr && st <= kRemTable) j->g.rbits[a][j->g.er[a][k]] |= (uint8_t)(1u << k);
            j->g.dkey[a][k] = (uint64_t)(tr ? -(k * dil) : j->g.eq[a][k]) << sh;
        }
        // the q whose every offset's target lies in [0, out_shape): STRIDED / DOWNSAMPLE q -
        // eq[a][d] (eq grows with d, eq[a][0] = 0); TRANSPOSED q + d x dil
        const int64_t reach = tr ? (ks - 1) * dil : j->g.eq[a][ks <= kMaxKernel ? ks - 1 : 0];
        j->g.q_lo[a] = tr ? 0 : reach;
        j->g.q_hi[a] = tr ? (int64_t)oshape[a] - reach : (int64_t)oshape[a];
    }
    j->words = (j->K + 31) / 32;
    j->bits_in = key_bits(j->kin);
    j->bits_out = key_bits(j->kout);
    j->reach = reach_of(d);
    return VC_OK;
}

void init_header(const Job &j, vc_kmap_data *m)
{
    memset(m, 0, sizeof *m);
    m->type = j.desc.type;
    for (int a = 0; a < 3; a++) {
        m->kernel[a] = j.desc.kernel[a];
        m->stride[a] = j.desc.stride[a];
        m->padding[a] = j.desc.padding[a];
        m->dilation[a] = j.desc.dilation[a];
        m->out_shape[a] = j.g.out_shape[a];
    }
    m->volume = j.K;
    m->n_in = j.n_in;
    m->out_batch_size = j.batch;
    m->mask_words = j.words;
}

} // namespace kmap_gpu

using namespace kmap_gpu;

extern "C" int vc_kmap_gpu_debug_targets(const vc_map_desc *d, const int32_t shape[3],
                                         int32_t batch_size, const int32_t row[4], int32_t *k,
                                         int32_t (*out)[4], int cap, vc_err *err)
{
    if (!row || cap < 0 || (cap > 0 && (!k || !out))) {
        vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map targets: NULL or negative argument");
        return -1;
    }
    Job j;
    if (setup_job(&j, NULL, 0, shape, batch_size, d, err) != VC_OK) return -1;
    if (!j.new_out) {
        vc_fail(err, VC_ERR_INVALID_ARGUMENT, "kernel map targets: a SUBM map has no targets");
        return -1;
    }
    uint64_t key;
    uint32_t list[3];
    const uint32_t n = row_pairs(j.g, j.kout, true, make_int4(row[0], row[1], row[2], row[3]),
                                 &key, list);
    for (uint32_t i = 0; i < n && (int64_t)i < cap; i++)
        vc_key_unpack(&j.kout, pair_of(j.g, key, list, i, &k[i]), out[i]);
    return (int)n;
}
