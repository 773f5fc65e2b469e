"""The protocol between the binary and the Python runtimes, from the Python side: every line `probe` and `check` write
is one of bridge.schema.json's answer lines (validated with tests/python/bridge_schema.py, which the first cases show
refusing what the schema refuses), and base.Runner's template methods hold every adapter to the same checks.

ctest supplies DWDECONV_SOURCE_DIR and PYTHONPATH=<source>/python. The probe and usage cases need the standard
library only; the runner cases numpy, and the whole check onnx and onnxruntime too (each skipped, saying so, where
this interpreter lacks them)."""
import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bridge_schema import Validator  # noqa: E402

failures = []
schema = Validator()


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def answer_problems(lines):
    """(line, problems) of each answer line that is not one of the schema's."""
    return [(line, p) for line in lines for p in [schema.problems(line, "answer")] if p]


def read_answer(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()] if Path(path).exists() else []


def has(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


# 1. The validator refuses what the schema refuses: the positional arrays of before, a number as text, a missing key,
#    a key the kind does not have, a side that is neither.
for bad in (["sample", "original", 1.5], {"kind": "sample", "side": "original", "ms": "1.5"},
            {"kind": "output", "side": "original", "name": "y"}, {"kind": "label", "text": "x", "extra": 1},
            {"kind": "sample", "side": "both", "ms": 1.0}, {"kind": "quant", "side": "original", "name": "y",
                                                            "scale": 0, "zero_point": 0}):
    check(bool(schema.problems(bad, "answer")), f"the schema refuses {json.dumps(bad)}")
check(not schema.problems({"kind": "node", "side": "rewritten", "node": "n", "op": "Conv", "ms": 0.5, "inputs": ["x", ""],
                           "outputs": ["y"]}, "answer"), "the schema takes a node line")
check(not schema.problems({"tensors": [{"name": "x", "file": "0.pb"}]}, "tensor_list"), "the schema takes a tensor list")
check(bool(schema.problems({"tensors": ["0.pb"]}, "tensor_list")), "the schema refuses a tensor list of bare file names")

# 2. probe (standard library only): its lines are answer lines, whatever this interpreter has.
for runtime in ("ort", "litert"):
    probe = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "probe", runtime], capture_output=True, text=True)
    lines = [json.loads(line) for line in probe.stdout.splitlines()]
    check(not answer_problems(lines), f"probe {runtime}: every line is the schema's: {answer_problems(lines)}")
    check(probe.returncode in (0, 5) and lines and lines[0] == {"kind": "python", "executable": sys.executable,
                                                                "version": platform.python_version()},
          f"probe {runtime}: exit {probe.returncode}, a python line first: {lines[:1]}")

