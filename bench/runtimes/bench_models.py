"""bench_runtimes.py's cases: the layer and hand-written models, the suites, and the tool's rewrite of each."""
from __future__ import annotations

import collections
import copy
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# bench_runtimes.py, which imports this, puts the repository's python/ on sys.path first.
from dwdeconv_rewrite.runtimes.common import StageError, compare, model_key, onnx_inputs

REPO = Path(__file__).resolve().parents[2]

# The executor's layer table (bench/layer_bench.cpp): kernel, stride, pad, output_padding.
GEOMETRIES = [(4, 2, 1, 0), (3, 2, 1, 1), (2, 2, 0, 0), (6, 3, 2, 1)]
CHANNELS = [16, 64, 256, 512]
SIZES = [32, 64, 128]


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


HANDWRITTEN_KINDS = ("nearest_mask", "nearest_conv_dw", "nearest_conv_dense", "nearest_conv_1x1")


def make_handwritten_model(kind, c, h) -> onnx.ModelProto:
    """One hand-written x2 upsampler, x [1, C, H, H] -> y [1, C, 2H, 2H], as bench/layer_bench.cpp builds it:
    nearest_mask is Resize, Mul by a [[1,0],[0,0]] mask, Pad [2,2,1,1], depthwise 4x4 Conv (k4 s2 p1);
    nearest_conv_dw / _dense is Resize then a 3x3 Conv with pads 1, depthwise or dense (C in, C out); nearest_conv_1x1
    is Resize then a dense 1x1 Conv."""
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
        k = 1 if kind == "nearest_conv_1x1" else 3
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, size=(c, c // group, k, k)).astype(np.float32), "w"))
        nodes = [resize, helper.make_node("Conv", ["u", "w", "b"], ["y"], name="conv", group=group, kernel_shape=[k, k],
                                          pads=[k // 2] * 4)]
    graph = helper.make_graph(nodes, f"{kind}_C{c}_H{h}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * h, 2 * h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def networked(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (one upsampler, x [1, C, H, H] -> y [1, C, H', W']) between two dense 1x1 Convs of C channels, as in a
    network: the upsampler's output is no graph output, its input no graph input (OpenVINO reorders a DepthToSpace
    that is the graph's output from NHWC to planar, and runs a lone depthwise deconvolution at f32 even at the bf16
    hint: the layer alone measures neither). Weights seeded by the graph's name."""
    g = model.graph
    c = g.input[0].type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(sum(g.name.encode()))
    out = copy.deepcopy(model)
    og = out.graph
    for node in og.node:  # the upsampler reads x0 and writes y0; the 1x1 Convs take x and y
        node.input[:] = ["x0" if n == "x" else n for n in node.input]
        node.output[:] = ["y0" if n == "y" else n for n in node.output]
    for name, src, dst in (("pre", "x", "x0"), ("post", "y0", "y")):
        og.initializer.extend([
            numpy_helper.from_array((rng.uniform(-1, 1, size=(c, c, 1, 1)) / np.sqrt(c)).astype(np.float32), f"{name}_w"),
            numpy_helper.from_array(rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32), f"{name}_b")])
        conv = helper.make_node("Conv", [src, f"{name}_w", f"{name}_b"], [dst], name=f"{name}_1x1", kernel_shape=[1, 1])
        if name == "pre":
            og.node.insert(0, conv)
        else:
            og.node.append(conv)
    og.name = "net_" + g.name
    onnx.checker.check_model(out)
    return out


# --suite networked: the targets' layers between two 1x1 Convs (networked()), C 3 (an RGB head) to 512, H 32 and 64.
NETWORKED_LAYERS = [(4, 2, 1, 0), (6, 3, 2, 1)]
NETWORKED_CHANNELS = [3, 16, 64, 256, 512]


# --suite reach: the depthwise upsamplers of shipped models that are not clean xs on both axes, each as one layer:
# name -> (kernel (kh, kw), strides, dilations, pads [t, l, b, r], output_padding, dense-in-value). GTCRN's decoder
# (dilated stride 1), DeepFilterNet3's ERB decoder and MobileStyleGAN's IDWT (strides differ per axis), FCN-8s's
# uncropped bilinear upsamplers (group 1, zero off the channel diagonal).
REACH_KINDS = {
    "s1d5": ((3, 3), (1, 1), (5, 1), (10, 1, 10, 1), (0, 0), False),
    "s1d1": ((3, 3), (1, 1), (1, 1), (2, 1, 2, 1), (0, 0), False),
    "s12k3": ((1, 3), (1, 2), (1, 1), (0, 1, 0, 1), (0, 1), False),
    "s21k2": ((2, 1), (2, 1), (1, 1), (0, 0, 0, 0), (0, 0), False),
    "s12k2": ((1, 2), (1, 2), (1, 1), (0, 0, 0, 0), (0, 0), False),
    "diag_k4s2": ((4, 4), (2, 2), (1, 1), (0, 0, 0, 0), (0, 0), True),
    "diag_k16s8": ((16, 16), (8, 8), (1, 1), (0, 0, 0, 0), (0, 0), True),
}
REACH_CHANNELS = {"diag_k4s2": [21, 64], "diag_k16s8": [21]}  # FCN's 21 classes; the others take --channels


def make_reach_model(kind, c, h) -> onnx.ModelProto:
    """One upsampler of REACH_KINDS, x [1, C, H, H] -> y, seeded by kind, C and H."""
    (kh, kw), strides, dilations, pads, op, diagonal = REACH_KINDS[kind]
    rng = np.random.default_rng(c * 7919 + h * 104729 + list(REACH_KINDS).index(kind))
    if diagonal:
        w = np.zeros((c, c, kh, kw), np.float32)
        w[range(c), range(c)] = rng.uniform(-0.5, 0.5, size=(c, kh, kw)).astype(np.float32)
        b = None
    else:
        w = rng.uniform(-0.5, 0.5, size=(c, 1, kh, kw)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, size=(c,)).astype(np.float32)
    out = [s * (h - 1) + o + (k - 1) * d + 1 - pb - pe
           for s, o, k, d, pb, pe in zip(strides, op, (kh, kw), dilations, pads[:2], pads[2:])]
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if b is not None else []), ["y"], name="up",
                            group=1 if diagonal else c, kernel_shape=[kh, kw], strides=list(strides),
                            dilations=list(dilations), pads=list(pads), output_padding=list(op))
    graph = helper.make_graph([node], f"reach_{kind}_C{c}_H{h}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c] + out)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_runtimes")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


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
# probe of 2026-12-01):
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
        outs = []
        for p in (rewritten, respelled):
            session = onnxruntime.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
            outs.append(dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds))))
        info["respell_max_abs_vs_dcr"], _ = compare(outs[0], outs[1])
        if info["respell_max_abs_vs_dcr"] != 0:
            respelled.unlink()
            raise StageError("respell", f"the {form} model differs from the tool's on ONNX Runtime by "
                                        f"{info['respell_max_abs_vs_dcr']:.2e}")
    sidecar.write_text(json.dumps(info))
    return info


