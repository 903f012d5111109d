#!/usr/bin/env bash
# run_hostile_tests.sh - tiny files that ask for a lot, through the voxconv CLI (issue 27).
#
# usage: run_hostile_tests.sh VOXCONV_BINARY HOSTILE_DATA_DIR WORK_DIR
#
# Each case runs bounded in time (timeout 10 s), in memory (ulimit -v 1 GiB, and the peak RSS
# from /usr/bin/time -f %M must stay under 256 MiB where that tool exists) and in output
# (at most 64 KiB of stdout), and checks its exit status and what it printed:
# - batch.vxt (96 bytes, batch size 2^31-1): info summarises the per-batch counts; pool
#   --global refuses a 2^31-row output for one voxel.
# - channels.vxt (64 bytes, no voxels, 2^20 channels, batch 64): pool --global refuses a
#   256 MiB output for no voxels.
# - wide.npy (0, 50000000): info prints the shape, not 50 million columns.
# - huge.npy (0, 2^63-1) and wrap.npy (0, 2^32+3): refused (VC_ERR_LIMIT), never "columns: 3".
# - a sparse .bin one byte over 4 GiB: refused by its size before it is read.
# - ascii PCD and PLY with numbers of 100 and 5000 characters: parsed to the right values.
# Prints PASS/FAIL/SKIP per case and "N passed, N failed"; exit 0 when none failed.
set -u

