/* tests/common/gpu_testutil.h - what the GPU test programs share on top of testutil.h: a CUDA
 * runtime check that counts a failure and goes on (CUDA_OK), host-to-device copies. CUDA builds
 * only; include inside the test's VOXCONV_HAVE_CUDA block. */
#ifndef VC_GPU_TESTUTIL_H
#define VC_GPU_TESTUTIL_H

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "core/status.h"
#include "testutil.h"

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                 \
    } while (0)

/* 1 when a CUDA device is usable; 0 after printing why the test skips (its main returns 77). */
static inline int gpu_usable(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return 1;
    printf("SKIP: no usable CUDA device\n");
    return 0;
}

/* A device buffer of `bytes` (16 when 0), with a copy of `host` unless it is NULL. */
static inline void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 16));
    if (bytes && host) CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* The nodes of a captured graph: *count in all, *kernels of them kernels, *others neither a
 * kernel nor a memset nor empty (a copy, a host node, an allocation: what a capturable run
 * must not add). */
static inline void graph_node_kinds(cudaGraph_t graph, size_t *count, size_t *kernels,
                                    size_t *others)
{
    *count = *kernels = *others = 0;
    CUDA_OK(cudaGraphGetNodes(graph, NULL, count));
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc((*count ? *count : 1) * sizeof *nodes);
    CUDA_OK(cudaGraphGetNodes(graph, nodes, count));
    for (size_t i = 0; i < *count; i++) {
        enum cudaGraphNodeType t;
        CUDA_OK(cudaGraphNodeGetType(nodes[i], &t));
        if (t == cudaGraphNodeTypeKernel)
            (*kernels)++;
        else if (t != cudaGraphNodeTypeMemset && t != cudaGraphNodeTypeEmpty)
            (*others)++;
    }
    free(nodes);
}

/* What a captured graph runs: queues its work on `stream`; returns its status (err filled). */
typedef vc_status (*graph_body)(void *arg, cudaStream_t stream, vc_err *err);

/* Runs body once outside a capture (loads its kernels: lazy module loading), synchronises,
 * then captures it in the global mode (a hidden synchronisation or allocation fails the
 * capture), checks that the graph holds only kernel and memset nodes (no host node, no copy,
 * no allocation), prints its size and instantiates it. NULL on failure (counted). */
static inline cudaGraphExec_t capture_checked(cudaStream_t stream, graph_body body, void *arg,
                                              const char *label)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    vc_err err = {{0}};
    vc_status st = body(arg, stream, &err);
    CHECK_MSG(st == VC_OK, "%s: warm-up run: %s", label, err.msg);
    CUDA_OK(cudaStreamSynchronize(stream));
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    CHECK_MSG(e == cudaSuccess, "%s: begin capture: %s", label, cudaGetErrorString(e));
    if (e != cudaSuccess) return NULL;
    st = body(arg, stream, &err);
    e = cudaStreamEndCapture(stream, &graph);
    CHECK_MSG(st == VC_OK, "%s: run under capture: %s", label, err.msg);
    CHECK_MSG(e == cudaSuccess, "%s: end capture: %s", label, cudaGetErrorString(e));
    if (st != VC_OK || e != cudaSuccess) {
        cudaGetLastError();
        if (graph) cudaGraphDestroy(graph);
        return NULL;
    }
    size_t count = 0, kernels = 0, others = 0;
    graph_node_kinds(graph, &count, &kernels, &others);
    CHECK_MSG(kernels > 0 && others == 0, "%s: graph of %zu nodes: %zu kernels, %zu other than "
              "kernel or memset", label, count, kernels, others);
    printf("%s: captured %zu nodes (%zu kernels)\n", label, count, kernels);
    e = cudaGraphInstantiate(&exec, graph, 0);
    CHECK_MSG(e == cudaSuccess, "%s: instantiate: %s", label, cudaGetErrorString(e));
    cudaGraphDestroy(graph);
    return e == cudaSuccess ? exec : NULL;
}

#endif
