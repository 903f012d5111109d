#!/usr/bin/env bash
# run_cli_tests.sh - golden, error, help and oracle tests of the voxconv CLI.
#
# usage: run_cli_tests.sh VOXCONV_BINARY TESTS_CLI_DIR WORK_DIR PROJECT_SOURCE_DIR
#
# - Golden tests run the CLI on the small inputs of data/ (with --backend cpu) and compare its
#   stdout with golden/NAME.txt exactly (the work directory is written as @WORK@).
#   VC_UPDATE_GOLDEN=1 rewrites the golden files instead (review the diff by hand!).
# - Error tests check a non-zero exit and exactly one line on stderr starting "voxconv ".
# - Oracle tests build oracle.c (an independent checker sharing no code with the library) with
#   ${CC:-cc} and check voxelization and convolutions numerically, on data/small.bin and, when
#   datasets/fetch has run, on the real scans datasets/data/vlp16.bin and octomap_scan.bin
#   (skipped with a visible SKIP line otherwise; VC_REQUIRE_DATA=1 makes them mandatory).
#   The oracle tests use the default backend (auto: the GPU where there is one).
# Prints PASS/FAIL/SKIP per case and "N passed, N failed" at the end; exit 0 when none failed.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# golden NAME CMD... : exit 0, empty stderr, stdout == golden/NAME.txt
golden() {
  local name="$1"; shift
  run "$name" "$@"
  local rc; rc="$(rc_of "$name")"
  if [[ "$rc" != 0 ]]; then
    fail "$name" "exit $rc: $(head -c 300 "$WORK/$name.err")"; return
  fi
  if [[ -s "$WORK/$name.err" ]]; then
    fail "$name" "unexpected stderr: $(head -c 300 "$WORK/$name.err")"; return
  fi
  sed "s#$WORK#@WORK@#g" "$WORK/$name.out" >"$WORK/$name.txt"
  if [[ "${VC_UPDATE_GOLDEN:-0}" == 1 ]]; then
    mkdir -p "$DIR/golden"
    cp "$WORK/$name.txt" "$DIR/golden/$name.txt"
    pass "$name (golden updated)"; return
  fi
  if [[ ! -f "$DIR/golden/$name.txt" ]]; then
    fail "$name" "no golden/$name.txt (run with VC_UPDATE_GOLDEN=1 and review)"; return
  fi
  if diff -u "$DIR/golden/$name.txt" "$WORK/$name.txt" >"$WORK/$name.diff"; then
    pass "$name"
  else
    fail "$name" "output differs from golden/$name.txt:"
    head -n 20 "$WORK/$name.diff"
  fi
}

W="$WORK"
CPU=(--backend cpu)

# ---- help and version --------------------------------------------------------------------
for c in "" info voxelize conv pool export; do
  name="help_${c:-main}"
  run "$name" "$VOX" $c --help
  if [[ "$(rc_of "$name")" == 0 ]] && head -n1 "$WORK/$name.out" | grep -q '^usage: voxconv' \
     && [[ ! -s "$WORK/$name.err" ]]; then
    pass "$name"
  else
    fail "$name" "exit $(rc_of "$name"), stdout '$(head -n1 "$WORK/$name.out")'"
  fi
done
run version "$VOX" --version
if [[ "$(rc_of version)" == 0 ]] && grep -qE '^voxconv [0-9]+\.[0-9]+\.[0-9]+$' "$WORK/version.out"
then pass version; else fail version "$(cat "$WORK/version.out" "$WORK/version.err")"; fi

# ---- info --------------------------------------------------------------------------------
golden info_bin "$VOX" info data/small.bin "${CPU[@]}"
golden info_bin_json "$VOX" info data/small.bin --json "${CPU[@]}"
golden info_pcd "$VOX" info data/small.pcd "${CPU[@]}"
golden info_ply "$VOX" info data/small.ply "${CPU[@]}"

# ---- voxelize, conv, pool, export (goldens, CPU) -----------------------------------------
VS=0.25,0.25,0.1
RANGE=0,0,0,4,4,2
golden voxelize_small "$VOX" voxelize data/small.bin "$W/s.vxt" --voxel-size $VS \
  --range $RANGE "${CPU[@]}"
