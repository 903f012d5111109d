#!/usr/bin/env bash
# run_bench_tests.sh - voxconv synth and voxconv bench on the CPU: synth is byte-identical for
# a seed (every kind, voxels and points) and differs for another; bench on a small generated
# scene prints every column of its table, writes CSV, JSON (with the fields docs/bench.md
# documents, checked with Python's json) and SVG (well-formed XML), compares two results; bad
# layer specs, impossible configurations and unreadable files give one error line and a
# non-zero exit.
#
# usage: run_bench_tests.sh VOXCONV_BINARY TESTS_CLI_DIR WORK_DIR PROJECT_SOURCE_DIR
# Prints PASS/FAIL per case and "N passed, N failed"; exit 0 when none failed.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"
W="$WORK"
differ() { if cmp -s "$2" "$3"; then fail "$1" "$2 and $3 are identical"; else pass "$1"; fi; }
CPU=(--backend cpu)

# ---- help ---------------------------------------------------------------------------------
for c in synth bench; do
  run "help_$c" "$VOX" $c --help
  if [[ "$(cat "$W/help_$c.rc")" == 0 ]] && head -n1 "$W/help_$c.out" | grep -q "^usage: voxconv $c"
  then pass "help_$c"; else fail "help_$c"; fi
done

# ---- synth: the same bytes for a seed -------------------------------------------------------
for spec in "lidar vxt --voxels 20000" "lidar bin --frame 1" "indoor vxt --voxels 60000" \
            "indoor npy" "uniform vxt --voxels 3000 --grid nuscenes --channels 2" \
            "uniform npy --voxels 3000"; do
  read -r kind ext opts <<<"$spec"
  tag="${kind}_${ext}${opts:+_$(echo "$opts" | tr -dc 'a-z0-9')}"
  ok "synth_${tag}_a" "$VOX" synth "$kind" "$W/$tag.a.$ext" --seed 7 $opts "${CPU[@]}"
  ok "synth_${tag}_b" "$VOX" synth "$kind" "$W/$tag.b.$ext" --seed 7 $opts "${CPU[@]}"
  ok "synth_${tag}_c" "$VOX" synth "$kind" "$W/$tag.c.$ext" --seed 8 $opts "${CPU[@]}"
  same_file "synth_${tag}_deterministic" "$W/$tag.a.$ext" "$W/$tag.b.$ext"
  differ "synth_${tag}_seed_matters" "$W/$tag.a.$ext" "$W/$tag.c.$ext"
done
run synth_json "$VOX" synth uniform "$W/u.vxt" --voxels 1000 --json "${CPU[@]}"
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["voxels"] == 1000' \
     "$W/synth_json.out" 2>"$W/synth_json.py"; then pass synth_json
else fail synth_json "$(cat "$W/synth_json.py" "$W/synth_json.out")"; fi
error err_synth_kind "KIND: expected lidar" "$VOX" synth moon "$W/x.vxt"
error err_synth_out "OUT: expected a .vxt" "$VOX" synth lidar "$W/x.pcd"
error err_synth_grid "indoor has its own" "$VOX" synth indoor "$W/x.vxt" --grid kitti
error err_synth_dense "quarter of the grid" "$VOX" synth uniform "$W/x.vxt" \
  --voxels 100000 --grid kitti --frame 0 --channels 1 --seed 1 --backend cpu \
  --voxels 268435456
error err_synth_dir "cannot write" "$VOX" synth lidar "$W/no/such/dir/x.vxt" "${CPU[@]}"

# ---- bench: a small generated scene ----------------------------------------------------------
LAYERS=(--layer "subm 3 1 0 8 16" --layer "strided 3 2 1 16 16" --layer "subm 3 1 0 16 16"
        --layer "subm 3 1 0 16 16" --layer "maxpool 2 2 0 16 16" --layer "inverse 2 2 0 16 8"
        --layer "subm 3,1,1 1 0 8 8 2,1,1")
ok bench_small "$VOX" bench --synth lidar:8000 "${LAYERS[@]}" --runs 3 --warmup 1 \
  --peak 1,0.1 --csv "$W/r.csv" --json "$W/r.json" --plot "$W/r.svg" "${CPU[@]}"
