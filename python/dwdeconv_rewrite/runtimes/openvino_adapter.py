"""OpenVINO's CPU plugin: it reads the ONNX file itself (Core.read_model), compiles it for "CPU" at an explicit
inference precision (f32 or bf16), one stream, latency hint, and runs it through one infer request."""
from __future__ import annotations

import collections
import contextlib
import statistics
from pathlib import Path

from .base import Runner, Runtime
from .common import StageError, cpu_model, onnx_input_names, onnx_output_shapes

# --precision -> the CPU plugin's INFERENCE_PRECISION_HINT. fp32 is asked for explicitly: left alone, the plugin
# runs bf16 on a CPU with AVX512_BF16 or AMX, so that "fp32" would mean bf16 on some machines and f32 on others.
HINTS = {"fp32": "f32", "bf16": "bf16"}

# The /proc/cpuinfo flags that give OpenVINO's CPU plugin bf16 arithmetic (its precision_support.cpp asks oneDNN for
# avx512_core_bf16 or avx2_vnni_2, the latter shown as avx_ne_convert; AMX CPUs have avx512_bf16 too), named when a
# CPU without them is asked for bf16.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "avx_ne_convert")

# Runtime-model nodes that are the graph's edges, not work the plugin does: left out of the op list, as the other
# adapters list a graph's nodes and not its inputs, outputs and initializers.
EDGE_LAYERS = {"Input", "Output", "Const"}
# The multiply-accumulate layers, the ones bf16 is for: one the plugin keeps in f32 at the bf16 hint is named in a
# note (data movement such as Concatenation or DepthToSpace next to an f32 output is f32 too, and costs no precision).
MAC_LAYERS = {"Convolution", "Deconvolution", "FullyConnected", "MatMul"}


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


class OpenVinoRuntime(Runtime):
    """Compiles the ONNX file with OpenVINO's CPU plugin. Nothing is converted to a file: what prepare() reports is
    the compiled model's runtime graph (get_runtime_model(): the layers the plugin runs, reorders included)."""

    name = "openvino"

    def __init__(self, work: Path):
        import openvino

        self.ov = openvino
        self.core = openvino.Core()  # `work` is not needed: nothing is converted to a file, nor cached
        self._used = None  # the precision the plugin reported for a compile at the current setting

    def set_precision(self, precision, calibration_dir=None, calibration_key=""):
        super().set_precision(precision, calibration_dir, calibration_key)
        self._used = None

    def versions(self):
        from importlib.metadata import version

        return {"openvino": version("openvino"), "onnx": version("onnx")}

    def label(self):
        from importlib.metadata import version

        try:
            used = f", {self.inference_precision()} inference"
        except StageError:  # a precision this CPU lacks: prepare() raises it, naming the CPU features missing
            used = ""
        return f"OpenVINO {version('openvino')} (CPU plugin{used})"

    def inference_precision(self) -> str:
        """The inference precision the CPU plugin runs at this setting, as it reports it back from a compiled model
        (a one-op model, compiled once per precision): "f32" or "bf16"."""
        if self._used is None:
            import numpy as np

            ops = self.ov.opset13
            x = ops.parameter([1, 8], np.float32, name="x")
            probe = self.ov.Model([ops.relu(x)], [x], "precision_probe")
            self._used = self._compile(probe, 1).get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return self._used

    def _config(self, threads: int) -> dict:
        # One stream and the latency hint: one inference at a time on `threads` threads, which is what is timed.
        return {"INFERENCE_PRECISION_HINT": HINTS[self.precision], "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
                "INFERENCE_NUM_THREADS": threads}

    def _compile(self, model, threads: int, profile: bool = False):
        """compile_model on "CPU" at the current precision; raises StageError("openvino.compile_model") when it fails
        or when the plugin would run another precision than the one asked for (never f32 in bf16's name)."""
        if self.precision not in HINTS:
            raise StageError("openvino.compile_model", f"no --precision {self.precision} on OpenVINO (it runs "
                                                       f"{', '.join(HINTS)})")
        if self.precision == "bf16" and "BF16" not in self.core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
            flags = cpu_flags()
            missing = [f for f in BF16_FLAGS if f not in flags] or list(BF16_FLAGS)
            raise StageError("openvino.compile_model",
                             "--precision bf16: OpenVINO's CPU plugin has no bf16 on this CPU "
                             f"({cpu_model()}): it runs bf16 on AVX512_BF16, AMX_BF16 or AVX2_VNNI_2, and this CPU's "
                             f"flags lack {', '.join(missing)}; run --precision fp32 here, or bf16 on a CPU with one "
                             "of them")
        try:
            config = dict(self._config(threads), **({"PERF_COUNT": True} if profile else {}))
            compiled = self.core.compile_model(model, "CPU", config)
        except Exception as e:  # noqa: BLE001 - OpenVINO refusing the model is its conversion failing
            raise StageError("openvino.compile_model", f"{type(e).__name__}: {' '.join(str(e).split())[:2000]}") from e
        used = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        if used != HINTS[self.precision]:
            raise StageError("openvino.compile_model", f"--precision {self.precision} asked for inference precision "
                                                       f"{HINTS[self.precision]}; the CPU plugin compiled {used}")
        return compiled

    def _read(self, path: Path):
        try:
            return self.core.read_model(str(path))
        except Exception as e:  # noqa: BLE001 - the ONNX frontend refusing the model is the conversion failing
            raise StageError("openvino.read_model", f"{type(e).__name__}: {' '.join(str(e).split())[:2000]}") from e

    def prepare(self, path: Path) -> dict:
        """Compiles the model and returns the runtime graph's layers by type ("layerType"), counted; at bf16, a note
        names the multiply-accumulate layers that the plugin still runs in f32 (their "runtimePrecision")."""
        compiled = self._compile(self._read(path), 1)
        ops, kept_f32 = collections.Counter(), collections.Counter()
        for op in compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
            if layer in EDGE_LAYERS:
                continue
            ops[layer] += 1
            if layer in MAC_LAYERS and "runtimePrecision" in info and info["runtimePrecision"].astype(str) == "f32":
                kept_f32[layer] += 1
        notes = []
        if self.precision == "bf16" and kept_f32:
            notes.append("OpenVINO's CPU plugin runs these multiply-accumulate layers in f32 at the bf16 hint: "
                         + ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(kept_f32.items())))
        return {"ops": dict(ops), "precision": self.precision, "notes": notes}

    def load_impl(self, path: Path, threads: int):
        compiled = self._compile(self._read(path), threads)
        return OpenVinoRunner(compiled, onnx_input_names(path), list(onnx_output_shapes(path)))

    def profile_nodes(self, path: Path, threads: int, inputs, runs: int) -> list[dict]:
        """Per layer of the runtime graph: {"node", "op" (its layer type), "ms" (its median over the runs of the
        request's profiling info, PERF_COUNT), "inputs" (the layers it reads), "outputs" (itself)}, so that a reorder
        is told apart by what it reads and writes. "node" is the first of the ONNX nodes the layer was made from
        (rt_info originalLayersNames, which the ONNX frontend names after the ONNX node, or the graph output it
        writes) that the ONNX graph has: a ConvTranspose with a bias is a layer named after the frontend's own
        GroupConvolutionBackpropData_N with the bias Add, named after the ONNX node, fused in. A layer made from none
        (a reorder the plugin inserts) keeps its own name. One untimed run comes first; layers not run (parameters,
        results, constants) are left out."""
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
        onnx_names = {n.name for n in graph.node if n.name} | {o for n in graph.node for o in n.output}
        compiled = self._compile(self._read(path), threads, profile=True)
        runner = self.bind(OpenVinoRunner(compiled, onnx_input_names(path), list(onnx_output_shapes(path))), path)
        runner.feed(inputs)
        runner.invoke()
        executed = self.ov.ProfilingInfo.Status.EXECUTED
        per_run = []
        for _ in range(runs):
            runner.invoke()
            per_run.append({(p.node_name, p.node_type): p.real_time.total_seconds() * 1e3
                            for p in runner.request.get_profiling_info() if p.status == executed})
        reads, onnx_node = {}, {}
        for op in compiled.get_runtime_model().get_ordered_ops():
            name, info = op.get_friendly_name(), op.get_rt_info()
            reads[name] = [i.get_source_output().get_node().get_friendly_name() for i in op.inputs()]
            made_from = info["originalLayersNames"].astype(str).split(",") if "originalLayersNames" in info else []
            onnx_node[name] = next((n for n in made_from if n in onnx_names), name)
        keys = list(dict.fromkeys(key for run in per_run for key in run))
        totals = collections.Counter({key: statistics.median(run.get(key, 0.0) for run in per_run) for key in keys})
        return [{"node": onnx_node.get(node, node), "op": op, "ms": ms, "inputs": reads.get(node, []),
                 "outputs": [node]} for (node, op), ms in totals.most_common()]


