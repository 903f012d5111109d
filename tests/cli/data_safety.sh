#!/usr/bin/env bash
# data_safety.sh - a failed write never costs the user a file (issue 27).
#
# usage: data_safety.sh VOXCONV_BINARY TESTS_CLI_DIR WORK_DIR
#
# Every writing command (voxelize, conv, conv --save-weights, pool, pool --global, export, and
# conv with the same file in and out) is made to fail part-way with files already at its
# output paths:
#   fsize    a file-size limit (ulimit -f; the CLI itself must ignore SIGXFSZ: the shell here
#            does not), between the sizes of a command's outputs where it has two, so that the
#            first one completes and the second fails (all or none);
#   readonly a read-only directory: chmod 555 when not root; as root a read-only tmpfs mount,
#            else the command run as nobody (setpriv) in a 555 directory, else SKIP (printed);
#   devfull  the (last) output path a symlink to /dev/full;
#   full     a full tmpfs (as root where mounting works; SKIP otherwise).
# Each case asserts: a non-zero exit that is not a signal, exactly one line on stderr starting
# "voxconv ", every old file byte-identical to a saved copy, every symlink still pointing
# where it did, and no temporary (".NAME.XXXXXX") left in the directory. Then SIGTERM and
# SIGINT sent while a temporary exists: no temporary left, the target old or complete.
# Prints PASS/FAIL/SKIP per case and "N passed, N failed, N skipped" at the end.
# DATA_SAFETY_RO=chmod|mount|nobody|none forces the read-only-directory method.
set -u

