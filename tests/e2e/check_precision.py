"""`python -m dwdeconv_rewrite.runtimes check --precision fp32|fp16|int8` on LiteRT or ExecuTorch, fp32|fp16 on MNN
(no int8) and fp32|bf16 on OpenVINO: the runtime layer that dwdeconv-rewrite --precision runs.

Usage: check_precision.py litert|executorch|openvino|mnn DWDECONV_REWRITE. On one depthwise ConvTranspose (k4 s2 p1,
C=8, 16x16) rewritten by the binary for the runtime, it runs check directly (the command and arguments the binary runs,
with the package on PYTHONPATH) at each precision and checks: the `precision` lines; fp32 agreeing as before, with no
quant or note line; fp16 agreeing within atol 1e-3 + rtol 1e-2 * max|y|; int8 giving a `quant` line for the rewritten
side's output (on LiteRT for both sides; on ExecuTorch the original's depthwise ConvTranspose stays in float, which a
`note` line says), outputs on that int8 grid, and the two models within 2 steps of the larger scale; a rewrite of a
model whose bias was moved by 6 steps is more than 2 steps off; a second run at a precision reuses its conversions (no
converter ran), an int8 run with other calibration samples converts again; and the usage refusals (int8 without
--calibration, --calibration without int8, a calibration folder with a gap) are `error usage` lines and exit 2. Then
through the binary: --compare --precision fp16 and int8 pass, the report's runtime.precision and each int8 output's
quant_steps say how, and a rewrite whose bias moved by 6 steps fails with exit 1.
MNN converts to fp32 and fp16 only, both from one .mnn (MNN picks its arithmetic when it loads: precision "high" or
"low"): its fp16 run reuses the fp32 conversion, says so in a note, and may equal fp32 where the CPU has no fp16
arithmetic; int8 is a usage refusal, here and through the binary.
On OpenVINO (bf16_on_openvino): bf16 is the CPU plugin's bf16 inference hint, reported back; the models agree within
BFLOAT16's tolerance and the rewritten one differs from fp32; the original's depthwise Deconvolution, which the
plugin keeps in f32, is named in a note; fp16 and int8 are usage errors; a plugin that compiles another precision
than the one asked for, and a CPU without bf16, are conversion failures naming why; through the binary a bf16
--compare passes at bf16 and a bias moved by 0.2 fails, and --precision bf16 on ort is a usage error naming openvino.
Exits 77 (ctest's skip), saying so, when this interpreter lacks the runtime's packages.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import report_archive  # beside this script: the suite's report archive


def usage_line(line):
    """Whether an answer line of check.py is its `error` of stage `usage` (bridge.schema.json's usage_error)."""
    return line.get("kind") == "error" and line.get("stage") == "usage"


PACKAGES = {"litert": ["numpy", "onnx", "onnx2tf", "tensorflow", "ai_edge_litert"],
            "executorch": ["numpy", "onnx", "torch", "onnx2torch", "executorch", "torchao"],
            "openvino": ["numpy", "onnx", "openvino"],
            "mnn": ["numpy", "onnx", "MNN"]}
# The target whose form the runtime converts: onnx2torch takes only CRD DepthToSpace; OpenVINO reads DCR.
TARGET = {"litert": "litert", "executorch": "executorch", "openvino": "xnnpack", "mnn": "xnnpack"}
# What a converter child says for each model it converts (on check's stderr): none of it when all is cached.
# OpenVINO has no converter child and no cache: it compiles each model in the check process.
CONVERTING = {"litert": r"onnx2tf \S+\.onnx \((fp32|fp16|int8)\): ", "executorch": r"executorch: converting \S+\.onnx",
              "openvino": r"^\b$", "mnn": r"MNNConvert: converting '\S+\.onnx'"}
# The runtimes that convert to int8 (registry.json's precisions).
INT8 = {"litert", "executorch"}
C, H = 8, 16

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}", flush=True)
    else:
        print(f"ok: {what}", flush=True)


