/* src/net/net_internal.h - networks: the parsed model description (model.c), its weights bound
 * and folded (weights.c) and the executor's plan (net.c). The description format is in
 * docs/networks.md. Internal to src/net/ and the unit tests. */
#ifndef VC_SRC_NET_INTERNAL_H
#define VC_SRC_NET_INTERNAL_H

/* Inputs of one layer (add: 2; concat: 1 to this many): the executor keeps them on the stack. */
#define VC_NET_MAX_INPUTS 64

#include <stddef.h>
#include <stdint.h>

#include "src/internal.h"

typedef enum vc_nop {
    VC_NOP_SUBM, VC_NOP_CONV, VC_NOP_DOWNSAMPLE, VC_NOP_INVERSE, VC_NOP_TRANSPOSED,
    VC_NOP_BATCHNORM, VC_NOP_RELU, VC_NOP_LEAKY_RELU, VC_NOP_ADD, VC_NOP_CONCAT,
    VC_NOP_MAXPOOL, VC_NOP_AVGPOOL, VC_NOP_GLOBAL_MAXPOOL, VC_NOP_GLOBAL_AVGPOOL, VC_NOP_DENSE,
    VC_NOP_COUNT
} vc_nop;

/* The op's name in the description ("subm", ...). */
const char *vc_nop_name(vc_nop op);
/* Conv ops (subm, conv, downsample, inverse, transposed): the ones with weights. */
int vc_nop_is_conv(vc_nop op);

/* Where a layer reads from: the net's input, or an earlier layer's result. */
#define VC_NET_INPUT (-1)

typedef struct vc_net_layer {
    vc_nop op;
    char *id;                 /* "#<index>" when the description gives none                    */
    char *name;               /* state_dict prefix, or NULL                                    */
    char *indice_key;         /* or NULL                                                       */
    int32_t *inputs;          /* VC_NET_INPUT or earlier layer indices, VC_NET_MAX_INPUTS at most */
    int32_t n_inputs;
    vc_map_desc map;          /* convs and pools (INVERSE: kernel parameters of the forward)   */
    int32_t key_owner;        /* inverse: the layer whose map it inverts; else -1              */
    int64_t in_channels;      /* derived: channels of inputs[0] (convs, bn)                    */
    int64_t channels;         /* derived: channels of the result                              */
    int bias;                 /* convs: "<name>.bias" exists                                   */
    float eps;                /* batchnorm                                                     */
    float slope;              /* leaky_relu                                                    */
    int dense;                /* the result is dense (global pools, dense)                     */
    int bcdhw;                /* dense: layout [B, C, D, H, W] rather than [B, C*D, H, W]      */
    int32_t readers;          /* derived: layers that read the result, plus outputs naming it  */
} vc_net_layer;

typedef struct vc_model {
    char *name;
    int64_t in_channels;
    int32_t shape[3];         /* z, y, x                                                       */
    int has_voxelize;
    vc_voxelize_desc voxelize;
    int32_t use_dim;          /* point columns used (0: all)                                   */
    vc_net_layer *layers;
    int32_t n_layers;
    char **out_names;
    int32_t *out_layers;      /* VC_NET_INPUT or a layer index                                */
    int32_t n_outputs;
} vc_model;

/* Parses and checks a description (text of `len` bytes; `what` names it in messages). On
 * failure *out is zeroed and the message (in err) names the layer and the field. */
vc_status vc_model_parse(const char *text, size_t len, const char *what, vc_model *out,
                         vc_err *err);
void vc_model_free(vc_model *m);
/* Index of the layer with that id, VC_NET_INPUT for "input", or -2. */
int32_t vc_model_find(const vc_model *m, const char *id);

/* ---- weights (weights.c) ------------------------------------------------------------------- */

/* The parameters of one conv after folding, host fp32: weights [out, K, in], bias [out] (zero
 * where there was none and no BN). BN layers not folded keep scale / shift [C]. */
typedef struct vc_net_params {
    float *weights;           /* convs                                                         */
    int64_t weight_count;
    float *bias;              /* convs: [out] or NULL (no bias, no BN folded)                  */
    float *scale, *shift;     /* batchnorm applied apart: [C]                                  */
} vc_net_params;

/* Loads the parameters of every layer from a safetensors file (path or memory) or makes random
 * ones from `seed`, checks them (missing, extra, mis-shaped, non-finite: errors naming the
 * tensor) and folds each BN given in bn_of into its conv (spec: s = gamma / sqrtf(var + eps);
 * W' = W * s[o]; b' = (b - mean) * s + beta). params is [n_layers], zeroed by the caller; on
 * failure nothing is left allocated. */
vc_status vc_net_load_params(vc_context *ctx, const vc_model *m, const int32_t *bn_of,
                             const vc_net_desc *desc, vc_net_params *params);
void vc_net_free_params(const vc_model *m, vc_net_params *params);

/* The BN of layer `bn` applied apart, as scale / shift (fp32, [C]) from its four tensors
 * (gamma, beta, mean, var), in the fold's arithmetic. */
void vc_net_bn_affine(const float *gamma, const float *beta, const float *mean,
                      const float *var, float eps, int64_t c, float *scale, float *shift);

