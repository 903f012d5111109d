/* tests/fuzz/driver.c - a stand-in for libFuzzer where the compiler has none (gcc): replays
 * every seed file of a corpus directory through LLVMFuzzerTestOneInput, then runs a fixed,
 * deterministic sequence of mutations of the seeds (bit flips, interesting bytes and integers,
 * truncations, insertions, duplicated chunks) until a count or a time budget is reached.
 * Usage: fuzz_x CORPUS_DIR [SECONDS [ITERATIONS]]. Each input lives in a buffer of exactly its
 * size so that AddressSanitizer catches any overread. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *p;
    size_t n;
} seed;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void run(const uint8_t *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return;
    if (n) memcpy(b, p, n);
    LLVMFuzzerTestOneInput(b, n);
    free(b);
}

static size_t mutate(uint8_t *b, size_t n, size_t cap)
{
    static const uint32_t interesting[] = {0u, 1u, 0x7fu, 0x80u, 0xffu, 0x7fffu, 0x8000u,
                                           0xffffu, 0x7fffffffu, 0x80000000u, 0xffffffffu,
                                           16u, 64u, 4096u, 65536u};
    int steps = 1 + (int)(rnd() % 4);
    for (int s = 0; s < steps; s++) {
        switch (rnd() % 7) {
        case 0: /* bit flip */
            if (n) b[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8));
            break;
        case 1: /* interesting byte */
            if (n) b[rnd() % n] = (uint8_t)interesting[rnd() % 15];
            break;
        case 2: /* interesting 32-bit integer, little-endian */
            if (n >= 4) {
                size_t at = rnd() % (n - 3);
                uint32_t v = interesting[rnd() % 15];
                for (int k = 0; k < 4; k++) b[at + (size_t)k] = (uint8_t)(v >> (8 * k));
            }
            break;
        case 3: /* truncation */
            if (n) n = rnd() % n;
            break;
        case 4: /* insert a byte (a digit now and then: text headers) */
            if (n < cap) {
                size_t at = rnd() % (n + 1);
                memmove(b + at + 1, b + at, n - at);
                b[at] = (rnd() & 1) ? (uint8_t)('0' + rnd() % 10) : (uint8_t)rnd();
                n++;
            }
            break;
        case 5: /* duplicate a chunk */
            if (n) {
                size_t from = rnd() % n, len = 1 + rnd() % 16;
                if (len > n - from) len = n - from;
                if (n + len <= cap) {
                    size_t at = rnd() % (n + 1);
                    uint8_t tmp[16];
                    memcpy(tmp, b + from, len);
                    memmove(b + at + len, b + at, n - at);
                    memcpy(b + at, tmp, len);
                    n += len;
                }
            }
            break;
        default: /* random byte */
            if (n) b[rnd() % n] = (uint8_t)rnd();
            break;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR [SECONDS [ITERATIONS]]\n", argv[0]);
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    long iters = argc > 3 ? atol(argv[3]) : 200000;
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    seed *seeds = NULL;
    size_t nseeds = 0;
    struct dirent *e;
    char path[4096];
    /* readdir order varies: sort the names so the run is deterministic */
    char **names = NULL;
    size_t nn = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, (nn + 1) * sizeof *names);
        names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < nn; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < nn; i++) {
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        FILE *f = fopen(path, "rb");
        free(names[i]);
        if (!f) continue;
        uint8_t *buf = malloc(1 << 16);
        size_t n = fread(buf, 1, 1 << 16, f);
        fclose(f);
        seeds = realloc(seeds, (nseeds + 1) * sizeof *seeds);
        seeds[nseeds].p = buf;
        seeds[nseeds].n = n;
        nseeds++;
        run(buf, n);
    }
    free(names);
    printf("replayed %zu seeds\n", nseeds);
    if (nseeds == 0) return 0;
    clock_t start = clock();
    long i;
    uint8_t *work = malloc(1 << 17);
    for (i = 0; i < iters; i++) {
        if ((i & 255) == 0 && (double)(clock() - start) / CLOCKS_PER_SEC > seconds) break;
        const seed *s = &seeds[rnd() % nseeds];
        memcpy(work, s->p, s->n);
        size_t n = mutate(work, s->n, (size_t)1 << 17);
        run(work, n);
    }
    free(work);
    printf("ran %ld mutations\n", i);
    for (size_t k = 0; k < nseeds; k++) free(seeds[k].p);
    free(seeds);
    return 0;
}