golden voxelize_small_json "$VOX" voxelize data/small.bin "$W/s_json.vxt" --voxel-size $VS \
  --range $RANGE --json "${CPU[@]}"
golden voxelize_count_cap "$VOX" voxelize data/small.bin "$W/s_count.vxt" --voxel-size $VS \
  --range $RANGE --reduce count --max-voxels 50 --dtype fp16 "${CPU[@]}"
golden voxelize_pcd "$VOX" voxelize data/small.pcd "$W/pcd.vxt" --voxel-size 0.5,0.5,0.1 \
  --range=0,0,0,3,1.5,0.4 "${CPU[@]}"
golden info_vxt "$VOX" info "$W/s.vxt" "${CPU[@]}"
golden info_vxt_json "$VOX" info "$W/s.vxt" --json "${CPU[@]}"
golden info_vxt_count "$VOX" info "$W/s_count.vxt" "${CPU[@]}"
golden conv_subm "$VOX" conv "$W/s.vxt" "$W/c_subm.vxt" --type subm --kernel 3 \
  --out-channels 5 --random-weights 1 --save-weights "$W/w_subm.npy" "${CPU[@]}"
golden conv_strided_json "$VOX" conv "$W/s.vxt" "$W/c_str.vxt" --type strided --kernel 3 \
  --stride 2 --padding 1 --out-channels 6 --random-weights 2 --save-weights "$W/w_str.npy" \
  --json "${CPU[@]}"
golden conv_downsample "$VOX" conv "$W/s.vxt" "$W/c_down.vxt" --type downsample --kernel 2 \
  --stride 2 --out-channels 3 --random-weights 3 "${CPU[@]}"
golden conv_inverse "$VOX" conv "$W/c_str.vxt" "$W/c_inv.vxt" --type inverse --kernel 3 \
  --stride 2 --padding 1 --forward-input "$W/s.vxt" --out-channels 4 --random-weights 4 \
  "${CPU[@]}"
golden conv_inverse_down "$VOX" conv "$W/c_down.vxt" "$W/c_inv2.vxt" --type inverse \
  --forward-type downsample --kernel 2 --stride 2 --forward-input "$W/s.vxt" \
  --out-channels 2 --random-weights 5 "${CPU[@]}"
golden conv_transposed "$VOX" conv "$W/c_down.vxt" "$W/c_tr.vxt" --type transposed \
  --kernel 2 --stride 2 --out-channels 2 --random-weights 6 "${CPU[@]}"
golden conv_anisotropic "$VOX" conv "$W/s.vxt" "$W/c_aniso.vxt" --type subm --kernel 3,1,1 \
  --dilation 2,1,1 --out-channels 3 --random-weights 7 --activation relu --dtype fp16 \
  "${CPU[@]}"
golden pool_max_strided "$VOX" pool "$W/s.vxt" "$W/p_max.vxt" --mode max --type strided \
  --kernel 2 --stride 2 "${CPU[@]}"
golden pool_avg_subm_json "$VOX" pool "$W/s.vxt" "$W/p_avg.vxt" --mode avg --type subm \
  --kernel 3 --json "${CPU[@]}"
golden pool_global "$VOX" pool "$W/s.vxt" "$W/g.npy" --global --mode avg "${CPU[@]}"
golden info_global_npy "$VOX" info "$W/g.npy" "${CPU[@]}"
golden export_subm "$VOX" export "$W/c_subm.vxt" "$W/e_subm" "${CPU[@]}"
golden info_export_coords "$VOX" info "$W/e_subm.coords.npy" --json "${CPU[@]}"

# Weights read back from --save-weights give the same result bit for bit.
ok conv_weights_file "$VOX" conv "$W/s.vxt" "$W/c_subm2.vxt" --type subm --kernel 3 \
  --weights "$W/w_subm.npy" "${CPU[@]}"
