#!/usr/bin/env python3
"""Times original against rewritten ONNX models on the runtimes users deploy with.

Not part of dwdeconv-rewrite, its build or its tests: a measuring tool, run from a virtual environment set up
as bench/runtimes/README.md says. For each pair (original ONNX, rewritten ONNX) and each runtime it
  1. converts both models the way a user would (onnx2tf to .tflite; onnx2torch + torch.export to an ExecuTorch
     .pte lowered to XNNPACK; ONNX Runtime loads the ONNX file itself) and records the converted graph's op list,
  2. runs both on the same seeded input and checks they agree (max abs error, and that error relative to the
     output's largest magnitude); a pair that disagrees is reported and never timed,
  3. times them interleaved, A B A B, in one run, and reports medians and their ratio.

Runtimes (each needs its own packages; see README.md):
  litert      onnx2tf (float32) -> ai-edge-litert Interpreter, XNNPACK delegate applied by default
  ort         onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL
  executorch  onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> .pte

Suites:
  layers   one depthwise ConvTranspose per model, the executor's layer table (bench/layer_bench.cpp)
  handwritten  one hand-written x2 upsampler per model (nearest x mask, nearest + 3x3 Conv depthwise and dense),
           as bench/layer_bench.cpp builds them; --layer-filter and --channels/--sizes pick them
  migan    the MI-GAN-like generator at 256, form (a) (and form (b) with --migan-forms a b)
  dla      the DLA-style detection decoder (examples/make_examples.cpp --dla)
  --pair ORIGINAL.onnx REWRITTEN.onnx   any pair of your own

Examples (from the repository root, after building the tool):
  python bench/runtimes/bench_runtimes.py --runtime ort --threads 1 2 --suite layers migan dla --work /tmp/rt
  python bench/runtimes/bench_runtimes.py --runtime litert --threads 1 --suite migan --profile --work /tmp/rt
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]

# The executor's layer table (bench/layer_bench.cpp): kernel, stride, pad, output_padding.
GEOMETRIES = [(4, 2, 1, 0), (3, 2, 1, 1), (2, 2, 0, 0), (6, 3, 2, 1)]
CHANNELS = [16, 64, 256, 512]
SIZES = [32, 64, 128]

# A rewritten output must agree with the original to this, relative to the output's largest magnitude.
REL_TOLERANCE = 1e-4


# ---------------------------------------------------------------------------------------------------------------
# Models


@dataclasses.dataclass
class Case:
    """One original/rewritten pair; `name` is unique and names the cached conversions."""

    name: str
    original: Path
    rewritten: Path
    kind: str  # "layer", "model" or "pair"
    layer: tuple | None = None  # (C, H, k, s, p, op) for a layer


def layer_name(c, h, k, s, p, op):
    return f"k{k}s{s}p{p}op{op}_C{c}_H{h}"


def make_layer_model(c, h, k, s, p, op) -> onnx.ModelProto:
    """One depthwise ConvTranspose, x [1, C, H, H] -> y; weights seeded by the geometry, like layer_bench.cpp."""
    rng = np.random.default_rng(c * 7919 + h * 104729 + k * 31 + s * 7 + p)
    out = s * (h - 1) + op + k - 2 * p
    w = rng.uniform(-0.5, 0.5, size=(c, 1, k, k)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", group=c, kernel_shape=[k, k],
                            strides=[s, s], pads=[p, p, p, p], output_padding=[op, op])
    graph = helper.make_graph([node], f"layer_{layer_name(c, h, k, s, p, op)}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, out, out])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


HANDWRITTEN_KINDS = ("nearest_mask", "nearest_conv_dw", "nearest_conv_dense")


def make_handwritten_model(kind, c, h) -> onnx.ModelProto:
    """One hand-written x2 upsampler, x [1, C, H, H] -> y [1, C, 2H, 2H], as bench/layer_bench.cpp builds it:
    nearest_mask is Resize, Mul by a [[1,0],[0,0]] mask, Pad [2,2,1,1], depthwise 4x4 Conv (k4 s2 p1);
    nearest_conv_dw / _dense is Resize then a 3x3 Conv with pads 1, depthwise or dense (C in, C out)."""
    rng = np.random.default_rng(c * 7919 + h * 104729 + HANDWRITTEN_KINDS.index(kind))
    resize = helper.make_node("Resize", ["x", "", "scales"], ["u"], name="up", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32), "b")]
    if kind == "nearest_mask":
        mask = np.zeros((1, 1, 2 * h, 2 * h), np.float32)
        mask[:, :, ::2, ::2] = 1
        inits += [numpy_helper.from_array(mask, "mask"),
                  numpy_helper.from_array(np.array([0, 0, 2, 2, 0, 0, 1, 1], np.int64), "pads"),
                  numpy_helper.from_array(rng.uniform(-0.5, 0.5, size=(c, 1, 4, 4)).astype(np.float32), "w")]
        nodes = [resize, helper.make_node("Mul", ["u", "mask"], ["m"]), helper.make_node("Pad", ["m", "pads"], ["p"]),
                 helper.make_node("Conv", ["p", "w", "b"], ["y"], name="conv", group=c, kernel_shape=[4, 4])]
    else:
        group = c if kind == "nearest_conv_dw" else 1
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, size=(c, c // group, 3, 3)).astype(np.float32), "w"))
        nodes = [resize, helper.make_node("Conv", ["u", "w", "b"], ["y"], name="conv", group=group, kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, f"{kind}_C{c}_H{h}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * h, 2 * h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def run_tool(args, what):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {result.returncode}): {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def rewrite(tool, original: Path, rewritten: Path):
    if rewritten.exists() and rewritten.stat().st_mtime >= original.stat().st_mtime:
        return
    run_tool([str(tool), str(original), "-o", str(rewritten), "-q"], f"dwdeconv-rewrite {original}")
    kept = [n.op_type for n in onnx.load(str(rewritten), load_external_data=False).graph.node if n.op_type == "ConvTranspose"]
    if kept:
        raise RuntimeError(f"{rewritten}: the tool kept {len(kept)} ConvTranspose node(s)")
    resizes = [n.name for n in onnx.load(str(rewritten), load_external_data=False).graph.node if n.op_type == "Resize"]
    if resizes:
        raise RuntimeError(f"{rewritten}: the tool kept {len(resizes)} hand-written upsampler(s): {resizes[:3]}")


def build_cases(args) -> list[Case]:
    work = args.work / "models"
    work.mkdir(parents=True, exist_ok=True)
    cases = []
    if "layers" in args.suite:
        for (k, s, p, op) in GEOMETRIES:
            for c in args.channels:
                for h in args.sizes:
                    name = layer_name(c, h, k, s, p, op)
                    if args.layer_filter and not re.search(args.layer_filter, name):
                        continue
                    original = work / f"{name}.onnx"
                    if not original.exists():
                        onnx.save(make_layer_model(c, h, k, s, p, op), str(original))
                    cases.append(Case(name, original, work / f"{name}.xnn.onnx", "layer", (c, h, k, s, p, op)))
    if "handwritten" in args.suite:
        for kind in HANDWRITTEN_KINDS:
            for c in args.channels:
                for h in args.sizes:
                    name = f"{kind}_C{c}_H{h}"
                    if args.layer_filter and not re.search(args.layer_filter, name):
                        continue
                    original = work / f"{name}.onnx"
                    if not original.exists():
                        onnx.save(make_handwritten_model(kind, c, h), str(original))
                    cases.append(Case(name, original, work / f"{name}.xnn.onnx", "layer"))
    if "migan" in args.suite:
        for form in args.migan_forms:
            original = work / f"migan{args.migan_size}{form}.onnx"
            form_a = work / f"migan{args.migan_size}a.onnx"
            for path, f in ((form_a, "deconv"), (original, "handwritten")):
                if not path.exists() and (path == form_a or form == "b"):
                    run_tool([str(args.make_examples), "--migan", str(args.migan_size), "--form", f, "-o", str(path)],
                             "dwdeconv-make-examples")
            if form == "a-img" and not original.exists():
                # onnx2tf cannot convert form (a) as is (its layout tracking breaks on the 3-channel image path,
                # see BENCHMARKS.md); with only those six 3-channel upsamplers rewritten it can. Comparing this
                # with the fully rewritten form measures the main path's upsamplers (128 to 512 channels).
                plan = run_tool([str(args.tool), str(form_a), "--dry-run"], "dwdeconv-rewrite --dry-run")
                only = [a for name in re.findall(r'"([^"]*img_up)"', plan) for a in ("--only", name)]
                run_tool([str(args.tool), str(form_a), "-o", str(original), "-q"] + only, "dwdeconv-rewrite --only")
            # Form (b) is rewritten from itself (its nearest x mask upsamplers, form nearest_mask); "b-vs-a"
            # compares (b) as written with the rewritten form (a), as the executor's table in BENCHMARKS.md does.
            if form == "b":
                rewritten = work / f"migan{args.migan_size}b.xnn.onnx"
            else:
                rewritten = work / f"migan{args.migan_size}a.xnn.onnx"
            cases.append(Case(f"migan{args.migan_size}{form}", original, rewritten, "model"))
    if "dla" in args.suite:
        original = work / f"dla{args.dla_size}.onnx"
        if not original.exists():
            run_tool([str(args.make_examples), "--dla", str(args.dla_size), "-o", str(original)], "dwdeconv-make-examples")
        cases.append(Case(f"dla{args.dla_size}", original, work / f"dla{args.dla_size}.xnn.onnx", "model"))
    for i, (a, b) in enumerate(args.pair or []):
        cases.append(Case(f"pair{i}_{Path(a).stem}", Path(a), Path(b), "pair"))
    for case in cases:
        if case.kind == "pair":
            continue
        source = case.original
        if case.name.startswith("migan") and not case.name.endswith("b"):
            source = work / f"migan{args.migan_size}a.onnx"
        rewrite(args.tool, source, case.rewritten)
    return cases


def onnx_inputs(path: Path, seed: int) -> dict[str, np.ndarray]:
    """A seeded standard-normal input for every graph input (fixed shapes only)."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if any(d <= 0 for d in dims):
            raise RuntimeError(f"{path}: input '{value.name}' has a symbolic dim; export it with a fixed shape")
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def onnx_op_counts(path: Path) -> dict[str, int]:
    model = onnx.load(str(path), load_external_data=False)
    return dict(collections.Counter((n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node))


# ---------------------------------------------------------------------------------------------------------------
# Runtimes. Each loads a model into a Runner: feed(inputs) once, then invoke() is what is timed, and outputs()
# gives the results in ONNX layout (NCHW) for the agreement check.


class OrtRuntime:
    name = "ort"

    def __init__(self, work: Path):
        import onnxruntime

        self.ort = onnxruntime
        onnxruntime.set_default_logger_severity(3)  # not the warning that an NCHWc-optimised graph is machine-specific
        self.work = work / "ort"
        self.work.mkdir(parents=True, exist_ok=True)

    def versions(self):
        return {"onnxruntime": self.ort.__version__}

    def prepare(self, path: Path) -> dict:
        """Saves ORT's optimised graph (the graph its CPU provider runs) and returns its op list."""
        optimized = self.work / f"{path.stem}.ort_optimized.onnx"
        options = self._options(1)
        options.optimized_model_filepath = str(optimized)
        self.ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return {"ops": onnx_op_counts(optimized), "optimized_graph": str(optimized)}

    def _options(self, threads: int):
        options = self.ort.SessionOptions()
        options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        return options

    def load(self, path: Path, threads: int, profile_prefix: str | None = None):
        options = self._options(threads)
        if profile_prefix:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        session = self.ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return OrtRunner(session)

    def profile(self, path: Path, threads: int, inputs, runs: int) -> dict[str, float]:
        """ms per run by op type, from ORT's profiling JSON."""
        runner = self.load(path, threads, profile_prefix=str(self.work / f"{path.stem}.profile"))
        runner.feed(inputs)
        for _ in range(runs):
            runner.invoke()
        trace = runner.session.end_profiling()
        totals = collections.Counter()
        with open(trace) as f:
            for event in json.load(f):
                if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
                    totals[event["args"]["op_name"]] += event["dur"] / 1000.0
        return {op: ms / runs for op, ms in totals.most_common()}


class OrtRunner:
    def __init__(self, session):
        self.session = session
        self.names = [o.name for o in session.get_outputs()]

    def feed(self, inputs):
        self.inputs = inputs

    def invoke(self):
        self.result = self.session.run(self.names, self.inputs)

    def outputs(self, onnx_shapes):
        return self.result


class LiteRtRuntime:
    """onnx2tf (run in a child process: TensorFlow and LiteRT stay out of each other's way) + ai-edge-litert."""

    name = "litert"

    def __init__(self, work: Path):
        from ai_edge_litert import interpreter as litert

        self.litert = litert
        self.work = work / "litert"
        self.work.mkdir(parents=True, exist_ok=True)
        self.jobs = 1

    def versions(self):
        from importlib.metadata import version

        return {p: version(p) for p in ("ai-edge-litert", "onnx2tf", "tensorflow", "onnx")}

    def tflite_path(self, path: Path) -> Path:
        return self.work / path.stem / f"{path.stem}_float32.tflite"

    def convert_all(self, paths: list[Path]):
        todo = [p for p in dict.fromkeys(paths) if not self.tflite_path(p).exists()]
        if not todo:
            return
        # Few children for all of them: importing TensorFlow costs seconds. Biggest first, spread over the jobs.
        todo.sort(key=lambda p: p.stat().st_size, reverse=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "_onnx2tf", str(self.work)]
        children = [subprocess.Popen(cmd + [str(p) for p in todo[j::self.jobs]]) for j in range(self.jobs)]
        for child in children:
            child.wait()
        for p in todo:
            if not self.tflite_path(p).exists():
                log = self.work / p.stem / "onnx2tf.log"
                raise RuntimeError(f"onnx2tf did not convert {p}; see {log}")

    def prepare(self, path: Path) -> dict:
        """The .tflite's op list, and which of its ops the XNNPACK delegate took."""
        tflite = self.tflite_path(path)
        delegated = self.litert.Interpreter(model_path=str(tflite), num_threads=1)
        delegated.allocate_tensors()
        ops = delegated._get_ops_details()
        on_cpu = ops_left_to_tflite(ops, {t["index"] for t in delegated.get_output_details()})
        total = collections.Counter(op["op_name"] for op in ops if op["op_name"] != "DELEGATE")
        left = collections.Counter(op["op_name"] for op in ops if op["index"] in on_cpu)
        return {"ops": dict(total), "tflite": str(tflite),
                "xnnpack_partitions": sum(op["op_name"] == "DELEGATE" for op in ops),
                "not_delegated": dict(left)}

    def load(self, path: Path, threads: int):
        interpreter = self.litert.Interpreter(model_path=str(self.tflite_path(path)), num_threads=threads)
        interpreter.allocate_tensors()
        return LiteRtRunner(interpreter)


def onnx2tf_child(work: Path, paths: list[str]):
    """Converts each ONNX file with onnx2tf's Python API, float32, one output folder per model.

    onnx2tf also writes a SavedModel and a float16 .tflite, which are not used here and cost two thirds of the
    time of a C=512 layer (512 per-channel transposed convolutions). Both are skipped: SavedModel export is a
    no-op, and the converter stops at its second convert() (the float16 one). The float32 .tflite is converted
    from the same Keras model either way.
    """
    import onnx2tf
    import tensorflow as tf

    class Float32Written(Exception):
        pass

    def stop_after_first_convert(make):
        def wrapped(*a, **k):
            converter = make(*a, **k)
            real, calls = converter.convert, []

            def convert():
                calls.append(1)
                if len(calls) > 1:
                    raise Float32Written()
                return real()

            converter.convert = convert
            return converter

        return staticmethod(wrapped)

    tf.saved_model.save = lambda *a, **k: None
    for factory in ("from_keras_model", "from_concrete_functions"):
        setattr(tf.lite.TFLiteConverter, factory, stop_after_first_convert(getattr(tf.lite.TFLiteConverter, factory)))

    # onnx2tf simplifies its input in place by running the `onnxsim` command, which must be on PATH (as it is in
    # an activated environment); without it onnx2tf converts the unsimplified model and only warns.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    for p in map(Path, paths):
        out = work / p.stem
        out.mkdir(parents=True, exist_ok=True)
        log = out / "onnx2tf.log"
        source = out / p.name  # a copy: onnx2tf overwrites its input with onnxsim's output
        shutil.copyfile(p, source)
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            try:
                onnx2tf.convert(input_onnx_file_path=str(source), output_folder_path=str(out), non_verbose=True,
                                copy_onnx_input_output_names_to_tflite=True)
            except Float32Written:
                pass
            except BaseException as e:  # noqa: BLE001 - report and go on with the next model
                print(f"onnx2tf failed: {type(e).__name__}: {e}")
        print(f"onnx2tf {p.name}: {'ok' if (out / f'{p.stem}_float32.tflite').exists() else 'FAILED, see ' + str(log)}",
              flush=True)


def ops_left_to_tflite(ops, graph_outputs: set) -> set:
    """Indices of the nodes that the delegate did not take, from the node list after delegation.

    LiteRT keeps the replaced nodes in its node list and appends one DELEGATE node per partition, so a node runs
    on TFLite's own kernels when something outside a partition reads an output that no DELEGATE node produces:
    a DELEGATE node, a graph output, or (working back) another such node.
    """
    delegates = [op for op in ops if op["op_name"] == "DELEGATE"]
    produced = {t for op in delegates for t in op["outputs"]}
    read = collections.Counter(t for op in delegates for t in op["inputs"])
    nodes = [op for op in ops if op["op_name"] != "DELEGATE"]
    on_cpu = set()
    changed = True
    while changed:
        changed = False
        for op in nodes:
            if op["index"] in on_cpu:
                continue
            outs = [t for t in op["outputs"] if t not in produced]
            if any(t in graph_outputs or read[t] for t in outs):
                on_cpu.add(op["index"])
                read.update(t for t in op["inputs"])
                changed = True
    return on_cpu


class LiteRtRunner:
    """Feeds ONNX-layout (NCHW) inputs into the NHWC .tflite that onnx2tf writes, and the outputs back."""

    def __init__(self, interpreter):
        self.interpreter = interpreter
        self.in_details = interpreter.get_input_details()
        self.out_details = interpreter.get_output_details()

    @staticmethod
    def _match(details, names):
        """Each ONNX name's tensor detail: by name (onnx2tf keeps them, sometimes with a serving prefix or ':0')."""
        by_name = {}
        for d in details:
            bare = re.sub(r"^serving_default_|:\d+$", "", d["name"])
            by_name[bare] = d
        if all(n in by_name for n in names):
            return [by_name[n] for n in names]
        if len(details) == len(names) == 1:
            return list(details)
        raise RuntimeError(f"cannot match ONNX names {names} to tflite tensors {[d['name'] for d in details]}")

    def feed(self, inputs):
        for detail, (name, x) in zip(self._match(self.in_details, list(inputs)), inputs.items()):
            self.interpreter.set_tensor(detail["index"], to_nhwc(x, tuple(detail["shape"])))

    def invoke(self):
        self.interpreter.invoke()

    def outputs(self, onnx_shapes):
        return [to_nchw(self.interpreter.get_tensor(d["index"]), s) for d, s in zip(self.out_details, onnx_shapes)]


# onnx2tf turns 4D tensors NCHW -> NHWC, model inputs and outputs included, but may leave a model output in NCHW
# (it does for MI-GAN's image). Where both layouts fit a shape (C equal to H and W, as a C=64 layer's 64x64
# output) the NHWC default is taken: guessing from shapes alone made a correct conversion look wrong there.
def to_nhwc(x: np.ndarray, shape: tuple) -> np.ndarray:
    nhwc = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim == 4 else x
    if nhwc.shape == shape:
        return nhwc
    if x.shape == shape:
        return x
    raise RuntimeError(f"input of shape {x.shape} does not fit the converted model's {shape}")


def to_nchw(y: np.ndarray, onnx_shape: tuple) -> np.ndarray:
    nchw = np.moveaxis(y, -1, 1) if y.ndim == 4 else y
    if nchw.shape == onnx_shape:
        return nchw
    if y.shape == onnx_shape:
        return y
    raise RuntimeError(f"output of shape {y.shape} does not fit the ONNX model's {onnx_shape}")


class ExecuTorchRuntime:
    """onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> to_executorch."""

    name = "executorch"

    def __init__(self, work: Path):
        import torch
        from executorch.runtime import Runtime

        self.torch = torch
        self.runtime = Runtime.get()
        self.work = work / "executorch"
        self.work.mkdir(parents=True, exist_ok=True)
        self.conversion = {}

    def versions(self):
        from importlib.metadata import version

        return {p: version(p) for p in ("executorch", "torch", "onnx2torch", "onnx")}

    def pte_path(self, path: Path) -> Path:
        return self.work / f"{path.stem}.pte"

    def convert_all(self, paths):
        for p in dict.fromkeys(paths):
            self.conversion[p] = self._convert(p)

    def _convert(self, path: Path) -> dict:
        """Converts one model and returns its op lists, or where and why it did not convert."""
        import onnx2torch
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        info = {}
        stage = "onnx2torch.convert"
        try:
            module = onnx2torch.convert(str(path)).eval()
            inputs = tuple(self.torch.from_numpy(x) for x in onnx_inputs(path, 0).values())
            stage = "torch.export.export"
            with self.torch.no_grad():
                exported = self.torch.export.export(module, inputs)
            info["aten_ops"] = dict(collections.Counter(
                str(n.target) for n in exported.graph.nodes if n.op == "call_function"))
            stage = "to_edge_transform_and_lower(XnnpackPartitioner)"
            edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
            graph = edge.exported_program().graph
            info["after_lowering"] = dict(collections.Counter(
                str(n.target) for n in graph.nodes if n.op == "call_function"))
            stage = "to_executorch"
            program = edge.to_executorch()
            self.pte_path(path).write_bytes(program.buffer)
        except Exception as e:  # noqa: BLE001 - the reason is the finding
            info["failed"] = f"{stage}: {type(e).__name__}: {str(e).strip().splitlines()[0][:400] if str(e).strip() else ''}"
        return info

    def prepare(self, path: Path) -> dict:
        info = self.conversion.get(path) or {}
        if "failed" in info:
            raise RuntimeError(f"did not convert: {info['failed']}")
        return {"ops": info.get("after_lowering", {}), "aten_ops": info.get("aten_ops", {})}

    def set_threads(self, threads: int):
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)

    def load(self, path: Path, threads: int):
        self.set_threads(threads)
        program = self.runtime.load_program(self.pte_path(path))
        return ExecuTorchRunner(program.load_method("forward"), self.torch)


