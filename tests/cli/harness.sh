# tests/cli/harness.sh - what the CLI test scripts share (sourced, not run): the arguments
# VOXCONV TESTS_CLI_DIR WORK_DIR PROJECT_SOURCE_DIR (into VOX, DIR, WORK, SRC; WORK emptied, the
# current folder DIR), PASS/FAIL/SKIP counting and the checks run, rc_of, ok, error, same_file.
if [[ $# -ne 4 ]]; then
  echo "usage: $0 VOXCONV TESTS_CLI_DIR WORK_DIR PROJECT_SOURCE_DIR" >&2
  exit 2
fi
VOX="$1"
[[ "$VOX" == /* ]] || VOX="$PWD/$VOX"
if [[ ! -x "$VOX" ]]; then
  echo "FAIL: $VOX is not an executable"; echo "0 passed, 1 failed"; exit 1
fi
DIR="$(cd "$2" && pwd)"
WORK="$3"
SRC="$(cd "$4" && pwd)"
mkdir -p "$WORK" && WORK="$(cd "$WORK" && pwd)"
rm -rf "${WORK:?}"/*
cd "$DIR" || exit 2

npass=0
nfail=0
nskip=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1${2:+: $2}"; nfail=$((nfail + 1)); }
skip() { echo "SKIP: $1${2:+: $2}"; nskip=$((nskip + 1)); }

# run NAME CMD... : runs the command, leaves stdout/stderr/rc in $WORK/NAME.{out,err,rc}
run() {
  local name="$1"; shift
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  echo $? >"$WORK/$name.rc"
}
rc_of() { cat "$WORK/$1.rc"; }

# ok NAME CMD... : exit 0
ok() {
  local name="$1"; shift
  run "$name" "$@"
  local rc; rc="$(rc_of "$name")"
  if [[ "$rc" == 0 ]]; then pass "$name"; else
    fail "$name" "exit $rc: $(head -c 300 "$WORK/$name.err")"; fi
}

# error NAME PATTERN CMD... : non-zero exit, exactly one stderr line starting "voxconv",
# matching the extended regex PATTERN, and empty stdout.
error() {
  local name="$1" pattern="$2"; shift 2
  run "$name" "$@"
  local rc lines; rc="$(rc_of "$name")"
  lines="$(wc -l <"$WORK/$name.err")"
  if [[ "$rc" == 0 ]]; then fail "$name" "exit 0, expected a failure"; return; fi
  if [[ "$rc" -ge 126 ]]; then fail "$name" "exit $rc (crash?)"; return; fi
  if [[ "$lines" != 1 ]]; then
    fail "$name" "expected one stderr line, got $lines: $(head -c 300 "$WORK/$name.err")"
    return
  fi
  if ! grep -qE "^voxconv[ :]" "$WORK/$name.err"; then
    fail "$name" "stderr does not start with 'voxconv': $(cat "$WORK/$name.err")"; return
  fi
  if ! grep -qE -- "$pattern" "$WORK/$name.err"; then
    fail "$name" "stderr does not match /$pattern/: $(cat "$WORK/$name.err")"; return
  fi
  if [[ -s "$WORK/$name.out" ]]; then fail "$name" "unexpected stdout"; return; fi
  pass "$name"
}

# same_file NAME A B : byte-identical files
same_file() {
  if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 and $3 differ"; fi
}
