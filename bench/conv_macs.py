#!/usr/bin/env python3
"""The multiply-accumulates of every Conv and ConvTranspose of a fixed-shape ONNX model: per node and in total.
With a second model (the rewrite of the first) both totals and the relative change, the measure of how much
compute a rewrite saves ("conv MACs down by 20%").

A Conv's MACs are N * C_out * prod(output spatial dims) * C_in/group * prod(kernel): one multiply-add per tap of
every output value. A ConvTranspose's are N * C_in * prod(input spatial dims) * C_out/group * prod(kernel): every
input value scatters one multiply-add into each tap of each of its group's output channels. Bias adds are not
counted. Shapes come from ONNX shape inference (with data propagation, so that Shape/Gather chains of a static
model resolve); a Conv whose shapes it cannot find is an error that names the node.

Usage: python3 bench/conv_macs.py MODEL [MODEL2] [--per-node] [--json]
Needs the onnx package (Debian: python3-onnx; /usr/bin/python3 has it).
"""
import argparse
import json
import math
import sys

import onnx
from onnx import shape_inference

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


def _shapes(model):
    """Every tensor name of the main graph with known static dims -> those dims (inputs, outputs, initializers,
    inferred intermediates)."""
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    shapes = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = _static_dims(vi)
        if dims is not None:
            shapes[vi.name] = dims
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
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
