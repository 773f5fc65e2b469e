"""ncnn (Tencent): the ONNX file converted by pnnx, ncnn's maintained converter (the standalone binary shipped in the
`pnnx` wheel), to a .ncnn.param and .ncnn.bin, run by the `ncnn` wheel's Net on its CPU path in fp32."""
from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from .base import Runner, Runtime, shown
from .common import StageError, model_key, onnx_output_shapes
from .litert_adapter import fits

# Seconds one pnnx run may take before it is killed and the model reported as not converted (a layer model converts
# in about 0.5 s, a MI-GAN-like generator in a few).
PNNX_TIMEOUT = 600.0
# pnnx's "ignore OP NAME param KEY=VALUE" lines (pass_ncnn): an op it has no ncnn layer for, written into the .param
# under its ONNX type anyway. A DCR DepthToSpace is one ("ignore DepthToSpace DepthToSpace_5 param mode=DCR").
_PNNX_IGNORED = re.compile(r"^ignore (\S+) (\S+)")



def pnnx_binary() -> Path:
    """The converter binary: the file `pnnx` in the installed pnnx package's folder, found without importing the
    package (its __init__ imports torch, which only pnnx's Python export API needs). StageError when it is not
    there."""
    try:
        spec = importlib.util.find_spec("pnnx")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        binary = Path(folder) / "pnnx"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    where = f" (looked in {', '.join(folders)})" if folders else ""
    raise StageError("pnnx", "the pnnx package's converter binary is not there" + where + "; install it with "
                     "`python -m pip install --no-deps pnnx` (its one requirement, torch, is for its Python API only)")


# pnnx's spelling of an ONNX element type in inputshape= (load_onnx.cpp, get_onnx_tensor_elem_data_type_str): it checks
# each given shape's type against the graph's and refuses the model when they differ.
_PNNX_TYPES = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 10: "f16", 11: "f64", 12: "u32",
               13: "u64", 14: "c64", 15: "c128", 16: "bf16"}


def onnx_io(path: Path) -> tuple[list[tuple[str, tuple, str]], list[tuple[str, tuple]]]:
    """([(name, shape, pnnx type)] of the graph inputs that are not initializers, [(name, shape)] of the graph
    outputs), in graph order; an input dim that is not a number raises StageError naming the input (pnnx would guess
    one, and ncnn fix it), as does an input type pnnx has no spelling for (bool); an output dim that is not a number
    is None."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            raise StageError("pnnx", f"graph input {shown(value.name)} has the dynamic shape {shape}: pnnx converts "
                                     "for static input shapes only; export the model with fixed ones")
        element = value.type.tensor_type.elem_type
        if element not in _PNNX_TYPES:
            kind = onnx.TensorProto.DataType.Name(element) if element in onnx.TensorProto.DataType.values() else element
            raise StageError("pnnx", f"graph input {shown(value.name)} is {kind}, which pnnx takes no input of")
        inputs.append((value.name, tuple(d.dim_value for d in dims), _PNNX_TYPES[element]))
    outputs = list(onnx_output_shapes(path).items())
    for name, shape in outputs:
        if 0 in shape:
            # Measured with pnnx 20261020: on a Slice to an empty output it spun at full CPU until the 600 s timeout.
            raise StageError("pnnx", f"graph output {shown(name)} has no elements {list(shape)}: ncnn's Mat holds none, "
                                     "and pnnx does not finish converting such a model")
    return inputs, outputs


def external_data_files(path: Path) -> list[str]:
    """The external data files `path`'s tensors name (relative to its folder)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    return sorted({e.value for t in tensors for e in t.external_data if e.key == "location"})


def read_ncnn_param(text: str) -> tuple[list[tuple[str, str]], set[str]]:
    """([(layer type, layer name)] in file order, the blob names the layers produce) of a .ncnn.param: a magic line
    (7767517), "LAYERS BLOBS", then per layer "TYPE NAME N_IN N_OUT IN... OUT... PARAMS"."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "7767517":
        raise StageError("pnnx", "the .ncnn.param it wrote is not an ncnn param file (no 7767517 magic line)")
    layers, blobs = [], set()
    for line in lines[2:]:
        fields = line.split()
        if len(fields) < 4:
            continue
        kind, name, n_in, n_out = fields[0], fields[1], int(fields[2]), int(fields[3])
        layers.append((kind, name))
        blobs.update(fields[4 + n_in: 4 + n_in + n_out])
    return layers, blobs


def read_pnnx_io(text: str) -> tuple[list[tuple], list[tuple]]:
    """The shapes (batch axis included) of the pnnx.Input and pnnx.Output operands of a .pnnx.param, in file order:
    pnnx writes each operand's shape as "#OPERAND=(d0,d1,...)TYPE" after the op ("pnnx.Input in0 0 1 0
    #0=(1,8,16,16)f32")."""
    inputs, outputs = [], []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in ("pnnx.Input", "pnnx.Output"):
            continue
        shapes = [tuple(int(d) if d.lstrip("-").isdigit() else None for d in m.group(1).split(","))
                  for m in re.finditer(r"#\S+?=\(([^)]*)\)", line)]
        (inputs if fields[0] == "pnnx.Input" else outputs).extend(shapes)
    return inputs, outputs


