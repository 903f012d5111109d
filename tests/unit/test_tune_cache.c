/* test_tune_cache.c - the tune cache (src/tune_cache.h, src/io/tune_cache.c) and the buckets
 * (conv/tune.h): a written cache reads back equal; every prefix of it, every malformed field,
 * an edited value and trailing bytes are refused as corrupt; another format or library version
 * (or a configuration this build lacks) as stale; another device, SM count, CUDA or driver as
 * foreign; bucket keys and lookups; and a context (CPU) loading a cache: never a failure, one
 * warning saying why, the run unchanged. */
#include <stddef.h>

#include "conv/tune.h"
#include "src/tune_cache.h"
#include "testutil.h"
#include "voxconv.h"

static const char *const NAMES[] = {"f16_cfg_a", "f16_cfg_b", "bf16_cfg_c"};
#define N_NAMES 3

static vc_tune_ident ident(void)
{
    vc_tune_ident id;
    memset(&id, 0, sizeof id);
    snprintf(id.device, sizeof id.device, "NVIDIA H100 80GB HBM3");
    id.sm_count = 132;
    id.cc_major = 9;
    id.cc_minor = 0;
    id.cuda_runtime = 13000;
    id.cuda_driver = 13000;
    snprintf(id.driver, sizeof id.driver, "580.159.04");
    snprintf(id.library, sizeof id.library, "%s", vc_version());
    return id;
}

static vc_tune_entry entry(int32_t math, int32_t type, int32_t K, int32_t cin, int32_t cout,
                           int32_t ol, int32_t tx, int32_t config, int32_t split)
{
    vc_tune_entry e;
    memset(&e, 0, sizeof e);
    vc_tune_key k = {math, type, K, cin, cout, ol, tx};
    e.key = k;
    e.config = config;
    e.split = split;
    e.ms_planner = 0.25;
    e.ms_tuned = config < 0 ? 0.25 : 0.125;
    return e;
}

static void sample(vc_tune_table *t)
{
    vc_tune_entry e[3] = {entry(VC_TUNE_FP16, VC_MAP_SUBM, 27, 32, 32, 17, 5, 1, 1),
                          entry(VC_TUNE_FP16, VC_MAP_STRIDED, 27, 32, 64, 14, 3, -1, 0),
                          entry(VC_TUNE_BF16, VC_MAP_INVERSE, 8, 64, 32, 16, 0, 2, 4)};
    e[0].no_order = 1;
    e[2].two_pass = 1;
    for (int i = 0; i < 3; i++) CHECK(vc_tune_put(t, &e[i]) == 0);
}

static vc_tune_verdict parse(const char *text, size_t len, const vc_tune_ident *id,
                             vc_tune_table *out, char *why)
{
    return vc_tune_cache_parse(text, len, id, NAMES, N_NAMES, out, why, 400);
}

/* The sample cache's text (malloc'ed). */
static char *sample_text(void)
{
    vc_tune_table t = {NULL, 0, 0};
    sample(&t);
    vc_tune_ident id = ident();
    char *text = vc_tune_cache_format(&id, &t, NAMES, N_NAMES);
    vc_tune_table_clear(&t);
    return text;
}

