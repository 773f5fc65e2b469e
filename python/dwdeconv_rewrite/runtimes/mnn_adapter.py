"""MNN (Alibaba): MNNConvert -f ONNX to a .mnn, run by MNN's Module API (MNN.nn.load_module_from_file) on its CPU
backend, precision "high" (fp32) or "low" (fp16 where MNN has it).

Importing MNN (or the converter's `_tools`) prints a line ("The device supports: ...") from C to file descriptor 1,
past Python's sys.stdout: so registry.json's probe_imports leave MNN out (the probe answers on stdout, and the binary
refuses a line that is not JSON); check answers in a file, and its stdout is only a log."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .base import Runner, Runtime
from .common import StageError, child_command, model_key, onnx_input_names, onnx_output_shapes

# MNN's RuntimeManager precision for each registry precision: "high" computes in fp32; "low" lets MNN use fp16
# arithmetic where its CPU backend has it (ARMv8.2 fp16, AVX512-FP16 builds) and fp32 elsewhere.
MNN_PRECISION = {"fp32": "high", "fp16": "low"}
# What the converter is asked for: as a user would call it (MNNConvert -f ONNX --modelFile M --MNNModel OUT
# --bizCode biz). The conversion does not depend on the precision (MNN chooses its arithmetic when it loads), so
# one .mnn serves both.
BIZ_CODE = "biz"
# The .mnn's input element types (its JSON dump's DT_*) the runner feeds: (numpy dtype, MNN.expr dtype name).
# MNNConvert makes an int64, int16 or bool input DT_INT32 and a float16 one DT_FLOAT.
MNN_DTYPES = {"DT_FLOAT": (np.float32, "float"), "DT_INT32": (np.int32, "int"), "DT_UINT8": (np.uint8, "uint8"),
              "DT_INT8": (np.int8, "int8")}


def mnnconvert_child(out: Path, model: Path) -> int:
    """Converts `model` to OUT/model.mnn and writes OUT/info.json: the converted graph's op counts (from the
    converter's own JSON dump of the .mnn: MNNConvert -f MNN --JsonFile), its input names and types and output names,
    and the CPU features MNN reports. A conversion that fails writes nothing: its log (this process's stdout) says why.

    Calls the converter's C extension `_tools.mnnconvert(argv)` directly, never the wheel's `mnnconvert` console
    script: that script (MNN/tools/mnnconvert.py) imports MNN.tools.utils.log, which runs `pip install -U
    aliyun-log-python-sdk` when the SDK is missing and then sends the conversion's details to Alibaba's log service.
    `_tools` is a module of its own (site-packages/_tools*.so) that imports no Python package."""
    import ctypes

    import _tools

    ctypes.CDLL(None).fflush(None)  # MNN's C stdout (the device line it prints on loading) into the log now
    mnn, dump = out / "model.mnn", out / "dump.json"
    # MNNConvert answers True whether or not it converted ("Converted Failed!" on its stdout, no file written).
    _tools.mnnconvert(["MNNConvert", "-f", "ONNX", "--modelFile", str(model), "--MNNModel", str(mnn),
                       "--bizCode", BIZ_CODE])
    sys.stdout.flush()
    if not mnn.is_file() or mnn.stat().st_size == 0:
        return 1
    _tools.mnnconvert(["MNNConvert", "-f", "MNN", "--modelFile", str(mnn), "--JsonFile", str(dump)])
    # The dump holds every weight as text: read once, then only the op list is kept.
    graph = json.loads(dump.read_bytes().decode("utf-8", "surrogateescape"))
    dump.unlink()
    ops = graph.get("oplists", [])
    inputs = [op for op in ops if op.get("type") == "Input"]
    info = {"ops": dict(collections.Counter(op.get("type", "?") for op in ops if op.get("type") != "Input")),
            "input_names": [op.get("name") for op in inputs],
            "input_dtypes": [op.get("main", {}).get("dtype", "DT_FLOAT") for op in inputs],
            "output_names": list(graph.get("outputName", [])),
            "mnn_version": graph.get("extraInfo", {}).get("version", ""),
            "device": device_features(out / "log")}
    (out / "info.json").write_text(json.dumps(info, ensure_ascii=True), encoding="utf-8")
    return 0


def device_features(log: Path) -> str:
    """The CPU features MNN says it found ("i8sdot:0, fp16:0, ..."), from the line it prints on loading: fp16 is
    ARMv8.2's fp16 arithmetic, the one its "low" precision uses on ARM. Empty when it printed none."""
    with contextlib.suppress(OSError):
        found = re.search(rb"The device supports: ([^\n]*)", log.read_bytes())
        if found:
            return " ".join(found.group(1).decode("ascii", "replace").split())
    return ""


def _said(log: str) -> str:
    """What MNNConvert said about its failure: its error lines (ONNX op types it lacks, a file it cannot read), each
    on one line of printable text (op names come from the model)."""
    lines = [" ".join(line.split()) for line in log.splitlines()]
    lines = [re.sub(r"[\x00-\x1f\x7f]", "?", line) for line in lines if line]
    said = [line for line in lines if re.search(r"not support|error|fail|check failed", line, re.IGNORECASE)
            and "Converted Failed!" not in line]
    return "; ".join((said or lines[-3:] or ["no output"])[-4:])[:800]


class MnnRuntime(Runtime):
    """MNNConvert (in a child process with a timeout: a converter that crashes or hangs costs one model, leaves no
    file, and is a StageError("MNNConvert")) + MNN's Module API on the CPU backend."""

    name = "mnn"

    def __init__(self, work: Path):
        import MNN
        import MNN.expr
        import MNN.nn

        self.mnn = MNN
        self.work = work / "mnn"
        self.work.mkdir(parents=True, exist_ok=True)
        self.child_stdout = None  # the converter's log is read from a file; kept for check.py's interface
        self.timeout = 600.0  # seconds one model's conversion may take (bench's --convert-timeout; 0 for none)

    def versions(self):
        from importlib.metadata import version

        return {"MNN": version("MNN"), "onnx": version("onnx")}

    def label(self):
        from importlib.metadata import version

        return f"MNN {version('MNN')} (CPU backend, precision {MNN_PRECISION[self.precision]})"

    def mnn_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}.mnn"

    def info_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}.json"

    def _convert(self, path: Path) -> dict:
        """The conversion's info (mnnconvert_child's), converting first when it is not cached. The child writes into
        a scratch folder that is removed however this ends (a failure, a timeout, KeyboardInterrupt); only a
        complete conversion is moved into the cache, the .mnn first and the info last (the cache's marker)."""
        try:
            info_file, mnn = self.info_path(path), self.mnn_path(path)
        except Exception:  # noqa: BLE001 - a file onnx cannot parse has no cache key: MNNConvert says what it is
            info_file = mnn = None
        with contextlib.suppress(OSError, ValueError):
            if mnn is not None and mnn.is_file():
                return json.loads(info_file.read_text(encoding="utf-8"))
        print(f"MNNConvert: converting {ascii(Path(path).name)}", file=self.child_stdout or sys.stderr, flush=True)
        scratch = Path(tempfile.mkdtemp(prefix=".mnnconvert-", dir=self.work))
        try:
            cmd, env = child_command("_mnnconvert", scratch, Path(path).resolve())
            log = scratch / "log"
            with open(log, "wb") as f:
                # In this process's group: whoever ends the group (dwdeconv-rewrite on a signal) ends the converter.
                child = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
                try:
                    child.wait(timeout=self.timeout or None)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    raise StageError("MNNConvert", f"timed out after {self.timeout:g} s") from None
                finally:
                    if child.poll() is None:  # KeyboardInterrupt while waiting
                        child.kill()
                        child.wait()
            said = _said(log.read_bytes().decode("utf-8", "replace"))
            code = child.returncode
            if code != 0 or not (scratch / "info.json").is_file():
                why = f"converter process died (signal {-code})" if code < 0 else "did not convert"
                raise StageError("MNNConvert", f"{why}: {said}")
            info = json.loads((scratch / "info.json").read_text(encoding="utf-8"))
            if mnn is None:
                raise StageError("MNNConvert", "converted a file onnx cannot read as a model")
            os.replace(scratch / "model.mnn", mnn)
            os.replace(scratch / "info.json", info_file)
            return info
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def prepare(self, path: Path) -> dict:
        """The .mnn's op list (MNNConvert's JSON dump: e.g. whether a Gather became GatherV2), the precision and, at
        fp16, what MNN does with it."""
        info = self._convert(path)
        notes = []
        if self.precision == "fp16":
            device = info.get("device") or "nothing"
            notes.append("MNN precision 'low' lets MNN choose: fp16 arithmetic where its CPU backend has it (ARMv8.2 "
                         f"fp16, AVX512-FP16 builds), fp32 elsewhere; it reports {device} for this CPU (its fp16 flag is "
                         "ARM's) and not which it chose")
        return {"ops": info["ops"], "mnn": str(self.mnn_path(path)), "precision": self.precision, "notes": notes}

    def load_impl(self, path: Path, threads: int):
        """The .mnn on MNN's CPU backend at `threads` threads, its inputs and outputs found by ONNX name (MNNConvert
        keeps the ONNX graph's input and output tensor names; one that is not there raises, none is paired by
        position)."""
        info = self._convert(path)
        onnx_in, onnx_out = onnx_input_names(path), list(onnx_output_shapes(path))
        mnn_in, mnn_out = info["input_names"], info["output_names"]
        if sorted(mnn_in) != sorted(onnx_in) or sorted(mnn_out) != sorted(onnx_out):
            raise RuntimeError(f"the .mnn's inputs {mnn_in} and outputs {mnn_out} are not the ONNX graph's {onnx_in} "
                               f"and {onnx_out}: refusing to pair them by position")
        dtypes = dict(zip(mnn_in, info["input_dtypes"]))
        manager = self.mnn.nn.create_runtime_manager(({"backend": "CPU", "precision": MNN_PRECISION[self.precision],
                                                       "numThread": threads},))
        # Asked for by name, in ONNX order: forward() takes the inputs and returns the outputs in these orders.
        module = self.mnn.nn.load_module_from_file(str(self.mnn_path(path)), onnx_in, onnx_out,
                                                   runtime_manager=manager)
        return MnnRunner(self.mnn.expr, module, manager, onnx_in, onnx_output_shapes(path),
                         [self._dtype(dtypes[n], n) for n in onnx_in])

    def _dtype(self, mnn_dtype: str, name: str):
        if mnn_dtype not in MNN_DTYPES:
            raise RuntimeError(f"the .mnn's input {name!r} is {mnn_dtype}, which this runner does not feed")
        dtype, expr_name = MNN_DTYPES[mnn_dtype]
        return dtype, getattr(self.mnn.expr, expr_name)


