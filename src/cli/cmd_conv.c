/*
 * cmd_conv.c - voxconv conv: one sparse convolution layer on a .vxt tensor (vc_conv_forward),
 * with weights read from .npy or generated from a seed, an optional bias, and for --type
 * inverse the forward layer's map rebuilt from its input.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const MAP_NAMES[] = {"subm", "strided", "downsample", "inverse",
                                        "transposed", NULL};
static const char *const ACTIVATIONS[] = {"none", "relu", "leaky", NULL};
static const char *const ALGOS[] = {"auto", "gather", "implicit", "grouped", NULL};

static const char CONV_HELP[] =
    "usage: voxconv conv IN.vxt OUT.vxt --type TYPE --kernel K --out-channels C\n"
    "                    (--weights W.npy | --random-weights SEED) [options]\n"
    "\n"
    "Runs one sparse convolution layer: out = act(conv(in, W) + bias), accumulated in fp32.\n"
    "Convolution is cross-correlation (spconv / PyTorch conv3d); sizes are per axis (z,y,x),\n"
    "one number meaning the same on every axis.\n"
    "\n"
    "  --type subm|strided|downsample|inverse|transposed\n"
    "      subm: output = input coordinates (odd kernels, stride 1);\n"
    "      strided: spconv sparse conv, output p reads input p*stride - padding + k*dilation;\n"
    "      downsample: Minkowski semantics, outputs floor(q / stride) (padding 0);\n"
    "      inverse: the inverse of a strided/downsample layer (see --forward-input);\n"
    "      transposed: a true transposed conv creating new coordinates\n"
    "  --kernel K|KZ,KY,KX     kernel size, 1..7 per axis (required)\n"
    "  --stride S|SZ,SY,SX     stride (default 1)\n"
    "  --padding P|PZ,PY,PX    padding (default 0)\n"
    "  --dilation D|DZ,DY,DX   dilation (default 1)\n"
    "  --out-channels C        output channels (required unless --weights gives them)\n"
    "  --weights W.npy         weights [C_out, kz, ky, kx, C_in], float32 or float16\n"
    "  --random-weights SEED   deterministic fp32 weights: element i (in [C_out,kz,ky,kx,C_in]\n"
    "                          order) is (2u - 1) * sqrt(1 / (K * C_in)), u = (z >> 11) * 2^-53\n"
    "                          where z is the (i+1)-th output of splitmix64 seeded with SEED\n"
    "  --bias B.npy            bias [C_out], float32 or float16\n"
    "  --activation none|relu|leaky   (default none)\n"
    "  --leaky-slope A         LeakyReLU slope (default 0.01)\n"
    "  --save-weights W.npy    write the weights used (float32 or as read)\n"
    "  --dtype fp32|fp16|bf16  compute on features of this dtype (the input is converted);\n"
    "                          the output has this dtype (default: the input's)\n"
    "  --algo auto|gather|implicit|grouped   algorithm (default auto); grouped:\n"
    "                          gather-GEMM-scatter over all offsets in one GEMM (CUDA)\n"
    "  --forward-input FWD.vxt (inverse only) the input of the forward layer: the forward map\n"
    "                          (--forward-type over FWD's coordinates with the same --kernel,\n"
    "                          --stride, --padding, --dilation) is built, IN's coordinates must\n"
    "                          equal its output coordinates, and the result lies on FWD's\n"
    "                          coordinates\n"
    "  --forward-type strided|downsample   type of the forward layer (default strided)\n"
    "  --nonfinite refuse|keep|zero   NaN or infinite input features: an error (default),\n"
    "                          kept, or set to 0 (counted on stderr)\n"
    "  --json                  print a JSON summary\n"
    "  --backend auto|cpu|cuda context backend (default auto)\n"
    "  --tune-cache FILE       the planner's tuned choices (voxconv tune --out); a cache that\n"
    "                          cannot be used is one warning, and the planner's rules apply\n"
    "\n"
    "example: voxconv conv in.vxt out.vxt --type strided --kernel 3 --stride 2 --padding 1 \\\n"
    "             --out-channels 16 --random-weights 7 --save-weights w.npy\n";

static float half_to_float(uint16_t h)
{
    int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

/* splitmix64 step: the documented generator of --random-weights. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Builds the weights: read from .npy, or generated. On success *w is malloc'ed. */
static int get_weights(const char *cmd, vc_context *ctx, const char *path, const char *seed_text,
                       int64_t *c_out, int64_t c_in, const int32_t kernel[3], void **w,
                       vc_dtype *wdt)
{
    int64_t kvol = (int64_t)kernel[0] * kernel[1] * kernel[2];
    if (path) {
        vc_array a;
        int rc = cli_read_npy(cmd, ctx, path, "cannot read weights", &a);
        if (rc) return rc;
        if (*c_out == 0 && a.ndim == 5) *c_out = a.shape[0];
        int ok = a.ndim == 5 && a.shape[0] == *c_out && a.shape[1] == kernel[0] &&
                 a.shape[2] == kernel[1] && a.shape[3] == kernel[2] && a.shape[4] == c_in;
        if (!ok) {
            char got[160] = "";
            for (int i = 0; i < a.ndim && i < 8; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                         (long long)a.shape[i]);
            vc_array_free(&a);
            return cli_error(cmd, "--weights: '%s' has shape [%s], expected [%lld,%d,%d,%d,%lld]",
                             path, got, (long long)*c_out, kernel[0], kernel[1], kernel[2],
                             (long long)c_in);
        }
        if (a.dtype != VC_DTYPE_FP32 && a.dtype != VC_DTYPE_FP16) {
            vc_array_free(&a);
            return cli_error(cmd, "--weights: '%s' must be float32 or float16", path);
        }
        size_t bytes = (size_t)(*c_out * kvol * c_in) * vc_dtype_size(a.dtype);
        *w = cli_xcalloc(bytes, 1);
        if (!*w) {
            vc_array_free(&a);
            return cli_error(cmd, "out of memory");
        }
        memcpy(*w, a.data, bytes);
        *wdt = a.dtype;
        vc_array_free(&a);
        return CLI_OK;
    }
    uint64_t seed = 0;
    if (cli_parse_u64(cmd, "--random-weights", seed_text, &seed)) return CLI_USAGE;
    int64_t n = *c_out * kvol * c_in;
    float *f = cli_xcalloc((size_t)n, sizeof(float));
    if (!f) return cli_error(cmd, "out of memory");
    double scale = sqrt(1.0 / (double)(kvol * c_in));
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
        f[i] = (float)((2.0 * u - 1.0) * scale);
    }
    *w = f;
    *wdt = VC_DTYPE_FP32;
    return CLI_OK;
}

