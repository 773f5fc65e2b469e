"""ONNX Runtime's CPU execution provider: the ONNX file as is, ORT_ENABLE_ALL, sequential."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import statistics
from pathlib import Path

from .base import Runner, Runtime
from .common import StageError, model_key, onnx_op_counts


# Each runtime loads a model into a Runner: feed(inputs) once (a dict ONNX input name -> array, fed by name), then
# invoke() is what is timed, and outputs() gives the results as a dict ONNX output name -> array in ONNX layout
# (NCHW), in graph output order, for the agreement check. A runner that cannot tell which of its runtime's tensors
# is which ONNX input or output raises instead of pairing them by position.


class OrtRuntime(Runtime):
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
        try:
            self.ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - ORT refusing the model is its conversion failing
            raise StageError("onnxruntime.InferenceSession", f"{type(e).__name__}: {e}") from e
        return {"ops": onnx_op_counts(optimized), "optimized_graph": str(optimized)}

    def _options(self, threads: int):
        options = self.ort.SessionOptions()
        options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        return options

    def load_impl(self, path: Path, threads: int):
        options = self._options(threads)
        session = self.ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return OrtRunner(session)

    def profile(self, path: Path, threads: int, inputs, runs: int) -> dict[str, float]:
        """ms per run by op type, from ORT's profiling JSON."""
        totals = collections.Counter()
        for node in self.profile_nodes(path, threads, inputs, runs):
            totals[node["op"]] += node["ms"]
        return dict(totals.most_common())

    def profile_nodes(self, path: Path, threads: int, inputs, runs: int) -> list[dict]:
        """Per node of the graph ORT runs (its optimised graph: a node its layout transformer converts is named after
        the node or its output, and the reorders it inserts have names of their own): {"node", "op", "ms" per run,
        "inputs", "outputs"}, the values from the optimised graph, so that a reorder can be told apart by what it
        reads and writes; "ms" is the node's median over the runs. From ORT's profiling JSON: one "Node" event per
        kernel call, NODE_kernel_time, its duration in microseconds, inside the span of its run's "model_run" event.
        One untimed run comes first (the first run of a session allocates)."""
        key = model_key(path)
        optimized = self.work / f"{key}.profiled_graph.onnx"
        options = self._options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = str(self.work / f"{key}.profile")
        options.optimized_model_filepath = str(optimized)
        runner = self.bind(OrtRunner(self.ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])), path)
        runner.feed(inputs)
        for _ in range(runs + 1):
            runner.invoke()
        trace = runner.session.end_profiling()
        with open(trace, encoding="utf-8", errors="replace") as f:  # node names may hold any bytes
            events = json.load(f)
        with contextlib.suppress(OSError):
            os.unlink(trace)
        # Each node's time in each run (a run is the span of its model_run event), then its median over the runs:
        # on a shared machine one slow run would otherwise decide the table.
        model_runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                            if e.get("cat") == "Session" and e.get("name") == "model_run")[1:]
        per_run = [collections.Counter() for _ in model_runs]
        for event in events:
            if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
                continue
            for k, (begin, end) in enumerate(model_runs):
                if begin <= event["ts"] <= end:
                    per_run[k][(event["name"][: -len("_kernel_time")], event["args"]["op_name"])] += event["dur"] / 1000.0
        keys = list(dict.fromkeys(key for run in per_run for key in run))
        totals = collections.Counter({key: statistics.median(run[key] for run in per_run) for key in keys})
        io = {}
        with contextlib.suppress(Exception):  # a graph ORT could not save (too large): no values, names only
            import onnx

            io = _kernel_values(onnx.load(str(path), load_external_data=False).graph,
                                onnx.load(str(optimized), load_external_data=False).graph, set(totals))
        return [{"node": node, "op": op, "ms": ms, "inputs": io.get((node, op), ([], []))[0],
                 "outputs": io.get((node, op), ([], []))[1]} for (node, op), ms in totals.most_common()]


class OrtRunner(Runner):
    """ONNX Runtime runs the ONNX graph itself: its inputs and outputs are the graph's, by name
    (session.get_inputs() / get_outputs()), and run() is asked for the outputs by those names."""

    where = "the ONNX Runtime session"

    def __init__(self, session):
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.names = [o.name for o in session.get_outputs()]

    def feed_impl(self, inputs):
        self.inputs = dict(inputs)

    def invoke(self):
        self.result = self.session.run(self.names, self.inputs)

    def outputs_impl(self) -> dict:
        return dict(zip(self.names, self.result, strict=True))


def _kernel_values(source, optimized, kernels) -> dict:
    """{(name, op): (inputs, outputs)} for each profiled kernel, from the optimised graph's nodes of that name and op
    (nodes sharing both are one entry of the profile, so their values are joined). ORT's profiler names a node without
    a name "<op>_<index>" (sequential_executor.cc), its index in ORT's graph, which for a node of the model is its place
    among the model's nodes but its Constant nodes (those become initializers when the graph is loaded): such a kernel
    also gets the values of the unnamed optimised node of that op writing what that model node wrote, else of the only
    unnamed node of that op. A kernel that matches no node gets none, and the table says it cannot tell what it
    computed."""
    named = collections.defaultdict(list)
    unnamed = collections.defaultdict(list)
    for n in optimized.node:
        (named[(n.name, n.op_type)] if n.name else unnamed[n.op_type]).append(n)
    loaded = [n for n in source.node if not (n.op_type == "Constant" and n.domain in ("", "ai.onnx"))]
    io = {}
    for name, op in kernels:
        nodes = list(named.get((name, op), []))
        index = name[len(op) + 1:] if name.startswith(op + "_") else ""
        if index.isdigit() and unnamed[op]:
            candidates = unnamed[op]
            if int(index) < len(loaded) and not loaded[int(index)].name and loaded[int(index)].op_type == op:
                candidates = [n for n in candidates if list(n.output) == list(loaded[int(index)].output)] or candidates
            if len(candidates) == 1:
                nodes += candidates
        if nodes:
            inputs, outputs = [], []
            for n in nodes:
                inputs += [v for v in n.input if v not in inputs]
                outputs += [v for v in n.output if v not in outputs]
            io[(name, op)] = (inputs, outputs)
    return io
