"""dwdeconv-rewrite --runtime RUNTIME end to end, with this interpreter as the runtime's Python.

Usage: check_runtime.py ort|litert|executorch DWDECONV_REWRITE. On a model of two depthwise ConvTranspose x2
upsamplers it checks that an honest rewrite verifies and is timed on the runtime (report: runtime, versions, spread,
pairs; for ORT the per-upsampler table), that a rewrite with one planted weight error fails with exit 1, that
--min-speedup gates with exit 1 and writes nothing, that an interpreter without the packages is exit 2 naming them,
and (ONNX Runtime: an op it does not know; ExecuTorch: a DCR DepthToSpace, which onnx2torch refuses) that a model
the runtime cannot take is exit 3 with the converter's stage and message, not a verification failure.
Exits 77 (ctest's skip), saying so, when this interpreter lacks the runtime's packages.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

PACKAGES = {"ort": ["numpy", "onnx", "onnxruntime"],
            "litert": ["numpy", "onnx", "onnx2tf", "tensorflow", "ai_edge_litert"],
            "executorch": ["numpy", "onnx", "torch", "onnx2torch", "executorch"]}
VERSION_OF = {"ort": "onnxruntime", "litert": "ai-edge-litert", "executorch": "executorch"}
LABEL = {"ort": r"ONNX Runtime [0-9.]+ \(CPU provider\)", "litert": r"LiteRT [0-9.]+ \(XNNPACK delegate\)",
         "executorch": r"ExecuTorch [0-9.]+\S* \(XNNPACK delegate\)"}
# The target whose output the runtime converts: onnx2torch takes only CRD DepthToSpace.
TARGET = {"ort": "xnnpack", "litert": "xnnpack", "executorch": "executorch"}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}", flush=True)


def main():
    runtime, tool = sys.argv[1], sys.argv[2]
    missing = [p for p in PACKAGES[runtime] if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)}; set DWDECONV_{runtime.upper()}_PYTHON or "
              f"DWDECONV_PYTHON to an interpreter with them (docs/runtime-checks.md)")
        return 77
    import numpy as np
    import onnx
    from importlib.metadata import version
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    c = 16
    nodes = [helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["u1"], name="up1", group=c, kernel_shape=[4, 4],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["u1", "m"], ["v"], name="mix", kernel_shape=[1, 1]),
             helper.make_node("ConvTranspose", ["v", "w2"], ["y"], name="up2", group=c, kernel_shape=[4, 4],
                              strides=[2, 2], pads=[1, 1, 1, 1])]
    inits = {"w1": rng.uniform(-0.5, 0.5, (c, 1, 4, 4)), "b1": rng.uniform(-0.1, 0.1, c),
             "m": rng.uniform(-0.3, 0.3, (c, c, 1, 1)), "w2": rng.uniform(-0.5, 0.5, (c, 1, 4, 4))}
    graph = helper.make_graph(nodes, "two_up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 64, 64])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    with tempfile.TemporaryDirectory() as d:
        src, out, report = os.path.join(d, "model.onnx"), os.path.join(d, "out.onnx"), os.path.join(d, "r.json")
        onnx.save(model, src)
        # TMPDIR: the scratch folders the tool keeps after a converter failure land here and go with it.
        env = dict(os.environ, DWDECONV_PYTHON=sys.executable, TMPDIR=d)

        def tool_run(*args, environ=env):
            r = subprocess.run([tool] + [str(a) for a in args], capture_output=True, text=True, env=environ)
            print(f"$ dwdeconv-rewrite {' '.join(map(str, args))}\n  exit {r.returncode}\n  " +
                  r.stderr.strip().replace("\n", "\n  "), flush=True)
            return r

        # 1. An honest rewrite, the interpreter from DWDECONV_PYTHON: verified and timed on the runtime.
        r = tool_run(src, "-o", out, "--target", TARGET[runtime], "--runtime", runtime, "--verify", "--bench", "--runs", 3,
                     "--report", report)
        check(r.returncode == 0, "an honest rewrite passes (exit 0)")
        check(os.path.exists(out), "the output is written")
        check(re.search(r"verified on " + LABEL[runtime] + r": max abs error", r.stderr), "the summary says where it verified")
        check(re.search(r"x (faster|\(slower\)|\(as fast\)) on " + LABEL[runtime], r.stderr), "the summary names the runtime timed")
        rep = json.load(open(report))
        check(rep["runtime"]["name"] == runtime, "report: runtime name")
        check(rep["runtime"]["python"] == sys.executable, "report: the interpreter from DWDECONV_PYTHON")
        check(rep["runtime"]["versions"].get(VERSION_OF[runtime]) == version(VERSION_OF[runtime]), "report: the version")
        check(rep["verify"]["passed"] and rep["verify"]["outputs"][0]["name"] == "y"
              and rep["verify"]["outputs"][0]["max_abs_error"] < 1e-4, "report: y verified")
        bench = rep["bench"]
        check(bench["pairs"] == 3, "report: 3 pairs")
        for side in ("original", "rewritten"):
            check(0 < bench[f"{side}_min_ms"] <= bench[f"{side}_ms"] <= bench[f"{side}_max_ms"], f"report: {side} spread")
        check(abs(bench["speedup"] - bench["original_ms"] / bench["rewritten_ms"]) < 1e-3 * bench["speedup"],
              "report: speedup is the ratio of the medians")
        rows = {u["name"]: u for u in rep["upsamplers"]}
        if runtime == "ort":
            check(sorted(rows) == ["up1", "up2"], "ORT's profile gives one row per upsampler")
            check(rows.get("up1", {}).get("input_shape") == "1x16x16x16"
                  and rows.get("up2", {}).get("input_shape") == "1x16x32x32", "the rows' input shapes")
            check(all(u["original_ms"] > 0 and u["rewritten_ms"] > 0 for u in rows.values()), "each row is timed both ways")
            check("per upsampler on ONNX Runtime" in r.stderr, "the table is logged")

        # 2. One planted weight error in a phase Conv: exit 1, the output named.
        bad = onnx.load(out)
        conv = next(n for n in bad.graph.node if n.op_type == "Conv" and n.name != "mix")
        weight = next(t for t in bad.graph.initializer if t.name == conv.input[1])
        w = numpy_helper.to_array(weight).copy()
        w.flat[0] += 0.5
        weight.CopyFrom(numpy_helper.from_array(w, weight.name))
        onnx.save(bad, os.path.join(d, "bad.onnx"))
        r = tool_run(src, "--compare", os.path.join(d, "bad.onnx"), "--runtime", runtime, "--python", sys.executable,
                     "--report", report)
        check(r.returncode == 1, "a planted one-weight error fails (exit 1)")
        check("verification FAILED" in r.stderr, "the log says verification failed")
        check(json.load(open(report))["verify"]["passed"] is False, "report: not passed")
        r = tool_run(src, "--compare", out, "--runtime", runtime, "--python", sys.executable)
        check(r.returncode == 0, "the honest rewrite passes --compare")

        # 3. --min-speedup above any figure: exit 1, nothing written, the figure in the message and the report.
        out2 = os.path.join(d, "out2.onnx")
        r = tool_run(src, "-o", out2, "--target", TARGET[runtime], "--runtime", runtime, "--bench", "--runs", 2,
                     "--min-speedup", 1000, "--report", report)
        check(r.returncode == 1 and not os.path.exists(out2), "--min-speedup 1000 fails and writes nothing")
        check(re.search(r"--min-speedup 1000: the rewritten model ran [0-9.]+x as fast as the original on " + LABEL[runtime],
                        r.stderr), "the gate's message")
        rep = json.load(open(report))
        check(rep["min_speedup"] == 1000 and 0 < rep["bench"]["speedup"] < 1000, "report: the gate and the figure")

        # 4. An interpreter without the packages (no site-packages): exit 2, naming them and pip, nothing written.
        bare = os.path.join(d, "bare-python")
        with open(bare, "w") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' -S \"$@\"\n")
        os.chmod(bare, 0o755)
        os.remove(report)
        r = tool_run(src, "-o", out2, "--runtime", runtime, "--verify", "--python", bare, "--report", report)
        check(r.returncode == 2 and "lacks" in r.stderr and "-m pip install" in r.stderr, "missing packages: exit 2")
        check(not os.path.exists(out2) and not os.path.exists(report), "missing packages: nothing written, no report")

        # 5. ONNX Runtime refuses an op it does not know: a conversion failure (exit 3), not a mismatch.
        if runtime == "ort":
            custom = onnx.load(out)
            custom.graph.node.append(helper.make_node("Foo", ["y"], ["z"], domain="com.example", name="foo"))
            custom.graph.output[0].name = "z"
            custom.opset_import.append(helper.make_opsetid("com.example", 1))
            onnx.save(custom, os.path.join(d, "custom.onnx"))
            r = tool_run(src, "--compare", os.path.join(d, "custom.onnx"), "--runtime", runtime)
            check(r.returncode == 3, "ORT refusing a model is exit 3")
            check(f"cannot verify {os.path.join(d, 'custom.onnx')}: cannot convert the rewritten model for ONNX Runtime"
                  in r.stderr and "onnxruntime.InferenceSession" in r.stderr and "com.example:Foo" in r.stderr,
                  "the stage and ORT's message")
            check("verification failed" not in r.stderr, "not a verification failure")
            kept = re.search(r"the converted files and logs are kept in (\S+)\)", r.stderr)
            check(kept and os.path.isdir(kept.group(1)), "the converter's files are kept, and the message says where")

        # 6. ONNX Runtime: --tune times each upsampler alone there and rewrites only those measured faster.
        if runtime == "ort":
            r = tool_run(src, "--dry-run", "--target", TARGET[runtime], "--runtime", runtime, "--tune", "--runs", 5,
                         "--report", report)
            check(r.returncode == 0, "--tune --dry-run passes")
            tune = {t["name"]: t for t in json.load(open(report))["tune"]}
            check(sorted(tune) == ["up1", "up2"], "one figure per candidate")
            for name, t in tune.items():
                check(t["original_ms"] > 0 and t["rewritten_ms"] > 0, f"{name} is timed both ways")
                check((t["decision"] == "rewritten") == (t["speedup"] >= 1), f"{name}'s decision follows its figure")
                check(re.search(rf'^(rewrite|keep   ) "{name}"', r.stdout, re.M).group(1).strip()
                      == ("rewrite" if t["decision"] == "rewritten" else "keep"), f"the plan says {name}'s decision")
                check(re.search(rf'tune: "{name}" \(1x16x(16x16|32x32)\) .* alone on ' + LABEL[runtime], r.stdout),
                      f"the plan shows {name}'s figure")

        # 7. ExecuTorch: onnx2torch refuses a DCR DepthToSpace; that is a conversion failure (exit 3), not a mismatch.
        if runtime == "executorch":
            r = tool_run(src, "-o", out2, "--target", "xnnpack", "--runtime", runtime, "--verify")
            check(r.returncode == 3, "a conversion failure is exit 3")
            check("cannot convert the rewritten model for ExecuTorch" in r.stderr and "onnx2torch" in r.stderr,
                  "the converter's stage and message")
            check("verification failed" not in r.stderr and not os.path.exists(out2), "not a verification failure")
            check("the converted files and logs are kept in " + d in r.stderr, "the converter's files are kept")
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print(f"all --runtime {runtime} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