def main():
    runtime, tool = sys.argv[1], sys.argv[2]
    missing = [p for p in PACKAGES[runtime] if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIP: {sys.executable} lacks {', '.join(missing)}; set DWDECONV_{runtime.upper()}_PYTHON or "
              f"DWDECONV_PYTHON to an interpreter with them (docs/runtime-checks.md)")
        return 77
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(31)
    weight = rng.uniform(-0.5, 0.5, (C, 1, 4, 4)).astype(np.float32)
    bias = rng.uniform(-0.1, 0.1, C).astype(np.float32)

    def upsampler(b):
        node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", group=C, kernel_shape=[4, 4],
                                strides=[2, 2], pads=[1, 1, 1, 1])
        graph = helper.make_graph([node], "dw_up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 2 * H, 2 * H])],
                                  [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(b, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model

    module = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                                   "python")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [module, os.environ.get("PYTHONPATH")])))

    with tempfile.TemporaryDirectory() as d:
        def rewrite(model, name):
            src, out = os.path.join(d, f"{name}.src.onnx"), os.path.join(d, f"{name}.onnx")
            onnx.save(model, src)
            r = subprocess.run([tool, src, "-o", out, "--target", TARGET[runtime]], capture_output=True, text=True)
            ops = [n.op_type for n in onnx.load(out).graph.node] if r.returncode == 0 else []
            check(r.returncode == 0 and "ConvTranspose" not in ops and ops.count("Conv") == 4,
                  f"the binary rewrites {name} for --target {TARGET[runtime]} (exit {r.returncode}, ops {ops}) "
                  + r.stderr.strip()[-300:])
            return src, out

        original, rewritten = rewrite(upsampler(bias), "dw")

        def tensor_dir(folder, x):
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x").SerializeToString())
            with open(os.path.join(folder, "inputs.json"), "w") as f:
                json.dump({"tensors": [{"name": "x", "file": "0.pb"}]}, f)
            return folder

        inputs = tensor_dir(os.path.join(d, "inputs"), rng.uniform(-1, 1, (1, C, H, H)).astype(np.float32))
        calibrations = {}
        for name, seed in (("a", 1), ("b", 2)):
            samples = np.random.default_rng(seed).uniform(-1, 1, (8, 1, C, H, H)).astype(np.float32)
            calibrations[name] = os.path.join(d, f"calibration-{name}")
            for k, x in enumerate(samples):
                tensor_dir(os.path.join(calibrations[name], str(k)), x)
        work = os.path.join(d, "work")

        def run(label, precision, calibration=None, rewritten_model=rewritten, runs=3):
            """check at `precision`; (exit, answer lines, {(kind, side): [fields after the side]}, outputs by side,
            seconds, whether a converter ran)."""
            out = os.path.join(d, f"out-{label}")
            os.makedirs(out, exist_ok=True)
            argv = [sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", runtime, "--work", work,
                    "--original", original, "--rewritten", rewritten_model, "--inputs", inputs, "--out", out,
                    "--threads", "1", "--runs", str(runs), "--profile-runs", "0"]
            argv += [] if precision is None else ["--precision", precision]
            argv += [] if calibration is None else ["--calibration", calibration]
            started = time.monotonic()
            r = subprocess.run(argv, capture_output=True, text=True, env=env)
            seconds = time.monotonic() - started
            result = os.path.join(out, "result.jsonl")
            lines = [json.loads(l) for l in open(result).read().splitlines()] if os.path.exists(result) else []
            by = {}
            for l in lines:
                # Each line's values after its kind and side, in the order check.py names them.
                by.setdefault((l["kind"], l.get("side")), []).append([v for k, v in l.items() if k not in ("kind", "side")])
            outputs = {l["side"]: np.load(l["file"]) for l in lines if l["kind"] == "output"}
            converted = re.search(CONVERTING[runtime], r.stderr) is not None
            said = f" (calibration {os.path.basename(calibration)})" if calibration else ""
            said += f": exit {r.returncode}, {seconds:.1f} s, converter {'ran' if converted else 'did not run'}"
            print(f"-- {label}: check --precision {precision}{said}\n  "
                  + "\n  ".join(json.dumps(l) for l in lines if l["kind"] not in ("version", "sample"))
                  + ("" if r.returncode == 0 else "\n  stderr: " + r.stderr.strip()[-1500:].replace("\n", "\n  ")), flush=True)
            return r.returncode, lines, by, outputs, seconds, converted

        def max_abs(a, b):
            return float(np.max(np.abs(a.astype(np.float64) - b)))

        timings = {}

        # fp32: as before, plus the precision lines.
        code, lines, by, outs, timings["fp32"], converted = run("fp32", None)
        check(code == 0 and not any(l["kind"] == "error" for l in lines), "fp32 (no --precision): exit 0")
        check(by.get(("precision", "original")) == [["fp32"]] and by.get(("precision", "rewritten")) == [["fp32"]],
              "fp32: a precision line per side")
        check(not any(l["kind"] in ("quant", "note") for l in lines), "fp32: no quant or note line")
        check(len(by.get(("sample", "original"), [])) == 3, "fp32: timed")
        fp32 = outs
        check(set(outs) == {"original", "rewritten"} and max_abs(outs["original"], outs["rewritten"]) < 1e-4,
              "fp32: the models agree")
        if runtime == "openvino":
            bf16_on_openvino(locals())
            return finish(timings)
        code, lines, by, outs, timings["fp32 cached"], converted = run("fp32-again", "fp32")
        check(code == 0 and not converted, "fp32 again: the conversions are reused (no converter ran)")

        # fp16: both models converted to fp16, outputs float32 within the f16 tolerances.
        code, lines, by, outs, timings["fp16"], converted = run("fp16", "fp16")
        if runtime == "mnn":
            check(code == 0 and not converted, "fp16 on MNN: exit 0, the fp32 .mnn reused (precision is chosen at load)")
            check(all(n and len(n) == 1 and "precision 'low' lets MNN choose" in n[0][0] and "reports" in n[0][0]
                      for n in (by.get(("note", side)) for side in ("original", "rewritten"))),
                  "fp16 on MNN: a note per side says 'low' lets MNN choose, and what MNN reports of the CPU")
        else:
            check(code == 0 and converted, "fp16: exit 0, converted")
        check(by.get(("precision", "original")) == [["fp16"]] and by.get(("precision", "rewritten")) == [["fp16"]],
              "fp16: precision fp16 per side")
        if code == 0:
            a, b = outs["original"], outs["rewritten"]
            bound = 1e-3 + 1e-2 * float(np.max(np.abs(a)))
            print(f"   fp16: max|original - rewritten| {max_abs(a, b):.3g} (bound {bound:.3g}); from fp32: original "
                  f"{max_abs(a, fp32['original']):.3g}, rewritten {max_abs(b, fp32['rewritten']):.3g}", flush=True)
            check(a.dtype == np.float32 and b.dtype == np.float32, "fp16: outputs come back as float32")
            check(max_abs(a, b) <= bound, "fp16: the models agree within atol 1e-3 + rtol 1e-2")
            if runtime == "mnn":  # fp32 arithmetic where the CPU has no fp16 (x86 wheels): equal to fp32 is allowed
                check(max_abs(a, fp32["original"]) <= bound, "fp16 on MNN: the original within f16 tolerance of fp32")
            else:
                check(0 < max_abs(a, fp32["original"]) <= bound,
                      "fp16: the original differs from fp32 (it is fp16), within f16 tolerance")
        check(not any(l["kind"] == "quant" for l in lines), "fp16: no quant line")
        code, *_ , converted = run("fp16-again", "fp16", runs=0)
        check(code == 0 and not converted, "fp16 again: the conversions are reused")

        # int8: a step for the output, the models within 2 steps, the original's float ConvTranspose named on ExecuTorch.
        def steps_of(by, outs, label):
            quant = {side: by.get(("quant", side), []) for side in ("original", "rewritten")}
            scales = [q[1] for side in quant for q in quant[side]]
            for side, qs in quant.items():
                for name, scale, zero_point in qs:
                    y = outs[side]
                    grid = y / scale + zero_point
                    check(name == "y" and float(np.max(np.abs(grid - np.round(grid)))) < 1e-2
                          and grid.min() >= -128.5 and grid.max() <= 127.5,
                          f"{label}: {side}'s output is on its int8 grid (scale {scale:.6g}, zero point {zero_point})")
            raw = max_abs(outs["original"], outs["rewritten"])
            # Where one side computes its output in float (ExecuTorch's original), its values beyond the other side's
            # int8 range are what that side saturates to, not an error of the rewrite: compared clamped to that range.
            a, b = outs["original"], outs["rewritten"]
            if quant["rewritten"] and not quant["original"]:
                _, scale, zero_point = quant["rewritten"][0]
                a = np.clip(a, (-128 - zero_point) * scale, (127 - zero_point) * scale)
            elif quant["original"] and not quant["rewritten"]:
                _, scale, zero_point = quant["original"][0]
                b = np.clip(b, (-128 - zero_point) * scale, (127 - zero_point) * scale)
            steps = max_abs(a, b) / max(scales) if scales else float("inf")
            print(f"   {label}: scales {quant}; max|original - rewritten| {raw:.4g} = {raw / max(scales):.2f} steps; "
                  f"{max_abs(a, b):.4g} = {steps:.2f} steps with the float side clamped to the int8 range", flush=True)
            return quant, steps

        if runtime not in INT8:
            code, lines, *_ = run("int8-refused", "int8", calibrations["a"], runs=0)
            check(code == 2 and lines and usage_line(lines[-1])
                  and "fp32, fp16" in lines[-1]["message"],
                  f"int8 on {runtime}: an error usage line naming the precisions it has, exit 2")
            return finish_without_int8(runtime, d, tool, original, rewritten, rewrite, upsampler, bias, timings)
        code, lines, by, outs, timings["int8"], converted = run("int8", "int8", calibrations["a"])
        check(code == 0 and converted, "int8: exit 0, converted")
        check(by.get(("precision", "original")) == [["int8"]] and by.get(("precision", "rewritten")) == [["int8"]],
              "int8: precision int8 per side")
        int8 = outs
        if code == 0:
            quant, steps = steps_of(by, outs, "int8")
            check(len(quant["rewritten"]) == 1, "int8: a quant line for the rewritten model's output")
            if runtime == "litert":
                check(len(quant["original"]) == 1, "int8 on LiteRT: a quant line for the original's output too")
                check(not any(l["kind"] == "note" for l in lines), "int8 on LiteRT: no note")
            else:
                notes = by.get(("note", "original"), [])
                check(not quant["original"] and len(notes) == 1 and "ConvTranspose" in notes[0][0]
                      and "'up' (depthwise, groups 8)" in notes[0][0] and "XNNPACKQuantizer" in notes[0][0],
                      "int8 on ExecuTorch: the original's depthwise ConvTranspose stays float: no quant line, a note naming it")
                check(not by.get(("note", "rewritten")), "int8 on ExecuTorch: no note for the rewritten model")
            check(steps <= 2, f"int8: the models agree within 2 steps ({steps:.2f})")
            check(max_abs(outs["rewritten"], fp32["rewritten"]) > 0, "int8: the rewritten model is quantized (differs from fp32)")
            print(f"   int8 from fp32: original {max_abs(outs['original'], fp32['original']):.4g}, rewritten "
                  f"{max_abs(outs['rewritten'], fp32['rewritten']):.4g}", flush=True)

            # A rewrite of a model whose bias of channel 0 moved by 6 steps is more than 2 steps off.
            scale = max(q[1] for side in quant for q in quant[side])
            moved = bias.copy()
            moved[0] += np.float32(6 * scale)
            _, bad = rewrite(upsampler(moved), "dw_bias_moved")
            code, lines, by, outs, timings["int8 planted"], converted = run("int8-planted", "int8", calibrations["a"],
                                                                            rewritten_model=bad, runs=0)
            if code == 0:
                _, planted = steps_of(by, outs, "int8 planted")
                check(planted > 2, f"int8: a bias moved by 6 steps is caught (> 2 steps: {planted:.2f})")
            else:
                check(False, "int8 planted: exit 0")

        code, lines, by, outs, timings["int8 cached"], converted = run("int8-again", "int8", calibrations["a"], runs=0)
        check(code == 0 and not converted, "int8 again, same calibration: the conversions are reused")
        check(code == 0 and all(np.array_equal(outs[s], int8[s]) for s in outs), "int8 again: the same outputs")
        code, lines, by, outs, timings["int8 other calibration"], converted = run("int8-b", "int8", calibrations["b"], runs=0)
        check(code == 0 and converted, "int8 with other calibration samples: converted again, not taken from the cache")

        # The usage refusals (the binary refuses first; this is the defensive line).
        for label, precision, calibration in (("int8 without --calibration", "int8", None),
                                              ("--calibration at fp16", "fp16", calibrations["a"]),
                                              ("an unknown precision", "bf16", None)):
            code, lines, *_ = run(label.replace(" ", "_"), precision, calibration, runs=0)
            check(code == 2 and lines and usage_line(lines[-1]), f"{label}: an error usage line, exit 2")
        gap = os.path.join(d, "calibration-gap")
        tensor_dir(os.path.join(gap, "0"), np.zeros((1, C, H, H), np.float32))
        tensor_dir(os.path.join(gap, "2"), np.zeros((1, C, H, H), np.float32))
        code, lines, *_ = run("calibration_gap", "int8", gap, runs=0)
        check(code == 2 and lines and usage_line(lines[-1]) and "no gap" in lines[-1]["message"],
              "a calibration folder with a gap: an error usage line, exit 2")
        wrong = os.path.join(d, "calibration-wrong")
        tensor_dir(os.path.join(wrong, "0"), np.zeros((1, C, H, 2 * H), np.float32))
        code, lines, *_ = run("calibration_wrong", "int8", wrong, runs=0)
        check(code == 2 and lines and usage_line(lines[-1]) and "--inputs has" in lines[-1]["message"],
              "calibration samples of another shape than the inputs: an error usage line, exit 2")

        # Through the binary: --compare --precision P on this runtime judges as documented, and the report says so.
        def binary(label, other, precision):
            report = os.path.join(d, f"report-{label}.json")
            started = time.monotonic()
            argv = [tool, original, "--compare", other, "--runtime", runtime, "--precision", precision, "--python", sys.executable,
                    "--report", report]
            reports = report_archive.watch(argv)
            r = subprocess.run(argv, capture_output=True, text=True)
            report_archive.copy_written(reports)
            timings["binary " + label] = time.monotonic() - started
            said = json.load(open(report)) if os.path.exists(report) else {}
            print(f"-- binary {label}: exit {r.returncode}\n  " + "\n  ".join(r.stderr.strip().splitlines()[-6:]), flush=True)
            return r.returncode, said, r.stderr

        for precision in ("fp16", "int8"):
            code, said, err = binary(precision, rewritten, precision)
            check(code == 0 and (said.get("runtime") or {}).get("precision") == precision and f"at {precision}" in err,
                  f"binary --precision {precision}: passes, and the report and the log name the precision")
            outputs = (said.get("verify") or {}).get("outputs") or [{}]
            steps = outputs[0].get("quant_steps")
            if precision == "int8":
                check(steps is not None and steps <= 2 and outputs[0].get("quant_step", 0) > 0,
                      f"binary --precision int8: the output is judged in steps ({steps})")
                if runtime == "executorch":
                    check("left in float by XNNPACKQuantizer" in err, "binary --precision int8 on ExecuTorch: the note is a warning")
            else:
                check(steps is None, "binary --precision fp16: no steps")
        scale = max(((said.get("verify") or {}).get("outputs") or [{}])[0].get("quant_step") or 0.01, 1e-6)
        moved = bias.copy()
        moved[0] += np.float32(6 * scale)
        _, planted = rewrite(upsampler(moved), "dw_bias_moved_binary")
        code, said, err = binary("int8-planted", planted, "int8")
        steps = (((said.get("verify") or {}).get("outputs") or [{}])[0]).get("quant_steps")
        check(code == 1 and steps is not None and steps > 2 and "over the bound of 2" in err,
              f"binary --precision int8: a bias moved by 6 steps fails, exit 1 ({steps})")

        # fp16: a bias moved by 0.1 in one channel, over 4x FLOAT16's tolerance (atol 1e-3 + rtol 1e-2) at this output's
        # largest magnitude (about 2.2), fails as well, judged in float: no steps.
        moved16 = bias.copy()
        moved16[0] += np.float32(0.1)
        _, planted16 = rewrite(upsampler(moved16), "dw_bias_moved_fp16")
        code, said, err = binary("fp16-planted", planted16, "fp16")
        verdict = said.get("verify") or {}
        check(code == 1 and verdict.get("passed") is False and (said.get("runtime") or {}).get("precision") == "fp16"
              and ((verdict.get("outputs") or [{}])[0]).get("quant_steps") is None,
              f"binary --precision fp16: a bias moved by 0.1 fails, exit 1 (exit {code}, passed {verdict.get('passed')})")

        return finish(timings)