ok export_subm2 "$VOX" export "$W/c_subm2.vxt" "$W/e_subm2" "${CPU[@]}"
same_file weights_roundtrip "$W/e_subm.feats.npy" "$W/e_subm2.feats.npy"

# ---- errors ------------------------------------------------------------------------------
error err_no_command '' "$VOX"
error err_unknown_command "unknown command 'frobnicate'" "$VOX" frobnicate
error err_missing_file "VC_ERR_IO" "$VOX" info data/does_not_exist.bin
error err_truncated "VC_ERR_FORMAT" "$VOX" info data/truncated.bin
error err_garbage_pcd "VC_ERR_FORMAT" "$VOX" info data/garbage.pcd
error err_bad_flag "unknown option '--frobnicate'" "$VOX" info data/small.bin --frobnicate
error err_bad_kernel \
  "^voxconv conv: --kernel: expected K or KZ,KY,KX with 1\.\.7, got '9'$" \
  "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type subm --kernel 9 --out-channels 2 --random-weights 1
error err_bad_kernel_list "--kernel: expected" "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type subm \
  --kernel 3,3 --out-channels 2 --random-weights 1
error err_even_subm "subm needs odd" "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type subm --kernel 2 \
  --out-channels 2 --random-weights 1
error err_bad_type "--type: expected subm" "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type dense \
  --kernel 3 --out-channels 2 --random-weights 1
error err_no_weights "exactly one of --weights" "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type subm \
  --kernel 3 --out-channels 2
error err_bad_seed "--random-weights" "$VOX" conv "$W/s.vxt" "$W/x.vxt" --type subm \
  --kernel 3 --out-channels 2 --random-weights abc
error err_weights_shape "--weights: .* has shape \[5,3,3,3,4\]" "$VOX" conv "$W/s.vxt" \
  "$W/x.vxt" --type subm --kernel 3 --out-channels 4 --weights "$W/w_subm.npy"
error err_inverse_no_fwd "--forward-input" "$VOX" conv "$W/c_str.vxt" "$W/x.vxt" \
  --type inverse --kernel 3 --stride 2 --out-channels 2 --random-weights 1
error err_inverse_mismatch "not the output of the forward" "$VOX" conv "$W/s.vxt" "$W/x.vxt" \
  --type inverse --kernel 3 --stride 2 --padding 1 --forward-input "$W/s.vxt" \
  --out-channels 2 --random-weights 1
error err_missing_vxt "VC_ERR_IO" "$VOX" conv "$W/nothing.vxt" "$W/x.vxt" --type subm \
  --kernel 3 --out-channels 2 --random-weights 1
error err_vxt_not_vxt "VC_ERR_FORMAT" "$VOX" info data/small.bin --format vxt
error err_voxel_size "--voxel-size: expected 3" "$VOX" voxelize data/small.bin "$W/x.vxt" \
  --voxel-size 0.1,0.1 --range $RANGE
error err_range_order "--range: each max" "$VOX" voxelize data/small.bin "$W/x.vxt" \
  --voxel-size $VS --range 0,0,0,4,4,-1
error err_no_range "--range is required" "$VOX" voxelize data/small.bin "$W/x.vxt" \
  --voxel-size $VS
error err_missing_value "--kernel: missing value" "$VOX" pool "$W/s.vxt" "$W/x.vxt" --kernel
error err_extra_arg "unexpected argument" "$VOX" export "$W/s.vxt" "$W/x" extra
error err_bad_backend "--backend: expected auto\|cpu\|cuda" "$VOX" info data/small.bin \
  --backend tpu
error err_write_dir "VC_ERR_IO" "$VOX" voxelize data/small.bin "$W/no/such/dir/x.vxt" \
  --voxel-size $VS --range $RANGE

