"""LiteRT (TFLite): onnx2tf to a .tflite (float32, float16 weights, or int8 inside with float32 I/O), run by
ai-edge-litert's Interpreter with its XNNPACK delegate."""
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
from .common import (StageError, calibration_key, child_command, model_key, onnx_input_names,
                     onnx_output_shapes, parse_child_options, read_calibration)

# The .tflite onnx2tf writes for each precision, {stem}_{FILE}.tflite: float32; float16 (fp16 weights, each behind a
# DEQUANTIZE, float32 I/O); integer_quant (int8 weights and activations, float32 I/O: one QUANTIZE after each input,
# one DEQUANTIZE before each output, all taken by XNNPACK). Not full_integer_quant (int8 I/O: the same numbers, and the
# runner would quantize the inputs outside the timed run), nor the int16-activation files (XNNPACK takes none of them).
TFLITE_FILES = {"fp32": "float32", "fp16": "float16", "int8": "integer_quant"}
# What each precision does with onnx2tf 1.29's TFLiteConverter.convert() calls, which come in this order: 1 float32
# (from_keras_model, or from_concrete_functions where the Keras converter cannot be made), 2 float16 (the same
# converter), 3 dynamic range (from_concrete_functions; only with output_integer_quantized_tflite), 4 integer_quant
# (from_saved_model), 5 full_integer_quant, 6-7 int16 activations. "real" converts; "skip" returns no bytes (onnx2tf
# writes an empty file and goes on: the reason each precision has a folder of its own, and an empty file is never a
# conversion); "stop" ends the conversion (an exception that is not a RuntimeError, which onnx2tf's try blocks around
# calls 3 and 5-7 would swallow). The float32 file thus costs one conversion, not the seven onnx2tf makes.
CONVERT_PLANS = {"fp32": ("real", "stop"), "fp16": ("skip", "real", "stop"), "int8": ("skip", "skip", "skip", "real", "stop")}


def precision_folder(precision: str, calibration: str = "") -> str:
    """The folder under WORK/litert/KEY/ a precision's conversion is written to: KEY/ itself for fp32 (as before
    precisions), KEY/fp16/, KEY/int8-CALIBRATION/ (another calibration is another conversion)."""
    return {"fp32": "", "fp16": "fp16"}.get(precision, f"int8-{calibration}")


def converted(tflite: Path) -> bool:
    """A .tflite that was converted: there and not empty (a skipped convert() call leaves an empty one)."""
    return tflite.is_file() and tflite.stat().st_size > 0


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

    def folder(self, path: Path) -> Path:
        return self.work / model_key(path) / precision_folder(self.precision, self.calibration_key)

    def tflite_path(self, path: Path) -> Path:
        return self.folder(path) / f"{path.stem}_{TFLITE_FILES[self.precision]}.tflite"

    def convert_all(self, paths: list[Path]):
        todo = [p for p in dict.fromkeys(paths) if not converted(self.tflite_path(p))]
        if not todo:
            return
        options = ["--precision", self.precision] + (["--calibration", self.calibration_dir] if self.calibration_dir else [])
        # Few children for all of them: importing TensorFlow costs seconds. Biggest first, spread over the jobs.
        todo.sort(key=lambda p: p.stat().st_size, reverse=True)
        children = []
        for j in range(self.jobs):
            cmd, env = child_command("_onnx2tf", self.work, *options, "--", *todo[j::self.jobs])
            children.append(subprocess.Popen(cmd, env=env, stdout=self.child_stdout))
        for child in children:
            child.wait()

    def prepare(self, path: Path) -> dict:
        """The .tflite's op list, and which of its ops the XNNPACK delegate took."""
        tflite = self.tflite_path(path)
        if not converted(tflite):
            log = self.folder(path) / "onnx2tf.log"
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
        notes = []
        if self.precision == "fp16":
            notes.append("onnx2tf's float16 .tflite stores the weights in fp16 and asks for no fp16 arithmetic: XNNPACK "
                         "widens them once and computes in fp32, so this checks the weights' rounding, not fp16 math")
        return {"ops": dict(total), "tflite": str(tflite),
                "xnnpack_partitions": sum(op["op_name"] == "DELEGATE" for op in ops),
                "not_delegated": dict(left), "precision": self.precision, "notes": notes}

    def load_impl(self, path: Path, threads: int):
        interpreter = self.litert.Interpreter(model_path=str(self.tflite_path(path)), num_threads=threads)
        interpreter.allocate_tensors()
        return LiteRtRunner(interpreter, onnx_input_names(path), onnx_output_shapes(path), int8=self.precision == "int8")


