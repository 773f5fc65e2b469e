#!/usr/bin/env python3
"""Times original against rewritten ONNX models on the runtimes users deploy with.

Not part of dwdeconv-rewrite, its build or its tests: a measuring tool, run from a virtual environment set up
as bench/runtimes/README.md says. For each pair (original ONNX, rewritten ONNX) and each runtime it
  1. converts both models the way a user would (onnx2tf to .tflite; onnx2torch + torch.export to an ExecuTorch
     .pte lowered to XNNPACK; ONNX Runtime loads the ONNX file itself) and records the converted graph's op list,
  2. runs both on the same seeded input and checks they agree (max abs error, and that error relative to the
     output's largest magnitude); a pair that disagrees is reported and never timed,
  3. times them interleaved, A B A B, in one run, and reports medians, spread (min-max; p10/p90 in the JSON), their
     ratio and the load average, in one table format for every runtime.

Runtimes (each needs its own packages; see README.md):
  litert      onnx2tf (float32) -> ai-edge-litert Interpreter, XNNPACK delegate applied by default
  ort         onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL
  executorch  onnx2torch -> torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> .pte (in a child
              process), run by executorch.runtime; reports the ops left outside the XNNPACK delegate

Suites:
  layers   one depthwise ConvTranspose per model, the executor's layer table (bench/layer_bench.cpp)
  handwritten  one hand-written x2 upsampler per model (nearest x mask, nearest + 3x3 Conv depthwise and dense),
           as bench/layer_bench.cpp builds them; --layer-filter and --channels/--sizes pick them
  migan    the MI-GAN-like generator at 256, form (a) (and form (b) with --migan-forms a b)
  dla      the DLA-style detection decoder (examples/make_examples.cpp --dla)
  sr       BasicSR's RRDBNet (ESRGAN's generator, x4, nearest + 3x3 Conv upsamplers; examples/export_rrdbnet.py)
  issue17  what the tool's issue 17 asks for on every runtime: k4s2p1 layers (C 16-512, H 32-128), k6s3p2op1 at
           H=64, nearest + 3x3 depthwise and dense layers, MI-GAN forms (a) and (b), the DLA decoder, RRDBNet
  --pair ORIGINAL.onnx REWRITTEN.onnx   any pair of your own, on every runtime

--respell gather_crd|batch_d2s_b rewrites the tool's DCR DepthToSpace into a spelling that reaches ExecuTorch;
--et-static-resize lets a nearest Resize with constant scales through onnx2torch and torch.export; --rewrite-args
passes extra arguments to dwdeconv-rewrite. README.md says what each table holds.

Examples (from the repository root, after building the tool):
  python bench/runtimes/bench_runtimes.py --runtime ort --threads 1 2 --suite layers migan dla --work /tmp/rt
  python bench/runtimes/bench_runtimes.py --runtime litert --threads 1 --suite migan --profile --work /tmp/rt
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]

# The executor's layer table (bench/layer_bench.cpp): kernel, stride, pad, output_padding.
GEOMETRIES = [(4, 2, 1, 0), (3, 2, 1, 1), (2, 2, 0, 0), (6, 3, 2, 1)]
CHANNELS = [16, 64, 256, 512]
SIZES = [32, 64, 128]

# A rewritten output must agree with the original to this, relative to the output's largest magnitude.
REL_TOLERANCE = 1e-4


# ---------------------------------------------------------------------------------------------------------------
# Models


@dataclasses.dataclass
class Case:
    """One original/rewritten pair; `name` is unique and names the cached conversions."""

    name: str
    original: Path
    rewritten: Path
    kind: str  # "layer", "model" or "pair"
    layer: tuple | None = None  # (C, H, k, s, p, op) for a layer
    error: str | None = None  # "STAGE: message" when the pair could not be made; reported in the tables, not run
    info: dict = dataclasses.field(default_factory=dict)  # what the tool rewrote and kept, and any respelling


def layer_name(c, h, k, s, p, op):
    return f"k{k}s{s}p{p}op{op}_C{c}_H{h}"


def make_layer_model(c, h, k, s, p, op) -> onnx.ModelProto:
    """One depthwise ConvTranspose, x [1, C, H, H] -> y; weights seeded by the geometry, like layer_bench.cpp."""
    rng = np.random.default_rng(c * 7919 + h * 104729 + k * 31 + s * 7 + p)
    out = s * (h - 1) + op + k - 2 * p
    w = rng.uniform(-0.5, 0.5, size=(c, 1, k, k)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", group=c, kernel_shape=[k, k],
                            strides=[s, s], pads=[p, p, p, p], output_padding=[op, op])
    graph = helper.make_graph([node], f"layer_{layer_name(c, h, k, s, p, op)}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, out, out])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


HANDWRITTEN_KINDS = ("nearest_mask", "nearest_conv_dw", "nearest_conv_dense")


def make_handwritten_model(kind, c, h) -> onnx.ModelProto:
    """One hand-written x2 upsampler, x [1, C, H, H] -> y [1, C, 2H, 2H], as bench/layer_bench.cpp builds it:
    nearest_mask is Resize, Mul by a [[1,0],[0,0]] mask, Pad [2,2,1,1], depthwise 4x4 Conv (k4 s2 p1);
    nearest_conv_dw / _dense is Resize then a 3x3 Conv with pads 1, depthwise or dense (C in, C out)."""
    rng = np.random.default_rng(c * 7919 + h * 104729 + HANDWRITTEN_KINDS.index(kind))
    resize = helper.make_node("Resize", ["x", "", "scales"], ["u"], name="up", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32), "b")]
    if kind == "nearest_mask":
        mask = np.zeros((1, 1, 2 * h, 2 * h), np.float32)
        mask[:, :, ::2, ::2] = 1
        inits += [numpy_helper.from_array(mask, "mask"),
                  numpy_helper.from_array(np.array([0, 0, 2, 2, 0, 0, 1, 1], np.int64), "pads"),
                  numpy_helper.from_array(rng.uniform(-0.5, 0.5, size=(c, 1, 4, 4)).astype(np.float32), "w")]
        nodes = [resize, helper.make_node("Mul", ["u", "mask"], ["m"]), helper.make_node("Pad", ["m", "pads"], ["p"]),
                 helper.make_node("Conv", ["p", "w", "b"], ["y"], name="conv", group=c, kernel_shape=[4, 4])]
    else:
        group = c if kind == "nearest_conv_dw" else 1
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, size=(c, c // group, 3, 3)).astype(np.float32), "w"))
        nodes = [resize, helper.make_node("Conv", ["u", "w", "b"], ["y"], name="conv", group=group, kernel_shape=[3, 3],
                                          pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, f"{kind}_C{c}_H{h}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * h, 2 * h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class StageError(RuntimeError):
    """A step that failed, with the stage it failed in ("dwdeconv-rewrite", "onnx2tf", ...) and its message."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage


def run_tool(args, what):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise StageError(what, f"exit {result.returncode}: {' / '.join(message[-3:])[:600]}")
    return result.stdout