/* ---- the executor (net.c) and its graph mode (graph.c) ------------------------------------- */

#define NO_RESIDUAL (-2) /* VC_NET_INPUT is -1: the net's input may be a residual */

typedef struct net_step {
    int32_t head, last;       /* first and last layer of the step                              */
    int32_t members[4];       /* its layers: head, then what it took (bn, add, activation)      */
    int32_t n_members;
    int32_t bn;               /* conv: the BN folded into it, or -1                             */
    int32_t residual;         /* conv: the result added before the activation (a layer or
                                 VC_NET_INPUT), or NO_RESIDUAL                                 */
    vc_activation act;
    float slope;
    char op[64];
    int64_t voxels_in, voxels_out, pairs;
    double ms, map_ms;
} net_step;

/* What the net keeps per layer. */
typedef struct net_layer_state {
    void *weights;            /* conv weights [out, K, in] in the net's dtype, in `mem`         */
    float *bias;              /* conv bias [out] fp32, or NULL                                  */
    float *scale, *shift;     /* BN applied apart, fp32 [C]                                     */
    int32_t step_of;          /* the step whose `last` this layer is, or -1                     */
    vc_tensor *slot;          /* sparse result of this run                                      */
    vc_kmap *map;             /* the map a conv / pool used this run (a reference)              */
    void *dense;              /* dense result (owned, in `mem`)                                 */
    size_t dense_cap;
    int64_t dense_shape[5];
    int32_t dense_ndim;
    int32_t left;             /* readers still to run in this run                               */
} net_layer_state;

struct vc_net {
    vc_context *ctx;
    vc_model model;
    vc_dtype dtype;
    vc_algo algo;
    vc_memory mem;            /* the context's native memory                                   */
    net_layer_state *ls;      /* per layer                                                     */
    net_step *steps;
    int32_t n_steps;
    vc_tensor *input;         /* the input as placed (owned), or NULL when the caller's is used */
    vc_tensor *vox;           /* vc_net_run_points: the voxels of the last run (owned)          */
    const vc_tensor *in_used;
    int profiling;
    int ran;
    int32_t *layer_level;     /* per layer: the level (coordinate set) of its sparse result, or
                                 -1 (dense results); vc_net_plan_levels                        */
    int32_t n_levels;         /* may pass VC_NET_MAX_LEVELS (then no graph mode)               */
    int64_t level_rows[VC_NET_MAX_LEVELS]; /* rows of each level in the last per-call run      */
    int level_rows_set;
    struct vc_net_graph *graph; /* graph mode (graph.c), or NULL: per-call runs               */
    int auto_bounds;          /* per-call runs may go through graph mode (graph_auto.c)        */
    int auto_graph;           /* graph holds bounds graph_auto.c set, not the caller's         */
};


/* Levels of m (docs/networks.md "Graph mode"): layer_level[i] for every layer ([n_layers]), the
 * level count into *n_levels (may pass VC_NET_MAX_LEVELS; layer_level then still holds every
 * index), and for each level below VC_NET_MAX_LEVELS the layer whose map makes it (-1 for level
 * 0) into maker (may be NULL). A conv or pool with a SUBM map stays on its input's level, an
 * INVERSE one returns to the level its forward map read; any other map type makes a new level,
 * one per (input level, map description): the per-call run's map cache shares them alike. */
void vc_net_plan_levels(const vc_model *m, int32_t *layer_level, int32_t *n_levels,
                        int32_t *maker);
/* The input's channels and spatial shape against the description's (net.c): a message naming
 * both, or VC_OK. */
vc_status vc_net_check_input(vc_net *net, const vc_tensor *in);
/* Frees the per-call run's results (net.c). */
void vc_net_release_run(vc_net *net);
/* Graph mode (graph.c): the runs, the frame's one check (then the outputs of the last frame,
 * views with the live counts, are in out_views), and the teardown. */
vc_status vc_net_graph_run(vc_net *net, const vc_tensor *in);
vc_status vc_net_graph_run_points(vc_net *net, const vc_points *points);
vc_status vc_net_graph_output(vc_net *net, int32_t index, vc_net_output *out);
void vc_net_graph_free(vc_net *net);
/* Graph mode's frame check (the one synchronisation) now, rather than at the first output. */
vc_status vc_net_graph_check(vc_net *net);
/* After a checked frame: each level's rows into need[n_levels] - the live count, or where a
 * level outgrew its bound (VC_ERR_CAPACITY) the count it needed. Returns 1 when every failure
 * of the frame was a level over its bound (growing the bounds and running again can succeed),
 * else 0. */
int vc_net_graph_needs(const vc_net *net, int64_t *need);
/* 1 where graph mode can run the net (vc_net_set_bounds would accept it); quiet. */
int vc_net_graphable(vc_net *net);
/* Per-call runs through graph mode with bounds the net grows itself (graph_auto.c): whether
 * the next per-call run takes that path, and the run (in: voxels, or pts: points). */
int vc_net_auto_ready(vc_net *net);
vc_status vc_net_auto_run(vc_net *net, const vc_tensor *in, const vc_points *pts);

#endif
