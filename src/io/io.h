/* src/io/io.h - helpers shared by the file-format readers and writers of src/io/: whole-file
 * reads with a size cap, checked writes, failure messages that name the file and the place,
 * little-endian loads and stores, a text cursor for header lines and ascii bodies, number
 * parsing without overreads, CRC-32, and the point-cloud builder. Internal: only src/io/. */
#ifndef VC_SRC_IO_IO_H
#define VC_SRC_IO_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "src/internal.h"

/* Files larger than this are refused with VC_ERR_LIMIT before they are read (a regular file
 * by its size, before any byte is read). */
#define VC_IO_MAX_FILE ((int64_t)1 << 32)
/* Largest .npy dimension: a larger one fits VC_IO_MAX_ALLOC only in an empty array. */
#define VC_IO_MAX_DIM ((int64_t)1 << 32)
/* No single array a reader allocates may exceed this many bytes (VC_ERR_LIMIT). */
#define VC_IO_MAX_ALLOC ((int64_t)1 << 33)
/* Most columns a point cloud may have, and most fields/properties a header may declare. */
#define VC_IO_MAX_COLUMNS 4096
#define VC_IO_MAX_FIELDS 1024
/* Longest field or property name kept (longer is VC_ERR_LIMIT). */
#define VC_IO_MAX_NAME 64

/* Where a parser reads from: the context for messages and the name used in them. */
typedef struct vc_io_src {
    vc_context *ctx;
    const char *name; /* file path, or "<memory>" */
} vc_io_src;

