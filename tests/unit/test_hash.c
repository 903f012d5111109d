/* tests/unit/test_hash.c - the CPU coordinate hash table (hash/hash.h): exact key packing and
 * its (b, z, y, x) order, the capacity rule, collisions and growth, duplicates, the probe bound,
 * absent keys, and a million random keys checked against a sorted-array oracle. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"
#include "testutil.h"

static int lex_less(const int32_t a[4], const int32_t b[4])
{
    for (int i = 0; i < 4; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return 0;
}

static int roundtrip(const vc_keypack *kp, int32_t b, int32_t z, int32_t y, int32_t x)
{
    int32_t u[4];
    uint64_t key = vc_key_pack(kp, b, z, y, x);
    vc_key_unpack(kp, key, u);
    return key != VC_HASH_EMPTY && (key >> 63) == 0 && u[0] == b && u[1] == z && u[2] == y &&
           u[3] == x;
}

static void test_keypack(vc_rng *rng)
{
    vc_keypack kp;
    /* SECOND / CenterPoint KITTI grid, batch 64. */
    int32_t kitti[3] = {41, 1600, 1408};
    CHECK(vc_keypack_init(&kp, 64, kitti) == 0);
    CHECK(kp.bits[0] == 6 && kp.bits[1] == 6 && kp.bits[2] == 11 && kp.bits[3] == 11);
    CHECK(kp.shift[3] == 0 && kp.shift[2] == 11 && kp.shift[1] == 22 && kp.shift[0] == 28);
    CHECK(roundtrip(&kp, 0, 0, 0, 0));
    CHECK(roundtrip(&kp, 63, 40, 1599, 1407));
    CHECK(roundtrip(&kp, 63, 0, 1599, 0));
    CHECK(roundtrip(&kp, 0, 40, 0, 1407));
    CHECK(vc_key_in_range(&kp, 63, 40, 1599, 1407));
    CHECK(!vc_key_in_range(&kp, 64, 0, 0, 0));
    CHECK(!vc_key_in_range(&kp, 0, 41, 0, 0));
    CHECK(!vc_key_in_range(&kp, 0, 0, 1600, 0));
    CHECK(!vc_key_in_range(&kp, 0, 0, 0, 1408));
    CHECK(!vc_key_in_range(&kp, -1, 0, 0, 0));
    CHECK(!vc_key_in_range(&kp, 0, 0, 0, -1));

    /* Random round trips and order: packed order == (b, z, y, x) order. */
    int bad_rt = 0, bad_order = 0;
    for (int i = 0; i < 200000; i++) {
        int32_t a[4], c[4];
        for (int j = 0; j < 4; j++) {
            a[j] = (int32_t)vc_rng_int(rng, kp.limit[j]);
            /* half the time share a prefix so the lower fields decide */
            c[j] = (j < 2 && (i & 1)) ? a[j] : (int32_t)vc_rng_int(rng, kp.limit[j]);
        }
        if (!roundtrip(&kp, a[0], a[1], a[2], a[3])) bad_rt++;
        uint64_t ka = vc_key_pack(&kp, a[0], a[1], a[2], a[3]);
        uint64_t kc = vc_key_pack(&kp, c[0], c[1], c[2], c[3]);
        if ((ka < kc) != lex_less(a, c) || (ka == kc) != (memcmp(a, c, sizeof a) == 0))
            bad_order++;
    }
    CHECK_MSG(bad_rt == 0, "%d bad round trips", bad_rt);
    CHECK_MSG(bad_order == 0, "%d pairs out of order", bad_order);

    /* Limits of 1 take no bits but still round-trip 0. */
    int32_t ones[3] = {1, 1, 1};
    CHECK(vc_keypack_init(&kp, 1, ones) == 0);
    CHECK(kp.bits[0] + kp.bits[1] + kp.bits[2] + kp.bits[3] == 0);
    CHECK(roundtrip(&kp, 0, 0, 0, 0));
    CHECK(vc_key_pack(&kp, 0, 0, 0, 0) == 0);

    /* Non powers of two: 5 needs 3 bits, 8 needs 3, 9 needs 4. */
    int32_t odd[3] = {5, 8, 9};
    CHECK(vc_keypack_init(&kp, 3, odd) == 0);
    CHECK(kp.bits[0] == 2 && kp.bits[1] == 3 && kp.bits[2] == 3 && kp.bits[3] == 4);
    for (int32_t b = 0; b < 3; b++)
        for (int32_t z = 0; z < 5; z++)
            for (int32_t y = 0; y < 8; y++)
                for (int32_t x = 0; x < 9; x++)
                    if (!roundtrip(&kp, b, z, y, x)) bad_rt++;
    CHECK(bad_rt == 0);

    /* Exactly 63 bits: batch 2^18 and 2^15 per axis. */
    int32_t big[3] = {1 << 15, 1 << 15, 1 << 15};
    CHECK(vc_keypack_init(&kp, 1 << 18, big) == 0);
    CHECK(kp.shift[0] + kp.bits[0] == 63);
    CHECK(roundtrip(&kp, (1 << 18) - 1, (1 << 15) - 1, (1 << 15) - 1, (1 << 15) - 1));
    CHECK(roundtrip(&kp, (1 << 18) - 1, 0, 0, 0));
    CHECK(roundtrip(&kp, 0, 0, 0, (1 << 15) - 1));
    /* 64 bits and more: refused. */
    vc_keypack keep = kp;
    CHECK(vc_keypack_init(&kp, 1 << 19, big) == -1);
    CHECK(memcmp(&kp, &keep, sizeof kp) == 0); /* left untouched */
    int32_t huge[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
    CHECK(vc_keypack_init(&kp, INT32_MAX, huge) == -1);
    CHECK(vc_keypack_init(&kp, 1, huge) == -1); /* 93 bits */
    int32_t two[3] = {INT32_MAX, INT32_MAX, 1};
    CHECK(vc_keypack_init(&kp, 2, two) == 0);   /* 1 + 31 + 31 + 0 = 63 bits */
    CHECK(roundtrip(&kp, 1, INT32_MAX - 1, INT32_MAX - 1, 0));
    /* Limits below 1: refused. */
    int32_t zero[3] = {4, 0, 4};
    CHECK(vc_keypack_init(&kp, 1, zero) == -1);
    CHECK(vc_keypack_init(&kp, 0, kitti) == -1);
    int32_t neg[3] = {4, 4, -3};
    CHECK(vc_keypack_init(&kp, 1, neg) == -1);
}