class ExecuTorchRunner:
    def __init__(self, method, torch):
        self.method = method
        self.torch = torch

    def feed(self, inputs):
        self.inputs = [self.torch.from_numpy(x) for x in inputs.values()]

    def invoke(self):
        self.result = self.method.execute(self.inputs)

    def outputs(self, onnx_shapes):
        return [r.numpy() for r in self.result]


RUNTIMES = {"ort": OrtRuntime, "litert": LiteRtRuntime, "executorch": ExecuTorchRuntime}


# ---------------------------------------------------------------------------------------------------------------
# Checking and timing


def compare(a_list, b_list):
    """Max abs error over all outputs, and that error relative to the original output's largest magnitude."""
    max_abs, scale = 0.0, 0.0
    for a, b in zip(a_list, b_list, strict=True):
        if a.shape != b.shape:
            raise RuntimeError(f"output shapes differ: {a.shape} vs {b.shape}")
        max_abs = max(max_abs, float(np.max(np.abs(a.astype(np.float64) - b))))
        scale = max(scale, float(np.max(np.abs(a))))
    return max_abs, max_abs / scale if scale > 0 else max_abs


def time_interleaved(a, b, budget: float, min_pairs: int, max_pairs: int, warmup: int = 2):
    """Medians of a() and b() timed A B A B until `budget` seconds have passed (at least min_pairs pairs)."""
    for _ in range(warmup):
        a()
        b()
    times_a, times_b = [], []
    start = time.perf_counter()
    while len(times_a) < max_pairs and (len(times_a) < min_pairs or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        a()
        t1 = time.perf_counter()
        b()
        t2 = time.perf_counter()
        times_a.append(t1 - t0)
        times_b.append(t2 - t1)
    return statistics.median(times_a) * 1e3, statistics.median(times_b) * 1e3, len(times_a)


def onnx_output_shapes(path: Path):
    model = onnx.load(str(path), load_external_data=False)
    return [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output]


def measure(runtime, case: Case, threads: int, args, reference=None) -> dict:
    row = {"case": case.name, "runtime": runtime.name, "threads": threads}
    inputs = onnx_inputs(case.original, seed=1)
    shapes = onnx_output_shapes(case.original)
    runners = []
    for path in (case.original, case.rewritten):
        runner = runtime.load(path, threads)
        runner.feed(inputs)
        runner.invoke()
        runners.append(runner)
    outs = [r.outputs(shapes) for r in runners]
    row["max_abs"], row["max_rel"] = compare(outs[0], outs[1])
    if reference is not None:
        row["vs_onnx_max_abs"], row["vs_onnx_max_rel"] = compare(reference, outs[0])
    if not row["max_rel"] <= REL_TOLERANCE:
        row["error"] = f"original and rewritten disagree: max rel {row['max_rel']:.2e} > {REL_TOLERANCE:g}; not timed"
        return row
    ms_a, ms_b, pairs = time_interleaved(runners[0].invoke, runners[1].invoke, args.budget, args.min_pairs,
                                         args.max_pairs)
    row.update(original_ms=ms_a, rewritten_ms=ms_b, ratio=ms_a / ms_b, pairs=pairs)
    return row


def ort_reference(case: Case):
    """The original ONNX model's outputs from ONNX Runtime without graph optimisations, for the conversion check."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(str(case.original), options, providers=["CPUExecutionProvider"])
    return session.run(None, onnx_inputs(case.original, seed=1))


# ---------------------------------------------------------------------------------------------------------------
# Reports


def fmt_ops(ops: dict) -> str:
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def markdown(results: dict) -> str:
    lines = []
    for rt, block in results["runtimes"].items():
        lines.append(f"### {rt} ({', '.join(f'{k} {v}' for k, v in block['versions'].items())})\n")
        lines.append("| case | threads | original ms | rewritten ms | ratio | max abs | max rel | vs ONNX (rel) | pairs |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in block["rows"]:
            if "error" in row:
                lines.append(f"| {row['case']} | {row['threads']} | - | - | - | {row.get('max_abs', float('nan')):.2e} "
                             f"| {row.get('max_rel', float('nan')):.2e} | - | {row['error']} |")
                continue
            ref = f"{row['vs_onnx_max_rel']:.1e}" if "vs_onnx_max_rel" in row else "-"
            lines.append(f"| {row['case']} | {row['threads']} | {row['original_ms']:.3f} | {row['rewritten_ms']:.3f} "
                         f"| **{row['ratio']:.2f}x** | {row['max_abs']:.2e} | {row['max_rel']:.1e} | {ref} | {row['pairs']} |")
        lines.append("")
        lines.append("Converted graphs (op: count):\n")
        for name, info in block["graphs"].items():
            if "failed" in info:
                lines.append(f"- `{name}`: **did not convert**: {info['failed']}")
                continue
            extra = ""
            if "xnnpack_partitions" in info:
                left = fmt_ops(info["not_delegated"]) or "none"
                extra = f"; XNNPACK partitions: {info['xnnpack_partitions']}, ops left to TFLite's kernels: {left}"
            lines.append(f"- `{name}`: {fmt_ops(info['ops'])}{extra}")
        if block.get("profiles"):
            lines.append("\nProfiles (ms per run by op type):\n")
            for name, prof in block["profiles"].items():
                if "failed" in prof:
                    top = prof["failed"]
                elif "percent_by_symbol" in prof:
                    top = f"{prof['ms_per_run']:.2f} ms/run; " + ", ".join(
                        f"{sym} {pct:.1f}%" for sym, pct in list(prof["percent_by_symbol"].items())[:12])
                else:
                    top = ", ".join(f"{op} {ms:.2f}" for op, ms in list(prof.items())[:12])
                lines.append(f"- `{name}`: {top}")
        lines.append("")
    return "\n".join(lines)


def run_child(runtime_name: str, work: Path, path: Path, threads: int, runs: int):
    """Runs one model `runs` times after a warm-up; with perf's control FIFO in the environment (see
    perf_profile), samples only those runs, not Python's start-up or the model's loading."""
    runtime = RUNTIMES[runtime_name](work)
    if runtime_name == "executorch" and not runtime.pte_path(path).exists():
        runtime.convert_all([path])
    runner = runtime.load(path, threads)
    runner.feed(onnx_inputs(path, seed=1))
    for _ in range(2):
        runner.invoke()
    ctl, ack = os.environ.get("BENCH_PERF_CTL"), os.environ.get("BENCH_PERF_ACK")

    def perf_control(command):
        if ctl:
            with open(ctl, "w") as c:
                c.write(command + "\n")
            with open(ack) as a:
                a.readline()

    perf_control("enable")
    start = time.perf_counter()
    for _ in range(runs):
        runner.invoke()
    elapsed = time.perf_counter() - start
    perf_control("disable")
    print(json.dumps({"ms_per_run": elapsed / runs * 1e3}))


def perf_profile(runtime_name: str, work: Path, path: Path, threads: int, runs: int) -> dict:
    """Where a runtime spends a run of `path`: Linux perf samples of the timed runs, by symbol (XNNPACK's
    microkernels and TFLite's kernels are named in ai-edge-litert's shared library)."""
    folder = Path(tempfile.mkdtemp(prefix="perf-", dir=work))
    ctl, ack, data = folder / "ctl", folder / "ack", folder / "perf.data"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    env = dict(os.environ, BENCH_PERF_CTL=str(ctl), BENCH_PERF_ACK=str(ack))
    child = [sys.executable, str(Path(__file__).resolve()), "_run", runtime_name, str(work), str(path), str(threads),
             str(runs)]
    done = subprocess.run(["perf", "record", "-F", "999", "-D", "-1", f"--control=fifo:{ctl},{ack}", "-o", str(data),
                           "--"] + child, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"perf record failed: {done.stderr.strip()[-400:]}")
    ms = json.loads([l for l in done.stdout.splitlines() if l.startswith("{")][-1])["ms_per_run"]
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "symbol",
                             "--percent-limit", "1", "-q"], capture_output=True, text=True, check=True).stdout
    symbols = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.+?)(\s+-)*\s*$", line)
        if m:
            symbols[m.group(2)[:90]] = float(m.group(1))
    shutil.rmtree(folder)
    return {"ms_per_run": ms, "percent_by_symbol": symbols}


def benchmarks_tables(paths: list[str]) -> str:
    """BENCHMARKS.md's tables from one or more --json files: per runtime, one row per case with each thread
    count's times and ratio side by side."""
    out = []
    for path in paths:
        results = json.loads(Path(path).read_text())
        load = f"load average {results['machine']['loadavg'][0]:.1f} before, {results['machine_after']['loadavg'][0]:.1f} after"
        for rt, block in results["runtimes"].items():
            threads = sorted({r["threads"] for r in block["rows"]})
            out.append(f"{rt}, {', '.join(f'{k} {v}' for k, v in block['versions'].items())}; "
                       f"{results['machine']['date_utc']} UTC, {load}\n")
            head = "| case |" + "".join(f" {t}T original ms | {t}T rewritten ms | {t}T ratio |" for t in threads)
            out += [head + " max abs (rel) | pairs |", "|---|" + "---:|---:|---:|" * len(threads) + "---:|---:|"]
            rows = collections.OrderedDict()
            for r in block["rows"]:
                rows.setdefault(r["case"], {})[r["threads"]] = r
            for case, by_t in rows.items():
                cells, agree, pairs = [], "", []
                for t in threads:
                    r = by_t.get(t, {})
                    if "ratio" in r:
                        cells.append(f" {r['original_ms']:.3f} | {r['rewritten_ms']:.3f} | **{r['ratio']:.2f}x** |")
                        pairs.append(str(r["pairs"]))
                    else:
                        cells.append(f" - | - | {r.get('error', 'not run')} |")
                    if "max_abs" in r:
                        agree = f"{r['max_abs']:.1e} ({r['max_rel']:.0e})"
                out.append(f"| {case} |" + "".join(cells) + f" {agree} | {'/'.join(pairs)} |")
            out.append("")
    return "\n".join(out)