static int get_bias(const char *cmd, vc_context *ctx, const char *path, int64_t c_out,
                    float **bias)
{
    vc_array a;
    int rc = cli_read_npy(cmd, ctx, path, "cannot read bias", &a);
    if (rc) return rc;
    if (a.ndim != 1 || a.shape[0] != c_out ||
        (a.dtype != VC_DTYPE_FP32 && a.dtype != VC_DTYPE_FP16)) {
        vc_array_free(&a);
        return cli_error(cmd, "--bias: '%s' must be float32 or float16 of shape [%lld]", path,
                         (long long)c_out);
    }
    *bias = cli_xcalloc((size_t)c_out, sizeof(float));
    if (!*bias) {
        vc_array_free(&a);
        return cli_error(cmd, "out of memory");
    }
    for (int64_t i = 0; i < c_out; i++)
        (*bias)[i] = a.dtype == VC_DTYPE_FP32 ? ((const float *)a.data)[i]
                                              : half_to_float(((const uint16_t *)a.data)[i]);
    vc_array_free(&a);
    return CLI_OK;
}

/* Compares two coordinate sets (rows and spatial shape); 1 when equal. */
static int same_coords(vc_context *ctx, const vc_coords *a, const vc_coords *b, int *err)
{
    vc_coords_info ia, ib;
    *err = 0;
    vc_coords_get_info(a, &ia);
    vc_coords_get_info(b, &ib);
    if (ia.count != ib.count || ia.batch_size != ib.batch_size ||
        memcmp(ia.spatial_shape, ib.spatial_shape, sizeof ia.spatial_shape) != 0)
        return 0;
    int32_t *ra = cli_xcalloc((size_t)ia.count * 4, sizeof(int32_t));
    int32_t *rb = cli_xcalloc((size_t)ib.count * 4, sizeof(int32_t));
    int eq = 0;
    if (!ra || !rb) {
        *err = 1;
    } else if (vc_coords_copy_out(ctx, a, ra, VC_MEMORY_HOST) != VC_OK ||
               vc_coords_copy_out(ctx, b, rb, VC_MEMORY_HOST) != VC_OK) {
        *err = 1;
    } else {
        eq = memcmp(ra, rb, (size_t)ia.count * 4 * sizeof(int32_t)) == 0;
    }
    free(ra);
    free(rb);
    return eq;
}