header="| layer | type | k | s | p | cin->cout | voxels in | voxels out | pairs | median ms | p10 ms | p90 ms | TFLOP/s | GB/s | floor ms | x floor | algorithm |"
if grep -qF -- "$header" "$W/bench_small.out"; then pass bench_table_header
else fail bench_table_header "$(head -5 "$W/bench_small.out")"; fi
# every row of the layer table has 17 cells, none empty, and numbers where numbers belong
if awk -F'|' -v n=0 '/^\| L[0-9]/ { n++; for (i = 2; i <= 18; i++) if ($i ~ /^ *$/) exit 1;
     for (i = 8; i <= 17; i++) if ($i !~ /^ *[0-9.e+-]+ *$/) exit 1 } END { exit n == 7 ? 0 : 1 }' \
     "$W/bench_small.out"; then pass bench_table_columns
else fail bench_table_columns "$(grep '^| L' "$W/bench_small.out" | head -3)"; fi
if grep -q "^whole suite: 7 layers, sum of medians .* (floor .*); back to back .*; map builds" \
     "$W/bench_small.out"; then pass bench_total_line; else fail bench_total_line; fi
if grep -q '^| 4 | L5 | inverse ' "$W/bench_small.out"; then pass bench_maps_table
else fail bench_maps_table "$(grep -A9 '^map builds' "$W/bench_small.out")"; fi
if [[ "$(head -1 "$W/r.csv")" == "suite,index,layer,type,kernel,stride,padding,dilation,cin,cout,voxels_in,voxels_out,pairs,median_ms,p10_ms,p90_ms,tflops,gbps,floor_ms,floor_ratio,algo,config,tap_split,repeat_of,dtype,backend,device" && "$(wc -l <"$W/r.csv")" == 8 ]]
then pass bench_csv; else fail bench_csv "$(head -2 "$W/r.csv")"; fi
# the JSON fields of docs/bench.md
cat >"$W/check.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
top = {"tool", "version", "device", "backend", "dtype", "algo", "runs", "warmup", "flush_l2",
       "scene", "suite", "layers", "maps", "total"}
layer = {"index", "name", "type", "kernel", "stride", "padding", "dilation", "cin", "cout",
         "voxels_in", "voxels_out", "pairs", "median_ms", "p10_ms", "p90_ms", "flops", "bytes",
         "tflops", "gbps", "floor_ms", "floor_ratio", "algo", "config", "tap_split", "tuned",
         "map", "repeat_of"}
mp = {"index", "first_layer", "type", "kernel", "stride", "padding", "dilation", "voxels_in",
      "voxels_out", "pairs", "median_ms", "p10_ms", "p90_ms"}
total = {"layers", "sum_median_ms", "sum_floor_ms", "network_median_ms", "network_p10_ms",
         "network_p90_ms", "map_builds_ms"}
assert set(d) == top, set(d) ^ top
assert set(d["scene"]) == {"source", "voxels", "spatial_shape"}
assert all(set(l) == layer for l in d["layers"]), [set(l) ^ layer for l in d["layers"]]
assert all(set(m) == mp for m in d["maps"])
assert set(d["total"]) == total
n = int(sys.argv[2])
assert len(d["layers"]) == n and d["total"]["layers"] == n
for l in d["layers"]:
    assert 0 <= l["p10_ms"] <= l["median_ms"] <= l["p90_ms"], l
    assert l["floor_ms"] is None or l["floor_ms"] > 0
assert d["layers"][5]["type"] == "inverse" and d["layers"][6]["dilation"] == [2, 1, 1]
assert d["backend"] == "cpu" and d["runs"] == int(sys.argv[3])
EOF
if python3 "$W/check.py" "$W/r.json" 7 3 2>"$W/check.err"; then pass bench_json_fields
else fail bench_json_fields "$(tail -3 "$W/check.err")"; fi
svg_ok() {
  python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot();
assert r.tag.endswith("svg") and len(r.findall(".//{http://www.w3.org/2000/svg}rect")) > int(sys.argv[2])' \
    "$2" "$3" 2>"$W/$1.err" && pass "$1" || fail "$1" "$(tail -2 "$W/$1.err")"
}
svg_ok bench_svg "$W/r.svg" 7
# JSON to stdout (the table goes to stderr), a second run to compare with, the comparison
run bench_json_stdout "$VOX" bench --synth lidar:8000 "${LAYERS[@]}" --runs 2 --warmup 0 \
  --dtype bf16 --json - --flush-l2 "${CPU[@]}"
if python3 "$W/check.py" "$W/bench_json_stdout.out" 7 2 2>"$W/check2.err"; then
  pass bench_json_stdout; cp "$W/bench_json_stdout.out" "$W/r2.json"
