/* tests/fuzz/fuzz_mem.h - a per-input memory bound for the libFuzzer targets: the bytes a
 * reader allocates while it handles one input (the sum of every malloc, an upper bound of its
 * peak) must stay within FUZZ_MEM_FACTOR times the input size plus FUZZ_MEM_SLACK, or the
 * run aborts with the figures. A target whose format may legitimately expand more (PCD
 * binary_compressed: LZF up to 89 times, then 4-byte floats from 1-byte fields) passes its
 * own factor to fuzz_mem_end_x. A header that claims a huge size and makes the reader allocate
 * for it fails the fuzz run long before -malloc_limit_mb would. Counted through the
 * sanitizer's malloc hooks (VC_FUZZ_MEM_HOOKS, set by tests/fuzz/CMakeLists.txt where
 * libFuzzer is used); elsewhere the macros do nothing. */
#ifndef VC_FUZZ_MEM_H
#define VC_FUZZ_MEM_H

#include <stddef.h>

#define FUZZ_MEM_FACTOR 64
#define FUZZ_MEM_SLACK ((size_t)1 << 20)

#ifdef VC_FUZZ_MEM_HOOKS
#include <sanitizer/allocator_interface.h>
#include <stdio.h>
#include <stdlib.h>

static size_t fuzz_mem_total; /* bytes allocated since fuzz_mem_begin */

static void fuzz_mem_malloc_hook(const volatile void *p, size_t n)
{
    (void)p;
    __atomic_fetch_add(&fuzz_mem_total, n, __ATOMIC_RELAXED);
}
static void fuzz_mem_free_hook(const volatile void *p) { (void)p; }

static void fuzz_mem_begin(void)
{
    static int installed;
    if (!installed) {
        __sanitizer_install_malloc_and_free_hooks(fuzz_mem_malloc_hook, fuzz_mem_free_hook);
        installed = 1;
    }
    __atomic_store_n(&fuzz_mem_total, 0, __ATOMIC_RELAXED);
}

static void fuzz_mem_end_x(size_t input_size, size_t factor)
{
    size_t got = __atomic_load_n(&fuzz_mem_total, __ATOMIC_RELAXED);
    size_t bound = factor * input_size + FUZZ_MEM_SLACK;
    if (got > bound) {
        fprintf(stderr, "fuzz_mem: an input of %zu bytes allocated %zu bytes (bound %zu = "
                "%zu x size + %zu)\n", input_size, got, bound, factor, FUZZ_MEM_SLACK);
        abort();
    }
}
#else
static inline void fuzz_mem_begin(void) {}
static inline void fuzz_mem_end_x(size_t input_size, size_t factor)
{
    (void)input_size;
    (void)factor;
}
#endif

static inline void fuzz_mem_end(size_t input_size) { fuzz_mem_end_x(input_size, FUZZ_MEM_FACTOR); }

#endif