/* The texts of the options. */
typedef struct conv_opts {
    cli_map_opts m;
    const char *outc, *weights, *seed, *bias_path, *act, *slope, *savew, *dtype, *algo;
    const char *fwd_path, *fwd_type, *backend, *nonfinite, *tune_cache;
    int json;
} conv_opts;

/* The layer the options describe. */
typedef struct conv_plan {
    vc_conv_desc cd;
    vc_map_desc md;
    int64_t c_out;  /* 0: from the weights file                     */
    int want_dtype; /* -1: the input's                              */
    int fwd_t;      /* --type inverse: 0 strided, 1 downsample      */
} conv_plan;

static int parse_conv_opts(const char *cmd, const conv_opts *o, conv_plan *p)
{
    vc_conv_desc cd = VC_CONV_DESC_INIT;
    vc_map_desc md = VC_MAP_DESC_INIT;
    md.kernel[0] = md.kernel[1] = md.kernel[2] = 3;
    if (cli_parse_map(cmd, &o->m, MAP_NAMES, &md)) return CLI_USAGE;
    int64_t c_out = 0;
    if (o->outc && cli_parse_i64(cmd, "--out-channels", o->outc, 1, 1 << 20, &c_out))
        return CLI_USAGE;
    if (!o->weights == !o->seed)
        return cli_usage_error(cmd, "give exactly one of --weights and --random-weights");
    if (!o->weights && !o->outc) return cli_usage_error(cmd, "--out-channels is required");
    int v = 0;
    if (o->act) {
        if (cli_parse_choice(cmd, "--activation", o->act, ACTIVATIONS, &v)) return CLI_USAGE;
        cd.activation = (vc_activation)v;
    }
    if (o->slope && cli_parse_float(cmd, "--leaky-slope", o->slope, &cd.leaky_slope))
        return CLI_USAGE;
    int want_dtype = -1;
    if (o->dtype && cli_parse_choice(cmd, "--dtype", o->dtype, CLI_DTYPES, &want_dtype))
        return CLI_USAGE;
    if (o->algo) {
        if (cli_parse_choice(cmd, "--algo", o->algo, ALGOS, &v)) return CLI_USAGE;
        cd.algo = (vc_algo)v;
    }
    int fwd_t = 0;
    if (o->fwd_type && cli_parse_choice(cmd, "--forward-type", o->fwd_type, (const char *const[]){
                                            "strided", "downsample", NULL}, &fwd_t))
        return CLI_USAGE;
    if (md.type == VC_MAP_INVERSE && !o->fwd_path)
        return cli_usage_error(cmd, "--type inverse needs --forward-input FWD.vxt");
    if (md.type != VC_MAP_INVERSE && (o->fwd_path || o->fwd_type))
        return cli_usage_error(cmd, "--forward-input and --forward-type are for --type inverse");
    if (o->seed) {
        uint64_t s;
        if (cli_parse_u64(cmd, "--random-weights", o->seed, &s)) return CLI_USAGE;
    }
    p->cd = cd;
    p->md = md;
    p->c_out = c_out;
    p->want_dtype = want_dtype;
    p->fwd_t = fwd_t;
    return CLI_OK;
}

/* The handles and buffers of one run (conv_run_free releases them). */
typedef struct conv_run {
    vc_tensor *in, *fwd_in, *cast, *out;
    vc_tensor *work;  /* the convolution's input: in, or cast            */
    vc_coords *map_in; /* the map's input set                            */
    vc_kmap *fwd_map, *map;
    void *w;
    vc_dtype wdt;
    float *bias;
    void *host_feats;
} conv_run;

static void conv_run_free(conv_run *r)
{
    vc_tensor_destroy(r->out);
    vc_kmap_destroy(r->map);
    vc_tensor_destroy(r->cast);
    vc_kmap_destroy(r->fwd_map);
    vc_tensor_destroy(r->fwd_in);
    vc_tensor_destroy(r->in);
    free(r->w);
    free(r->bias);
    free(r->host_feats);
}

/* --type inverse: builds the forward map over FWD's coordinates, checks that IN lies on its
 * output set, and puts IN's features on that set (the same rows) as the work tensor. */
