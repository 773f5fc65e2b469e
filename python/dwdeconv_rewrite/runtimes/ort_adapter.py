"""ONNX Runtime's CPU execution provider: the ONNX file as is, ORT_ENABLE_ALL, sequential."""
from __future__ import annotations

import collections
import contextlib
import json
import os
from pathlib import Path

from .common import model_key, onnx_op_counts


# Each runtime loads a model into a Runner: feed(inputs) once, then invoke() is what is timed, and outputs()
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

    def label(self):
        return f"ONNX Runtime {self.ort.__version__} (CPU provider)"

    def prepare(self, path: Path) -> dict:
        """Saves ORT's optimised graph (the graph its CPU provider runs) and returns its op list."""
        optimized = self.work / f"{model_key(path)}.ort_optimized.onnx"
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
        totals = collections.Counter()
        for (_, op), ms in self.profile_nodes(path, threads, inputs, runs).items():
            totals[op] += ms
        return dict(totals.most_common())

    def profile_nodes(self, path: Path, threads: int, inputs, runs: int) -> dict[tuple[str, str], float]:
        """ms per run by (node name, op type) of the graph ORT runs (its optimised graph: fused nodes keep the name
        of the node they replace, layout reorders have names of their own), from ORT's profiling JSON: one "Node"
        event per kernel call, named NODE_kernel_time, with its duration in microseconds."""
        runner = self.load(path, threads, profile_prefix=str(self.work / f"{model_key(path)}.profile"))
        runner.feed(inputs)
        for _ in range(runs):
            runner.invoke()
        trace = runner.session.end_profiling()
        totals = collections.Counter()
        with open(trace) as f:
            for event in json.load(f):
                if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
                    node = event["name"][: -len("_kernel_time")]
                    totals[(node, event["args"]["op_name"])] += event["dur"] / 1000.0
        with contextlib.suppress(OSError):
            os.unlink(trace)
        return {key: ms / runs for key, ms in totals.most_common()}


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