static void test_capacity(void)
{
    CHECK(vc_hash_capacity_for(0) == 16);
    CHECK(vc_hash_capacity_for(1) == 16);
    CHECK(vc_hash_capacity_for(8) == 16);
    CHECK(vc_hash_capacity_for(9) == 32);
    CHECK(vc_hash_capacity_for(1000) == 2048);
    CHECK(vc_hash_capacity_for(1024) == 2048);
    CHECK(vc_hash_capacity_for(1025) == 4096);
    CHECK(vc_hash_capacity_for((int64_t)1 << 40) == (int64_t)1 << 41);
    CHECK(vc_hash_capacity_for(-1) == 0);
    CHECK(vc_hash_capacity_for(INT64_MAX) == 0);
    CHECK(vc_hash_capacity_for(((int64_t)1 << 62) + 1) == 0);
}

/* Every key of keys[n] is found with value vals[i]. */
static int all_found(const vc_hash *h, const uint64_t *keys, const int32_t *vals, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int32_t v = -7;
        if (vc_hash_find(h, keys[i], &v) != VC_HASH_FOUND || v != vals[i]) bad++;
    }
    return bad;
}

static void test_collisions(void)
{
    /* Keys that share one home slot in a 16-slot table: linear probing must place them all. */
    vc_hash h;
    CHECK(vc_hash_init(&h, 0, NULL) == VC_HASH_INSERTED);
    CHECK(h.capacity == 16 && h.count == 0 && h.max_probe == VC_HASH_DEFAULT_MAX_PROBE);
    uint64_t same[8];
    int32_t vals[8];
    int n = 0;
    uint64_t home = vc_hash_mix(12345) & 15u;
    for (uint64_t k = 12345; n < 8; k++)
        if ((vc_hash_mix(k) & 15u) == home) {
            same[n] = k;
            vals[n] = 1000 + n;
            n++;
        }
    for (int i = 0; i < 8; i++)
        CHECK(vc_hash_insert(&h, same[i], vals[i], NULL) == VC_HASH_INSERTED);
    CHECK(h.count == 8);
    CHECK(all_found(&h, same, vals, 8) == 0);
    /* A 9th key would pass load 0.5: refused, table unchanged. */
    CHECK(vc_hash_insert(&h, 999999, 1, NULL) == VC_HASH_PROBE_LIMIT);
    CHECK(h.count == 8 && h.capacity == 16);
    int32_t v = 0;
    CHECK(vc_hash_find(&h, 999999, &v) != VC_HASH_FOUND);
    /* Grow keeps everything. */
    CHECK(vc_hash_grow(&h) == VC_HASH_INSERTED);
    CHECK(h.capacity == 32 && h.count == 8);
    CHECK(all_found(&h, same, vals, 8) == 0);
    CHECK(vc_hash_insert(&h, 999999, 1, NULL) == VC_HASH_INSERTED);
    vc_hash_free(&h);
    CHECK(h.keys == NULL && h.vals == NULL && h.capacity == 0 && h.count == 0);
    vc_hash_free(&h); /* twice is harmless */
    vc_hash_free(NULL);

    /* Many keys into a tiny table through insert_grow: forced growth many times. */
    CHECK(vc_hash_init(&h, 1, NULL) == VC_HASH_INSERTED);
    enum { M = 20000 };
    uint64_t *keys = malloc(M * sizeof *keys);
    int32_t *vv = malloc(M * sizeof *vv);
    if (!keys || !vv) {
        CHECK(!"out of memory");
        free(keys);
        free(vv);
        vc_hash_free(&h);
        return;
    }
    int bad = 0;
    for (int i = 0; i < M; i++) {
        keys[i] = (uint64_t)i * 1024u; /* regular keys: a weak hash would pile them up */
        vv[i] = i;
        if (vc_hash_insert_grow(&h, keys[i], vv[i], NULL) != VC_HASH_INSERTED) bad++;
        if (h.count * 2 > h.capacity) bad++;
    }
    CHECK(bad == 0);
    CHECK(h.count == M);
    CHECK((h.capacity & (h.capacity - 1)) == 0 && h.capacity >= 2 * M);
    CHECK(all_found(&h, keys, vv, M) == 0);
    free(keys);
    free(vv);
    vc_hash_free(&h);
}