static int conv_inverse_input(const char *cmd, vc_context *ctx, const char *in_path,
                              const char *fwd_path, conv_plan *p, conv_run *r)
{
    vc_tensor_info ii;
    vc_tensor_get_info(r->in, &ii);
    int rc = cli_load_tensor(cmd, ctx, fwd_path, &r->fwd_in);
    if (rc) return rc;
    vc_tensor_info fi;
    vc_tensor_get_info(r->fwd_in, &fi);
    vc_map_desc fd = p->md;
    fd.type = p->fwd_t == 0 ? VC_MAP_STRIDED : VC_MAP_DOWNSAMPLE;
    vc_status st = vc_kmap_build(ctx, fi.coords, &fd, &r->fwd_map);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot build the forward map");
    vc_kmap_info fki;
    vc_kmap_get_info(r->fwd_map, &fki);
    int err = 0;
    if (!same_coords(ctx, ii.coords, fki.out_coords, &err))
        return err ? cli_vc_error(cmd, ctx, VC_ERR_INTERNAL, "cannot compare coordinates")
                   : cli_error(cmd, "the coordinates of '%s' (%lld voxels) are not the output "
                                    "of the forward %s map of '%s' (%lld voxels)",
                               in_path, (long long)ii.count,
                               p->fwd_t ? "downsample" : "strided", fwd_path,
                               (long long)fki.out_count);
    size_t bytes = (size_t)ii.count * (size_t)ii.channels * vc_dtype_size(ii.dtype);
    r->host_feats = cli_xcalloc(bytes, 1);
    if (!r->host_feats) return cli_error(cmd, "out of memory");
    st = vc_tensor_copy_out(ctx, r->in, r->host_feats, ii.dtype, VC_MEMORY_HOST);
    if (st == VC_OK)
        st = vc_tensor_create(ctx, fki.out_coords, ii.channels, ii.dtype, r->host_feats,
                              VC_MEMORY_HOST, &r->cast);
    if (st != VC_OK)
        return cli_vc_error(cmd, ctx, st, "cannot move the input onto the forward map");
    r->work = r->cast;
    r->map_in = fki.out_coords;
    p->md.inverse_of = r->fwd_map;
    return CLI_OK;
}

/* The layer itself: the input in the wanted dtype, weights, bias, map, convolution, and the
 * files written (OUT.vxt, --save-weights). */
static int conv_layer(const char *cmd, vc_context *ctx, const conv_opts *o, const char *out_path,
                      conv_plan *p, conv_run *r)
{
    vc_tensor_info ii;
    vc_tensor_get_info(r->in, &ii);
    vc_status st;
    int rc;
    if (p->want_dtype >= 0 && (vc_dtype)p->want_dtype != ii.dtype) {
        vc_tensor *c = NULL;
        st = vc_tensor_cast(ctx, r->work, (vc_dtype)p->want_dtype, &c);
        if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot convert the input features");
        if (r->cast) vc_tensor_destroy(r->cast);
        r->cast = c;
        r->work = c;
    }
    if ((rc = get_weights(cmd, ctx, o->weights, o->seed, &p->c_out, ii.channels, p->md.kernel,
                          &r->w, &r->wdt)))
        return rc;
    if (o->bias_path && (rc = get_bias(cmd, ctx, o->bias_path, p->c_out, &r->bias))) return rc;
    st = vc_kmap_build(ctx, r->map_in, &p->md, &r->map);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "cannot build the kernel map");
    vc_conv_desc *cd = &p->cd;
    cd->map = p->md;
    cd->kmap = r->map;
    cd->out_channels = p->c_out;
    cd->weights = r->w;
    cd->weight_dtype = r->wdt;
    cd->weight_memory = VC_MEMORY_HOST;
    cd->bias = r->bias;
    st = vc_conv_forward(ctx, cd, r->work, &r->out);
    if (st != VC_OK) return cli_vc_error(cmd, ctx, st, "convolution failed");
    /* OUT.vxt and --save-weights: both published, or neither. */
    const int32_t *k = p->md.kernel;
    int64_t shape[5] = {p->c_out, k[0], k[1], k[2], ii.channels};
    cli_output outs[2] = {{out_path, r->out, {0}, NULL, 0},
                          {o->savew, NULL, cli_array(r->w, r->wdt, 5, shape), NULL, 0}};
    return cli_write_outputs(cmd, ctx, outs, o->savew ? 2 : 1);
}

