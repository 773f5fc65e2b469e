"""Strides that differ per axis, and outputs a whole number of strides longer or shorter than s*H, through the binary
under every target, judged by ONNX Runtime.

The family: depthwise ConvTransposes with s_h != s_w, both > 1, on a grid of kernels, pads and output_padding whose
output on each axis is s*(H + q) for a whole q (-1, 0, 1 or 2; a clean upscale is q = 0), and 1-D ones (a rank-3
weight: s on the one axis) with the same per-axis grid. Every kernel is at least its stride on each axis, so every
phase has taps and the polyphase rewrite covers the whole family (docs/forms.md, "Beyond clean xs"). For each model
and target the tool must exit 0 (never 3: a rewrite whose own validation fails is a bug of the emitter), and:
- `--target litert` rewrites every one (its rules keep none of this family: docs/targets.md), joined by the
  interleave (no DepthToSpace, a Reshape, no ConvTranspose left);
- whatever a target rewrites computes what ONNX Runtime computes for the original, on a seeded input, to 1e-5 of the
  output's scale, with the same output shape.

Usage: check_strides_ort.py DWDECONV_REWRITE. Exits 77 (ctest's skip) with a message when onnx, numpy or
onnxruntime is not importable (set DWDECONV_PYTHON to an interpreter that has them)."""
import itertools
import os
import subprocess
import sys
import tempfile

TARGETS = ["default", "xnnpack", "litert", "ort", "executorch"]


def axis_grid(s):
    """(k, pad_begin, pad_end, output_padding, q) of one axis with stride s: k in s..s+2, every pad split and
    output_padding whose excess k + op - Pb - Pe - s is a whole number q of strides, q in -1..2."""
    out = []
    for k in range(s, s + 3):
        for op in range(s):
            for pb in range(k):
                for pe in range(k):
                    excess = k + op - pb - pe - s
                    if excess % s == 0 and -1 <= excess // s <= 2:
                        out.append((k, pb, pe, op, excess // s))
    return out


def pick(grid, n, salt):
    """n entries spread over the grid, deterministic, always including one with q > 0 and one with q = 0."""
    if len(grid) <= n:
        return grid
    step = len(grid) / n
    chosen = [grid[int((i + salt % 7 / 7) * step) % len(grid)] for i in range(n)]
    for q in (1, 0):
        if not any(g[4] == q for g in chosen):
            chosen[-1 if q else 0] = next(g for g in grid if g[4] == q)
    return chosen


def main():
    tool = sys.argv[1]
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        import onnxruntime as ort
    except ImportError as e:
        print("SKIPPED: %s in %s; install onnx, numpy and onnxruntime (pip) to check strides on ONNX Runtime"
              % (e, sys.executable))
        return 77
    rng = np.random.default_rng(5)

    def model(c, kernel, strides, pads, output_padding, x_dims):
        rank = len(strides)
        node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], name="up", group=c, strides=list(strides),
                                pads=list(pads), output_padding=list(output_padding), kernel_shape=list(kernel))
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["y%d" % i for i in range(rank + 2)])],
                              [numpy_helper.from_array(rng.standard_normal((c, 1) + tuple(kernel)).astype(np.float32), "W"),
                               numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "B")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)

    cases = {}
    # 2-D: each ordered pair of distinct strides in 2..4, a spread of each axis's grid, crossed. 64 channels so that
    # --target xnnpack rewrites them too (it keeps this family below 64 channels).
    for sh, sw in itertools.permutations((2, 3, 4), 2):
        for gy, gx in itertools.product(pick(axis_grid(sh), 3, sh), pick(axis_grid(sw), 3, sw + 1)):
            (kh, pbh, peh, oph, qh), (kw, pbw, pew, opw, qw) = gy, gx
            name = "s%dx%d_k%dx%d_p%d%d%d%d_op%d%d_q%d%d" % (sh, sw, kh, kw, pbh, pbw, peh, pew, oph, opw, qh, qw)
            cases[name] = model(64, (kh, kw), (sh, sw), (pbh, pbw, peh, pew), (oph, opw), [1, 64, 5, 6])
    # The case the review found (13 of 390 fuzzed geometries failed like it): k4, strides (4, 2), pads (1, 0, 0, 0),
    # output_padding (1, 0): H is a clean x4, W is 2W + 2.
    cases["s4x2_k4x4_p1000_op10_q01"] = model(64, (4, 4), (4, 2), (1, 0, 0, 0), (1, 0), [1, 64, 5, 6])
    # 1-D: s 2..4, a spread of the axis grid each.
    for s in (2, 3, 4):
        for k, pb, pe, op, q in pick(axis_grid(s), 4, s):
            cases["1d_s%d_k%d_p%d%d_op%d_q%d" % (s, k, pb, pe, op, q)] = model(64, (k,), (s,), (pb, pe), (op,), [1, 64, 7])

    problems = []
    rewritten_by = {t: 0 for t in TARGETS}
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in cases.items():
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(m, src)
            x_dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
            x = rng.uniform(-1, 1, x_dims).astype(np.float32)
            expected = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
            for target in TARGETS:
                out = os.path.join(tmp, "%s.%s.onnx" % (name, target))
                run = subprocess.run([tool, src, "-o", out, "--target", target, "-q"], capture_output=True, text=True)
                where = "%s --target %s" % (name, target)
                if run.returncode != 0:
                    problems.append("%s: exit %d: %s" % (where, run.returncode, run.stderr.strip()[-400:]))
                    continue
                ops = [n.op_type for n in onnx.load(out).graph.node]
                rewritten = "ConvTranspose" not in ops
                if target == "litert" and (not rewritten or "DepthToSpace" in ops or "Reshape" not in ops):
                    problems.append("%s: expected the interleave join (Reshape, no DepthToSpace or ConvTranspose), got %s"
                                    % (where, ops))
                if not rewritten:
                    continue
                rewritten_by[target] += 1
                got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
                err = float(np.max(np.abs(got - expected))) / max(1.0, float(np.max(np.abs(expected)))) if got.shape == expected.shape \
                    else float("inf")
                if err > 1e-5:
                    problems.append("%s: ONNX Runtime output differs (shape %s vs %s, rel error %.2e)"
                                    % (where, got.shape, expected.shape, err))
            print("%-34s %s" % (name, "ok" if not any(p.startswith(name + " ") for p in problems) else "PROBLEM"))
    print("geometries: %d; rewritten per target: %s" % (len(cases), rewritten_by))
    # xnnpack rewrites this family from 64 channels as litert does: a sweep where it rewrote nothing checked less.
    if rewritten_by["xnnpack"] != len(cases):
        problems.append("--target xnnpack rewrote %d of %d (expected all, at 64 channels)" % (rewritten_by["xnnpack"], len(cases)))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