else fail bench_json_stdout "$(tail -3 "$W/check2.err")"; fi
ok bench_compare "$VOX" bench --plot "$W/cmp.svg" --compare "$W/r.json" "$W/r2.json" "${CPU[@]}"
svg_ok bench_compare_svg "$W/cmp.svg" 14
# a suite file, and a scene from a .vxt
ok bench_suite "$VOX" bench --synth uniform:2000 --suite "$SRC/datasets/layers/subm_sweep.txt" \
  --runs 1 --warmup 0 "${CPU[@]}"
ok synth_scene "$VOX" synth lidar "$W/scene.vxt" --voxels 5000 "${CPU[@]}"
ok bench_vxt "$VOX" bench "$W/scene.vxt" --layer "subm 3 1 0 4 4" --runs 1 "${CPU[@]}"
ok bench_points "$VOX" bench data/small.bin --layer "subm 3 1 0 4 4" --runs 1 "${CPU[@]}"

# a whole network (random weights) on a small synthetic sweep: the steps, the frame, the JSON
ok bench_model "$VOX" bench --model "$SRC/models/voxel_res_backbone8x_kitti.json" \
  --synth lidar:4000 --runs 2 --warmup 0 --json "$W/net.json" --plot "$W/net.svg" "${CPU[@]}"
if grep -q '^| conv_input.0 | subm+bn+relu | ' "$W/bench_model.out" &&
   grep -q '^whole network: [0-9]* steps, sum of step medians .*; frame ' "$W/bench_model.out"
then pass bench_model_table; else fail bench_model_table "$(head -12 "$W/bench_model.out")"; fi
if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); s = d["layers"]
assert d["model"] == "voxel_res_backbone8x_kitti.json" and len(s) == d["total"]["layers"] > 5
assert all({"name", "type", "voxels_in", "voxels_out", "pairs", "median_ms", "p10_ms", "p90_ms",
            "map_ms"} <= set(x) for x in s)
assert d["total"]["network_median_ms"] > 0' "$W/net.json" 2>"$W/net.err"
then pass bench_model_json; else fail bench_model_json "$(tail -2 "$W/net.err")"; fi
svg_ok bench_model_svg "$W/net.svg" 5

# --ab-cache: the planner (A) against a cache (B) interleaved in one process. A cache made on an
# H100 is foreign on the CPU: one warning, then A and B run the same choice (an A/A run); the
# table gets its A/B section, the JSON an "ab" object per timed conv layer (null for pools and
# repeats) whose gain is the median per-round ratio and the layer's time B's median.
H100_CACHE="$SRC/tests/fuzz/corpus/tune/valid.json"
run bench_ab "$VOX" bench --synth lidar:8000 "${LAYERS[@]}" --runs 3 --warmup 1 --ab-rounds 3 \
  --ab-cache "$H100_CACHE" --json "$W/ab.json" "${CPU[@]}"
if [[ "$(rc_of bench_ab)" == 0 ]] && [[ "$(grep -c "warning: tune cache" "$W/bench_ab.err")" == 1 ]] &&
   grep -qF "| layer | A: planner | B: cached | A median ms | B median ms | gain | spread | tuned |" \
     "$W/bench_ab.out"; then pass bench_ab
else fail bench_ab "$(head -c 400 "$W/bench_ab.err")"; fi
if python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
assert d["ab_rounds"] == 3 and d["ab_cache"].endswith(".json")
n = 0
for l in d["layers"]:
    if l["type"] in ("maxpool", "avgpool") or l["repeat_of"] >= 0:
        assert l["ab"] is None, l["name"]
        continue
    a = l["ab"]; n += 1
    assert {"planner_config", "planner_tap_split", "planner_ms", "planner_p10_ms",
            "planner_p90_ms", "cached_ms", "gain", "spread", "rounds"} <= set(a), a
    assert a["rounds"] == 3 and a["cached_ms"] == l["median_ms"] > 0 and a["planner_ms"] > 0
    assert a["gain"] > 0 and a["spread"] >= 0 and not l["tuned"]
    assert a["planner_config"] == l["config"] and a["planner_tap_split"] == l["tap_split"]
assert n == 5, n' "$W/ab.json" 2>"$W/ab.err"
then pass bench_ab_json; else fail bench_ab_json "$(tail -2 "$W/ab.err")"; fi
error err_ab_rounds_alone "--ab-rounds: only with --ab-cache" "$VOX" bench --synth uniform \
  --layer "subm 3 1 0 4 4" --ab-rounds 3 "${CPU[@]}"
