/* src/io/tune_cache.c - the tune cache file (src/tune_cache.h; docs/formats.md "Tune cache"):
 * JSON through cJSON. The parser checks every field it reads - type, exact integer, range,
 * length - refuses duplicate names, duplicate buckets and trailing bytes, and compares a CRC-32
 * of the fields' canonical text with the file's "checksum", so that an edited or damaged value
 * that still parses is refused rather than misread. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "src/io/io.h"
#include "src/tune_cache.h"

static const char kFormat[] = "voxconv-tune-cache";
static const char *const kMath[] = {"fp32", "fp16", "bf16", "tf32"};
static const char *const kMaps[] = {"subm", "strided", "downsample", "inverse", "transposed"};
#define N_MATH 4
#define N_MAPS 5
/* Largest taps_x2: 2 * log2(343) < 17. */
#define MAX_TAPS_X2 17

const char *vc_tune_verdict_name(vc_tune_verdict v)
{
    switch (v) {
    case VC_TUNE_LOADED: return "loaded";
    case VC_TUNE_CORRUPT: return "corrupt";
    case VC_TUNE_STALE: return "stale";
    case VC_TUNE_FOREIGN: return "foreign";
    }
    return "?";
}

/* ---- parsing ---------------------------------------------------------------------------- */

typedef struct parse_state {
    char *why;
    size_t why_len;
} parse_state;

static vc_tune_verdict bad(parse_state *ps, vc_tune_verdict v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static vc_tune_verdict bad(parse_state *ps, vc_tune_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ps->why && ps->why_len) vsnprintf(ps->why, ps->why_len, fmt, ap);
    va_end(ap);
    return v;
}

/* The one member `name` of object o, or NULL when absent; *dup set when it appears twice. */
static const cJSON *member(const cJSON *o, const char *name, int *dup)
{
    const cJSON *found = NULL;
    for (const cJSON *c = o->child; c; c = c->next)
        if (c->string && strcmp(c->string, name) == 0) {
            if (found) *dup = 1;
            found = c;
        }
    return found;
}

/* Reads member `name` of o as an integer in [lo, hi] (a JSON number with no fraction). */
static int get_int(parse_state *ps, const cJSON *o, const char *where, const char *name,
                   int64_t lo, int64_t hi, int32_t *out)
{
    int dup = 0;
    const cJSON *v = member(o, name, &dup);
    if (!v || dup || !cJSON_IsNumber(v)) {
        bad(ps, VC_TUNE_CORRUPT, "%s: \"%s\" is %s", where, name,
            !v ? "missing" : dup ? "given twice" : "not a number");
        return -1;
    }
    const double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        bad(ps, VC_TUNE_CORRUPT, "%s: \"%s\" is %.17g, not an integer in [%lld, %lld]", where,
            name, d, (long long)lo, (long long)hi);
        return -1;
    }
    *out = (int32_t)d;
    return 0;
}

