#!/usr/bin/env bash
# The speedup of the rewrite at each precision and thread count, on the runtime each target ships to, measured by the
# tool itself: `dwdeconv-rewrite MODEL -o OUT --target T --runtime T --precision P --threads N --verify --bench`,
# which converts both models (onnx2tf / onnx2torch + XNNPACK partitioner, quantising int8 on the same 8 seeded
# calibration samples), checks them (int8 in quantisation steps) and times them interleaved. Prints one Markdown row
# per run with the load average and the CPU model, for BENCHMARKS.md.
#
#   bench/runtimes/bench_precision.sh MODEL.onnx [RUNTIMES] [PRECISIONS] [THREADS]
#   e.g. bench/runtimes/bench_precision.sh /tmp/k4s2p1_C64_H64.onnx "litert executorch" "fp32 fp16 int8" "1 2"
# Interpreters: DWDECONV_LITERT_PYTHON and DWDECONV_EXECUTORCH_PYTHON (bench/runtimes/README.md's venvs).
set -euo pipefail
model=$1
runtimes=${2:-litert executorch}
precisions=${3:-fp32 fp16 int8}
threads=${4:-1 2}
tool=${DWDECONV_REWRITE:-$(dirname "$0")/../../build/cli/dwdeconv-rewrite}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "| model | runtime | precision | threads | original ms | rewritten ms | speedup | verify | load | CPU |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rt in $runtimes; do
  var=DWDECONV_${rt^^}_PYTHON
  python=${!var:-${DWDECONV_PYTHON:-python3}}
  for p in $precisions; do
    for n in $threads; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      report=$work/r.json
      if "$tool" "$model" -o "$work/out.onnx" --target "$rt" --runtime "$rt" --python "$python" --precision "$p" \
           --threads "$n" --verify --bench --report "$report" -q; then :; fi
      python3 - "$report" "$(basename "$model")" "$rt" "$p" "$n" "$load" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b, v = r.get("bench") or {}, r.get("verify") or {}
out = (v.get("outputs") or [{}])[0]
check = ("%.2f steps" % out["quant_steps"]) if out.get("quant_steps") is not None else (
    "%.2g abs" % out["max_abs_error"] if out.get("max_abs_error") is not None else "-")
check = ("pass, " if v.get("passed") else "FAIL, ") + check if v else "exit %s: %s" % (r.get("exit_code"), r.get("error"))
ms = lambda k: "%.3f [%.3f-%.3f]" % (b[k + "_ms"], b[k + "_min_ms"], b[k + "_max_ms"]) if k + "_ms" in b else "-"
speed = "%.2fx" % b["speedup"] if "speedup" in b else "-"
print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], ms("original"),
      ms("rewritten"), speed, check, sys.argv[6], sys.argv[7]))
PY
    done
  done
done
