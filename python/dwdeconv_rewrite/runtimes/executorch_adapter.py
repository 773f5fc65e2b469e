"""ExecuTorch: onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> .pte, run by
executorch.runtime; at fp16 the module in float16, at int8 quantized by PT2E with XNNPACKQuantizer first."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .base import Runner, Runtime
from .common import (StageError, calibration_key, child_command, model_key, onnx_inputs, parse_child_options,
                     read_calibration)


def precision_suffix(precision: str, calibration: str = "") -> str:
    """What a precision adds to a conversion's cache name (KEY[.static-resize]SUFFIX.pte and .json): nothing at fp32
    (as before precisions), .fp16, .int8-CALIBRATION (another calibration is another conversion)."""
    return {"fp32": "", "fp16": ".fp16"}.get(precision, f".int8-{calibration}")


class ExecuTorchRuntime(Runtime):
    """onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> to_executorch, in a child
    process (a converter that crashes costs one model, not the run, and the timing process never traces), then
    the .pte on ExecuTorch's runtime (executorch.runtime), with XNNPACK's thread pool set per load."""

    name = "executorch"

    def __init__(self, work: Path):
        import torch
        from executorch.runtime import Runtime

        self.torch = torch
        self.runtime = Runtime.get()
        self.work = work / "executorch"
        self.work.mkdir(parents=True, exist_ok=True)
        self.jobs = 1
        self.child_stdout = None  # where the converter child's output goes (None: this process's stdout)
        # --et-static-resize, through the environment so that the converter and perf children see it too.
        self.static_resize = os.environ.get("BENCH_ET_STATIC_RESIZE") == "1"
        self.variant = ".static-resize" if self.static_resize else ""
        self.timeout = 0.0  # seconds per model's conversion, 0 for none (--convert-timeout)

    def versions(self):
        from importlib.metadata import version

        v = {p: version(p) for p in ("executorch", "torch", "onnx2torch", "onnx")}
        if self.static_resize:
            v["onnx2torch patch"] = "--et-static-resize (constant nearest Resize scales read at conversion)"
        return v

    def label(self):
        from importlib.metadata import version

        return f"ExecuTorch {version('executorch')} (XNNPACK delegate)"

    def pte_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}{self.variant}{precision_suffix(self.precision, self.calibration_key)}.pte"

    def info_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}{self.variant}{precision_suffix(self.precision, self.calibration_key)}.json"

    def convert_all(self, paths):
        """Converts every model without a cached result (WORK/executorch/KEY.json, with KEY.pte if it converted).
        The child writes each result as it goes, and the model and stage it is on to a progress file. If it dies,
        or spends more than --convert-timeout seconds on one model, the model it was on is recorded as failed at
        that stage (with the exit status or the timeout) and the rest are converted by a new child."""
        todo = [p for p in dict.fromkeys(paths) if not self.converted(p)]
        progress = self.work / "_progress.json"
        options = ["--precision", self.precision] + (["--calibration", self.calibration_dir] if self.calibration_dir else [])
        while todo:
            progress.unlink(missing_ok=True)
            cmd, env = child_command("_executorch", self.work.parent, *options, "--", *todo)
            child = subprocess.Popen(cmd, env=env, stdout=self.child_stdout)
            current, since, timed_out = None, time.monotonic(), None
            while child.poll() is None:
                time.sleep(0.5)
                with contextlib.suppress(OSError, ValueError):
                    state = json.loads(progress.read_text())
                    if state["model"] != current:
                        current, since = state["model"], time.monotonic()
                if self.timeout and current and time.monotonic() - since > self.timeout:
                    timed_out = current
                    child.kill()
                    child.wait()
            left = [p for p in todo if not self.info_path(p).exists()]
            if left and (child.returncode != 0 or timed_out):
                stage = "converter process"
                with contextlib.suppress(OSError, ValueError, KeyError):
                    stage = json.loads(progress.read_text())["stage"]
                if timed_out:
                    why = f"timed out after {self.timeout:g} s (--convert-timeout)"
                else:
                    code = child.returncode
                    why = f"converter process died ({f'signal {-code}' if code < 0 else f'exit {code}'})"
                self.info_path(left[0]).write_text(json.dumps({"failed": f"{stage}: {why}", "failed_stage": stage}))
                left = left[1:]
            elif left:
                raise RuntimeError(f"the ExecuTorch converter exited without converting {left[0]}")
            todo = left

    def converted(self, path: Path) -> bool:
        """A cached result that is usable: a failure, or a conversion that recorded its inputs' names and types and
        its outputs' names (results from before those were recorded are converted again: until the types were,
        every input was traced as float32)."""
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(self.info_path(path).read_text())
            return "failed" in info or all(k in info for k in ("input_names", "input_dtypes", "output_names"))
        return False

    def prepare(self, path: Path) -> dict:
        info = json.loads(self.info_path(path).read_text()) if self.info_path(path).exists() else {
            "failed": "not converted"}
        if "failed" in info:
            stage = info.get("failed_stage", "conversion")
            raise StageError(stage, info["failed"].removeprefix(f"{stage}: "))
        return info

    def set_threads(self, threads: int):
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        # execute() hands its outputs back as torch tensors cloned by ATen, which parallelises the copy on torch's
        # own OpenMP pool (one thread per core by default), so without this a 1-thread run used 2 threads; on a
        # machine whose other core was busy, each of those copies waited for a scheduler tick (4 ms medians).
        self.torch.set_num_threads(threads)

    def load_impl(self, path: Path, threads: int):
        self.set_threads(threads)
        info = self.prepare(path)
        if "input_names" not in info or "output_names" not in info:
            raise RuntimeError(f"{self.info_path(path)} was converted before the program's input and output names were "
                               "recorded: convert it again (convert_all)")
        program = self.runtime.load_program(self.pte_path(path))
        return ExecuTorchRunner(program.load_method("forward"), self.torch, info["input_names"], info["output_names"],
                                info.get("input_dtypes"), info.get("input_casts"), info.get("output_dtypes"),
                                info.get("output_quant"))


def _op_name(target) -> str:
    """A call_function target's op name, as the graphs' op counts spell it (e.g. aten.index.Tensor)."""
    # OpOverload, EdgeOpOverload and the delegate call have name() ("aten::index.Tensor"); str() of an edge op
    # prints its whole schema, and the _op of an aten overload is a pybind function with no useful name.
    name = getattr(target, "name", None)
    return name().replace("::", ".") if callable(name) else str(target)


def _op_counts(graph) -> collections.Counter:
    """How many times a graph calls each op (its call_function nodes)."""
    return collections.Counter(_op_name(n.target) for n in graph.nodes if n.op == "call_function")


class _Progress:
    """The child's progress file (convert_all names a dead or timed-out child's model and stage from it) and its stage."""

    def __init__(self, folder: Path, path: Path):
        self.file, self.path, self.stage = folder / "_progress.json", path, ""

    def at(self, stage: str):
        """Records the stage the model is entering: in the progress file first, then for a failure's report."""
        self.file.write_text(json.dumps({"model": str(self.path), "stage": stage}))
        self.stage = stage


