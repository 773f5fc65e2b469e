"""Each target's emitted form against ONNX Runtime: for every target and a few upsamplers (depthwise ConvTranspose
x2 and x3 at batch 1 and 2, one that is not the graph's output, nearest + 3x3 Conv depthwise and dense), the tool's
output must compute what ONNX Runtime computes for the original, and have the target's structure (its join, what it
keeps).

Usage: check_targets_ort.py DWDECONV_REWRITE. Exits 77 (ctest's skip) with a message when onnx, numpy or
onnxruntime is not importable (set DWDECONV_PYTHON to an interpreter that has them)."""
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
        print("SKIPPED: %s in %s; install onnx, numpy and onnxruntime (pip) to check the targets on ONNX Runtime"
              % (e, sys.executable))
        return 77
    rng = np.random.default_rng(0)

    def model(nodes, x_dims, y_dims, inits, opset=13):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_dims)],
                              [numpy_helper.from_array(v.astype(np.float32) if v.dtype.kind == "f" else v, k)
                               for k, v in inits.items()])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    def deconv(c, n, k, s, pads, op, then=None):
        """A depthwise ConvTranspose; `then` an op after it, so that its output is not the graph's."""
        h = 7
        out = s * h
        after = [helper.make_node(then, ["T"], ["Y"], name="after")] if then else []
        return model([helper.make_node("ConvTranspose", ["X", "W", "B"], ["T" if then else "Y"], name="up", group=c,
                                       strides=[s, s], pads=pads, output_padding=[op, op])] + after,
                     [n, c, h, h], [n, c, out, out],
                     {"W": rng.standard_normal((c, 1, k, k)), "B": rng.standard_normal(c)}), (n, c, h, h)

    def nearest_conv(c, group):
        h = 6
        return model([helper.make_node("Resize", ["X", "", "sc"], ["u"], mode="nearest",
                                       coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                      helper.make_node("Conv", ["u", "W"], ["Y"], name="up", group=group, pads=[1, 1, 1, 1],
                                       kernel_shape=[3, 3])],
                     [1, c, h, h], [1, c, 2 * h, 2 * h],
                     {"sc": np.array([1, 1, 2, 2], np.float32), "W": rng.standard_normal((c, c // group, 3, 3))}), (1, c, h, h)

    def reach(c, w, x_dims, **attrs):
        """One ConvTranspose beyond clean xs (docs/forms.md), its output dims left to ONNX Runtime."""
        y_dims = ["y%d" % i for i in range(len(x_dims))]
        return model([helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], name="up", **attrs)], list(x_dims), y_dims,
                     {"W": w, "B": rng.standard_normal(c)}), tuple(x_dims)

    def diagonal(c, k):
        w = np.zeros((c, c, k, k))
        w[range(c), range(c)] = rng.standard_normal((c, k, k))
        return w

    cases = {
        "k4s2p1_dw": deconv(8, 1, 4, 2, [1, 1, 1, 1], 0),
        # openvino keeps a ConvTranspose whose output is the graph's (the cases above) and rewrites this one.
        "k4s2p1_dw_relu": deconv(8, 1, 4, 2, [1, 1, 1, 1], 0, then="Relu"),
        "k6s3p2op1_dw": deconv(4, 1, 6, 3, [2, 2, 2, 2], 1),
        "k6s3p2op1_dw_N2": deconv(4, 2, 6, 3, [2, 2, 2, 2], 1),
        "nearest_conv_dw": nearest_conv(8, 8),
        "nearest_conv_dense_C64": nearest_conv(64, 1),
        "nearest_conv_dense_C16": nearest_conv(16, 1),
        # GTCRN's dilated stride 1; DeepFilterNet3's (1,2) strides at 64 and 16 channels; FCN's group-1 diagonal k4 s2
        # (uncropped 2H+2) at its 21 classes; a 1-D x2.
        "s1_dilated": reach(16, rng.standard_normal((16, 1, 3, 3)), (1, 16, 14, 6), group=16, strides=[1, 1], dilations=[5, 1],
                            pads=[10, 1, 10, 1]),
        "s12_C64": reach(64, rng.standard_normal((64, 1, 1, 3)), (1, 64, 5, 8), group=64, strides=[1, 2], pads=[0, 1, 0, 1],
                         output_padding=[0, 1]),
        "s12_C16": reach(16, rng.standard_normal((16, 1, 1, 3)), (1, 16, 5, 8), group=16, strides=[1, 2], pads=[0, 1, 0, 1],
                         output_padding=[0, 1]),
        "diagonal_k4s2": reach(21, diagonal(21, 4), (1, 21, 6, 6), group=1, strides=[2, 2]),
        # Outside what ort's rules were measured on (diagonal at 21-64 channels, stride 1 at k3): ort keeps them.
        "diagonal_k4s2_C3": reach(3, diagonal(3, 4), (1, 3, 6, 6), group=1, strides=[2, 2]),
        "s1_k1_C16": reach(16, rng.standard_normal((16, 1, 1, 1)), (1, 16, 6, 6), group=16, strides=[1, 1]),
        "one_d_s2_C64": reach(64, rng.standard_normal((64, 1, 4)), (1, 64, 9), group=64, strides=[2], pads=[1, 1]),
    }
    reach_joins = {  # "Conv": one Conv, nothing to join; "Reshape": the interleave
        "xnnpack": {"s1_dilated": "Conv", "s12_C64": "Reshape", "s12_C16": None, "diagonal_k4s2": "DCR", "one_d_s2_C64": "Reshape",
                    "diagonal_k4s2_C3": "DCR", "s1_k1_C16": "Conv"},
        "litert": {"s1_dilated": "Conv", "s12_C64": "Reshape", "s12_C16": "Reshape", "diagonal_k4s2": "DCR", "one_d_s2_C64": "Reshape",
                   "diagonal_k4s2_C3": "DCR", "s1_k1_C16": "Conv"},
        # ExecuTorch joins 1-D phases by Flatten and Unsqueeze (batch 1): onnx2torch's Reshape does not pass torch.export.
        "executorch": {"s1_dilated": "Conv", "s12_C64": None, "s12_C16": None, "diagonal_k4s2": "Gather", "one_d_s2_C64": "Flatten",
                       "diagonal_k4s2_C3": "Gather", "s1_k1_C16": "Conv"},
        # A depthwise ConvTranspose1d is a family of its own, which ort measured faster (1.23x-1.96x, k 3-12, C 24-1090).
        "ort": {"s1_dilated": "Conv", "s12_C64": None, "s12_C16": None, "diagonal_k4s2": "DCR", "one_d_s2_C64": "Reshape",
                "diagonal_k4s2_C3": None, "s1_k1_C16": None},
    }
    # What each target must do with each case: the op that joins the phases, or None when it keeps the node.
    joins = {
        "xnnpack": {c: "DCR" for c in cases},
        "litert": {**{c: "DCR" for c in cases}, "nearest_conv_dw": None},
        # The default keeps every ConvTranspose and every upsampler but nearest + 1x1 Conv (none here): no join both
        # converts and pays on all six runtimes.
        "default": {c: None for c in cases},
        "executorch": {**{c: "Gather" for c in cases}, "k6s3p2op1_dw": "Transpose"},
        "ort": {**{c: None for c in cases}, "nearest_conv_dense_C64": "DCR"},
        # openvino: dense nearest + 3x3 Conv from 64 channels, and a depthwise ConvTranspose with square strides,
        # k 4-6, s 2-3, unless its output is the graph's output.
        "openvino": {**{c: None for c in cases}, "nearest_conv_dense_C64": "DCR", "k4s2p1_dw_relu": "DCR"},
        # mnn: nearest + 3x3 Conv, depthwise up to 64 channels and dense up to 16; it keeps every ConvTranspose.
        "mnn": {**{c: None for c in cases}, "nearest_conv_dw": "DCR", "nearest_conv_dense_C16": "DCR"},
        # ncnn: no join converts through pnnx, so it keeps every upsampler.
        "ncnn": {c: None for c in cases},
    }
    for target, per_case in reach_joins.items():
        joins[target].update(per_case)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (m, x_dims) in cases.items():
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(m, src)
            x = rng.uniform(-1, 1, x_dims).astype(np.float32)
            expected = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
            for target, per_case in joins.items():
                want = per_case[name]
                out = os.path.join(tmp, "%s.%s.onnx" % (name, target))
                run = subprocess.run([tool, src, "-o", out, "--target", target, "-q"], capture_output=True, text=True)
                where = "%s --target %s" % (name, target)
                if run.returncode != 0:
                    problems.append("%s: exit %d: %s" % (where, run.returncode, run.stderr.strip()))
                    continue
                rewritten = onnx.load(out)
                ops = [n.op_type for n in rewritten.graph.node]
                d2s = [n for n in rewritten.graph.node if n.op_type == "DepthToSpace"]
                if want is None:
                    if d2s or onnx.load(src).graph.node != rewritten.graph.node:
                        problems.append("%s: expected the node kept, got %s" % (where, ops))
                    print("%-26s %-10s kept" % (name, target))
                    continue
                if want in ("Conv", "Reshape", "Flatten"):
                    if d2s or "ConvTranspose" in ops or want not in ops:
                        problems.append("%s: expected %s and no DepthToSpace or ConvTranspose, got %s" % (where, want, ops))
                elif len(d2s) != 1:
                    problems.append("%s: expected one DepthToSpace, got %s" % (where, ops))
                    continue
                else:
                    mode = next((a.s.decode() for a in d2s[0].attribute if a.name == "mode"), "DCR")
                    if want == "DCR" and (mode != "DCR" or "Gather" in ops or "Transpose" in ops):
                        problems.append("%s: expected a DCR DepthToSpace alone, got %s (mode %s)" % (where, ops, mode))
                    if want in ("Gather", "Transpose") and (mode != "CRD" or want not in ops):
                        problems.append("%s: expected %s + CRD DepthToSpace, got %s (mode %s)" % (where, want, ops, mode))
                got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
                err = float(np.max(np.abs(got - expected))) / max(1.0, float(np.max(np.abs(expected))))
                if got.shape != expected.shape or err > 1e-5:
                    problems.append("%s: ONNX Runtime output differs (shape %s vs %s, rel error %.2e)"
                                    % (where, got.shape, expected.shape, err))
                print("%-26s %-10s join %-9s rel error %.1e" % (name, target, want, err))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