def finish(timings):
    print("timings (s, whole check runs, both models): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()),
          flush=True)
    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    print("all passed")
    return 0


def finish_without_int8(runtime, d, tool, original, rewritten, rewrite, upsampler, bias, timings):
    """The binary's part for a runtime without int8 (MNN): --precision fp16 passes and the report says so, a bias moved
    by 0.1 fails at fp16, and --precision int8 is a usage error (exit 2) before anything runs."""
    import numpy as np

    def binary(label, other, precision):
        report = os.path.join(d, f"report-{label}.json")
        argv = [tool, original, "--compare", other, "--runtime", runtime, "--precision", precision, "--python", sys.executable,
                "--report", report]
        reports = report_archive.watch(argv)
        started = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True)
        timings["binary " + label] = time.monotonic() - started
        report_archive.copy_written(reports)
        said = json.load(open(report)) if os.path.exists(report) else {}
        print(f"-- binary {label}: exit {r.returncode}\n  " + "\n  ".join(r.stderr.strip().splitlines()[-6:]), flush=True)
        return r.returncode, said, r.stderr

    code, said, err = binary("fp16", rewritten, "fp16")
    check(code == 0 and (said.get("runtime") or {}).get("precision") == "fp16" and "at fp16" in err,
          "binary --precision fp16: passes, and the report and the log name the precision")
    moved16 = bias.copy()
    moved16[0] += np.float32(0.1)
    _, planted16 = rewrite(upsampler(moved16), "dw_bias_moved_fp16")
    code, said, err = binary("fp16-planted", planted16, "fp16")
    check(code == 1 and (said.get("verify") or {}).get("passed") is False,
          f"binary --precision fp16: a bias moved by 0.1 fails, exit 1 (exit {code})")
    code, said, err = binary("int8", rewritten, "int8")
    check(code == 2 and "--precision int8" in err and runtime in err, f"binary --precision int8 on {runtime}: exit 2, "
          f"naming it (exit {code})")
    return finish(timings)