@contextlib.contextmanager
def _terminating_signals_raise():
    """While the conversion runs in the main thread, SIGTERM and SIGHUP raise KeyboardInterrupt (as SIGINT does), so
    that the `finally` blocks kill the converter and remove its scratch folder instead of the process ending with
    both left behind. Elsewhere (another thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    saved = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            saved[sig] = signal.signal(sig, interrupted)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class NcnnRuntime(Runtime):
    """pnnx (a child process per model, with a timeout) + ncnn's Net, fp32 only."""

    name = "ncnn"

    def __init__(self, work: Path):
        import ncnn

        self.ncnn = ncnn
        self.work = work / "ncnn"
        self.work.mkdir(parents=True, exist_ok=True)
        self.timeout = PNNX_TIMEOUT
        self.child_stdout = None  # accepted as the other converters' runtimes do; pnnx's log goes to a file

    def versions(self):
        from importlib.metadata import version

        return {"ncnn": version("ncnn"), "pnnx": version("pnnx"), "onnx": version("onnx")}

    def label(self):
        from importlib.metadata import version

        return f"ncnn {version('ncnn')} (CPU, pnnx {version('pnnx')})"

    def paths(self, path: Path) -> tuple[Path, Path, Path]:
        """The cached conversion of `path`: KEY.ncnn.param, KEY.ncnn.bin and KEY.json (the .param's layer types and
        the graph's input and output shapes, written last: a conversion is cached when it is there)."""
        key = model_key(path)
        return self.work / f"{key}.ncnn.param", self.work / f"{key}.ncnn.bin", self.work / f"{key}.json"

    def prepare(self, path: Path) -> dict:
        """Converts `path` with pnnx (or finds it converted) and returns the .param's layer types counted."""
        param, binary, info_path = self.paths(path)
        if not (info_path.is_file() and param.is_file() and binary.is_file()):
            self._convert(Path(path), param, binary, info_path)
        info = json.loads(info_path.read_text(encoding="utf-8"))
        return {"ops": info["layers"], "ncnn_param": str(param), "precision": "fp32"}

    def _convert(self, path: Path, param: Path, binary: Path, info_path: Path):
        inputs, outputs = onnx_io(path)
        converter = pnnx_binary()
        # pnnx reads the input's external data from MODEL.onnx.data only (load_onnx.cpp): one file is given that name.
        external = external_data_files(path)
        if len(external) > 1:
            raise StageError("pnnx", f"the model keeps its weights in {len(external)} external data files "
                                     f"{[shown(e) for e in external]}: pnnx reads one, MODEL.onnx.data")
        # inputshape= in graph input order, batch axis included: pnnx checks it against the graph's own shapes.
        shapes = ",".join("[" + ",".join(str(d) for d in shape) + "]" + kind for _, shape, kind in inputs)
        with _terminating_signals_raise(), tempfile.TemporaryDirectory(prefix="pnnx-", dir=self.work) as scratch:
            scratch = Path(scratch)
            # A copy under a fixed name: pnnx writes every file it makes next to its input, named after it, and the
            # model's own name may hold any bytes.
            source = scratch / "model.onnx"
            shutil.copyfile(path, source)
            if external:
                shutil.copyfile(path.parent / external[0], scratch / "model.onnx.data")
            log = scratch / "pnnx.log"
            command = [str(converter), source.name, "fp16=0", "device=cpu"] + ([f"inputshape={shapes}"] if shapes else [])
            child = None
            try:
                with open(log, "wb") as log_file:
                    child = subprocess.Popen(command, cwd=scratch, stdin=subprocess.DEVNULL, stdout=log_file,
                                             stderr=subprocess.STDOUT)
                    code = child.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise StageError("pnnx", f"timed out after {self.timeout:g} s (killed)") from None
            finally:
                if child is not None and child.poll() is None:
                    child.kill()
                    child.wait()
            said = log.read_text(encoding="utf-8", errors="backslashreplace")
            if code != 0:
                why = f"signal {-code}" if code < 0 else f"exit {code}"
                raise StageError("pnnx", f"pnnx failed ({why}): {shown(last_words(said))}")
            converted_param, converted_bin = scratch / "model.ncnn.param", scratch / "model.ncnn.bin"
            if not converted_param.is_file() or not converted_bin.is_file():
                raise StageError("pnnx", f"pnnx wrote no .ncnn.param/.ncnn.bin: {shown(last_words(said))}")
            # An op pnnx has no ncnn layer for stays in the .param under its own type, which ncnn cannot load:
            # the conversion failed, whatever pnnx's exit code says.
            ignored = sorted({f"{m.group(1)} {shown(m.group(2))}" for m in map(_PNNX_IGNORED.match, said.splitlines()) if m})
            text = converted_param.read_text(encoding="utf-8", errors="backslashreplace")
            layers, blobs = read_ncnn_param(text)
            unknown = sorted({kind for kind, _ in layers if self.ncnn.layer_to_index(kind) < 0})
            if unknown or ignored:
                raise StageError("pnnx", "the converted model holds layers ncnn does not have: "
                                 + ", ".join(shown(k) for k in unknown)
                                 + (f" (pnnx: no ncnn layer for {', '.join(ignored)})" if ignored else ""))
            check_pnnx_io(inputs, outputs, (scratch / "model.pnnx.param").read_text(encoding="utf-8", errors="replace")
                          if (scratch / "model.pnnx.param").is_file() else "", layers, blobs)
            shutil.move(converted_param, param)
            shutil.move(converted_bin, binary)
            counts = collections.Counter(kind for kind, _ in layers)
            info = {"layers": dict(counts), "inputs": [list(s) for _, s, _ in inputs],
                    "outputs": [[d for d in s] for _, s in outputs]}
            tmp = info_path.with_name(info_path.name + ".tmp")
            tmp.write_text(json.dumps(info), encoding="utf-8")
            tmp.replace(info_path)

    def load_impl(self, path: Path, threads: int):
        param, binary, info_path = self.paths(path)
        if not info_path.is_file():
            self.prepare(path)
        net = self.ncnn.Net()
        # fp32 means fp32: ncnn turns fp16 (and bf16) storage and arithmetic on by default where the CPU has them.
        net.opt.use_vulkan_compute = False
        net.opt.use_fp16_packed = False
        net.opt.use_fp16_storage = False
        net.opt.use_fp16_arithmetic = False
        net.opt.use_bf16_storage = False
        net.opt.use_bf16_packed = False
        net.opt.num_threads = threads
        if net.load_param(str(param)) != 0 or net.load_model(str(binary)) != 0:
            raise RuntimeError(f"ncnn could not load {param.name} / {binary.name}")
        inputs, outputs = onnx_io(path)
        return NcnnRunner(net, self.ncnn, {name: shape for name, shape, _ in inputs}, dict(outputs))