def rewrite_tag(rewrite_args: list[str]) -> str:
    """'' for the tool's default output, else the extra arguments as a file-name part, e.g. '.target-executorch'."""
    words = re.sub(r"[^A-Za-z0-9_.=]+", "-", " ".join(rewrite_args or [])).strip("-")
    return f".{words}" if words else ""


def rewrite(args, original: Path, rewritten: Path) -> dict:
    """`dwdeconv-rewrite ORIGINAL -o REWRITTEN --report ... [--rewrite-args]`, cached while REWRITTEN is newer
    than ORIGINAL and the tool; returns the report's counts: upsamplers rewritten and kept, by form."""
    report = rewritten.with_name(rewritten.name[:-5] + ".report.json")
    newest = max(original.stat().st_mtime, Path(args.tool).stat().st_mtime)
    if not (rewritten.exists() and report.exists() and rewritten.stat().st_mtime >= newest):
        run_tool([args.tool, original, "-o", rewritten, "-q", "--report", report] + list(args.rewrite_args or []),
                 "dwdeconv-rewrite")
    r = json.loads(report.read_text())
    forms = collections.Counter(n.get("form") or "conv_transpose" for n in r.get("nodes", [])
                                if n.get("decision") == "rewritten")
    info = {"tool_rewrote": r.get("rewritten"), "tool_kept": r.get("kept"), "rewritten_forms": dict(forms),
            "kept_reasons": [f"{n.get('name')}: {n.get('reason')}" for n in r.get("nodes", [])
                             if n.get("decision") != "rewritten"][:5]}
    if r.get("kept") and not args.rewrite_args:
        print(f"warning: dwdeconv-rewrite kept {r['kept']} upsampler(s) of {original.name}: {info['kept_reasons']}",
              file=sys.stderr)
    return info


