"""BigVGAN v2's UpSample1d (alias_free_activation/torch/resample.py) as torch.onnx.export writes it, one model per
stage of the 24 kHz config for one second of audio: replicate Pad 5 + 5, a depthwise ConvTranspose1d (kernel 12,
stride 2, the kaiser-sinc filter), x2, the crop [15:-15]; on [1, C, L] for (C, L) = (768, 375), (384, 1500),
(192, 3000), (96, 6000), (48, 12000), (24, 24000). Then each rewritten by the tool with the given target, so that
bench_runtimes.py times the pairs:

  python bench/runtimes/make_upsample1d_layers.py OUT_DIR [--target litert] [--tool build/cli/dwdeconv-rewrite]
      [--nearest-1x1]   (instead: nearest x2 + 1x1 Conv1d, Kokoro's decoder, at NEAREST_1X1's shapes)
      [--lone]          (instead: the depthwise ConvTranspose1d alone, no Pad, gain or crop, at the same stages)
  python bench/runtimes/bench_runtimes.py --runtime ort litert $(cat OUT_DIR/pairs.txt) --work /tmp/up1d

(any Python with onnx and numpy; the filter is computed here as filter.py computes it, in numpy)."""
import argparse
import math
import subprocess
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = [(768, 375), (384, 1500), (192, 3000), (96, 6000), (48, 12000), (24, 24000)]
# (C_in, C_out, L) of the nearest x2 + 1x1 Conv1d pairs (Kokoro's decoder: 1090 -> 512).
NEAREST_1X1 = [(1090, 512, 256), (512, 512, 512), (256, 128, 1024), (64, 64, 4096), (16, 16, 8192)]


def kaiser_sinc_filter1d(cutoff=0.25, half_width=0.3, kernel_size=12) -> np.ndarray:
    half_size = kernel_size // 2
    delta_f = 4 * half_width
    a = 2.285 * (half_size - 1) * math.pi * delta_f + 7.95
    beta = 0.1102 * (a - 8.7) if a > 50.0 else (0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21.0) if a >= 21.0 else 0.0)
    window = np.kaiser(kernel_size, beta)
    time = np.arange(-half_size, half_size) + 0.5
    f = 2 * cutoff * window * np.sinc(2 * cutoff * time)
    return (f / f.sum()).astype(np.float32)


def checked(graph: onnx.GraphProto) -> onnx.ModelProto:
    """The model of `graph` at opset 17, IR 8, as the checker passes it."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def upsample1d(c: int, length: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad", mode="edge"),
             helper.make_node("ConvTranspose", ["xp", "filter"], ["u"], name="up", group=c, kernel_shape=[12], strides=[2]),
             helper.make_node("Mul", ["u", "ratio"], ["g"], name="gain"),
             helper.make_node("Slice", ["g", "starts", "ends", "axes"], ["y"], name="crop")]
    inits = [numpy_helper.from_array(np.array([0, 0, 5, 0, 0, 5], np.int64), "pads"),
             numpy_helper.from_array(np.tile(kaiser_sinc_filter1d(), (c, 1, 1)), "filter"),
             numpy_helper.from_array(np.array(2.0, np.float32), "ratio"),
             numpy_helper.from_array(np.array([15], np.int64), "starts"),
             numpy_helper.from_array(np.array([-15], np.int64), "ends"),
             numpy_helper.from_array(np.array([2], np.int64), "axes")]
    graph = helper.make_graph(nodes, "upsample1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * length])], inits)
    return checked(graph)


def lone_conv_transpose(c: int, length: int) -> onnx.ModelProto:
    """UpSample1d's depthwise ConvTranspose1d without its Pad, gain and crop: [1, C, L] -> [1, C, 2L + 10]."""
    nodes = [helper.make_node("ConvTranspose", ["x", "filter"], ["y"], name="up", group=c, kernel_shape=[12], strides=[2])]
    inits = [numpy_helper.from_array(np.tile(kaiser_sinc_filter1d(), (c, 1, 1)), "filter")]
    graph = helper.make_graph(nodes, "ct1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * length + 10])], inits)
    return checked(graph)


def nearest_1x1(c_in: int, c_out: int, length: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["u"], name="up", mode="nearest"),
             helper.make_node("Conv", ["u", "w", "b"], ["y"], name="conv1x1", kernel_shape=[1])]
    inits = [numpy_helper.from_array(np.array([1, 1, 2], np.float32), "scales"),
             numpy_helper.from_array((rng.standard_normal((c_out, c_in, 1)) * 0.05).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32), "b")]
    graph = helper.make_graph(nodes, "up1x1", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c_in, length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c_out, 2 * length])], inits)
    return checked(graph)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--target", default="litert")
    parser.add_argument("--tool", default="build/cli/dwdeconv-rewrite")
    parser.add_argument("--nearest-1x1", action="store_true", help="nearest x2 + 1x1 Conv1d pairs instead")
    parser.add_argument("--lone", action="store_true", help="the depthwise ConvTranspose1d alone instead")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = []
    if args.nearest_1x1:
        cases = [(f"n1x1_C{ci}_{co}_L{n}", nearest_1x1(ci, co, n)) for ci, co, n in NEAREST_1X1]
    elif args.lone:
        cases = [(f"ct1d_C{c}_L{n}", lone_conv_transpose(c, n)) for c, n in STAGES]
    else:
        cases = [(f"upsample1d_C{c}_L{n}", upsample1d(c, n)) for c, n in STAGES]
    for name, model in cases:
        original = args.out / f"{name}.onnx"
        rewritten = args.out / f"{name}.{args.target}.onnx"
        onnx.save(model, original)
        subprocess.run([args.tool, str(original), "-o", str(rewritten), "--target", args.target, "-q"], check=True)
        if [n.op_type for n in onnx.load(rewritten).graph.node] == [n.op_type for n in model.graph.node]:
            print(f"--target {args.target} keeps {name}: left out of the pairs (nothing rewritten to time)")
            continue
        pairs.append(f"--pair {original} {rewritten}")
    (args.out / "pairs.txt").write_text(" ".join(pairs) + "\n")
    print(f"wrote {len(pairs)} pairs; their --pair arguments are in {args.out / 'pairs.txt'}")


if __name__ == "__main__":
    main()
