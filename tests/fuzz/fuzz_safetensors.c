/* tests/fuzz/fuzz_safetensors.c - fuzz target: the safetensors reader (src/io/safetensors.c),
 * and every readable tensor of a file it accepts loaded element by element. Built with
 * libFuzzer (clang) or tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mem.h"
#include "src/io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_safetensors st;
    vc_io_src src = {NULL, "<fuzz>"};
    fuzz_mem_begin();
    if (vc_st_parse(&src, data, size, &st) == VC_OK) {
        volatile float sink = 0;
        for (int64_t i = 0; i < st.count; i++)
            if ((int)st.tensors[i].dtype >= 0)
                for (int64_t k = 0; k < st.tensors[i].count; k++) sink += vc_st_load(&st.tensors[i], k);
        (void)sink;
        vc_st_free(&st);
    }
    fuzz_mem_end(size);
    return 0;
}