/* Records "<name>: <message>" on the context (if any) and returns status. */
vc_status vc_io_fail(const vc_io_src *src, vc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears the context's last message at the start of an API call (ctx may be NULL). */
void vc_io_begin(vc_context *ctx);

/* Reads a whole file (at most VC_IO_MAX_FILE bytes) into a malloc'ed buffer (never NULL on
 * success, even for an empty file). */
vc_status vc_io_read_file(vc_context *ctx, const char *path, uint8_t **data, size_t *size);
/* The same with a smaller limit of `max` bytes (at most VC_IO_MAX_FILE). */
vc_status vc_io_read_file_max(vc_context *ctx, const char *path, int64_t max, uint8_t **data,
                              size_t *size);

/* Checked writing through an atomic output (vc_output, output.c): open makes a new output
 * for `path` and the close publishes it (renames the temporary over the target) or, after any
 * failure, removes the temporary; attach writes into a caller's output, which the close only
 * finishes (flush, sync, close), leaving its publication to the caller. The status is
 * VC_ERR_IO with the path in the message. */
typedef struct vc_io_writer {
    vc_context *ctx;
    vc_output *out;
    FILE *f;
    int own; /* opened here: published or discarded by the close */
    vc_status status;
    uint8_t stage[1 << 14]; /* little-endian elements of vc_io_writer_put_le, not yet written */
    size_t staged;
} vc_io_writer;

vc_status vc_io_writer_open(vc_io_writer *w, vc_context *ctx, const char *path);
vc_status vc_io_writer_attach(vc_io_writer *w, vc_context *ctx, vc_output *out);
/* Appends bytes; after a failure further writes do nothing. */
void vc_io_writer_put(vc_io_writer *w, const void *data, size_t n);
/* Appends n elements of esz bytes (2 or 4) stored in host order, as little-endian. */
void vc_io_writer_put_le(vc_io_writer *w, const void *data, size_t n, size_t esz);
/* Closes; returns the first failure of the whole sequence or VC_OK. */
vc_status vc_io_writer_close(vc_io_writer *w);

/* output.c, for the writer: the stream of an output not yet written (else NULL), the path its
 * caller gave, and the end of its writing (flush, sync and close, each checked; `st` is the
 * writing's status so far; the output is then written, or failed). */
FILE *vc_io_output_file(vc_output *out);
const char *vc_io_output_name(const vc_output *out);
vc_status vc_io_output_finish(vc_context *ctx, vc_output *out, vc_status st);

/* Little-endian loads and stores from unaligned bytes. */
static inline uint16_t vc_ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t vc_ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t vc_ld_u64(const uint8_t *p)
{
    return (uint64_t)vc_ld_u32(p) | ((uint64_t)vc_ld_u32(p + 4) << 32);
}
static inline void vc_st_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void vc_st_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void vc_st_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Scalar element kinds found in PCD, PLY and NPY files. */
typedef enum vc_io_kind {
    VC_IO_I8, VC_IO_U8, VC_IO_I16, VC_IO_U16, VC_IO_I32, VC_IO_U32, VC_IO_I64, VC_IO_U64,
    VC_IO_F32, VC_IO_F64
} vc_io_kind;

/* Bytes per element of a kind. */
int vc_io_kind_size(vc_io_kind k);
/* Loads one little-endian element of kind k from p as a double (exact for all but 64-bit
 * integers beyond 2^53). */
double vc_io_load(const uint8_t *p, vc_io_kind k);

/* A cursor over text: lines for headers, whitespace-separated tokens for ascii bodies. */
typedef struct vc_text {
    const uint8_t *p;
    size_t n, pos;
    int64_t line; /* 1-based line number of the byte at pos */
} vc_text;

/* Next line (without '\n' and a trailing '\r'); 0 at the end of the text. */
int vc_text_line(vc_text *t, const char **s, size_t *len);
/* Next whitespace-separated token; 0 at the end of the text. */
int vc_text_token(vc_text *t, const char **s, size_t *len);
/* Splits the next token off [*s, end) (whitespace separated); 0 when none is left. */
int vc_tok(const char **s, const char *end, const char **tok, size_t *len);
/* Token equality, exact or ignoring ASCII case. */
int vc_tok_eq(const char *tok, size_t len, const char *word);
int vc_tok_ieq(const char *tok, size_t len, const char *word);

/* Parses a whole token of any length as a number (decimal, C locale syntax, "nan"/"inf" for the
 * double). 0 on success, -1 if the token is not a number or does not fit. */
int vc_parse_double(const char *tok, size_t len, double *out);
int vc_parse_i64(const char *tok, size_t len, int64_t *out);

/* CRC-32 (ISO-HDLC, the zlib/PNG polynomial); start with crc = 0. */
uint32_t vc_crc32(uint32_t crc, const void *data, size_t n);

/* A point cloud being built: allocates data [count, dim] and copies names. On failure
 * nothing is left allocated. */
vc_status vc_io_cloud_alloc(const vc_io_src *src, vc_cloud *c, int64_t count, int32_t dim,
                            const char *const *names);
/* The same, with only the first `nnamed` columns named by `names`; column i >= nnamed is "ci". */
vc_status vc_io_cloud_alloc_named(const vc_io_src *src, vc_cloud *c, int64_t count,
                                  int32_t dim, const char *const *names, int32_t nnamed);
/* Frees what vc_io_cloud_alloc made (same as vc_cloud_free without the API prologue). */
void vc_io_cloud_release(vc_cloud *c);

/* The format parsers (memory in, cloud out); *out is written only on success. */
/* A raw .bin of `load_dim` float32 per record (0: the KITTI default, 4). */
vc_status vc_io_read_kitti(const vc_io_src *src, const uint8_t *p, size_t n, int32_t load_dim,
                           vc_cloud *out);
vc_status vc_io_read_pcd(const vc_io_src *src, const uint8_t *p, size_t n, vc_cloud *out);
vc_status vc_io_read_ply(const vc_io_src *src, const uint8_t *p, size_t n, vc_cloud *out);
vc_status vc_io_read_npy_cloud(const vc_io_src *src, const uint8_t *p, size_t n,
                               vc_cloud *out);
vc_status vc_io_read_npy(const vc_io_src *src, const uint8_t *p, size_t n, vc_array *out);
vc_status vc_io_read_vxt(const vc_io_src *src, const uint8_t *p, size_t n, vc_tensor **out);

/* LZF decompression (PCD binary_compressed): decodes exactly `in_n` bytes of `in` into
 * exactly `out_n` bytes of `out`. A fault is VC_ERR_FORMAT naming its file byte (`base` is the
 * file offset of in[0]) and what is wrong. */
vc_status vc_lzf_decode(const vc_io_src *src, size_t base, const uint8_t *in, size_t in_n,
                        uint8_t *out, size_t out_n);

#endif
