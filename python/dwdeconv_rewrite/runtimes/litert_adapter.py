"""LiteRT (TFLite): onnx2tf to a float32 .tflite, run by ai-edge-litert's Interpreter with its XNNPACK delegate."""
from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from .base import Runner, Runtime
from .common import StageError, check_feed_names, child_command, model_key, onnx_input_names, onnx_output_shapes


class LiteRtRuntime(Runtime):
    """onnx2tf (run in a child process: TensorFlow and LiteRT stay out of each other's way) + ai-edge-litert."""

    name = "litert"

    def __init__(self, work: Path):
        from ai_edge_litert import interpreter as litert

        self.litert = litert
        self.work = work / "litert"
        self.work.mkdir(parents=True, exist_ok=True)
        self.jobs = 1
        self.child_stdout = None  # where the converter child's progress lines go (None: this process's stdout)

    def versions(self):
        from importlib.metadata import version

        return {p: version(p) for p in ("ai-edge-litert", "onnx2tf", "tensorflow", "onnx")}

    def label(self):
        from importlib.metadata import version

        return f"LiteRT {version('ai-edge-litert')} (XNNPACK delegate)"

    def tflite_path(self, path: Path) -> Path:
        return self.work / model_key(path) / f"{path.stem}_float32.tflite"

    def convert_all(self, paths: list[Path]):
        todo = [p for p in dict.fromkeys(paths) if not self.tflite_path(p).exists()]
        if not todo:
            return
        # Few children for all of them: importing TensorFlow costs seconds. Biggest first, spread over the jobs.
        todo.sort(key=lambda p: p.stat().st_size, reverse=True)
        children = []
        for j in range(self.jobs):
            cmd, env = child_command("_onnx2tf", self.work, *todo[j::self.jobs])
            children.append(subprocess.Popen(cmd, env=env, stdout=self.child_stdout))
        for child in children:
            child.wait()

    def prepare(self, path: Path) -> dict:
        """The .tflite's op list, and which of its ops the XNNPACK delegate took."""
        tflite = self.tflite_path(path)
        if not tflite.exists():
            log = self.work / model_key(path) / "onnx2tf.log"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            said = [l for l in lines if l.startswith("onnx2tf failed:")] or [l for l in lines if l.strip()][-1:]
            message = said[-1].removeprefix("onnx2tf failed: ")[:400] if said else "no log"
            raise StageError("onnx2tf", f"{message} (log: {log})")
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
        return LiteRtRunner(interpreter, onnx_input_names(path), onnx_output_shapes(path))


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
    # For a model whose inputs look like RGB images (N <= 20, 3 channels) onnx2tf downloads sample images from
    # GitHub to check its conversion with; offline that fails the whole conversion (RRDBNet). Seeded random data of
    # the same shape stands in: the script checks every conversion against ONNX Runtime itself.
    def offline_test_images():
        return np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32)

    import onnx2tf.onnx2tf as onnx2tf_main
    import onnx2tf.utils.common_functions as onnx2tf_common
    onnx2tf_main.download_test_image_data = onnx2tf_common.download_test_image_data = offline_test_images
    for p in map(Path, paths):
        out = work / model_key(p)
        out.mkdir(parents=True, exist_ok=True)
        log = out / "onnx2tf.log"
        source = out / p.name  # a copy: onnx2tf overwrites its input with onnxsim's output
        shutil.copyfile(p, source)
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            try:
                # Not copy_onnx_input_output_names_to_tflite: with flatc on PATH it renames the outputs by position
                # (see tflite_io_by_name); the SignatureDef TFLite writes from the Keras model names them.
                onnx2tf.convert(input_onnx_file_path=str(source), output_folder_path=str(out), non_verbose=True)
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


class LiteRtRunner(Runner):
    """Feeds ONNX-layout (NCHW) inputs into the NHWC .tflite that onnx2tf writes, and the outputs back, each tensor
    found by its ONNX name (see tflite_io_by_name)."""

    def __init__(self, interpreter, onnx_inputs: list[str], onnx_outputs: dict[str, tuple]):
        self.interpreter = interpreter
        self.onnx_inputs = list(onnx_inputs)
        self.onnx_outputs = dict(onnx_outputs)
        self.in_details, self.out_details = tflite_io_by_name(interpreter, self.onnx_inputs, list(self.onnx_outputs))

    def feed(self, inputs):
        check_feed_names(self.onnx_inputs, inputs, "the converted .tflite")
        for name, x in inputs.items():
            detail = self.in_details[name]
            want = np.dtype(detail["dtype"])
            if x.dtype != want:
                # onnx2tf makes a float16 input a float32 one: fed the same values, exactly. A cast that could
                # change a value is refused instead.
                if not np.can_cast(x.dtype, want, "safe"):
                    raise RuntimeError(f"graph input '{name}' is {x.dtype}, but the converted .tflite takes {want}")
                x = x.astype(want)
            self.interpreter.set_tensor(detail["index"], to_nhwc(x, tuple(detail["shape"])))

    def invoke(self):
        self.interpreter.invoke()

    def outputs(self) -> dict:
        return {name: to_nchw(self.interpreter.get_tensor(self.out_details[name]["index"]), shape)
                for name, shape in self.onnx_outputs.items()}


