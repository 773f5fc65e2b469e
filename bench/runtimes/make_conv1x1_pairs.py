"""Writes original/rewritten pairs for nearest x s upsampling followed by a 1x1 Conv, to measure on each runtime
whether running the 1x1 Conv first pays:

    original   y = Conv1x1(Resize_nearest(x, s))       (how PyTorch exports F.interpolate(nearest) + 1x1 Conv)
    rewritten  y = Resize_nearest(Conv1x1(x), s)       (exact: a 1x1 Conv commutes with nearest upsampling, and
                                                        it then does 1/s^2 of the original's multiply-adds)

Both use the same seeded weights and bias, ONNX opset 17, N = 1 and fixed shapes; the Resize has constant scales
[1, 1, s, s] (an initializer), mode nearest, coordinate_transformation_mode asymmetric, nearest_mode floor.

Sweep: s in {2, 3}, H = W in {32, 64}, (C_in, C_out) in CHANNELS (group 1), plus a depthwise 1x1 Conv
(group = C = 64). For case NAME (e.g. s2_ci64_co16_h32, or s2_dw64_h32 for the depthwise one) it writes
NAME.onnx (original) and NAME.conv1x1first.onnx (rewritten) into OUT_DIR, and prints one line per pair.

--d2s also writes NAME.conv1x1first_d2s.onnx: the 1x1 Conv first, then nearest x s spelled as a Concat of s*s
copies of its output and DepthToSpace(DCR), y = DepthToSpace(Concat([t] * s*s)), which XNNPACK-based runtimes
can delegate where they do not take a nearest Resize (LiteRT's delegate takes a Concat of 2 to 5 inputs: s = 2).

Usage: make_conv1x1_pairs.py OUT_DIR [--seed N] [--check] [--d2s]   (any Python with onnx and numpy)
--check also runs the models and a numpy reference on ONNX Runtime's CPU provider (needs onnxruntime) and prints
the max abs differences; it exits 1 if the pair differs by more than 1e-5 relative to the output's largest |value|.
"""
import argparse
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
STRIDES = [2, 3]
SIZES = [32, 64]
CHANNELS = [(16, 16), (64, 64), (256, 256), (64, 16), (16, 64), (32, 1), (256, 64)]
DEPTHWISE = [64]


def cases():
    """(name, s, H, C_in, C_out, group) for every pair of the sweep."""
    for s in STRIDES:
        for h in SIZES:
            for ci, co in CHANNELS:
                yield f"s{s}_ci{ci}_co{co}_h{h}", s, h, ci, co, 1
            for c in DEPTHWISE:
                yield f"s{s}_dw{c}_h{h}", s, h, c, c, c


def weights(name, ci, co, group, seed):
    """Seeded from the case name and --seed, so each case's weights are fixed whatever else the sweep holds."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    cig = ci // group
    w = (rng.standard_normal((co, cig, 1, 1)) / np.sqrt(cig)).astype(np.float32)
    b = (0.1 * rng.standard_normal(co)).astype(np.float32)
    return w, b


def make_model(name, s, h, ci, co, group, w, b, conv_first, d2s=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ci, h, h])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, co, s * h, s * h])
    inits = [numpy_helper.from_array(w, "conv_w"), numpy_helper.from_array(b, "conv_b")]
    if not d2s:
        inits.append(numpy_helper.from_array(np.array([1, 1, s, s], np.float32), "scales"))

    def resize(src, dst):
        return helper.make_node("Resize", [src, "", "scales"], [dst], name="upsample", mode="nearest",
                                coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    def conv(src, dst):
        return helper.make_node("Conv", [src, "conv_w", "conv_b"], [dst], name="conv1x1", kernel_shape=[1, 1],
                                strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=group)

    if d2s:  # nearest x s of t as DepthToSpace(DCR) of s*s copies: channel (phase * C + c) holds t[c]
        nodes = [conv("x", "t"), helper.make_node("Concat", ["t"] * (s * s), ["u"], name="tile", axis=1),
                 helper.make_node("DepthToSpace", ["u"], ["y"], name="upsample", blocksize=s, mode="DCR")]
        mids = {"t": [1, co, h, h], "u": [1, s * s * co, h, h]}
    elif conv_first:
        nodes = [conv("x", "t"), resize("t", "y")]
        mids = {"t": [1, co, h, h]}
    else:
        nodes = [resize("x", "t"), conv("t", "y")]
        mids = {"t": [1, ci, s * h, s * h]}
    graph = helper.make_graph(nodes, name, [x], [y], inits,
                              value_info=[helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in mids.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="make_conv1x1_pairs.py")
    model.ir_version = 8  # opset 17's IR version, which every runtime measured here loads
    onnx.checker.check_model(model, full_check=True)
    return model


def reference(x, s, w, b, group):
    """Conv1x1 then nearest x s in numpy (float64), the function both models compute."""
    co, cig = w.shape[:2]
    xg = x[0].astype(np.float64).reshape(group, cig, *x.shape[2:])
    wg = w[:, :, 0, 0].astype(np.float64).reshape(group, co // group, cig)
    t = np.einsum("goi,gihw->gohw", wg, xg).reshape(co, *x.shape[2:]) + b[:, None, None]
    return t.repeat(s, axis=1).repeat(s, axis=2)[None]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="run both and a numpy reference on ONNX Runtime")
    parser.add_argument("--d2s", action="store_true", help="also write NAME.conv1x1first_d2s.onnx (Concat + DepthToSpace)")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.check:
        import onnxruntime
    bad = 0
    for name, s, h, ci, co, group in cases():
        w, b = weights(name, ci, co, group, args.seed)
        paths = []
        forms = [(False, False, ""), (True, False, ".conv1x1first")] + ([(True, True, ".conv1x1first_d2s")] if args.d2s else [])
        for conv_first, d2s, suffix in forms:
            path = args.out_dir / f"{name}{suffix}.onnx"
            onnx.save(make_model(name, s, h, ci, co, group, w, b, conv_first, d2s), str(path))
            paths.append(path)
        macs_o, macs_r = (s * h) ** 2 * co * ci // group, h * h * co * ci // group
        line = f"{paths[0].name} {paths[1].name}  s={s} H={h} C_in={ci} C_out={co} group={group}  MACs {macs_o} -> {macs_r}"
        if args.check:
            x = np.random.default_rng(1).standard_normal((1, ci, h, h)).astype(np.float32)
            outs = [onnxruntime.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
                    for p in paths]
            ref = reference(x, s, w, b, group)
            pair = max(float(np.abs(outs[0] - o).max()) for o in outs[1:])
            scale = float(np.abs(ref).max())
            line += (f"  ORT max abs: original vs rewritten {pair:.2e}, vs numpy "
                     + " / ".join(f"{np.abs(o - ref).max():.2e}" for o in outs) + f" (scale {scale:.2f})")
            bad += pair > 1e-5 * scale
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
