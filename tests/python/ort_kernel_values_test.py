"""ort_adapter's values per profiled kernel (_kernel_values): the per-upsampler table reads what each ONNX Runtime
kernel computed from them (cli/upsampler_table.h), so a kernel must get the values of the node ORT ran under its name,
including the names ORT's profiler makes up for nodes without one ("<op>_<index>", its index among the model's nodes
but the Constants), and none where it cannot be told. Graphs built with the onnx package (skipped, saying so, where
the interpreter has none); no onnxruntime needed."""
import importlib.util
import sys

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


if importlib.util.find_spec("onnx") is None:
    print(f"SKIPPED: {sys.executable} has no onnx package")
    sys.exit(0)

from onnx import helper  # noqa: E402

from dwdeconv_rewrite.runtimes.ort_adapter import _kernel_values  # noqa: E402


def graph(nodes):
    return helper.make_graph(nodes, "g", [], [])


# The model ORT loaded: a Constant (not a node of ORT's graph), then two unnamed Resizes, a named Conv, an unnamed Add.
source = graph([helper.make_node("Constant", [], ["scales"], value_float=2.0),
                helper.make_node("Resize", ["x", "", "scales"], ["r1"]),
                helper.make_node("Resize", ["x2", "", "scales"], ["r2"]),
                helper.make_node("Conv", ["r1", "w"], ["c"], name="conv"),
                helper.make_node("Add", ["c", "r2"], ["y"])])
# Its optimised graph: the Conv fused with an activation into one kernel named after the Conv, a second node named
# "conv" of the same op (a hostile model: both are one entry of ORT's profile), and a new unnamed FusedConv.
optimized = graph([helper.make_node("Resize", ["x", "", "scales"], ["r1"]),
                   helper.make_node("Resize", ["x2", "", "scales"], ["r2"]),
                   helper.make_node("FusedConv", ["r1", "w"], ["a"], name="conv", domain="com.microsoft"),
                   helper.make_node("FusedConv", ["r2", "w"], ["b"], name="conv", domain="com.microsoft"),
                   helper.make_node("FusedConv", ["a", "w"], ["f"], domain="com.microsoft"),
                   helper.make_node("Add", ["f", "b"], ["y"])])
kernels = {("Resize_1", "Resize"), ("Resize_0", "Resize"), ("conv", "FusedConv"), ("FusedConv_9", "FusedConv"), ("Add_3", "Add"),
           ("ghost", "Conv"), ("Resize_7", "Resize")}
io = _kernel_values(source, optimized, kernels)
check(io.get(("Resize_0", "Resize")) == (["x", "", "scales"], ["r1"]), "Resize_0 is the model's first node but its Constant")
check(io.get(("Resize_1", "Resize")) == (["x2", "", "scales"], ["r2"]), "Resize_1 is the second: told apart by what it writes")
check(io.get(("conv", "FusedConv")) == (["r1", "w", "r2"], ["a", "b"]), "two nodes of one name and op: their values joined")
check(io.get(("FusedConv_9", "FusedConv")) == (["a", "w"], ["f"]), "a node ORT made without a name: the only one of its op")
check(io.get(("Add_3", "Add")) == (["f", "b"], ["y"]), "an unnamed Add: the only one")
check(("ghost", "Conv") not in io, "a kernel no node stands for gets no values")
check(("Resize_7", "Resize") not in io, "an index past the model's nodes, with two unnamed Resizes: none")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
