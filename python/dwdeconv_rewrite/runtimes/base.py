"""The interface every runtime adapter implements: a Runtime converts and loads models, a Runner feeds, runs and
reads one loaded model. check.py and bench/runtimes/bench_runtimes.py use only what is declared here (plus the
optional hooks named below), so a new runtime is a subclass of each and a row in registry.json."""
from __future__ import annotations

import abc
from pathlib import Path


# A name from a model as a message shows it: printable, one line, quoted, cut at this many characters.
_SHOWN_LIMIT = 200


def shown(name) -> str:
    """`name` (a str or bytes from a model or a converter) for a message: repr() of its text, so that a newline, a quote
    or a byte that is not UTF-8 is escaped, never printed as is; cut at _SHOWN_LIMIT characters."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "backslashreplace")
    text = repr(str(name))
    return text if len(text) <= _SHOWN_LIMIT else text[:_SHOWN_LIMIT] + "...'"


def _listed(names) -> str:
    """Names for a message: "['a', 'b']", each shown()."""
    return "[" + ", ".join(shown(n) for n in names) + "]"


class GraphIO:
    """The ONNX graph's side of a loaded model: its inputs (the graph inputs that are not initializers) with their
    element types and declared shapes, and its outputs, each in graph order; a dim that is not a number is None.
    What Runner's checks hold a runner to (Runtime.load binds it)."""

    def __init__(self, inputs: dict, outputs: list[str]):
        self.inputs = dict(inputs)  # name -> (numpy dtype or None when the type has none, shape tuple or None)
        self.outputs = list(outputs)

    @classmethod
    def read(cls, path: Path) -> GraphIO:
        """The inputs and outputs of the ONNX model at `path` (its tensors' data is not read)."""
        import onnx
        from onnx import helper

        graph = onnx.load(str(path), load_external_data=False).graph
        initializers = {t.name for t in graph.initializer}
        inputs = {}
        for value in graph.input:
            if value.name in initializers:
                continue
            tensor = value.type.tensor_type
            try:
                dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else None
            except (KeyError, ValueError, TypeError):  # a type numpy has no dtype for (bfloat16, the float8s)
                dtype = None
            shape = (tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
                     if tensor.HasField("shape") else None)
            inputs[value.name] = (dtype, shape)
        return cls(inputs, [o.name for o in graph.output])