# ---------------------------------------------------------------------------------------------------------------
# Respelling the tool's DepthToSpace for ExecuTorch (a stand-in until the tool emits these itself).
#
# onnx2torch converts only CRD DepthToSpace (to pixel_shuffle) and no Reshape passes torch.export, so the tool's
# DCR DepthToSpace does not reach ExecuTorch. Two spellings convert, lower to XNNPACK and run (the ExecuTorch
# probe of 2026-12-01, the tool's issue 17):
#   gather_crd   Gather(axis=1, int64 perm[c*s*s + p] = p*C + c) then DepthToSpace CRD; any N. The Gather
#                (aten.index.Tensor) stays outside the XNNPACK delegate.
#   batch_d2s_b  N = 1 and the DepthToSpace reads a Concat(axis=1) of s*s phases (the tool's form): that Concat
#                on axis 0 ([s*s, C, H, W], the same memory order), Transpose [1,0,2,3], DepthToSpace CRD,
#                Transpose [1,0,2,3]; everything inside the delegate.
RESPELLINGS = ("gather_crd", "batch_d2s_b")


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def respell_depth_to_space(model: onnx.ModelProto, form: str) -> tuple[onnx.ModelProto, int]:
    """Every DCR DepthToSpace of the main graph in `form`; returns the new model and how many were respelled."""
    model = copy.deepcopy(model)
    graph = model.graph
    inferred = onnx.shape_inference.infer_shapes(model).graph
    shapes = {}
    for v in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        shapes[v.name] = [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
    producer = {o: n for n in graph.node for o in n.output}
    readers = collections.Counter(i for n in graph.node for i in n.input)
    readers.update(o.name for o in graph.output)
    nodes, inits, count, retyped = [], {}, 0, set()
    for node in graph.node:
        mode = _attr(node, "mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if node.op_type != "DepthToSpace" or node.domain not in ("", "ai.onnx") or mode != "DCR":
            nodes.append(node)
            continue
        s, x, y = _attr(node, "blocksize"), node.input[0], node.output[0]
        dims = shapes.get(x)
        if not dims or len(dims) != 4 or dims[1] is None:
            raise StageError("respell", f"DepthToSpace '{node.name}': the channel count of '{x}' is unknown")
        c = dims[1] // (s * s)
        tag = re.sub(r"[^A-Za-z0-9_]+", "_", node.name or y)
        if form == "gather_crd":
            perm = f"crd_perm_s{s}_c{c}"
            inits[perm] = numpy_helper.from_array(
                np.array([p * c + ch for ch in range(c) for p in range(s * s)], np.int64), perm)
            nodes += [helper.make_node("Gather", [x, perm], [f"{tag}_crd"], name=f"{tag}_gather", axis=1),
                      helper.make_node("DepthToSpace", [f"{tag}_crd"], [y], name=node.name, blocksize=s, mode="CRD")]
        elif form == "batch_d2s_b":
            cat = producer.get(x)
            ok = (dims[0] == 1 and cat is not None and cat.op_type == "Concat" and _attr(cat, "axis") in (1, -3)
                  and len(cat.input) == s * s and readers[x] == 1
                  and all((shapes.get(i) or [None, None])[1] == c for i in cat.input))
            if not ok:
                raise StageError("respell", f"batch_d2s_b needs N = 1 and a Concat(axis=1) of {s * s} phases of C "
                                            f"channels read only by DepthToSpace '{node.name}'")
            for a in cat.attribute:
                if a.name == "axis":
                    a.i = 0
            retyped.add(x)
            nodes += [helper.make_node("Transpose", [x], [f"{tag}_cphw"], name=f"{tag}_to_cphw", perm=[1, 0, 2, 3]),
                      helper.make_node("DepthToSpace", [f"{tag}_cphw"], [f"{tag}_c1hw"], name=node.name, blocksize=s,
                                       mode="CRD"),
                      helper.make_node("Transpose", [f"{tag}_c1hw"], [y], name=f"{tag}_to_nchw", perm=[1, 0, 2, 3])]
        else:
            raise ValueError(form)
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(inits.values())
    keep = [v for v in graph.value_info if v.name not in retyped]
    del graph.value_info[:]
    graph.value_info.extend(keep)
    onnx.checker.check_model(model)
    return model, count


def respell(rewritten: Path, respelled: Path, form: str) -> dict:
    """Writes `respelled` (cached while newer than `rewritten`) and checks on ONNX Runtime that it computes what
    the tool's output computes; pure data movement, so the difference must be 0."""
    sidecar = respelled.with_name(respelled.name[:-5] + ".json")
    if respelled.exists() and sidecar.exists() and respelled.stat().st_mtime >= rewritten.stat().st_mtime:
        return json.loads(sidecar.read_text())
    model, count = respell_depth_to_space(onnx.load(str(rewritten)), form)
    onnx.save(model, str(respelled))
    info = {"respelled": form, "depth_to_space_respelled": count}
    try:
        import onnxruntime
    except ImportError:
        info["respell_check"] = "not checked (no onnxruntime)"
    else:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        feeds = onnx_inputs(rewritten, seed=1)
        outs = [onnxruntime.InferenceSession(str(p), options, providers=["CPUExecutionProvider"]).run(None, feeds)
                for p in (rewritten, respelled)]
        info["respell_max_abs_vs_dcr"], _ = compare(outs[0], outs[1])
        if info["respell_max_abs_vs_dcr"] != 0:
            respelled.unlink()
            raise StageError("respell", f"the {form} model differs from the tool's on ONNX Runtime by "
                                        f"{info['respell_max_abs_vs_dcr']:.2e}")
    sidecar.write_text(json.dumps(info))
    return info


# ---------------------------------------------------------------------------------------------------------------
# Suites

SUITES = ("layers", "handwritten", "migan", "dla", "sr", "issue17")
# --suite issue17: what the tool's issue 17 asks to measure on every runtime. Layer names matched per suite.
ISSUE17_LAYERS = {"layers": r"^k4s2p1op0_|^k6s3p2op1_C\d+_H64$", "handwritten": r"^nearest_conv_(dw|dense)_"}


def export_rrdbnet(args, out: Path):
    """examples/export_rrdbnet.py with Debian's torch (--export-python), written under a temporary name first."""
    tmp = out.with_name(out.name + ".tmp.onnx")
    run_tool([args.export_python, REPO / "examples/export_rrdbnet.py", tmp, "--num-feat", args.sr_num_feat,
              "--num-block", args.sr_num_block, "--num-grow-ch", args.sr_num_grow_ch, "--size", args.sr_size,
              "--opset", "17"], "examples/export_rrdbnet.py")
    tmp.rename(out)


def build_cases(args) -> list[Case]:
    work = args.work / "models"
    work.mkdir(parents=True, exist_ok=True)
    suites = set(args.suite or [])
    patterns = {s: None for s in ("layers", "handwritten") if s in suites}  # None: every layer of that suite
    if "issue17" in suites:
        for suite, pattern in ISSUE17_LAYERS.items():
            if suite not in patterns:
                patterns[suite] = [pattern]
        suites |= {"migan", "dla", "sr"}
    migan_forms = args.migan_forms or (["a", "b"] if "issue17" in suites else ["a"])
    tag = rewrite_tag(args.rewrite_args)

    def wanted(suite, name):
        if args.layer_filter and not re.search(args.layer_filter, name):
            return False
        return patterns[suite] is None or any(re.search(p, name) for p in patterns[suite])

    cases = []
    if "layers" in patterns:
        for (k, s, p, op) in GEOMETRIES:
            for c in args.channels:
                for h in args.sizes:
                    name = layer_name(c, h, k, s, p, op)
                    if not wanted("layers", name):
                        continue
                    original = work / f"{name}.onnx"
                    if not original.exists():
                        onnx.save(make_layer_model(c, h, k, s, p, op), str(original))
                    cases.append(Case(name, original, work / f"{name}.xnn{tag}.onnx", "layer", (c, h, k, s, p, op)))
    if "handwritten" in patterns:
        for kind in HANDWRITTEN_KINDS:
            for c in args.channels:
                for h in args.sizes:
                    name = f"{kind}_C{c}_H{h}"
                    if not wanted("handwritten", name):
                        continue
                    original = work / f"{name}.onnx"
                    if not original.exists():
                        onnx.save(make_handwritten_model(kind, c, h), str(original))
                    cases.append(Case(name, original, work / f"{name}.xnn{tag}.onnx", "layer"))
    if "migan" in suites:
        for form in migan_forms:
            name = f"migan{args.migan_size}{form}"
            original = work / f"{name}.onnx"
            form_a = work / f"migan{args.migan_size}a.onnx"
            # Form (b) is rewritten from itself (its nearest x mask upsamplers, form nearest_mask); (a) and a-img
            # are compared with the rewritten form (a), as the executor's table in BENCHMARKS.md does.
            stem = f"migan{args.migan_size}{'b' if form == 'b' else 'a'}"
            case = Case(name, original, work / f"{stem}.xnn{tag}.onnx", "model")
            cases.append(case)
            try:
                for path, f in ((form_a, "deconv"), (original, "handwritten")):
                    if not path.exists() and (path == form_a or form == "b"):
                        run_tool([args.make_examples, "--migan", args.migan_size, "--form", f, "-o", path],
                                 "dwdeconv-make-examples")
                if form == "a-img" and not original.exists():
                    # onnx2tf cannot convert form (a) as is (its layout tracking breaks on the 3-channel image path,
                    # see BENCHMARKS.md); with only those six 3-channel upsamplers rewritten it can. Comparing this
                    # with the fully rewritten form measures the main path's upsamplers (128 to 512 channels).
                    plan = run_tool([args.tool, form_a, "--dry-run"], "dwdeconv-rewrite --dry-run")
                    only = [a for n in re.findall(r'"([^"]*img_up)"', plan) for a in ("--only", n)]
                    run_tool([args.tool, form_a, "-o", original, "-q"] + only, "dwdeconv-rewrite --only")
            except StageError as e:
                case.error = str(e)
    if "dla" in suites:
        original = work / f"dla{args.dla_size}.onnx"
        case = Case(f"dla{args.dla_size}", original, work / f"dla{args.dla_size}.xnn{tag}.onnx", "model")
        cases.append(case)
        if not original.exists():
            try:
                run_tool([args.make_examples, "--dla", args.dla_size, "-o", original], "dwdeconv-make-examples")
            except StageError as e:
                case.error = str(e)
    if "sr" in suites:
        name = f"rrdbnet_f{args.sr_num_feat}b{args.sr_num_block}g{args.sr_num_grow_ch}_H{args.sr_size}"
        original = work / f"{name}.onnx"
        case = Case(name, original, work / f"{name}.xnn{tag}.onnx", "model")
        cases.append(case)
        if not original.exists():
            try:
                export_rrdbnet(args, original)
            except StageError as e:
                case.error = str(e)
    for i, (a, b) in enumerate(args.pair or []):
        cases.append(Case(f"pair{i}_{Path(b).stem}", Path(a), Path(b), "pair"))
    for case in cases:
        if case.error:
            continue
        try:
            if case.kind != "pair":
                source = case.original
                if case.name.startswith("migan") and not case.name.endswith("b"):
                    source = work / f"migan{args.migan_size}a.onnx"
                case.info.update(rewrite(args, source, case.rewritten))
            if tag:
                case.name += tag
            if args.respell:
                dcr = case.rewritten
                name = dcr.name[:-5] if case.kind != "pair" else model_key(dcr)
                case.rewritten = work / f"{name}.{args.respell}.onnx"
                case.info.update(respell(dcr, case.rewritten, args.respell))
                case.name += f".{args.respell}"
        except (StageError, OSError, onnx.checker.ValidationError) as e:
            case.error = str(e) if isinstance(e, StageError) else f"{type(e).__name__}: {e}"
    return cases


def onnx_inputs(path: Path, seed: int) -> dict[str, np.ndarray]:
    """A seeded standard-normal input for every graph input (fixed shapes only)."""
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
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
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


def onnx_op_counts(path: Path) -> dict[str, int]:
    model = onnx.load(str(path), load_external_data=False)
    return dict(collections.Counter((n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node))


# ---------------------------------------------------------------------------------------------------------------
# Runtimes. Each loads a model into a Runner: feed(inputs) once, then invoke() is what is timed, and outputs()
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
        runner = self.load(path, threads, profile_prefix=str(self.work / f"{model_key(path)}.profile"))
        runner.feed(inputs)
        for _ in range(runs):
            runner.invoke()
        trace = runner.session.end_profiling()
        totals = collections.Counter()
        with open(trace) as f:
            for event in json.load(f):
                if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
                    totals[event["args"]["op_name"]] += event["dur"] / 1000.0
        return {op: ms / runs for op, ms in totals.most_common()}


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


class LiteRtRuntime:
    """onnx2tf (run in a child process: TensorFlow and LiteRT stay out of each other's way) + ai-edge-litert."""

    name = "litert"

    def __init__(self, work: Path):
        from ai_edge_litert import interpreter as litert

        self.litert = litert
        self.work = work / "litert"
        self.work.mkdir(parents=True, exist_ok=True)
        self.jobs = 1

    def versions(self):
        from importlib.metadata import version

        return {p: version(p) for p in ("ai-edge-litert", "onnx2tf", "tensorflow", "onnx")}

    def tflite_path(self, path: Path) -> Path:
        return self.work / model_key(path) / f"{path.stem}_float32.tflite"

    def convert_all(self, paths: list[Path]):
        todo = [p for p in dict.fromkeys(paths) if not self.tflite_path(p).exists()]
        if not todo:
            return
        # Few children for all of them: importing TensorFlow costs seconds. Biggest first, spread over the jobs.
        todo.sort(key=lambda p: p.stat().st_size, reverse=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "_onnx2tf", str(self.work)]
        children = [subprocess.Popen(cmd + [str(p) for p in todo[j::self.jobs]]) for j in range(self.jobs)]
        for child in children:
            child.wait()

    def prepare(self, path: Path) -> dict:
        """The .tflite's op list, and which of its ops the XNNPACK delegate took."""
        tflite = self.tflite_path(path)
        if not tflite.exists():
            log = self.work / model_key(path) / "onnx2tf.log"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            said = [l for l in lines if l.startswith("onnx2tf failed:")] or [l for l in lines if l.strip()][-1:]
            message = said[-1].removeprefix("onnx2tf failed: ")[:400] if said else "no log"
            raise StageError("onnx2tf", f"{message} (log: {log})")
        delegated = self.litert.Interpreter(model_path=str(tflite), num_threads=1)
        delegated.allocate_tensors()
        ops = delegated._get_ops_details()
        on_cpu = ops_left_to_tflite(ops, {t["index"] for t in delegated.get_output_details()})
        total = collections.Counter(op["op_name"] for op in ops if op["op_name"] != "DELEGATE")
        left = collections.Counter(op["op_name"] for op in ops if op["index"] in on_cpu)
        return {"ops": dict(total), "tflite": str(tflite),
                "xnnpack_partitions": sum(op["op_name"] == "DELEGATE" for op in ops),
                "not_delegated": dict(left)}

    def load(self, path: Path, threads: int):
        interpreter = self.litert.Interpreter(model_path=str(self.tflite_path(path)), num_threads=threads)
        interpreter.allocate_tensors()
        return LiteRtRunner(interpreter)


def onnx2tf_child(work: Path, paths: list[str]):
    """Converts each ONNX file with onnx2tf's Python API, float32, one output folder per model.

    onnx2tf also writes a SavedModel and a float16 .tflite, which are not used here and cost two thirds of the
    time of a C=512 layer (512 per-channel transposed convolutions). Both are skipped: SavedModel export is a
    no-op, and the converter stops at its second convert() (the float16 one). The float32 .tflite is converted
    from the same Keras model either way.
    """
    import onnx2tf
    import tensorflow as tf

    class Float32Written(Exception):
        pass

    def stop_after_first_convert(make):
        def wrapped(*a, **k):
            converter = make(*a, **k)
            real, calls = converter.convert, []

            def convert():
                calls.append(1)
                if len(calls) > 1:
                    raise Float32Written()
                return real()

            converter.convert = convert
            return converter

        return staticmethod(wrapped)

    tf.saved_model.save = lambda *a, **k: None
    for factory in ("from_keras_model", "from_concrete_functions"):
        setattr(tf.lite.TFLiteConverter, factory, stop_after_first_convert(getattr(tf.lite.TFLiteConverter, factory)))

    # onnx2tf simplifies its input in place by running the `onnxsim` command, which must be on PATH (as it is in
    # an activated environment); without it onnx2tf converts the unsimplified model and only warns.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    # For a model whose inputs look like RGB images (N <= 20, 3 channels) onnx2tf downloads sample images from
    # GitHub to check its conversion with; offline that fails the whole conversion (RRDBNet). Seeded random data of
    # the same shape stands in: the script checks every conversion against ONNX Runtime itself.
    def offline_test_images():
        return np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32)

    import onnx2tf.onnx2tf as onnx2tf_main
    import onnx2tf.utils.common_functions as onnx2tf_common
    onnx2tf_main.download_test_image_data = onnx2tf_common.download_test_image_data = offline_test_images
    for p in map(Path, paths):
        out = work / model_key(p)
        out.mkdir(parents=True, exist_ok=True)
        log = out / "onnx2tf.log"
        source = out / p.name  # a copy: onnx2tf overwrites its input with onnxsim's output
        shutil.copyfile(p, source)
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            try:
                onnx2tf.convert(input_onnx_file_path=str(source), output_folder_path=str(out), non_verbose=True,
                                copy_onnx_input_output_names_to_tflite=True)
            except Float32Written:
                pass
            except BaseException as e:  # noqa: BLE001 - report and go on with the next model
                print(f"onnx2tf failed: {type(e).__name__}: {e}")
        print(f"onnx2tf {p.name}: {'ok' if (out / f'{p.stem}_float32.tflite').exists() else 'FAILED, see ' + str(log)}",
              flush=True)


def ops_left_to_tflite(ops, graph_outputs: set) -> set:
    """Indices of the nodes that the delegate did not take, from the node list after delegation.

    LiteRT keeps the replaced nodes in its node list and appends one DELEGATE node per partition, so a node runs
    on TFLite's own kernels when something outside a partition reads an output that no DELEGATE node produces:
    a DELEGATE node, a graph output, or (working back) another such node.
    """
    delegates = [op for op in ops if op["op_name"] == "DELEGATE"]
    produced = {t for op in delegates for t in op["outputs"]}
    read = collections.Counter(t for op in delegates for t in op["inputs"])
    nodes = [op for op in ops if op["op_name"] != "DELEGATE"]
    on_cpu = set()
    changed = True
    while changed:
        changed = False
        for op in nodes:
            if op["index"] in on_cpu:
                continue
            outs = [t for t in op["outputs"] if t not in produced]
            if any(t in graph_outputs or read[t] for t in outs):
                on_cpu.add(op["index"])
                read.update(t for t in op["inputs"])
                changed = True
    return on_cpu


class LiteRtRunner:
    """Feeds ONNX-layout (NCHW) inputs into the NHWC .tflite that onnx2tf writes, and the outputs back."""

    def __init__(self, interpreter):
        self.interpreter = interpreter
        self.in_details = interpreter.get_input_details()
        self.out_details = interpreter.get_output_details()

    @staticmethod
    def _match(details, names):
        """Each ONNX name's tensor detail: by name (onnx2tf keeps them, sometimes with a serving prefix or ':0')."""
        by_name = {}
        for d in details:
            bare = re.sub(r"^serving_default_|:\d+$", "", d["name"])
            by_name[bare] = d
        if all(n in by_name for n in names):
            return [by_name[n] for n in names]
        if len(details) == len(names) == 1:
            return list(details)
        raise RuntimeError(f"cannot match ONNX names {names} to tflite tensors {[d['name'] for d in details]}")

    def feed(self, inputs):
        for detail, (name, x) in zip(self._match(self.in_details, list(inputs)), inputs.items()):
            self.interpreter.set_tensor(detail["index"], to_nhwc(x, tuple(detail["shape"])))

    def invoke(self):
        self.interpreter.invoke()

    def outputs(self, onnx_shapes):
        return [to_nchw(self.interpreter.get_tensor(d["index"]), s) for d, s in zip(self.out_details, onnx_shapes)]


# onnx2tf turns 4D tensors NCHW -> NHWC, model inputs and outputs included, but may leave a model output in NCHW
# (it does for MI-GAN's image). Where both layouts fit a shape (C equal to H and W, as a C=64 layer's 64x64
# output) the NHWC default is taken: guessing from shapes alone made a correct conversion look wrong there.
def to_nhwc(x: np.ndarray, shape: tuple) -> np.ndarray:
    nhwc = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim == 4 else x
    if nhwc.shape == shape:
        return nhwc
    if x.shape == shape:
        return x
    raise RuntimeError(f"input of shape {x.shape} does not fit the converted model's {shape}")


def to_nchw(y: np.ndarray, onnx_shape: tuple) -> np.ndarray:
    nchw = np.moveaxis(y, -1, 1) if y.ndim == 4 else y
    if nchw.shape == onnx_shape:
        return nchw
    if y.shape == onnx_shape:
        return y
    raise RuntimeError(f"output of shape {y.shape} does not fit the ONNX model's {onnx_shape}")


class ExecuTorchRuntime:
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

    def pte_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}{self.variant}.pte"

    def info_path(self, path: Path) -> Path:
        return self.work / f"{model_key(path)}{self.variant}.json"

    def convert_all(self, paths):
        """Converts every model without a cached result (WORK/executorch/KEY.json, with KEY.pte if it converted).
        The child writes each result as it goes, and the model and stage it is on to a progress file. If it dies,
        or spends more than --convert-timeout seconds on one model, the model it was on is recorded as failed at
        that stage (with the exit status or the timeout) and the rest are converted by a new child."""
        todo = [p for p in dict.fromkeys(paths) if not self.info_path(p).exists()]
        progress = self.work / "_progress.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "_executorch", str(self.work.parent)]
        while todo:
            progress.unlink(missing_ok=True)
            child = subprocess.Popen(cmd + [str(p) for p in todo])
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

    def load(self, path: Path, threads: int):
        self.set_threads(threads)
        program = self.runtime.load_program(self.pte_path(path))
        return ExecuTorchRunner(program.load_method("forward"), self.torch)


def executorch_child(work: Path, paths: list[str]) -> int:
    """Converts each ONNX file to an ExecuTorch .pte lowered to XNNPACK and writes, per model, WORK/executorch/
    KEY.json: the exported program's aten ops, the ops of the lowered program (every executorch_call_delegate is
    one XNNPACK partition; any other call_function node runs on ExecuTorch's portable kernels), and the edge ops
    inside the partitions; or the stage that failed and the converter's message."""
    import onnx2torch
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    folder = work / "executorch"
    variant = ""
    if os.environ.get("BENCH_ET_STATIC_RESIZE") == "1":
        patch_onnx2torch_resize()
        variant = ".static-resize"

    def op_name(target):
        # OpOverload, EdgeOpOverload and the delegate call have name() ("aten::index.Tensor"); str() of an edge op
        # prints its whole schema, and the _op of an aten overload is a pybind function with no useful name.
        name = getattr(target, "name", None)
        return name().replace("::", ".") if callable(name) else str(target)

    def counts(graph):
        return collections.Counter(op_name(n.target) for n in graph.nodes if n.op == "call_function")

    def at(stage):
        (folder / "_progress.json").write_text(json.dumps({"model": str(path), "stage": stage}))
        return stage

    for path in map(Path, paths):
        key = model_key(path)
        info = {"model": str(path)}
        stage = at("onnx2torch.convert")
        print(f"executorch: converting {path.name}", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            module = onnx2torch.convert(str(path)).eval()
            inputs = tuple(torch.from_numpy(x) for x in onnx_inputs(path, 0).values())
            stage = at("torch.export.export")
            with torch.no_grad():
                exported = torch.export.export(module, inputs)
            info["aten_ops"] = dict(counts(exported.graph))
            stage = at("to_edge_transform_and_lower(XnnpackPartitioner)")
            edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
            program = edge.exported_program()
            lowered = counts(program.graph)
            inside = collections.Counter()
            for node in program.graph.nodes:
                if node.op == "get_attr" and str(node.target).startswith("lowered_module"):
                    inside += counts(getattr(program.graph_module, node.target).original_module.graph)
            outside = {k: v for k, v in lowered.items()
                       if k not in ("executorch_call_delegate", "<built-in function getitem>")}
            info.update(after_lowering=dict(lowered), xnnpack_partitions=lowered.get("executorch_call_delegate", 0),
                        not_delegated=outside, in_delegates=dict(inside), ops=dict(inside + collections.Counter(outside)))
            stage = at("to_executorch")
            (folder / f"{key}{variant}.pte").write_bytes(edge.to_executorch().buffer)
        except Exception as e:  # noqa: BLE001 - the reason is the finding
            message = str(e).strip().splitlines()[0][:400] if str(e).strip() else ""
            info.update(failed=f"{stage}: {type(e).__name__}: {message}", failed_stage=stage)
        info["convert_seconds"] = round(time.monotonic() - started, 1)
        (folder / f"{key}{variant}.json").write_text(json.dumps(info, indent=1))
    return 0


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


class ExecuTorchRunner:
    def __init__(self, method, torch):
        self.method = method
        self.torch = torch

    def feed(self, inputs):
        self.inputs = [self.torch.from_numpy(x) for x in inputs.values()]

    def invoke(self):
        self.result = self.method.execute(self.inputs)

    def outputs(self, onnx_shapes):
        return [r.numpy() for r in self.result]


RUNTIMES = {"ort": OrtRuntime, "litert": LiteRtRuntime, "executorch": ExecuTorchRuntime}


# ---------------------------------------------------------------------------------------------------------------
# Checking and timing


def compare(a_list, b_list):
    """Max abs error over all outputs, and that error relative to the original output's largest magnitude."""
    max_abs, scale = 0.0, 0.0
    for a, b in zip(a_list, b_list, strict=True):
        if a.shape != b.shape:
            raise RuntimeError(f"output shapes differ: {a.shape} vs {b.shape}")
        max_abs = max(max_abs, float(np.max(np.abs(a.astype(np.float64) - b))))
        scale = max(scale, float(np.max(np.abs(a))))
    return max_abs, max_abs / scale if scale > 0 else max_abs


def spread(seconds: list[float]) -> dict:
    """Median, min, p10, p90 and max of a list of run times, in ms."""
    ms = sorted(t * 1e3 for t in seconds)
    deciles = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else ms * 9
    return {"median": statistics.median(ms), "min": ms[0], "p10": deciles[0], "p90": deciles[-1], "max": ms[-1]}


def time_interleaved(a, b, budget: float, min_pairs: int, max_pairs: int, warmup: int = 2):
    """Times a() and b() A B A B, after `warmup` untimed pairs, until `budget` seconds have passed (at least
    min_pairs and at most max_pairs pairs). Returns each side's spread() and the number of pairs."""
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
    sa, sb = spread(times_a), spread(times_b)
    # With 1 thread, wall time close to this thread's CPU time means the run had a core to itself.
    sa["cpu_median"], sb["cpu_median"] = spread(cpu_a)["median"], spread(cpu_b)["median"]
    return sa, sb, len(times_a)


def onnx_output_shapes(path: Path):
    model = onnx.load(str(path), load_external_data=False)
    return [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output]


def measure(runtime, case: Case, threads: int, args, reference=None) -> dict:
    row = {"case": case.name, "runtime": runtime.name, "threads": threads}
    inputs = onnx_inputs(case.original, seed=1)
    shapes = onnx_output_shapes(case.original)
    runners = []
    for path in (case.original, case.rewritten):
        runner = runtime.load(path, threads)
        runner.feed(inputs)
        runner.invoke()
        runners.append(runner)
    outs = [r.outputs(shapes) for r in runners]
    row["max_abs"], row["max_rel"] = compare(outs[0], outs[1])
    if reference is not None:
        row["vs_onnx_max_abs"], row["vs_onnx_max_rel"] = compare(reference, outs[0])
    if not row["max_rel"] <= REL_TOLERANCE:
        row["error"] = f"original and rewritten disagree: max rel {row['max_rel']:.2e} > {REL_TOLERANCE:g}; not timed"
        return row
    row["loadavg_before"] = os.getloadavg()
    a, b, pairs = time_interleaved(runners[0].invoke, runners[1].invoke, args.budget, args.min_pairs, args.max_pairs)
    row["loadavg_after"] = os.getloadavg()
    row.update(original_ms=a["median"], rewritten_ms=b["median"], ratio=a["median"] / b["median"], pairs=pairs,
               original_spread=a, rewritten_spread=b)
    return row


def ort_reference(case: Case):
    """The original ONNX model's outputs from ONNX Runtime without graph optimisations, for the conversion check."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(str(case.original), options, providers=["CPUExecutionProvider"])
    return session.run(None, onnx_inputs(case.original, seed=1))


# ---------------------------------------------------------------------------------------------------------------
# Reports


def fmt_ops(ops: dict) -> str:
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def fmt_ms(v: float) -> str:
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def time_cell(row: dict, side: str) -> str:
    """'median [min-max]' in ms (the median alone for rows from JSON files written before spreads were kept)."""
    sp = row.get(f"{side}_spread")
    median = fmt_ms(row[f"{side}_ms"])
    return f"{median} [{fmt_ms(sp['min'])}-{fmt_ms(sp['max'])}]" if sp else median


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


LEFT_TO = {"litert": "TFLite's kernels", "executorch": "ExecuTorch's portable kernels"}


def runtime_heading(rt: str, block: dict, results: dict) -> str:
    before = block.get("machine_before") or results["machine"]
    after = block.get("machine_after") or results.get("machine_after") or before
    versions = ", ".join(f"{k} {v}" for k, v in block["versions"].items())
    cpu = f"{before['cpu_model']}, " if before.get("cpu_model") else ""
    return (f"{rt}, {versions}; {before['date_utc']} UTC, {cpu}load average {before['loadavg'][0]:.1f} before, "
            f"{after['loadavg'][0]:.1f} after")


def timing_table(block: dict) -> list[str]:
    """One row per case, each thread count's original and rewritten time (median [min-max] ms) and ratio side by
    side; then agreement, pairs, the 1-min load average before the case's first timing and after its last, and
    for a delegating runtime the ops each side leaves outside XNNPACK."""
    threads = sorted({r["threads"] for r in block["rows"]})
    delegating = any("xnnpack_partitions" in g for g in block["graphs"].values())
    head = ("| case |" + "".join(f" {t}T original ms | {t}T rewritten ms | {t}T ratio |" for t in threads)
            + " max abs (rel) | vs ONNX (rel) | pairs | load |")
    rule = "|---|" + "---:|---:|---:|" * len(threads) + "---:|---:|---:|---:|"
    if delegating:
        head += " outside XNNPACK: original; rewritten |"
        rule += "---|"
    lines = [head, rule]
    rows = collections.OrderedDict()
    for r in block["rows"]:
        rows.setdefault(r["case"], {})[r["threads"]] = r

    def outside(name):
        info = block["graphs"].get(name) if name else None
        if not info or "xnnpack_partitions" not in info:
            return "-"
        return fmt_ops(info["not_delegated"]) or "none"

    for case, by_t in rows.items():
        cells, agree, ref, pairs, loads = [], "-", "-", [], []
        for t in threads:
            r = by_t.get(t)
            if r is None:
                cells.append(" - | - | not run |")
                continue
            if "ratio" in r:
                cells.append(f" {time_cell(r, 'original')} | {time_cell(r, 'rewritten')} | **{r['ratio']:.2f}x** |")
                pairs.append(str(r["pairs"]))
            else:
                cells.append(f" - | - | {cell(r.get('error', 'not run'))} |")
            if "max_abs" in r:
                agree = f"{r['max_abs']:.1e} ({r['max_rel']:.0e})"
            if "vs_onnx_max_rel" in r:
                ref = f"{r['vs_onnx_max_abs']:.1e} ({r['vs_onnx_max_rel']:.0e})"
            if "loadavg_before" in r:
                loads.append((r["loadavg_before"][0], r["loadavg_after"][0]))
        load = f"{loads[0][0]:.1f}-{loads[-1][1]:.1f}" if loads else "-"
        line = f"| {case} |" + "".join(cells) + f" {agree} | {ref} | {'/'.join(pairs) or '-'} | {load} |"
        if delegating:
            first = next(iter(by_t.values()))
            line += f" {cell(outside(first.get('original_graph')))}; {cell(outside(first.get('rewritten_graph')))} |"
        lines.append(line)
    return lines


def case_notes(results: dict) -> list[str]:
    """What the tool did to each case's model, any respelling, and cases that could not be made."""
    lines = []
    for name, c in results.get("cases", {}).items():
        parts = []
        if "error" in c:
            parts.append(f"**not measured**: {c['error']}")
        if c.get("tool_rewrote") is not None:
            forms = ", ".join(f"{f} x{n}" for f, n in c.get("rewritten_forms", {}).items())
            parts.append(f"the tool rewrote {c['tool_rewrote']} upsampler(s) ({forms or 'none'}), kept {c['tool_kept']}"
                         + (f" ({'; '.join(c['kept_reasons'])})" if c.get("kept_reasons") else ""))
        if c.get("respelled"):
            check = (f"ONNX Runtime max abs vs the tool's output {c['respell_max_abs_vs_dcr']:.1e}"
                     if "respell_max_abs_vs_dcr" in c else c.get("respell_check", ""))
            parts.append(f"{c['depth_to_space_respelled']} DepthToSpace respelled as {c['respelled']} ({check})")
        if parts:
            lines.append(f"- `{name}`: " + "; ".join(parts))
    return lines


def markdown(results: dict) -> str:
    lines = []
    notes = case_notes(results)
    if notes:
        lines += ["### Cases\n"] + notes + [""]
    for rt, block in results["runtimes"].items():
        lines.append(f"### {rt}\n")
        lines.append(runtime_heading(rt, block, results) + "\n")
        lines += timing_table(block)
        lines.append("")
        lines.append("Converted graphs (op: count):\n")
        for name, info in block["graphs"].items():
            if "failed" in info:
                lines.append(f"- `{name}`: **did not convert**: {info['failed']}")
                continue
            extra = ""
            if "xnnpack_partitions" in info:
                left = fmt_ops(info["not_delegated"]) or "none"
                extra = (f"; XNNPACK partitions: {info['xnnpack_partitions']}, "
                         f"ops left to {LEFT_TO.get(rt, 'the runtime')}: {left}")
            lines.append(f"- `{name}`: {fmt_ops(info['ops'])}{extra}")
        if block.get("profiles"):
            lines.append("\nProfiles (ms per run by op type):\n")
            for name, prof in block["profiles"].items():
                if "failed" in prof:
                    top = prof["failed"]
                elif "percent_by_symbol" in prof:
                    top = f"{prof['ms_per_run']:.2f} ms/run; " + ", ".join(
                        f"{sym} {pct:.1f}%" for sym, pct in list(prof["percent_by_symbol"].items())[:12])
                else:
                    top = ", ".join(f"{op} {ms:.2f}" for op, ms in list(prof.items())[:12])
                lines.append(f"- `{name}`: {top}")
        lines.append("")
    return "\n".join(lines)


def run_child(runtime_name: str, work: Path, path: Path, threads: int, runs: int):
    """Runs one model `runs` times after a warm-up; with perf's control FIFO in the environment (see
    perf_profile), samples only those runs, not Python's start-up or the model's loading."""
    runtime = RUNTIMES[runtime_name](work)
    if runtime_name == "executorch" and not runtime.pte_path(path).exists():
        runtime.convert_all([path])
        runtime.prepare(path)
    runner = runtime.load(path, threads)
    runner.feed(onnx_inputs(path, seed=1))
    for _ in range(2):
        runner.invoke()
    ctl, ack = os.environ.get("BENCH_PERF_CTL"), os.environ.get("BENCH_PERF_ACK")

    def perf_control(command):
        if ctl:
            with open(ctl, "w") as c:
                c.write(command + "\n")
            with open(ack) as a:
                a.readline()

    perf_control("enable")
    start = time.perf_counter()
    for _ in range(runs):
        runner.invoke()
    elapsed = time.perf_counter() - start
    perf_control("disable")
    print(json.dumps({"ms_per_run": elapsed / runs * 1e3}))


def perf_profile(runtime_name: str, work: Path, path: Path, threads: int, runs: int) -> dict:
    """Where a runtime spends a run of `path`: Linux perf samples of the timed runs, by symbol (XNNPACK's
    microkernels and TFLite's kernels are named in ai-edge-litert's shared library)."""
    folder = Path(tempfile.mkdtemp(prefix="perf-", dir=work))
    ctl, ack, data = folder / "ctl", folder / "ack", folder / "perf.data"
    os.mkfifo(ctl)
    os.mkfifo(ack)
    env = dict(os.environ, BENCH_PERF_CTL=str(ctl), BENCH_PERF_ACK=str(ack))
    child = [sys.executable, str(Path(__file__).resolve()), "_run", runtime_name, str(work), str(path), str(threads),
             str(runs)]
    done = subprocess.run(["perf", "record", "-F", "999", "-D", "-1", f"--control=fifo:{ctl},{ack}", "-o", str(data),
                           "--"] + child, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"perf record failed: {done.stderr.strip()[-400:]}")
    ms = json.loads([l for l in done.stdout.splitlines() if l.startswith("{")][-1])["ms_per_run"]
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "symbol",
                             "--percent-limit", "1", "-q"], capture_output=True, text=True, check=True).stdout
    symbols = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.+?)(\s+-)*\s*$", line)
        if m:
            symbols[m.group(2)[:90]] = float(m.group(1))
    shutil.rmtree(folder)
    return {"ms_per_run": ms, "percent_by_symbol": symbols}