static void test_duplicates(void)
{
    vc_hash h;
    CHECK(vc_hash_init(&h, 4, NULL) == VC_HASH_INSERTED);
    CHECK(vc_hash_insert(&h, 42, 7, NULL) == VC_HASH_INSERTED);
    int32_t ex = -1;
    CHECK(vc_hash_insert(&h, 42, 9, &ex) == VC_HASH_EXISTS);
    CHECK(ex == 7);
    ex = -1;
    CHECK(vc_hash_insert_grow(&h, 42, 11, &ex) == VC_HASH_EXISTS);
    CHECK(ex == 7);
    CHECK(vc_hash_insert(&h, 42, 9, NULL) == VC_HASH_EXISTS); /* NULL existing is fine */
    int32_t v = -1;
    CHECK(vc_hash_find(&h, 42, &v) == VC_HASH_FOUND && v == 7);
    CHECK(h.count == 1);
    /* Key 0 is a real key; the reserved empty key can never be stored or found. */
    CHECK(vc_hash_insert(&h, 0, 3, NULL) == VC_HASH_INSERTED);
    CHECK(vc_hash_find(&h, 0, &v) == VC_HASH_FOUND && v == 3);
    CHECK(vc_hash_insert(&h, VC_HASH_EMPTY, 5, NULL) != VC_HASH_INSERTED);
    CHECK(vc_hash_find(&h, VC_HASH_EMPTY, &v) != VC_HASH_FOUND);
    CHECK(h.count == 2);
    vc_hash_free(&h);
}