# ---- raw .bin record width (--load-dim, --use-dim) ---------------------------------------
# widen IN OUT WIDTH [N] [front] : OUT holds the first N (0 = all) 4-float records of IN widened
# to WIDTH floats with made-up extra columns, after the record or (front) before it.
widen() {
  perl -e 'my ($w, $max, $front) = @ARGV; binmode STDIN; binmode STDOUT; my $i = 0;
    while (read(STDIN, my $r, 16) == 16) { last if $max && $i >= $max;
      my $x = join("", map { pack("f<", ($i % 32) + 0.25 * $_) } 4 .. $w - 1);
      print $front ? $x . $r : $r . $x; $i++ }' "$3" "${4:-0}" "${5:-}" <"$1" >"$2"
}
# same_voxels TAG CLOUD4 WIDE VS RANGE LOAD_DIM USE_DIM : the wide file read with --load-dim
# and --use-dim voxelizes to the same .vxt bytes as its 4-float subset.
same_voxels() {
  local t="$1" vs="$4" range="$5"
  ok "${t}_ref" "$VOX" voxelize "$2" "$W/$t.ref.vxt" --voxel-size "$vs" --range="$range" "${CPU[@]}"
  ok "${t}_wide" "$VOX" voxelize "$3" "$W/$t.wide.vxt" --voxel-size "$vs" --range="$range" \
    --load-dim "$6" --use-dim "$7" "${CPU[@]}"
  same_file "${t}_same_voxels" "$W/$t.ref.vxt" "$W/$t.wide.vxt"
}
widen data/small.bin "$W/s5.bin" 5
widen data/small.bin "$W/s6.bin" 6
widen data/small.bin "$W/s5front.bin" 5 0 front
widen data/small.bin "$W/s5_400.bin" 5 400
widen data/small.bin "$W/s4_400.bin" 4 400
cp "$W/s5.bin" "$W/frame.pcd.bin"
same_voxels ld5 data/small.bin "$W/s5.bin" $VS $RANGE 5 4
same_voxels ld6 data/small.bin "$W/s6.bin" $VS $RANGE 6 4
same_voxels ld5_list data/small.bin "$W/s5front.bin" $VS $RANGE 5 1,2,3,4
same_voxels ld5_pcdbin data/small.bin "$W/frame.pcd.bin" $VS $RANGE 5 0,1,2,3
# 400 points of 5 floats are 8,000 bytes, a multiple of 16: only --load-dim 5 reads them right.
same_voxels ld5_mult4 "$W/s4_400.bin" "$W/s5_400.bin" $VS $RANGE 5 4
run ld5_mult4_info "$VOX" info "$W/s5_400.bin" --load-dim 5 --json "${CPU[@]}"
if grep -q '"points": 400,' "$W/ld5_mult4_info.out" && grep -q '"name": "c4"' \
   "$W/ld5_mult4_info.out"; then pass ld5_mult4_info; else
  fail ld5_mult4_info "$(head -c 300 "$W/ld5_mult4_info.out" "$W/ld5_mult4_info.err")"; fi
error err_ld_fits5 "not a multiple of 16 .* fits 5 float32 per point: pass --load-dim 5" \
  "$VOX" info "$W/s5.bin" "${CPU[@]}"
error err_ld_fits6 "fits 3 or 6 float32 per point: pass --load-dim 3 or 6 .*whichever" \
  "$VOX" voxelize "$W/s6.bin" "$W/x.vxt" --voxel-size $VS --range $RANGE "${CPU[@]}"
error err_ld_pcdbin "nuScenes \.pcd\.bin files hold 5 float32 per point .*: pass --load-dim 5" \
  "$VOX" voxelize "$W/frame.pcd.bin" "$W/x.vxt" --voxel-size $VS --range $RANGE "${CPU[@]}"
error err_ld_wrong "not a multiple of 24 \(load_dim 6 .*it fits 5 float32" \
  "$VOX" info "$W/s5.bin" --load-dim 6 "${CPU[@]}"
error err_ud_index "use_dim\[2\] = 9 is not a column of the file: it has 5" \
  "$VOX" info "$W/s5.bin" --load-dim 5 --use-dim 0,1,9 "${CPU[@]}"
error err_ud_count "use_dim keeps the first 6 columns, the file has 5" \
  "$VOX" voxelize "$W/s5.bin" "$W/x.vxt" --voxel-size $VS --range $RANGE --load-dim 5 \
  --use-dim 6 "${CPU[@]}"
