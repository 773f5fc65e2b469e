#!/usr/bin/env python3
"""The multiply-accumulates of every Conv and ConvTranspose of a fixed-shape ONNX model: per node and in total.
With a second model (the rewrite of the first) both totals and the relative change, the measure of how much
compute a rewrite saves ("conv MACs down by 20%").

A Conv's MACs are N * C_out * prod(output spatial dims) * C_in/group * prod(kernel): one multiply-add per tap of
every output value. A ConvTranspose's are N * C_in * prod(input spatial dims) * C_out/group * prod(kernel): every
input value scatters one multiply-add into each tap of each of its group's output channels. Bias adds are not
counted. Shapes come from ONNX shape inference (with data propagation, so that Shape/Gather chains of a static
model resolve), after the shape arithmetic on constants is folded: torch.onnx.export writes a reflection pad's pads at
opset 11 as ConstantOfShape, Concat, Reshape, Slice, Transpose and Cast on literals, which shape inference does not
evaluate. A Conv whose shapes are still unknown is an error that names the node.

Usage: python3 bench/conv_macs.py MODEL [MODEL2] [--per-node] [--json]
Needs the onnx package (Debian: python3-onnx; /usr/bin/python3 has it).
"""
import argparse
import json
import math
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

CONV_OPS = ("Conv", "ConvTranspose")


class MacsError(Exception):
    """A model whose conv MACs cannot be counted; the message names the file and node."""


def shown(text):
    """A name from a model as a log line may show it: unprintable characters (CR, LF, ESC, ...) as \\xNN or
    \\uNNNN, so that a node name cannot break or forge a line."""
    out = []
    for ch in str(text):
        code = ord(ch)
        out.append(ch if ch.isprintable() else "\\x%02x" % code if code <= 0xFF else "\\u%04x" % code)
    return "".join(out)


def _static_dims(value_info):
    """The dims of a tensor type as ints, or None when any is symbolic or unknown."""
    if value_info is None or not value_info.type.HasField("tensor_type"):
        return None
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = []
    for d in tensor_type.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return dims


def _attr(node, name, default=None):
    a = next((a for a in node.attribute if a.name == name), None)
    return default if a is None else helper.get_attribute_value(a)


def _constant_value(node):
    """A Constant node's value as an array (its value, value_float(s) or value_int(s) attribute)."""
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = _attr(node, name)
        if v is not None:
            return numpy_helper.to_array(v) if name == "value" else np.array(v)
    return None


def _slice(x, starts, ends, axes=None, steps=None):
    """Slice from opset 10 (starts, ends, axes, steps as inputs)."""
    index = [slice(None)] * x.ndim
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return x[tuple(index)]


def _np_dtype(tensor_type):
    """The NumPy dtype of an ONNX element type (onnx 1.12's mapping table, helper's function from 1.13)."""
    if hasattr(helper, "tensor_dtype_to_np_dtype"):
        return helper.tensor_dtype_to_np_dtype(tensor_type)
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tensor_type]


def _divide(a, b):
    """ONNX Div: integers truncate toward zero (NumPy's // floors), floats divide."""
    if a.dtype.kind != "i":
        return a / b
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _constant_of_shape(node, shape):
    value = _constant_value(node)
    value = np.zeros(1, np.float32) if value is None else value.reshape(-1)
    return np.full(tuple(int(d) for d in shape), value[0], dtype=value.dtype)


def _axes(node, inputs):
    """Unsqueeze/Squeeze axes: the attribute before opset 13, the second input from it."""
    return list(inputs[1]) if len(inputs) > 1 else _attr(node, "axes")


def _unsqueeze(x, axes):
    for axis in sorted(a % (x.ndim + len(axes)) for a in axes):
        x = np.expand_dims(x, axis)
    return x


# The shape arithmetic exporters write, evaluated on constant inputs (the node, its input arrays) -> output array.
_FOLDERS = {
    "ConstantOfShape": lambda n, i: _constant_of_shape(n, i[0]),
    "Concat": lambda n, i: np.concatenate(i, axis=_attr(n, "axis")),
    "Reshape": lambda n, i: i[0].reshape([int(d) if d != 0 or _attr(n, "allowzero", 0) else i[0].shape[k]
                                          for k, d in enumerate(i[1])]),
    "Slice": lambda n, i: _slice(i[0], *i[1:]),
    "Transpose": lambda n, i: np.transpose(i[0], _attr(n, "perm")),
    "Cast": lambda n, i: i[0].astype(_np_dtype(_attr(n, "to"))),
    "Unsqueeze": lambda n, i: _unsqueeze(i[0], _axes(n, i)),
    "Squeeze": lambda n, i: np.squeeze(i[0], axis=tuple(_axes(n, i))) if _axes(n, i) else np.squeeze(i[0]),
    "Gather": lambda n, i: np.take(i[0], i[1], axis=_attr(n, "axis", 0)),
    "Identity": lambda n, i: i[0],
    "Add": lambda n, i: i[0] + i[1],
    "Sub": lambda n, i: i[0] - i[1],
    "Mul": lambda n, i: i[0] * i[1],
    "Div": lambda n, i: _divide(i[0], i[1]),
    "Neg": lambda n, i: -i[0],
    "Floor": lambda n, i: np.floor(i[0]),
    "Equal": lambda n, i: np.equal(i[0], i[1]),
    "Where": lambda n, i: np.where(i[0], i[1], i[2]),
    "Expand": lambda n, i: i[0] * np.ones(tuple(int(d) for d in i[1]), dtype=i[0].dtype),
    "Range": lambda n, i: np.arange(i[0], i[1], i[2]),
}


