"""Runtime adapters: convert an ONNX model the way a user of a deployment runtime does, run it, time it.

One adapter per runtime, each in its own file, with the same small interface (Polygraphy's runners are the
model): `Runtime(work)` with `versions()`, `label()`, `prepare(path)` (convert, return the converted graph's op
list; raises StageError naming the converter's stage), `load(path, threads)` -> a Runner with `feed(inputs)` (a dict
ONNX input name -> array, fed by name; a missing or extra name raises), `invoke()` (what is timed) and `outputs()`
(a dict ONNX output name -> array in ONNX layout, in graph output order). A runner matches its runtime's tensors
to the ONNX graph's inputs and outputs by name, never by position, and raises where it cannot (each adapter says
what its names rest on). Converters that run in a child process add `convert_all(paths)`.

  ort          onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL                         (ort_adapter.py)
  litert       onnx2tf -> float32 .tflite -> ai-edge-litert Interpreter, XNNPACK delegate (litert_adapter.py)
  executorch   onnx2torch -> torch.export -> XnnpackPartitioner -> .pte -> executorch.runtime (executorch_adapter.py)

dwdeconv-rewrite's --runtime runs `python -m dwdeconv_rewrite.runtimes` (see __main__.py);
bench/runtimes/bench_runtimes.py imports these adapters. This file imports the standard library only, so that a
missing package is reported by name instead of failing the import.
"""
from __future__ import annotations

import importlib
import importlib.util

NAMES = ("ort", "litert", "executorch")

_ADAPTERS = {"ort": ("ort_adapter", "OrtRuntime"), "litert": ("litert_adapter", "LiteRtRuntime"),
             "executorch": ("executorch_adapter", "ExecuTorchRuntime")}

# What each runtime imports, as (import name, pip name). The LiteRT and ExecuTorch sets that the project measured
# with are pinned in bench/runtimes/requirements-*.txt (onnx2tf pins old numpy and onnxruntime).
REQUIREMENTS = {
    "ort": [("numpy", "numpy"), ("onnx", "onnx"), ("onnxruntime", "onnxruntime")],
    "litert": [("numpy", "numpy"), ("onnx", "onnx"), ("onnx2tf", "onnx2tf"), ("tensorflow", "tensorflow"),
               ("ai_edge_litert", "ai-edge-litert"), ("onnx_graphsurgeon", "onnx-graphsurgeon"),
               ("sng4onnx", "sng4onnx")],
    "executorch": [("numpy", "numpy"), ("onnx", "onnx"), ("torch", "torch"), ("onnx2torch", "onnx2torch"),
                   ("executorch", "executorch")],
}


# What the `check` process itself imports for each runtime (the converters' packages, onnx2tf and TensorFlow,
# onnx2torch, are imported by their child processes), imported first so that a package that is installed but fails
# to import (a missing shared library, a broken dependency) is answered as that: check.py's `error import` line.
CHECK_IMPORTS = {
    "ort": ["numpy", "onnx", "onnxruntime"],
    "litert": ["numpy", "onnx", "ai_edge_litert.interpreter"],
    "executorch": ["numpy", "onnx", "torch", "executorch.runtime"],
}
# Those of them that `probe` imports too: the cheap ones (under a second together; torch and executorch.runtime
# take several seconds, which every check would pay twice).
PROBE_IMPORTS = {"ort": CHECK_IMPORTS["ort"], "litert": CHECK_IMPORTS["litert"], "executorch": ["numpy", "onnx"]}


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
