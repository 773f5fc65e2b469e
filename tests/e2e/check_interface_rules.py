"""The rules of --verify and --compare that must be the same on every runtime.

Usage: check_interface_rules.py xnnpack|ort|litert|executorch|openvino|mnn|ncnn DWDECONV_REWRITE. With this interpreter as the runtime's
Python (the executor needs none: this interpreter only builds the models, with onnx and numpy), checks that:
  - a B whose graph input is declared with other dims, or under another name, fails with exit 1 and the interface
    difference, and no runtime ran either model (the Python side is only probed, never asked to check);
  - a B that lists the same outputs in another order computing the same values passes, with a note;
  - outputs with no elements at all, or NaN at every element, are "nothing compared", exit 1 (a converter that
    cannot take such a model may refuse it instead, exit 4; it never passes);
  - --input files of float64 and float16 for a float input are fed as the declared float, the same values as
    a float32 file: exit 0, and the same max abs error on every runtime;
  - an int64 graph input needs its values given (exit 2 without), and a float64 graph input is not verified (exit 4),
    both before any runtime runs.
Exits 77 (ctest's skip), saying so, when this interpreter lacks the packages the runtime needs.
"""
import importlib.util
import json
import os
import stat
import subprocess
import sys
import tempfile

import report_archive  # beside this script: the suite's report archive

PACKAGES = {"xnnpack": ["numpy", "onnx"],
            "ort": ["numpy", "onnx", "onnxruntime"],
            "litert": ["numpy", "onnx", "onnx2tf", "tensorflow", "ai_edge_litert"],
            "executorch": ["numpy", "onnx", "torch", "onnx2torch", "executorch"],
            "openvino": ["numpy", "onnx", "openvino"], "mnn": ["numpy", "onnx", "MNN"],
            "ncnn": ["numpy", "onnx", "ncnn", "pnnx"]}

failures = []


def check(condition, what):
    print(("ok: " if condition else "FAILED: ") + what, flush=True)
    if not condition:
        failures.append(what)