static void print_conv_summary(const char *const pos[2], const conv_plan *p, const conv_run *r,
                               int json)
{
    vc_tensor_info ii, oi;
    vc_coords_info ici, oci;
    vc_kmap_info ki;
    const vc_map_desc *md = &p->md;
    vc_tensor_get_info(r->in, &ii);
    vc_tensor_get_info(r->out, &oi);
    vc_coords_get_info(r->map_in, &ici);
    vc_coords_get_info(oi.coords, &oci);
    vc_kmap_get_info(r->map, &ki);
    if (json) {
        cli_json_io("input", pos[0], "output", pos[1]);
        printf(", ");
        cli_print_map_json(md, MAP_NAMES[md->type]);
        printf(", \"in_voxels\": %lld, \"out_voxels\": %lld, \"in_channels\": %lld, "
               "\"out_channels\": %lld, \"pairs\": %lld, \"dtype\": \"%s\", ",
               (long long)ii.count, (long long)oi.count, (long long)ii.channels,
               (long long)oi.channels, (long long)ki.pair_count, cli_dtype_name(oi.dtype));
        cli_print_shapes_json(ici.spatial_shape, oci.spatial_shape);
        printf(", \"activation\": \"%s\"}\n", ACTIVATIONS[p->cd.activation]);
    } else {
        printf("conv ");
        cli_print_map_text(md, MAP_NAMES[md->type]);
        printf(": %lld -> %lld voxels, %lld -> %lld channels, %lld pairs, %s, shape "
               "%dx%dx%d -> %dx%dx%d (z,y,x)\n",
               (long long)ii.count, (long long)oi.count, (long long)ii.channels,
               (long long)oi.channels, (long long)ki.pair_count, cli_dtype_name(oi.dtype),
               ici.spatial_shape[0], ici.spatial_shape[1], ici.spatial_shape[2],
               oci.spatial_shape[0], oci.spatial_shape[1], oci.spatial_shape[2]);
    }
}

int cmd_conv(int argc, char **argv)
{
    const char *cmd = "conv";
    conv_opts o;
    memset(&o, 0, sizeof o);
    const char *pos[2];
    int done = 0, npos = 0;
    cli_opt opts[] = {
        CLI_MAP_OPTIONS(o.m),
        {"--out-channels", &o.outc, NULL},       {"--weights", &o.weights, NULL},
        {"--random-weights", &o.seed, NULL},     {"--bias", &o.bias_path, NULL},
        {"--activation", &o.act, NULL},          {"--leaky-slope", &o.slope, NULL},
        {"--save-weights", &o.savew, NULL},      {"--dtype", &o.dtype, NULL},
        {"--algo", &o.algo, NULL},               {"--forward-input", &o.fwd_path, NULL},
        {"--forward-type", &o.fwd_type, NULL},   {"--json", NULL, &o.json},
        {"--backend", &o.backend, NULL},         {"--nonfinite", &o.nonfinite, NULL},
        {"--tune-cache", &o.tune_cache, NULL}};
    int rc = cli_parse_command(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos,
                               2, &npos, CONV_HELP, &done);
    if (rc || done) return rc;
    if (npos != 2)
        return cli_usage_error(cmd, "expected IN.vxt and OUT.vxt (see voxconv conv --help)");
    if (cli_check_extension(cmd, "OUT", pos[1], ".vxt") ||
        (o.savew && cli_check_extension(cmd, "--save-weights", o.savew, ".npy")))
        return CLI_USAGE;
    if (o.savew && strcmp(o.savew, pos[1]) == 0)
        return cli_usage_error(cmd, "--save-weights names the output file '%s'", pos[1]);
    conv_plan p;
    if (parse_conv_opts(cmd, &o, &p)) return CLI_USAGE;
    vc_nonfinite_policy nf;
    if (cli_parse_nonfinite(cmd, o.nonfinite, &nf)) return CLI_USAGE;

    vc_context *ctx = NULL;
    if ((rc = cli_open_context_tuned(cmd, o.backend, o.tune_cache, &ctx))) return rc;
    conv_run r;
    memset(&r, 0, sizeof r);
    r.wdt = VC_DTYPE_FP32;
    if (!(rc = cli_load_tensor(cmd, ctx, pos[0], &r.in)) &&
        !(rc = cli_check_features(cmd, ctx, r.in, nf, pos[0]))) {
        vc_tensor_info ii;
        vc_tensor_get_info(r.in, &ii);
        r.work = r.in;
        r.map_in = ii.coords;
        if (p.md.type == VC_MAP_INVERSE)
            rc = conv_inverse_input(cmd, ctx, pos[0], o.fwd_path, &p, &r);
        if (!rc) rc = conv_layer(cmd, ctx, &o, pos[1], &p, &r);
        if (!rc) print_conv_summary(pos, &p, &r, o.json);
    }
    conv_run_free(&r);
    vc_context_destroy(ctx);
    return rc;
}