def _onnx2tf_spellings(name: str) -> set[str]:
    """The names onnx2tf may give the Keras layer of ONNX value `name`: its own, or with ':' spelled '__' (1.29;
    earlier releases spelled it '_'), which TFLite's converter then uses as the signature key."""
    return {name, name.replace(":", "__"), name.replace(":", "_")}


def _by_name(onnx_names: list[str], keyed: dict) -> dict | None:
    """{ONNX name: tflite tensor detail} from `keyed` (tflite name -> detail), when each ONNX name matches exactly one
    key under _onnx2tf_spellings and each key exactly one ONNX name; else None."""
    keys = {}
    for name in onnx_names:
        hits = [k for k in keyed if k in _onnx2tf_spellings(name)]
        if len(hits) != 1:
            return None
        keys[name] = hits[0]
    if len(set(keys.values())) != len(keys) or len(keys) != len(keyed):
        return None
    return {name: keyed[k] for name, k in keys.items()}


def tflite_io_by_name(interpreter, onnx_inputs: list[str], onnx_outputs: list[str]):
    """({ONNX input name: tflite input detail}, {ONNX output name: tflite output detail}), or RuntimeError.

    What the names rest on. onnx2tf (1.29, onnx2tf.py) builds a Keras model whose Input layers carry the ONNX input
    names and renames each output's layer to the ONNX output name ("Bring back output names from ONNX model",
    ':' spelled '__'); TFLite's converter (tf.lite, from_keras_model -> trace_model_call) then returns the outputs
    as a dict keyed by those names, and writes that dict as the .tflite's "serving_default" SignatureDef. The
    SignatureDef's keys are the names; the order of the subgraph's outputs is not (tf.nest sorts the dict's keys:
    an ONNX model with outputs [q, p] gets tflite outputs [p, q]). The tensor names are no help either: outputs are
    'PartitionedCall:N' / 'Identity_N'. And copy_onnx_input_output_names_to_tflite does not fix it: it rewrites the
    names only with `flatc` on PATH, and then pairs the subgraph's outputs with the ONNX names by position (or by
    element count) - so it is no longer passed.

    So: inputs and outputs are taken from the one SignatureDef, by name. Where that fails - no SignatureDef (onnx2tf
    falls back to from_concrete_functions when the Keras path fails, e.g. for '/' in a name), a count that differs
    from the ONNX graph's (onnx2tf's get_tf_model_outputs skips an output it cannot find and then renames the
    remaining layers by position), a name that matches none or several keys - the model is refused, unless there is
    exactly one tensor on both sides, which cannot be mismatched.
    """
    in_details, out_details = interpreter.get_input_details(), interpreter.get_output_details()
    signatures = interpreter.get_signature_list()
    sig_in, sig_out = {}, {}
    if len(signatures) == 1:
        runner = interpreter.get_signature_runner(next(iter(signatures)))
        sig_in, sig_out = runner.get_input_details(), runner.get_output_details()
        # The SignatureDef must name the subgraph that interpreter.invoke() runs, all of its inputs and outputs.
        if ({d["index"] for d in sig_in.values()} != {d["index"] for d in in_details}
                or {d["index"] for d in sig_out.values()} != {d["index"] for d in out_details}):
            sig_in, sig_out = {}, {}
    where = (f"signature {sorted(signatures)}: inputs {sorted(sig_in)}, outputs {sorted(sig_out)}" if sig_in or sig_out
             else f"no usable SignatureDef ({len(signatures)} found); tensors {[d['name'] for d in in_details]} -> "
                  f"{[d['name'] for d in out_details]}")

    def match(kind, names, sig, details):
        found = _by_name(names, sig) if sig else None
        if found is None and kind == "input" and not sig:
            # Input tensors keep the ONNX names onnx2tf gives the Keras Inputs ('serving_default_NAME:0' with a
            # SignatureDef, NAME without one).
            found = (_by_name(names, {d["name"]: d for d in details})
                     or _by_name(names, {re.sub(r"^serving_default_|:\d+$", "", d["name"]): d for d in details}))
        if found is None and len(names) == len(details) == 1:
            found = {names[0]: details[0]}  # one tensor each side: nothing to mix up
        if found is None:
            raise RuntimeError(f"cannot tell which tflite {kind} is which ONNX {kind} {names} (the converted model has "
                               f"{len(details)} {kind}s; {where}); refusing to pair them by position")
        return found

    return match("input", onnx_inputs, sig_in, in_details), match("output", onnx_outputs, sig_out, out_details)


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