def _traceable_module(torch, path: Path, module, precision: str, samples: list[dict], info: dict, progress: _Progress):
    """The module at the precision, typed example inputs and the ONNX names; the precision's casts and notes go into info."""
    progress.at("onnx2torch input and output names")
    input_names, output_names = onnx2torch_io_names(path, module)
    # Traced with values of each input's declared type: the program then takes that type, and no other.
    progress.at("example inputs")
    feeds = onnx_inputs(path, 0)
    inputs = tuple(torch_tensor(torch, name, feeds[name]) for name in input_names)
    notes = []
    if precision == "fp16":
        module = module.to(torch.float16)
        casts = {name: "float16" for name, x in zip(input_names, inputs) if x.is_floating_point()}
        inputs = tuple(x.to(torch.float16) if x.is_floating_point() else x for x in inputs)
        info.update(input_casts=casts, output_dtypes=onnx_output_dtypes(path))
        notes.append("the program computes in fp16 and takes and returns fp16: the float32 inputs are rounded "
                     "to fp16 when fed (outside the timed run) and the outputs widened to float32")
    elif precision == "int8":
        progress.at("int8: prepare_pt2e(XNNPACKQuantizer), calibration, convert_pt2e")
        module = quantize_pt2e(torch, module, inputs, input_names, samples)
        info["output_quant"] = output_quantization(torch, module)
        notes += float_transposed_convs(torch, module)
    input_dtypes = [info.get("input_casts", {}).get(name, str(feeds[name].dtype)) for name in input_names]
    info["notes"] = notes
    return module, inputs, input_names, output_names, input_dtypes


