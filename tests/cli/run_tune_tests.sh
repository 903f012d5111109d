#!/usr/bin/env bash
# run_tune_tests.sh - the tune cache at the CLI, on the CPU backend (docs/tune.md):
#  - `voxconv tune` on a CPU context says it has nothing to tune, writes nothing, exits 0 (and
#    still refuses bad arguments with one line);
#  - `voxconv conv --tune-cache` with a corrupt, truncated, empty, stale, foreign, missing or
#    directory cache runs on with exactly one "warning:" line on stderr naming why, and writes
#    the same bytes as without a cache.
# The caches are the fuzz seeds of tests/fuzz/corpus/tune (made for an H100: foreign here) and
# edits of them.
#
# usage: run_tune_tests.sh VOXCONV_BINARY WORK_DIR PROJECT_SOURCE_DIR
set -u
if [[ $# -ne 3 ]]; then echo "usage: $0 VOXCONV WORK_DIR PROJECT_SOURCE_DIR" >&2; exit 2; fi
VOX="$1"
[[ "$VOX" == /* ]] || VOX="$PWD/$VOX"
WORK="$2"
SRC="$(cd "$3" && pwd)"
mkdir -p "$WORK" && WORK="$(cd "$WORK" && pwd)"
rm -rf "${WORK:?}"/*
cd "$WORK" || exit 2
SEEDS="$SRC/tests/fuzz/corpus/tune"
SUITE="$SRC/datasets/layers/minkunet.txt"

npass=0
nfail=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1${2:+: $2}"; nfail=$((nfail + 1)); }
run() {
  local name="$1"; shift
  "$@" >"$name.out" 2>"$name.err"
  echo $? >"$name.rc"
}

# A scene and the reference output of one layer without a cache.
"$VOX" synth lidar scene.vxt --voxels 3000 --backend cpu >/dev/null 2>&1 || {
  echo "FAIL: cannot make the scene"; echo "0 passed, 1 failed"; exit 1; }
CONV=(conv scene.vxt --type subm --kernel 3 --out-channels 16 --random-weights 5 --backend cpu)
"$VOX" "${CONV[@]}" ref.vxt >/dev/null 2>&1 ||
  { echo "FAIL: reference conv"; echo "0 passed, 1 failed"; exit 1; }

# warned NAME PATTERN CACHE : conv with --tune-cache CACHE exits 0, writes ref.vxt's bytes, and
# prints exactly one stderr line, "voxconv conv: warning: ..." matching PATTERN.
warned() {
  local name="$1" pattern="$2" cache="$3"
  run "$name" "$VOX" "${CONV[@]}" "$name.vxt" --tune-cache "$cache"
  local rc lines; rc="$(cat "$name.rc")"; lines="$(wc -l <"$name.err")"
  if [[ "$rc" != 0 ]]; then fail "$name" "exit $rc: $(head -c 300 "$name.err")"; return; fi
  if [[ "$lines" != 1 ]] || ! grep -qE "^voxconv conv: warning: .*$pattern" "$name.err"; then
    fail "$name" "expected one warning matching /$pattern/, got: $(head -c 400 "$name.err")"
    return
  fi
  if ! cmp -s ref.vxt "$name.vxt"; then fail "$name" "output differs from the run without"
    return; fi
  pass "$name"
}

head -c 500 "$SEEDS/valid.json" >truncated.json
printf '{"format": "voxconv-tune-cache", "version": 1,' >cut.json
: >empty.json
printf '\x00\x01\x02garbage' >binary.json
sed 's/"c_out":\t32/"c_out":\t33/' "$SEEDS/valid.json" >edited.json
sed 's/"version":\t1/"version":\t7/' "$SEEDS/valid.json" >newer.json
mkdir -p adir.json
warned cache_truncated "is corrupt" truncated.json
warned cache_cut "is corrupt" cut.json
warned cache_empty "is corrupt" empty.json
warned cache_binary "is corrupt" binary.json
warned cache_stale "is stale.*voxconv 0\.0\.9" "$SEEDS/stale.json"
warned cache_newer_format "is stale.*format version 7" newer.json
warned cache_foreign "is foreign.*CPU backend" "$SEEDS/valid.json"
warned cache_foreign_sm "is foreign" "$SEEDS/foreign.json"
warned cache_missing "unreadable" missing.json
warned cache_directory "unreadable" adir.json
# an edited value on a CPU context: foreign first (the device is checked before the entries)
warned cache_edited "is (foreign|corrupt)" edited.json

# tune on the CPU backend: nothing to tune, nothing written, exit 0
run tune_cpu "$VOX" tune "$SUITE" scene.vxt --out cache.json --backend cpu
if [[ "$(cat tune_cpu.rc)" == 0 && ! -e cache.json && ! -s tune_cpu.err ]] &&
   grep -q "CPU backend has nothing to tune" tune_cpu.out; then pass tune_cpu
else fail tune_cpu "exit $(cat tune_cpu.rc): $(cat tune_cpu.out tune_cpu.err | head -c 300)"; fi
run tune_cpu_json "$VOX" tune --layer "subm 3 1 0 16 16" --synth uniform:2000 --out c.json \
  --backend cpu --json
if [[ "$(cat tune_cpu_json.rc)" == 0 && ! -e c.json ]] &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["buckets"]==0 and not d["written"]' \
     tune_cpu_json.out 2>/dev/null; then pass tune_cpu_json
else fail tune_cpu_json "$(head -c 300 tune_cpu_json.out tune_cpu_json.err)"; fi

# usage errors: one line, exit 2, before any work
usage() {
  local name="$1" pattern="$2"; shift 2
  run "$name" "$VOX" tune "$@" --backend cpu
  if [[ "$(cat "$name.rc")" == 2 && "$(wc -l <"$name.err")" == 1 && ! -s "$name.out" ]] &&
     grep -qE "^voxconv tune: .*$pattern" "$name.err"; then pass "$name"
  else fail "$name" "exit $(cat "$name.rc"): $(head -c 300 "$name.err")"; fi
}
usage tune_no_out "--out" "$SUITE" scene.vxt
usage tune_no_scene "no scene" "$SUITE" --out c.json
usage tune_no_layers "no layers" scene.vxt --out c.json
usage tune_bad_input "expected a layer suite" "$SUITE" scene.pcd --out c.json
usage tune_out_ext "give it a .json name" "$SUITE" scene.vxt --out c.vxt
usage tune_bad_layer "--layer" --layer "subm 2 1 0 16 16" scene.vxt --out c.json
usage tune_bad_runs "--runs" "$SUITE" scene.vxt --out c.json --runs 0
usage tune_bad_margin "--margin" "$SUITE" scene.vxt --out c.json --margin 0.9
usage tune_bad_dtype "--dtype" "$SUITE" scene.vxt --out c.json --dtype int8
run tune_bad_suite "$VOX" tune nosuch.txt scene.vxt --out c.json --backend cpu
if [[ "$(cat tune_bad_suite.rc)" == 1 && "$(wc -l <tune_bad_suite.err)" == 1 ]]; then
  pass tune_bad_suite; else fail tune_bad_suite "$(head -c 300 tune_bad_suite.err)"; fi
run tune_help "$VOX" tune --help
if [[ "$(cat tune_help.rc)" == 0 ]] && head -n1 tune_help.out | grep -q '^usage: voxconv tune'
then pass tune_help; else fail tune_help; fi

echo "$npass passed, $nfail failed"
[[ $nfail == 0 ]]
