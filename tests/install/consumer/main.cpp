// The C++ consumer: the same subm conv on four voxels as main.c, through the installed package.
#include <cstdio>
#include <vector>

#include <voxconv.h>

int main()
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CPU;
    vc_context *ctx = nullptr;
    if (vc_context_create(&cd, &ctx) != VC_OK) return 1;
    const std::vector<int32_t> coords = {0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 2, 2, 2};
    const int32_t shape[3] = {3, 3, 3};
    const std::vector<float> feats = {1, 2, 3, 4};
    const std::vector<float> w(27, 1.0f); // sums the 3x3x3 neighbourhood
    vc_coords *c = nullptr;
    vc_tensor *x = nullptr, *y = nullptr;
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.out_channels = 1;
    d.weights = w.data();
    std::vector<float> out(4);
    bool ok = vc_coords_create(ctx, coords.data(), 4, VC_MEMORY_HOST, shape, 1, &c) == VC_OK &&
              vc_tensor_create(ctx, c, 1, VC_DTYPE_FP32, feats.data(), VC_MEMORY_HOST, &x) ==
                  VC_OK &&
              vc_conv_forward(ctx, &d, x, &y) == VC_OK &&
              vc_tensor_copy_out(ctx, y, out.data(), VC_DTYPE_FP32, VC_MEMORY_HOST) == VC_OK;
    if (!ok) {
        std::printf("failed: %s\n", vc_context_last_error(ctx));
        return 1;
    }
    const std::vector<float> expect = {6, 6, 10, 7};
    bool bad = out != expect;
    std::printf("voxconv %s (C++): %g %g %g %g %s\n", vc_version(), out[0], out[1], out[2], out[3],
                bad ? "WRONG" : "ok");
    vc_tensor_destroy(y);
    vc_tensor_destroy(x);
    vc_coords_destroy(c);
    vc_context_destroy(ctx);
    return bad ? 1 : 0;
}
