/* core/clock.h - the host's monotonic clock in milliseconds, for host-side timing (profiled
 * steps, the timer's CPU path, the tests' frame times). A file that includes it defines
 * _POSIX_C_SOURCE 200809L before its first system header (clock_gettime is POSIX, not C11). */
#ifndef VC_CORE_CLOCK_H
#define VC_CORE_CLOCK_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 199309L
#error "core/clock.h needs _POSIX_C_SOURCE 200809L defined before the first system header"
#endif

#include <time.h>

static inline double vc_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#endif
