/* src/tune_cache.h - the tune cache file (docs/formats.md "Tune cache"): its identity block, its
 * parser and its writer (src/io/tune_cache.c, through cJSON), and the context's use of it
 * (src/tune_op.c). The parser is pure (text in, table and verdict out) so that the unit tests
 * and the fuzz target reach every case without a GPU. */
#ifndef VC_SRC_TUNE_CACHE_H
#define VC_SRC_TUNE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "conv/tune.h"

/* Current format version of the file ("version"). */
#define VC_TUNE_CACHE_VERSION 1
/* Largest cache file read, and most entries it may hold. */
#define VC_TUNE_CACHE_MAX_BYTES ((size_t)16 << 20)
#define VC_TUNE_CACHE_MAX_ENTRIES 65536

/* What a cache is valid for: a cache made with another identity is foreign (device fields) or
 * stale (library); each field must match exactly. */
typedef struct vc_tune_ident {
    char device[128];          /* the GPU's name; "" for the CPU backend                       */
    int32_t sm_count;          /* multiprocessors                                               */
    int32_t cc_major, cc_minor;/* compute capability                                            */
    int32_t cuda_runtime;      /* cudaRuntimeGetVersion (12080 = 12.8)                          */
    int32_t cuda_driver;       /* cudaDriverGetVersion: the CUDA version the driver supports    */
    char driver[64];           /* the kernel driver's version ("580.159.04"), "" where unknown  */
    char library[32];          /* vc_version()                                                  */
} vc_tune_ident;

typedef enum vc_tune_verdict {
    VC_TUNE_LOADED = 0,  /* valid, for this identity: *out holds its entries                   */
    VC_TUNE_CORRUPT = 1, /* not a well-formed cache (syntax, a field, a range, the checksum)  */
    VC_TUNE_STALE = 2,   /* another format version or library version, or a configuration this
                            build lacks                                                      */
    VC_TUNE_FOREIGN = 3  /* made for another device, SM count, CUDA runtime or driver         */
} vc_tune_verdict;

/* "corrupt", "stale", "foreign" (or "loaded"). */
const char *vc_tune_verdict_name(vc_tune_verdict v);

/* Parses a cache of `len` bytes (no NUL needed) for identity `here`, resolving configuration
 * names against names[0 .. n_names - 1] (the index is the configuration). On VC_TUNE_LOADED *out
 * (empty on entry) holds the entries; otherwise *out is left empty and `why` (why_len bytes)
 * says what was wrong, in one line. Never reads outside text[0 .. len). */
vc_tune_verdict vc_tune_cache_parse(const char *text, size_t len, const vc_tune_ident *here,
                                    const char *const *names, int32_t n_names,
                                    vc_tune_table *out, char *why, size_t why_len);

/* The cache text of table t for identity id (malloc'ed, NUL-terminated; free with free), or
 * NULL when out of memory or when an entry names a configuration outside names. */
char *vc_tune_cache_format(const vc_tune_ident *id, const vc_tune_table *t,
                           const char *const *names, int32_t n_names);

#endif