static void test_round_trip(void)
{
    vc_tune_table t = {NULL, 0, 0}, back = {NULL, 0, 0};
    sample(&t);
    vc_tune_ident id = ident();
    char *text = vc_tune_cache_format(&id, &t, NAMES, N_NAMES);
    CHECK(text != NULL);
    if (!text) return;
    char why[400];
    CHECK_MSG(parse(text, strlen(text), &id, &back, why) == VC_TUNE_LOADED, "%s", why);
    CHECK(back.n == 3);
    for (int i = 0; i < back.n && i < 3; i++) {
        CHECK(vc_tune_key_equal(&back.e[i].key, &t.e[i].key));
        CHECK(back.e[i].config == t.e[i].config && back.e[i].split == t.e[i].split);
        CHECK(back.e[i].no_order == t.e[i].no_order && back.e[i].two_pass == t.e[i].two_pass);
        CHECK(back.e[i].ms_planner == t.e[i].ms_planner && back.e[i].ms_tuned == t.e[i].ms_tuned);
    }
    vc_tune_table_clear(&back);
    /* trailing whitespace is fine; an empty table too */
    const size_t n = strlen(text);
    char *ws = malloc(n + 3);
    memcpy(ws, text, n);
    memcpy(ws + n, " \n\t", 3);
    CHECK(parse(ws, n + 3, &id, &back, why) == VC_TUNE_LOADED);
    vc_tune_table_clear(&back);
    free(ws);
    vc_tune_table empty = {NULL, 0, 0};
    char *e = vc_tune_cache_format(&id, &empty, NAMES, N_NAMES);
    CHECK(e && parse(e, strlen(e), &id, &back, why) == VC_TUNE_LOADED && back.n == 0);
    free(e);
    /* an entry naming a configuration outside the names cannot be written */
    vc_tune_entry bad = entry(VC_TUNE_FP16, VC_MAP_SUBM, 27, 16, 16, 3, 2, N_NAMES, 1);
    CHECK(vc_tune_put(&t, &bad) == 0);
    CHECK(vc_tune_cache_format(&id, &t, NAMES, N_NAMES) == NULL);
    vc_tune_table_clear(&t);
    free(text);
}

/* Every prefix of a valid cache (a truncated file) is corrupt, and leaves the table empty. */
static void test_truncated(void)
{
    char *text = sample_text();
    vc_tune_ident id = ident();
    const size_t n = strlen(text);
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        vc_tune_table t = {NULL, 0, 0};
        char why[400];
        char *copy = malloc(len ? len : 1); /* no NUL after it: the parser must stay inside */
        memcpy(copy, text, len);
        if (parse(copy, len, &id, &t, why) != VC_TUNE_CORRUPT || t.n != 0 || !why[0]) bad++;
        free(copy);
        vc_tune_table_clear(&t);
    }
    CHECK_MSG(bad == 0, "%d of %zu prefixes not refused as corrupt", bad, n);
    free(text);
}

/* text with the first `from` replaced by `to` (malloc'ed), or NULL when absent. */
static char *edit(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    if (!at) return NULL;
    const size_t a = (size_t)(at - text), nf = strlen(from), nt = strlen(to);
    char *out = malloc(strlen(text) - nf + nt + 1);
    memcpy(out, text, a);
    memcpy(out + a, to, nt);
    strcpy(out + a + nt, at + nf);
    return out;
}

/* The sample with `from` replaced by `to` gives verdict v and a message holding `says`. */
static void expect(const char *from, const char *to, vc_tune_verdict v, const char *says)
{
    char *text = sample_text();
    char *e = edit(text, from, to);
    CHECK_MSG(e != NULL, "'%s' not in the sample", from);
    if (e) {
        vc_tune_ident id = ident();
        vc_tune_table t = {NULL, 0, 0};
        char why[400] = "";
        const vc_tune_verdict got = parse(e, strlen(e), &id, &t, why);
        CHECK_MSG(got == v && strstr(why, says) && t.n == 0,
                  "'%s' -> '%s': %s (%s), expected %s with '%s'", from, to,
                  vc_tune_verdict_name(got), why, vc_tune_verdict_name(v), says);
        vc_tune_table_clear(&t);
    }
    free(e);
    free(text);
}

