/* tests/fuzz/fuzz_lzf.c - fuzz target: the LZF decoder of PCD binary_compressed
 * (vc_lzf_decode) on its own. Input: a little-endian u32 declared uncompressed size, then the
 * compressed bytes. The declared size is taken modulo 100 x the input size + 1 (LZF expands
 * at most about 88 times), so the output buffer stays proportional to the input. The output
 * buffer is exactly the declared size: AddressSanitizer catches any write past it. Built with
 * libFuzzer (clang) or tests/fuzz/driver.c. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_mem.h"
#include "src/io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    fuzz_mem_begin();
    size_t out_n = (size_t)vc_ld_u32(data) % (100 * size + 1);
    uint8_t *out = malloc(out_n ? out_n : 1);
    if (out) {
        vc_io_src src = {NULL, "<fuzz>"};
        if (vc_lzf_decode(&src, 4, data + 4, size - 4, out, out_n) == VC_OK && out_n > 0) {
            volatile uint8_t sink = out[out_n - 1]; /* the whole output was written */
            (void)sink;
        }
        free(out);
    }
    fuzz_mem_end_x(size, 128); /* the output buffer is up to 100 x the input, by design */
    return 0;
}
