#!/usr/bin/env bash
# voxconv's one entry point for people and CI.
#   ./run.sh demo   install what is missing, build, fetch the real scans, voxelize them and run
#                   convolutions on them through the CLI, print a summary (the main job)
#   ./run.sh test   install what is missing, build, fetch the scans, run every test suite
#                   (then the Python package's suite: ./run.sh python)
#   ./run.sh python a CPU-only `pip install ./python` into a venv and its pytest suite
#   ./run.sh build  configure and build only
#   ./run.sh sanitize  the CPU unit suite built with AddressSanitizer and UBSan (leaks included)
#   ./run.sh tsan   the multi-context tests built with ThreadSanitizer (CPU, OpenMP off: libomp
#                   is not instrumented, so its own synchronisation would be reported)
# Environment: BUILD_DIR (default build), VOXCONV_CUDA_ARCHS (default "80;90"; CI uses 90),
# VOXCONV_CUDA (AUTO|ON|OFF), JOBS (default nproc); the Python suite: VOXCONV_PYTHON_TESTS=0
# skips it, VOXCONV_PYVENV (default $BUILD_DIR/pyvenv), VOXCONV_TORCH_TIMEOUT (seconds, 240).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf '== %s\n' "$*"; }

deps() {
    # Debian packages the build and tests need; installed only where missing.
    local want=() 
    command -v cmake >/dev/null || want+=(cmake)
    command -v ninja >/dev/null || want+=(ninja-build)
    command -v cc >/dev/null || want+=(build-essential)
    command -v clang >/dev/null || want+=(clang)
    command -v python3 >/dev/null || want+=(python3)
    python3 -c 'import ensurepip, venv' 2>/dev/null || want+=(python3-venv)
    command -v apt-get >/dev/null && command -v dpkg >/dev/null || true
    # cJSON parses the network descriptions and safetensors headers (cmake/cjson.cmake)
    [ -f /usr/include/cjson/cJSON.h ] || want+=(libcjson-dev)
    if command -v clang >/dev/null; then
        # libFuzzer and OpenMP for clang
        local rt
        rt=$(clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a
        [ -f "$rt" ] || want+=(libclang-rt-14-dev)
        echo 'int main(void){return 0;}' | clang -fopenmp -x c - -o /dev/null 2>/dev/null ||
            want+=(libomp-14-dev)
    fi
    if [ ${#want[@]} -gt 0 ]; then
        say "installing: ${want[*]}"
        local sudo=""
        [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${want[@]}" >/dev/null
    fi
}

build() {
    local cc=${CC:-}
    [ -n "$cc" ] || { command -v clang >/dev/null && cc=clang || cc=cc; }
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
        say "configuring $BUILD_DIR (C compiler $cc, CUDA archs ${VOXCONV_CUDA_ARCHS:-80;90})"
        CC=$cc cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_CUDA_ARCHITECTURES="${VOXCONV_CUDA_ARCHS:-80;90}" \
            -DVOXCONV_CUDA="${VOXCONV_CUDA:-AUTO}" >"$BUILD_DIR.configure.log" 2>&1 ||
            { cat "$BUILD_DIR.configure.log"; exit 1; }
    fi
    say "building ($JOBS jobs)"
    cmake --build "$BUILD_DIR" -j "$JOBS"
}

fetch() {
    say "fetching the real scans (datasets/fetch)"
    local tries=${FETCH_TRIES:-1} i
    for ((i = 1; i <= tries; i++)); do
        if bash datasets/fetch; then return 0; fi
        say "datasets/fetch failed (try $i of $tries)"
        sleep 5
    done
    return 1
}

demo() {
    local vc="$BUILD_DIR/voxconv" out="$BUILD_DIR/demo"
    mkdir -p "$out"
    fetch
    for scan in vlp16 octomap_scan; do
        local bin="datasets/data/$scan.bin"
        say "$scan: input"
        "$vc" info "$bin"
        "$vc" voxelize "$bin" "$out/$scan.vxt" --voxel-size 0.05,0.05,0.1 \
            --range -40,-40,-3,40,40,5
        "$vc" conv "$out/$scan.vxt" "$out/$scan.c1.vxt" --type subm --kernel 3 \
            --out-channels 16 --random-weights 1 --activation relu
        "$vc" conv "$out/$scan.c1.vxt" "$out/$scan.c2.vxt" --type subm --kernel 3 \
            --out-channels 16 --random-weights 2 --activation relu
        "$vc" conv "$out/$scan.c2.vxt" "$out/$scan.c3.vxt" --type strided --kernel 3 \
            --stride 2 --padding 1 --out-channels 32 --random-weights 3 --activation relu
        "$vc" conv "$out/$scan.c3.vxt" "$out/$scan.c4.vxt" --type subm --kernel 3 \
            --out-channels 32 --random-weights 4 --activation relu
        "$vc" pool "$out/$scan.c4.vxt" "$out/$scan.pool.npy" --mode max --global
        say "$scan: result of 4 convolutions"
        "$vc" info "$out/$scan.c4.vxt"
    done
    say "demo done; outputs in $out"
}

run_tests() {
    local require=${VC_REQUIRE_DATA:-0}
    if ! fetch; then
        [ "$require" = 1 ] && { echo "run.sh: the real scans could not be fetched" >&2; exit 1; }
        say "real scans unavailable: the cli suite will skip the real-scan cases"
    fi
    say "running the tests"
    local log="$BUILD_DIR/ctest.log" rc=0
    VC_REQUIRE_DATA=$require ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" 2>&1 |
        tee "$log" || rc=$?
    skip_reasons "$log"
    python_tests || rc=$?
    return "$rc"
}

python_tests() {
    # The Python package (docs/python.md) as a user gets it: `pip install ./python` (CPU only)
    # into a venv, numpy from PyPI, torch where it installs within VOXCONV_TORCH_TIMEOUT seconds
    # (else the torch tests skip and say so), then its pytest suite on the installed package.
    if [ "${VOXCONV_PYTHON_TESTS:-1}" != 1 ]; then
        say "python suite off (VOXCONV_PYTHON_TESTS=0)"
        return 0
    fi
    local venv=${VOXCONV_PYVENV:-$BUILD_DIR/pyvenv} t0=$SECONDS
    local py="$venv/bin/python"
    say "python: pip install ./python (CPU only) into $venv"
    # (called from `python_tests || rc=$?`, where errexit is off: every step checks itself)
    [ -x "$py" ] || python3 -m venv "$venv" || return 1
    py=$(cd "$venv" && pwd)/bin/python # absolute: the suite runs from python/tests
    local pip=("$py" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" numpy pytest || return 1
    VOXCONV_CUDA=OFF "${pip[@]}" --no-deps --force-reinstall ./python || return 1
    if ! "$py" -c 'import torch' 2>/dev/null; then
        local limit=${VOXCONV_TORCH_TIMEOUT:-240}
        say "python: installing torch (at most ${limit}s)"
        timeout "$limit" "${pip[@]}" torch ||
            say "python: torch did not install within ${limit}s: the torch tests will skip"
    fi
    say "python: running the suite ($((SECONDS - t0))s so far)"
    (cd python/tests && env -u VOXCONV_LIBRARY "$py" -m pytest -q -rs -p no:cacheprovider)
}

skip_reasons() {
    # ctest says only "(Skipped)"; each skipped test printed why (its "SKIP: ..." or "...
    # skipped" line) before it returned 77: print that line from ctest's full log.
    local names t why full="$BUILD_DIR/Testing/Temporary/LastTest.log"
    names=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$1")
    [ -n "$names" ] && [ -f "$full" ] || return 0
    say "skipped tests, and why"
    for t in $names; do
        why=$(awk -v t="$t" '
            /^[0-9]+\/[0-9]+ Test: / { f = (substr($0, index($0, ": ") + 2) == t); o = 0; next }
            f && /^<end of output>$/ { exit }
            f && o { print }
            f && /^----------+$/ { o = 1 }' "$full" | grep -i -m 1 skip) || true
        why=${why#"$t: "}
        printf '  %s: %s\n' "$t" "${why:-(it printed no reason)}"
    done
}

sanitize() {
    local b=${BUILD_DIR}-asan cc=${CC:-}
    [ -n "$cc" ] || { command -v clang >/dev/null && cc=clang || cc=cc; }
    local f="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    say "building the CPU suite with ASan + UBSan in $b"
    CC=$cc cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVOXCONV_CUDA=OFF \
        -DVOXCONV_BUILD_FUZZ=OFF -DVOXCONV_OPENMP=OFF -DCMAKE_C_FLAGS="$f" \
        -DCMAKE_EXE_LINKER_FLAGS="$f" -DCMAKE_SHARED_LINKER_FLAGS="$f" >"$b.configure.log" 2>&1 ||
        { cat "$b.configure.log"; exit 1; }
    cmake --build "$b" -j "$JOBS"
    ctest --test-dir "$b" -L unit -E install_consumer --output-on-failure -j "$JOBS"
}

tsan() {
    local b=${BUILD_DIR}-tsan cc=${CC:-}
    [ -n "$cc" ] || { command -v clang >/dev/null && cc=clang || cc=cc; }
    local f="-fsanitize=thread -fno-omit-frame-pointer -g"
    say "building the thread tests with ThreadSanitizer in $b"
    CC=$cc cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVOXCONV_CUDA=OFF \
        -DVOXCONV_BUILD_FUZZ=OFF -DVOXCONV_BUILD_CLI=OFF -DVOXCONV_OPENMP=OFF \
        -DCMAKE_C_FLAGS="$f" -DCMAKE_EXE_LINKER_FLAGS="$f" >"$b.configure.log" 2>&1 ||
        { cat "$b.configure.log"; exit 1; }
    cmake --build "$b" -j "$JOBS" --target test_threads test_api
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --test-dir "$b" -R '^(test_threads|test_api)$' --output-on-failure
}

case "${1:-}" in
demo) deps; build; demo ;;
test) deps; build; run_tests ;;
build) deps; build ;;
sanitize) deps; sanitize ;;
tsan) deps; tsan ;;
python) deps; fetch || true; python_tests ;;
*) echo "usage: ./run.sh demo|test|build|sanitize|tsan|python" >&2; exit 2 ;;
esac