def last_words(log: str) -> str:
    """The last few non-empty lines of a converter's log, as one line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return " | ".join(lines[-3:]) if lines else "no output"


def check_pnnx_io(inputs, outputs, pnnx_param: str, layers, blobs):
    """Raises StageError unless the converted model's inputs in0..inN-1 and outputs out0..outM-1 can be paired with the
    ONNX graph's inputs and outputs.

    What the pairing rests on. pnnx renames every input and output: pass_onnx (tools/pnnx/src/pass_onnx.cpp,
    pass_onnx()) makes one pnnx.Input op per ONNX graph input, in graph.input order (initializer inputs dropped before,
    eliminate_initializer_input), and one pnnx.Output op per graph output, in graph.output order; pass_ncnn's
    convert_input (tools/pnnx/src/pass_ncnn/convert_input.cpp) then names the Input ops in0, in1, ... in the order they
    stand in the graph, and eliminate_output (tools/pnnx/src/pass_ncnn/eliminate_output.cpp) names the operands the
    Output ops read out0, out1, ... in the same walk. Both read 2026-12 (Tencent/ncnn master), and measured here:
    tests/e2e/check_runtime.py's 8a-8c pass on ncnn with inputs and outputs declared out of name order. The ONNX names are gone from the
    .ncnn.param, so this is the one positional case besides LiteRT int8's (litert_adapter.tflite_io_by_name): inputs
    in0.. in ONNX graph input order, outputs out0.. in graph output order. It is taken only after checking that the
    counts agree (pnnx drops an input nothing reads) and that the shapes pnnx recorded for each (the .pnnx.param's
    pnnx.Input / pnnx.Output operands, batch axis included) are the ONNX graph's, position by position."""
    in_layers = [name for kind, name in layers if kind == "Input"]
    want_in = [f"in{k}" for k in range(len(inputs))]
    want_out = [f"out{k}" for k in range(len(outputs))]
    if in_layers != want_in:
        raise StageError("pnnx", f"the converted model's inputs are {[shown(n) for n in in_layers]}, not {want_in} for "
                                 f"the ONNX graph's {len(inputs)} inputs {[shown(i[0]) for i in inputs]}: they cannot be "
                                 "paired")
    if not set(want_out) <= blobs or f"out{len(outputs)}" in blobs:
        found = sorted(b for b in blobs if re.fullmatch(r"out\d+", b))
        raise StageError("pnnx", f"the converted model's outputs are {found}, not {want_out} for the ONNX graph's "
                                 f"{len(outputs)} outputs {[shown(n) for n, _ in outputs]}: they cannot be paired")
    pnnx_in, pnnx_out = read_pnnx_io(pnnx_param)
    for kind, onnx_side, pnnx_side in (("input", [i[:2] for i in inputs], pnnx_in), ("output", outputs, pnnx_out)):
        if len(pnnx_side) != len(onnx_side):
            raise StageError("pnnx", f"pnnx recorded {len(pnnx_side)} {kind}s for the ONNX graph's {len(onnx_side)}: "
                                     "they cannot be paired")
        for k, ((name, shape), got) in enumerate(zip(onnx_side, pnnx_side)):
            if len(got) != len(shape) or any(a is not None and b is not None and a != b for a, b in zip(got, shape)):
                raise StageError("pnnx", f"pnnx's {kind} {k} has shape {list(got)}, but ONNX {kind} {k} {shown(name)} has "
                                         f"{list(shape)}: they cannot be paired")