def onnx2tf_child(work: Path, args: list[str]):
    """Converts each ONNX file with onnx2tf's Python API at one precision (ARGS: [--precision P] [--calibration DIR]
    [--] PATHS), one output folder per model and precision (precision_folder).

    onnx2tf converts every model to a SavedModel and to seven .tflite files; only one is used here, and on a C=512
    layer (512 per-channel transposed convolutions) the rest cost most of the time. So each TFLiteConverter.convert()
    call is run, skipped or stopped by CONVERT_PLANS, and the SavedModel export is a no-op except at int8 (whose
    converter reads it back; it is deleted afterwards). int8 is calibrated on the --calibration samples, the same for
    every model: onnx2tf's custom_input_op_name_np_data_path, one .npy per input holding the samples one after
    another in TF layout (NHWC for a 4-D input), mean 0 and std 1 (the values as they are), keyed by the Keras input
    name (onnx2tf's sanitizing under int8: ':' -> '__', a leading '/' -> 'wa/').
    """
    import onnx2tf
    import tensorflow as tf
    from tensorflow.lite.python import lite

    options, paths = parse_child_options(args)
    precision = options["precision"]
    plan = CONVERT_PLANS[precision]
    samples = read_calibration(Path(options["calibration"])) if precision == "int8" else []
    calibration = calibration_key(samples) if samples else ""

    class ConversionDone(Exception):  # not a RuntimeError: see CONVERT_PLANS
        pass

    state = {"calls": 0, "failures": []}
    for cls in (lite.TFLiteKerasModelConverterV2, lite.TFLiteFrozenGraphConverterV2, lite.TFLiteSavedModelConverterV2):
        def convert(self, real=cls.convert):
            state["calls"] += 1
            action = plan[state["calls"] - 1] if state["calls"] <= len(plan) else "stop"
            if action == "stop":
                raise ConversionDone()
            if action == "skip":
                return b""
            try:
                return real(self)
            except Exception as e:  # onnx2tf may only warn about it: recorded for the failure line
                state["failures"].append(f"TFLiteConverter.convert ({TFLITE_FILES[precision]}): {type(e).__name__}: {e}")
                raise

        cls.convert = convert
    if precision != "int8":
        tf.saved_model.save = lambda *a, **k: None

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
        out = work / model_key(p) / precision_folder(precision, calibration)
        out.mkdir(parents=True, exist_ok=True)
        log = out / "onnx2tf.log"
        tflite = out / f"{p.stem}_{TFLITE_FILES[precision]}.tflite"
        source = out / p.name  # a copy: onnx2tf overwrites its input with onnxsim's output
        shutil.copyfile(p, source)
        state.update(calls=0, failures=[])
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            try:
                # Not copy_onnx_input_output_names_to_tflite: with flatc on PATH it renames the outputs by position
                # (see tflite_io_by_name); the SignatureDef TFLite writes from the Keras model names them.
                kwargs = {}
                if precision == "int8":
                    kwargs = dict(output_integer_quantized_tflite=True,
                                  custom_input_op_name_np_data_path=onnx2tf_calibration(p, samples, out))
                onnx2tf.convert(input_onnx_file_path=str(source), output_folder_path=str(out), non_verbose=True, **kwargs)
            except ConversionDone:
                pass
            except BaseException as e:  # noqa: BLE001 - report and go on with the next model
                print(f"onnx2tf failed: {type(e).__name__}: {e}")
            if not converted(tflite) and state["failures"]:
                print(f"onnx2tf failed: {state['failures'][-1]}")
        # What is not the conversion: the skipped calls' empty files, the calibration arrays, int8's SavedModel.
        for leftover in out.glob("*.tflite"):
            if leftover.stat().st_size == 0:
                leftover.unlink()
        for leftover in (*out.glob("calibration_*.npy"), out / "saved_model.pb", out / "fingerprint.pb"):
            leftover.unlink(missing_ok=True)
        for folder in ("variables", "assets"):
            shutil.rmtree(out / folder, ignore_errors=True)
        print(f"onnx2tf {p.name} ({precision}): {'ok' if converted(tflite) else 'FAILED, see ' + str(log)}", flush=True)