if [[ $# -ne 3 ]]; then
  echo "usage: $0 VOXCONV TESTS_CLI_DIR WORK_DIR" >&2
  exit 2
fi
VOX="$1"
[[ "$VOX" == /* ]] || VOX="$PWD/$VOX"
DATA="$(cd "$2" && pwd)/data"
WORK="$3"
mkdir -p "$WORK" && WORK="$(cd "$WORK" && pwd)"

npass=0 nfail=0 nskip=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1${2:+: $2}"; nfail=$((nfail + 1)); }
skip() { echo "SKIP: $1${2:+: $2}"; nskip=$((nskip + 1)); }

MOUNTS=()
cleanup() {
  local m
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  chmod -R u+w "$WORK" 2>/dev/null
}
trap cleanup EXIT
for m in "$WORK"/*/; do umount "$m" 2>/dev/null; done # a previous run killed mid-way
chmod -R u+w "$WORK" 2>/dev/null
rm -rf "${WORK:?}"/*

CPU=(--backend cpu)
S="$WORK/src"
mkdir -p "$S"
set -e
"$VOX" voxelize "$DATA/small.bin" "$S/s.vxt" --voxel-size 0.25,0.25,0.1 --range 0,0,0,4,4,2 \
  "${CPU[@]}" >/dev/null
"$VOX" conv "$S/s.vxt" "$S/s16.vxt" --type subm --kernel 3 --out-channels 16 \
  --random-weights 1 "${CPU[@]}" >/dev/null
set +e

# The commands: name, the output paths (relative to the case directory D) and the argv (with
# @D@ for D). Inputs are read from $S, or, for "same", from the output itself.
CMDS=(voxelize conv conv_weights pool pool_global export same)
outs_of() {
  case $1 in
    voxelize|conv|pool|same) echo out.vxt ;;
    conv_weights) echo out.vxt w.npy ;;
    pool_global) echo g.npy ;;
    export) echo e.coords.npy e.feats.npy ;;
  esac
}
argv_of() {
  local D=$1
  case $2 in
    voxelize) echo voxelize "$DATA/small.bin" "$D/out.vxt" --voxel-size 0.25,0.25,0.1 \
      --range 0,0,0,4,4,2 ;;
    conv) echo conv "$S/s.vxt" "$D/out.vxt" --type subm --kernel 3 --out-channels 8 \
      --random-weights 2 ;;
    conv_weights) echo conv "$S/s16.vxt" "$D/out.vxt" --type subm --kernel 5 --out-channels 16 \
      --random-weights 3 --save-weights "$D/w.npy" ;;
    pool) echo pool "$S/s16.vxt" "$D/out.vxt" --type subm --kernel 3 --mode max ;;
    pool_global) echo pool "$S/s16.vxt" "$D/g.npy" --global --mode avg ;;
    export) echo export "$S/s16.vxt" "$D/e" ;;
    same) echo conv "$D/out.vxt" "$D/out.vxt" --type subm --kernel 3 --out-channels 8 \
      --random-weights 4 ;;
  esac
}

# Sizes in bytes of each output of a command when it succeeds (measured once, here).
declare -A SIZE
M="$WORK/measure"
mkdir -p "$M"
for c in "${CMDS[@]}"; do
  [[ $c == same ]] && cp "$S/s16.vxt" "$M/out.vxt"
  # shellcheck disable=SC2046
  "$VOX" $(argv_of "$M" "$c") "${CPU[@]}" >/dev/null || fail "measure $c" "the command fails"
  for o in $(outs_of "$c"); do SIZE[$c.$o]=$(stat -c %s "$M/$o"); rm -f "$M/$o"; done
done

# The file-size limit of a command, in 1024-byte blocks (bash's ulimit -f unit): below its
# only output, or between its two outputs (the first completes, the second fails).
limit_of() {
  local c=$1 o a=() lim
  for o in $(outs_of "$c"); do a+=("${SIZE[$c.$o]}"); done
  if [[ ${#a[@]} == 1 ]]; then lim=$((a[0] / 2048))
  else
    (( a[0] < a[1] )) || { echo -1; return; }
    lim=$(((a[0] + a[1]) / 2048))
    (( lim * 1024 > a[0] && lim * 1024 < a[1] )) || { echo -1; return; }
  fi
  echo "$lim"
}

# Fills directory D with the old files of command c: old contents everywhere; with "devfull"
# the last output is a symlink to /dev/full; "same" gets its real input as the old file.
prepare() {
  local D=$1 c=$2 mode=$3 o last
  mkdir -p "$D"
  for o in $(outs_of "$c"); do last=$o; done
  for o in $(outs_of "$c"); do
    if [[ $mode == devfull && $o == "$last" ]]; then ln -s /dev/full "$D/$o"
    elif [[ $c == same ]]; then cp "$S/s16.vxt" "$D/$o"
    else printf 'old contents of %s, which must survive\n' "$o" >"$D/$o"
    fi
  done
  mkdir -p "$D.saved"
  for o in $(outs_of "$c"); do cp -P "$D/$o" "$D.saved/$o"; done
}

# check NAME D c RC ERRFILE: the assertions of a failed case.
check() {
  local name=$1 D=$2 c=$3 rc=$4 err=$5 o why=""
  if (( rc == 0 )); then why="exit 0"
  elif (( rc > 128 )); then why="killed by signal $((rc - 128))"
  elif [[ $(wc -l <"$err") != 1 || $(head -c 8 "$err") != "voxconv " ]]; then
    why="stderr is not one 'voxconv ' line: $(head -c 300 "$err")"
  fi
  for o in $(outs_of "$c"); do
    [[ -n $why ]] && break
    if [[ -L "$D.saved/$o" ]]; then
      [[ -L "$D/$o" && $(readlink "$D/$o") == "$(readlink "$D.saved/$o")" ]] ||
        why="the symlink $o was changed"
    elif [[ -L "$D/$o" ]] || ! cmp -s "$D/$o" "$D.saved/$o"; then
      why="$o was changed"
    fi
  done
  local t
  for t in "$D"/.*; do
    [[ -z $why && -e $t && ${t##*/} != . && ${t##*/} != .. ]] && why="temporary ${t##*/} left"
  done
  if [[ -n $why ]]; then fail "$name" "$why"; else pass "$name ($(head -c 160 "$err"))"; fi
}

# run_case MODE c D PREFIX... : runs command c on directory D (PREFIX: ulimit or setpriv).
run_case() {
  local mode=$1 c=$2 D=$3 rc
  shift 3
  # stderr through a pipe (not subject to the file-size limit), stdout to /dev/null
  # shellcheck disable=SC2046
  ( "$@" "$VOX" $(argv_of "$D" "$c") "${CPU[@]}" 2>&1 >/dev/null; echo "rc=$?" ) 2>&1 |
    cat >"$D.err.raw"
  rc=$(sed -n 's/^rc=//p' "$D.err.raw" | tail -1)
  grep -v '^rc=' "$D.err.raw" >"$D.err"
  check "$c $mode" "$D" "$c" "${rc:-255}" "$D.err"
}

echo "== fsize: ulimit -f (SIGXFSZ left at its default by this shell)"
for c in "${CMDS[@]}"; do
  lim=$(limit_of "$c")
  if (( lim < 0 )); then fail "$c fsize" "no limit separates its outputs"; continue; fi
  D="$WORK/fsize_$c"
  prepare "$D" "$c" fsize
  run_case fsize "$c" "$D" bash -c 'ulimit -f "$0" && exec "$@"' "$lim"
done

echo "== devfull: the (last) output a symlink to /dev/full"
if [[ -c /dev/full ]]; then
  for c in "${CMDS[@]}"; do
    [[ $c == same ]] && continue # its output is its input
    D="$WORK/devfull_$c"
    prepare "$D" "$c" devfull
    run_case devfull "$c" "$D" env
  done
else
  skip "devfull" "no /dev/full on this system"
fi

# Read-only directory: pick what works here.
RO_HOW="" RO_PREFIX=(env)
RO="$WORK/ro_probe"
mkdir -p "$RO"
if [[ -n ${DATA_SAFETY_RO:-} ]]; then # chmod | mount | nobody | none: force one (to test it)
  RO_HOW=${DATA_SAFETY_RO/none/}
  [[ $RO_HOW == nobody ]] && RO_PREFIX=(setpriv --reuid=65534 --regid=65534 --clear-groups)
elif [[ $(id -u) != 0 ]]; then
  RO_HOW=chmod
elif mount -t tmpfs -o size=4m tmpfs "$RO" 2>/dev/null; then
  umount "$RO"
  RO_HOW=mount
elif command -v setpriv >/dev/null &&
     setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$VOX" -a -r "$S/s16.vxt"; then
  RO_HOW=nobody
  RO_PREFIX=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
echo "== readonly: a read-only directory (${RO_HOW:-not possible here})"
for c in "${CMDS[@]}"; do
  D="$WORK/ro_$c"
  case $RO_HOW in
    "") skip "$c readonly" "running as root without mount or setpriv: root writes into 0555 directories" ;;
    chmod|nobody)
      prepare "$D" "$c" readonly
      # the old files writable by whoever runs the command: only the directory refuses
      chmod -R a+r "$S" && chmod a+rw "$D"/* && chmod 555 "$D"
      run_case readonly "$c" "$D" "${RO_PREFIX[@]}"
      chmod 755 "$D" ;;
    mount)
      mkdir -p "$D" && mount -t tmpfs -o size=4m tmpfs "$D" && MOUNTS+=("$D")
      prepare "$D" "$c" readonly
      mount -o remount,ro "$D"
      run_case readonly "$c" "$D" env
      umount "$D" ;;
  esac
done

echo "== full: a full filesystem"
if [[ $RO_HOW == mount ]]; then
  for c in "${CMDS[@]}"; do
    D="$WORK/full_$c"
    mkdir -p "$D" && mount -t tmpfs -o size=64k tmpfs "$D" && MOUNTS+=("$D")
    prepare "$D" "$c" full
    dd if=/dev/zero of="$D/filler" bs=4k 2>/dev/null # fill what is left
    run_case full "$c" "$D" env
    umount "$D"
  done
else
  skip "full" "needs root and tmpfs mounts"
fi

# Signals: SIGTERM / SIGINT while a temporary exists. The export of a large tensor spends its
# time writing; the signal goes as soon as a temporary appears.
echo "== signals"
BIG="$WORK/big.vxt"
"$VOX" conv "$S/s16.vxt" "$BIG.a.vxt" --type subm --kernel 1 --out-channels 512 \
  --random-weights 5 "${CPU[@]}" >/dev/null &&
"$VOX" conv "$BIG.a.vxt" "$BIG" --type subm --kernel 1 --out-channels 4096 \
  --random-weights 6 "${CPU[@]}" >/dev/null &&
"$VOX" export "$BIG" "$M/big" "${CPU[@]}" >/dev/null || fail "signals" "cannot make the input"
BIGSIZE=$(stat -c %s "$M/big.coords.npy")/$(stat -c %s "$M/big.feats.npy")
for sig in TERM INT; do
  D="$WORK/sig_$sig"
  hit=0
  for try in 1 2 3 4 5 6 7 8; do
    rm -rf "$D" "$D.saved"
    prepare "$D" export signal
    set -m # job control: a background job keeps SIGINT (else bash starts it ignored)
    "$VOX" export "$BIG" "$D/e" "${CPU[@]}" >/dev/null 2>"$D.err" &
    pid=$!
    set +m
    seen=0
    while kill -0 "$pid" 2>/dev/null; do
      for t in "$D"/.e.*; do [[ -e $t ]] && seen=1; done
      if (( seen )); then kill -s "$sig" "$pid"; break; fi
    done
    wait "$pid"
    rc=$?
    left=""
    for t in "$D"/.*; do [[ -e $t && ${t##*/} != . && ${t##*/} != .. ]] && left+=" ${t##*/}"; done
    if [[ -n $left ]]; then fail "SIG$sig" "temporaries left:$left"; hit=-1; break; fi
    if ! { cmp -s "$D/e.coords.npy" "$D.saved/e.coords.npy" &&
           cmp -s "$D/e.feats.npy" "$D.saved/e.feats.npy"; } &&
       [[ $(stat -c %s "$D/e.coords.npy")/$(stat -c %s "$D/e.feats.npy") != "$BIGSIZE" ]]; then
      fail "SIG$sig" "the outputs are neither both old nor both new"; hit=-1; break
    fi
    if (( seen && rc == 128 + $(kill -l "$sig") )); then hit=$try; break; fi
  done
  if (( hit > 0 )); then pass "SIG$sig while a temporary existed (try $hit): none left"
  elif (( hit == 0 )); then skip "SIG$sig" "8 tries never caught a temporary"; fi
done

echo "$npass passed, $nfail failed, $nskip skipped"
(( nfail == 0 ))