class NcnnRunner(Runner):
    """Feeds the ONNX inputs to in0.. and reads out0.. (see check_pnnx_io for why by position), each without its batch
    axis: ncnn's Mat has none (c, h, w for a 2-D image; h = C, w = L for a 1-D NCL tensor), so an input of batch 1 is
    fed as its [C, ...] and each output is given back with the axis restored. A batch above 1 is refused. An Extractor
    per invoke(), as ncnn's examples run a net."""

    where = "the converted ncnn model"

    def __init__(self, net, ncnn, inputs: dict[str, tuple], outputs: dict[str, tuple]):
        self.net, self.ncnn = net, ncnn
        self.onnx_inputs, self.onnx_outputs = inputs, outputs
        self.blob_in = {name: f"in{k}" for k, name in enumerate(inputs)}
        self.blob_out = {name: f"out{k}" for k, name in enumerate(outputs)}
        self.mats, self.result = {}, {}

    def feed_impl(self, inputs):
        mats = {}
        for name, x in inputs.items():
            x = np.asarray(x)
            if x.ndim < 2 or x.shape[0] != 1:
                raise RuntimeError(f"graph input {shown(name)} has shape {list(x.shape)}: ncnn runs batch 1 only "
                                   "(its Mat has no batch axis)")
            if tuple(x.shape) != self.onnx_inputs[name]:
                raise RuntimeError(f"graph input {shown(name)} has shape {list(x.shape)}; the model was converted for "
                                   f"{list(self.onnx_inputs[name])}")
            if x.dtype != np.float32:
                # ncnn's Mat holds float32 (pnnx makes a Cast to float a no-op): a float16, bool or integer input is fed
                # as the same values in float32; one whose values float32 cannot hold exactly is refused.
                as_float = x.astype(np.float32)
                if x.dtype.kind not in "fbiu" or not np.array_equal(as_float.astype(x.dtype), x):
                    raise RuntimeError(f"graph input {shown(name)} is {x.dtype} with values float32 cannot hold "
                                       "exactly; ncnn takes float32 inputs")
                x = as_float
            mats[name] = self.ncnn.Mat(np.ascontiguousarray(x[0])).clone()
        self.mats = mats

    def invoke(self):
        extractor = self.net.create_extractor()
        for name, mat in self.mats.items():
            if extractor.input(self.blob_in[name], mat) != 0:
                raise RuntimeError(f"ncnn refused input {self.blob_in[name]} (graph input {shown(name)})")
        result = {}
        for name in self.onnx_outputs:
            code, mat = extractor.extract(self.blob_out[name])
            if code != 0:
                raise RuntimeError(f"ncnn failed to compute {self.blob_out[name]} (graph output {shown(name)}): code {code}")
            result[name] = mat
        self.result = result

    def outputs_impl(self) -> dict:
        out = {}
        for name, shape in self.onnx_outputs.items():
            y = np.array(self.result[name])[np.newaxis]  # a copy, with the batch axis back
            if not fits(y.shape, shape):
                shape_text = ["?" if d is None else d for d in shape]
                raise RuntimeError(f"ncnn's {self.blob_out[name]} has shape {list(y.shape[1:])} (batch axis dropped), "
                                   f"which does not fit graph output {shown(name)}'s {shape_text}")
            out[name] = y
        return out
