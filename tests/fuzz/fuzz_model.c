/* tests/fuzz/fuzz_model.c - fuzz target: the network description parser (src/net/model.c,
 * docs/networks.md), on any text; a description it accepts is freed again. Built with
 * libFuzzer (clang) or tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_mem.h"
#include "src/net/net_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_model m;
    vc_err err = {{0}};
    fuzz_mem_begin();
    if (vc_model_parse((const char *)data, size, "<fuzz>", &m, &err) == VC_OK) vc_model_free(&m);
    fuzz_mem_end(size);
    return 0;
}
