"""Runtime adapters: convert an ONNX model the way a user of a deployment runtime does, run it, time it.

One adapter per runtime, each in its own file, subclassing base.Runtime and base.Runner (Polygraphy's runners are
the model), listed in registry.json: `Runtime(work)` with `versions()`, `label()`, `prepare(path)` (convert, return
the converted graph's op list; raises StageError naming the converter's stage) and the hook `load_impl(path,
threads)` -> a Runner with the hooks `feed_impl(inputs)`, `invoke()` (what is timed) and `outputs_impl()`. The base
classes' template methods `load`, `feed` (a dict ONNX input name -> array) and `outputs` (a dict ONNX output name ->
array in ONNX layout, in graph output order) check names, dtypes, shapes and empty arrays against the ONNX graph
once, for every adapter. A runner matches its runtime's tensors
to the ONNX graph's inputs and outputs by name, never by position, and raises where it cannot (each adapter says
what its names rest on; the one positional case, LiteRT int8's outputs, which onnx2tf renames output_0, output_1, ...
in graph output order, is litert_adapter.tflite_io_by_name's; ncnn's, whose converter pnnx renames every input and
output in0.., out0.. in graph order, is ncnn_adapter.check_pnnx_io's). Converters that run in a child process add `convert_all(paths)`.

Each converts at a precision (`set_precision(precision, calibration_dir, calibration_key)` before any conversion;
registry.json's "precisions" lists which): fp32, fp16, int8 or bf16, int8 calibrated on the samples check.py is given.

registry.json lists them (name, display name, adapter, packages, precisions); today ort (onnxruntime's CPU provider), litert
(onnx2tf + ai-edge-litert's XNNPACK delegate), executorch (onnx2torch + torch.export + the XNNPACK partitioner),
openvino (OpenVINO's CPU plugin on the ONNX file), mnn (MNNConvert's .mnn, run by MNN's Module API) and ncnn
(pnnx + ncnn's CPU layers).

dwdeconv-rewrite's --runtime runs `python -m dwdeconv_rewrite.runtimes` (see __main__.py);
bench/runtimes/bench_runtimes.py imports these adapters. This file imports the standard library only, so that a
missing package is reported by name instead of failing the import.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

# The runtimes, their packages and imports: registry.json, the one list the binary reads too.
REGISTRY = json.loads((Path(__file__).resolve().parent / "registry.json").read_text(encoding="utf-8"))
NAMES = tuple(r["name"] for r in REGISTRY["runtimes"])

_ADAPTERS = {r["name"]: tuple(r["adapter"].split(":")) for r in REGISTRY["runtimes"]}

# What each runtime imports, as (import name, pip name). The sets that the project measured with are pinned in
# bench/runtimes/requirements-*.txt, from which bench/runtimes/make_venv.py makes each runtime's venv.
REQUIREMENTS = {r["name"]: [tuple(pair) for pair in r["requirements"]] for r in REGISTRY["runtimes"]}

# What the `check` process itself imports for each runtime (the converters' packages, onnx2tf and TensorFlow,
# onnx2torch, are imported by their child processes), imported first so that a package that is installed but fails
# to import (a missing shared library, a broken dependency) is answered as that: check.py's `error import` line.
CHECK_IMPORTS = {r["name"]: list(r["check_imports"]) for r in REGISTRY["runtimes"]}
# The --precision values each runtime converts to ("fp32", "fp16", "int8", "bf16"; fp32 in every row): check.py refuses
# the others, and the binary reads the same lists.
PRECISIONS = {r["name"]: list(r["precisions"]) for r in REGISTRY["runtimes"]}
# Those of them that `probe` imports too: the cheap ones (under a second together; torch and executorch.runtime
# take several seconds, which every check would pay twice).
PROBE_IMPORTS = {r["name"]: list(r["probe_imports"]) for r in REGISTRY["runtimes"]}


def import_failure(modules: list[str]) -> tuple[str, str, str] | None:
    """(message, module, pip name) for the first of `modules` that is there but raises on import (any Exception,
    not only ImportError: a package's __init__ may fail any way), or None when all import."""
    pip_names = {module: pip for requirements in REQUIREMENTS.values() for module, pip in requirements}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - what the package raised is the answer
            text = " ".join(str(e).split())[:800]
            top = module.split(".")[0]
            return f"importing {module} failed: {type(e).__name__}: {text}", module, pip_names.get(top, top)
    return None


def missing_packages(name: str) -> list[tuple[str, str]]:
    """The (import name, pip name) pairs of `name`'s requirements that this interpreter cannot import. Looks the
    modules up without importing them (TensorFlow's import alone takes seconds)."""
    missing = []
    for module, pip in REQUIREMENTS[name]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append((module, pip))
    return missing


def runtime_class(name: str):
    """The adapter class of runtime `name` (imports its packages)."""
    module, cls = _ADAPTERS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def load_runtime(name: str, work):
    """An instance of runtime `name` that caches its conversions under `work`."""
    return runtime_class(name)(work)
