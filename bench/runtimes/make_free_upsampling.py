"""MI-GAN form (a-img) with every remaining ConvTranspose replaced by a nearest x s Resize of the same output shape:
the upsamplers made (almost) free, for the free-upsampling bound on LiteRT (BENCHMARKS.md, "Each target on its
runtime"). Usage: make_free_upsampling.py IN.onnx OUT.onnx (any Python with onnx and numpy)."""
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper
m = onnx.load(sys.argv[1])
g = m.graph
nodes = []
n_replaced = 0
for n in g.node:
    if n.op_type != "ConvTranspose":
        nodes.append(n)
        continue
    s = next(a.ints[0] for a in n.attribute if a.name == "strides")
    sc = n.name + "_free_scales"
    g.initializer.append(numpy_helper.from_array(np.array([1, 1, s, s], np.float32), sc))
    nodes.append(helper.make_node("Resize", [n.input[0], "", sc], [n.output[0]], name=n.name + "_free", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    n_replaced += 1
del g.node[:]
g.node.extend(nodes)
used = {i for n in g.node for i in n.input}
keep = [i for i in g.initializer if i.name in used]
del g.initializer[:]
g.initializer.extend(keep)
onnx.checker.check_model(m)
onnx.save(m, sys.argv[2])
print("replaced", n_replaced, "ConvTranspose nodes")
