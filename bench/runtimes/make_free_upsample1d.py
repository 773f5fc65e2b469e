"""BigVGAN (or any model) with every UpSample1d made free: each region Pad -> 1-D ConvTranspose -> [Mul] -> Slice that
form upsample1d matches is replaced by a nearest x s Resize of the Pad's input, an output of the same shape at almost
no cost. The free-upsampling bound of BENCHMARKS.md, "Audio: 1-D upsamplers". Usage: make_free_upsample1d.py IN.onnx
OUT.onnx (any Python with onnx and numpy)."""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

m = onnx.load(sys.argv[1])
g = m.graph
producer = {o: n for n in g.node for o in n.output}
drop, add, replaced = set(), {}, 0
for n in g.node:
    if n.op_type != "Slice":
        continue
    mul = producer.get(n.input[0])
    ct = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else mul
    if ct is None or ct.op_type != "ConvTranspose":
        continue
    pad = producer.get(ct.input[0])
    if pad is None or pad.op_type != "Pad":
        continue
    s = next(a.ints[0] for a in ct.attribute if a.name == "strides")
    scales = n.name + "_free_scales"
    g.initializer.append(numpy_helper.from_array(np.array([1, 1, s], np.float32), scales))
    add[id(n)] = helper.make_node("Resize", [pad.input[0], "", scales], [n.output[0]], name=n.name + "_free", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    drop.update(id(x) for x in (pad, ct, mul, n) if x is not None)
    replaced += 1
nodes = [add[id(n)] if id(n) in add else n for n in g.node if id(n) not in drop or id(n) in add]
del g.node[:]
g.node.extend(nodes)
onnx.save(m, sys.argv[2], save_as_external_data=m.ByteSize() > 2**31 - 2**20)
print("replaced", replaced, "UpSample1d regions")