def machine_state() -> dict:
    return {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "loadavg": os.getloadavg(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.processor() or platform.machine()}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_onnx2tf":
        return onnx2tf_child(Path(argv[1]), argv[2:])
    if argv and argv[0] == "_tables":
        print(benchmarks_tables(argv[1:]))
        return 0
    if argv and argv[0] == "_run":
        return run_child(argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), int(argv[5]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtime", nargs="+", choices=list(RUNTIMES), required=True)
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--suite", nargs="*", choices=["layers", "handwritten", "migan", "dla"], default=[])
    parser.add_argument("--pair", nargs=2, action="append", metavar=("ORIGINAL", "REWRITTEN"))
    parser.add_argument("--channels", nargs="+", type=int, default=CHANNELS)
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    parser.add_argument("--layer-filter", help="only layers whose name matches this regex, e.g. 'k4s2p1op0_C64'")
    parser.add_argument("--migan-size", type=int, default=256)
    parser.add_argument("--migan-forms", nargs="+", choices=["a", "b", "a-img"], default=["a"],
                        help="a: stock deconvs; b: hand-written; a-img: (a) with its 3-channel image upsamplers rewritten")
    parser.add_argument("--dla-size", type=int, default=512)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed pairs per case (default 1)")
    parser.add_argument("--min-pairs", type=int, default=5)
    parser.add_argument("--max-pairs", type=int, default=200)
    parser.add_argument("--profile", action="store_true",
                        help="also profile each model case: ORT's profiler by op type; perf by symbol for the others")
    parser.add_argument("--profile-layers", help="also profile the layers whose name matches this regex")
    parser.add_argument("--profile-runs", type=int, default=10)
    parser.add_argument("--convert-jobs", type=int, default=1, help="onnx2tf conversions run in parallel")
    parser.add_argument("--prepare-only", action="store_true", help="convert, list ops and check; do not time")
    parser.add_argument("--work", type=Path, default=Path("bench-runtimes-work"))
    parser.add_argument("--tool", type=Path, default=REPO / "build/cli/dwdeconv-rewrite")
    parser.add_argument("--make-examples", type=Path, default=REPO / "build/examples/dwdeconv-make-examples")
    parser.add_argument("--json", type=Path, help="write the results here (default WORK/results-RUNTIMES.json)")
    args = parser.parse_args(argv)
    if not args.suite and not args.pair:
        parser.error("nothing to measure: give --suite and/or --pair")
    args.work.mkdir(parents=True, exist_ok=True)

    cases = build_cases(args)
    results = {"machine": machine_state(), "command": [sys.executable] + sys.argv, "runtimes": {}}
    for rt_name in args.runtime:
        runtime = RUNTIMES[rt_name](args.work)
        runtime.jobs = args.convert_jobs
        block = {"versions": runtime.versions(), "rows": [], "graphs": {}, "profiles": {}}
        results["runtimes"][rt_name] = block
        paths = list(dict.fromkeys(p for c in cases for p in (c.original, c.rewritten)))
        if hasattr(runtime, "convert_all"):
            try:
                runtime.convert_all(paths)
            except RuntimeError as e:
                print(f"{rt_name}: {e}", file=sys.stderr)
        for path in paths:
            try:
                block["graphs"][path.stem] = runtime.prepare(path)
            except Exception as e:  # noqa: BLE001 - a conversion that fails is a finding, reported in the table
                block["graphs"][path.stem] = {"failed": f"{type(e).__name__}: {e}"}
        for case in cases:
            if any("failed" in block["graphs"][p.stem] for p in (case.original, case.rewritten)):
                continue
            reference = ort_reference(case) if rt_name != "ort" else None
            for threads in args.threads:
                try:
                    row = measure(runtime, case, threads, args if not args.prepare_only else _no_timing(args), reference)
                except Exception as e:  # noqa: BLE001
                    row = {"case": case.name, "runtime": rt_name, "threads": threads, "error": f"{type(e).__name__}: {e}"}
                block["rows"].append(row)
                print(json.dumps(row), flush=True)
            if (args.profile and case.kind != "layer") or (args.profile_layers and re.search(args.profile_layers, case.name)):
                for path in (case.original, case.rewritten):
                    try:
                        if rt_name == "ort":
                            block["profiles"][path.stem] = runtime.profile(path, args.threads[0], onnx_inputs(path, 1),
                                                                           args.profile_runs)
                        else:
                            block["profiles"][path.stem] = perf_profile(rt_name, args.work, path, args.threads[0],
                                                                        args.profile_runs)
                    except Exception as e:  # noqa: BLE001
                        block["profiles"][path.stem] = {"failed": f"{type(e).__name__}: {e}"}
    results["machine_after"] = machine_state()
    out = args.json or args.work / f"results-{'-'.join(args.runtime)}.json"
    out.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"results: {out}")
    return 0


def _no_timing(args):
    quick = argparse.Namespace(**vars(args))
    quick.budget, quick.min_pairs, quick.max_pairs = 0.0, 1, 1
    return quick


if __name__ == "__main__":
    sys.exit(main())