static void test_probe_limit(void)
{
    vc_hash h;
    CHECK(vc_hash_init(&h, 8, NULL) == VC_HASH_INSERTED);
    h.max_probe = 1;
    int32_t stuck = -1;
    uint64_t keys[64];
    int32_t vals[64];
    int n = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t k = 0x1000u + (uint64_t)i * 77u;
        vc_hash_result r = vc_hash_insert(&h, k, i, NULL);
        if (r == VC_HASH_PROBE_LIMIT) {
            stuck = i;
            break;
        }
        CHECK(r == VC_HASH_INSERTED);
        keys[n] = k;
        vals[n] = i;
        n++;
    }
    CHECK_MSG(stuck >= 0 && stuck <= 8, "stuck at %d", stuck);
    CHECK(h.count == n && h.capacity == 16);
    if (stuck >= 0) {
        uint64_t k = 0x1000u + (uint64_t)stuck * 77u;
        vc_hash_result r = vc_hash_insert_grow(&h, k, stuck, NULL);
        CHECK_MSG(r == VC_HASH_INSERTED, "insert_grow gave %d", (int)r);
        if (r == VC_HASH_INSERTED) {
            keys[n] = k;
            vals[n] = stuck;
            n++;
        }
        CHECK(h.capacity > 16 && h.max_probe == 1);
        CHECK(all_found(&h, keys, vals, n) == 0);
        CHECK(h.count == n);
    }
    /* A lookup walks at most max_probe slots: absent keys end NOT_FOUND or PROBE_LIMIT. */
    int bad = 0;
    for (uint64_t k = 1; k < 2000; k += 3) {
        int32_t v;
        vc_hash_result r = vc_hash_find(&h, k + ((uint64_t)1 << 40), &v);
        if (r != VC_HASH_NOT_FOUND && r != VC_HASH_PROBE_LIMIT) bad++;
    }
    CHECK(bad == 0);
    vc_hash_free(&h);

    /* A full table with no probe bound to speak of never loops: the bound ends the walk. */
    CHECK(vc_hash_init(&h, 8, NULL) == VC_HASH_INSERTED);
    for (int i = 0; i < 8; i++) CHECK(vc_hash_insert(&h, (uint64_t)i, i, NULL) == VC_HASH_INSERTED);
    for (int64_t s = 0; s < h.capacity; s++)
        if (h.keys[s] == VC_HASH_EMPTY) h.keys[s] = 100000u + (uint64_t)s; /* fill every slot */
    int32_t v;
    vc_hash_result r = vc_hash_find(&h, 77777777u, &v);
    CHECK(r == VC_HASH_PROBE_LIMIT);
    r = vc_hash_insert(&h, 77777777u, 1, NULL);
    CHECK(r == VC_HASH_PROBE_LIMIT);
    vc_hash_free(&h);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct kv {
    uint64_t key;
    int32_t first;
} kv;

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    if (x->key != y->key) return (x->key > y->key) - (x->key < y->key);
    return (x->first > y->first) - (x->first < y->first);
}