if [[ $# -ne 3 ]]; then
  echo "usage: $0 VOXCONV HOSTILE_DATA_DIR WORK_DIR" >&2
  exit 2
fi
VOX="$1"
[[ "$VOX" == /* ]] || VOX="$PWD/$VOX"
DATA="$(cd "$2" && pwd)"
W="$3"
mkdir -p "$W" && W="$(cd "$W" && pwd)"
rm -rf "${W:?}"/*

npass=0
nfail=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1${2:+: $2}"; nfail=$((nfail + 1)); }

TIME=""
[[ -x /usr/bin/time ]] && /usr/bin/time -f %M true 2>/dev/null && TIME=/usr/bin/time
MAX_OUT=65536
MAX_RSS_KB=262144
VMEM_KB=1048576 # ulimit -v of a case (raised for one where a failed allocation would hide the bug)

# bounded NAME WANT_RC CMD... : runs CMD bounded; leaves $W/NAME.out and $W/NAME.err; fails
# the case (and returns 1) on a wrong exit status, a timeout, too much output or memory.
bounded() {
  local name="$1" want="$2"; shift 2
  local start=$SECONDS rc
  if [[ -n "$TIME" ]]; then
    ( ulimit -v "$VMEM_KB" 2>/dev/null
      exec timeout 10 "$TIME" -f %M -o "$W/$name.rss" "$@" ) 2>"$W/$name.err" |
      head -c $((MAX_OUT + 1)) >"$W/$name.out"
  else
    ( ulimit -v "$VMEM_KB" 2>/dev/null; exec timeout 10 "$@" ) 2>"$W/$name.err" |
      head -c $((MAX_OUT + 1)) >"$W/$name.out"
  fi
  rc=${PIPESTATUS[0]}
  local secs=$((SECONDS - start)) bytes
  bytes=$(wc -c <"$W/$name.out")
  if [[ $rc == 124 ]]; then fail "$name" "timed out after ${secs}s"; return 1; fi
  if ((bytes > MAX_OUT)); then fail "$name" "more than $MAX_OUT bytes of output"; return 1; fi
  if [[ -n "$TIME" && -s "$W/$name.rss" ]]; then
    local rss; rss=$(tail -n 1 "$W/$name.rss")
    if [[ "$rss" =~ ^[0-9]+$ ]] && ((rss > MAX_RSS_KB)); then
      fail "$name" "peak RSS ${rss} KB (at most $MAX_RSS_KB)"; return 1
    fi
  fi
  if [[ "$rc" != "$want" ]]; then
    fail "$name" "exit $rc (expected $want): $(head -c 300 "$W/$name.err")"; return 1
  fi
  if [[ "$want" != 0 ]] && [[ $(grep -c '^voxconv ' "$W/$name.err") != 1 ]]; then
    fail "$name" "expected one 'voxconv ...' error line, got: $(head -c 300 "$W/$name.err")"
    return 1
  fi
  return 0
}

# expect NAME FILE PATTERN : the case passes when FILE (out or err) matches the grep -E pattern.
expect() {
  if grep -Eq -- "$3" "$W/$1.$2"; then pass "$1"; else
    fail "$1" "no /$3/ in $2: $(head -c 300 "$W/$1.$2")"; fi
}

bounded info_batch 0 "$VOX" info --backend cpu "$DATA/batch.vxt" &&
  expect info_batch out '^per batch: +1( 0){15} \.\.\. 2147483631 more batches, 2147483631 empty$'
bounded info_batch_json 0 "$VOX" info --json --backend cpu "$DATA/batch.vxt" &&
  expect info_batch_json out '"voxels_per_batch": \[1(, 0){15}\], "more_batches": 2147483631, "more_batches_empty": 2147483631'
bounded pool_global_batch 1 "$VOX" pool --global --backend cpu "$DATA/batch.vxt" "$W/g.npy" &&
  expect pool_global_batch err 'voxconv pool: --global: batch size 2147483647 x 4 channels'
bounded pool_global_channels 1 "$VOX" pool --global --backend cpu "$DATA/channels.vxt" \
  "$W/g2.npy" && expect pool_global_channels err '64 x 1048576 channels'
# 4 GiB of address space: the 1.2 GB that describing 5e7 columns took must show in the RSS.
VMEM_KB=4194304 bounded info_wide_npy 0 "$VOX" info "$DATA/wide.npy" &&
  expect info_wide_npy out '^shape: +\[0, 50000000\]$'
bounded info_huge_npy 1 "$VOX" info "$DATA/huge.npy" &&
  expect info_huge_npy err 'shape dimension 1 is 9223372036854775807 .*VC_ERR_LIMIT'
bounded info_wrap_npy 1 "$VOX" info "$DATA/wrap.npy" &&
  expect info_wrap_npy err 'shape dimension 1 is 4294967299 .*VC_ERR_LIMIT'

# A sparse file one byte over 4 GiB (no disk space used).
if truncate -s 4294967297 "$W/big.bin" 2>/dev/null; then
  bounded info_big_bin 1 "$VOX" info "$W/big.bin" &&
    expect info_big_bin err 'file of 4294967297 bytes is larger than the limit'
  rm -f "$W/big.bin"
else
  echo "SKIP: info_big_bin: cannot make a sparse file"
fi

# Numbers longer than any fixed buffer: x = 0...02.5, y = -1.50...0, z = 30...0e-N.
num_x() { printf '%0*d2.5' "$(($1 - 3))" 0; }
num_y() { printf -- '-1.5%0*d' "$(($1 - 4))" 0; }
num_z() { local nz=$(($1 - 3)); while ((1 + nz + 2 + ${#nz} != $1)); do nz=$((nz - 1)); done
          printf '3%0*de-%d' "$nz" 0 "$nz"; }
for len in 100 5000; do
  row="$(num_x $len) $(num_y $len) $(num_z $len)"
  printf '# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 1\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 1\nDATA ascii\n%s\n' "$row" >"$W/long$len.pcd"
  printf 'ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty double z\nend_header\n%s\n' "$row" >"$W/long$len.ply"
  for ext in pcd ply; do
    name="long_decimal_${ext}_$len"
    bounded "$name" 0 "$VOX" info "$W/long$len.$ext" || continue
    if grep -Eq '^x: +2\.5 \.\. 2\.5$' "$W/$name.out" &&
       grep -Eq '^y: +-1\.5 \.\. -1\.5$' "$W/$name.out" &&
       grep -Eq '^z: +3 \.\. 3$' "$W/$name.out"; then
      pass "$name"
    else
      fail "$name" "wrong values: $(tr '\n' ' ' <"$W/$name.out")"
    fi
  done
done

echo "$npass passed, $nfail failed"
[[ $nfail == 0 ]]
