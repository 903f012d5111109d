/* conv/tune.c - buckets and the tuning table (conv/tune.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/tune.h"

int vc_tune_key_of(const vc_kmap_data *m, int64_t c_in, int64_t c_out, vc_dtype dtype, int tf32,
                   vc_tune_key *out)
{
    if (!m || m->n_out <= 0 || m->n_pairs <= 0 || c_in < 1 || c_out < 1 || c_in > INT32_MAX ||
        c_out > INT32_MAX)
        return -1;
    vc_tune_key k;
    memset(&k, 0, sizeof k);
    k.math = dtype == VC_DTYPE_FP16   ? VC_TUNE_FP16
             : dtype == VC_DTYPE_BF16 ? VC_TUNE_BF16
             : tf32                   ? VC_TUNE_TF32
                                      : VC_TUNE_FP32;
    k.map_type = (int32_t)m->type;
    k.volume = m->volume;
    k.c_in = (int32_t)c_in;
    k.c_out = (int32_t)c_out;
    int32_t b = 0;
    for (int64_t n = m->n_out; n > 1; n >>= 1) b++; /* exact: no floating point */
    k.out_log2 = b;
    /* Half octaves of the mean taps per output. The mean is at most K <= 343, so the log is
     * far from any value where double rounding could move the floor across platforms, except
     * at exact powers of sqrt(2), which every IEEE platform's log2 of the same double gives
     * alike. */
    const double mean = (double)m->n_pairs / (double)m->n_out;
    k.taps_x2 = mean < 1.0 ? 0 : (int32_t)floor(2.0 * log2(mean));
    *out = k;
    return 0;
}

void vc_tune_key_text(const vc_tune_key *k, char *buf, size_t len)
{
    static const char *const math[] = {"fp32", "fp16", "bf16", "tf32"};
    static const char *const maps[] = {"subm", "strided", "downsample", "inverse", "transposed"};
    snprintf(buf, len, "%s %s K%d %d->%d out 2^%d taps 2^%d%s",
             k->math >= 0 && k->math < 4 ? math[k->math] : "?",
             k->map_type >= 0 && k->map_type < 5 ? maps[k->map_type] : "?", (int)k->volume,
             (int)k->c_in, (int)k->c_out, (int)k->out_log2, (int)(k->taps_x2 / 2),
             k->taps_x2 % 2 ? ".5" : "");
}

int vc_tune_key_equal(const vc_tune_key *a, const vc_tune_key *b)
{
    return a->math == b->math && a->map_type == b->map_type && a->volume == b->volume &&
           a->c_in == b->c_in && a->c_out == b->c_out && a->out_log2 == b->out_log2 &&
           a->taps_x2 == b->taps_x2;
}

const vc_tune_entry *vc_tune_find(const vc_tune_table *t, const vc_tune_key *k)
{
    if (!t || !k) return NULL;
    for (int32_t i = 0; i < t->n; i++)
        if (vc_tune_key_equal(&t->e[i].key, k)) return &t->e[i];
    return NULL;
}

int vc_tune_put(vc_tune_table *t, const vc_tune_entry *e)
{
    const vc_tune_entry *old = vc_tune_find(t, &e->key);
    if (old) {
        t->e[old - t->e] = *e;
        return 0;
    }
    if (t->n == t->cap) {
        const int32_t cap = t->cap ? 2 * t->cap : 16;
        if (cap <= t->cap) return -1;
        vc_tune_entry *p = realloc(t->e, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->e = p;
        t->cap = cap;
    }
    t->e[t->n++] = *e;
    return 0;
}

void vc_tune_table_clear(vc_tune_table *t)
{
    if (!t) return;
    free(t->e);
    t->e = NULL;
    t->n = t->cap = 0;
}