class Runner(abc.ABC):
    """One loaded model, run by name (Polygraphy's runners are the model): feed() and outputs() are template methods
    that check in this class what every runtime must hold to, and call the adapter's hooks, feed_impl() and
    outputs_impl(); invoke() is the adapter's alone (it is what is timed). Inputs and outputs are matched to the ONNX
    graph's by name, never by position: a runner that cannot tell which of its runtime's tensors is which ONNX input
    or output raises. (The exceptions, LiteRT int8's outputs, which onnx2tf renames by index, and ncnn's inputs and
    outputs, which pnnx renames in0.., out0.., are documented at litert_adapter.tflite_io_by_name and
    ncnn_adapter.check_pnnx_io.)"""

    # The ONNX graph's inputs and outputs (Runtime.load binds them before a runner is used).
    graph: GraphIO | None = None
    # What the error messages call the runner ("the converted .tflite"); an adapter names its own.
    where: str = "the runtime"

    def feed(self, inputs: dict) -> None:
        """Sets the inputs, a dict ONNX input name -> array. Raises, before the adapter sees them, unless they are
        exactly the graph's inputs by name (a missing or extra name), each a non-empty array of the input's element
        type and of its declared shape where a dim is a number."""
        import numpy as np

        graph = self._bound()
        if not isinstance(inputs, dict):
            raise RuntimeError(f"{self.where} is fed a dict of ONNX input name -> array, not a {type(inputs).__name__}")
        missing = [n for n in graph.inputs if n not in inputs]
        extra = [n for n in inputs if n not in graph.inputs]
        if missing or extra:
            raise RuntimeError(f"{self.where} takes inputs {_listed(graph.inputs)}; given "
                               f"{_listed(inputs)}"
                               + (f" (missing {_listed(missing)})" if missing else "")
                               + (f" (not inputs of it: {_listed(extra)})" if extra else ""))
        for name, value in inputs.items():
            array = np.asarray(value)
            dtype, shape = graph.inputs[name]
            if array.size == 0:
                raise RuntimeError(f"graph input {shown(name)} is fed an empty array of shape {list(array.shape)}")
            if dtype is not None and array.dtype != dtype:
                raise RuntimeError(f"graph input {shown(name)} is fed as {array.dtype}; the ONNX graph declares {np.dtype(dtype)}")
            if shape is not None and (len(shape) != array.ndim
                                      or any(d is not None and d != n for d, n in zip(shape, array.shape))):
                declared = [d if d is not None else "?" for d in shape]
                raise RuntimeError(f"graph input {shown(name)} is fed shape {list(array.shape)}; the ONNX graph declares "
                                   f"{declared}")
        self.feed_impl(inputs)

    @abc.abstractmethod
    def invoke(self) -> None:
        """Runs the model once on the inputs fed: what is timed."""

    def outputs(self) -> dict:
        """The last run's results: a dict ONNX output name -> array in ONNX layout, in graph output order. Raises
        unless the adapter returned a dict holding exactly the graph's outputs by name, none of them empty."""
        import numpy as np

        graph = self._bound()
        found = self.outputs_impl()
        if not isinstance(found, dict):
            raise RuntimeError(f"{self.where} returned its outputs as a {type(found).__name__}, not by name")
        if len(found) != len(graph.outputs) or set(found) != set(graph.outputs):
            missing = [n for n in graph.outputs if n not in found]
            extra = [n for n in found if n not in set(graph.outputs)]
            raise RuntimeError(f"{self.where} returned {len(found)} outputs {_listed(found)} for the "
                               f"{len(graph.outputs)} the ONNX graph declares {_listed(graph.outputs)}"
                               + (f"; missing {_listed(missing)}" if missing else "")
                               + (f"; not graph outputs: {_listed(extra)}" if extra else ""))
        ordered = {name: np.asarray(found[name]) for name in graph.outputs}
        for name, value in ordered.items():
            if value.size == 0:
                raise RuntimeError(f"{self.where} returned graph output {shown(name)} empty, of shape {list(value.shape)}")
        return ordered

    # Hooks: what an adapter implements.

    @abc.abstractmethod
    def feed_impl(self, inputs: dict) -> None:
        """Sets the inputs (feed() has checked them against the graph)."""

    @abc.abstractmethod
    def outputs_impl(self) -> dict:
        """The last run's results, ONNX output name -> array in ONNX layout."""

    def output_quantization(self) -> dict:
        """{ONNX output name: (scale, zero_point)} for each output that comes out of an int8 tensor (its step in the
        output's units and its zero point); an output computed in float has none. Empty unless converted at int8."""
        return {}

    def _bound(self) -> GraphIO:
        if self.graph is None:
            raise RuntimeError(f"{type(self).__name__} was not made by Runtime.load (or Runtime.bind): it has no ONNX graph "
                               "to check its inputs and outputs against")
        return self.graph


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

    def load(self, path: Path, threads: int) -> Runner:
        """The converted model at `path`, ready to run on `threads` threads, bound to the ONNX graph's inputs and
        outputs (the adapter's load_impl loads it)."""
        return self.bind(self.load_impl(path, threads), path)

    @staticmethod
    def bind(runner: Runner, path: Path) -> Runner:
        """`runner` bound to the inputs and outputs of the ONNX model at `path`, which its checks hold it to; for an
        adapter that makes a runner outside load() (a profiling session)."""
        runner.graph = GraphIO.read(path)
        return runner

    # Hooks: what an adapter implements (and the constructor, versions, label and prepare above).

    @abc.abstractmethod
    def load_impl(self, path: Path, threads: int) -> Runner:
        """The converted model at `path`, ready to run on `threads` threads."""