static void test_malformed(void)
{
    /* syntax and shape */
    expect("{", "[", VC_TUNE_CORRUPT, "JSON");
    expect("\"entries\":", "\"entries\": 1, \"x\":", VC_TUNE_CORRUPT, "not an array");
    expect("\"device\":", "\"device\": [], \"y\":", VC_TUNE_CORRUPT, "not an object");
    expect("voxconv-tune-cache", "voxconv-model", VC_TUNE_CORRUPT, "format");
    expect("\"version\":", "\"version\": 1, \"version\":", VC_TUNE_CORRUPT, "twice");
    expect("\"checksum\"", "\"checksun\"", VC_TUNE_CORRUPT, "checksum");
    /* fields: missing, twice, wrong type, not an integer, out of range, unknown value */
    expect("\"volume\":", "\"volumes\":", VC_TUNE_CORRUPT, "\"volume\" is missing");
    expect("\"split\":", "\"split\": 1, \"split\":", VC_TUNE_CORRUPT, "given twice");
    expect("\"c_in\":\t32", "\"c_in\":\t\"32\"", VC_TUNE_CORRUPT, "not a number");
    expect("\"volume\":\t27", "\"volume\":\t27.5", VC_TUNE_CORRUPT, "not an integer");
    expect("\"volume\":\t27", "\"volume\":\t344", VC_TUNE_CORRUPT, "not an integer in");
    expect("\"c_out\":\t32", "\"c_out\":\t0", VC_TUNE_CORRUPT, "c_out");
    expect("\"out_log2\":\t17", "\"out_log2\":\t1e300", VC_TUNE_CORRUPT, "out_log2");
    expect("\"taps_x2\":\t5", "\"taps_x2\":\t-1", VC_TUNE_CORRUPT, "taps_x2");
    expect("\"math\":\t\"fp16\"", "\"math\":\t\"fp64\"", VC_TUNE_CORRUPT, "not a known value");
    expect("\"map\":\t\"subm\"", "\"map\":\ttrue", VC_TUNE_CORRUPT, "map");
    expect("\"ms_planner\":\t0.25", "\"ms_planner\":\t-1", VC_TUNE_CORRUPT, "ms_planner");
    expect("\"split\":\t1", "\"split\":\t17", VC_TUNE_CORRUPT, "split");
    expect("\"split\":\t1", "\"split\":\t0", VC_TUNE_CORRUPT, "needs a split");
    expect("\"split\":\t0", "\"split\":\t2", VC_TUNE_CORRUPT, "needs split, no_order");
    expect("\"no_order\":\t0", "\"no_order\":\t1", VC_TUNE_CORRUPT, "needs split, no_order");
    expect("\"no_order\":\t1", "\"no_order\":\t2", VC_TUNE_CORRUPT, "no_order");
    expect("\"two_pass\":\t0", "\"two_pass\":\ttrue", VC_TUNE_CORRUPT, "two_pass");
    expect("\"two_pass\":", "\"two_passes\":", VC_TUNE_CORRUPT, "\"two_pass\" is missing");
    expect("\"no_order\":\t1", "\"no_order\":\t0", VC_TUNE_CORRUPT, "checksum");
    expect("\"sm_count\":\t132", "\"sm_count\":\t\"132\"", VC_TUNE_CORRUPT, "sm_count");
    expect("\"driver\":\t\"580.159.04\"", "\"driver\":\tnull", VC_TUNE_CORRUPT, "driver");
    expect("\"entries\":\t[{", "\"entries\":\t[7, {", VC_TUNE_CORRUPT, "entries[0] is not");
    /* an edited value that still parses: the checksum refuses it */
    expect("\"c_out\":\t32", "\"c_out\":\t33", VC_TUNE_CORRUPT, "checksum");
    expect("\"split\":\t4", "\"split\":\t2", VC_TUNE_CORRUPT, "checksum");
    /* stale: format version, library version, a configuration this build lacks */
    expect("\"version\":\t1", "\"version\":\t2", VC_TUNE_STALE, "format version 2");
    char lib[64];
    snprintf(lib, sizeof lib, "\"library\":\t\"%s\"", vc_version());
    expect(lib, "\"library\":\t\"0.0.9\"", VC_TUNE_STALE, "voxconv 0.0.9");
    expect("\"f16_cfg_b\"", "\"f16_cfg_z\"", VC_TUNE_STALE, "f16_cfg_z");
    /* foreign: each device field */
    expect("HBM3", "PCIe", VC_TUNE_FOREIGN, "PCIe");
    expect("\"sm_count\":\t132", "\"sm_count\":\t114", VC_TUNE_FOREIGN, "114 SMs");
    expect("\"cc_minor\":\t0", "\"cc_minor\":\t1", VC_TUNE_FOREIGN, "9.1");
    expect("\"cuda_runtime\":\t13000", "\"cuda_runtime\":\t12080", VC_TUNE_FOREIGN, "12080");
    expect("\"cuda_driver\":\t13000", "\"cuda_driver\":\t12090", VC_TUNE_FOREIGN, "12090");
    expect("580.159.04", "535.104.05", VC_TUNE_FOREIGN, "535.104.05");
}

