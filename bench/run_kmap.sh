#!/usr/bin/env bash
# bench/run_kmap.sh - the kernel-map work in one call on the lent GPU: test_gpu_kmap,
# test_gpu_graph, compute-sanitizer memcheck over both and racecheck over test_gpu_graph
# (RACE_KMAP=1: over test_gpu_kmap too, which outlasts 150 s) (VC_SANITIZE=1: small sizes), and
# bench_kmap on the synthetic scenes and the real scans of datasets/data. Expects the
# targets built in $B (default build-gpu-run, as tests/gpu/run builds it; e.g. `cmake --build
# build-gpu-run --target test_gpu_kmap test_gpu_graph bench_kmap`). Full logs under $OUT (default
# ./out); a short summary last.
# Usage: bench/run_kmap.sh [tests] [bench] [sanitize] [profile]
#        (default: tests sanitize bench; profile = Nsight Compute over the outdoor subm k3
#        builds of bench_kmap, the regular call and the graph replay apart: each kernel's
#        duration, clocks as found; BASE=path of another bench_kmap binary profiles that one
#        too, PROFILE_STRIDED=1 the strided k3 s2 build as well; PROFILE_MAPS="strided down"
#        and PROFILE_MODES=graph pick the maps and modes)
#        BUDGET=seconds stops starting new steps past that many seconds (default 220).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
B=${B:-build-gpu-run}
BUDGET=${BUDGET:-220}
mkdir -p "$OUT"
what="${*:-tests sanitize bench}"
summary="$OUT/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv,noheader >"$OUT/gpu.txt" 2>&1
say "gpu: $(cat "$OUT/gpu.txt")"
say "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?') + copied worktree"

left() { [ $((BUDGET - SECONDS)) -gt "$1" ]; }
last_rc=0

# run NAME TIMEOUT CMD...: logs to $OUT/NAME.log, one summary line
run() {
    local name=$1 t=$2
    shift 2
    if ! left 5; then say "$name: skipped (budget)"; last_rc=0; return; fi
    [ "$t" -gt $((BUDGET - SECONDS)) ] && t=$((BUDGET - SECONDS))
    local start=$SECONDS
    timeout "$t" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    last_rc=$rc
    local res
    res=$(grep -E "passed, [0-9]+ failed|ERROR SUMMARY" "$OUT/$name.log" | tail -1)
    say "$name: rc=$rc $((SECONDS - start))s ${res}"
    grep -m 8 -E "CHECK failed|Invalid|Race|Error|error" "$OUT/$name.log" | cut -c1-300 |
        sed 's/^/    /' | tee -a "$summary" >/dev/null
}

case " $what " in *" tests "*)
    run test_gpu_graph 90 "$B/tests/test_gpu_graph"
    run test_gpu_kmap 150 "$B/tests/test_gpu_kmap"
    ;;
esac
case " $what " in *" bench "*)
    D=datasets/data
    run bench_kmap 150 "$B/bench/bench_kmap" 25 "$D/table_scene_lms400.pcd@0.003" \
        "$D/octomap_scan.bin" "$D/vlp16.bin"
    ;;
esac
case " $what " in *" sanitize "*)
    if command -v compute-sanitizer >/dev/null; then
        # racecheck of test_gpu_kmap outlasts 150 s on the H100: RACE_KMAP=1 runs it anyway
        for tool in memcheck racecheck; do
            for t in test_gpu_graph test_gpu_kmap; do
                [ "$tool:$t" = racecheck:test_gpu_kmap ] && [ "${RACE_KMAP:-0}" != 1 ] && continue
                VC_SANITIZE=1 run "san_${tool}_$t" 150 compute-sanitizer --tool "$tool" \
                    --error-exitcode 9 "$B/tests/$t"
            done
        done
    else
        say "compute-sanitizer: not found"
    fi
    ;;
esac
case " $what " in *" profile "*)
    # ncu serialises the kernels: durations without the launch gaps. Caches are not flushed
    # between kernels (a build's data lives in L2 as it would in a real run).
    # Each mode is profiled apart (VC_BENCH_MODES): the same kernel can take longer in the graph
    # replay than in the call (the bounded build's tables are sized by its bounds), and medians
    # over both hid that for a session.
    prof() { # prof NAME BINARY MAP MODE  (MAP: subm, strided or down; MODE: call or graph)
        VC_BENCH_ONLY=$3 VC_BENCH_MODES=$4 run "$1" 150 ncu --clock-control none \
            --cache-control none \
            --metrics gpu__time_duration.sum --csv --page raw -k 'regex:[Kk]ernel' \
            --launch-count 600 "$2" 20
        python3 - "$OUT/$1.log" >"$OUT/$1.txt" <<'PY'
import csv, io, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
if start is None:
    print("no ncu table"); sys.exit(0)
allr = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
rows = [r for r in allr if r.get("ID", "").isdigit()]
col = next(c for c in rows[0] if "gpu__time_duration" in c)
unit = next((r[col] for r in allr if not r.get("ID", "").isdigit()), "nsecond")
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit.strip(), 1e-3)
by = {}
order = []
for r in rows:
    name = r["Kernel Name"].split("(")[0][:60]
    if name not in by: order.append(name)
    by.setdefault(name, []).append(float(r[col].replace(",", "")) * scale)
print("%-62s %6s %9s %9s" % ("kernel", "count", "median us", "min us"))
for n in order:
    v = by[n]
    print("%-62s %6d %9.2f %9.2f" % (n, len(v), statistics.median(v), min(v)))
print("launches %d, sum of medians per launch kind above" % len(rows))
PY
        cat "$OUT/$1.txt" | tee -a "$summary"
    }
    if command -v ncu >/dev/null; then
        maps=${PROFILE_MAPS:-subm}
        [ -n "${PROFILE_STRIDED:-}" ] && maps="subm strided"
        for map in $maps; do
            for mode in ${PROFILE_MODES:-call graph}; do
                prof "ncu_${map}_$mode" "$B/bench/bench_kmap" "$map" "$mode"
                [ -n "${BASE:-}" ] && prof "ncu_${map}_${mode}_base" "$BASE" "$map" "$mode"
            done
        done
    else
        say "ncu: not found"
    fi
    ;;
esac
for f in "$OUT/bench_kmap.log"; do
    if [ -s "$f" ]; then
        echo "== $(basename "$f")"
        grep -E "^\||^device|^#|^VC_" "$f"
    fi
done
echo "== summary"
cat "$summary"
