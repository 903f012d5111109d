/* The README's "Use it from C" example, made a program. The lines between the two README markers
 * are the README's block verbatim (the ctest readme_example_matches checks it); main writes a
 * small KITTI scan and 16 filters, runs the example on them, and the ctest readme_example runs
 * it. Usage: readme_example OUT.bin (the scan it writes, then reads). */
/* ---- README begin ---- */
#include <stdio.h>
#include <string.h>
#include <voxconv.h>

/* One subm conv over a voxelized scan; weights: float [16][3][3][3][4] (C_out, z, y, x, C_in). */
int run(const char *path, const float *weights)
{
    vc_context *ctx;
    if (vc_context_create(NULL, &ctx) != VC_OK)          /* AUTO backend */
        return 1;

    vc_cloud cloud = {0};                                /* KITTI .bin, PCD, PLY or .npy;
                                                            other .bin layouts:
                                                            vc_cloud_read_ex */
    vc_status s = vc_cloud_read(ctx, path, VC_FORMAT_AUTO, &cloud);

    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    vd.voxel_size[0] = 0.05f; vd.voxel_size[1] = 0.05f; vd.voxel_size[2] = 0.1f;
    float range[6] = {0, -40, -3, 70.4f, 40, 1};         /* xmin ymin zmin xmax ymax zmax */
    memcpy(vd.range, range, sizeof range);
    vc_points pts = {cloud.data, cloud.count, cloud.dim, NULL, VC_MEMORY_HOST};
    vc_tensor *x = NULL, *y = NULL;
    if (s == VC_OK)
        s = vc_voxelize(ctx, &vd, &pts, &x, NULL);       /* mean of x,y,z,intensity per voxel */

    vc_conv_desc cd = VC_CONV_DESC_INIT;                 /* subm 3x3x3 by default */
    cd.out_channels = 16;
    cd.weights = weights;
    cd.activation = VC_ACT_RELU;
    if (s == VC_OK)
        s = vc_conv_forward(ctx, &cd, x, &y);
    if (s != VC_OK)
        fprintf(stderr, "%s\n", vc_context_last_error(ctx));

    vc_tensor_destroy(y); vc_tensor_destroy(x); vc_cloud_free(&cloud);
    vc_context_destroy(ctx);
    return s != VC_OK;
}
/* ---- README end ---- */

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: readme_example OUT.bin\n");
        return 2;
    }
    /* 2,000 points on a slanted plane in front of the sensor, x, y, z, intensity. */
    enum { N = 2000 };
    static float pts[N][4];
    for (int i = 0; i < N; i++) {
        pts[i][0] = 5.0f + 0.01f * (float)(i % 50);
        pts[i][1] = -1.0f + 0.05f * (float)(i / 50);
        pts[i][2] = -1.0f + 0.002f * (float)i;
        pts[i][3] = (float)(i % 7) / 7.0f;
    }
    FILE *f = fopen(argv[1], "wb");
    int wrote = f && fwrite(pts, sizeof pts, 1, f) == 1;
    if (f && fclose(f) != 0) wrote = 0;
    if (!wrote) {
        fprintf(stderr, "readme_example: cannot write %s\n", argv[1]);
        return 1;
    }
    static float weights[16 * 27 * 4];
    for (int i = 0; i < 16 * 27 * 4; i++) weights[i] = (float)((i * 37) % 11 - 5) / 50.0f;
    int rc = run(argv[1], weights);
    printf("readme_example: %s\n", rc == 0 ? "ok" : "failed");
    return rc;
}
