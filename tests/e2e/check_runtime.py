"""dwdeconv-rewrite --runtime RUNTIME end to end, with this interpreter as the runtime's Python.

Usage: check_runtime.py ort|litert|executorch|openvino|mnn|ncnn DWDECONV_REWRITE. On a model of two depthwise ConvTranspose x2
upsamplers it checks that an honest rewrite verifies and is timed on the runtime (report: runtime, versions, spread,
pairs; for ORT the per-upsampler table), that a rewrite with one planted weight error fails with exit 1, that
--min-speedup gates with exit 1 and writes nothing, that an interpreter without the packages is exit 2 naming them,
and (ONNX Runtime and OpenVINO: an op it does not know; ExecuTorch: a DCR DepthToSpace, which onnx2torch refuses)
that a model the runtime cannot take is exit 4 with the converter's stage and message, not a verification failure.
On small two-input, two-output models it checks that inputs and outputs are matched by name on the runtime: outputs
swapped in meaning fail (exit 1), inputs declared in another order with a negated result fail (exit 1), the same
values with inputs and outputs listed in another order come back under the right names from the runtime layer,
a runtime returning fewer outputs than the graph declares is a run error, and (LiteRT: an output onnx2tf drops;
ExecuTorch: a Split's outputs onnx2torch cannot name; OpenVINO: a name that is not UTF-8, which its Python API cannot
return) a converted model whose outputs cannot be named is exit 4; on OpenVINO names holding a newline and quotes are
matched and shown escaped.
An original with a nearest Resize is exit 4 on ExecuTorch (torch.export cannot trace onnx2torch's Resize), naming the
Resize and the runtimes that check such a model, and LiteRT, ONNX Runtime, OpenVINO and MNN each verify it (7r).
Graph inputs of other types than float32 (int64; bool, float16 and other integers) run on each runtime. A runtime
package that is installed but fails to import is check.py's `error import` answer and exit 5, and (ort,
litert, openvino, ncnn) the probe's too, which the binary reports as exit 2.
ncnn runs no target's rewritten join (pnnx reads executorch's Gather as a one-index select, and has no ncnn
layer for the xnnpack target's DCR DepthToSpace), so there the honest pair and the planted error are --compare pairs
of the original, and the rewrite's outputs are checked not to pass: the Gather join is not verified, the DCR one is
exit 4 naming pnnx (7n).
Exits 77 (ctest's skip), saying so, when this interpreter lacks the runtime's packages.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import report_archive  # beside this script: the suite's report archive

PACKAGES = {"ort": ["numpy", "onnx", "onnxruntime"],
            "litert": ["numpy", "onnx", "onnx2tf", "tensorflow", "ai_edge_litert"],
            "executorch": ["numpy", "onnx", "torch", "onnx2torch", "executorch"],
            "openvino": ["numpy", "onnx", "openvino"], "mnn": ["numpy", "onnx", "MNN"], "ncnn": ["numpy", "onnx", "ncnn", "pnnx"]}
VERSION_OF = {"ort": "onnxruntime", "litert": "ai-edge-litert", "executorch": "executorch", "openvino": "openvino", "mnn": "MNN",
              "ncnn": "ncnn"}
LABEL = {"ort": r"ONNX Runtime [0-9.]+ \(CPU provider\)", "litert": r"LiteRT [0-9.]+ \(XNNPACK delegate\)",
         "executorch": r"ExecuTorch [0-9.]+\S* \(XNNPACK delegate\)",
         # fp32 is asked for as the f32 hint, and the label is the precision the plugin reported back.
         "openvino": r"OpenVINO [0-9.]+ \(CPU plugin, f32 inference\)",
         "mnn": r"MNN [0-9.]+ \(CPU backend, precision high\)", "ncnn": r"ncnn [0-9.]+ \(CPU, pnnx [0-9.]+\)"}
# The target whose output the runtime converts: onnx2torch takes only CRD DepthToSpace. None: no target's (ncnn).
TARGET = {"ort": "xnnpack", "litert": "xnnpack", "executorch": "executorch", "openvino": "xnnpack", "mnn": "xnnpack", "ncnn": None}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}", flush=True)
    else:
        print(f"ok: {what}", flush=True)


def main():
    runtime, tool = sys.argv[1], sys.argv[2]
    missing = [p for p in PACKAGES[runtime] if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)}; set DWDECONV_{runtime.upper()}_PYTHON or "
              f"DWDECONV_PYTHON to an interpreter with them (docs/runtime-checks.md)")
        return 77
    import numpy as np
    import onnx
    from importlib.metadata import version
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    c = 16
    nodes = [helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["u1"], name="up1", group=c, kernel_shape=[4, 4],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["u1", "m"], ["v"], name="mix", kernel_shape=[1, 1]),
             helper.make_node("ConvTranspose", ["v", "w2"], ["y"], name="up2", group=c, kernel_shape=[4, 4],
                              strides=[2, 2], pads=[1, 1, 1, 1])]
    inits = {"w1": rng.uniform(-0.5, 0.5, (c, 1, 4, 4)), "b1": rng.uniform(-0.1, 0.1, c),
             "m": rng.uniform(-0.3, 0.3, (c, c, 1, 1)), "w2": rng.uniform(-0.5, 0.5, (c, 1, 4, 4))}
    graph = helper.make_graph(nodes, "two_up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 64, 64])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    with tempfile.TemporaryDirectory() as d:
        src, out, report = os.path.join(d, "model.onnx"), os.path.join(d, "out.onnx"), os.path.join(d, "r.json")
        onnx.save(model, src)
        # TMPDIR: the scratch folders the tool makes land here, so a test can see that none is left behind.
        env = dict(os.environ, DWDECONV_PYTHON=sys.executable, TMPDIR=d)

        def tool_run(*args, environ=env):
            reports = report_archive.watch([tool] + list(args))
            r = subprocess.run([tool] + [str(a) for a in args], capture_output=True, text=True, env=environ)
            report_archive.copy_written(reports)
            print(f"$ dwdeconv-rewrite {' '.join(map(str, args))}\n  exit {r.returncode}\n  " +
                  r.stderr.strip().replace("\n", "\n  "), flush=True)
            return r

        out2 = os.path.join(d, "out2.onnx")
        if TARGET[runtime] is None:
            rewrite_does_not_run(runtime, d, src, out, out2, report, tool_run)
        else:
            # 1. An honest rewrite, the interpreter from DWDECONV_PYTHON: verified and timed on the runtime.
            r = tool_run(src, "-o", out, "--target", TARGET[runtime], "--runtime", runtime, "--verify", "--bench", "--runs", 3,
                         "--report", report)
            check(r.returncode == 0, "an honest rewrite passes (exit 0)")
            check(os.path.exists(out), "the output is written")
            check(re.search(r"verified on " + LABEL[runtime] + r": max abs error", r.stderr), "the summary says where it verified")
            check(re.search(r"x (faster|\(slower\)|\(as fast\)) on " + LABEL[runtime], r.stderr), "the summary names the runtime timed")
            rep = json.load(open(report))
            check(rep["runtime"]["name"] == runtime, "report: runtime name")
            check(rep["runtime"]["python"] == sys.executable, "report: the interpreter from DWDECONV_PYTHON")
            check(rep["runtime"]["versions"].get(VERSION_OF[runtime]) == version(VERSION_OF[runtime]), "report: the version")
            check(rep["verify"]["passed"] and rep["verify"]["outputs"][0]["name"] == "y"
                  and rep["verify"]["outputs"][0]["max_abs_error"] < 1e-4, "report: y verified")
            bench = rep["bench"]
            check(bench["pairs"] == 3, "report: 3 pairs")
            for side in ("original", "rewritten"):
                check(0 < bench[f"{side}_min_ms"] <= bench[f"{side}_ms"] <= bench[f"{side}_max_ms"], f"report: {side} spread")
            check(abs(bench["speedup"] - bench["original_ms"] / bench["rewritten_ms"]) < 1e-3 * bench["speedup"],
                  "report: speedup is the ratio of the medians")
            rows = {u["name"]: u for u in rep["upsamplers"]}
            if runtime == "openvino":
                # OpenVINO names each layer after its ONNX node (or the graph output it writes): its PERF_COUNT profile
                # times each upsampler both ways, reorders included.
                check(sorted(rows) == ["up1", "up2"], "OpenVINO's profile gives one row per upsampler")
                check(all(u["original_ms"] > 0 and u["rewritten_ms"] > 0 for u in rows.values()), "each row is timed both ways")
                check("per upsampler on OpenVINO" in r.stderr, "the table is logged")
            if runtime == "ort":
                check(sorted(rows) == ["up1", "up2"], "ORT's profile gives one row per upsampler")
                check(rows.get("up1", {}).get("input_shape") == "1x16x16x16"
                      and rows.get("up2", {}).get("input_shape") == "1x16x32x32", "the rows' input shapes")
                check(all(u["original_ms"] > 0 and u["rewritten_ms"] > 0 for u in rows.values()), "each row is timed both ways")
                check("per upsampler on ONNX Runtime" in r.stderr, "the table is logged")

            # 2. One planted weight error in a phase Conv: exit 1, the output named.
            bad = onnx.load(out)
            conv = next(n for n in bad.graph.node if n.op_type == "Conv" and n.name != "mix")
            weight = next(t for t in bad.graph.initializer if t.name == conv.input[1])
            w = numpy_helper.to_array(weight).copy()
            w.flat[0] += 0.5
            weight.CopyFrom(numpy_helper.from_array(w, weight.name))
            onnx.save(bad, os.path.join(d, "bad.onnx"))
            r = tool_run(src, "--compare", os.path.join(d, "bad.onnx"), "--runtime", runtime, "--python", sys.executable,
                         "--report", report)
            check(r.returncode == 1, "a planted one-weight error fails (exit 1)")
            check("verification FAILED" in r.stderr, "the log says verification failed")
            check(json.load(open(report))["verify"]["passed"] is False, "report: not passed")
            r = tool_run(src, "--compare", out, "--runtime", runtime, "--python", sys.executable)
            check(r.returncode == 0, "the honest rewrite passes --compare")

            # 3. --min-speedup above any figure: exit 1, nothing written, the figure in the message and the report.
            r = tool_run(src, "-o", out2, "--target", TARGET[runtime], "--runtime", runtime, "--bench", "--runs", 2,
                         "--min-speedup", 1000, "--report", report)
            check(r.returncode == 1 and not os.path.exists(out2), "--min-speedup 1000 fails and writes nothing")
            check(re.search(r"--min-speedup 1000: the rewritten model ran [0-9.]+x as fast as the original on " + LABEL[runtime],
                            r.stderr), "the gate's message")
            rep = json.load(open(report))
            check(rep["min_speedup"] == 1000 and 0 < rep["bench"]["speedup"] < 1000, "report: the gate and the figure")

        # 4. An interpreter without the packages (no site-packages): exit 2, naming them and pip, nothing written.
        bare = os.path.join(d, "bare-python")
        with open(bare, "w") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' -S \"$@\"\n")
        os.chmod(bare, 0o755)
        os.remove(report)
        r = tool_run(src, "-o", out2, "--runtime", runtime, "--verify", "--python", bare, "--report", report)
        check(r.returncode == 2 and "lacks" in r.stderr and "-m pip install" in r.stderr, "missing packages: exit 2")
        check(not os.path.exists(out2) and json.load(open(report))["exit_code"] == 2,
              "missing packages: no model written; the report says exit 2, as after any usage error")

        # 5. ONNX Runtime (and OpenVINO's ONNX frontend) refuse an op they do not know: a conversion failure (exit 4),
        # not a mismatch.
        if runtime in ("ort", "openvino"):
            # Foo computes the graph output 'y' itself, so that both models declare the same outputs: a binary that
            # checks the interfaces by name first (eb9810b) would otherwise fail it there, before ORT sees the op.
            custom = onnx.load(out)
            for node in custom.graph.node:
                node.output[:] = ["y_before_foo" if o == "y" else o for o in node.output]
            custom.graph.node.append(helper.make_node("Foo", ["y_before_foo"], ["y"], domain="com.example", name="foo"))
            custom.opset_import.append(helper.make_opsetid("com.example", 1))
            onnx.save(custom, os.path.join(d, "custom.onnx"))
            r = tool_run(src, "--compare", os.path.join(d, "custom.onnx"), "--runtime", runtime)
            check(r.returncode == 4, f"{runtime} refusing a model is exit 4")
            if runtime == "ort":
                check(f"cannot verify {os.path.join(d, 'custom.onnx')}: cannot convert the rewritten model for ONNX Runtime"
                      in r.stderr and "onnxruntime.InferenceSession" in r.stderr and "com.example:Foo" in r.stderr,
                      "the stage and ORT's message")
            else:
                # The ONNX frontend refuses it in read_model, before compile_model: that stage, and OpenVINO's words.
                check(f"cannot verify {os.path.join(d, 'custom.onnx')}: cannot convert the rewritten model for OpenVINO"
                      in r.stderr and "openvino.read_model" in r.stderr and "Foo" in r.stderr,
                      "the stage and OpenVINO's message")
            check("verification failed" not in r.stderr, "not a verification failure")
            # Nothing is left behind after a converter failure: the scratch directory goes, what ORT said is in the
            # message and the rest behind -v.
            check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")] and "-v shows" in r.stderr,
                  "no scratch directory is left, and the message says -v shows the rest")
            if runtime == "ort":
                r = tool_run(src, "--compare", os.path.join(d, "custom.onnx"), "--runtime", runtime, "-v")
                check("the Python side's stderr:" in r.stderr, "-v shows what the Python side said")

        # 6. ONNX Runtime: --tune times each upsampler alone there and rewrites only those measured faster.
        if runtime == "ort":
            r = tool_run(src, "--dry-run", "--target", TARGET[runtime], "--runtime", runtime, "--tune", "--runs", 5,
                         "--report", report)
            check(r.returncode == 0, "--tune --dry-run passes")
            tune = {t["name"]: t for t in json.load(open(report))["tune"]}
            check(sorted(tune) == ["up1", "up2"], "one figure per candidate")
            for name, t in tune.items():
                check(t["original_ms"] > 0 and t["rewritten_ms"] > 0, f"{name} is timed both ways")
                check((t["decision"] == "rewritten") == (t["speedup"] >= 1), f"{name}'s decision follows its figure")
                check(re.search(rf'^(rewrite|keep   ) "{name}"', r.stdout, re.M).group(1).strip()
                      == ("rewrite" if t["decision"] == "rewritten" else "keep"), f"the plan says {name}'s decision")
                check(re.search(rf'tune: "{name}" \(1x16x(16x16|32x32)\) .* alone on ' + LABEL[runtime], r.stdout),
                      f"the plan shows {name}'s figure")

        # 7. ExecuTorch: onnx2torch refuses a DCR DepthToSpace; that is a conversion failure (exit 4), not a mismatch.
        if runtime == "executorch":
            r = tool_run(src, "-o", out2, "--target", "xnnpack", "--runtime", runtime, "--verify")
            check(r.returncode == 4, "a conversion failure is exit 4")
            check("cannot convert the rewritten model for ExecuTorch" in r.stderr and "onnx2torch" in r.stderr,
                  "the converter's stage and message")
            check("verification failed" not in r.stderr and not os.path.exists(out2), "not a verification failure")
            check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")], "no scratch directory is left")
        if runtime == "mnn":
            mnn_converter(d, src, tool, tool_run, env)
            phase_crops(d, tool_run)
        if runtime in ("ort", "litert"):
            one_d_upsampler(runtime, d, tool_run)
        if runtime == "ort":
            fused_activations(d, tool_run)
        if runtime in ("executorch", "litert", "ort", "openvino", "mnn"):
            nearest_resize(runtime, d, tool_run)
        names_not_positions(runtime, d, tool_run, env)
        broken_package(runtime, d, src, tool_run, env)
        typed_inputs(runtime, d, tool_run)
        symbolic_batch(runtime, d, tool, tool_run, env)
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print(f"all --runtime {runtime} checks passed")
    return 0


def processes_running(word, marker):
    """The pids of live processes whose command line holds `word` and `marker`, from /proc. The marker is a path
    only this run made (its scratch directory, which every converter it starts is given), so a converter that
    another test running at the same time (ctest -j) has started is not counted as this one's."""
    markers = {marker.encode(), os.path.realpath(marker).encode()}
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                line = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if word.encode() in line and any(m in line for m in markers) and state != "Z":
            found.append(int(entry))
    return found