def onnx2tf_calibration(path: Path, samples: list[dict], out: Path) -> list[list]:
    """onnx2tf's custom_input_op_name_np_data_path for int8 calibration on `samples` (read_calibration's): per graph
    input of `path`, [Keras input name, .npy of the samples one after another (onnx2tf feeds it a batch at a time) in
    TF layout, mean 0, std 1]. RuntimeError for an input that has no float samples (onnx2tf casts calibration data
    to float32) or that the samples lack."""
    entries = []
    for k, name in enumerate(onnx_input_names(path)):
        values = [sample.get(name) for sample in samples]
        if any(v is None for v in values):
            raise RuntimeError(f"the calibration samples have no value for graph input '{name}'")
        if values[0].dtype.kind != "f":
            raise RuntimeError(f"graph input '{name}' is {values[0].dtype}: onnx2tf calibrates int8 on float inputs only")
        stacked = np.concatenate(values, axis=0) if values[0].ndim else np.stack(values)
        # ONNX N C ... -> TF N ... C, as onnx2tf lays out a 3-D to 5-D input.
        tf_layout = np.moveaxis(stacked, 1, -1) if stacked.ndim in (3, 4, 5) else stacked
        npy = out / f"calibration_{k}.npy"
        np.save(npy, np.ascontiguousarray(tf_layout.astype(np.float32)))
        entries.append([re.sub("^/", "wa/", name.replace(":", "__")), str(npy), np.float32(0.0), np.float32(1.0)])
    return entries


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
    found by its ONNX name (see tflite_io_by_name; `int8` for the integer_quant .tflite, whose outputs are paired by
    index and have an int8 step)."""

    where = "the converted .tflite"

    def __init__(self, interpreter, onnx_inputs: list[str], onnx_outputs: dict[str, tuple], int8=False):
        self.interpreter = interpreter
        self.onnx_inputs = list(onnx_inputs)
        self.onnx_outputs = dict(onnx_outputs)
        self.int8 = int8
        self.in_details, self.out_details = tflite_io_by_name(interpreter, self.onnx_inputs, list(self.onnx_outputs),
                                                              outputs_by_position=int8)

    def output_quantization(self) -> dict:
        if not self.int8:
            return {}  # a float model's DEQUANTIZE (a QDQ ONNX model's) is not this precision's step
        found = {name: output_quantization(self.interpreter, detail) for name, detail in self.out_details.items()}
        return {name: q for name, q in found.items() if q is not None}

    def feed_impl(self, inputs):
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

    def outputs_impl(self) -> dict:
        return {name: to_nchw(self.interpreter.get_tensor(self.out_details[name]["index"]), shape)
                for name, shape in self.onnx_outputs.items()}


def output_quantization(interpreter, detail) -> tuple[float, int] | None:
    """(scale, zero_point) of the graph output `detail`: its own if it is an integer tensor, else that of the int8
    tensor a DEQUANTIZE turns into it (integer_quant's float output: its own quantization is (0.0, 0)); None for an
    output computed in float. Activations are quantized per tensor: one scale."""
    def per_tensor(tensor):
        scales = tensor.get("quantization_parameters", {}).get("scales")
        scale, zero_point = tensor["quantization"]
        if (scales is not None and len(scales) > 1) or not scale:
            return None
        return float(scale), int(zero_point)

    if np.dtype(detail["dtype"]).kind in "iu":
        return per_tensor(detail)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    for op in interpreter._get_ops_details():
        if op["op_name"] == "DEQUANTIZE" and detail["index"] in list(op["outputs"]):
            source = tensors.get(op["inputs"][0])
            if source is not None and np.dtype(source["dtype"]) in (np.int8, np.uint8, np.int16):
                return per_tensor(source)
    return None


def _onnx2tf_spellings(name: str) -> set[str]:
    """The names onnx2tf may give the Keras layer of ONNX value `name`: its own, or with ':' spelled '__' (1.29;
    earlier releases spelled it '_'), which TFLite's converter then uses as the signature key; at int8 (onnx2tf's
    sanitizing for output_integer_quantized_tflite) with a leading '/' spelled 'wa/' as well."""
    return {name, name.replace(":", "__"), name.replace(":", "_"), re.sub("^/", "wa/", name.replace(":", "__"))}


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


def tflite_io_by_name(interpreter, onnx_inputs: list[str], onnx_outputs: list[str], outputs_by_position=False):
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

    The one positional case (`outputs_by_position`, for int8). onnx2tf converts the integer_quant .tflite from the
    SavedModel it exports with tf_keras's ExportArchive, whose endpoint returns the Keras model's outputs as a list:
    the SignatureDef's output keys are then output_0, output_1, ..., output_k being the Keras model's k-th output,
    which onnx2tf builds in ONNX graph output order (measured on a model declaring [q, a]: output_0 was q). The names
    are gone, so those keys are paired with the ONNX outputs by index, after checking that there are as many (the
    dropped-output case above); keys of any other form are matched by name as always.
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
        if kind == "output" and outputs_by_position and sig and set(sig) == {f"output_{k}" for k in range(len(sig))}:
            if len(sig) != len(names):
                raise RuntimeError(f"the int8 .tflite has {len(sig)} outputs output_0..output_{len(sig) - 1} for the "
                                   f"{len(names)} the ONNX graph declares {names}: onnx2tf dropped one, so they "
                                   "cannot be paired by index")
            found = {name: sig[f"output_{k}"] for k, name in enumerate(names)}
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


# onnx2tf turns 3-D and 4-D tensors channels-last (NCL -> NLC, NCHW -> NHWC), model inputs and outputs included, but
# may leave a model output channels-first (it does for MI-GAN's image). Where both layouts fit a shape (C equal to H
# and W, as a C=64 layer's 64x64 output) the channels-last default is taken: guessing from shapes alone made a correct
# conversion look wrong there.
def to_nhwc(x: np.ndarray, shape: tuple) -> np.ndarray:
    nhwc = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim in (3, 4) else x
    if nhwc.shape == shape:
        return nhwc
    if x.shape == shape:
        return x
    raise RuntimeError(f"input of shape {x.shape} does not fit the converted model's {shape}")


def to_nchw(y: np.ndarray, onnx_shape: tuple) -> np.ndarray:
    nchw = np.moveaxis(y, -1, 1) if y.ndim in (3, 4) else y
    if fits(nchw.shape, onnx_shape):
        return nchw
    if fits(y.shape, onnx_shape):
        return y
    shown = tuple("?" if d is None else d for d in onnx_shape)
    raise RuntimeError(f"output of shape {y.shape} does not fit the ONNX model's {shown}")


def fits(shape: tuple, onnx_shape: tuple) -> bool:
    """Whether `shape` is one the ONNX model's declared `onnx_shape` allows: the same rank, and the same length on
    every axis the model names a number for (None, a dim_param, allows any)."""
    return len(shape) == len(onnx_shape) and all(d is None or d == n for n, d in zip(shape, onnx_shape))