/* Reads member `name` of o as a finite number in [0, 1e9]. */
static int get_ms(parse_state *ps, const cJSON *o, const char *where, const char *name,
                  double *out)
{
    int dup = 0;
    const cJSON *v = member(o, name, &dup);
    if (!v || dup || !cJSON_IsNumber(v) || !(v->valuedouble >= 0.0 && v->valuedouble <= 1e9)) {
        bad(ps, VC_TUNE_CORRUPT, "%s: \"%s\" is missing, given twice or not a time in [0, 1e9] "
            "ms", where, name);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

/* Reads member `name` of o as a string of fewer than `cap` bytes into out. */
static int get_str(parse_state *ps, const cJSON *o, const char *where, const char *name,
                   char *out, size_t cap)
{
    int dup = 0;
    const cJSON *v = member(o, name, &dup);
    if (!v || dup || !cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= cap) {
        bad(ps, VC_TUNE_CORRUPT, "%s: \"%s\" is %s", where, name,
            !v ? "missing" : dup ? "given twice" : "not a string of fewer than the bytes allowed");
        return -1;
    }
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* Reads member `name` of o as one of names[0 .. n - 1]; *out = its index. */
static int get_choice(parse_state *ps, const cJSON *o, const char *where, const char *name,
                      const char *const *names, int n, int32_t *out)
{
    char s[64];
    if (get_str(ps, o, where, name, s, sizeof s)) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    bad(ps, VC_TUNE_CORRUPT, "%s: \"%s\" is \"%s\", not a known value", where, name, s);
    return -1;
}

/* The canonical text of the identity, then of each entry, that the checksum covers. */
static uint32_t ident_crc(uint32_t crc, const vc_tune_ident *id)
{
    char line[512];
    const int n = snprintf(line, sizeof line, "%s|%d|%d.%d|%d|%d|%s|%s\n", id->device,
                           (int)id->sm_count, (int)id->cc_major, (int)id->cc_minor,
                           (int)id->cuda_runtime, (int)id->cuda_driver, id->driver, id->library);
    return vc_crc32(crc, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : 0);
}

static uint32_t entry_crc(uint32_t crc, const vc_tune_entry *e, const char *config)
{
    char line[256];
    const vc_tune_key *k = &e->key;
    const int n = snprintf(line, sizeof line, "%d %d %d %d %d %d %d %s %d %d %d\n",
                           (int)k->math, (int)k->map_type, (int)k->volume, (int)k->c_in,
                           (int)k->c_out, (int)k->out_log2, (int)k->taps_x2, config,
                           (int)e->split, (int)e->no_order, (int)e->two_pass);
    return vc_crc32(crc, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : 0);
}

/* The identity block ("device", with "library" beside it) into *id. */
static int parse_ident(parse_state *ps, const cJSON *root, vc_tune_ident *id)
{
    int dup = 0;
    memset(id, 0, sizeof *id);
    if (get_str(ps, root, "cache", "library", id->library, sizeof id->library)) return -1;
    const cJSON *d = member(root, "device", &dup);
    if (!d || dup || !cJSON_IsObject(d)) {
        bad(ps, VC_TUNE_CORRUPT, "cache: \"device\" is missing, given twice or not an object");
        return -1;
    }
    if (get_str(ps, d, "device", "name", id->device, sizeof id->device) ||
        get_int(ps, d, "device", "sm_count", 0, 1 << 20, &id->sm_count) ||
        get_int(ps, d, "device", "cc_major", 0, 1000, &id->cc_major) ||
        get_int(ps, d, "device", "cc_minor", 0, 1000, &id->cc_minor) ||
        get_int(ps, d, "device", "cuda_runtime", 0, INT32_MAX, &id->cuda_runtime) ||
        get_int(ps, d, "device", "cuda_driver", 0, INT32_MAX, &id->cuda_driver) ||
        get_str(ps, d, "device", "driver", id->driver, sizeof id->driver))
        return -1;
    return 0;
}

/* VC_TUNE_FOREIGN (with why) when the cache's identity is not `here`'s device; else LOADED. */
static vc_tune_verdict compare_ident(parse_state *ps, const vc_tune_ident *f,
                                     const vc_tune_ident *here)
{
    if (!here->device[0])
        return bad(ps, VC_TUNE_FOREIGN, "made for %s (%d SMs), but this context runs on the "
                   "CPU backend", f->device, (int)f->sm_count);
    if (strcmp(f->device, here->device) || f->sm_count != here->sm_count ||
        f->cc_major != here->cc_major || f->cc_minor != here->cc_minor)
        return bad(ps, VC_TUNE_FOREIGN, "made for %s (%d SMs, compute capability %d.%d), this "
                   "device is %s (%d SMs, %d.%d)", f->device, (int)f->sm_count,
                   (int)f->cc_major, (int)f->cc_minor, here->device, (int)here->sm_count,
                   (int)here->cc_major, (int)here->cc_minor);
    if (f->cuda_runtime != here->cuda_runtime || f->cuda_driver != here->cuda_driver ||
        strcmp(f->driver, here->driver))
        return bad(ps, VC_TUNE_FOREIGN, "made with CUDA runtime %d, driver %d (%s); this is "
                   "runtime %d, driver %d (%s)", (int)f->cuda_runtime, (int)f->cuda_driver,
                   f->driver[0] ? f->driver : "?", (int)here->cuda_runtime,
                   (int)here->cuda_driver, here->driver[0] ? here->driver : "?");
    return VC_TUNE_LOADED;
}

/* Entry i of the "entries" array into *e; its configuration name into config (64 bytes). */
static vc_tune_verdict parse_entry(parse_state *ps, const cJSON *o, int i,
                                   const char *const *names, int32_t n_names, vc_tune_entry *e,
                                   char *config)
{
    char where[48];
    snprintf(where, sizeof where, "entries[%d]", i);
    if (!cJSON_IsObject(o)) return bad(ps, VC_TUNE_CORRUPT, "%s is not an object", where);
    memset(e, 0, sizeof *e);
    vc_tune_key *k = &e->key;
    if (get_choice(ps, o, where, "math", kMath, N_MATH, &k->math) ||
        get_choice(ps, o, where, "map", kMaps, N_MAPS, &k->map_type) ||
        get_int(ps, o, where, "volume", 1, VC_KMAP_MAX_VOLUME, &k->volume) ||
        get_int(ps, o, where, "c_in", 1, VC_MAX_CHANNELS, &k->c_in) ||
        get_int(ps, o, where, "c_out", 1, VC_MAX_CHANNELS, &k->c_out) ||
        get_int(ps, o, where, "out_log2", 0, 31, &k->out_log2) ||
        get_int(ps, o, where, "taps_x2", 0, MAX_TAPS_X2, &k->taps_x2) ||
        get_str(ps, o, where, "config", config, 64) ||
        get_int(ps, o, where, "split", 0, VC_TUNE_MAX_SPLIT, &e->split) ||
        get_int(ps, o, where, "no_order", 0, 1, &e->no_order) ||
        get_int(ps, o, where, "two_pass", 0, 1, &e->two_pass) ||
        get_ms(ps, o, where, "ms_planner", &e->ms_planner) ||
        get_ms(ps, o, where, "ms_tuned", &e->ms_tuned))
        return VC_TUNE_CORRUPT;
    if (strcmp(config, "auto") == 0) {
        if (e->split != 0 || e->no_order || e->two_pass)
            return bad(ps, VC_TUNE_CORRUPT, "%s: config \"auto\" needs split, no_order and "
                       "two_pass 0", where);
        e->config = -1;
        return VC_TUNE_LOADED;
    }
    if (e->split < 1)
        return bad(ps, VC_TUNE_CORRUPT, "%s: config \"%s\" needs a split in [1, %d]", where,
                   config, VC_TUNE_MAX_SPLIT);
    e->config = -1;
    for (int32_t c = 0; c < n_names && e->config < 0; c++)
        if (names[c] && strcmp(names[c], config) == 0) e->config = c;
    if (e->config < 0)
        return bad(ps, VC_TUNE_STALE, "%s: configuration \"%s\" is not compiled into this "
                   "library", where, config);
    return VC_TUNE_LOADED;
}

/* The entries (every one checked, no bucket twice) into out, and the CRC of their text. */
static vc_tune_verdict parse_entries(parse_state *ps, const cJSON *root, const char *const *names,
                                     int32_t n_names, vc_tune_table *out, uint32_t *crc)
{
    int dup = 0;
    const cJSON *arr = member(root, "entries", &dup);
    if (!arr || dup || !cJSON_IsArray(arr))
        return bad(ps, VC_TUNE_CORRUPT, "cache: \"entries\" is missing, given twice or not an "
                   "array");
    int i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++) {
        if (i >= VC_TUNE_CACHE_MAX_ENTRIES)
            return bad(ps, VC_TUNE_CORRUPT, "cache: more than %d entries",
                       VC_TUNE_CACHE_MAX_ENTRIES);
        vc_tune_entry e;
        char config[64];
        const vc_tune_verdict v = parse_entry(ps, o, i, names, n_names, &e, config);
        if (v != VC_TUNE_LOADED) return v;
        if (vc_tune_find(out, &e.key))
            return bad(ps, VC_TUNE_CORRUPT, "entries[%d]: its bucket is given twice", i);
        if (vc_tune_put(out, &e) != 0)
            return bad(ps, VC_TUNE_CORRUPT, "out of memory reading %d entries", i + 1);
        *crc = entry_crc(*crc, &e, config);
    }
    return VC_TUNE_LOADED;
}

/* The checks in order: syntax and format name (corrupt), versions (stale), identity fields
 * (corrupt) and their values (foreign), entries (corrupt; stale for a configuration this build
 * lacks), checksum (corrupt). */
static vc_tune_verdict parse_root(parse_state *ps, const cJSON *root, const vc_tune_ident *here,
                                  const char *const *names, int32_t n_names, vc_tune_table *out)
{
    char format[32];
    int32_t version = 0;
    if (!cJSON_IsObject(root)) return bad(ps, VC_TUNE_CORRUPT, "not a JSON object");
    if (get_str(ps, root, "cache", "format", format, sizeof format)) return VC_TUNE_CORRUPT;
    if (strcmp(format, kFormat))
        return bad(ps, VC_TUNE_CORRUPT, "\"format\" is \"%s\", not \"%s\"", format, kFormat);
    if (get_int(ps, root, "cache", "version", 0, INT32_MAX, &version)) return VC_TUNE_CORRUPT;
    if (version != VC_TUNE_CACHE_VERSION)
        return bad(ps, VC_TUNE_STALE, "format version %d; this library reads version %d",
                   (int)version, VC_TUNE_CACHE_VERSION);
    vc_tune_ident f;
    if (parse_ident(ps, root, &f)) return VC_TUNE_CORRUPT;
    if (strcmp(f.library, here->library))
        return bad(ps, VC_TUNE_STALE, "made by voxconv %s; this is voxconv %s", f.library,
                   here->library);
    vc_tune_verdict v = compare_ident(ps, &f, here);
    if (v != VC_TUNE_LOADED) return v;
    uint32_t crc = ident_crc(0, &f);
    if ((v = parse_entries(ps, root, names, n_names, out, &crc)) != VC_TUNE_LOADED) return v;
    char sum[16];
    if (get_str(ps, root, "cache", "checksum", sum, sizeof sum)) return VC_TUNE_CORRUPT;
    char want[16];
    snprintf(want, sizeof want, "%08x", (unsigned)crc);
    if (strcmp(sum, want))
        return bad(ps, VC_TUNE_CORRUPT, "checksum %s does not match its contents (%s): the file "
                   "was edited or damaged", sum, want);
    return VC_TUNE_LOADED;
}

vc_tune_verdict vc_tune_cache_parse(const char *text, size_t len, const vc_tune_ident *here,
                                    const char *const *names, int32_t n_names,
                                    vc_tune_table *out, char *why, size_t why_len)
{
    parse_state ps = {why, why_len};
    if (why && why_len) why[0] = 0;
    if (!text || !here || !out) return bad(&ps, VC_TUNE_CORRUPT, "no cache text");
    if (len > VC_TUNE_CACHE_MAX_BYTES)
        return bad(&ps, VC_TUNE_CORRUPT, "%zu bytes, more than a cache may have (%zu)", len,
                   VC_TUNE_CACHE_MAX_BYTES);
    /* cJSON takes the length and stops there; a NUL inside the text ends it early and is
     * refused as trailing bytes below. */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        const size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        return bad(&ps, VC_TUNE_CORRUPT, "not valid JSON (at byte %zu of %zu)", off, len);
    }
    vc_tune_verdict v = VC_TUNE_LOADED;
    for (const char *p = end; p && p < text + len && v == VC_TUNE_LOADED; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t')
            v = bad(&ps, VC_TUNE_CORRUPT, "bytes after the JSON value (at byte %zu)",
                    (size_t)(p - text));
    if (v == VC_TUNE_LOADED) v = parse_root(&ps, root, here, names, n_names, out);
    cJSON_Delete(root);
    if (v != VC_TUNE_LOADED) vc_tune_table_clear(out);
    return v;
}

/* ---- writing ---------------------------------------------------------------------------- */

static cJSON *device_json(const vc_tune_ident *id)
{
    cJSON *d = cJSON_CreateObject();
    if (!d) return NULL;
    if (!cJSON_AddStringToObject(d, "name", id->device) ||
        !cJSON_AddNumberToObject(d, "sm_count", id->sm_count) ||
        !cJSON_AddNumberToObject(d, "cc_major", id->cc_major) ||
        !cJSON_AddNumberToObject(d, "cc_minor", id->cc_minor) ||
        !cJSON_AddNumberToObject(d, "cuda_runtime", id->cuda_runtime) ||
        !cJSON_AddNumberToObject(d, "cuda_driver", id->cuda_driver) ||
        !cJSON_AddStringToObject(d, "driver", id->driver)) {
        cJSON_Delete(d);
        return NULL;
    }
    return d;
}

static cJSON *entry_json(const vc_tune_entry *e, const char *config)
{
    const vc_tune_key *k = &e->key;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (!cJSON_AddStringToObject(o, "math", kMath[k->math]) ||
        !cJSON_AddStringToObject(o, "map", kMaps[k->map_type]) ||
        !cJSON_AddNumberToObject(o, "volume", k->volume) ||
        !cJSON_AddNumberToObject(o, "c_in", k->c_in) ||
        !cJSON_AddNumberToObject(o, "c_out", k->c_out) ||
        !cJSON_AddNumberToObject(o, "out_log2", k->out_log2) ||
        !cJSON_AddNumberToObject(o, "taps_x2", k->taps_x2) ||
        !cJSON_AddStringToObject(o, "config", config) ||
        !cJSON_AddNumberToObject(o, "split", e->split) ||
        !cJSON_AddNumberToObject(o, "no_order", e->no_order) ||
        !cJSON_AddNumberToObject(o, "two_pass", e->two_pass) ||
        !cJSON_AddNumberToObject(o, "ms_planner", e->ms_planner) ||
        !cJSON_AddNumberToObject(o, "ms_tuned", e->ms_tuned)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The entries array of t (and their CRC), or NULL. */
static cJSON *entries_json(const vc_tune_table *t, const char *const *names, int32_t n_names,
                           uint32_t *crc)
{
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; arr && t && i < t->n; i++) {
        const vc_tune_entry *e = &t->e[i];
        const vc_tune_key *k = &e->key;
        const int ok_flags = (e->no_order == 0 || e->no_order == 1) &&
                             (e->two_pass == 0 || e->two_pass == 1);
        const int ok_cfg = e->config < 0 ? e->split == 0 && !e->no_order && !e->two_pass
                                         : e->config < n_names && names[e->config] &&
                                               e->split >= 1 && e->split <= VC_TUNE_MAX_SPLIT;
        if (!ok_cfg || !ok_flags || k->math < 0 || k->math >= N_MATH || k->map_type < 0 ||
            k->map_type >= N_MAPS) {
            cJSON_Delete(arr);
            return NULL;
        }
        const char *config = e->config < 0 ? "auto" : names[e->config];
        cJSON *o = entry_json(e, config);
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        *crc = entry_crc(*crc, e, config);
    }
    return arr;
}

char *vc_tune_cache_format(const vc_tune_ident *id, const vc_tune_table *t,
                           const char *const *names, int32_t n_names)
{
    uint32_t crc = ident_crc(0, id);
    cJSON *root = cJSON_CreateObject(), *dev = device_json(id);
    cJSON *arr = entries_json(t, names, n_names, &crc);
    char sum[16];
    snprintf(sum, sizeof sum, "%08x", (unsigned)crc);
    char *text = NULL;
    if (root && dev && arr && cJSON_AddStringToObject(root, "format", kFormat) &&
        cJSON_AddNumberToObject(root, "version", VC_TUNE_CACHE_VERSION) &&
        cJSON_AddStringToObject(root, "library", id->library) &&
        cJSON_AddItemToObject(root, "device", dev)) {
        dev = NULL; /* owned by root now */
        if (cJSON_AddItemToObject(root, "entries", arr)) {
            arr = NULL;
            if (cJSON_AddStringToObject(root, "checksum", sum)) text = cJSON_Print(root);
        }
    }
    cJSON_Delete(dev);
    cJSON_Delete(arr);
    cJSON_Delete(root);
    return text;
}