def main():
    runtime, tool = sys.argv[1], sys.argv[2]
    missing = [p for p in PACKAGES[runtime] if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)}; set DWDECONV_{runtime.upper()}_PYTHON or "
              f"DWDECONV_PYTHON to an interpreter with them (docs/runtime-checks.md)")
        return 77
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(26)

    def model(nodes, inputs, outputs, inits):
        m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    w = numpy_helper.from_array(rng.uniform(-1, 1, (4, 1, 3, 3)).astype(np.float32), "w")

    def conv(x, y):
        return helper.make_node("Conv", [x, "w"], [y], group=4, pads=[1, 1, 1, 1])

    def image(name, hw=8):
        return vi(name, TensorProto.FLOAT, [1, 4, hw, hw])

    two = [conv("x", "p"), helper.make_node("Relu", ["p"], ["q"])]
    models = {
        "a": model([conv("x", "y")], [image("x")], [image("y")], [w]),
        # Within tolerance of a, so that its error depends on the input's values.
        "a_nudged": model([conv("x", "y")], [image("x")], [image("y")],
                          [numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(1 + 2e-6), "w")]),
        # The same graph with its input declared 16x16: it runs at 8x8 on a lenient runtime, yet it is another model.
        "b_dims": model([conv("x", "y")], [image("x", 16)], [image("y", 16)], [w]),
        "b_renamed": model([conv("x2", "y")], [image("x2")], [image("y")], [w]),
        "two": model(two, [image("x")], [image("p"), image("q")], [w]),
        "two_reordered": model(two, [image("x")], [image("q"), image("p")], [w]),
    }
    empty = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("st", [0]), ("en", [0]), ("ax", [2]))]
    # Every element NaN on both sides (NaN == NaN everywhere): nothing is compared, whatever the models compute.
    hundred = numpy_helper.from_array(np.array([100.0], np.float32), "hundred")
    models["nan"] = model([helper.make_node("Sub", ["x", "hundred"], ["t"]), helper.make_node("Sqrt", ["t"], ["y"])],
                          [image("x")], [image("y")], [hundred])
    models["nan_other"] = model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Sub", ["n", "hundred"], ["t"]),
                                 helper.make_node("Sqrt", ["t"], ["y"])], [image("x")], [image("y")], [hundred])
    # An int64 input (a seeded constant would check one case) and a float64 one (its values would be rounded).
    models["int_input"] = model([helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
                                 helper.make_node("Add", ["x", "kf"], ["y"])],
                                [image("x"), vi("k", TensorProto.INT64, [1, 4, 8, 8])], [image("y")], [])
    models["double_input"] = model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", TensorProto.DOUBLE, [1, 4, 8, 8])],
                                   [vi("y", TensorProto.DOUBLE, [1, 4, 8, 8])], [])
    models["empty"] = model([helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])], [image("x")],
                            [vi("y", TensorProto.FLOAT, [1, 4, 0, 8])], empty)
    models["empty_neg"] = model([helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"]),
                                 helper.make_node("Neg", ["s"], ["y"])], [image("x")],
                                [vi("y", TensorProto.FLOAT, [1, 4, 0, 8])], empty)

    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, m in models.items():
            paths[name] = os.path.join(d, name + ".onnx")
            onnx.save(m, paths[name])
        x = rng.uniform(-1, 1, (1, 4, 8, 8))
        for dtype in ("float32", "float64", "float16"):
            np.save(os.path.join(d, f"x_{dtype}.npy"), x.astype(dtype))
        # An interpreter that logs each command it is given, so a test can tell whether a runtime ran a model.
        log = os.path.join(d, "python-calls.log")
        wrapper = os.path.join(d, "python")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{sys.executable}' \"$@\"\n")
        os.chmod(wrapper, stat.S_IRWXU)
        env = dict(os.environ, TMPDIR=d)
        env.pop("DWDECONV_PYTHON", None)

        def calls():
            if not os.path.exists(log):
                return []
            with open(log) as f:
                lines = [line.split() for line in f.read().splitlines()]
            os.unlink(log)
            return [words[2] for words in lines if len(words) > 2 and words[:2] == ["-m", "dwdeconv_rewrite.runtimes"]]

        def compare(a, b, *extra):
            args = [tool, paths[a], "--compare", paths[b], "--runtime", runtime, "--report", os.path.join(d, "r.json")]
            if runtime != "xnnpack":
                args += ["--python", wrapper]
            reports = report_archive.watch(args)
            r = subprocess.run(args + list(extra), capture_output=True, text=True, env=env)
            report_archive.copy_written(reports)
            print(f"$ {a} --compare {b} {' '.join(extra)} --runtime {runtime}: exit {r.returncode}\n  " +
                  r.stderr.strip().replace("\n", "\n  "), flush=True)
            with open(os.path.join(d, "r.json")) as f:
                return r, json.load(f), calls()

        for b, said in (("b_dims", "graph input 'x' has another type in the rewritten model (FLOAT[1,4,8,8] in the "
                                   "original, FLOAT[1,4,16,16] in the rewritten model)"),
                        ("b_renamed", "graph input 'x' is missing from the rewritten model, which has 'x2' instead")):
            r, report, ran = compare("a", b)
            check(r.returncode == 1, f"{b}: an interface difference is exit 1 (verification failed)")
            check(said in r.stderr, f"{b}: the log names the difference: {said}")
            check(report["verify"]["passed"] is False and said in (report["verify"]["difference"] or ""),
                  f"{b}: the report says it failed, with the difference")
            check("check" not in ran, f"{b}: no runtime ran either model (Python commands run: {ran})")

        r, report, _ = compare("two", "two_reordered")
        check(r.returncode == 0, "the same outputs listed in another order: matched by name, passed")
        check("listed in another order" in r.stderr, "... with a note that they are listed in another order")
        check(sorted(o["name"] for o in report["verify"]["outputs"]) == ["p", "q"], "... both outputs compared")

        r, report, _ = compare("empty", "empty_neg")
        check(r.returncode in (1, 4), "outputs with no elements never pass (exit 1, or 4 when a converter refuses them)")
        if r.returncode == 1:
            check("nothing compared" in r.stderr, "... and say that nothing was compared")

        r, report, _ = compare("nan", "nan_other")
        check(r.returncode in (1, 4), "outputs that are NaN at every element never pass (exit 1, or 4 when refused)")

        r, report, ran = compare("int_input", "int_input")
        check(r.returncode == 2 and "give its values with --input k=FILE" in r.stderr and "check" not in ran,
              "an int64 graph input without --input is refused before any runtime runs (exit 2)")
        np.save(os.path.join(d, "k.npy"), rng.integers(-3, 3, (1, 4, 8, 8)).astype(np.int64))
        r, report, _ = compare("int_input", "int_input", "--input", f"k={os.path.join(d, 'k.npy')}")
        if runtime == "ncnn":
            # pnnx has no ncnn layer for the Cast (it keeps it as Tensor.to): not convertible, said so, never run wrong.
            check(r.returncode == 4 and "'Tensor.to'" in r.stderr and "pnnx" in r.stderr,
                  "... and, given its values, a conversion failure naming the Cast pnnx cannot convert (exit 4)")
        else:
            check(r.returncode == 0, "... and checked when its values are given")
        r, report, ran = compare("double_input", "double_input")
        check(r.returncode == 4 and "is DOUBLE: inputs are held in float32" in r.stderr and "check" not in ran,
              "a float64 graph input is not verified, before any runtime runs (exit 4: could not verify)")

        errors = {}
        for dtype in ("float32", "float64", "float16"):
            r, report, _ = compare("a", "a_nudged", "--input", f"x={os.path.join(d, f'x_{dtype}.npy')}")
            check(r.returncode == 0, f"an --input file of {dtype} for a float input is fed as the declared float (exit 0)")
            errors[dtype] = report.get("verify", {}).get("outputs", [{}])[0].get("max_abs_error")
        check(errors["float64"] == errors["float32"] and errors["float32"], f"float64 and float32 files give the same run ({errors})")
        leftovers = [n for n in os.listdir(d) if n.startswith("dwdeconv-")]
        check(not leftovers, f"no scratch directory is left in TMPDIR ({leftovers})")

    if failures:
        print(f"{len(failures)} check(s) failed on {runtime}")
        return 1
    print(f"every interface rule holds on {runtime}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