error err_ud_small "--use-dim: expected an integer in 3\.\.4096, got '2'" \
  "$VOX" info data/small.bin --use-dim 2 "${CPU[@]}"
error err_ud_two "--use-dim: keep at least 3 columns" "$VOX" info data/small.bin --use-dim 0,1
error err_ud_text "--use-dim: expected at most 4096 comma-separated integers" \
  "$VOX" info data/small.bin --use-dim 0,x,2
error err_ld_small "--load-dim: expected an integer in 3\.\.4096" \
  "$VOX" info data/small.bin --load-dim 2
error err_ld_pcd "applies to raw \.bin files only; a PCD file" \
  "$VOX" info data/small.pcd --load-dim 4 "${CPU[@]}"
error err_ld_vxt "apply to point files, not to a \.vxt" "$VOX" info "$W/s.vxt" --use-dim 4
run ud_pcd "$VOX" info data/small.pcd --use-dim 3,0,1,2 "${CPU[@]}"
if grep -q '^columns:    4 (intensity x y z)$' "$W/ud_pcd.out"; then pass ud_pcd; else
  fail ud_pcd "$(head -c 300 "$W/ud_pcd.out" "$W/ud_pcd.err")"; fi
if [[ -f "$SRC/datasets/data/vlp16.bin" ]]; then
  V16="$SRC/datasets/data/vlp16.bin" V16R=-44,-103,-4,105,108,12.1
  widen "$V16" "$W/v5.bin" 5
  widen "$V16" "$W/v6.bin" 6
  same_voxels vlp16_ld5 "$V16" "$W/v5.bin" 0.05,0.05,0.1 $V16R 5 4
  same_voxels vlp16_ld6 "$V16" "$W/v6.bin" 0.05,0.05,0.1 $V16R 6 0,1,2,3
  error err_vlp16_ld5 "pass --load-dim 5" "$VOX" info "$W/v5.bin" "${CPU[@]}"
  error err_vlp16_ld6 "fits 3 or 6 float32 per point: pass --load-dim 3 or 6" \
    "$VOX" info "$W/v6.bin"
else
  skip real_vlp16_load_dim "datasets/data/vlp16.bin missing (run datasets/fetch to enable)"
fi

# ---- non-finite features: refused unless --nonfinite keeps or zeroes them ------------------
python3 -c '
import struct, sys
pts = [(0.1, 0.1, 0.1, 1.0), (0.5, 0.1, 0.1, float("nan")), (0.1, 0.9, 0.1, float("inf"))]
open(sys.argv[1], "wb").write(b"".join(struct.pack("<4f", *p) for p in pts))' "$W/nan.bin"
ok nf_voxelize "$VOX" voxelize "$W/nan.bin" "$W/nan.vxt" --voxel-size $VS --range $RANGE "${CPU[@]}"
error nf_conv_refused "2 features are NaN or infinite, the first at row 1, channel 3" \
  "$VOX" conv "$W/nan.vxt" "$W/x.vxt" --type subm --kernel 3 --out-channels 2 \
  --random-weights 1 "${CPU[@]}"
error nf_pool_refused "NaN or infinite" "$VOX" pool "$W/nan.vxt" "$W/x.npy" --global "${CPU[@]}"
error nf_bad_policy "--nonfinite: expected refuse\|keep\|zero" "$VOX" conv "$W/nan.vxt" \
  "$W/x.vxt" --type subm --kernel 3 --out-channels 2 --random-weights 1 --nonfinite drop
ok nf_conv_keep "$VOX" conv "$W/nan.vxt" "$W/nf_keep.vxt" --type subm --kernel 3 \
  --out-channels 2 --random-weights 1 --nonfinite keep "${CPU[@]}"
if grep -q "2 NaN or infinite features kept" "$W/nf_conv_keep.err"; then pass nf_keep_counted
else fail nf_keep_counted "stderr: $(cat "$W/nf_conv_keep.err")"; fi
ok nf_conv_zero "$VOX" conv "$W/nan.vxt" "$W/nf_zero.vxt" --type subm --kernel 3 \
  --out-channels 2 --random-weights 1 --nonfinite zero "${CPU[@]}"
