/* tests/gpu/kmap_compare.h - comparison of a GPU kernel map (device arrays) with its CPU twin's
 * (host arrays), bit for bit, for test_gpu_kmap and test_gpu_graph. Each check counts through
 * testutil.h (CHECK_MSG, vc_t_pass). */
#ifndef VC_TESTS_GPU_KMAP_COMPARE_H
#define VC_TESTS_GPU_KMAP_COMPARE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "testutil.h"

/* Compares a host array with a device array of `bytes`; prints the first differing word. */
static void cmp_array(const char *label, const char *name, const void *host, const void *dev,
                      int64_t bytes)
{
    if (bytes <= 0) return;
    if (!dev || !host) {
        CHECK_MSG(0, "%s: %s is NULL (host %p, device %p)", label, name, host, dev);
        return;
    }
    unsigned char *g = malloc((size_t)bytes);
    cudaError_t e = cudaMemcpy(g, dev, (size_t)bytes, cudaMemcpyDeviceToHost);
    CHECK_MSG(e == cudaSuccess, "%s: copying %s: %s", label, name, cudaGetErrorString(e));
    if (e == cudaSuccess && memcmp(g, host, (size_t)bytes) != 0) {
        int64_t w = 0, nw = bytes / 4;
        const int32_t *a = host, *b = (const int32_t *)g;
        while (w < nw && a[w] == b[w]) w++;
        int64_t diffs = 0;
        for (int64_t i = w; i < nw; i++) diffs += a[i] != b[i];
        CHECK_MSG(0, "%s: %s differs in %lld of %lld words, first at word %lld (cpu %d, gpu %d)",
                  label, name, (long long)diffs, (long long)nw, (long long)w,
                  w < nw ? (int)a[w] : 0, w < nw ? (int)b[w] : 0);
    } else {
        vc_t_pass++;
    }
    free(g);
}

/* The GPU map g equals the CPU twin's c field by field. */
static void cmp_maps(const char *label, const vc_kmap_data *c, const vc_kmap_data *g)
{
    CHECK_MSG(c->type == g->type && c->volume == g->volume && c->n_in == g->n_in &&
                  c->n_out == g->n_out && c->n_pairs == g->n_pairs &&
                  c->mask_words == g->mask_words && c->out_batch_size == g->out_batch_size &&
                  memcmp(c->out_shape, g->out_shape, sizeof c->out_shape) == 0 &&
                  memcmp(c->kernel, g->kernel, sizeof c->kernel) == 0 &&
                  memcmp(c->stride, g->stride, sizeof c->stride) == 0 &&
                  memcmp(c->padding, g->padding, sizeof c->padding) == 0 &&
                  memcmp(c->dilation, g->dilation, sizeof c->dilation) == 0,
              "%s: header: n_out %lld/%lld n_pairs %lld/%lld words %d/%d out_shape %dx%dx%d/"
              "%dx%dx%d", label, (long long)c->n_out, (long long)g->n_out,
              (long long)c->n_pairs, (long long)g->n_pairs, (int)c->mask_words,
              (int)g->mask_words, (int)c->out_shape[0], (int)c->out_shape[1],
              (int)c->out_shape[2], (int)g->out_shape[0], (int)g->out_shape[1],
              (int)g->out_shape[2]);
    if (c->n_out != g->n_out || c->n_pairs != g->n_pairs || c->volume != g->volume ||
        c->mask_words != g->mask_words)
        return;
    int64_t n = c->n_out, K = c->volume;
    CHECK_MSG((c->out_coords == NULL) == (g->out_coords == NULL), "%s: out_coords presence",
              label);
    if (c->out_coords && g->out_coords)
        cmp_array(label, "out_coords", c->out_coords, g->out_coords, n * 16);
    cmp_array(label, "out_in", c->out_in, g->out_in, n * K * 4);
    cmp_array(label, "offsets", c->offsets, g->offsets, (K + 1) * 8);
    cmp_array(label, "in_rows", c->in_rows, g->in_rows, c->n_pairs * 4);
    cmp_array(label, "out_rows", c->out_rows, g->out_rows, c->n_pairs * 4);
    cmp_array(label, "masks", c->masks, g->masks, n * c->mask_words * 4);
    cmp_array(label, "perm", c->perm, g->perm, n * 4);
}

/* The tile order (kmap/kmap.h) of the GPU map g equals the CPU twin's, built on c, in place of
 * a poisoned one (built twice, the array set to 0xff between); the CPU order is checked against
 * its definition (a permutation of the blocks, costs recomputed from masks and perm, descending,
 * ties by block). Leaves both maps with their order. */
static inline void cmp_tile_order(const char *label, vc_kmap_data *c, vc_kmap_data *g,
                                  cudaStream_t stream)
{
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_kmap_tile_order_cpu(c, &ce);
    vc_status gs = vc_kmap_tile_order_gpu(g, stream, &ge);
    if (gs == VC_OK && g->tile_order) {
        cudaMemset(g->tile_order, 0xff, (size_t)g->order_blocks * 4);
        gs = vc_kmap_tile_order_gpu(g, stream, &ge);
    }
    CHECK_MSG(cs == VC_OK && gs == VC_OK, "%s: tile order: cpu %s, gpu %s", label, ce.msg, ge.msg);
    if (cs != VC_OK || gs != VC_OK) return;
    const int64_t blocks = (c->n_out + VC_KMAP_ORDER_ROWS - 1) / VC_KMAP_ORDER_ROWS;
    CHECK_MSG(c->order_blocks == blocks && g->order_blocks == blocks,
              "%s: tile order blocks cpu %lld gpu %lld, want %lld", label,
              (long long)c->order_blocks, (long long)g->order_blocks, (long long)blocks);
    if (c->order_blocks != blocks || g->order_blocks != blocks || blocks == 0) return;
    cmp_array(label, "tile_order", c->tile_order, g->tile_order, blocks * 4);
    char *seen = calloc((size_t)blocks, 1);
    int ok = seen != NULL, prev_cost = 1 << 30;
    int64_t prev = -1;
    for (int64_t j = 0; ok && j < blocks; j++) {
        const int64_t b = c->tile_order[j];
        ok = b >= 0 && b < blocks && !seen[b];
        if (!ok) break;
        seen[b] = 1;
        int cost = 0;
        for (int32_t w = 0; w < c->mask_words; w++) {
            uint32_t v = 0;
            for (int64_t i = b * VC_KMAP_ORDER_ROWS;
                 i < c->n_out && i < (b + 1) * VC_KMAP_ORDER_ROWS; i++)
                v |= c->masks[(int64_t)c->perm[i] * c->mask_words + w];
            for (; v; v &= v - 1) cost++;
        }
        ok = cost < prev_cost || (cost == prev_cost && b > prev);
        prev_cost = cost;
        prev = b;
    }
    free(seen);
    CHECK_MSG(ok, "%s: the CPU tile order is not the blocks by cost descending, ties by block",
              label);
}

#endif