def bf16_on_openvino(m):
    """--precision bf16 on OpenVINO, `m` main()'s locals (its run() and the fp32 outputs). OpenVINO 2026.4's CPU plugin
    keeps a lone depthwise ConvTranspose (its Deconvolution layer) in f32 at the bf16 hint and runs the rewritten
    phase Convolutions in bf16: the original's output equals fp32's, the rewritten one's does not."""
    import numpy as np

    run, max_abs, fp32, d, env, tool = m["run"], m["max_abs"], m["fp32"], m["d"], m["env"], m["tool"]
    runtime, timings = m["runtime"], m["timings"]
    import openvino

    # The CPU this runs on decides what bf16 means: on one with AVX512_BF16, AMX_BF16 or AVX2_VNNI_2 the plugin runs
    # bf16 and the models must agree within bf16's bound; on one without (an AMD EPYC without avx512_bf16, say) every
    # bf16 run is a conversion failure that says so, and the binary's verdict is "could not verify" (exit 4).
    bf16_here = "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if not bf16_here:
        return no_bf16_here(m)
    code, lines, by, outs, timings["bf16"], _ = run("bf16", "bf16")
    check(code == 0 and not any(l["kind"] == "error" for l in lines), "bf16: exit 0")
    check(by.get(("precision", "original")) == [["bf16"]] and by.get(("precision", "rewritten")) == [["bf16"]],
          "bf16: precision bf16 per side")
    label = [l["text"] for l in lines if l["kind"] == "label"]
    check(len(label) == 1 and re.fullmatch(r"OpenVINO [0-9.]+ \(CPU plugin, bf16 inference\)", label[0]) is not None,
          f"bf16: the label is the precision the plugin reported back ({label})")
    notes = by.get(("note", "original"), [])
    check(len(notes) == 1 and notes[0][0].endswith("in f32 at the bf16 hint: Deconvolution"),
          f"bf16: a note names the original's Deconvolution, kept in f32 ({notes})")
    check(not by.get(("note", "rewritten")), "bf16: no note for the rewritten model (its Convolutions run bf16)")
    if code == 0:
        a, b = outs["original"], outs["rewritten"]
        bound = 1e-2 + 2e-2 * float(np.max(np.abs(a)))
        print(f"   bf16: max|original - rewritten| {max_abs(a, b):.3g} (bound {bound:.3g}); from fp32: original "
              f"{max_abs(a, fp32['original']):.3g}, rewritten {max_abs(b, fp32['rewritten']):.3g}", flush=True)
        check(a.dtype == np.float32 and b.dtype == np.float32, "bf16: outputs come back as float32")
        check(max_abs(a, b) <= bound, "bf16: the models agree within atol 1e-2 + rtol 2e-2")
        check(0 < max_abs(b, fp32["rewritten"]) <= bound, "bf16: the rewritten model differs from fp32 (it ran bf16)")

    openvino_usage_refusals(run)

    # Never another precision in bf16's or fp32's name. The adapter is wrapped, not the machine changed: a core whose
    # compile_model drops the precision hint (the plugin's default on this CPU is then what it compiles), and a core
    # whose CPU reports no BF16 capability.
    wrapper = """
import sys
import dwdeconv_rewrite.runtimes.check as check
import dwdeconv_rewrite.runtimes.openvino_adapter as adapter
real = adapter.OpenVinoRuntime.__init__
class Core:
    def __init__(self, core): self.core = core
    def __getattr__(self, k): return getattr(self.core, k)
    def compile_model(self, model, device, config):
        return self.core.compile_model(model, device, {k: v for k, v in config.items() if k != MODE_DROPS})
    def get_property(self, device, name):
        value = self.core.get_property(device, name)
        return [c for c in value if c != "BF16"] if MODE_NO_BF16 and name == "OPTIMIZATION_CAPABILITIES" else value
def init(self, work):
    real(self, work)
    self.core = Core(self.core)
adapter.OpenVinoRuntime.__init__ = init
sys.exit(check.check(sys.argv[2:]))
"""
    for label, precision, drops, no_bf16, said in (
            ("hint-dropped", "fp32", "INFERENCE_PRECISION_HINT", False, "the CPU plugin compiled bf16"),
            ("no-bf16-cpu", "bf16", "", True, "has no bf16 on this CPU")):
        code = f"MODE_DROPS, MODE_NO_BF16 = {drops!r}, {no_bf16!r}\n" + wrapper
        out = os.path.join(d, f"out-{label}")
        os.makedirs(out, exist_ok=True)
        argv = [sys.executable, "-c", code, "check", "--runtime", runtime, "--work", os.path.join(d, "work"),
                "--original", m["original"], "--rewritten", m["rewritten"], "--inputs", m["inputs"], "--out", out,
                "--precision", precision]
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        result = os.path.join(out, "result.jsonl")
        lines = [json.loads(l) for l in open(result).read().splitlines()] if os.path.exists(result) else []
        errors = [l for l in lines if l["kind"] == "error"]
        print(f"-- {label}: check --precision {precision}: exit {r.returncode}; errors {errors}\n  "
              + r.stderr.strip()[-600:].replace("\n", "\n  "), flush=True)
        check(r.returncode == 3 and len(errors) == 1 and [errors[0]["stage"], errors[0]["side"]] == ["openvino.compile_model", "original"]
              and said in errors[0]["message"] and not any(l["kind"] == "output" for l in lines),
              f"{label}: --precision {precision} is a conversion failure saying '{said}', no output")
        if no_bf16:
            check(re.search(r"AVX512_BF16, AMX_BF16 or AVX2_VNNI_2, and this CPU's flags lack (avx512_bf16|amx_bf16)",
                            errors[0]["message"]) is not None, "no-bf16-cpu: the message names the CPU features missing")

    # Through the binary: bf16 passes at bf16, a bias moved by 0.2 in one channel (4x the bound at this output's
    # largest magnitude, about 2.2) fails, and bf16 on a runtime whose row lacks it is a usage error.
    binary = compare_through_binary(m)
    code, said, err = binary("bf16", m["rewritten"], "--runtime", runtime, "--precision", "bf16")
    check(code == 0 and (said.get("runtime") or {}).get("precision") == "bf16" and "(CPU plugin, bf16 inference) at bf16" in err,
          "binary --precision bf16: passes, and the report and the log name the precision")
    check("Deconvolution" in err, "binary --precision bf16: the note on the original's f32 Deconvolution is shown")
    moved = m["bias"].copy()
    moved[0] += np.float32(0.2)
    _, planted = m["rewrite"](m["upsampler"](moved), "dw_bias_moved_bf16")
    code, said, err = binary("bf16-planted", planted, "--runtime", runtime, "--precision", "bf16")
    check(code == 1 and (said.get("verify") or {}).get("passed") is False, "binary --precision bf16: a bias moved by 0.2 fails, exit 1")
    # A deeper model (the MI-GAN-like example with hand-written upsamplers, 8 of them): bf16's rounding through it
    # (0.06 on an Intel Xeon with AVX512_BF16, over FLOAT16's bound of 0.053 there) against BFLOAT16's.
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    migan = os.path.join(source, "examples", "migan_tiny_handwritten.onnx")
    migan_out = os.path.join(d, "migan.onnx")
    r = subprocess.run([tool, migan, "-o", migan_out, "--target", TARGET[runtime], "--runtime", runtime, "--python",
                        sys.executable, "--precision", "bf16", "--verify", "--report", os.path.join(d, "migan.json")],
                       capture_output=True, text=True)
    verdict = json.load(open(os.path.join(d, "migan.json"))).get("verify") or {} if os.path.exists(os.path.join(d, "migan.json")) else {}
    out = (verdict.get("outputs") or [{}])[0]
    print(f"-- MI-GAN-like at bf16: exit {r.returncode}; max abs {out.get('max_abs_error')}, max rel {out.get('max_rel_error')} "
          "(FLOAT16's bound would be 1e-3 + 1e-2 of the largest magnitude)", flush=True)
    check(r.returncode == 0 and verdict.get("passed") is True and out.get("max_abs_error", 0) > 0,
          "binary --precision bf16: the MI-GAN-like model verifies at bf16 (and differs: bf16 ran)")
    bf16_on_ort_is_usage(binary, m["rewritten"])


