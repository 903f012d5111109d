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
# usage: run_tune_tests.sh VOXCONV_BINARY TESTS_CLI_DIR WORK_DIR PROJECT_SOURCE_DIR
# Prints PASS/FAIL per case and "N passed, N failed"; exit 0 when none failed.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"
W="$WORK"
SEEDS="$SRC/tests/fuzz/corpus/tune"
SUITE="$SRC/datasets/layers/minkunet.txt"

# A scene and the reference output of one layer without a cache.
ok scene "$VOX" synth lidar "$W/scene.vxt" --voxels 3000 --backend cpu
CONV=(conv "$W/scene.vxt" --type subm --kernel 3 --out-channels 16 --random-weights 5
      --backend cpu)
ok reference "$VOX" "${CONV[@]}" "$W/ref.vxt"

# warned NAME PATTERN CACHE : conv with --tune-cache CACHE exits 0, writes ref.vxt's bytes, and
# prints exactly one stderr line, "voxconv conv: warning: ..." matching PATTERN.
warned() {
  local name="$1" pattern="$2" cache="$3"
  run "$name" "$VOX" "${CONV[@]}" "$W/$name.vxt" --tune-cache "$cache"
  local rc lines; rc="$(rc_of "$name")"; lines="$(wc -l <"$W/$name.err")"
  if [[ "$rc" != 0 ]]; then fail "$name" "exit $rc: $(head -c 300 "$W/$name.err")"; return; fi
  if [[ "$lines" != 1 ]] || ! grep -qE "^voxconv conv: warning: .*$pattern" "$W/$name.err"; then
    fail "$name" "expected one warning matching /$pattern/, got: $(head -c 400 "$W/$name.err")"
    return
  fi
  if ! cmp -s "$W/ref.vxt" "$W/$name.vxt"; then
    fail "$name" "output differs from the run without"; return; fi
  pass "$name"
}

head -c 500 "$SEEDS/valid.json" >"$W/truncated.json"
printf '{"format": "voxconv-tune-cache", "version": 1,' >"$W/cut.json"
: >"$W/empty.json"
printf '\x00\x01\x02garbage' >"$W/binary.json"
sed 's/"c_out":\t32/"c_out":\t33/' "$SEEDS/valid.json" >"$W/edited.json"
sed 's/"version":\t1/"version":\t7/' "$SEEDS/valid.json" >"$W/newer.json"
mkdir -p "$W/adir.json"
warned cache_truncated "is corrupt" "$W/truncated.json"
warned cache_cut "is corrupt" "$W/cut.json"
warned cache_empty "is corrupt" "$W/empty.json"
warned cache_binary "is corrupt" "$W/binary.json"
warned cache_stale "is stale.*voxconv 0\.0\.9" "$SEEDS/stale.json"
warned cache_newer_format "is stale.*format version 7" "$W/newer.json"
warned cache_foreign "is foreign.*CPU backend" "$SEEDS/valid.json"
warned cache_foreign_sm "is foreign" "$SEEDS/foreign.json"
warned cache_missing "unreadable" "$W/missing.json"
warned cache_directory "unreadable" "$W/adir.json"
# an edited value on a CPU context: foreign first (the device is checked before the entries)
warned cache_edited "is (foreign|corrupt)" "$W/edited.json"

# tune on the CPU backend: nothing to tune, nothing written, exit 0
run tune_cpu "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/cache.json" --backend cpu
if [[ "$(rc_of tune_cpu)" == 0 && ! -e "$W/cache.json" && ! -s "$W/tune_cpu.err" ]] &&
   grep -q "CPU backend has nothing to tune" "$W/tune_cpu.out"; then pass tune_cpu
else fail tune_cpu "exit $(rc_of tune_cpu): $(cat "$W/tune_cpu.out" "$W/tune_cpu.err" | head -c 300)"; fi
run tune_cpu_json "$VOX" tune --layer "subm 3 1 0 16 16" --synth uniform:2000 --out "$W/c.json" \
  --backend cpu --json
if [[ "$(rc_of tune_cpu_json)" == 0 && ! -e "$W/c.json" ]] &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["buckets"]==0 and not d["written"]' \
     "$W/tune_cpu_json.out" 2>/dev/null; then pass tune_cpu_json
else fail tune_cpu_json "$(head -c 300 "$W/tune_cpu_json.out" "$W/tune_cpu_json.err")"; fi

# errors: one line, before any work (usage errors exit 2, a missing suite 1)
CPU=(--backend cpu)
error tune_no_out "--out" "$VOX" tune "$SUITE" "$W/scene.vxt" "${CPU[@]}"
error tune_no_scene "no scene" "$VOX" tune "$SUITE" --out "$W/c.json" "${CPU[@]}"
error tune_no_layers "no layers" "$VOX" tune "$W/scene.vxt" --out "$W/c.json" "${CPU[@]}"
error tune_rounds "--rounds: expected" "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/c.json" \
  --rounds 0 "${CPU[@]}"
error tune_bad_input "expected a layer suite" "$VOX" tune "$SUITE" "$W/scene.pcd" \
  --out "$W/c.json" "${CPU[@]}"
error tune_out_ext "give it a .json name" "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/c.vxt" \
  "${CPU[@]}"
error tune_bad_layer "--layer" "$VOX" tune --layer "subm 2 1 0 16 16" "$W/scene.vxt" \
  --out "$W/c.json" "${CPU[@]}"
error tune_bad_runs "--runs" "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/c.json" --runs 0 \
  "${CPU[@]}"
error tune_bad_margin "--margin" "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/c.json" \
  --margin 0.9 "${CPU[@]}"
error tune_bad_dtype "--dtype" "$VOX" tune "$SUITE" "$W/scene.vxt" --out "$W/c.json" \
  --dtype int8 "${CPU[@]}"
error tune_bad_suite "nosuch.txt" "$VOX" tune "$W/nosuch.txt" "$W/scene.vxt" --out "$W/c.json" \
  "${CPU[@]}"
run tune_help "$VOX" tune --help
if [[ "$(rc_of tune_help)" == 0 ]] && head -n1 "$W/tune_help.out" | grep -q '^usage: voxconv tune'
then pass tune_help; else fail tune_help; fi

echo "$npass passed, $nfail failed"
[[ $nfail == 0 ]]