error err_ab_rounds "--ab-rounds: expected" "$VOX" bench --synth uniform \
  --layer "subm 3 1 0 4 4" --ab-cache "$H100_CACHE" --ab-rounds 0 "${CPU[@]}"
error err_ab_tune_cache "--ab-cache: not with --tune-cache" "$VOX" bench --synth uniform \
  --layer "subm 3 1 0 4 4" --ab-cache "$H100_CACHE" --tune-cache "$H100_CACHE"
error err_ab_model "--ab-cache: not with --model" "$VOX" bench --synth lidar \
  --model "$SRC/models/spunet_indoor.json" --ab-cache "$H100_CACHE"

# ---- bench: errors --------------------------------------------------------------------------
error err_no_layers "no layers" "$VOX" bench --synth uniform
error err_spec_fields "expected \"TYPE K S P CIN COUT" "$VOX" bench --synth uniform \
  --layer "subm 3 1 0 16"
error err_spec_type "unknown layer type 'conv'" "$VOX" bench --synth uniform \
  --layer "conv 3 1 0 16 16"
error err_spec_kernel "K: expected 1..7" "$VOX" bench --synth uniform --layer "subm 9 1 0 16 16"
error err_spec_even "subm needs odd" "$VOX" bench --synth uniform --layer "subm 2 1 0 16 16"
error err_spec_pool "keeps the channels" "$VOX" bench --synth uniform \
  --layer "maxpool 2 2 0 16 32"
error err_spec_inverse "inverse with no" "$VOX" bench --synth uniform \
  --layer "inverse 2 2 0 16 16"
error err_both "not both" "$VOX" bench --synth uniform --layer "subm 3 1 0 4 4" \
  --suite "$SRC/datasets/layers/subm_sweep.txt"
error err_runs "--runs: expected" "$VOX" bench --synth uniform --layer "subm 3 1 0 4 4" --runs 0
error err_dtype "--dtype: expected" "$VOX" bench --synth uniform --layer "subm 3 1 0 4 4" \
  --dtype fp64
error err_empty_level "output would be empty" "$VOX" bench --synth uniform:2000 \
  --layer "strided 7 7 0 4 4" --layer "strided 7 7 0 4 4" --layer "strided 7 7 0 4 4" "${CPU[@]}"
error err_scene_missing "nothere.vxt" "$VOX" bench "$W/nothere.vxt" --layer "subm 3 1 0 4 4" \
  "${CPU[@]}"
error err_scene_garbage "VC_ERR_FORMAT" "$VOX" bench data/garbage.pcd \
  --layer "subm 3 1 0 4 4" "${CPU[@]}"
error err_suite_missing "cannot read" "$VOX" bench --synth uniform --suite "$W/nothere.txt" \
  "${CPU[@]}"
printf 'a subm 3 1 0 4 4\nb subm 3 1 0 4\n' >"$W/bad_suite.txt"
error err_suite_line "bad_suite.txt line 2" "$VOX" bench --synth uniform \
  --suite "$W/bad_suite.txt" "${CPU[@]}"
error err_compare_args "--compare: expected" "$VOX" bench --plot "$W/x.svg" --compare "$W/r.json"
error err_compare_garbage "not a voxconv bench JSON result" "$VOX" bench --plot "$W/x.svg" \
  --compare "$W/r.json" data/small.pcd "${CPU[@]}"
printf '{"layers": [], "total": {}}' >"$W/empty.json"
error err_compare_layers "different layers" "$VOX" bench --plot "$W/x.svg" \
  --compare "$W/r.json" "$W/empty.json" "${CPU[@]}"
error err_model_missing "cannot load the network" "$VOX" bench --model "$W/none.json" \
  --synth lidar "${CPU[@]}"
error err_model_suite "one of them" "$VOX" bench --model "$SRC/models/spunet_indoor.json" \
  --suite "$SRC/datasets/layers/subm_sweep.txt" --synth indoor
error err_weights_alone "--weights: only with --model" "$VOX" bench --synth lidar \
  --layer "subm 3 1 0 4 4" --weights "$W/w.safetensors"
error err_plot_ext "--plot" "$VOX" bench --synth uniform --layer "subm 3 1 0 4 4" \
  --plot "$W/x.npy"

echo "$npass passed, $nfail failed"
[[ "$nfail" == 0 ]]