def _fold_constants(model, shapes):
    """Evaluates every node whose inputs are all constants (and every Shape of a tensor of known dims) and
    returns the model with those nodes replaced by initializers, or None when nothing folds."""
    graph = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    kept, folded = [], []
    for node in graph.node:
        inputs = [values.get(name) if name else None for name in node.input]
        out = None
        if node.op_type == "Constant":
            out = _constant_value(node)
        elif node.op_type == "Shape" and node.input[0] in shapes and not node.attribute:
            out = np.array(shapes[node.input[0]], dtype=np.int64)
        elif node.op_type in _FOLDERS and len(node.output) == 1 and all(
                v is not None for v, name in zip(inputs, node.input) if name):
            try:  # an optional input left out is None in `inputs`, so that the others keep their positions
                out = np.asarray(_FOLDERS[node.op_type](node, inputs))
            except (ValueError, TypeError, IndexError):  # not the arithmetic it looks like: left to the runtime
                out = None
        if out is None:
            kept.append(node)
            continue
        values[node.output[0]] = out
        folded.append(numpy_helper.from_array(out, node.output[0]))
    if not folded:
        return None
    result = onnx.ModelProto()
    result.CopyFrom(model)
    del result.graph.node[:]
    result.graph.node.extend(kept)
    result.graph.initializer.extend(folded)
    return result


def _shapes(model):
    """Every tensor name of the main graph with known static dims -> those dims (inputs, outputs, initializers,
    inferred intermediates), the constant shape arithmetic folded until nothing more folds."""
    while True:
        graph = shape_inference.infer_shapes(model, data_prop=True).graph
        shapes = {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            dims = _static_dims(vi)
            if dims is not None:
                shapes[vi.name] = dims
        for init in graph.initializer:
            shapes[init.name] = list(init.dims)
        model = _fold_constants(model, shapes)
        if model is None:
            return shapes


def _needed(shapes, node, tensor, what):
    """The dims of `tensor`, or a MacsError naming the node and which shape is unknown."""
    dims = shapes.get(tensor)
    if dims is None:
        raise MacsError(f"node '{shown(node.name)}' ({node.op_type}): the shape of its {what} '{shown(tensor)}' is "
                        "unknown after shape inference (a model with fixed input shapes is needed)")
    return dims


def node_macs(node, shapes):
    """The MACs of one Conv or ConvTranspose node, from its input, weight and output shapes."""
    x = _needed(shapes, node, node.input[0], "input")
    w = _needed(shapes, node, node.input[1], "weight")
    y = _needed(shapes, node, node.output[0], "output")
    kernel = math.prod(w[2:])
    if node.op_type == "Conv":
        # weight [C_out, C_in/group, k...]: each output value sums C_in/group * prod(k) products.
        return y[0] * y[1] * math.prod(y[2:]) * w[1] * kernel
    # ConvTranspose weight [C_in, C_out/group, k...]: each input value feeds C_out/group * prod(k) outputs.
    return x[0] * x[1] * math.prod(x[2:]) * w[1] * kernel


def conv_macs(path):
    """[(node name, op type, MACs)] for every Conv and ConvTranspose of the model at `path`, in graph order.
    Raises MacsError naming the file and node when a shape is unknown."""
    try:
        model = onnx.load(path)
    except Exception as e:  # onnx raises DecodeError, OSError, ... for a file that is not a model
        raise MacsError(f"{shown(path)}: cannot load the model: {shown(e)}") from None
    try:
        shapes = _shapes(model)
        return [(n.name, n.op_type, node_macs(n, shapes)) for n in model.graph.node if n.op_type in CONV_OPS]
    except MacsError as e:
        raise MacsError(f"{shown(path)}: {e}") from None
    except onnx.shape_inference.InferenceError as e:
        raise MacsError(f"{shown(path)}: ONNX shape inference failed: {shown(e)}") from None


def relative_change(before, after):
    """(after - before) / before as a fraction; 0 when both are 0."""
    return 0.0 if before == after else (after - before) / before if before else math.inf


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("model2", nargs="?", help="the rewritten model: prints both totals and the change")
    parser.add_argument("--per-node", action="store_true", help="one line per Conv/ConvTranspose node too")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args(argv)
    paths = [args.model] + ([args.model2] if args.model2 else [])
    try:
        counts = [conv_macs(p) for p in paths]
    except MacsError as e:
        print(f"conv_macs: {e}", file=sys.stderr)
        return 1
    totals = [sum(m for _, _, m in c) for c in counts]
    if args.json:
        out = {"models": [{"path": p, "total": t, "nodes": [{"name": n, "op": o, "macs": m} for n, o, m in c]}
                          for p, t, c in zip(paths, totals, counts)]}
        if len(paths) == 2:
            out["relative_change"] = relative_change(*totals)
        print(json.dumps(out, indent=1))
        return 0
    for path, total, count in zip(paths, totals, counts):
        if args.per_node:
            for name, op, macs in count:
                print(f"  {op:<13} {macs:>15,d}  {shown(name)}")
        print(f"{shown(path)}: {total:,d} conv MACs in {len(count)} Conv/ConvTranspose nodes")
    if len(paths) == 2:
        print(f"change: {totals[0]:,d} -> {totals[1]:,d} conv MACs, {100 * relative_change(*totals):+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