def compare_through_binary(m):
    """binary(label, other, *args): `dwdeconv-rewrite ORIGINAL --compare other ARGS`, as (exit, report, stderr)."""
    d, tool = m["d"], m["tool"]

    def binary(label, other, *args):
        report = os.path.join(d, f"report-{label}.json")
        argv = [tool, m["original"], "--compare", other, "--python", sys.executable, "--report", report] + list(args)
        reports = report_archive.watch(argv)
        r = subprocess.run(argv, capture_output=True, text=True)
        report_archive.copy_written(reports)
        said = json.load(open(report)) if os.path.exists(report) else {}
        print(f"-- binary {label}: exit {r.returncode}\n  " + "\n  ".join(r.stderr.strip().splitlines()[-4:]), flush=True)
        return r.returncode, said, r.stderr

    return binary


def openvino_usage_refusals(run):
    """What OpenVINO's row does not list is a usage error (the binary refuses first; this is the defensive line)."""
    for precision in ("fp16", "int8"):
        code, lines, *_ = run(f"{precision}-refused", precision, None, runs=0)
        check(code == 2 and lines and usage_line(lines[-1]) and "fp32, bf16" in lines[-1]["message"],
              f"--precision {precision} on openvino: an error usage line naming fp32, bf16, exit 2")


