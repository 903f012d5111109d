/* test_layers.c - the layer-spec and suite parser of `voxconv bench` and `voxconv tune`
 * (src/cli/layers.c): the shipped suites parse with the level stack bench_conv documents, and
 * malformed specs are refused with a message naming the field. */
#include "src/cli/layers.h"
#include "testutil.h"

static int parses(const char *spec)
{
    cli_layer l;
    char err[512] = "";
    return cli_layer_parse(spec, 0, NULL, &l, err, sizeof err) == 0;
}

static void test_specs(void)
{
    cli_layer l;
    char err[512] = "";
    CHECK(cli_layer_parse("strided 3 2 0,1,1 64 128", 0, NULL, &l, err, sizeof err) == 0);
    CHECK(l.type == CLI_LAYER_STRIDED && l.kernel[0] == 3 && l.stride[2] == 2);
    CHECK(l.padding[0] == 0 && l.padding[1] == 1 && l.padding[2] == 1);
    CHECK(l.cin == 64 && l.cout == 128 && l.dilation[1] == 1 && l.name[0] == 0);
    const int32_t dil[3] = {2, 2, 2};
    CHECK(cli_layer_parse("subm 3 1 0 16 16", 0, dil, &l, err, sizeof err) == 0);
    CHECK(l.dilation[0] == 2 && l.dilation[2] == 2);
    CHECK(cli_layer_parse("subm 3 1 0 16 16 1,2,3", 0, dil, &l, err, sizeof err) == 0);
    CHECK(l.dilation[0] == 1 && l.dilation[1] == 2 && l.dilation[2] == 3);
    char buf[96];
    cli_layer_format(&l, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "subm 3 1 0 16 16 d1,2,3"), "%s", buf);
    CHECK(cli_layer_parse("c1 subm 3,1,1 1 0 3 64", 1, NULL, &l, err, sizeof err) == 0);
    CHECK(!strcmp(l.name, "c1") && l.kernel[0] == 3 && l.kernel[1] == 1);
    const char *bad[] = {"", "subm", "subm 3 1 0 16", "conv 3 1 0 16 16", "subm 2 1 0 16 16",
                         "subm 3 2 0 16 16", "subm 8 1 0 16 16", "subm 3 1 0 0 16",
                         "subm 3 1 0 16 -1", "subm 3,3 1 0 16 16", "subm x 1 0 16 16",
                         "subm 3 1 0 16 16 0", "maxpool 2 2 0 16 32", "downsample 2 2 1 8 8",
                         "subm 3 1 0 16 2000000", "subm 3 1 0 16 16 1 1", "subm +3 1 0 16 16",
                         "subm 3 1 0 16 16x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!parses(bad[i]), "'%s' accepted", bad[i]);
    CHECK(cli_layer_parse("subm 4 1 0 16 16", 0, NULL, &l, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "odd") != NULL, "%s", err);
    CHECK(cli_layer_parse("subm 3 1 0 16 abc", 0, NULL, &l, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "COUT") != NULL && strstr(err, "abc"), "%s", err);
}

static void test_suites(void)
{
    cli_suite s;
    char err[512] = "";
    const char *text = "# a comment\n"
                       "a subm 3 1 0 4 16\n"
                       "\n"
                       "b downsample 2 2 0 16 32   # trailing comment\n"
                       "c subm 3 1 0 32 32\n"
                       "d maxpool 2 2 0 32 32\n"
                       "e inverse 2 2 0 32 32\n"
                       "f inverse 2 2 0 32 16\n"
                       "g transposed 3 2 0 16 8\n";
    CHECK(cli_suite_parse(text, "t", &s, err, sizeof err) == 0);
    CHECK_MSG(s.n == 7, "%d layers", s.n);
    if (s.n == 7) {
        CHECK(s.layers[0].in_level == 0 && s.layers[0].out_level == 0);
        CHECK(s.layers[1].out_level == 1 && s.layers[3].out_level == 2);
        CHECK(s.layers[4].forward == 3 && s.layers[4].in_level == 2 &&
              s.layers[4].out_level == 1);
        CHECK(s.layers[5].forward == 1 && s.layers[5].out_level == 0);
        CHECK(s.layers[6].in_level == 0 && s.layers[6].out_level == 3 && s.n_levels == 4);
    }
    cli_suite_free(&s);
    CHECK(cli_suite_parse("a subm 3 1 0 4 16\nb inverse 2 2 0 16 16\n", "t", &s, err,
                          sizeof err) != 0);
    CHECK_MSG(strstr(err, "inverse") != NULL, "%s", err);
    CHECK(cli_suite_parse("a downsample 2 2 0 4 16\nb inverse 3 2 0 16 16\n", "t", &s, err,
                          sizeof err) != 0);
    CHECK(cli_suite_parse("a subm 3 1 0 4 16\nb subm 3 1 0\n", "x.txt", &s, err,
                          sizeof err) != 0);
    CHECK_MSG(strstr(err, "x.txt line 2") != NULL, "%s", err);
    CHECK(cli_suite_parse("# nothing\n", "t", &s, err, sizeof err) != 0);
    CHECK(cli_suite_read("/nonexistent/suite.txt", &s, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "/nonexistent/suite.txt") != NULL, "%s", err);

    /* the shipped suites, with the layer counts of datasets/layers/README.md */
    const char *root = getenv("VC_DATA_ROOT");
    const char *files[4] = {"subm_sweep", "minkunet", "centerpoint", "spconv_bench"};
    const int counts[4] = {5, 49, 21, 20};
    for (int i = 0; root && i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/datasets/layers/%s.txt", root, files[i]);
        int rc = cli_suite_read(path, &s, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
        if (rc) continue;
        CHECK_MSG(s.n == counts[i], "%s: %d layers", files[i], s.n);
        CHECK_MSG(!strcmp(s.name, files[i]), "%s", s.name);
        cli_suite_free(&s);
    }
}

int main(void)
{
    test_specs();
    test_suites();
    TEST_END();
}