/* Other malformed texts: trailing bytes, a NUL inside, a bucket twice, size, odd JSON. */
static void test_other_corrupt(void)
{
    vc_tune_ident id = ident();
    char why[400];
    vc_tune_table t = {NULL, 0, 0};
    char *text = sample_text();
    const size_t n = strlen(text);
    char *tail = malloc(n + 2);
    memcpy(tail, text, n);
    memcpy(tail + n, "x", 2);
    CHECK(parse(tail, n + 1, &id, &t, why) == VC_TUNE_CORRUPT && strstr(why, "after"));
    memcpy(tail + n, "\0", 2);
    CHECK(parse(tail, n + 1, &id, &t, why) == VC_TUNE_CORRUPT);
    free(tail);
    /* the same bucket twice (its checksum consistent: written by hand) */
    vc_tune_table two = {NULL, 0, 0};
    vc_tune_entry a = entry(VC_TUNE_FP16, VC_MAP_SUBM, 27, 32, 32, 17, 5, 1, 1);
    CHECK(vc_tune_put(&two, &a) == 0);
    two.e = realloc(two.e, 2 * sizeof *two.e);
    two.e[1] = a;
    two.n = two.cap = 2;
    char *dup = vc_tune_cache_format(&id, &two, NAMES, N_NAMES);
    CHECK(dup && parse(dup, strlen(dup), &id, &t, why) == VC_TUNE_CORRUPT &&
          strstr(why, "twice"));
    free(dup);
    vc_tune_table_clear(&two);
    const char *odd[] = {"", " ", "null", "[]", "{}", "\"x\"", "{\"format\": 1}", "{{}",
                         "{\"format\":\"voxconv-tune-cache\"}", "\xff\xfe", "{\"a\":[[[[[[[["};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        CHECK_MSG(parse(odd[i], strlen(odd[i]), &id, &t, why) == VC_TUNE_CORRUPT && t.n == 0,
                  "'%s'", odd[i]);
    /* deep nesting and an oversized text */
    const size_t deep = 100000;
    char *d = malloc(deep);
    memset(d, '[', deep);
    CHECK(parse(d, deep, &id, &t, why) == VC_TUNE_CORRUPT);
    free(d);
    const size_t big = VC_TUNE_CACHE_MAX_BYTES + 1;
    char *b = malloc(big);
    memset(b, ' ', big);
    CHECK(parse(b, big, &id, &t, why) == VC_TUNE_CORRUPT && strstr(why, "more than"));
    free(b);
    /* a CPU context's identity: any GPU cache is foreign */
    vc_tune_ident cpu = ident();
    cpu.device[0] = 0;
    CHECK(parse(text, n, &cpu, &t, why) == VC_TUNE_FOREIGN && strstr(why, "CPU"));
    CHECK(vc_tune_cache_parse(NULL, 0, &id, NAMES, N_NAMES, &t, why, sizeof why) ==
          VC_TUNE_CORRUPT);
    free(text);
}

