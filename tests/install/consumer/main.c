/* A program outside the tree: one subm conv on four voxels through the installed package. */
#include <stdio.h>
#include <string.h>

#include <voxconv.h>

int main(void)
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    if (vc_context_create(&cd, &ctx) != VC_OK) return 1;
    const int32_t coords[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 1, 1, 1}, {0, 2, 2, 2}};
    const int32_t shape[3] = {3, 3, 3};
    const float feats[4] = {1, 2, 3, 4};
    float w[27];
    for (int i = 0; i < 27; i++) w[i] = 1.0f; /* sums the 3x3x3 neighbourhood */
    vc_coords *c = NULL;
    vc_tensor *x = NULL, *y = NULL;
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.out_channels = 1;
    d.weights = w;
    float out[4];
    int ok = vc_coords_create(ctx, &coords[0][0], 4, VC_MEMORY_HOST, shape, 1, &c) == VC_OK &&
             vc_tensor_create(ctx, c, 1, VC_DTYPE_FP32, feats, VC_MEMORY_HOST, &x) == VC_OK &&
             vc_conv_forward(ctx, &d, x, &y) == VC_OK &&
             vc_tensor_copy_out(ctx, y, out, VC_DTYPE_FP32, VC_MEMORY_HOST) == VC_OK;
    if (!ok) {
        printf("failed: %s\n", vc_context_last_error(ctx));
        return 1;
    }
    /* (0,0,0)+(0,0,1)+(1,1,1) = 6 at rows 0..2; (1,1,1)+(2,2,2) also neighbours: row 2 = 1+2+3+4 */
    const float expect[4] = {6, 6, 10, 7};
    int bad = memcmp(out, expect, sizeof out) != 0;
    printf("voxconv %s: %g %g %g %g %s\n", vc_version(), out[0], out[1], out[2], out[3],
           bad ? "WRONG" : "ok");
    /* a network: links the model parser and its cJSON (voxconv::cjson for the static library) */
    vc_net_desc nd = VC_NET_DESC_INIT;
    nd.model_json = "{\"format\": \"voxconv-model\", \"version\": 1, \"input\": {\"channels\": 1, "
                    "\"spatial_shape\": [3, 3, 3]}, \"layers\": [{\"op\": \"subm\", \"name\": \"c\", "
                    "\"out_channels\": 2, \"kernel\": 3}], \"outputs\": {\"y\": \"#0\"}}";
    nd.random_weights = 1;
    vc_net *net = NULL;
    if (vc_net_create(ctx, &nd, &net) != VC_OK || vc_net_run(net, x) != VC_OK) {
        printf("net failed: %s\n", vc_context_last_error(ctx));
        bad = 1;
    }
    vc_net_destroy(net);
    vc_tensor_destroy(y);
    vc_tensor_destroy(x);
    vc_coords_destroy(c);
    vc_context_destroy(ctx);
    return bad;
}