def bf16_on_ort_is_usage(binary, rewritten):
    code, said, err = binary("bf16-on-ort", rewritten, "--runtime", "ort", "--precision", "bf16")
    check(code == 2 and "--precision bf16: --runtime ort runs fp32 only; bf16 runs on --runtime openvino" in err,
          "binary --precision bf16 --runtime ort: a usage error naming the runtime, exit 2")


def no_bf16_here(m):
    """--precision bf16 on OpenVINO on a CPU the plugin runs no bf16 on: the check is a conversion failure naming the
    CPU features it lacks, and through the binary a comparison at bf16 could not be verified (exit 4) and says why;
    never a pass at a precision that did not run."""
    run, runtime = m["run"], m["runtime"]
    code, lines, by, outs, _, _ = run("bf16-no-cpu", "bf16")
    errors = [l for l in lines if l["kind"] == "error"]
    check(code == 3 and len(errors) == 1 and [errors[0]["stage"], errors[0]["side"]] == ["openvino.compile_model", "original"]
          and "has no bf16 on this CPU" in errors[0]["message"] and not outs,
          "bf16 on a CPU without it: a conversion failure of the original saying so, no output, exit 3")
    check(len(errors) == 1 and re.search(r"AVX512_BF16, AMX_BF16 or AVX2_VNNI_2, and this CPU's flags lack (avx512_bf16|amx_bf16)",
                                         errors[0]["message"]) is not None,
          "bf16 on a CPU without it: the message names the CPU features missing")
    openvino_usage_refusals(run)
    binary = compare_through_binary(m)
    code, said, err = binary("bf16-no-cpu", m["rewritten"], "--runtime", runtime, "--precision", "bf16")
    check(code == 4 and "cannot verify" in err and "has no bf16 on this CPU" in err
          and (said.get("verify") or {}).get("passed") is not True,
          "binary --precision bf16 on a CPU without it: could not verify (exit 4), saying why, no pass")
    bf16_on_ort_is_usage(binary, m["rewritten"])


if __name__ == "__main__":
    sys.exit(main())