def _export(torch, module, inputs: tuple, input_names: list[str], output_names: list[str], progress: _Progress):
    """torch.export of the module, refused unless it takes and returns as many values as the ONNX graph."""
    progress.at("torch.export.export")
    with torch.no_grad():
        exported = torch.export.export(module, inputs)
    # The exported program takes and returns what the module's forward does, flattened in that order
    # (its out_spec is the pytree of forward's return value), and to_executorch keeps that order for the
    # .pte's method: so the counts are what can still be checked here.
    signature = exported.graph_signature
    if len(signature.user_inputs) != len(input_names) or len(signature.user_outputs) != len(output_names):
        raise RuntimeError(f"the exported program takes {len(signature.user_inputs)} inputs and returns "
                           f"{len(signature.user_outputs)} outputs; the ONNX graph has {input_names} -> "
                           f"{output_names}")
    return exported


def _lowered_ops(program) -> dict:
    """A lowered program's op counts: all, the XNNPACK partitions, and the ops outside (portable kernels) and inside them."""
    lowered = _op_counts(program.graph)
    inside = collections.Counter()
    for node in program.graph.nodes:
        if node.op == "get_attr" and str(node.target).startswith("lowered_module"):
            inside += _op_counts(getattr(program.graph_module, node.target).original_module.graph)
    outside = {k: v for k, v in lowered.items()
               if k not in ("executorch_call_delegate", "<built-in function getitem>")}
    return dict(after_lowering=dict(lowered), xnnpack_partitions=lowered.get("executorch_call_delegate", 0),
                not_delegated=outside, in_delegates=dict(inside), ops=dict(inside + collections.Counter(outside)))


