#!/usr/bin/env bash
# run_cli_net_tests.sh - voxconv run (networks) through the CLI, on the CPU.
#
# usage: run_cli_net_tests.sh VOXCONV_BINARY WORK_DIR PROJECT_SOURCE_DIR
#
# - models/voxel_res_backbone8x_kitti.json with random weights on the real scan
#   datasets/data/vlp16.bin (skipped with a SKIP line when datasets/fetch has not run;
#   VC_REQUIRE_DATA=1 makes it mandatory): every named output written, with the shapes the
#   model implies; a second run gives the same bytes; the scan voxelized by `voxconv voxelize`
#   with the model's settings and run as a .vxt gives the same bytes; --json and --profile;
#   --repeat per call; --bounds refused on the CPU (graph mode is CUDA's).
# - bad arguments and bad files: a non-zero exit and exactly one stderr line "voxconv run: ...".
# Prints PASS/FAIL/SKIP per case and "N passed, N failed"; exit 0 when none failed.
set -u
if [[ $# -ne 3 ]]; then echo "usage: $0 VOXCONV WORK_DIR PROJECT_SOURCE_DIR" >&2; exit 2; fi
VOX="$1"; [[ "$VOX" == /* ]] || VOX="$PWD/$VOX"
WORK="$2"; SRC="$(cd "$3" && pwd)"
mkdir -p "$WORK" && WORK="$(cd "$WORK" && pwd)"
rm -rf "${WORK:?}"/*
npass=0; nfail=0; nskip=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1${2:+: $2}"; nfail=$((nfail + 1)); }
skip() { echo "SKIP: $1${2:+: $2}"; nskip=$((nskip + 1)); }
run() { local n="$1"; shift; "$@" >"$WORK/$n.out" 2>"$WORK/$n.err"; echo $? >"$WORK/$n.rc"; }
ok() {
  local n="$1"; shift; run "$n" "$@"
  if [[ "$(cat "$WORK/$n.rc")" == 0 ]]; then pass "$n"; else
    fail "$n" "exit $(cat "$WORK/$n.rc"): $(head -c 300 "$WORK/$n.err")"; fi
}
# error NAME PATTERN CMD... : non-zero exit below 126, one stderr line "voxconv run: ..."
# matching PATTERN, nothing on stdout.
error() {
  local n="$1" pat="$2"; shift 2; run "$n" "$@"
  local rc; rc="$(cat "$WORK/$n.rc")"
  if [[ "$rc" == 0 || "$rc" -ge 126 ]]; then fail "$n" "exit $rc"; return; fi
  if [[ "$(wc -l <"$WORK/$n.err")" != 1 ]] || ! grep -qE "^voxconv run: " "$WORK/$n.err"; then
    fail "$n" "stderr: $(head -c 300 "$WORK/$n.err")"; return; fi
  if ! grep -qE -- "$pat" "$WORK/$n.err"; then fail "$n" "no /$pat/ in: $(cat "$WORK/$n.err")"; return; fi
  if [[ -s "$WORK/$n.out" ]]; then fail "$n" "unexpected stdout"; return; fi
  pass "$n"
}
CPU=(--backend cpu)
M="$SRC/models/voxel_res_backbone8x_kitti.json"
W="$WORK"

run help "$VOX" run --help
if [[ "$(cat "$W/help.rc")" == 0 ]] && head -n1 "$W/help.out" | grep -q '^usage: voxconv run'; then
  pass help_run; else fail help_run "$(head -c 200 "$W/help.out" "$W/help.err")"; fi

# ---- errors --------------------------------------------------------------------------------
printf '{"format": "voxconv-model", "version": 1, "layers": [' >"$W/bad.json"
printf 'not a safetensors file' >"$W/bad.safetensors"
touch "$W/a_file"
error no_args "expected MODEL WEIGHTS IN OUT_DIR" "$VOX" run "${CPU[@]}"
error three_args "expected MODEL WEIGHTS IN OUT_DIR" "$VOX" run "$M" x.bin "$W/o" "${CPU[@]}"
error seed_args "expected MODEL IN OUT_DIR" "$VOX" run "$M" w.st x.bin "$W/o" --random-weights 1 "${CPU[@]}"
error bad_seed "random-weights" "$VOX" run "$M" x.bin "$W/o" --random-weights x1 "${CPU[@]}"
error bad_dtype "--dtype" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --dtype fp64 "${CPU[@]}"
error bad_runs "--runs" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --runs 0 "${CPU[@]}"
error bad_option "--nope" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --nope "${CPU[@]}"
error no_model "cannot open model" "$VOX" run "$W/none.json" x.bin "$W/o" --random-weights 1 "${CPU[@]}"
error bad_model "not valid JSON" "$VOX" run "$W/bad.json" x.bin "$W/o" --random-weights 1 "${CPU[@]}"
error bad_weights "header length" "$VOX" run "$M" "$W/bad.safetensors" x.bin "$W/o" "${CPU[@]}"
error no_weights "cannot open" "$VOX" run "$M" "$W/none.safetensors" x.bin "$W/o" "${CPU[@]}"
error no_input "x.bin" "$VOX" run "$M" "$W/x.bin" "$W/o" --random-weights 1 "${CPU[@]}"
error bad_bounds "--bounds" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --bounds 10,x "${CPU[@]}"
error bad_margin "--bounds auto:MARGIN" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --bounds auto:0.5 "${CPU[@]}"
error bounds_profile "--profile" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --bounds auto --profile "${CPU[@]}"
error bad_repeat "--repeat" "$VOX" run "$M" x.bin "$W/o" --random-weights 1 --repeat 0 "${CPU[@]}"

# ---- the real scan ----------------------------------------------------------------------------
SCAN="$SRC/datasets/data/vlp16.bin"
if [[ ! -f "$SCAN" ]]; then
  if [[ "${VC_REQUIRE_DATA:-0}" == 1 ]]; then fail real_vlp16 "$SCAN missing; VC_REQUIRE_DATA=1"
  else skip real_vlp16 "$SCAN missing (run datasets/fetch to enable)"; fi
else
  ok run_points "$VOX" run "$M" --random-weights 7 "$SCAN" "$W/a" "${CPU[@]}"
  outs=(encoded_spconv_tensor.vxt x_conv1.vxt x_conv2.vxt x_conv3.vxt x_conv4.vxt spatial_features.npy)
  missing=""
  for f in "${outs[@]}"; do [[ -s "$W/a/$f" ]] || missing="$missing $f"; done
  if [[ -z "$missing" ]]; then pass outputs_written; else fail outputs_written "missing:$missing"; fi
  # x_conv4 lives on the 8x grid: 41x1600x1408 -> 5x200x176, 128 channels
  run info4 "$VOX" info "$W/a/x_conv4.vxt" --json "${CPU[@]}"
  if grep -q '"channels": 128' "$W/info4.out" && grep -q '"spatial_shape": \[5, 200, 176\]' "$W/info4.out"
  then pass x_conv4_shape; else fail x_conv4_shape "$(head -c 300 "$W/info4.out")"; fi
  # the BEV: [1, 128 * 2, 200, 176] float32 ('<f4'), the .npy header says so
  if head -c 128 "$W/a/spatial_features.npy" | grep -q "'shape': (1, 256, 200, 176)"; then
    pass bev_shape; else fail bev_shape "$(head -c 128 "$W/a/spatial_features.npy" | tr -d '\0')"; fi
  ok run_again "$VOX" run "$M" --random-weights 7 "$SCAN" "$W/b" "${CPU[@]}" --profile --json --runs 2
  same=1
  for f in "${outs[@]}"; do cmp -s "$W/a/$f" "$W/b/$f" || same=0; done
  if [[ $same == 1 ]]; then pass deterministic; else fail deterministic "second run differs"; fi
  if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["outputs"]) == 6 and len(d["steps"]) == 22 and d["total_ms"] > 0 and d["runs"] == 2 and d["frame_ms"] > 0' "$W/run_again.out" 2>"$W/json.err"
  then pass json_profile; else fail json_profile "$(head -c 300 "$W/json.err")"; fi
  ok voxelize "$VOX" voxelize "$SCAN" "$W/scan.vxt" --voxel-size 0.05,0.05,0.1 \
    --range 0,-40,-3,70.4,40,1 --max-voxels 40000 "${CPU[@]}"
  ok run_vxt "$VOX" run "$M" --random-weights 7 "$W/scan.vxt" "$W/c" "${CPU[@]}" --profile
  same=1
  for f in "${outs[@]}"; do cmp -s "$W/a/$f" "$W/c/$f" || same=0; done
  if [[ $same == 1 ]]; then pass vxt_equals_points; else fail vxt_equals_points "outputs differ"; fi
  if grep -q "^total .* ms (maps .* ms), 22 steps" "$W/run_vxt.out"; then pass profile_table
  else fail profile_table "$(tail -n 2 "$W/run_vxt.out")"; fi
  error out_is_file "not a directory" "$VOX" run "$M" --random-weights 7 "$W/scan.vxt" "$W/a_file" "${CPU[@]}"
  # graph mode is CUDA's: the CPU refuses the bounds, per-call --repeat times frames
  error bounds_cpu "graph mode needs a CUDA context" "$VOX" run "$M" --random-weights 7 "$W/scan.vxt" "$W/d" --bounds 50000,30000 "${CPU[@]}"
  ok repeat "$VOX" run "$M" --random-weights 7 "$W/scan.vxt" "$W/e" --repeat 2 "${CPU[@]}"
  if grep -qE "^run: per call [0-9.]+ ms per frame \(median of 2, p90 [0-9.]+\), back to back [0-9.]+ ms" "$W/repeat.out"
  then pass repeat_line; else fail repeat_line "$(tail -n 1 "$W/repeat.out")"; fi
fi

echo "$npass passed, $nfail failed${nskip:+, $nskip skipped}"
[[ "$nfail" == 0 ]]