ok nf_zero_is_finite "$VOX" pool "$W/nf_zero.vxt" "$W/nf_zero.npy" --global "${CPU[@]}"
ok nf_pool_keep "$VOX" pool "$W/nan.vxt" "$W/nf_pool.npy" --global --nonfinite keep "${CPU[@]}"

# ---- oracle checks -----------------------------------------------------------------------
ORACLE="$WORK/oracle"
if ! "${CC:-cc}" -O2 -std=c11 -o "$ORACLE" "$DIR/oracle.c" -lm 2>"$WORK/oracle_build.err"; then
  fail oracle_build "$(head -c 300 "$WORK/oracle_build.err")"
  ORACLE=""
fi

# oracle_check NAME ARGS... : runs the oracle, PASS on exit 0
oracle_check() {
  local name="$1"; shift
  if [[ -z "$ORACLE" ]]; then fail "$name" "no oracle"; return; fi
  if "$ORACLE" "$@" >"$WORK/$name.oracle" 2>&1; then
    pass "$name ($(tail -n1 "$WORK/$name.oracle"))"
  else
    fail "$name" "$(tail -n1 "$WORK/$name.oracle")"
  fi
}

# pipeline TAG CLOUD.bin VOXEL_SIZE RANGE CHANNELS : voxelize, subm k3, strided k3s2p1,
# subm k3 dilation 2, strided k2s2 (default backend), export, and check all with the oracle.
pipeline() {
  local tag="$1" cloud="$2" vs="$3" range="$4" ch="$5" p="$WORK/$1" sh
  ok "${tag}_voxelize" "$VOX" voxelize "$cloud" "$p.vxt" --voxel-size "$vs" --range="$range"
  ok "${tag}_export" "$VOX" export "$p.vxt" "$p"
  oracle_check "${tag}_oracle_voxelize" voxelize "$cloud" "$vs" "$range" \
    "$p.coords.npy" "$p.feats.npy"
  [[ -n "$ORACLE" ]] || return
  sh="$("$ORACLE" shape "$vs" "$range")"
  local spec name type k s pad d
  for spec in "subm3 subm 3 1 0 1" "strided3 strided 3 2 1 1" "subm3d2 subm 3 1 0 2" \
              "strided2 strided 2 2 0 1"; do
    read -r name type k s pad d <<<"$spec"
    ok "${tag}_conv_$name" "$VOX" conv "$p.vxt" "$p.$name.vxt" --type "$type" --kernel "$k" \
      --stride "$s" --padding "$pad" --dilation "$d" --out-channels "$ch" \
      --random-weights 20240 --save-weights "$p.$name.w.npy"
    ok "${tag}_export_$name" "$VOX" export "$p.$name.vxt" "$p.$name"
    oracle_check "${tag}_oracle_$name" conv "$type" "$k" "$s" "$pad" "$d" "$sh" \
      "$p.coords.npy" "$p.feats.npy" "$p.$name.w.npy" "$p.$name.coords.npy" \
      "$p.$name.feats.npy"
  done
}

pipeline small data/small.bin 0.25,0.25,0.1 0,0,0,4,4,2 5

DATA="$SRC/datasets/data"
for scan in "vlp16 -44,-103,-4,105,108,12.1" "octomap_scan -0.1,-15.2,-1.1,27.2,16.5,10.2"; do
  read -r name range <<<"$scan"
  if [[ -f "$DATA/$name.bin" ]]; then
    pipeline "$name" "$DATA/$name.bin" 0.05,0.05,0.1 "$range" 8
  elif [[ "${VC_REQUIRE_DATA:-0}" == 1 ]]; then
    fail "real_$name" "$DATA/$name.bin missing (run datasets/fetch); VC_REQUIRE_DATA=1"
  else
    skip "real_$name" "$DATA/$name.bin missing (run datasets/fetch to enable)"
  fi
done

echo "$npass passed, $nfail failed${nskip:+, $nskip skipped}"
[[ "$nfail" == 0 ]]
