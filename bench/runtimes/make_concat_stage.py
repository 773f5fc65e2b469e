"""Writes a U-Net decoder stage with a skip connection, as Monodepth2's depth decoder and PyTorch export it, to time
the nearest_concat_conv form (the Conv split by its input channels) on each runtime:

    u = Resize_nearest(x, s)                  x [1, C_up, H, W]; asymmetric / floor, scales [1, 1, s, s]
    c = Concat(u, skip)                       skip [1, C_skip, sH, sW], axis 1
    v = Pad(c, reflect, 1)                    Monodepth2's Conv3x3: ReflectionPad2d(1) + Conv2d(3x3)
    y = Conv3x3(v, W, B)                      C_up + C_skip -> C_out (its ConvBlock's ELU left out: the executor has none)

Run the tool on the file (`--forms nearest_concat_conv --verify --bench`, and `--runtime ort`) for the per-layer
ratio. Default: a Monodepth2-like stage, x of 256 channels at 12x40 upsampled x2, a 128-channel skip at 24x80, a
3x3 Conv to 128.

Usage: make_concat_stage.py OUT.onnx [--c-up 256] [--c-skip 128] [--c-out 128] [--h 12] [--w 40] [--s 2] [--seed 0]
(any Python with onnx and numpy)
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def stage(c_up, c_skip, c_out, h, w, s, seed):
    """The stage's ModelProto, opset 17, seeded weights scaled like PyTorch's default init."""
    rng = np.random.default_rng(seed)
    fan_in = (c_up + c_skip) * 9
    weight = (rng.uniform(-1, 1, (c_out, c_up + c_skip, 3, 3)) / np.sqrt(fan_in)).astype(np.float32)
    bias = (rng.uniform(-1, 1, c_out) / np.sqrt(fan_in)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array([1, 1, s, s], np.float32), "scales"),
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
        numpy_helper.from_array(weight, "conv.weight"),
        numpy_helper.from_array(bias, "conv.bias"),
    ]
    nodes = [
        helper.make_node("Resize", ["x", "", "scales"], ["u"], name="upsample", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Concat", ["u", "skip"], ["c"], name="cat", axis=1),
        helper.make_node("Pad", ["c", "pads"], ["v"], name="pad", mode="reflect"),
        helper.make_node("Conv", ["v", "conv.weight", "conv.bias"], ["y"], name="upconv", kernel_shape=[3, 3]),
    ]
    graph = helper.make_graph(
        nodes, "concat_stage",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c_up, h, w]),
         helper.make_tensor_value_info("skip", TensorProto.FLOAT, [1, c_skip, s * h, s * w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c_out, s * h, s * w])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_concat_stage")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--c-up", type=int, default=256)
    parser.add_argument("--c-skip", type=int, default=128)
    parser.add_argument("--c-out", type=int, default=128)
    parser.add_argument("--h", type=int, default=12)
    parser.add_argument("--w", type=int, default=40)
    parser.add_argument("--s", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    onnx.save(stage(a.c_up, a.c_skip, a.c_out, a.h, a.w, a.s, a.seed), a.out)


if __name__ == "__main__":
    main()
