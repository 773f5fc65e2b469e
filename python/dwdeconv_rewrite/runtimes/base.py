"""The interface every runtime adapter implements: a Runtime converts and loads models, a Runner feeds, runs and
reads one loaded model. check.py and bench/runtimes/bench_runtimes.py use only what is declared here (plus the
optional hooks named below), so a new runtime is a subclass of each and a row in registry.json."""
from __future__ import annotations

import abc
from pathlib import Path


class Runner(abc.ABC):
    """One loaded model. Inputs and outputs are matched to the ONNX graph's by name, never by position: a runner
    that cannot tell which of its runtime's tensors is which ONNX input or output raises. (The exceptions, LiteRT
    int8's outputs, which onnx2tf renames by index, and ncnn's inputs and outputs, which pnnx renames in0.., out0..,
    are documented at litert_adapter.tflite_io_by_name and ncnn_adapter.check_pnnx_io.)"""

    @abc.abstractmethod
    def feed(self, inputs: dict) -> None:
        """Sets the inputs, a dict ONNX input name -> array; a missing or extra name raises."""

    @abc.abstractmethod
    def invoke(self) -> None:
        """Runs the model once on the inputs fed: what is timed."""

    @abc.abstractmethod
    def outputs(self) -> dict:
        """The last run's results: a dict ONNX output name -> array in ONNX layout, in graph output order."""

    def output_quantization(self) -> dict:
        """{ONNX output name: (scale, zero_point)} for each output that comes out of an int8 tensor (its step in the
        output's units and its zero point); an output computed in float has none. Empty unless converted at int8."""
        return {}


class Runtime(abc.ABC):
    """A deployment runtime: converts an ONNX model the way its users do and loads it. Caches conversions under
    `work`. Optional hooks: `convert_all(paths)` (converters that run in a child process convert every model in one),
    `profile_nodes(path, threads, inputs, runs)` (per-node times from the runtime's profiler)."""

    name: str = ""
    # What prepare() and load() convert to: registry.json's "precisions" lists a runtime's; int8 is calibrated on the
    # samples in calibration_dir (check's --calibration format), calibration_key a hash of them for the cache key.
    precision: str = "fp32"
    calibration_dir: Path | None = None
    calibration_key: str = ""

    def set_precision(self, precision: str, calibration_dir: Path | None = None, calibration_key: str = "") -> None:
        """Converts at `precision` from now on; int8 needs the calibration samples (common.read_calibration reads
        them, common.calibration_key hashes them)."""
        if (precision == "int8") != (calibration_dir is not None):
            raise ValueError("int8 needs calibration samples, and only int8 takes them")
        self.precision, self.calibration_dir, self.calibration_key = precision, calibration_dir, calibration_key

    @abc.abstractmethod
    def __init__(self, work: Path):
        """Imports the runtime's packages (a missing one raises ImportError)."""

    @abc.abstractmethod
    def versions(self) -> dict:
        """Package name -> version of what converts and runs the models."""

    @abc.abstractmethod
    def label(self) -> str:
        """The summary line's name of the runtime, with its version ("ONNX Runtime 1.32.0 (CPU provider)")."""

    @abc.abstractmethod
    def prepare(self, path: Path) -> dict:
        """Converts the model at `path` and returns the converted graph's op counts (and what it leaves outside the
        XNNPACK delegate, where the runtime has one; "precision", what it was converted to, fp32 when absent; "notes",
        facts about that precision a user must know); raises StageError naming the converter's stage."""

    @abc.abstractmethod
    def load(self, path: Path, threads: int) -> Runner:
        """The converted model at `path`, ready to run on `threads` threads."""