class MnnRunner(Runner):
    """One .mnn loaded as an MNN Module with the ONNX input and output names (MNN looks them up in the .mnn and
    raises for one it lacks), so forward()'s lists are in those names' order."""

    where = "the converted .mnn"

    def __init__(self, expr, module, manager, input_names, output_shapes, input_dtypes):
        self.expr, self.module, self.manager = expr, module, manager  # the manager outlives the module
        self.input_names, self.input_dtypes = input_names, input_dtypes
        self.output_shapes = dict(output_shapes)
        self.output_names = list(self.output_shapes)

    def feed_impl(self, inputs):
        self.vars = []
        for name, (dtype, expr_dtype) in zip(self.input_names, self.input_dtypes):
            x = np.asarray(inputs[name])
            if x.dtype != dtype:
                # MNNConvert's narrower or wider type (int64 -> int32, bool -> int32, float16 -> float32): fed the
                # same values, exactly, or refused.
                cast = x.astype(dtype)
                if not np.array_equal(cast.astype(x.dtype), x):
                    raise RuntimeError(f"graph input {name!r} is {x.dtype}, and its values do not fit the .mnn's "
                                       f"{np.dtype(dtype)}")
                x = cast
            # MNN.expr.const takes an int8 array only as a list (an int8 ndarray: "does not support this dtype").
            value = x.tolist() if x.dtype == np.int8 else np.ascontiguousarray(x)
            self.vars.append(self.expr.const(value, list(x.shape), self.expr.NCHW, expr_dtype))

    def invoke(self):
        self.result = self.module.forward(self.vars)

    def outputs_impl(self) -> dict:
        result = self.result if isinstance(self.result, (list, tuple)) else [self.result]
        if len(result) != len(self.output_names):
            raise RuntimeError(f"MNN returned {len(result)} outputs for {self.output_names}")
        out = {}
        for name, var in zip(self.output_names, result):
            if var.data_format == self.expr.NC4HW4:  # MNN's packed layout: back to NCHW before reading
                var = self.expr.convert(var, self.expr.NCHW)
            value = np.array(var.read(), copy=True)
            if not fits(value.shape, self.output_shapes[name]):
                shown = tuple("?" if d is None else d for d in self.output_shapes[name])
                raise RuntimeError(f"MNN's output {name!r} has shape {value.shape}, not the ONNX graph's {shown}")
            out[name] = value
        return out


def fits(shape: tuple, onnx_shape: tuple) -> bool:
    """Whether `shape` is one the ONNX graph's declared `onnx_shape` allows (None, a dim_param, allows any length)."""
    return len(shape) == len(onnx_shape) and all(d is None or d == n for n, d in zip(shape, onnx_shape))