# ---------------------------------------------------------------------------------------------------------------
# Suites

SUITES = ("layers", "handwritten", "migan", "dla", "sr", "targets", "reach", "networked")
# --suite targets: what the targets' rules are measured on, on every runtime. Layer names matched per suite.
ISSUE17_LAYERS = {"layers": r"^k4s2p1op0_|^k6s3p2op1_C\d+_H64$", "handwritten": r"^nearest_conv_(dw|dense)_"}


def export_rrdbnet(args, out: Path):
    """examples/export_rrdbnet.py with Debian's torch (--export-python), written under a temporary name first."""
    tmp = out.with_name(out.name + ".tmp.onnx")
    run_tool([args.export_python, REPO / "examples/export_rrdbnet.py", tmp, "--num-feat", args.sr_num_feat,
              "--num-block", args.sr_num_block, "--num-grow-ch", args.sr_num_grow_ch, "--size", args.sr_size,
              "--opset", "17"], "examples/export_rrdbnet.py")
    tmp.rename(out)


def _suite_patterns(args) -> tuple[set, dict]:
    """The suites to build and, per generated suite, its layer-name patterns (None: every layer); targets adds both."""
    suites = set(args.suite or [])
    patterns = {s: None for s in ("layers", "handwritten", "reach", "networked") if s in suites}  # None: every layer of that suite
    if "targets" in suites:
        for suite, pattern in ISSUE17_LAYERS.items():
            if suite not in patterns:
                patterns[suite] = [pattern]
        suites |= {"migan", "dla", "sr"}
    return suites, patterns