def mnn_converter(d, src, tool, tool_run, env):
    """7. MNN: MNNConvert runs in a child process of the check, as the extension module _tools.mnnconvert, never the
    wheel's `mnnconvert` script (which pip-installs a logging SDK). An op MNN lacks, a file that is no ONNX model, a
    converter that crashes or hangs: StageError("MNNConvert"), exit 4 through the binary, and no file, scratch folder
    or converter process left; SIGINT mid-conversion leaves nothing either. Names with a newline, quotes and bytes
    that are not UTF-8 go through the conversion and come back matched by name."""
    import signal

    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    sys.path.insert(0, os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                              "..", "..", "python"))
    from pathlib import Path

    from dwdeconv_rewrite.runtimes import load_runtime, mnn_adapter
    from dwdeconv_rewrite.runtimes.common import StageError, onnx_inputs

    # Every converter this check starts has a path under `d` in its command line (the scratch folder it writes and
    # the model it reads): those are the ones that must be gone, whatever other tests run beside this one.
    def converters():
        return processes_running("_mnnconvert", d)

    def no_converter_left(what):
        time.sleep(0.2)
        check(not converters(), f"{what}: no converter process is left")

    # 7a. Hardmax: an ONNX op MNNConvert does not support ("These Op Not Support: ONNX::Hardmax").
    hardmax = os.path.join(d, "hardmax.onnx")
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"])], "hardmax",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, hardmax)
    print("-- 7. mnn: a model with an op MNNConvert lacks is a conversion failure", flush=True)
    r = tool_run(hardmax, "--compare", hardmax, "--runtime", "mnn")
    check(r.returncode == 4, "an op MNN lacks is exit 4")
    check("MNNConvert" in r.stderr and "Hardmax" in r.stderr, "the converter's stage and what it said (the op)")
    check("verification failed" not in r.stderr.lower(), "not a verification failure")
    check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")], "no scratch directory is left")
    no_converter_left("an op MNN lacks")

    # 7b. The adapter itself: a file that is not an ONNX model, a converter that crashes, one that hangs.
    work = Path(d) / "mnn-work"
    runtime = load_runtime("mnn", work)
    garbage = Path(d) / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07 not a model")

    def refused(path, what, expect):
        try:
            runtime.prepare(path)
            said = None
        except StageError as e:
            said = e
        check(said is not None and said.stage == "MNNConvert" and expect in str(said), f"{what}: StageError('MNNConvert', "
              f"...{expect}...) ({said})")
        check(sorted(os.listdir(work / "mnn")) == [], f"{what}: nothing is left in the cache ({os.listdir(work / 'mnn')})")
        no_converter_left(what)

    refused(garbage, "a file that is no ONNX model", "not onnx model")
    real_child_command = mnn_adapter.child_command
    try:
        # The stand-ins keep the adapter's arguments (`_mnnconvert`, the scratch folder, the model) in their command
        # line, as the real converter has them: a stand-in left running is then seen as this check's converter.
        mnn_adapter.child_command = lambda *a: ([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), "
                                                 "signal.SIGSEGV)", *map(str, a)], dict(os.environ))
        refused(Path(src), "a converter that crashes", "converter process died (signal 11)")
        mnn_adapter.child_command = lambda *a: ([sys.executable, "-c", "import time; time.sleep(60)", *map(str, a)],
                                                dict(os.environ))
        runtime.timeout = 1
        refused(Path(src), "a converter that hangs", "timed out after 1 s")
    finally:
        mnn_adapter.child_command = real_child_command
        runtime.timeout = 600

    # 7c. Nothing is pip-installed: a `pip` first on PATH records any call. The wheel's own console script, run the
    # same way, calls it (so the detector works); the adapter's conversion does not.
    fake = Path(d) / "fake-bin"
    fake.mkdir()
    calls = Path(d) / "pip-calls"
    for name in ("pip", "pip3"):
        (fake / name).write_text(f"#!/bin/sh\necho \"$0 $*\" >> '{calls}'\nexit 1\n")
        (fake / name).chmod(0o755)
    path_before = os.environ["PATH"]
    os.environ["PATH"] = f"{fake}{os.pathsep}{path_before}"
    try:
        script = Path(sys.executable).parent / "mnnconvert"
        if script.exists():
            subprocess.run([sys.executable, str(script), "-f", "ONNX", "--modelFile", src, "--MNNModel",
                            str(Path(d) / "script.mnn"), "--bizCode", "biz"], capture_output=True, timeout=300, cwd=d)
            check(calls.exists() and "aliyun-log-python-sdk" in calls.read_text(),
                  "the wheel's mnnconvert script pip-installs its logging SDK (the detector sees it)")
            calls.unlink(missing_ok=True)
        info = runtime.prepare(Path(src))
        check(info["ops"].get("DeconvolutionDepthwise") == 2, f"converted with the detector on PATH ({info['ops']})")
        check(not calls.exists(), "the adapter's conversion runs no pip")
    finally:
        os.environ["PATH"] = path_before
    check(importlib.util.find_spec("aliyun") is None, "no aliyun package is installed")

    # 7d. SIGINT while the binary's check child is converting: exit 130, no scratch folder, no process left.
    proc = subprocess.Popen([tool, hardmax, "--compare", hardmax, "--runtime", "mnn"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proc.poll() is None and not converters() and time.monotonic() < deadline:
        time.sleep(0.02)
    converting = bool(converters())
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    check(converting and proc.returncode == 130, f"SIGINT mid-conversion: exit 130 (converting: {converting}, got "
                                                 f"{proc.returncode})")
    check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")], "SIGINT: no scratch directory is left")
    no_converter_left("SIGINT mid-conversion")

    # 7e. Hostile names: a newline and quotes in the input's and an output's name, converted, run and matched by name.
    hostile = os.path.join(d, "hostile.onnx")
    xname, yname = "in\n'\"x", "out\"\n'y"
    graph = helper.make_graph([helper.make_node("Relu", [xname], [yname]), helper.make_node("Neg", [xname], ["z"])],
                              "hostile", [helper.make_tensor_value_info(xname, TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8, 8]) for n in ("z", yname)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, hostile)
    report = os.path.join(d, "hostile.json")
    r = tool_run(hostile, "--compare", hostile, "--runtime", "mnn", "--report", report)
    check(r.returncode == 0, "hostile names: converted, run and compared on MNN (exit 0)")
    names = sorted(o["name"] for o in json.load(open(report))["verify"]["outputs"]) if r.returncode == 0 else []
    check(names == sorted(["z", yname]), f"hostile names: both outputs compared by name ({names})")
    runner = runtime.load(Path(hostile), 1)
    feeds = onnx_inputs(Path(hostile), 2)
    runner.feed(feeds)
    runner.invoke()
    outs = runner.outputs()
    x = feeds[xname]
    check(list(outs) == ["z", yname] and np.array_equal(outs["z"], -x) and np.array_equal(outs[yname], np.maximum(x, 0)),
          "hostile names: each output comes back under its own name, the op's result")

    # 7f. An output name with bytes that are not UTF-8 (written over a same-length placeholder in the serialized model):
    # MNNConvert's protobuf refuses the file ("contains invalid UTF-8 data"): exit 4 naming the stage, nothing left.
    model.graph.output[1].name = model.graph.node[0].output[0] = "out\nPLACEHOLDER"
    data = model.SerializeToString()
    check(data.count(b"PLACEHOLDER") == 2, "not UTF-8: the placeholder is the output's name, twice")
    data = data.replace(b"PLACEHOLDER", b"\xff\xfe-bytes--\x80")
    with open(hostile, "wb") as f:
        f.write(data)
    r = tool_run(hostile, "--compare", hostile, "--runtime", "mnn")
    check(r.returncode == 4 and "MNNConvert" in r.stderr and "invalid UTF-8" in r.stderr,
          "a name that is not UTF-8: MNNConvert refuses the model, exit 4 naming the stage")
    check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")], "not UTF-8: no scratch directory is left")
    no_converter_left("a name that is not UTF-8")


def fused_activations(d, tool_run):
    """ONNX Runtime fuses a Conv with the Relu after it into one kernel, named after the Relu's output: the original's
    last Conv of a nearest + 3x3 Conv upsampler ('conv'), and the one Conv a stride-1 dilated depthwise ConvTranspose
    ('dil') is rewritten to. By name the table dropped those kernels (0.19x and '-' for layers measured faster); each
    row must time its upsampler with the Relu on both sides, or say why it cannot."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = 16
    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], name="resize", mode="nearest"),
             helper.make_node("Conv", ["r", "wc", "bc"], ["cv"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["cv"], ["a1"], name="act1"),
             helper.make_node("ConvTranspose", ["a1", "wd", "bd"], ["u"], name="dil", group=c, kernel_shape=[3, 3],
                              dilations=[2, 2], pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["u"], ["y"], name="act2")]
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, (c, c, 3, 3)).astype(np.float32), "wc"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, c).astype(np.float32), "bc"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (c, 1, 3, 3)).astype(np.float32), "wd"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, c).astype(np.float32), "bd")]
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src, out, report = (os.path.join(d, n) for n in ("fused.onnx", "fused.out.onnx", "fused.json"))
    onnx.save(model, src)
    r = tool_run(src, "-o", out, "--target", "xnnpack", "--runtime", "ort", "--bench", "--runs", 3, "--report", report)
    check(r.returncode == 0, "fused activations: the rewrite is timed (exit 0)")
    rows = {u["name"]: u for u in json.load(open(report))["upsamplers"]} if os.path.exists(report) else {}
    check(sorted(rows) == ["conv", "dil"], "fused activations: one row per upsampler")
    for name, act in (("conv", "act1"), ("dil", "act2")):
        row = rows.get(name, {})
        attributed = row.get("not_attributable") is None and row.get("timed_with") == [act] \
            and (row.get("original_ms") or 0) > 0 and (row.get("rewritten_ms") or 0) > 0
        said_why = bool(row.get("not_attributable")) and row.get("original_ms") is None and row.get("rewritten_ms") is None
        check(attributed or said_why, f"fused activations: '{name}' is timed with {act} both ways, or says why not: {row}")
        # ORT 1.32 fuses both Relus; every kernel is read from its values, so both rows are timed.
        check(attributed, f"fused activations: '{name}' is timed with the Relu ORT fused with it")
    check(re.search(r"timed with 'act1' both ways", r.stderr) and re.search(r"timed with 'act2' both ways", r.stderr),
          "fused activations: the logged table says what each row times besides its upsampler")


def one_d_upsampler(runtime, d, tool_run):
    """BigVGAN's UpSample1d as torch exports it (replicate Pad 5 + 5, a depthwise ConvTranspose1d k 12 s 2, x2, the crop
    [15:-15]) on [1, 24, 300]: --target litert folds it (form upsample1d: the crop, the x2 and the edge samples in the
    phases) and writes its 1-D join (Conv1d phases, Unsqueeze, Concat, Reshape to literal dims), which converts and
    computes the original on the runtime (onnx2tf moves the length axis last in
    the model's inputs and outputs: the adapter feeds and reads them by name in either layout), and a planted error
    in one phase fails there."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c, length = 24, 300
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad", mode="edge"),
             helper.make_node("ConvTranspose", ["xp", "w"], ["u"], name="up", group=c, kernel_shape=[12], strides=[2]),
             helper.make_node("Mul", ["u", "two"], ["g"], name="gain"),
             helper.make_node("Slice", ["g", "starts", "ends", "axes"], ["y"], name="crop")]
    inits = [numpy_helper.from_array(np.array([0, 0, 5, 0, 0, 5], np.int64), "pads"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (c, 1, 12)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array([15], np.int64), "starts"),
             numpy_helper.from_array(np.array([-15], np.int64), "ends"),
             numpy_helper.from_array(np.array([2], np.int64), "axes")]
    graph = helper.make_graph(nodes, "upsample1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, length])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2 * length])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src, out = os.path.join(d, "upsample1d.onnx"), os.path.join(d, "upsample1d.litert.onnx")
    onnx.save(model, src)
    r = tool_run(src, "-o", out, "--target", "litert", "--runtime", runtime, "--verify")
    check(r.returncode == 0 and os.path.exists(out), f"1-D: --target litert's rewrite verifies on {runtime}")
    written = onnx.load(out)
    ops = [n.op_type for n in written.graph.node]
    check("ConvTranspose" not in ops and "Squeeze" not in ops and ops.count("Unsqueeze") == 2, "1-D: no detour through 2-D")
    check("Pad" not in ops and "Mul" not in ops and ops.count("Slice") == 2,
          "1-D: the Pad, the gain and the crop are folded; the two Slices are x's edge samples")
    join = next((n for n in written.graph.node if n.output[0] == "y"), None)
    check(join is not None and join.op_type == "Reshape" and join.name == "crop", "1-D: the join writes the region's output")
    if join is not None:
        target = next(t for t in written.graph.initializer if t.name == join.input[1])
        check(numpy_helper.to_array(target).tolist() == [1, c, 2 * length], "1-D: the Reshape's dims are literal, L*s")
    convs = [n for n in written.graph.node if n.op_type == "Conv"]
    check(len(convs) == 2, "1-D: two phase Convs")
    bad = onnx.load(out)
    weight = next(t for t in bad.graph.initializer if t.name == convs[-1].input[1])
    w = numpy_helper.to_array(weight).copy()
    w.flat[3] += 0.5
    weight.CopyFrom(numpy_helper.from_array(w, weight.name))
    onnx.save(bad, os.path.join(d, "upsample1d.bad.onnx"))
    r = tool_run(src, "--compare", os.path.join(d, "upsample1d.bad.onnx"), "--runtime", runtime)
    check(r.returncode == 1 and "verification FAILED" in r.stderr, "1-D: a planted phase error fails on the runtime")


def phase_crops(d, tool_run):
    """StyleGAN3's x4 up path (upfirdn2d's reference code: zero insertion by Reshape / Pad / Reshape, a crop of 6 and 9
    by Slice, a depthwise 1x24 then 24x1 Conv): its phases start inside x, so each stage crops x before its Convs.
    MNN 3.6.1 crashed on that crop as a Pad with negative pads (and computed StyleGAN3's L13 wrongly), so --target mnn
    writes it as a Slice: the rewrite verifies on MNN, with no negative Pad in it."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c, n, s, k = 32, 12, 4, 24
    m = n * s - 6 - 9 - (k - 1)
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("Reshape", ["x", "s6"], ["r"], name="split"),
             helper.make_node("Pad", ["r", "ip"], ["z"], name="insert"),
             helper.make_node("Reshape", ["z", "s4"], ["u"], name="merge"),
             helper.make_node("Pad", ["u", "pp"], ["p"], name="pad"),  # torch writes F.pad's max(pad, 0): none here
             helper.make_node("Slice", ["p", "st", "en", "ax"], ["q"], name="crop"),
             helper.make_node("Conv", ["q", "f1"], ["v"], name="up1", group=c, kernel_shape=[1, k]),
             helper.make_node("Conv", ["v", "f2", "b"], ["y"], name="up2", group=c, kernel_shape=[k, 1])]
    taps = rng.uniform(-0.5, 0.5, k).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([1, c, n, 1, n, 1], np.int64), "s6"),
             numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, s - 1, 0, s - 1], np.int64), "ip"),
             numpy_helper.from_array(np.array([1, c, s * n, s * n], np.int64), "s4"),
             numpy_helper.from_array(np.zeros(8, np.int64), "pp"),
             numpy_helper.from_array(np.array([6, 6], np.int64), "st"),
             numpy_helper.from_array(np.array([-9, -9], np.int64), "en"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "ax"),
             numpy_helper.from_array(np.tile(taps.reshape(1, 1, 1, k), (c, 1, 1, 1)), "f1"),
             numpy_helper.from_array(np.tile(taps.reshape(1, 1, k, 1), (c, 1, 1, 1)), "f2"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, c).astype(np.float32), "b")]
    graph = helper.make_graph(nodes, "fir_pair_x4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, n, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, m, m])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    src, out = os.path.join(d, "fir_x4.onnx"), os.path.join(d, "fir_x4.mnn.onnx")
    onnx.save(model, src)
    r = tool_run(src, "-o", out, "--target", "mnn", "--runtime", "mnn", "--verify")
    check(r.returncode == 0 and os.path.exists(out) and "rewrote 1 of 1" in r.stderr,
          "crops: --target mnn rewrites StyleGAN3's x4 up path and it verifies on MNN")
    if os.path.exists(out):
        written = onnx.load(out)
        inits = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
        pads = [n for n in written.graph.node if n.op_type == "Pad"]
        check(not any((inits.get(p.input[1], np.zeros(1)) < 0).any() for p in pads if len(p.input) > 1),
              "crops: no Pad with negative pads")
        crops = [n for n in written.graph.node if n.op_type == "Slice" and (inits[n.input[1]] > 0).any()]
        check(len(crops) >= 2, "crops: each stage's crop is a Slice with a start inside x")


def nearest_resize(runtime, d, tool_run):
    """7r. An original with a nearest Resize (x2, constant scales, asymmetric and floor, as torch exports
    F.interpolate) before a depthwise 3x3 Conv: ExecuTorch cannot convert it (onnx2torch reads the scales at run time,
    which torch.export cannot trace), exit 4, and the message names the Resize and the runtimes that check such a model;
    each of those converts and verifies it (compared with itself), which is what the message claims."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    print("-- 7r. a nearest Resize in the original", flush=True)
    c = 8
    weights = np.random.default_rng(5).uniform(-0.3, 0.3, (c, 1, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["up"], name="nearest_up", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Conv", ["up", "w"], ["y"], name="smooth", group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "nearest_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 32, 32])],
                              [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
                               numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(d, "nearest_conv.onnx")
    onnx.save(model, path)
    r = tool_run(path, "--compare", path, "--runtime", runtime)
    if runtime != "executorch":
        check(r.returncode == 0 and "verification passed" in r.stderr, f"{runtime} converts and verifies a nearest Resize")
        return
    check(r.returncode == 4 and "cannot convert the original model for ExecuTorch" in r.stderr
          and "torch.export.export: GuardOnDataDependentSymNode" in r.stderr, "ExecuTorch: exit 4 at torch.export")
    check("the model's Resize 'nearest_up' is why" in r.stderr and "--runtime litert checks this one" in r.stderr
          and "ort, openvino and mnn convert it too" in r.stderr, "the message names the Resize and the runtimes that check it")


def rewrite_does_not_run(runtime, d, src, out, out2, report, tool_run):
    """1n-3n, 7n: a runtime that runs no target's rewritten join (ncnn). The pipeline (convert, run, compare by name,
    time, gate) is checked on --compare pairs of the original; the rewrite's own outputs must not pass: the default
    target's Gather join, which pnnx reads as a one-index select, is not verified (ncnn fails to run it, or its numbers
    differ), and the xnnpack target's DCR DepthToSpace, which pnnx has no ncnn layer for, is a conversion failure
    (exit 4, pnnx named), never a model that loads and computes something else."""
    import onnx
    from onnx import numpy_helper

    # 1n. The original against itself with an Identity before its output (the binary times no pair of equal models):
    # verified and timed on the runtime, by name.
    same = onnx.load(src)
    for node in same.graph.node:
        node.output[:] = ["y_before" if o == "y" else o for o in node.output]
    same.graph.node.append(onnx.helper.make_node("Identity", ["y_before"], ["y"], name="same"))
    same_path = os.path.join(d, "same.onnx")
    onnx.save(same, same_path)
    r = tool_run(src, "--compare", same_path, "--runtime", runtime, "--bench", "--runs", 3, "--report", report)
    check(r.returncode == 0, "the original against itself passes --compare (exit 0)")
    check(re.search(r"verify \(whole-model\): on " + LABEL[runtime], r.stderr) and "verification passed" in r.stderr
          and re.search(r"bench on " + LABEL[runtime] + r" \(1 thread", r.stderr), "the log says where it verified and timed")
    rep = json.load(open(report))
    check(rep["runtime"]["name"] == runtime and rep["runtime"]["python"] == sys.executable, "report: runtime and python")
    check(rep["verify"]["passed"] and rep["verify"]["outputs"][0]["name"] == "y", "report: y verified")
    check(rep["bench"]["pairs"] == 3, "report: 3 pairs")

    # 2n. One planted weight error in the original's first ConvTranspose: exit 1, verification failed.
    bad = onnx.load(src)
    weight = next(t for t in bad.graph.initializer if t.name == bad.graph.node[0].input[1])
    w = numpy_helper.to_array(weight).copy()
    w.flat[0] += 0.5
    weight.CopyFrom(numpy_helper.from_array(w, weight.name))
    onnx.save(bad, os.path.join(d, "bad.onnx"))
    r = tool_run(src, "--compare", os.path.join(d, "bad.onnx"), "--runtime", runtime, "--report", report)
    check(r.returncode == 1 and "verification FAILED" in r.stderr, "a planted one-weight error fails (exit 1)")
    check(json.load(open(report))["verify"]["passed"] is False, "report: not passed")

    # 3n. --min-speedup above any figure gates --compare too: exit 1, the figure in the message.
    r = tool_run(src, "--compare", same_path, "--runtime", runtime, "--bench", "--runs", 2, "--min-speedup", 1000)
    check(r.returncode == 1 and re.search(r"--min-speedup 1000: the rewritten model ran [0-9.]+x as fast as the original "
                                          r"on " + LABEL[runtime], r.stderr), "--min-speedup 1000 fails, saying the figure")

    # 7n. executorch's Gather + CRD join (the default's until it stopped joining): not verified, nothing written,
    # whatever way ncnn gets it wrong.
    r = tool_run(src, "-o", out2, "--target", "executorch", "--runtime", runtime, "--verify", "--report", report)
    rep = json.load(open(report)) if os.path.exists(report) else {}
    check(r.returncode in (1, 4) and "verification passed" not in r.stderr and not os.path.exists(out2)
          and not (rep.get("verify") or {}).get("passed"),
          "the Gather + CRD join is not reported as verified on ncnn (exit 1 or 4), nothing written")
    # The default and --target ncnn keep these ConvTransposes: the output is the input, which converts and runs there.
    for target in ("default", "ncnn"):
        out3 = os.path.join(d, f"kept-{target}.onnx")
        r = tool_run(src, "-o", out3, "--target", target, "--runtime", runtime, "--verify")
        check(r.returncode == 0 and "rewrote 0 of 2" in r.stderr, f"--target {target} keeps both ConvTransposes, exit 0")
        r = tool_run(src, "--compare", out3, "--runtime", runtime)
        check(r.returncode == 0 and "verification passed" in r.stderr,
              f"--target {target}'s output converts through pnnx and computes the original on ncnn")
    # The xnnpack target's DCR DepthToSpace: a conversion failure naming pnnx and the layer, not a mismatch.
    r = tool_run(src, "-o", out2, "--target", "xnnpack", "--runtime", runtime, "--verify")
    check(r.returncode == 4, "a DCR DepthToSpace is a conversion failure (exit 4)")
    check("cannot convert the rewritten model for ncnn" in r.stderr and "pnnx" in r.stderr
          and "'DepthToSpace'" in r.stderr, "the converter's stage and the layer ncnn lacks")
    check("verification failed" not in r.stderr.lower() and not os.path.exists(out2), "not a verification failure")
    check(not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")], "no scratch directory is left")


def names_not_positions(runtime, d, tool_run, env):
    """8. Outputs and inputs are matched by name on the runtime, never by position.

    The original takes [a, b] and returns [p, q], p = a + b and q = a - b: same shapes, different values, so only the
    names tell them apart (onnx2tf's TFLite converter returns a model's outputs sorted by name; ExecuTorch's program
    takes its inputs positionally)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, 4, 8, 8]

    def two_by_two(name, inputs, outputs, computes):
        """A model declaring graph inputs `inputs` and outputs `outputs` (in those orders), computing
        computes[output] = (op, x, y)."""
        nodes = [helper.make_node(op, [x, y], [out]) for out, (op, x, y) in computes.items()]
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in inputs],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in outputs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = os.path.join(d, f"{name}.onnx")
        onnx.save(model, path)
        return path

    honest = {"p": ("Add", "a", "b"), "q": ("Sub", "a", "b")}
    io = two_by_two("io", ["a", "b"], ["p", "q"], honest)

    # 8a. Outputs listed [q, p] with the meanings swapped (q = a + b, p = a - b): the binary compares by name, so this
    # must fail verification (exit 1). LiteRT paired its outputs (sorted by name: p, q) with the ONNX list [q, p] by
    # index, which swapped them back and passed (exit 0).
    swapped = two_by_two("io_outputs_swapped", ["a", "b"], ["q", "p"], {"q": ("Add", "a", "b"), "p": ("Sub", "a", "b")})
    print(f"-- 8a. {runtime}: a B whose outputs p and q are swapped in meaning (listed [q, p]) fails verification", flush=True)
    r = tool_run(io, "--compare", swapped, "--runtime", runtime)
    check(r.returncode == 1 and "verification FAILED" in r.stderr, "outputs swapped in meaning fail verification (exit 1)")

    # 8b. Inputs declared [b, a] and q negated (q = b - a): must fail (exit 1). ExecuTorch fed both models the tensors
    # in the original's order, so B's b got a's values and its b - a came out as a - b: it passed.
    negated = two_by_two("io_inputs_negated", ["b", "a"], ["p", "q"], {"p": ("Add", "a", "b"), "q": ("Sub", "b", "a")})
    print(f"-- 8b. {runtime}: a B declaring inputs [b, a] and computing q = b - a fails verification", flush=True)
    r = tool_run(io, "--compare", negated, "--runtime", runtime)
    check(r.returncode == 1 and "verification FAILED" in r.stderr, "inputs declared [b, a], q negated: fails (exit 1)")

    # 8c. The same computation with inputs declared [b, a] and outputs listed [q, p] must pass on every runtime. This
    # is asserted on the runtime layer only: `python -m dwdeconv_rewrite.runtimes check` is run directly (the command
    # the binary runs, on the module the binary would use) and each output file in its result.tsv is compared with
    # p = a + b and q = a - b computed here. Whether the binary then passes a B whose interface lists the same names
    # in another order is the C++ side's decision (it matches by name and warns about the order), not this layer's.
    reordered = two_by_two("io_reordered", ["b", "a"], ["q", "p"], honest)
    module = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                                   "python")
    menv = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [module, env.get("PYTHONPATH")])))
    rng = np.random.default_rng(26)
    values = {n: rng.uniform(-1, 1, shape).astype(np.float32) for n in ("a", "b")}
    expected = {"p": values["a"] + values["b"], "q": values["a"] - values["b"]}
    ins, work = os.path.join(d, "names-inputs"), os.path.join(d, "names-work")
    os.makedirs(ins, exist_ok=True)
    for k, (n, v) in enumerate(values.items()):
        with open(os.path.join(ins, f"{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    with open(os.path.join(ins, "inputs.json"), "w") as f:
        json.dump({"tensors": [{"name": n, "file": f"{k}.pb"} for k, n in enumerate(values)]}, f)

    def module_check(rewritten, out, code=None):
        """`python -m dwdeconv_rewrite.runtimes check` on (io, rewritten); `code` replaces `-m ...` (a wrapper).
        Returns (exit code, {(side, name): array}, error lines, output names per side in answer order)."""
        os.makedirs(out, exist_ok=True)
        argv = ["check", "--runtime", runtime, "--work", work, "--original", io, "--rewritten", rewritten,
                "--inputs", ins, "--out", out]
        cmd = [sys.executable] + (["-c", code] if code else ["-m", "dwdeconv_rewrite.runtimes"]) + argv
        r = subprocess.run(cmd, capture_output=True, text=True, env=menv)
        lines = [json.loads(l) for l in open(os.path.join(out, "result.jsonl")).read().splitlines()] \
            if os.path.exists(os.path.join(out, "result.jsonl")) else []
        outs = {(l["side"], l["name"]): np.load(l["file"]) for l in lines if l["kind"] == "output"}
        order = {side: [l["name"] for l in lines if l["kind"] == "output" and l["side"] == side] for side in ("original", "rewritten")}
        errors = ["\t".join([l["kind"], l["stage"], l.get("side", ""), l["message"]]) for l in lines if l["kind"] == "error"]
        print(f"$ python -m dwdeconv_rewrite.runtimes check --original io.onnx --rewritten {os.path.basename(rewritten)}"
              f"{' (wrapped)' if code else ''}\n  exit {r.returncode}; outputs {order}; errors {errors}"
              + ("" if r.returncode in (0, 4) else "\n  " + r.stderr.strip()[-1500:].replace("\n", "\n  ")), flush=True)
        return r.returncode, outs, errors, order

    print(f"-- 8c. {runtime}: inputs declared [b, a] and outputs listed [q, p], same values: each output file holds the "
          "value of the output it names", flush=True)
    code, outs, errors, order = module_check(reordered, os.path.join(d, "names-out"))
    check(code == 0 and not errors, "the runtime layer runs a B with its inputs and outputs in another order")
    check(order == {"original": ["p", "q"], "rewritten": ["q", "p"]}, "one output line per graph output, in graph order")
    for side in ("original", "rewritten"):
        for n, want in expected.items():
            got = outs.get((side, n))
            check(got is not None and got.shape == want.shape and float(np.max(np.abs(got - want))) < 1e-5,
                  f"{side} '{n}' is {'a + b' if n == 'p' else 'a - b'} on {runtime}")

    # 8d. check.py itself: a runtime that returns fewer outputs than the graph declares is a run error (exit 4, an
    # `error run` line), not a check of the outputs it did return. The adapter's runner is wrapped to drop its last
    # output (the conversions are the ones 8c cached); before, check.py zipped the lists and wrote one output line.
    # The adapter's outputs_impl hook is wrapped, so the check that refuses it is base.Runner.outputs()'s.
    wrapper = """
import sys
import dwdeconv_rewrite.runtimes.check as check
real = check.load_runtime
def short(runner):
    # The adapter's hook drops its last output; base.Runner.outputs() checks what the hook returned.
    hook = runner.outputs_impl
    runner.outputs_impl = lambda: dict(list(hook().items())[:-1])
    return runner
class Runtime:
    def __init__(self, rt): self.rt = rt
    def __getattr__(self, k): return getattr(self.rt, k)
    def __setattr__(self, k, v): setattr(self.rt, k, v) if k != "rt" else object.__setattr__(self, k, v)
    def load(self, *a, **k): return short(self.rt.load(*a, **k))
check.load_runtime = lambda name, work: Runtime(real(name, work))
sys.exit(check.check(sys.argv[2:]))
"""
    print(f"-- 8d. {runtime}: a runner that returns one output fewer than the graph declares is a run error", flush=True)
    code, outs, errors, _ = module_check(io, os.path.join(d, "names-out-short"), code=wrapper)
    check(code == 4 and errors and errors[0].startswith("error\trun\toriginal\t") and "declares" in errors[0],
          "fewer outputs than the graph declares: exit 4, an error run line naming them")

    # 8e. Real cases of the same. onnx2tf drops an output it cannot find under its ONNX name ('y:0': it looks the
    # layer up as 'y:0', stores it as 'y__0') and names the remaining ones by position; LiteRT then returned one
    # output, check.py wrote one line, and the binary compared only 'z'. Now it is exit 4 (the model failed to
    # run), or, should a later onnx2tf keep the output, a pass that compares both.
    if runtime == "litert":
        colon = two_by_two("colon", ["a", "b"], ["z", "y:0"], {"y:0": ("Add", "a", "b"), "z": ("Mul", "a", "b")})
        report = os.path.join(d, "colon.json")
        print("-- 8e. litert: an output named 'y:0' that onnx2tf drops is refused, not left out of the check", flush=True)
        r = tool_run(colon, "--compare", colon, "--runtime", runtime, "--report", report)
        verified = [o["name"] for o in json.load(open(report))["verify"]["outputs"]] if r.returncode == 0 else []
        check((r.returncode == 4 and "failed to run on" in r.stderr and "'y:0'" in r.stderr)
              or (r.returncode == 0 and sorted(verified) == ["y:0", "z"]), "an output onnx2tf drops: exit 4, not a pass")
    # OpenVINO keeps the ONNX names on its ports (get_names()), which the runner matches: names holding a newline,
    # quotes and a workflow command are matched by name (swapped meanings fail, the same model passes) and shown
    # escaped; a name that is not UTF-8, which OpenVINO's Python API cannot return, is refused (exit 4), not paired
    # with a port by position.
    if runtime == "openvino":
        # OpenVINO 2026.4 lists a compiled model's ports in the ONNX graph's order, so that pairing by position would
        # pass 8a-8c by luck: here its ports are handed to the runner reversed, and each output must still hold the
        # value of the output it names.
        reversed_ports = """
import sys
import dwdeconv_rewrite.runtimes.check as check
import dwdeconv_rewrite.runtimes.openvino_adapter as adapter
real = adapter._port_by_name
adapter._port_by_name = lambda ports, names, what: real(list(ports)[::-1], names, what)
sys.exit(check.check(sys.argv[2:]))
"""
        print("-- 8e. openvino: the compiled model's ports in reverse order still meet their ONNX names", flush=True)
        code, outs, errors, order = module_check(reordered, os.path.join(d, "names-out-reversed"), code=reversed_ports)
        check(code == 0 and not errors, "ports reversed: the runtime layer runs")
        for side in ("original", "rewritten"):
            for n, want in expected.items():
                got = outs.get((side, n))
                check(got is not None and float(np.max(np.abs(got - want))) < 1e-5,
                      f"ports reversed: {side} '{n}' is {'a + b' if n == 'p' else 'a - b'}")
        a, b, p, q = 'a"\n', "b'", "p\n::error::forged", 'q"\r'
        hostile = two_by_two("hostile", [a, b], [p, q], {p: ("Add", a, b), q: ("Sub", a, b)})
        hostile_swapped = two_by_two("hostile_swapped", [a, b], [p, q], {p: ("Sub", a, b), q: ("Add", a, b)})
        print("-- 8e. openvino: inputs and outputs named with a newline, quotes and a workflow command", flush=True)
        r = tool_run(hostile, "--compare", hostile, "--runtime", runtime)
        check(r.returncode == 0 and "verification passed" in r.stderr, "hostile names: the same model passes (exit 0)")
        check(not any(line.lstrip().startswith("::") for line in r.stderr.splitlines()) and "\r" not in r.stderr
              and "p\\x0a::error::forged" in r.stderr, "hostile names: shown escaped, no forged line")
        r = tool_run(hostile, "--compare", hostile_swapped, "--runtime", runtime)
        check(r.returncode == 1 and "verification FAILED" in r.stderr, "hostile names: outputs swapped in meaning fail")
        # The same model with a byte 0xff in an input's and an output's name (protobuf's length prefixes unchanged).
        raw = open(hostile, "rb").read()
        check(raw.count(b"b'") >= 2 and raw.count(b'q"') >= 2, "the names to corrupt are in the file")
        not_utf8 = os.path.join(d, "not_utf8.onnx")
        with open(not_utf8, "wb") as f:
            f.write(raw.replace(b"b'", b"b\xff").replace(b'q"', b"q\xfe"))
        print("-- 8e. openvino: an input and an output whose names are not UTF-8", flush=True)
        r = tool_run(not_utf8, "--compare", not_utf8, "--runtime", runtime)
        check(r.returncode == 4 and "not UTF-8" in r.stderr and "failed to run on OpenVINO" in r.stderr,
              "names that are not UTF-8: exit 4, saying OpenVINO cannot return them")
        # (The log decoded as text: a raw 0xff byte in it would have raised in subprocess.run.)
        check("b'b\\xff'" in r.stderr and not [n for n in os.listdir(d) if n.startswith("dwdeconv-runtime-")],
              "names that are not UTF-8: the name shown escaped, no scratch directory left")
    # onnx2torch returns all the outputs of a node as one value: a Split whose outputs are the graph's outputs in
    # another order came back in the node's order and was named in the graph's. Now the conversion refuses (exit 4).
    if runtime == "executorch":
        split = os.path.join(d, "split.onnx")
        graph = helper.make_graph(
            [helper.make_node("Split", ["a", "sizes"], ["s0", "s1"], axis=1)], "split",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 8, 8]) for n in ("s1", "s0")],
            [numpy_helper.from_array(np.array([2, 2], np.int64), "sizes")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, split)
        print("-- 8e. executorch: a Split's outputs listed against the node's order are refused at conversion", flush=True)
        r = tool_run(split, "--compare", split, "--runtime", runtime)
        check(r.returncode == 4 and "cannot be told apart by name" in r.stderr, "outputs onnx2torch cannot name: exit 4")


def typed_inputs(runtime, d, tool_run):
    """10. Graph inputs of other element types than float32: y = x + Cast(k0) + Cast(k1) ..., x float32 and the k's
    int64, then bool, float16, int32, uint8, int8 and int16 too, each model compared with itself, the integer inputs
    given as TensorProto files (--input). ExecuTorch traced every input with float32 values from
    common.onnx_inputs(), so its program refused the int64 one at run time (`method->set_inputs() ... failed with
    error 0x12`): the example inputs now follow the declared types. LiteRT refused the float16 input, which onnx2tf
    makes a float32 one: it is now fed the same values as float32."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, 4, 8, 8]
    rng = np.random.default_rng(10)
    kinds = {"int64": TensorProto.INT64, "bool": TensorProto.BOOL, "float16": TensorProto.FLOAT16,
             "int32": TensorProto.INT32, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "int16": TensorProto.INT16}
    cases = [["int64"], list(kinds)]
    for types in cases:
        name = "typed_" + "_".join(types)
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
        nodes, total, given = [], "x", []
        for k, t in enumerate(types):
            inputs.append(helper.make_tensor_value_info(f"k{k}", kinds[t], shape))
            nodes += [helper.make_node("Cast", [f"k{k}"], [f"c{k}"], to=TensorProto.FLOAT),
                      helper.make_node("Add", [total, f"c{k}"], [f"s{k}"])]
            total = f"s{k}"
            if t != "float16":  # the binary seeds float inputs itself, and asks for the others' values
                values = rng.integers(0, 2, shape).astype(bool) if t == "bool" else rng.integers(0, 4, shape).astype(t)
                pb = os.path.join(d, f"{name}_k{k}.pb")
                with open(pb, "wb") as f:
                    f.write(numpy_helper.from_array(values, f"k{k}").SerializeToString())
                given += ["--input", f"k{k}={pb}"]
        nodes.append(helper.make_node("Identity", [total], ["y"]))
        graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = os.path.join(d, f"{name}.onnx")
        onnx.save(model, path)
        print(f"-- 10. {runtime}: graph inputs float32 and {', '.join(types)}", flush=True)
        r = tool_run(path, "--compare", path, "--runtime", runtime, *given)
        if runtime == "ncnn":
            # pnnx has no ncnn layer for a Cast (it keeps it as Tensor.to), and takes no bool input: not convertible,
            # said so, never run wrong.
            said = "is BOOL, which pnnx takes no input of" if "bool" in types else "'Tensor.to'"
            check(r.returncode == 4 and said in r.stderr and "pnnx" in r.stderr,
                  f"a model of {', '.join(types)} graph inputs is a conversion failure on ncnn saying why (exit 4)")
            continue
        check(r.returncode == 0 and "verification passed" in r.stderr,
              f"a model with {', '.join(types)} graph inputs runs on {runtime} (exit 0)")
    # The seeded example inputs (common.onnx_inputs, which the converters trace with and the benchmarks feed) have
    # the declared types; a type they are not made for is a StageError naming the input.
    module = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                                   "python")
    sys.path.insert(0, module)
    try:
        from dwdeconv_rewrite.runtimes.common import StageError, onnx_inputs
    finally:
        sys.path.remove(module)
    feeds = onnx_inputs(path, 0)
    check({n: str(v.dtype) for n, v in feeds.items()} == dict(x="float32", **{f"k{k}": t for k, t in enumerate(kinds)})
          and all(v.shape == tuple(shape) for v in feeds.values()), "onnx_inputs gives each input its declared type")
    model.graph.input[1].type.tensor_type.elem_type = TensorProto.BFLOAT16
    onnx.save(model, path)
    try:
        onnx_inputs(path, 0)
        refused = ""
    except StageError as e:
        refused = str(e)
    check("graph input 'k0' is BFLOAT16" in refused and refused.startswith("example inputs: "),
          f"onnx_inputs refuses a bfloat16 input, naming it ({refused})")


def symbolic_batch(runtime, d, tool, tool_run, env):
    """11. A dynamic-batch export (input and output batch a dim_param "N"), run at --input-shape x:1,...: verified and
    gated on every runtime, through the binary and through the Action's speed gate. LiteRT's adapter read the output's
    "N" as 0 and refused the converted model's output of batch 1 ("does not fit the ONNX model's (0, 8, 32, 32)"),
    exit 4 on every such model, where ONNX Runtime and ExecuTorch passed. A planted weight error must still fail: the
    batch that any length fits is not a check that anything fits."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = 8
    rng = np.random.default_rng(11)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", group=c, kernel_shape=[4, 4],
                            strides=[2, 2], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "dynamic_batch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, 32, 32])],
                              [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (c, 1, 4, 4)).astype(np.float32), "w"),
                               numpy_helper.from_array(rng.uniform(-0.1, 0.1, c).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src, out, report = (os.path.join(d, f"dynamic-batch{k}") for k in (".onnx", ".out.onnx", ".json"))
    onnx.save(model, src)
    print(f"-- 11. {runtime}: a model whose batch is the dim_param N, at --input-shape x:1,{c},16,16", flush=True)
    if TARGET[runtime] is None:
        # No target's output runs here (rewrite_does_not_run): the original against itself, then against a copy with
        # one planted weight error, both at the --input-shape the binary fixes the model to before the runtime sees it.
        r = tool_run(src, "--compare", src, "--runtime", runtime, "--input-shape", f"x:1,{c},16,16", "--report", report)
        check(r.returncode == 0 and "verification passed" in r.stderr, f"a dim_param batch verifies on {runtime} (exit 0)")
        bad = onnx.load(src)
        weight = bad.graph.initializer[0]
        w = numpy_helper.to_array(weight).copy()
        w.flat[0] += 0.5
        weight.CopyFrom(numpy_helper.from_array(w, weight.name))
        onnx.save(bad, os.path.join(d, "dynamic-batch-bad.onnx"))
        r = tool_run(src, "--compare", os.path.join(d, "dynamic-batch-bad.onnx"), "--runtime", runtime,
                     "--input-shape", f"x:1,{c},16,16")
        check(r.returncode == 1 and "verification FAILED" in r.stderr, "a planted weight error still fails (exit 1)")
        print(f"   (the Action's speed gate rewrites with a target: none runs on {runtime}, so it is not run here)")
        return
    r = tool_run(src, "-o", out, "--target", TARGET[runtime], "--runtime", runtime, "--verify",
                 "--input-shape", f"x:1,{c},16,16", "--report", report)
    check(r.returncode == 0 and "verification passed" in r.stderr, f"a dim_param batch verifies on {runtime} (exit 0)")
    rewritten = onnx.load(out) if os.path.exists(out) else onnx.ModelProto()
    check([n.op_type for n in rewritten.graph.node].count("ConvTranspose") == 0 and len(rewritten.graph.node) > 1,
          "the ConvTranspose was rewritten (so its phase Convs ran on the runtime)")
    check(rewritten.graph.output and rewritten.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "N",
          "the output keeps its batch dim_param")
    rep = json.load(open(report)) if os.path.exists(report) else {}
    check((rep.get("verify") or {}).get("passed") is True and rep.get("runtime", {}).get("name") == runtime,
          f"report: verified on {runtime}")
    if rewritten.graph.node:
        conv = next(n for n in rewritten.graph.node if n.op_type == "Conv")
        weight = next(t for t in rewritten.graph.initializer if t.name == conv.input[1])
        w = numpy_helper.to_array(weight).copy()
        w.flat[0] += 0.5
        weight.CopyFrom(numpy_helper.from_array(w, weight.name))
        onnx.save(rewritten, os.path.join(d, "dynamic-batch-bad.onnx"))
        r = tool_run(src, "--compare", os.path.join(d, "dynamic-batch-bad.onnx"), "--runtime", runtime,
                     "--input-shape", f"x:1,{c},16,16")
        check(r.returncode == 1 and "verification FAILED" in r.stderr, "a planted weight error still fails (exit 1)")

    # The Action's speed gate on the same model, its shape from a sidecar: the gate runs compare(runtime=...) on this
    # interpreter (action/run.py's own), and a gate of 0.01x passes whatever the timing.
    models = os.path.join(d, "dynamic-batch-models")
    os.makedirs(models, exist_ok=True)
    onnx.save(model, os.path.join(models, "m.onnx"))
    with open(os.path.join(models, "m.input-shapes"), "w") as f:
        f.write(f"x=1x{c}x16x16\n")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    module = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(source, "python")
    aenv = {k: v for k, v in env.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    aenv.update(INPUT_MODELS="dynamic-batch-models/m.onnx", INPUT_TARGET=TARGET[runtime], INPUT_RUNTIME=runtime, INPUT_MIN_SPEEDUP="0.01",
                INPUT_OUTPUT_DIR="dynamic-batch-action-out",
                INPUT_REPORT=os.path.join(d, "dynamic-batch-action.json"), INPUT_ARGS="--runs 2",
                DWDECONV_REWRITE=tool, PYTHONPATH=os.pathsep.join(filter(None, [module, env.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, os.path.join(source, "action", "run.py")], capture_output=True, text=True,
                       env=aenv, cwd=d)
    print(f"$ action/run.py (min-speedup 0.01 on {runtime})\n  exit {r.returncode}\n  "
          + (r.stdout + r.stderr).strip()[-2000:].replace("\n", "\n  "), flush=True)
    gate = {}
    if os.path.exists(aenv["INPUT_REPORT"]):
        gate = (json.load(open(aenv["INPUT_REPORT"])) or {})
    check(r.returncode == 0, f"the Action's gate on {runtime} passes a dim_param batch model (exit 0)")
    check(os.path.exists(os.path.join(d, "dynamic-batch-action-out", "dynamic-batch-models", "m.xnn.onnx")),
          "the Action writes its output")
    check(f'"{runtime}"' in json.dumps(gate), f"the Action's report names {runtime}")


# The package of each runtime that a broken install stands in for: installed (importlib finds it), failing on import.
BROKEN = {"ort": "onnxruntime", "litert": "ai_edge_litert", "executorch": "executorch", "openvino": "openvino", "mnn": "MNN",
          "ncnn": "ncnn"}


def broken_package(runtime, d, src, tool_run, env):
    """9. Graph inputs of other types than float32 (int64; bool, float16 and other integers) run on each runtime. A runtime
package that is installed but fails to import (a missing shared library) is an `error import`
    answer and exit 5 from check.py (the probe's too, for ort and litert, where importing is cheap), not a
    traceback and exit 1 that the binary took for a failed check (exit 4, with a report)."""
    module_dir = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                       "..", "python")
    package = BROKEN[runtime]
    for name, raised in (("broken-import", 'ImportError("lib%s.so: cannot open shared object file")' % package),
                         ("broken-init", 'RuntimeError("%s: no usable CPU found")' % package))[: 2 if runtime == "ort" else 1]:
        shadow = os.path.join(d, name)
        os.makedirs(os.path.join(shadow, package), exist_ok=True)
        with open(os.path.join(shadow, package, "__init__.py"), "w") as f:
            f.write(f"raise {raised}\n")
        text = raised.split('"')[1]
        # The shadowing package comes before site-packages, as a PYTHONPATH entry does.
        benv = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [shadow, module_dir, env.get("PYTHONPATH")])))
        ins, out, work = (os.path.join(d, f"{name}-{k}") for k in ("inputs", "out", "work"))
        for folder in (ins, out):
            os.makedirs(folder, exist_ok=True)
        with open(os.path.join(ins, "inputs.json"), "w") as f:
            json.dump({"tensors": []}, f)
        print(f"-- 9. {runtime}: {package} installed but raising {raised.split('(')[0]} on import", flush=True)
        r = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", runtime, "--work", work,
                            "--original", src, "--rewritten", src, "--inputs", ins, "--out", out], capture_output=True,
                           text=True, env=benv)
        result = os.path.join(out, "result.jsonl")
        lines = [json.loads(l) for l in open(result).read().splitlines()] if os.path.exists(result) else []
        print(f"  check: exit {r.returncode}; answer {lines}\n  " + r.stderr.strip()[-800:].replace("\n", "\n  "), flush=True)
        errors = [l for l in lines if l["kind"] == "error"]
        check(r.returncode == 5 and len(errors) == 1 and [errors[0]["stage"], errors[0]["runtime"]] == ["import", runtime]
              and package in errors[0]["message"] and text in errors[0]["message"] and errors[-1] == lines[-1],
              f"check: a {package} that fails to import is an 'error import {runtime}' line and exit 5")
        check("Traceback" not in r.stderr, "check: no traceback")
        probe = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "probe", runtime], capture_output=True,
                               text=True, env=benv)
        said = [json.loads(l) for l in probe.stdout.splitlines()]
        print(f"  probe: exit {probe.returncode}; answer {said}", flush=True)
        if runtime in ("ort", "litert", "openvino", "ncnn"):  # the runtimes whose probe imports the package (registry.json)
            check(probe.returncode == 5 and [said[-1]["kind"], said[-1]["stage"], said[-1]["runtime"]] == ["error", "import", runtime]
                  and text in said[-1]["message"],
                  f"probe: a {package} that fails to import is an 'error import {runtime}' line and exit 5")
            # The binary takes a failed probe for an interpreter that cannot run the check: exit 2, and the report says it.
            report = os.path.join(d, f"{name}.json")
            r = tool_run(src, "--compare", src, "--runtime", runtime, "--report", report, environ=benv)
            check(r.returncode == 2 and text in r.stderr and text in json.load(open(report))["error"],
                  f"dwdeconv-rewrite --runtime {runtime}: a {package} that fails to import is exit 2, saying why")
        else:
            check(probe.returncode == 0 and not any(l["kind"] == "missing" for l in said),
                  "probe: the package is there (importing torch and executorch costs seconds; check answers for it)")
            # The check's `error import` answer is the interpreter's fault, not the model's: exit 2 too, saying why.
            r = tool_run(src, "--compare", src, "--runtime", runtime, environ=benv)
            check(r.returncode == 2 and "cannot import it" in r.stderr and text in r.stderr,
                  f"dwdeconv-rewrite --runtime {runtime}: a {package} that fails to import in the check is exit 2, saying why")


if __name__ == "__main__":
    sys.exit(main())
