#!/usr/bin/env bash
# Rewrites MODEL into OUT, verifies the rewrite on XNNPACK, writes a JSON report, then gates OUT with --check.
# Any failure stops the script with a message naming the step, and a non-zero exit code (the tool's own:
# 1 verification or check failed, 2 usage error, 3 invalid model or I/O error, 4 could not verify; 127 tool not
# found).
#
# usage: examples/pipeline.sh MODEL.onnx OUT.onnx [--target NAME] [--input-shape NAME=DIMS]... [--report FILE.json]
#   --target       the runtime you ship to (litert, executorch, ort, openvino, mnn, ncnn, xnnpack; docs/targets.md),
#                  for the rewrite and the check; without it the tool's default, which rewrites only what pays on
#                  every runtime and so leaves most upsamplers as they are
#   --input-shape  passed to --verify, for graph inputs with symbolic dims (e.g. image=1x4x256x256)
#   --report       where the JSON report goes (default: OUT with .onnx replaced by .report.json)
# The tool is $DWDECONV_REWRITE if set, else dwdeconv-rewrite on PATH. Like the tool, everything it prints goes to
# stderr; the only stdout is a GitHub Actions ::error:: annotation on failure when run there.
set -euo pipefail

me=$(basename "$0")
usage() { echo "usage: $me MODEL.onnx OUT.onnx [--target NAME] [--input-shape NAME=DIMS]... [--report FILE.json]" >&2; exit 2; }

# Prints the failure, as a GitHub Actions error annotation too when running there, and exits with `code`.
fail() {
  local code=$1 message=$2
  echo "$me: FAILED: $message" >&2
  if [ "${GITHUB_ACTIONS:-}" = "true" ]; then echo "::error title=dwdeconv-rewrite pipeline::$message"; fi
  exit "$code"
}

[ $# -ge 2 ] || usage
model=$1 out=$2
shift 2
report=${out%.onnx}.report.json
shape_args=()
target_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) [ $# -ge 2 ] || usage; target_args=(--target "$2"); shift 2 ;;
    --target=*) target_args=(--target "${1#*=}"); shift ;;
    --input-shape) [ $# -ge 2 ] || usage; shape_args+=(--input-shape "$2"); shift 2 ;;
    --input-shape=*) shape_args+=(--input-shape "${1#*=}"); shift ;;
    --report) [ $# -ge 2 ] || usage; report=$2; shift 2 ;;
    --report=*) report=${1#*=}; shift ;;
    *) echo "$me: unknown option '$1'" >&2; usage ;;
  esac
done

tool=${DWDECONV_REWRITE:-$(command -v dwdeconv-rewrite || true)}
[ -n "$tool" ] || fail 127 "dwdeconv-rewrite not found: put it on PATH or set DWDECONV_REWRITE=/path/to/dwdeconv-rewrite"
[ -x "$tool" ] || fail 127 "DWDECONV_REWRITE=$tool is not an executable file"
[ -f "$model" ] || fail 3 "step 1 (rewrite and verify): model '$model' does not exist"
echo "$me: using $("$tool" --version)" >&2
mkdir -p "$(dirname "$out")" "$(dirname "$report")"

# What an exit code of the tool means, for the failure message.
explain() {
  case $1 in
    1) echo "verification failed: the rewritten model computes something else (see the log above)" ;;
    2) echo "usage error" ;;
    3) echo "invalid model, output failed ONNX validation, or an I/O error; nothing was written" ;;
    4) echo "could not verify (see the log above; a model with symbolic input dims needs --input-shape NAME=DIMS); nothing was written" ;;
    *) echo "unexpected exit code" ;;
  esac
}

# Step 1. Rewrite, run the original and the rewritten model through XNNPACK on the same inputs, compare every
# output, and write the report. Nothing is written to OUT unless all of that passes.
echo "$me: [1/3] rewrite and verify: $model -> $out" >&2
rc=0
"$tool" "$model" -o "$out" --verify --report "$report" ${shape_args[@]+"${shape_args[@]}"} ${target_args[@]+"${target_args[@]}"} || rc=$?
[ "$rc" -eq 0 ] || fail "$rc" "step 1 (rewrite and verify) of $model, exit $rc: $(explain "$rc")"

# Step 2. The report is the artifact CI keeps; make sure it is there and says the verification passed.
echo "$me: [2/3] report: $report" >&2
[ -s "$report" ] || fail 3 "step 2 (report): $report was not written"
grep -q '"passed": true' "$report" || fail 1 "step 2 (report): $report does not record a passed verification"

# Step 3. Gate: the output must have no ConvTranspose left that the tool would rewrite.
echo "$me: [3/3] check: $out" >&2
rc=0
"$tool" "$out" --check ${target_args[@]+"${target_args[@]}"} || rc=$?
if [ "$rc" -eq 1 ]; then
  fail 1 "step 3 (check) of $out, exit 1: a ConvTranspose that should have been rewritten is still there"
fi
[ "$rc" -eq 0 ] || fail "$rc" "step 3 (check) of $out, exit $rc: $(explain "$rc")"

echo "$me: OK: $out is rewritten, verified and checked; report in $report" >&2
