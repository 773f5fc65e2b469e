"""What every runtime adapter shares: seeded inputs, cache keys, agreement, interleaved timing, the machine's state.

Moved here from bench/runtimes/bench_runtimes.py, which imports it, so that the tool's --runtime checks and the
benchmarks convert, run and time models with one piece of code.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

# The folder this dwdeconv_rewrite package was imported from, as it was imported (symlinks not followed): a child
# process started with child_command() imports the same package from it. Under dwdeconv-rewrite --runtime that is
# the run's private folder holding only the package, never a site-packages it may be installed in: resolving the
# path would hand the converter children another environment's packages.
PACKAGE_ROOT = Path(os.path.abspath(__file__)).parents[2]

# The file of an input set's folder that lists its tensors (bridge.schema.json's tensor_list), as the binary writes it.
TENSOR_LIST = "inputs.json"


class StageError(RuntimeError):
    """A step that failed, with the stage it failed in ("dwdeconv-rewrite", "onnx2tf", ...) and its message."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage


def child_command(*args) -> tuple[list[str], dict]:
    """`python -m dwdeconv_rewrite.runtimes ARGS...` and its environment, with this package importable: the converters
    run in child processes (TensorFlow and LiteRT never share one; a crashing converter costs one model)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", "dwdeconv_rewrite.runtimes"] + [str(a) for a in args], env


# The graph input element types a seeded example input is made for, with the numpy dtype it has.
_INPUT_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.BOOL: np.bool_, onnx.TensorProto.INT8: np.int8, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.UINT64: np.uint64,
}


def onnx_inputs(path: Path, seed: int) -> dict[str, np.ndarray]:
    """A seeded input for every graph input (fixed shapes only), of the element type the input declares: standard
    normal for a float type (float32 draws as it always did), 0 or 1 for bool and the unsigned types, -1, 0 or 1 for
    the signed integer types (the range of the binary's own seeded inputs; every index of a size-2 axis). A traced
    converter (ExecuTorch's) fixes the input types it is traced with, so they must be the declared ones. Another
    type (bfloat16, the float8s, string, complex) raises StageError("example inputs") naming the input and its
    type."""
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
        element = value.type.tensor_type.elem_type
        dtype = _INPUT_DTYPES.get(element)
        if dtype is None:
            kind = onnx.TensorProto.DataType.Name(element) if element in onnx.TensorProto.DataType.values() else element
            raise StageError("example inputs", f"graph input '{value.name}' is {kind}: no example input is made for "
                                               "that type (the float types, bool and the integer types have one)")
        kind = np.dtype(dtype).kind
        if kind == "f":
            feeds[value.name] = rng.standard_normal(dims).astype(dtype)
        elif kind == "b":
            feeds[value.name] = rng.integers(0, 2, dims).astype(np.bool_)
        else:
            feeds[value.name] = rng.integers(-1 if kind == "i" else 0, 2, dims).astype(dtype)
    return feeds


def model_key(path: Path) -> str:
    """The name a model's conversions are cached under: its stem and a hash of its bytes (and of any external data
    files it names), so that two models with one file name (a --pair from another folder, a regenerated model)
    never share a cached conversion."""
    path = Path(path)
    stat = path.stat()
    return _model_key(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _model_key(name: str, mtime_ns: int, size: int) -> str:
    path = Path(name)
    digest = hashlib.sha1(path.read_bytes())
    model = onnx.load(str(path), load_external_data=False)
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute if a.HasField("t")]
    locations = sorted({e.value for t in tensors for e in t.external_data if e.key == "location"})
    for location in locations:
        digest.update((path.parent / location).read_bytes())
    return f"{path.stem}-{digest.hexdigest()[:10]}"


def read_tensor_dir(folder: Path) -> dict[str, np.ndarray]:
    """The tensors of a folder in check's --inputs format: the TensorProto files FOLDER/inputs.json lists
    (bridge.schema.json's tensor_list, in graph input order), each keyed by the name its TensorProto carries, in that
    order: the exact name, as onnx reads the graph's (the list's "name" is text, a byte that is not UTF-8 replaced)."""
    from onnx import numpy_helper

    tensors = {}
    listed = json.loads((Path(folder) / TENSOR_LIST).read_text(encoding="utf-8"))
    for entry in listed["tensors"]:
        tensor = onnx.load_tensor(str(Path(folder) / entry["file"]))
        tensors[tensor.name] = np.array(numpy_helper.to_array(tensor))  # a writable copy (torch.from_numpy wants one)
    return tensors


def read_calibration(folder: Path) -> list[dict[str, np.ndarray]]:
    """The int8 calibration samples of check's --calibration DIR: its sub-folders 0/, 1/, ... (no gap), each in the
    --inputs format (read_tensor_dir), all with the same input names, dtypes and shapes. ValueError says what is
    wrong with the folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"--calibration {folder} is not a folder")
    numbered = sorted((int(p.name), p) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    if not numbered or [k for k, _ in numbered] != list(range(len(numbered))):
        raise ValueError(f"--calibration {folder} must hold sample folders 0/, 1/, ... with no gap; it holds "
                         f"{[p.name for _, p in numbered]}")
    samples = []
    for k, sub in numbered:
        if not (sub / TENSOR_LIST).is_file():
            raise ValueError(f"--calibration sample {sub} has no {TENSOR_LIST}")
        samples.append(read_tensor_dir(sub))
        first, this = samples[0], samples[-1]
        if [(n, a.dtype, a.shape) for n, a in this.items()] != [(n, a.dtype, a.shape) for n, a in first.items()]:
            raise ValueError(f"--calibration sample {k} has inputs {signature(this)}; sample 0 has {signature(first)}")
    return samples


def signature(tensors: dict) -> list[str]:
    """'name dtype[dims]' of each tensor, in order, as refusals name them."""
    return [f"{n} {a.dtype}{list(a.shape)}" for n, a in tensors.items()]


def calibration_key(samples: list[dict[str, np.ndarray]]) -> str:
    """A hash of the calibration samples (names, dtypes, shapes and values, in order), part of the cache key of an int8
    conversion: another calibration is another conversion."""
    digest = hashlib.sha1()
    for k, sample in enumerate(samples):
        digest.update(f"sample {k}\n".encode())
        for name, a in sample.items():
            digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode("utf-8", "surrogateescape"))
            digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:10]