static void test_buckets(void)
{
    vc_kmap_data m;
    memset(&m, 0, sizeof m);
    m.type = VC_MAP_SUBM;
    m.volume = 27;
    vc_tune_key k;
    m.n_out = 0;
    m.n_pairs = 5;
    CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP16, 0, &k) == -1);
    m.n_out = 5;
    m.n_pairs = 0;
    CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP16, 0, &k) == -1);
    CHECK(vc_tune_key_of(NULL, 16, 16, VC_DTYPE_FP16, 0, &k) == -1);
    /* out_log2: exact floor(log2) */
    const int64_t outs[] = {1, 2, 3, 1023, 1024, 1025, (int64_t)1 << 30, ((int64_t)1 << 31) - 2};
    const int32_t logs[] = {0, 1, 1, 9, 10, 10, 30, 30};
    for (int i = 0; i < 8; i++) {
        m.n_out = outs[i];
        m.n_pairs = outs[i];
        CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP16, 0, &k) == 0 && k.out_log2 == logs[i]);
        CHECK(k.taps_x2 == 0);
    }
    /* taps_x2: floor(2 log2(pairs / outputs)) */
    m.n_out = 1000;
    const int64_t pairs[] = {1000, 1414, 1415, 2000, 2828, 2829, 27000, 8000};
    const int32_t tx[] = {0, 0, 1, 2, 2, 3, 9, 6};
    for (int i = 0; i < 8; i++) {
        m.n_pairs = pairs[i];
        CHECK_MSG(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP16, 0, &k) == 0 && k.taps_x2 == tx[i],
                  "pairs %lld: taps_x2 %d, expected %d", (long long)pairs[i], (int)k.taps_x2,
                  (int)tx[i]);
    }
    /* math: tf32 only for fp32 features */
    CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP32, 0, &k) == 0 && k.math == VC_TUNE_FP32);
    CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_FP32, 1, &k) == 0 && k.math == VC_TUNE_TF32);
    CHECK(vc_tune_key_of(&m, 16, 16, VC_DTYPE_BF16, 1, &k) == 0 && k.math == VC_TUNE_BF16);
    CHECK(vc_tune_key_of(&m, 16, 48, VC_DTYPE_FP16, 1, &k) == 0 && k.math == VC_TUNE_FP16);
    CHECK(k.c_in == 16 && k.c_out == 48 && k.volume == 27 && k.map_type == VC_MAP_SUBM);
    CHECK(vc_tune_key_of(&m, (int64_t)1 << 32, 16, VC_DTYPE_FP16, 0, &k) == -1);

    /* lookup: exact on every field; put replaces its bucket */
    vc_tune_table t = {NULL, 0, 0};
    CHECK(vc_tune_find(&t, &k) == NULL && vc_tune_find(NULL, &k) == NULL);
    for (int i = 0; i < 40; i++) {
        vc_tune_entry e = entry(VC_TUNE_FP16, VC_MAP_SUBM, 27, 16 + i, 16, 10, 4, i % 3, 1);
        CHECK(vc_tune_put(&t, &e) == 0);
    }
    CHECK(t.n == 40);
    vc_tune_entry e = entry(VC_TUNE_FP16, VC_MAP_SUBM, 27, 20, 16, 10, 4, 2, 8);
    CHECK(vc_tune_put(&t, &e) == 0 && t.n == 40);
    const vc_tune_entry *f = vc_tune_find(&t, &e.key);
    CHECK(f && f->config == 2 && f->split == 8);
    for (int field = 0; field < 7; field++) {
        vc_tune_key q = e.key;
        int32_t *p = &q.math;
        p[field] += 1; /* each field alone */
        CHECK_MSG(!vc_tune_key_equal(&q, &e.key) && (field == 3 ? vc_tune_find(&t, &q) != NULL
                                                                : vc_tune_find(&t, &q) == NULL),
                  "field %d", field);
    }
    vc_tune_table_clear(&t);
    CHECK(t.n == 0 && t.e == NULL);
}

/* vc_conv_bucket names a real layer's bucket on any backend: two neighbouring voxels under a
 * subm k3 have 2 outputs and 4 pairs (2 taps each); no pairs, no bucket. */
static void test_bucket_api(void)
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    CHECK(vc_context_create(&cd, &ctx) == VC_OK);
    const int32_t rows[8] = {0, 1, 1, 1, 0, 1, 1, 2};
    const int32_t shape[3] = {4, 4, 4};
    vc_coords *c = NULL;
    vc_kmap *m = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, rows, 2, VC_MEMORY_HOST, shape, 1, &c));
    vc_map_desc md = VC_MAP_DESC_INIT;
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &md, &m));
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.in_channels = 16;
    d.out_channels = 32;
    char b[96];
    CHECK_OK(ctx, vc_conv_bucket(ctx, &d, m, VC_DTYPE_FP16, b, sizeof b));
    CHECK_MSG(!strcmp(b, "fp16 subm K27 16->32 out 2^1 taps 2^1"), "bucket '%s'", b);
    d.allow_tf32 = 1;
    CHECK_OK(ctx, vc_conv_bucket(ctx, &d, m, VC_DTYPE_FP32, b, sizeof b));
    CHECK_MSG(!strcmp(b, "tf32 subm K27 16->32 out 2^1 taps 2^1"), "bucket '%s'", b);
    CHECK_STATUS(ctx, vc_conv_bucket(ctx, &d, m, VC_DTYPE_FP32, NULL, 0),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_conv_bucket(ctx, &d, NULL, VC_DTYPE_FP32, b, sizeof b),
                 VC_ERR_INVALID_ARGUMENT);
    vc_kmap_destroy(m);
    vc_coords_destroy(c);
    vc_context_destroy(ctx);
}