with tempfile.TemporaryDirectory() as scratch:
    # 3. check's refusals, written before anything is imported.
    out = Path(scratch) / "usage"
    out.mkdir()
    refused = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", "litert", "--work",
                              scratch, "--original", "a.onnx", "--rewritten", "b.onnx", "--inputs", scratch, "--out",
                              str(out), "--precision", "int8"], capture_output=True, text=True)
    lines = read_answer(out / "result.jsonl")
    check(refused.returncode == 2 and lines and lines[-1].get("stage") == "usage", f"check int8 without samples: {lines}")
    check(not answer_problems(lines), f"check's usage answer is the schema's: {answer_problems(lines)}")

    # 4. A whole check on ONNX Runtime: conversion, outputs, samples and the per-node profile are the schema's lines.
    if not has("numpy", "onnx", "onnxruntime"):
        print("SKIPPED: the whole check needs numpy, onnx and onnxruntime in " + sys.executable, flush=True)
    else:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Add", ["x", "y"], ["z"], name="add")],
            "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 3]),
             helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = Path(scratch) / "m.onnx"
        onnx.save(model, str(path))
        inputs, out = Path(scratch) / "inputs", Path(scratch) / "out"
        inputs.mkdir()
        out.mkdir()
        x = np.arange(-3, 3, dtype=np.float32).reshape(1, 2, 3)
        (inputs / "0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
        listed = {"tensors": [{"name": "x", "file": "0.pb"}]}
        check(not schema.problems(listed, "tensor_list"), "the test's tensor list is the schema's")
        (inputs / "inputs.json").write_text(json.dumps(listed))
        run = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", "ort", "--work",
                              str(Path(scratch) / "work"), "--original", str(path), "--rewritten", str(path), "--inputs",
                              str(inputs), "--out", str(out), "--runs", "2", "--warmup", "0", "--profile-runs", "1"],
                             capture_output=True, text=True)
        lines = read_answer(out / "result.jsonl")
        kinds = {line["kind"] for line in lines}
        check(run.returncode == 0 and {"runtime", "label", "version", "precision", "output", "sample", "node"} <= kinds,
              f"check on ort: exit {run.returncode}, kinds {sorted(kinds)} {run.stderr[-400:]}")
        check(not answer_problems(lines), f"check on ort: every line is the schema's: {answer_problems(lines)[:3]}")
        outputs = [(line["side"], line["name"]) for line in lines if line["kind"] == "output"]
        check(outputs == [("original", "z"), ("original", "y"), ("rewritten", "z"), ("rewritten", "y")],
              f"one output line per graph output, in graph order, by name: {outputs}")
        values = {(line["side"], line["name"]): np.load(line["file"]) for line in lines if line["kind"] == "output"}
        check(np.array_equal(values[("original", "z")], x + np.maximum(x, 0)), "z holds x + relu(x)")
        samples = [line for line in lines if line["kind"] == "sample"]
        check(len(samples) == 4 and all(isinstance(s["ms"], float) for s in samples), "the samples are numbers, 2 a side")

# 5. base.Runner: its template methods check what every adapter must hold to, and call the adapter's hooks.
if not has("numpy"):
    print("SKIPPED: the runner cases need numpy in " + sys.executable, flush=True)
else:
    import numpy as np

    from dwdeconv_rewrite.runtimes.base import GraphIO, Runner

    class Echo(Runner):
        """Hooks only: returns what it was fed, under the names `names`."""

        where = "the echo runner"

        def __init__(self, names):
            self.names = names

        def feed_impl(self, inputs):
            self.fed = dict(inputs)

        def invoke(self):
            self.result = {n: self.fed["x"] for n in self.names}

        def outputs_impl(self):
            return self.result

    def raised(call):
        try:
            call()
        except RuntimeError as e:
            return str(e)
        return None

    graph = GraphIO({"x": (np.dtype(np.float32), (1, None))}, ["b", "a"])
    good = Echo(["a", "b"])
    good.graph = graph
    x = np.ones((1, 3), np.float32)
    good.feed({"x": x})
    good.invoke()
    check(list(good.outputs()) == ["b", "a"], "outputs() gives the graph's outputs in graph order, whatever the adapter's")
    check("not made by Runtime.load" in (raised(lambda: Echo(["a"]).feed({"x": x})) or ""), "an unbound runner raises")
    for what, fed, said in (("a missing input", {}, "missing ['x']"), ("an extra input", {"x": x, "w": x}, "not inputs of it"),
                            ("another dtype", {"x": x.astype(np.float64)}, "declares float32"),
                            ("another shape", {"x": np.ones((2, 3), np.float32)}, "declares [1, '?']"),
                            ("an empty array", {"x": np.ones((1, 0), np.float32)}, "empty array"),
                            ("no dict", [x], "not a list")):
        check(said in (raised(lambda fed=fed: good.feed(fed)) or ""), f"feed() refuses {what}, saying '{said}'")
    short = Echo(["a"])
    short.graph = graph
    short.feed({"x": x})
    short.invoke()
    check("declares ['b', 'a']; missing ['b']" in (raised(short.outputs) or ""), "outputs() refuses a missing output")
    empty = Echo(["a", "b"])
    empty.graph = graph
    empty.feed({"x": x})
    empty.invoke()
    empty.result["a"] = np.zeros((0,), np.float32)
    check("'a' empty" in (raised(empty.outputs) or ""), "outputs() refuses an empty output")

if failures:
    print(f"{len(failures)} failed", file=sys.stderr)
    sys.exit(1)
print("all passed")