def _generated_case(work: Path, name: str, tag: str, make, layer: tuple | None = None) -> Case:
    """One generated model's case; make() builds its original only when WORK/models has none (a cache)."""
    original = work / f"{name}.onnx"
    if not original.exists():
        onnx.save(make(), str(original))
    return Case(name, original, work / f"{name}.xnn{tag}.onnx", "layer", layer)


def _generated_cases(args, work: Path, tag: str, patterns: dict) -> list[Case]:
    """The layers, handwritten, networked and reach cases, in that order; a model is made only if its name is wanted."""

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
                    if wanted("layers", name):
                        cases.append(_generated_case(work, name, tag, lambda: make_layer_model(c, h, k, s, p, op),
                                                     (c, h, k, s, p, op)))
    if "handwritten" in patterns:
        for kind in HANDWRITTEN_KINDS:
            for c in args.channels:
                for h in args.sizes:
                    name = f"{kind}_C{c}_H{h}"
                    if wanted("handwritten", name):
                        cases.append(_generated_case(work, name, tag, lambda: make_handwritten_model(kind, c, h)))
    if "networked" in patterns:
        inner = [(layer_name(c, h, *g), lambda c=c, h=h, g=g: make_layer_model(c, h, *g))
                 for g in NETWORKED_LAYERS for c in NETWORKED_CHANNELS for h in args.sizes if h <= 64]
        inner += [(f"{kind}_C{c}_H{h}", lambda kind=kind, c=c, h=h: make_handwritten_model(kind, c, h))
                  for kind in HANDWRITTEN_KINDS for c in NETWORKED_CHANNELS for h in args.sizes if h <= 64]
        for inner_name, make in inner:
            name = f"net_{inner_name}"
            if wanted("networked", name):
                cases.append(_generated_case(work, name, tag, lambda make=make: networked(make())))
    if "reach" in patterns:
        for kind in REACH_KINDS:
            for c in REACH_CHANNELS.get(kind, args.channels):
                for h in args.sizes:
                    name = f"reach_{kind}_C{c}_H{h}"
                    if wanted("reach", name):
                        cases.append(_generated_case(work, name, tag, lambda: make_reach_model(kind, c, h)))
    return cases


def _migan_cases(args, work: Path, tag: str, migan_forms: list[str]) -> list[Case]:
    """The MI-GAN-like forms by dwdeconv-make-examples (a-img: by the tool from form (a)); a form not made keeps its error."""
    cases = []
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
    return cases


def _made_model_case(name: str, original: Path, rewritten: Path, make) -> Case:
    """A model case whose original make() writes when it is missing; its failure is the case's error."""
    case = Case(name, original, rewritten, "model")
    if not original.exists():
        try:
            make()
        except StageError as e:
            case.error = str(e)
    return case


def _rewrite_case(args, work: Path, tag: str, case: Case):
    """Rewrites (and with --respell respells) one case in place, naming it after both; a failure is its error."""
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


def build_cases(args) -> list[Case]:
    """Every case of --suite and --pair, in the tables' order, each made, rewritten and respelled (cached in WORK)."""
    work = args.work / "models"
    work.mkdir(parents=True, exist_ok=True)
    suites, patterns = _suite_patterns(args)
    migan_forms = args.migan_forms or (["a", "b"] if "targets" in suites else ["a"])
    tag = rewrite_tag(args.rewrite_args)
    cases = _generated_cases(args, work, tag, patterns)
    if "migan" in suites:
        cases += _migan_cases(args, work, tag, migan_forms)
    if "dla" in suites:
        original = work / f"dla{args.dla_size}.onnx"
        cases.append(_made_model_case(
            f"dla{args.dla_size}", original, work / f"dla{args.dla_size}.xnn{tag}.onnx",
            lambda: run_tool([args.make_examples, "--dla", args.dla_size, "-o", original], "dwdeconv-make-examples")))
    if "sr" in suites:
        name = f"rrdbnet_f{args.sr_num_feat}b{args.sr_num_block}g{args.sr_num_grow_ch}_H{args.sr_size}"
        original = work / f"{name}.onnx"
        cases.append(_made_model_case(name, original, work / f"{name}.xnn{tag}.onnx",
                                      lambda: export_rrdbnet(args, original)))
    for i, (a, b) in enumerate(args.pair or []):
        cases.append(Case(f"pair{i}_{Path(b).stem}", Path(a), Path(b), "pair"))
    for case in cases:
        if not case.error:
            _rewrite_case(args, work, tag, case)
    return cases