def _port_by_name(ports, names: list, what: str) -> dict:
    """{ONNX name: the compiled model's port carrying it}: OpenVINO's ONNX frontend keeps each graph input's and
    output's ONNX tensor name among its port's names (get_names()). A name no port carries, or more than one does,
    raises: ports are never paired with ONNX names by position. So does a name that is not UTF-8 (protobuf gives it
    as bytes): OpenVINO's Python API cannot return it (get_names() raises UnicodeDecodeError), so no port can be
    told to carry it."""
    carried = []
    for k, port in enumerate(ports):
        try:
            carried.append(set(port.get_names()))
        except UnicodeDecodeError as e:
            raise RuntimeError(f"OpenVINO's Python API cannot read the names of the compiled model's {what} {k} "
                               f"(a name that is not UTF-8: {e.reason} at byte {e.start}), so it cannot be matched to "
                               f"the ONNX {what}s {names} by name") from e
    found = {}
    for name in names:
        matches = [port for port, names_of in zip(ports, carried, strict=True) if name in names_of]
        if len(matches) != 1:
            raise RuntimeError(f"OpenVINO's compiled model has {len(matches)} {what}s named {name!r} (its {what}s "
                               f"carry the names {[sorted(c) for c in carried]}); the ONNX {what}s are {names}")
        found[name] = matches[0]
    return found


class OpenVinoRunner(Runner):
    """One infer request of a compiled model; inputs and outputs are matched to the ONNX graph's by tensor name."""

    where = "the OpenVINO compiled model"

    def __init__(self, compiled, input_names: list[str], output_names: list[str]):
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.input_names = input_names
        self.inputs = _port_by_name(compiled.inputs, input_names, "input")
        self.names = output_names
        self.ports = _port_by_name(compiled.outputs, output_names, "output")

    def feed_impl(self, inputs):
        import numpy as np
        from openvino import Tensor

        # Each input is set once as a tensor the request reads (a contiguous copy kept alive here): invoke() then
        # times the inference only, not the copy in.
        self.arrays = {n: np.ascontiguousarray(inputs[n]) for n in self.input_names}
        for name, port in self.inputs.items():
            self.request.set_tensor(port, Tensor(self.arrays[name], shared_memory=True))

    def invoke(self):
        self.request.infer()

    def outputs_impl(self) -> dict:
        import numpy as np

        return {name: np.array(self.request.get_tensor(self.ports[name]).data) for name in self.names}
