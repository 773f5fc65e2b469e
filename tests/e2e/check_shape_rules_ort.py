"""Differential test of every shape rule a rewrite relies on, against ONNX Runtime: single-op models over many
geometries of each op family whose output shape the rewrite reads (pools with ceil_mode, pads, strides, dilations and
auto_pad; Conv and ConvTranspose with auto_pad, output_padding, output_shape, dilations and groups; Slice with negative
steps and INT64 extremes; Resize by scales and by sizes in every coordinate mode; Pad with negative pads; Reshape,
Concat, Unsqueeze, Squeeze, Gather, Expand, Tile, Transpose, DepthToSpace, SpaceToDepth), each run on ONNX Runtime for
its real output shape and through the tool's shape propagation (the test-only binary dwdeconv_propagated_dims). A dim
the tool claims to know must be the one ONNX Runtime computes; an unknown dim is allowed. A model ONNX Runtime refuses
has no answer and is left out (they are counted).

Usage: check_shape_rules_ort.py PROPAGATED_DIMS_BINARY [-v] (-v: list the dims left unknown too). Exits 77 (ctest's
skip) with a message when onnx, numpy or onnxruntime is not importable (set DWDECONV_PYTHON to an interpreter that has them)."""

import json
import os
import random
import subprocess
import sys
import tempfile
import time

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def main():
    tool = sys.argv[1]
    verbose = "-v" in sys.argv[2:]
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        import onnxruntime as ort
    except ImportError as e:
        print("SKIPPED: %s in %s; install onnx, numpy and onnxruntime (pip) to check the shape rules on ONNX Runtime" % (e, sys.executable))
        return 77
    rnd = random.Random(36)
    cases = []  # (family, description, ModelProto, {input: ndarray})

    def add(family, desc, nodes, inputs, inits=(), opset=17, outputs=("Y",)):
        vi = [
            helper.make_tensor_value_info(name, TensorProto.FLOAT if a.dtype == np.float32 else TensorProto.INT64, list(a.shape))
            for name, a in inputs.items()
        ]
        # The outputs declare no shape: what the tool computes must come from the ops.
        out = [onnx.ValueInfoProto(name=o) for o in outputs]
        inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits]
        g = helper.make_graph(nodes, "g", vi, out, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset <= 18 else 10)
        cases.append((family, desc, m, inputs))

    def x(*dims):
        return np.random.default_rng(len(cases)).standard_normal(dims).astype(np.float32)

    # Pools: two spatial axes, each its own geometry.
    def axis_geometry(dilate):
        return dict(
            h=rnd.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]),
            k=rnd.choice([1, 2, 3, 4, 5]),
            s=rnd.choice([1, 2, 3, 4]),
            pb=rnd.choice([0, 0, 1, 1, 2, 3]),
            pe=rnd.choice([0, 0, 1, 1, 2, 3]),
            d=rnd.choice([1, 1, 2, 3]) if dilate else 1,
        )

    for op, opset, dilate in (
        ("MaxPool", 17, True),
        ("AveragePool", 17, False),
        ("AveragePool", 19, True),
        ("LpPool", 17, False),
        ("LpPool", 18, True),
        ("MaxPool", 12, True),
        ("MaxPool", 21, True),
    ):
        for _ in range(60 if op != "LpPool" else 30):
            a, b = axis_geometry(dilate), axis_geometry(dilate)
            attrs = dict(kernel_shape=[a["k"], b["k"]], strides=[a["s"], b["s"]])
            auto_pad = rnd.choice(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
            if auto_pad == "NOTSET":
                attrs["pads"] = [a["pb"], b["pb"], a["pe"], b["pe"]]
            else:
                attrs["auto_pad"] = auto_pad
            if dilate:
                attrs["dilations"] = [a["d"], b["d"]]
            if op != "LpPool" or opset >= 18:
                attrs["ceil_mode"] = rnd.choice([0, 1, 1])
            if op == "AveragePool":
                attrs["count_include_pad"] = rnd.choice([0, 1])
            add(
                op,
                "opset %d %s" % (opset, attrs),
                [helper.make_node(op, ["X"], ["Y"], **attrs)],
                {"X": x(1, 2, a["h"], b["h"])},
                opset=opset,
            )

    # Conv and ConvTranspose.
    for op in ("Conv", "ConvTranspose"):
        for opset in (17, 11, 21):
            for _ in range(70 if opset == 17 else 25):
                group = rnd.choice([1, 1, 2])
                cin, cout = 2 * group, rnd.choice([1, 2]) * group
                a, b = axis_geometry(True), axis_geometry(True)
                attrs = dict(strides=[a["s"], b["s"]], dilations=[a["d"], b["d"]], group=group)
                if rnd.random() < 0.5:
                    attrs["kernel_shape"] = [a["k"], b["k"]]
                auto_pad = rnd.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
                if auto_pad == "NOTSET":
                    attrs["pads"] = [a["pb"], b["pb"], a["pe"], b["pe"]]
                else:
                    attrs["auto_pad"] = auto_pad
                if op == "ConvTranspose":
                    if rnd.random() < 0.6:
                        attrs["output_padding"] = [rnd.randrange(max(a["s"], a["d"])), rnd.randrange(max(b["s"], b["d"]))]
                    if rnd.random() < 0.25:
                        attrs["output_shape"] = [a["h"] * a["s"] + rnd.randrange(-2, 3), b["h"] * b["s"] + rnd.randrange(-2, 3)]
                    w = x(cin, cout // group, a["k"], b["k"])
                else:
                    w = x(cout, cin // group, a["k"], b["k"])
                add(
                    op,
                    "opset %d %s" % (opset, attrs),
                    [helper.make_node(op, ["X", "W"], ["Y"], **attrs)],
                    {"X": x(1, cin, a["h"], b["h"])},
                    inits=[("W", w)],
                    opset=opset,
                )
    # 1-D ConvTranspose and Conv.
    for op in ("Conv", "ConvTranspose"):
        for _ in range(20):
            a = axis_geometry(True)
            attrs = dict(strides=[a["s"]], dilations=[a["d"]], pads=[a["pb"], a["pe"]])
            if op == "ConvTranspose" and rnd.random() < 0.5:
                attrs["output_padding"] = [rnd.randrange(max(a["s"], a["d"]))]
            add(
                op,
                "1-D %s" % attrs,
                [helper.make_node(op, ["X", "W"], ["Y"], **attrs)],
                {"X": x(1, 2, a["h"])},
                inits=[("W", x(2, 2, a["k"]))],
            )

    # Slice: data as a graph input (inference types it) and as an initializer (the folder evaluates it).
    bounds = [INT64_MIN, INT64_MIN + 1, -(2**31), -12, -7, -6, -5, -3, -1, 0, 1, 2, 4, 5, 6, 7, 11, 2**31, INT64_MAX - 1, INT64_MAX]
    for _ in range(150):
        n = rnd.choice([1, 3, 5, 6, 7])
        start, end = rnd.choice(bounds), rnd.choice(bounds)
        step = rnd.choice([-3, -2, -1, -1, 1, 1, 2, 3, INT64_MAX, INT64_MIN + 1, -(2**40)])
        axis = rnd.choice([1, -1, 0])
        opset = rnd.choice([13, 10, 17])
        data = rnd.random() < 0.7
        inits = [
            ("st", np.array([start], np.int64)),
            ("en", np.array([end], np.int64)),
            ("ax", np.array([axis], np.int64)),
            ("sp", np.array([step], np.int64)),
        ]
        if data:
            inputs = {"X": x(2, n) if axis != 0 else x(n, 2)}
        else:
            inputs = {"Z": x(1)}
            inits.append(("X", np.arange(2 * n, dtype=np.int64).reshape((2, n) if axis != 0 else (n, 2))))
        nodes = [helper.make_node("Slice", ["X", "st", "en", "ax", "sp"], ["Y"])]
        add(
            "Slice",
            "opset %d data %s [%d] start %d end %d step %d axis %d" % (opset, "input" if data else "constant", n, start, end, step, axis),
            nodes,
            inputs,
            inits=inits,
            opset=opset,
        )
    # Resize: by scales and by sizes, every coordinate mode, nearest, linear and cubic.
    coords = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_crop_and_resize", "half_pixel_symmetric"]
    for _ in range(110):
        opset = rnd.choice([13, 13, 11, 18, 19])
        mode = rnd.choice(["nearest", "linear", "cubic"])
        coord = rnd.choice([c for c in coords if opset >= 19 or c != "half_pixel_symmetric"])
        h, w = rnd.randrange(1, 12), rnd.randrange(1, 12)
        attrs = dict(mode=mode, coordinate_transformation_mode=coord)
        inits = [
            ("roi", np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9], np.float32) if coord == "tf_crop_and_resize" else np.zeros(0, np.float32))
        ]
        if rnd.random() < 0.55:
            sc = [
                1.0,
                1.0,
                rnd.choice([0.5, 0.6, 0.75, 1.0, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 0.3, 1.99]),
                rnd.choice([0.5, 0.6, 0.75, 1.0, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 0.3, 1.01]),
            ]
            inits.append(("sc", np.array(sc, np.float32)))
            ins = ["X", "roi", "sc"]
            desc = "scales %s" % sc
        else:
            sizes = [1, 2, rnd.randrange(1, 25), rnd.randrange(1, 25)]
            inits += [("sc", np.zeros(0, np.float32)), ("sz", np.array(sizes, np.int64))]
            ins = ["X", "roi", "sc", "sz"]
            desc = "sizes %s" % sizes
            if opset >= 18 and rnd.random() < 0.5:
                attrs["keep_aspect_ratio_policy"] = rnd.choice(["stretch", "not_larger", "not_smaller"])
        add(
            "Resize",
            "opset %d %s %s" % (opset, attrs, desc),
            [helper.make_node("Resize", ins, ["Y"], **attrs)],
            {"X": x(1, 2, h, w)},
            inits=inits,
            opset=opset,
        )
    # Pad, negative pads included.
    for _ in range(80):
        opset = rnd.choice([11, 13, 18, 19])
        mode = rnd.choice(["constant", "reflect", "edge"] + (["wrap"] if opset >= 19 else []))
        h, w = rnd.randrange(2, 9), rnd.randrange(2, 9)
        pads = [0, 0, rnd.randrange(-2, 4), rnd.randrange(-2, 4), 0, 0, rnd.randrange(-2, 4), rnd.randrange(-2, 4)]
        inits = [("pads", np.array(pads, np.int64))]
        add(
            "Pad",
            "opset %d %s %s" % (opset, mode, pads),
            [helper.make_node("Pad", ["X", "pads"], ["Y"], mode=mode)],
            {"X": x(1, 2, h, w)},
            inits=inits,
            opset=opset,
        )
    for _ in range(15):
        pads = [rnd.randrange(-2, 4), rnd.randrange(-2, 4), rnd.randrange(-2, 4), rnd.randrange(-2, 4)]
        add(
            "Pad",
            "opset 18 axes [2,3] %s" % pads,
            [helper.make_node("Pad", ["X", "pads", "", "axes"], ["Y"])],
            {"X": x(1, 2, 6, 7)},
            inits=[("pads", np.array(pads, np.int64)), ("axes", np.array([2, -1], np.int64))],
            opset=18,
        )
    # Reshape with 0 and -1 (and allowzero).
    for shape, dims, allowzero in (
        ([0, -1], (2, 3, 4), 0),
        ([-1, 0, 2], (2, 3, 4), 0),
        ([0, 0, 2, 2], (2, 3, 4), 0),
        ([6, -1], (2, 3, 4), 0),
        ([0, 3, 0], (2, 3, 4), 0),
        ([2, 0, -1], (2, 3, 4), 0),
        ([1, -1], (1, 8, 5, 5), 0),
        ([0, 4], (0, 3, 4), 1),
        ([-1], (3, 4), 0),
        ([0, 2, -1, 1], (4, 6), 0),
        ([4, 0, 3], (2, 0, 3), 1),
    ):
        add(
            "Reshape",
            "%s of %s allowzero %d" % (shape, dims, allowzero),
            [helper.make_node("Reshape", ["X", "s"], ["Y"], **({"allowzero": 1} if allowzero else {}))],
            {"X": x(*dims)},
            inits=[("s", np.array(shape, np.int64))],
            opset=14,
        )
    # Concat, Unsqueeze, Squeeze, Gather, Expand, Tile, Transpose, DepthToSpace, SpaceToDepth.
    for axis in (0, 1, -1, -2):
        add("Concat", "axis %d" % axis, [helper.make_node("Concat", ["X", "Z"], ["Y"], axis=axis)], {"X": x(2, 3, 4), "Z": x(2, 3, 4)})
        add(
            "Concat",
            "three axis %d, one empty" % axis,
            [helper.make_node("Concat", ["X", "Z", "V"], ["Y"], axis=axis)],
            {"X": x(3, 3), "Z": x(3, 3), "V": x(3, 3)[:0] if axis in (0, -2) else x(3, 0)},
        )
    for axes, dims in (([0], (3, 4)), ([-1], (3, 4)), ([0, 3], (3, 4)), ([1, -1], (3, 4)), ([-3, 0], (2, 2))):
        add(
            "Unsqueeze",
            "%s of %s" % (axes, dims),
            [helper.make_node("Unsqueeze", ["X", "a"], ["Y"])],
            {"X": x(*dims)},
            inits=[("a", np.array(axes, np.int64))],
            opset=13,
        )
        add(
            "Unsqueeze",
            "opset 11 %s of %s" % (axes, dims),
            [helper.make_node("Unsqueeze", ["X"], ["Y"], axes=axes)],
            {"X": x(*dims)},
            opset=11,
        )
    for axes, dims in (([0], (1, 4)), ([-1], (3, 1)), ([0, 2], (1, 4, 1)), (None, (1, 3, 1, 1))):
        ins = ["X", "a"] if axes is not None else ["X"]
        add(
            "Squeeze",
            "%s of %s" % (axes, dims),
            [helper.make_node("Squeeze", ins, ["Y"])],
            {"X": x(*dims)},
            inits=[("a", np.array(axes, np.int64))] if axes is not None else [],
            opset=13,
        )
    for idx, axis in (
        (np.array(1, np.int64), 0),
        (np.array([0, 2, -1], np.int64), 1),
        (np.array([[0, 1], [1, 0]], np.int64), -1),
        (np.array(-1, np.int64), 2),
        (np.zeros((0,), np.int64), 0),
    ):
        add(
            "Gather",
            "indices %s axis %d" % (list(idx.shape), axis),
            [helper.make_node("Gather", ["X", "i"], ["Y"], axis=axis)],
            {"X": x(3, 4, 5)},
            inits=[("i", idx)],
        )
    for shape, dims in (
        ([2, 1, 6], (3, 1)),
        ([1, 1], (3, 4)),
        ([3, 1, 1, 4], (3, 4)),
        ([5], (1,)),
        ([2, 3, 1], (1, 1, 4)),
        ([0, 4], (1, 4)),
    ):
        add(
            "Expand",
            "%s of %s" % (shape, dims),
            [helper.make_node("Expand", ["X", "s"], ["Y"])],
            {"X": x(*dims)},
            inits=[("s", np.array(shape, np.int64))],
        )
    for reps, dims in (([1, 2], (3, 4)), ([3, 1, 2], (2, 2, 2)), ([0, 1], (3, 4))):
        add(
            "Tile",
            "%s of %s" % (reps, dims),
            [helper.make_node("Tile", ["X", "r"], ["Y"])],
            {"X": x(*dims)},
            inits=[("r", np.array(reps, np.int64))],
        )
    for perm in ([0, 2, 3, 1], [3, 2, 1, 0], None):
        add(
            "Transpose",
            "perm %s" % perm,
            [helper.make_node("Transpose", ["X"], ["Y"], **({"perm": perm} if perm else {}))],
            {"X": x(1, 2, 3, 4)},
        )
    for op, dims, bs in (
        ("DepthToSpace", (1, 8, 3, 5), 2),
        ("DepthToSpace", (2, 18, 2, 1), 3),
        ("SpaceToDepth", (1, 2, 4, 6), 2),
        ("SpaceToDepth", (1, 3, 6, 9), 3),
    ):
        for mode in ("DCR", "CRD") if op == "DepthToSpace" else (None,):
            attrs = dict(blocksize=bs, **({"mode": mode} if mode else {}))
            add(op, "%s %s" % (dims, attrs), [helper.make_node(op, ["X"], ["Y"], **attrs)], {"X": x(*dims)})

    # The chain that made a wrong rewrite: a ceil_mode MaxPool libonnx sizes 5x5 as 5... then a Resize by sizes and a Conv.
    add(
        "chain",
        "MaxPool k2 s2 pads 1 ceil_mode -> Resize sizes [1,8,12,12] -> Conv",
        [
            helper.make_node("MaxPool", ["X"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
            helper.make_node("Resize", ["p", "", "", "sz"], ["u"], mode="nearest"),
            helper.make_node("Conv", ["u", "W"], ["Y"], pads=[1, 1, 1, 1], group=8),
        ],
        {"X": x(1, 8, 9, 9)},
        inits=[("sz", np.array([1, 8, 12, 12], np.int64)), ("W", x(8, 1, 3, 3))],
        opset=13,
        outputs=("p", "Y"),
    )

    with tempfile.TemporaryDirectory() as tmp:
        paths, truths = [], []
        refused = 0
        started = time.monotonic()
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        for k, (family, desc, m, inputs) in enumerate(cases):
            blob = m.SerializeToString()
            try:
                sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
                got = sess.run(None, inputs)
            except Exception:
                refused += 1
                continue
            path = os.path.join(tmp, "m%04d.onnx" % k)
            with open(path, "wb") as f:
                f.write(blob)
            paths.append(path)
            truths.append((family, desc, {o.name: list(v.shape) for o, v in zip(sess.get_outputs(), got)}))
        ort_seconds = time.monotonic() - started
        proc = subprocess.run([tool] + paths, capture_output=True, text=True, timeout=600)
        tool_seconds = time.monotonic() - started - ort_seconds
        if proc.returncode != 0:
            print("FAIL: %s exited %d: %s" % (tool, proc.returncode, proc.stderr))
            return 1
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if len(lines) != len(paths):
            print("FAIL: %d answers for %d models" % (len(lines), len(paths)))
            return 1
    wrong, known, unknown, per_family = [], 0, 0, {}
    for (family, desc, truth), answer in zip(truths, lines):
        stats = per_family.setdefault(family, [0, 0, 0])
        stats[0] += 1
        if "error" in answer:
            wrong.append("%s %s: the tool could not read it: %s" % (family, desc, answer["error"]))
            continue
        for name, dims in truth.items():
            claimed = answer["outputs"].get(name)
            if claimed is None:
                unknown += 1
                continue
            bad = len(claimed) != len(dims) or any(c is not None and c != d for c, d in zip(claimed, dims))
            if bad:
                stats[1] += 1
                wrong.append("%s %s: ONNX Runtime computes %s, the tool claims %s" % (family, desc, dims, claimed))
            elif None in claimed:
                unknown += 1
                stats[2] += 1
                if verbose:
                    print("unknown: %s %s: ONNX Runtime computes %s, the tool %s" % (family, desc, dims, claimed))
            else:
                known += 1
    for family, (n, bad, partly) in sorted(per_family.items()):
        print("%-14s %4d models, %3d wrong, %3d with a dim left unknown" % (family, n, bad, partly))
    print(
        "%d models (%d more refused by ONNX Runtime): %d outputs fully known and right, %d partly or not known, %d wrong"
        % (len(truths), refused, known, unknown, len(wrong))
    )
    print("ONNX Runtime took %.1f s, the tool %.1f s" % (ort_seconds, tool_seconds))
    for w in wrong:
        print("WRONG: " + w)
    if known < len(truths) // 2:
        print("FAIL: the tool knows fewer than half of the shapes; the comparison would prove little")
        return 1
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
