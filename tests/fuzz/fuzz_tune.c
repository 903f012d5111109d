/* tests/fuzz/fuzz_tune.c - fuzz target: the tune cache parser (src/io/tune_cache.c) on each
 * input, for a fixed identity and configuration names (those of the seeds in corpus/tune), so
 * that mutations of a valid cache get past the identity checks to the entries and the
 * checksum. A parse that loads must give entries that write back and parse again to the same
 * table. JSON trees cost cJSON up to about a hundred bytes a node, hence the larger memory
 * factor. Built with libFuzzer (clang) or with the replay-and-mutate driver tests/fuzz/driver.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_mem.h"
#include "src/tune_cache.h"
#include "voxconv.h"

static const char *const NAMES[] = {"f16_64x64x32_s4", "f16_64x32x32_s3", "bf16_64x64x32_s4"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vc_tune_ident id;
    memset(&id, 0, sizeof id);
    strcpy(id.device, "NVIDIA H100 80GB HBM3");
    id.sm_count = 132;
    id.cc_major = 9;
    id.cuda_runtime = 13000;
    id.cuda_driver = 13000;
    strcpy(id.driver, "580.159.04");
    strcpy(id.library, "0.1.0");
    fuzz_mem_begin();
    vc_tune_table t = {NULL, 0, 0}, back = {NULL, 0, 0};
    char why[400];
    if (vc_tune_cache_parse((const char *)data, size, &id, NAMES, 3, &t, why, sizeof why) ==
        VC_TUNE_LOADED) {
        char *text = vc_tune_cache_format(&id, &t, NAMES, 3);
        if (!text ||
            vc_tune_cache_parse(text, strlen(text), &id, NAMES, 3, &back, why, sizeof why) !=
                VC_TUNE_LOADED ||
            back.n != t.n)
            abort(); /* a cache that loads must write back as one */
        for (int32_t i = 0; i < t.n; i++)
            if (!vc_tune_key_equal(&t.e[i].key, &back.e[i].key) ||
                t.e[i].config != back.e[i].config || t.e[i].split != back.e[i].split ||
                t.e[i].no_order != back.e[i].no_order || t.e[i].two_pass != back.e[i].two_pass)
                abort();
        free(text);
    }
    vc_tune_table_clear(&t);
    vc_tune_table_clear(&back);
    fuzz_mem_end_x(size, 160);
    return 0;
}
