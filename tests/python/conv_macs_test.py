"""bench/conv_macs.py on tiny models built with the onnx package, whose MACs are worked out by hand below: a dense
Conv, a strided depthwise Conv, a grouped ConvTranspose and a 1-D Conv, batch 2; the per-node counts, the total,
the relative change between two models, and the errors (a symbolic dim, a file that is not a model) naming file and
node with the node's name escaped. Skipped, saying so, where the interpreter has no onnx package."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DWDECONV_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SCRIPT = SOURCE / "bench" / "conv_macs.py"
HAS_ONNX = importlib.util.find_spec("onnx") is not None

if HAS_ONNX:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    sys.path.insert(0, str(SCRIPT.parent))
    import conv_macs  # noqa: E402


def weight(name, dims):
    return numpy_helper.from_array(np.ones(dims, dtype=np.float32), name)


def make_model(path, batch=2, with_dense=True, conv_name="dense"):
    """x [batch, 4, 5, 6] -> (dense 3x3 Conv 4 -> 8, pads 1) -> Relu -> depthwise 3x3 Conv stride 2 pads 1
    -> grouped ConvTranspose k4 s2 p1, group 2, 8 -> 4; and a separate 1-D Conv on z [batch, 3, 10].
    Without the dense Conv the Relu reads an 8-channel input directly."""
    nodes, inits = [], [weight("wdw", [8, 1, 3, 3]), weight("wt", [8, 2, 4, 4]), weight("w1d", [6, 3, 5])]
    x_channels = 8
    if with_dense:
        x_channels = 4
        inits.append(weight("wdense", [8, 4, 3, 3]))
        nodes.append(helper.make_node("Conv", ["x", "wdense"], ["a"], name=conv_name, pads=[1, 1, 1, 1]))
    nodes += [helper.make_node("Relu", ["a" if with_dense else "x"], ["r"], name="relu"),
              helper.make_node("Conv", ["r", "wdw"], ["b"], name="depthwise", group=8, strides=[2, 2],
                               pads=[1, 1, 1, 1]),
              helper.make_node("ConvTranspose", ["b", "wt"], ["y"], name="up", group=2, strides=[2, 2],
                               pads=[1, 1, 1, 1]),
              helper.make_node("Conv", ["z", "w1d"], ["y1d"], name="conv1d")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, x_channels, 5, 6]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 3, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y1d", TensorProto.FLOAT, None)],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    Path(path).write_bytes(model.SerializeToString())


def make_reflect_pad_model(path):
    """x [1, 2, 4, 4] -> Pad(reflect) -> 3x3 Conv 2 -> 3, no pads: the pads as torch.onnx.export writes a
    ReflectionPad2d(1) at opset 11, arithmetic on literals that ONNX shape inference does not evaluate:
    Cast(Reshape(Transpose(Slice(Reshape(Concat([1, 1, 1, 1], ConstantOfShape([4])), [-1, 2]), -1, -inf, 0, -1)), -1))."""
    def const(name, values):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64)))

    nodes = [const("listed", [1, 1, 1, 1]), const("four", [4]),
             helper.make_node("ConstantOfShape", ["four"], ["zeros"],
                              value=numpy_helper.from_array(np.array([0], np.int64))),
             helper.make_node("Concat", ["listed", "zeros"], ["all"], axis=0),
             const("pairs_shape", [-1, 2]), helper.make_node("Reshape", ["all", "pairs_shape"], ["pairs"]),
             const("start", [-1]), const("end", [-9223372036854775807]), const("axis", [0]), const("step", [-1]),
             helper.make_node("Slice", ["pairs", "start", "end", "axis", "step"], ["reversed"]),
             helper.make_node("Transpose", ["reversed"], ["by_side"], perm=[1, 0]),
             const("flat", [-1]), helper.make_node("Reshape", ["by_side", "flat"], ["pads_any"]),
             helper.make_node("Cast", ["pads_any"], ["pads"], to=TensorProto.INT64),
             helper.make_node("Pad", ["x", "pads"], ["padded"], mode="reflect"),
             helper.make_node("Conv", ["padded", "w"], ["y"], name="conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight("w", [3, 2, 3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    Path(path).write_bytes(model.SerializeToString())


# Worked by hand, batch 2:
# dense:     output [2, 8, 5, 6], 4 input channels x 3x3 taps:      2*8*5*6 * 4*9   = 17280
# depthwise: output [2, 8, 3, 3] ((5+2-3)//2+1 = 3, (6+2-3)//2+1 = 3), 1 channel x 9 taps: 2*8*3*3 * 9 = 1296
# up:        input [2, 8, 3, 3], each value feeds C_out/group = 2 channels x 4x4 taps: 2*8*3*3 * 2*16 = 4608
# conv1d:    output [2, 6, 6] (10-5+1), 3 channels x 5 taps:         2*6*6 * 3*5     = 1080
EXPECTED = {"dense": 17280, "depthwise": 1296, "up": 4608, "conv1d": 1080}
TOTAL = 17280 + 1296 + 4608 + 1080  # 24264
TOTAL_WITHOUT_DENSE = TOTAL - 17280  # 6984


@unittest.skipIf(not HAS_ONNX, f"{sys.executable} has no onnx package")
class ConvMacsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)

    def test_per_node_macs_and_total(self):
        path = self.dir / "m.onnx"
        make_model(path)
        counts = conv_macs.conv_macs(str(path))
        self.assertEqual({name: macs for name, _, macs in counts}, EXPECTED)
        self.assertEqual([op for _, op, _ in counts], ["Conv", "Conv", "ConvTranspose", "Conv"])
        self.assertEqual(sum(m for _, _, m in counts), TOTAL)

    def test_batch_is_counted(self):
        path = self.dir / "b1.onnx"
        make_model(path, batch=1)
        self.assertEqual(sum(m for _, _, m in conv_macs.conv_macs(str(path))), TOTAL // 2)

    def test_pads_computed_from_literals_are_folded(self):
        path = self.dir / "reflect.onnx"
        make_reflect_pad_model(path)
        # padded [1, 2, 6, 6] -> output [1, 3, 4, 4], 2 channels x 9 taps: 3*4*4 * 2*9 = 864
        self.assertEqual(conv_macs.conv_macs(str(path)), [("conv", "Conv", 864)])

    def test_folded_integer_division_truncates_toward_zero(self):
        # ONNX Div on integers truncates: -7 / 2 = -3 (NumPy's -7 // 2 is -4); shape arithmetic divides sizes.
        quotient = conv_macs._divide(np.array([7, -7, 7, -7], np.int64), np.array([2, 2, -2, -2], np.int64))
        self.assertEqual(quotient.tolist(), [3, -3, -3, 3])

    def test_two_models_print_both_totals_and_the_change(self):
        before, after = self.dir / "before.onnx", self.dir / "after.onnx"
        make_model(before)
        make_model(after, with_dense=False)
        result = self.run_script(before, after)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"{before}: 24,264 conv MACs in 4 Conv/ConvTranspose nodes", result.stdout)
        self.assertIn(f"{after}: 6,984 conv MACs in 3 Conv/ConvTranspose nodes", result.stdout)
        # (6984 - 24264) / 24264 = -0.712166...
        self.assertIn("change: 24,264 -> 6,984 conv MACs, -71.22%", result.stdout)

    def test_json_output(self):
        before, after = self.dir / "before.onnx", self.dir / "after.onnx"
        make_model(before)
        make_model(after, with_dense=False)
        result = self.run_script(before, after, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual([m["total"] for m in report["models"]], [TOTAL, TOTAL_WITHOUT_DENSE])
        self.assertEqual({n["name"]: n["macs"] for n in report["models"][0]["nodes"]}, EXPECTED)
        self.assertAlmostEqual(report["relative_change"], (6984 - 24264) / 24264)

    def test_per_node_lines(self):
        path = self.dir / "m.onnx"
        make_model(path)
        result = self.run_script(path, "--per-node")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"ConvTranspose +4,608  up\n")
        self.assertRegex(result.stdout, r"Conv +17,280  dense\n")

    def test_symbolic_dim_is_an_error_naming_file_and_node_escaped(self):
        path = self.dir / "sym.onnx"
        make_model(path, batch="N", conv_name="bad\nname")
        result = self.run_script(path)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout, "")
        self.assertIn(f"conv_macs: {path}: node 'bad\\x0aname' (Conv): the shape of its input 'x' is unknown",
                      result.stderr)

    def test_not_a_model_is_an_error_naming_the_file(self):
        path = self.dir / "junk.onnx"
        path.write_bytes(b"\x08\x07not a model at all")
        result = self.run_script(path)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"conv_macs: {path}: cannot load the model", result.stderr)


if __name__ == "__main__":
    unittest.main()