def parse_child_options(args: list[str]) -> tuple[dict, list[str]]:
    """A converter child's leading options (--precision P, --calibration DIR) and the model paths after them (after
    `--` when given)."""
    options = {"precision": "fp32", "calibration": None}
    k = 0
    while k < len(args):
        if args[k] == "--":
            k += 1
            break
        if args[k] not in ("--precision", "--calibration") or k + 1 >= len(args):
            break
        options[args[k][2:]] = args[k + 1]
        k += 2
    return options, args[k:]


def onnx_op_counts(path: Path) -> dict[str, int]:
    model = onnx.load(str(path), load_external_data=False)
    return dict(collections.Counter((n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node))


def compare(a_outputs: dict, b_outputs: dict):
    """Max abs error over all outputs, matched by name (dicts name -> array, as Runner.outputs() gives them), and
    that error relative to the original output's largest magnitude. Differing name sets are an error, never a
    comparison of whatever sits at the same position."""
    if set(a_outputs) != set(b_outputs):
        raise RuntimeError(f"the models' outputs differ: {sorted(a_outputs)} vs {sorted(b_outputs)}")
    max_abs, scale = 0.0, 0.0
    for name, a in a_outputs.items():
        b = b_outputs[name]
        if a.shape != b.shape:
            raise RuntimeError(f"output '{name}' shapes differ: {a.shape} vs {b.shape}")
        max_abs = max(max_abs, float(np.max(np.abs(a.astype(np.float64) - b))))
        scale = max(scale, float(np.max(np.abs(a))))
    return max_abs, max_abs / scale if scale > 0 else max_abs


def spread(seconds: list[float]) -> dict:
    """Median, min, p10, p90 and max of a list of run times, in ms."""
    ms = sorted(t * 1e3 for t in seconds)
    deciles = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else ms * 9
    return {"median": statistics.median(ms), "min": ms[0], "p10": deciles[0], "p90": deciles[-1], "max": ms[-1]}


def time_interleaved(a, b, budget: float, min_pairs: int, max_pairs: int, warmup: int = 2, samples: dict | None = None):
    """Times a() and b() A B A B, after `warmup` untimed pairs, until `budget` seconds have passed (at least
    min_pairs and at most max_pairs pairs). Returns each side's spread() and the number of pairs; `samples`, when
    given, receives each side's run times in ms, in order ("a", "b")."""
    for _ in range(warmup):
        a()
        b()
    times_a, times_b, cpu_a, cpu_b = [], [], [], []
    clock = time.thread_time  # this thread's CPU time: with 1 thread the runtimes do their work on the caller
    start = time.perf_counter()
    while len(times_a) < max_pairs and (len(times_a) < min_pairs or time.perf_counter() - start < budget):
        c0, t0 = clock(), time.perf_counter()
        a()
        t1, c1 = time.perf_counter(), clock()
        b()
        t2, c2 = time.perf_counter(), clock()
        times_a.append(t1 - t0)
        times_b.append(t2 - t1)
        cpu_a.append(c1 - c0)
        cpu_b.append(c2 - c1)
    if samples is not None:
        samples["a"], samples["b"] = [t * 1e3 for t in times_a], [t * 1e3 for t in times_b]
    sa, sb = spread(times_a), spread(times_b)
    # With 1 thread, wall time close to this thread's CPU time means the run had a core to itself.
    sa["cpu_median"], sb["cpu_median"] = spread(cpu_a)["median"], spread(cpu_b)["median"]
    return sa, sb, len(times_a)


def onnx_output_shapes(path: Path) -> dict[str, tuple]:
    """Each graph output's declared shape, by name, in graph output order: a dim that is not a number (a dim_param,
    as a dynamic-batch export's "N", or no value at all) is None, which any length fits; protobuf reads it as 0."""
    model = onnx.load(str(path), load_external_data=False)
    return {o.name: tuple(d.dim_value if d.HasField("dim_value") else None for d in o.type.tensor_type.shape.dim)
            for o in model.graph.output}


def onnx_input_names(path: Path) -> list[str]:
    """The graph inputs that are not initializers, in graph order (the tensors a runtime is fed)."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initializers]


def cpu_model() -> str:
    """What `lscpu | grep 'Model name'` says (Linux), else the platform's processor name."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_state() -> dict:
    return {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "loadavg": os.getloadavg(),
            "cpus": os.cpu_count(), "cpu_model": cpu_model(), "python": platform.python_version(),
            "machine": platform.processor() or platform.machine()}