def executorch_child(work: Path, args: list[str]) -> int:
    """Converts each ONNX file to an ExecuTorch .pte lowered to XNNPACK at one precision (ARGS: [--precision P]
    [--calibration DIR] [--] PATHS) and writes, per model, WORK/executorch/KEY[SUFFIX].json (precision_suffix): the
    exported program's aten ops, the ops of the lowered program (every executorch_call_delegate is one XNNPACK
    partition; any other call_function node runs on ExecuTorch's portable kernels), and the edge ops inside the
    partitions; or the stage that failed and the converter's message.

    fp16: the module in float16 (weights and arithmetic), traced with float16 example inputs, so the program takes and
    returns float16: the runner casts the float inputs when fed (outside the timed run) and widens the outputs back
    (casts inside the graph would run outside XNNPACK, on portable kernels, and be timed). int8: PT2E, as
    ExecuTorch's own XNNPackRecipeType.PT2E_INT8_STATIC_PER_CHANNEL: XNNPACKQuantizer with
    get_symmetric_quantization_config(is_per_channel=True), calibrated on the --calibration samples (the same for every
    model), convert_pt2e, then exported and lowered as at fp32; the program takes and returns float32."""
    import onnx2torch
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    options, paths = parse_child_options(args)
    precision = options["precision"]
    samples = read_calibration(Path(options["calibration"])) if precision == "int8" else []
    suffix = precision_suffix(precision, calibration_key(samples) if samples else "")
    folder = work / "executorch"
    variant = ""
    if os.environ.get("BENCH_ET_STATIC_RESIZE") == "1":
        patch_onnx2torch_resize()
        variant = ".static-resize"

    for path in map(Path, paths):
        key = model_key(path)
        info = {"model": str(path), "precision": precision}
        progress = _Progress(folder, path)
        progress.at("onnx2torch.convert")
        print(f"executorch: converting {path.name} ({precision})", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            module = onnx2torch.convert(str(path)).eval()
            module, inputs, input_names, output_names, input_dtypes = _traceable_module(
                torch, path, module, precision, samples, info, progress)
            exported = _export(torch, module, inputs, input_names, output_names, progress)
            info.update(input_names=input_names, input_dtypes=input_dtypes, output_names=output_names)
            info["aten_ops"] = dict(_op_counts(exported.graph))
            progress.at("to_edge_transform_and_lower(XnnpackPartitioner)")
            edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
            info.update(_lowered_ops(edge.exported_program()))
            progress.at("to_executorch")
            (folder / f"{key}{variant}{suffix}.pte").write_bytes(edge.to_executorch().buffer)
        except StageError as e:  # a stage's own message, which names it
            info.update(failed=str(e)[:600], failed_stage=e.stage)
        except Exception as e:  # noqa: BLE001 - the reason is the finding
            stage = progress.stage
            message = str(e).strip().splitlines()[0][:400] if str(e).strip() else ""
            if stage == "torch.export.export" and type(e).__name__ == "GuardOnDataDependentSymNode":
                message += resize_hint(path)
            info.update(failed=f"{stage}: {type(e).__name__}: {message}", failed_stage=stage)
        info["convert_seconds"] = round(time.monotonic() - started, 1)
        (folder / f"{key}{variant}{suffix}.json").write_text(json.dumps(info, indent=1))
    return 0


def resize_hint(path: Path) -> str:
    """Why torch.export could not trace a model with a Resize, and which runtimes check such a model: onnx2torch's
    Resize reads its scales from a tensor when the module runs (`scales.tolist()`), a data-dependent value that
    torch.export cannot guard on, so no model with a Resize reaches ExecuTorch (bench_runtimes.py's
    --et-static-resize patches that for measuring). LiteRT (XNNPACK too), ONNX Runtime, OpenVINO and MNN each verified
    a nearest x2 Resize + 3x3 Conv, depthwise and dense, that ExecuTorch refused this way; pnnx (ncnn) crashed on it.
    "" when the graph has no Resize (the failure is something else)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    names = [n.name or n.output[0] for n in graph.node if n.op_type == "Resize"]
    if not names:
        return ""
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"; the model's Resize {shown} is why: onnx2torch reads a Resize's scales when the module runs, which "
            "torch.export cannot trace, so ExecuTorch takes no model with a Resize; --runtime litert checks this one on "
            "XNNPACK, as ExecuTorch's delegate would run it (ort, openvino and mnn convert it too)")


def onnx_output_dtypes(path: Path) -> list[str]:
    """The numpy dtype name of each ONNX graph output, in graph output order: what an fp16 program's outputs are
    widened back to."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return [str(onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)) for v in model.graph.output]


def quantize_pt2e(torch, module, inputs: tuple, input_names: list[str], samples: list[dict]):
    """`module` quantized by PT2E for XNNPACK (per-channel symmetric weights, per-tensor activations), calibrated on
    `samples` (read_calibration's dicts, fed in input_names' order): a GraphModule with quantize/dequantize pairs."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(module, inputs).module(), quantizer)
    with torch.no_grad():
        for k, sample in enumerate(samples):
            missing = [name for name in input_names if name not in sample]
            if missing:
                raise RuntimeError(f"calibration sample {k} has no value for graph inputs {missing}")
            prepared(*(torch_tensor(torch, name, sample[name]) for name in input_names))
    return convert_pt2e(prepared)


def _moves_values(torch) -> set:
    """aten ops that only move values: an output they make is on the int8 grid of their input."""
    a = torch.ops.aten
    return {a.pixel_shuffle.default, a.pixel_unshuffle.default, a.index.Tensor, a.index_select.default, a.permute.default,
            a.view.default, a.reshape.default, a.clone.default, a.contiguous.default, a.transpose.int, a.squeeze.dim,
            a.unsqueeze.default, a.flatten.using_ints, a.slice.Tensor, a.select.int, a.expand.default}


def output_quantization(torch, quantized) -> list:
    """Per graph output of the convert_pt2e GraphModule, in order: [scale, zero_point] of the dequantize_per_tensor it
    comes from (walking back through ops that only move values), or None for an output computed in float."""
    moves = _moves_values(torch)
    dequantize = torch.ops.quantized_decomposed.dequantize_per_tensor.default
    returned = next(n for n in quantized.graph.nodes if n.op == "output").args[0]
    found = []
    for node in (returned if isinstance(returned, (tuple, list)) else [returned]):
        while getattr(node, "op", None) == "call_function" and node.target in moves:
            node = node.args[0]
        if getattr(node, "op", None) == "call_function" and node.target == dequantize:
            found.append([float(node.args[1]), int(node.args[2])])
        else:
            found.append(None)
    return found


def float_transposed_convs(torch, quantized) -> list[str]:
    """A note naming the grouped transposed convolutions convert_pt2e left in float (XNNPACKQuantizer annotates no
    transposed convolution with groups > 1: xnnpack_quantizer_utils' _do_annotate_conv skips them), found as a
    conv_transpose / transposed convolution with groups != 1 whose weight no dequantize makes; [] when there is none."""
    dequantized = {torch.ops.quantized_decomposed.dequantize_per_channel.default,
                   torch.ops.quantized_decomposed.dequantize_per_tensor.default}
    kept = []
    for node in quantized.graph.nodes:
        if node.op != "call_function" or not hasattr(node.target, "_schema"):
            continue
        schema = node.target._schema
        if not schema.name.startswith("aten::conv_transpose") and schema.name not in ("aten::convolution", "aten::_convolution"):
            continue
        args = {a.name: (node.args[k] if k < len(node.args) else node.kwargs.get(a.name, a.default_value))
                for k, a in enumerate(schema.arguments)}
        transposed = args.get("transposed", schema.name.startswith("aten::conv_transpose"))
        groups, weight = args.get("groups") or 1, args.get("weight")
        if not transposed or groups == 1 or (getattr(weight, "op", None) == "call_function" and weight.target in dequantized):
            continue
        stack = list((node.meta.get("nn_module_stack") or {}).values())
        name = stack[-1][0] if stack else node.name
        value = weight.meta.get("val") if hasattr(weight, "meta") else None
        if value is None and getattr(weight, "op", None) == "get_attr":
            value = getattr(quantized, weight.target, None)
        shape = getattr(value, "shape", None)
        depthwise = shape is not None and shape[0] == groups and shape[1] == 1  # [C_in, C_out / groups, k...]
        kept.append(f"'{name}' ({'depthwise, ' if depthwise else ''}groups {groups})")
    if not kept:
        return []
    listed = ", ".join(kept[:10]) + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")
    return [f"{len(kept)} grouped ConvTranspose left in float by XNNPACKQuantizer, which annotates no grouped transposed "
            f"convolution: {listed}; this model runs {'it' if len(kept) == 1 else 'them'} in fp32"]


def onnx2torch_io_names(path: Path, module) -> tuple[list[str], list[str]]:
    """The ONNX names of the converted module's positional inputs and of its outputs, in the module's order, checked
    against the module itself; RuntimeError where a name cannot be told.

    What this rests on (onnx2torch 1.5.15, converter.py `convert`): after dropping the graph inputs that are
    initializers, it creates one fx placeholder per remaining graph input, in graph order, named input_1, input_2,
    ... (save_input_names=False), so forward's k-th argument is the k-th non-initializer graph input: that is
    checked on the module's placeholders. Its output is, for each graph output in graph order, the call_module node
    of the ONNX node producing it (onnx2torch.onnx_graph.OnnxGraph.value_as_node_output, modules named by
    OnnxGraph's unique node names), duplicates dropped, a single one returned bare: checked on the module's output
    node. So a graph output made by a node with several outputs (onnx2torch returns all of them, in the node's
    order, as one value, and only once when several are graph outputs) cannot be named and is refused.
    """
    import onnx
    from onnx2torch.onnx_graph import OnnxGraph

    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    input_names = [v.name for v in model.graph.input if v.name not in initializers]
    output_names = [v.name for v in model.graph.output]
    placeholders = [n.name for n in module.graph.nodes if n.op == "placeholder"]
    if placeholders != [f"input_{k}" for k in range(1, len(input_names) + 1)]:
        raise RuntimeError(f"the converted module's inputs {placeholders} are not onnx2torch's input_1..input_"
                           f"{len(input_names)} for the ONNX graph's inputs {input_names}")
    graph = OnnxGraph(model.graph)
    producers = []
    for name in output_names:
        try:
            node, _ = graph.value_as_node_output(name)
        except KeyError:
            raise RuntimeError(f"graph output '{name}' is not computed by a node (a graph input or initializer), "
                               "which onnx2torch cannot return") from None
        if len(node.output_values) != 1:
            raise RuntimeError(f"graph output '{name}' is one of the {len(node.output_values)} outputs of node "
                               f"'{node.unique_name}' ({node.operation_type}); onnx2torch returns all of them as one "
                               "value, so the converted program's outputs cannot be told apart by name")
        producers.append(node.unique_name)
    returned = next(n for n in module.graph.nodes if n.op == "output").args[0]
    returned = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    targets = [n.target if getattr(n, "op", None) == "call_module" else repr(n) for n in returned]
    if targets != producers:
        raise RuntimeError(f"the converted module returns {targets}; the ONNX graph's outputs {output_names} are made "
                           f"by {producers}")
    return input_names, output_names


def patch_onnx2torch_resize():
    """--et-static-resize: onnx2torch's Resize reads its scales from a tensor at run time (`scales.tolist()`), which
    torch.export cannot trace (GuardOnDataDependentSymNode), so no model with a Resize reaches ExecuTorch. This
    converts a nearest Resize whose scales are a constant [1, 1, sh, sw] (asymmetric, floor: ONNX's spelling of
    PyTorch's nearest interpolate) to F.interpolate with those scales fixed at conversion, which is what
    torch.export of the PyTorch model would give. Every other Resize keeps onnx2torch's converter."""
    import torch
    from onnx2torch.node_converters import registry
    from onnx2torch.utils.common import OnnxMapping, OnnxToTorchModule, OperationConverterResult, get_const_value

    class StaticNearestResize(torch.nn.Module, OnnxToTorchModule):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=self.scale, mode="nearest")

    def static_scales(node, graph):
        a = node.attributes
        if (a.get("mode", "nearest"), a.get("coordinate_transformation_mode", "half_pixel"),
                a.get("nearest_mode", "round_prefer_floor")) != ("nearest", "asymmetric", "floor"):
            return None
        names = list(node.input_values) + ["", "", ""]
        if not names[2] or names[3]:
            return None
        try:
            scales = [float(v) for v in get_const_value(names[2], graph).tolist()]
        except KeyError:
            return None
        if len(scales) != 4 or scales[:2] != [1.0, 1.0]:
            return None
        return tuple(scales[2:])

    for version in (11, 13):
        key = registry.OperationDescription(domain="", operation_type="Resize", version=version)
        stock = registry._CONVERTER_REGISTRY[key]

        def converter(node, graph, stock=stock):
            scale = static_scales(node, graph)
            if scale is None:
                return stock(node, graph)
            return OperationConverterResult(torch_module=StaticNearestResize(scale),
                                            onnx_mapping=OnnxMapping(inputs=(node.input_values[0],),
                                                                     outputs=node.output_values))

        registry._CONVERTER_REGISTRY[key] = converter


def torch_tensor(torch, name: str, value):
    """torch.from_numpy(value), or StageError naming graph input `name` and a dtype torch cannot take."""
    try:
        return torch.from_numpy(value)
    except (TypeError, RuntimeError) as e:
        raise StageError("example inputs", f"graph input '{name}' is {value.dtype}, which torch cannot take: "
                                           f"{e}") from None


class ExecuTorchRunner(Runner):
    """The .pte's forward takes its inputs and returns its outputs positionally, in the orders the converter recorded
    by ONNX name (onnx2torch_io_names): inputs are fed by name in that order, outputs returned keyed by name. Each
    input must have the dtype it was traced with (input_dtypes): the program refuses any other at run time with
    only an error number. An fp16 program's float inputs (input_casts) are cast to float16 when fed, and its float16
    outputs widened back to the ONNX graph's type (output_dtypes); output_quant is int8's step per output."""

    where = "the converted ExecuTorch program"

    def __init__(self, method, torch, input_names: list[str], output_names: list[str], input_dtypes=None,
                 input_casts=None, output_dtypes=None, output_quant=None):
        self.method = method
        self.torch = torch
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.input_dtypes = dict(zip(self.input_names, input_dtypes)) if input_dtypes else {}
        self.input_casts = dict(input_casts or {})
        self.output_dtypes = dict(zip(self.output_names, output_dtypes)) if output_dtypes else {}
        self.output_quant = dict(zip(self.output_names, output_quant)) if output_quant else {}

    def feed_impl(self, inputs):
        fed = {}
        for name in self.input_names:
            x, traced = inputs[name], self.input_dtypes.get(name)
            if name in self.input_casts and x.dtype.kind == "f":
                x = x.astype(self.input_casts[name])  # fp16: rounded here, not in the timed run
            if traced is not None and str(x.dtype) != traced:
                raise RuntimeError(f"graph input '{name}' is fed as {inputs[name].dtype}, but the ExecuTorch program "
                                   f"was traced with {traced}")
            fed[name] = x
        self.inputs = [torch_tensor(self.torch, name, fed[name]) for name in self.input_names]

    def invoke(self):
        self.result = self.method.execute(self.inputs)

    def outputs_impl(self) -> dict:
        if len(self.result) != len(self.output_names):
            raise RuntimeError(f"the ExecuTorch program returned {len(self.result)} outputs for the "
                               f"{len(self.output_names)} it was converted with {self.output_names}")
        values = {name: r.numpy() for name, r in zip(self.output_names, self.result)}
        for name, declared in self.output_dtypes.items():
            if values[name].dtype == "float16" and declared != "float16" and declared.startswith("float"):
                values[name] = values[name].astype(declared)
        return values

    def output_quantization(self) -> dict:
        return {name: tuple(q) for name, q in self.output_quant.items() if q is not None}
