#!/usr/bin/env bash
# The speedup of the rewrite at each precision and thread count, on the runtime each target ships to, measured by the
# tool itself: `dwdeconv-rewrite MODEL -o OUT --target T --runtime R --precision P --threads N --verify --bench`,
# which converts both models (onnx2tf / onnx2torch + XNNPACK partitioner, quantising int8 on the same 8 seeded
# calibration samples), checks them (int8 in quantisation steps) and times them interleaved. Prints one Markdown row
# per run with the load average and the CPU model, for BENCHMARKS.md.
#
#   bench/runtimes/bench_precision.sh MODEL.onnx [RUNTIMES] [PRECISIONS] [THREADS] [TARGET]
#   e.g. bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx "litert executorch" "fp32 fp16 int8" "1 2"
#        bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx "xnnpack ort" fp32 "1 2"
#        bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx ort fp32 "1 2" xnnpack   # what ort's target keeps
#        bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx openvino "fp32 bf16" "1 2"
#        bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx mnn "fp32 fp16" "1 2"
# TARGET defaults to each runtime's own target (--target R; openvino and mnn, which no target is meant for: xnnpack,
# whose DCR DepthToSpace both run). The executor (xnnpack) and ort run fp32 only, openvino fp32 and bf16, mnn fp32 and
# fp16.
# Interpreters: DWDECONV_LITERT_PYTHON, DWDECONV_EXECUTORCH_PYTHON, DWDECONV_ORT_PYTHON, DWDECONV_OPENVINO_PYTHON,
# DWDECONV_MNN_PYTHON, else DWDECONV_PYTHON
# (bench/runtimes/README.md's venvs).
set -euo pipefail
model=$1
runtimes=${2:-litert executorch}
precisions=${3:-fp32 fp16 int8}
threads=${4:-1 2}
target_override=${5:-}
tool=${DWDECONV_REWRITE:-$(dirname "$0")/../../build/cli/dwdeconv-rewrite}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "| model | target | runtime | precision | threads | original ms | rewritten ms | speedup | verify | load | CPU |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for rt in $runtimes; do
  own=$rt
  case $rt in openvino | mnn) own=xnnpack ;; esac
  target=${target_override:-$own}
  var=DWDECONV_${rt^^}_PYTHON
  python=()
  # The executor (xnnpack) runs in the binary: no interpreter.
  [ "$rt" = xnnpack ] || python=(--python "${!var:-${DWDECONV_PYTHON:-python3}}")
  for p in $precisions; do
    for n in $threads; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      report=$work/r.json
      rm -f "$report"
      if "$tool" "$model" -o "$work/out.onnx" --target "$target" --runtime "$rt" "${python[@]}" --precision "$p" \
           --threads "$n" --verify --bench --report "$report" -q; then :; fi
      python3 - "$report" "$(basename "$model")" "$target" "$rt" "$p" "$n" "$load" "$cpu" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {"error": "the tool wrote no report"}
b, v = r.get("bench") or {}, r.get("verify") or {}
out = (v.get("outputs") or [{}])[0]
check = ("%.2f steps" % out["quant_steps"]) if out.get("quant_steps") is not None else (
    "%.2g abs" % out["max_abs_error"] if out.get("max_abs_error") is not None else "-")
check = ("pass, " if v.get("passed") else "FAIL, ") + check if v else "exit %s: %s" % (r.get("exit_code"), r.get("error"))
if r.get("rewritten") == 0 and "speedup" not in b:
    check = "nothing rewritten: the target keeps all %s" % r.get("kept")
ms = lambda k: "%.3f [%.3f-%.3f]" % (b[k + "_ms"], b[k + "_min_ms"], b[k + "_max_ms"]) if k + "_ms" in b else "-"
speed = "%.2fx" % b["speedup"] if "speedup" in b else "-"
print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
      sys.argv[6], ms("original"), ms("rewritten"), speed, check, sys.argv[7], sys.argv[8]))
PY
    done
  done
done