def benchmarks_tables(paths: list[str]) -> str:
    """BENCHMARKS.md's tables from one or more --json files: per runtime, the heading line (versions, date, CPU,
    load before and after) and timing_table()."""
    out = []
    for path in paths:
        results = json.loads(Path(path).read_text())
        for rt, block in results["runtimes"].items():
            out.append(runtime_heading(rt, block, results) + "\n")
            out += timing_table(block)
            out.append("")
    return "\n".join(out)


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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_onnx2tf":
        return onnx2tf_child(Path(argv[1]), argv[2:])
    if argv and argv[0] == "_executorch":
        return executorch_child(Path(argv[1]), argv[2:])
    if argv and argv[0] == "_tables":
        print(benchmarks_tables(argv[1:]))
        return 0
    if argv and argv[0] == "_run":
        return run_child(argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), int(argv[5]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtime", nargs="+", choices=list(RUNTIMES), required=True)
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--suite", nargs="*", choices=SUITES, default=[])
    parser.add_argument("--pair", nargs=2, action="append", metavar=("ORIGINAL", "REWRITTEN"),
                        help="a pair of your own (fixed input shapes); repeat for several")
    parser.add_argument("--channels", nargs="+", type=int, default=CHANNELS)
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    parser.add_argument("--layer-filter", help="only layers whose name matches this regex, e.g. 'k4s2p1op0_C64'")
    parser.add_argument("--migan-size", type=int, default=256)
    parser.add_argument("--migan-forms", nargs="+", choices=["a", "b", "a-img"],
                        help="a: stock deconvs; b: hand-written; a-img: (a) with its 3-channel image upsamplers "
                             "rewritten (default: a; a b with --suite issue17)")
    parser.add_argument("--dla-size", type=int, default=512)
    parser.add_argument("--sr-num-feat", type=int, default=32, help="RRDBNet (--suite sr): num_feat (default 32)")
    parser.add_argument("--sr-num-block", type=int, default=2, help="RRDBNet: RRDB blocks (default 2)")
    parser.add_argument("--sr-num-grow-ch", type=int, default=32, help="RRDBNet: num_grow_ch (default 32)")
    parser.add_argument("--sr-size", type=int, default=64, help="RRDBNet: input height and width (default 64)")
    parser.add_argument("--export-python", default="/usr/bin/python3",
                        help="the Python with PyTorch that runs examples/export_rrdbnet.py (default Debian's)")
    parser.add_argument("--rewrite-args", type=shlex.split, metavar="'ARGS'",
                        help="extra arguments for dwdeconv-rewrite, one shell-quoted string after '=', e.g. "
                             "--rewrite-args='--target executorch'; the rewritten files and case names get them as a "
                             "suffix, and the tool's kept upsamplers are reported, not warned about")
    parser.add_argument("--et-static-resize", action="store_true",
                        help="ExecuTorch: convert a nearest Resize with constant scales to F.interpolate with fixed "
                             "scales (onnx2torch's own Resize cannot pass torch.export, so without this no model with "
                             "a Resize converts); cached apart from stock conversions")
    parser.add_argument("--respell", choices=RESPELLINGS,
                        help="respell every DCR DepthToSpace of each rewritten model (pairs too) in this form before "
                             "converting, checked on ONNX Runtime (exact): a stand-in for the tool's coming "
                             "--target executorch")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed pairs per case (default 1)")
    parser.add_argument("--min-pairs", type=int, default=5)
    parser.add_argument("--max-pairs", type=int, default=200)
    parser.add_argument("--profile", action="store_true",
                        help="also profile each model case: ORT's profiler by op type; perf by symbol for the others")
    parser.add_argument("--profile-layers", help="also profile the layers whose name matches this regex")
    parser.add_argument("--profile-runs", type=int, default=10)
    parser.add_argument("--convert-jobs", type=int, default=1, help="onnx2tf conversions run in parallel")
    parser.add_argument("--convert-timeout", type=float, default=1800,
                        help="ExecuTorch: seconds one model's conversion may take before it is recorded as failed "
                             "at the stage it was in (default 1800; 0 for no limit)")
    parser.add_argument("--prepare-only", action="store_true", help="convert, list ops and check; do not time")
    parser.add_argument("--work", type=Path, default=Path("bench-runtimes-work"))
    parser.add_argument("--tool", type=Path, default=REPO / "build/cli/dwdeconv-rewrite")
    parser.add_argument("--make-examples", type=Path, default=REPO / "build/examples/dwdeconv-make-examples")
    parser.add_argument("--json", type=Path, help="write the results here (default WORK/results-RUNTIMES.json)")
    args = parser.parse_args(argv)
    if not args.suite and not args.pair:
        parser.error("nothing to measure: give --suite and/or --pair")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.et_static_resize:
        os.environ["BENCH_ET_STATIC_RESIZE"] = "1"

    cases = build_cases(args)
    names = graph_names(cases)
    results = {"machine": machine_state(), "command": [sys.executable] + sys.argv, "runtimes": {},
               "cases": {c.name: {"original": str(c.original), "rewritten": str(c.rewritten), **c.info,
                                  **({"error": c.error} if c.error else {})} for c in cases}}
    for case in cases:
        if case.error:
            print(f"{case.name}: {case.error}", file=sys.stderr)
    for rt_name in args.runtime:
        runtime = RUNTIMES[rt_name](args.work)
        runtime.jobs = args.convert_jobs
        runtime.timeout = args.convert_timeout
        block = {"versions": runtime.versions(), "machine_before": machine_state(), "rows": [], "graphs": {},
                 "profiles": {}}
        results["runtimes"][rt_name] = block
        paths = list(dict.fromkeys(p for c in cases if not c.error for p in (c.original, c.rewritten)))
        if hasattr(runtime, "convert_all"):
            try:
                runtime.convert_all(paths)
            except RuntimeError as e:
                print(f"{rt_name}: {e}", file=sys.stderr)
        for path in paths:
            try:
                block["graphs"][names[path]] = runtime.prepare(path)
            except Exception as e:  # noqa: BLE001 - a conversion that fails is a finding, reported in the table
                message = str(e) if isinstance(e, StageError) else f"{type(e).__name__}: {e}"
                block["graphs"][names[path]] = {"failed": message.removeprefix("did not convert: ")}
        for case in cases:
            base = {"case": case.name, "runtime": rt_name}
            if not case.error:
                base.update(original_graph=names[case.original], rewritten_graph=names[case.rewritten])
            failed = case.error or "; ".join(
                f"{side} did not convert: {block['graphs'][names[p]]['failed']}"
                for side, p in (("original", case.original), ("rewritten", case.rewritten))
                if "failed" in block["graphs"][names[p]])
            if failed:
                for threads in args.threads:
                    block["rows"].append(dict(base, threads=threads, error=failed))
                print(json.dumps(block["rows"][-1]), flush=True)
                continue
            try:
                reference = ort_reference(case) if rt_name != "ort" else None
            except Exception as e:  # noqa: BLE001
                reference = None
                print(f"{case.name}: no ONNX Runtime reference: {type(e).__name__}: {e}", file=sys.stderr)
            for threads in args.threads:
                try:
                    row = measure(runtime, case, threads, args if not args.prepare_only else _no_timing(args), reference)
                except Exception as e:  # noqa: BLE001
                    row = {"threads": threads, "error": f"{type(e).__name__}: {e}"}
                row = dict(base, **row)
                block["rows"].append(row)
                print(json.dumps(row), flush=True)
            if (args.profile and case.kind != "layer") or (args.profile_layers and re.search(args.profile_layers, case.name)):
                for path in (case.original, case.rewritten):
                    try:
                        if rt_name == "ort":
                            block["profiles"][names[path]] = runtime.profile(path, args.threads[0],
                                                                             onnx_inputs(path, 1), args.profile_runs)
                        else:
                            block["profiles"][names[path]] = perf_profile(rt_name, args.work, path, args.threads[0],
                                                                          args.profile_runs)
                    except Exception as e:  # noqa: BLE001
                        block["profiles"][names[path]] = {"failed": f"{type(e).__name__}: {e}"}
        block["machine_after"] = machine_state()
    results["machine_after"] = machine_state()
    out = args.json or args.work / f"results-{'-'.join(args.runtime)}.json"
    out.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"results: {out}")
    return 0


def graph_names(cases: list[Case]) -> dict:
    """Each model's name in the tables: its file stem, or stem@hash where two different files share a stem."""
    paths = list(dict.fromkeys(p for c in cases if not c.error for p in (c.original, c.rewritten)))
    stems = collections.Counter(p.stem for p in {p.resolve() for p in paths})
    return {p: p.stem if stems[p.stem] == 1 else f"{p.stem}@{model_key(p).rsplit('-', 1)[1][:6]}" for p in paths}


def _no_timing(args):
    quick = argparse.Namespace(**vars(args))
    quick.budget, quick.min_pairs, quick.max_pairs = 0.0, 1, 1
    return quick


if __name__ == "__main__":
    sys.exit(main())
