"""A size computed through Sigmoid, judged by ONNX Runtime: Resize's sizes are int64(floor(Sigmoid(0.5) * k)) with k
the float at which this tool's folder (a correctly rounded Sigmoid) gets exactly 8.0 and ONNX Runtime's Sigmoid, one
float lower, 7.9999995. ONNX Runtime resizes 4x4 to 7x7; a tool trusting its own fold saw an x2 upscale, rewrote it
and wrote a model computing 8x8. Each target must keep the upsampler, naming the Sigmoid, and its output must be what
ONNX Runtime computes for the original.

Usage: check_inexact_sizes_ort.py DWDECONV_REWRITE. Exits 77 (ctest's skip) with a message when onnx, numpy or
onnxruntime is not importable (set DWDECONV_PYTHON to an interpreter that has them)."""
import json
import os
import subprocess
import sys
import tempfile


def main():
    tool = sys.argv[1]
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        import onnxruntime as ort
    except ImportError as e:
        print("SKIPPED: %s in %s; install onnx, numpy and onnxruntime (pip) to check sizes on ONNX Runtime" % (e, sys.executable))
        return 77
    k = np.float32(12.852245330810547)
    inits = {"c": np.array([0.5, 0.5], np.float32), "k": np.array([k, k], np.float32), "nc": np.array([1, 8], np.int64),
             "W": np.random.default_rng(0).standard_normal((8, 1, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Sigmoid", ["c"], ["g"], name="gate"), helper.make_node("Mul", ["g", "k"], ["gk"]),
             helper.make_node("Floor", ["gk"], ["fl"]), helper.make_node("Cast", ["fl"], ["hw"], to=TensorProto.INT64),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["X", "", "", "sizes"], ["u"], mode="nearest"),
             helper.make_node("Conv", ["u", "W"], ["Y"], name="up1", group=8, pads=[1, 1, 1, 1], kernel_shape=[3, 3])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8, "OH", "OW"])],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    x = np.random.default_rng(1).standard_normal((1, 8, 4, 4)).astype(np.float32)

    def run(path):
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        original = os.path.join(tmp, "sigmoid_sizes.onnx")
        onnx.save(model, original)
        expected = run(original)
        # The boundary is one on this onnxruntime: its Sigmoid is not the folder's, and floors to 7.
        if expected.shape != (1, 8, 7, 7):
            print("SKIPPED: onnxruntime %s resizes to %s, not 7x7: its Sigmoid(0.5) is the folder's, so this input is no boundary"
                  % (ort.__version__, "x".join(map(str, expected.shape[2:]))))
            return 77
        for target in ["default", "xnnpack", "litert", "ort", "executorch"]:
            out, report = os.path.join(tmp, target + ".onnx"), os.path.join(tmp, target + ".json")
            r = subprocess.run([tool, original, "-o", out, "--target", target, "--report", report], capture_output=True, text=True)
            if r.returncode not in (0, 1):
                failures.append("%s: exit %d: %s" % (target, r.returncode, r.stderr.strip()[-300:]))
                continue
            rows = json.load(open(report)).get("nodes", [])
            row = next((n for n in rows if n.get("name") == "up1"), None)
            if row is None or row.get("decision") != "kept" or "Sigmoid 'gate'" not in row.get("reason", ""):
                failures.append("%s: 'up1' is not kept naming Sigmoid 'gate': %s" % (target, row))
            got = run(out)
            if got.shape != expected.shape or not np.allclose(got, expected, atol=1e-5):
                failures.append("%s: the output is %s, ONNX Runtime's original %s" % (target, got.shape, expected.shape))
    for f in failures:
        print("FAIL:", f)
    print("%d of 5 targets keep the Sigmoid-sized Resize" % (5 - len(failures)) if not failures else "%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
