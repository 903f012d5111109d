/* core/status.h - error reporting shared by the internal modules (conv/, src/).
 * Internal modules return vc_status and write a one-line message into a vc_err that the API
 * layer copies to the context; nothing here prints, aborts or exits. */
#ifndef VC_CONV_COMMON_H
#define VC_CONV_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "voxconv.h"

typedef struct vc_err {
    char msg[512];
} vc_err;

/* Formats a message into err (if not NULL) and returns status. */
static inline vc_status vc_fail(vc_err *err, vc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline vc_status vc_fail(vc_err *err, vc_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* Overflow-checked size arithmetic: returns 0 and sets *out, or returns 1 on overflow. */
static inline int vc_mul_overflow_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return 1;
    if (a != 0 && b > INT64_MAX / a) return 1;
    *out = a * b;
    return 0;
}

/* Largest row count any coordinate set may have: row indices are int32 in maps. */
#define VC_MAX_ROWS ((int64_t)INT32_MAX - 1)
/* Largest channel count accepted. */
#define VC_MAX_CHANNELS ((int64_t)1 << 20)

#endif