/* A CPU context given a cache: created, one warning, the layer's result unchanged. */
static void test_context(void)
{
    const char *garbage = vc_test_tmp_path("tune_", "garbage.json");
    CHECK(vc_test_write_file(garbage, "{\"format\": \"voxconv-tune", 24) == 0);
    const char *valid = vc_test_tmp_path("tune_", "valid.json");
    char *text = sample_text();
    CHECK(vc_test_write_file(valid, text, strlen(text)) == 0);
    free(text);
    struct {
        const char *path, *says;
    } cases[] = {{NULL, NULL},
                 {garbage, "is corrupt"},
                 {valid, "is foreign"},
                 {vc_test_tmp_path("tune_", "missing.json"), "unreadable"}};
    for (int i = 0; i < 4; i++) {
        vc_context_desc d = VC_CONTEXT_DESC_INIT;
        d.backend = VC_BACKEND_CPU;
        d.tune_cache = cases[i].path;
        vc_context *ctx = NULL;
        CHECK_OK(NULL, vc_context_create(&d, &ctx));
        if (!ctx) continue;
        const char *w = vc_context_warning(ctx);
        if (cases[i].says)
            CHECK_MSG(strstr(w, cases[i].says) && strstr(w, "planner") && !strchr(w, '\n'),
                      "%s", w);
        else
            CHECK(w[0] == 0);
        int32_t n = -1;
        CHECK(vc_tune_cache_count(ctx, &n) == VC_OK && n == 0);
        CHECK(strcmp(vc_context_last_error(ctx), "") == 0);
        CHECK_STATUS(ctx, vc_tune_cache_save(ctx, vc_test_tmp_path("tune_", "out.json")),
                     VC_ERR_UNSUPPORTED);
        CHECK_STATUS(ctx, vc_conv_tune(ctx, NULL, NULL, NULL, NULL), VC_ERR_UNSUPPORTED);
        CHECK_STATUS(ctx, vc_conv_tune_layers(ctx, 1, NULL, NULL, NULL, NULL),
                     VC_ERR_UNSUPPORTED);
        CHECK_STATUS(ctx, vc_conv_tune_layers(ctx, 0, NULL, NULL, NULL, NULL),
                     VC_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(ctx, vc_conv_tune_layers(ctx, VC_TUNE_MAX_MEMBERS + 1, NULL, NULL, NULL,
                                              NULL),
                     VC_ERR_INVALID_ARGUMENT);
        /* the warning outlives other calls' messages */
        if (cases[i].says) CHECK(strstr(vc_context_warning(ctx), cases[i].says) != NULL);
        vc_context_destroy(ctx);
    }
    /* an earlier, shorter descriptor: the later field is not read */
    struct {
        vc_context_desc d;
        const char *poison;
    } old;
    vc_context_desc init = VC_CONTEXT_DESC_INIT;
    old.d = init;
    old.d.backend = VC_BACKEND_CPU;
    old.d.struct_size = (uint32_t)offsetof(vc_context_desc, tune_cache);
    old.d.tune_cache = garbage; /* beyond the struct_size: must be ignored */
    vc_context *ctx = NULL;
    CHECK_OK(NULL, vc_context_create(&old.d, &ctx));
    CHECK(ctx && vc_context_warning(ctx)[0] == 0);
    vc_context_destroy(ctx);
    CHECK(vc_context_warning(NULL)[0] == 0);
}

int main(void)
{
    test_round_trip();
    test_truncated();
    test_malformed();
    test_other_corrupt();
    test_buckets();
    test_bucket_api();
    test_context();
    TEST_END();
}
