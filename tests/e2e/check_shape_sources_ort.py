"""Where the shapes a rewrite relies on come from, end to end through the binary, judged by ONNX Runtime: models whose
shapes libonnx 1.12 infers unlike the runtimes (a ceil_mode MaxPool before a nearest Resize by sizes), or whose
declared subgraph shapes hold for the first iteration only (a Loop whose carried value grows), must come out of every
target computing what the original computes on ORT, and where the tool cannot know a shape, keep the node saying so.

Usage: check_shape_sources_ort.py DWDECONV_REWRITE. Exits 77 (ctest's skip) with a message when onnx, numpy or
onnxruntime is not importable (set DWDECONV_PYTHON to an interpreter that has them)."""

import os
import subprocess
import sys
import tempfile

TARGETS = ["default", "xnnpack", "ort", "litert", "executorch", "openvino", "mnn", "ncnn"]


def main():
    tool = sys.argv[1]
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        import onnxruntime as ort
    except ImportError as e:
        print(
            "SKIPPED: %s in %s; install onnx, numpy and onnxruntime (pip) to check the shape sources on ONNX Runtime" % (e, sys.executable)
        )
        return 77
    rng = np.random.default_rng(36)
    failures = []

    def run(model_path, feeds):
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)

    def check(name, m, feeds_list, expect_kept=None, expect_rewritten=None, kept_on=None, body_width_unknown=False):
        """Runs every target on m; each output must compute what m computes on ORT for every feed. expect_kept: a
        fragment the keep reason of node 'up' must hold (the node must be kept); expect_rewritten: the node must be
        rewritten on the targets that rewrite its form; kept_on: target -> the fragment its keep reason must hold on
        the targets that keep that form."""
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(m, src)
            want = [run(src, f) for f in feeds_list]
            for target in TARGETS:
                out = os.path.join(tmp, "%s_%s.onnx" % (name, target))
                p = subprocess.run([tool, src, "-o", out, "--target", target], capture_output=True, text=True, timeout=300)
                text = p.stdout + p.stderr
                if p.returncode != 0:
                    failures.append("%s --target %s: exit %d: %s" % (name, target, p.returncode, text))
                    continue
                kept = [line.split(": ", 1)[-1] for line in text.splitlines() if "kept" in line and "'up'" in line]
                if expect_kept is not None and (not kept or expect_kept not in kept[0]):
                    failures.append("%s --target %s: 'up' must be kept saying %r: %s" % (name, target, expect_kept, kept or "rewritten"))
                if expect_rewritten is not None and target in expect_rewritten and kept:
                    failures.append("%s --target %s: 'up' must be rewritten: %s" % (name, target, kept[0]))
                if kept_on is not None and target in kept_on and (not kept or kept_on[target] not in kept[0]):
                    failures.append("%s --target %s: 'up' must be kept saying %r: %s"
                                    % (name, target, kept_on[target], kept or "rewritten"))
                if body_width_unknown:
                    # The body's values all take the width the carried value has in this iteration: nothing written
                    # into the body (value_info, a Reshape's shape) may hold the first iteration's.
                    written = onnx.load(out)
                    body = next(a.g for n in written.graph.node if n.op_type == "Loop" for a in n.attribute if a.name == "body")
                    for v in body.value_info:
                        dims = v.type.tensor_type.shape.dim
                        if len(dims) == 4 and dims[3].HasField("dim_value"):
                            failures.append(
                                "%s --target %s: the Loop body declares '%s' %d wide" % (name, target, v.name, dims[3].dim_value)
                            )
                    for t in body.initializer:
                        if t.data_type == TensorProto.INT64 and len(t.dims) == 1 and t.dims[0] == 4:
                            shape = numpy_helper.to_array(t)
                            if shape[3] > 0:
                                failures.append("%s --target %s: the Loop body holds the shape %s" % (name, target, list(shape)))
                for feeds, w in zip(feeds_list, want):
                    try:
                        got = run(out, feeds)
                    except Exception as e:  # the written model does not even run where the original does
                        failures.append("%s --target %s: ORT refuses the output: %s" % (name, target, e))
                        break
                    for a, b in zip(w, got):
                        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-4):
                            failures.append(
                                "%s --target %s, input %s: ORT computes %s for the original, %s for the output"
                                % (name, target, {k: v.shape for k, v in feeds.items()}, a.shape, b.shape)
                            )
                print("%s --target %s: %s" % (name, target, kept[0] if kept else "rewritten"))

    # x [1,8,9,9] -> MaxPool k2 s2 pads 1 ceil_mode -> nearest Resize to [1,8,12,12] -> depthwise 3x3 Conv. ORT's
    # MaxPool gives 5x5 (the last window would start in the right padding), libonnx 1.12 6x6: 6 -> 12 would be a x2
    # upsampler, 5 -> 12 is a 2.4 scale that is none.
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("MaxPool", ["X"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Resize", ["p", "", "", "sz"], ["u"], mode="nearest"),
        helper.make_node("Conv", ["u", "W"], ["Y"], name="up", pads=[1, 1, 1, 1], group=8),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 9, 9])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        [numpy_helper.from_array(np.array([1, 8, 12, 12], np.int64), "sz"), numpy_helper.from_array(w, "W")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    check("ceil_pool_resize", m, [{"X": rng.standard_normal((1, 8, 9, 9)).astype(np.float32)}], expect_kept="not known")

    # The same pool, its length read back through Shape: ONNX Runtime's kernel gives p 5x5, but its optimiser folds
    # Shape (p) from its own inference to [1,8,6,6], so the sizes 2 * Shape (p) are [1,8,12,12] there. Z is 5x5: with
    # the spec's 5 the Resize of Z would look like an exact x2 (10x10) and be rewritten, where ORT resizes Z to 12x12.
    nodes = [
        helper.make_node("MaxPool", ["X"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Mul", ["s", "two"], ["sz"]),
        helper.make_node("Resize", ["Z", "", "", "sz"], ["u"], mode="nearest"),
        helper.make_node("Conv", ["u", "W"], ["Y"], name="up", pads=[1, 1, 1, 1], group=8),
        helper.make_node("ReduceMax", ["p"], ["M"], keepdims=0),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 9, 9]),
            helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, 8, 5, 5]),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", "c", "h", "w"]),
            helper.make_tensor_value_info("M", TensorProto.FLOAT, []),
        ],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.int64), "two"), numpy_helper.from_array(w, "W")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    feeds = {"X": rng.standard_normal((1, 8, 9, 9)).astype(np.float32), "Z": rng.standard_normal((1, 8, 5, 5)).astype(np.float32)}
    check("ceil_pool_shape_resize", m, [feeds], expect_kept="not known")

    # x [1,8,8,8] -> MaxPool k3 s3 pads 1 ceil_mode -> depthwise ConvTranspose k4 s2 p1, the pool's output and the
    # graph's declared with the shapes ONNX Runtime computes (3x3, 6x6), where libonnx 1.12 infers 4x4 and 8x8. The
    # declarations are right: the model is valid, and the upsampler (clean whatever its input's size) is rewritten
    # where the target rewrites a depthwise ConvTranspose; the others keep it for their own reason, not for its shape.
    w4 = rng.standard_normal((8, 1, 4, 4)).astype(np.float32)
    nodes = [
        helper.make_node("MaxPool", ["X"], ["t"], kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("ConvTranspose", ["t", "W"], ["Y"], name="up", group=8, kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8, 6, 6])],
        [numpy_helper.from_array(w4, "W")],
        value_info=[helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 8, 3, 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    check("ceil_pool_declared", m, [{"X": rng.standard_normal((1, 8, 8, 8)).astype(np.float32)}],
          expect_rewritten=["xnnpack", "litert", "executorch"],
          kept_on={"default": "no join both converts", "ort": "every depthwise ConvTranspose layer measured",
                   "openvino": "a depthwise ConvTranspose whose output is the graph's", "mnn": "kept for --target mnn",
                   "ncnn": "kept for --target ncnn"})

    # A Loop whose carried value grows one column per iteration (Concat), declared [N,64,4,4] as the first iteration
    # has it, with a depthwise ConvTranspose x2 on W (strides [1,2], joined by an interleave Reshape) on it in the
    # body: the body input's declared width holds for the first iteration only. Batch 2 too: a join must not assume 1.
    # Then a square x2 (k4 s2 pads 1, joined by DepthToSpace or, on ExecuTorch, by its batch join) on 8 channels.
    for batch, c, k, strides, pads, output_padding in (
        (1, 64, (1, 3), [1, 2], [0, 1, 0, 1], [0, 1]),
        (2, 64, (1, 3), [1, 2], [0, 1, 0, 1], [0, 1]),
        (1, 8, (4, 4), [2, 2], [1, 1, 1, 1], [0, 0]),
        (2, 8, (4, 4), [2, 2], [1, 1, 1, 1], [0, 0]),
    ):
        up_h = 4 * strides[0] - pads[0] - pads[2] + k[0] - strides[0] + output_padding[0]
        wt = rng.standard_normal((c, 1) + k).astype(np.float32)
        col = rng.standard_normal((batch, c, 4, 1)).astype(np.float32)
        body = helper.make_graph(
            [
                helper.make_node(
                    "ConvTranspose", ["v_in", "Wt"], ["u"], name="up", group=c, strides=strides, pads=pads, output_padding=output_padding
                ),
                helper.make_node("Concat", ["v_in", "col"], ["v_out"], axis=3),
                helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [batch, c, 4, 4]),
                helper.make_tensor_value_info("last_in", TensorProto.FLOAT, [batch, c, up_h, 8]),
            ],
            [
                helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [batch, c, 4, 5]),
                helper.make_tensor_value_info("u", TensorProto.FLOAT, [batch, c, up_h, 8]),
            ],
        )
        g = helper.make_graph(
            [
                helper.make_node("Loop", ["M", "T", "X", "L0"], ["v_final", "Y"], body=body),
            ],
            "g",
            [
                helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, c, 4, 4]),
                helper.make_tensor_value_info("M", TensorProto.INT64, []),
            ],
            [
                helper.make_tensor_value_info("v_final", TensorProto.FLOAT, [batch, c, 4, "w"]),
                helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, c, up_h, "w2"]),
            ],
            [
                numpy_helper.from_array(np.array(True), "T"),
                numpy_helper.from_array(np.zeros((batch, c, up_h, 8), np.float32), "L0"),
                numpy_helper.from_array(wt, "Wt"),
                numpy_helper.from_array(col, "col"),
            ],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        x = rng.standard_normal((batch, c, 4, 4)).astype(np.float32)
        check(
            "loop_growing_s%dx%d_batch%d" % (strides[0], strides[1], batch),
            m,
            [{"X": x, "M": np.array(n, np.int64)} for n in (1, 2, 3)],
            body_width_unknown=True,
        )

    # A Loop whose carried value grows on the batch axis (Concat with X each iteration), declared [1,64,6,6] as the first
    # iteration has it, with a depthwise ConvTranspose k6 s3 on it: ExecuTorch's batch join, told batch 1, mixed the
    # images of later iterations (found by a hostile review: ORT computed other numbers for the old output).
    c = 64
    wt = rng.standard_normal((c, 1, 6, 6)).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("ConvTranspose", ["v_in", "Wt"], ["up_y"], name="up", group=c, kernel_shape=[6, 6], pads=[2, 2, 1, 1],
                             strides=[3, 3]),
            helper.make_node("Concat", ["v_in", "X"], ["v_out"], axis=0),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["up_y"], ["u_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, c, 6, 6]),
            helper.make_tensor_value_info("u_in", TensorProto.FLOAT, ["a", "b", "c", "d"]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("u_out", TensorProto.FLOAT, None),
        ],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "X", "X"], ["v_final", "Y"], body=body)],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, c, 6, 6])],
        [
            helper.make_tensor_value_info("v_final", TensorProto.FLOAT, ["n", c, 6, 6]),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n2", c, 18, 18]),
        ],
        [numpy_helper.from_array(np.array(3, np.int64), "M"), numpy_helper.from_array(wt, "Wt")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    check("loop_growing_batch", m, [{"X": rng.standard_normal((1, c, 6, 6)).astype(np.float32)}])

    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