/* Index of key in sorted u[n], or -1. */
static int64_t search(const kv *u, int64_t n, uint64_t key)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (u[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && u[lo].key == key ? lo : -1;
}

static void test_random_million(vc_rng *rng)
{
    enum { N = 1000000 };
    /* Keys from a small grid, so that duplicates occur (about 1 in 17). */
    vc_keypack kp;
    int32_t shape[3] = {41, 512, 512};
    CHECK(vc_keypack_init(&kp, 2, shape) == 0);
    uint64_t *keys = malloc(N * sizeof *keys);
    kv *oracle = malloc(N * sizeof *oracle);
    int32_t *res = malloc(N * sizeof *res);
    int32_t *exist = malloc(N * sizeof *exist);
    uint64_t *stored = NULL;
    vc_hash h;
    memset(&h, 0, sizeof h);
    if (!keys || !oracle || !res || !exist) {
        CHECK(!"out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++) {
        int32_t b = (int32_t)vc_rng_int(rng, 2), z = (int32_t)vc_rng_int(rng, 41);
        int32_t y = (int32_t)vc_rng_int(rng, 512), x = (int32_t)vc_rng_int(rng, 512);
        keys[i] = vc_key_pack(&kp, b, z, y, x);
        oracle[i].key = keys[i];
        oracle[i].first = i;
    }
    CHECK(vc_hash_init(&h, 1000, NULL) == VC_HASH_INSERTED); /* grows ~10 times */
    for (int i = 0; i < N; i++) {
        exist[i] = -1;
        res[i] = vc_hash_insert_grow(&h, keys[i], i, &exist[i]);
    }
    qsort(oracle, N, sizeof *oracle, cmp_kv);
    /* Unique keys with their first row. */
    int64_t nu = 0;
    for (int64_t i = 0; i < N; i++)
        if (i == 0 || oracle[i].key != oracle[i - 1].key) oracle[nu++] = oracle[i];
    printf("1M keys: %lld unique, capacity %lld\n", (long long)nu, (long long)h.capacity);
    CHECK(h.count == nu);
    CHECK(h.count * 2 <= h.capacity);
    int bad_res = 0, bad_find = 0, bad_absent = 0;
    for (int i = 0; i < N; i++) {
        int64_t j = search(oracle, nu, keys[i]);
        int first = j >= 0 && oracle[j].first == i;
        if (first ? res[i] != VC_HASH_INSERTED
                  : (res[i] != VC_HASH_EXISTS || j < 0 || exist[i] != oracle[j].first))
            bad_res++;
    }
    for (int64_t j = 0; j < nu; j++) {
        int32_t v = -1;
        if (vc_hash_find(&h, oracle[j].key, &v) != VC_HASH_FOUND || v != oracle[j].first)
            bad_find++;
    }
    int n_absent = 0;
    for (int i = 0; i < 200000; i++) {
        int32_t b = (int32_t)vc_rng_int(rng, 2), z = (int32_t)vc_rng_int(rng, 41);
        int32_t y = (int32_t)vc_rng_int(rng, 512), x = (int32_t)vc_rng_int(rng, 512);
        uint64_t k = vc_key_pack(&kp, b, z, y, x);
        if (search(oracle, nu, k) >= 0) continue;
        n_absent++;
        int32_t v = -5;
        if (vc_hash_find(&h, k, &v) != VC_HASH_NOT_FOUND || v != -5) bad_absent++;
    }
    CHECK_MSG(bad_res == 0, "%d insert results differ from the oracle", bad_res);
    CHECK_MSG(bad_find == 0, "%d stored keys not found with their first row", bad_find);
    CHECK_MSG(bad_absent == 0, "%d of %d absent keys reported present", bad_absent, n_absent);
    CHECK(n_absent > 1000);
    /* vc_hash_keys lists exactly the unique keys. */
    stored = malloc((size_t)(nu > 0 ? nu : 1) * sizeof *stored);
    if (!stored) {
        CHECK(!"out of memory");
        goto done;
    }
    vc_hash_keys(&h, stored);
    qsort(stored, (size_t)nu, sizeof *stored, cmp_u64);
    int bad_keys = 0;
    for (int64_t j = 0; j < nu; j++)
        if (stored[j] != oracle[j].key) bad_keys++;
    CHECK(bad_keys == 0);
done:
    vc_hash_free(&h);
    free(keys);
    free(oracle);
    free(res);
    free(exist);
    free(stored);
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_hash");
    test_keypack(&rng);
    test_capacity();
    test_collisions();
    test_duplicates();
    test_probe_limit();
    test_random_million(&rng);
    TEST_END();
}
