"""--runtime ncnn's conversion failures, with this interpreter as the runtime's Python.

Usage: check_ncnn_conversion.py DWDECONV_REWRITE. Checks that:
  - graph input and output names holding a newline, quotes and a byte that is not UTF-8 are fed and read on ncnn (pnnx
    renames them in0/out0: the adapter pairs them by position after checking counts and shapes), and are escaped in
    every message: the log never holds the raw newline or the name's bytes;
  - a model with a dynamic input dim is refused (exit 3), naming the input;
  - pnnx crashing (a stand-in binary that kills itself) is a conversion failure (`error pnnx` from check.py, exit 3),
    and pnnx hanging is killed at the timeout, the same failure; neither leaves a scratch folder under --work nor the
    converter running;
  - SIGINT and SIGTERM during a conversion end the check with the converter gone and no scratch folder left.
The stand-ins replace ncnn_adapter.pnnx_binary in a wrapper around check.py (the command the binary runs).
Exits 77 (ctest's skip), saying so, when this interpreter lacks numpy, onnx, ncnn or pnnx.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import report_archive  # beside this script: the suite's report archive

failures = []
MODULE = os.environ.get("DWDECONV_PYTHONPATH") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                               "python")


def check(condition, what):
    print(("ok: " if condition else "FAILED: ") + what, flush=True)
    if not condition:
        failures.append(what)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# check.py with ncnn_adapter's converter replaced by STAND_IN and its timeout by TIMEOUT (environment variables).
WRAPPER = """
import os, sys
from pathlib import Path
import dwdeconv_rewrite.runtimes.ncnn_adapter as ncnn_adapter
import dwdeconv_rewrite.runtimes.check as check
ncnn_adapter.pnnx_binary = lambda: Path(os.environ["STAND_IN"])
ncnn_adapter.PNNX_TIMEOUT = float(os.environ["TIMEOUT"])
sys.exit(check.check(sys.argv[1:]))
"""


def main():
    tool = sys.argv[1]
    missing = [p for p in ("numpy", "onnx", "ncnn", "pnnx") if importlib.util.find_spec(p) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} lacks {', '.join(missing)}; set DWDECONV_NCNN_PYTHON or DWDECONV_PYTHON to an "
              "interpreter with them (docs/runtime-checks.md)")
        return 77
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(37)
    c = 4
    # Names of the same length as the placeholders, swapped in the serialized bytes (the protobuf API takes only UTF-8).
    hostile_in, hostile_out = b"x\n'\"\xff", b"y\n\"'\xfe"
    nodes = [helper.make_node("ConvTranspose", ["XXXXX", "w"], ["YYYYY"], name="up", group=c, kernel_shape=[4, 4],
                              strides=[2, 2], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info("XXXXX", TensorProto.FLOAT, [1, c, 8, 8])],
                              [helper.make_tensor_value_info("YYYYY", TensorProto.FLOAT, [1, c, 16, 16])],
                              [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (c, 1, 4, 4)).astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString().replace(b"XXXXX", hostile_in).replace(b"YYYYY", hostile_out)

    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, DWDECONV_PYTHON=sys.executable, TMPDIR=d)
        hostile = os.path.join(d, "hostile.onnx")
        with open(hostile, "wb") as f:
            f.write(data)

        def tool_run(*args):
            reports = report_archive.watch([tool] + list(args))
            r = subprocess.run([tool] + [str(a) for a in args], capture_output=True, env=env)
            report_archive.copy_written(reports)
            err = r.stderr.decode("utf-8", "replace")
            print(f"$ dwdeconv-rewrite {' '.join(map(str, args))}\n  exit {r.returncode}\n  " + err.strip().replace("\n", "\n  "),
                  flush=True)
            return r, err

        # 1. Hostile names: fed, read back and compared under their own names; planted error found; names escaped.
        print("-- 1. graph input and output names with a newline, quotes and a non-UTF-8 byte", flush=True)
        report = os.path.join(d, "r.json")
        r, err = tool_run(hostile, "--compare", hostile, "--runtime", "ncnn", "--report", report)
        check(r.returncode == 0 and "verification passed" in err, "a model with hostile names verifies on ncnn (exit 0)")
        bad = onnx.load_from_string(data)
        w = numpy_helper.to_array(bad.graph.initializer[0]).copy()
        w.flat[0] += 0.5
        bad.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "w"))
        with open(os.path.join(d, "hostile-bad.onnx"), "wb") as f:
            f.write(bad.SerializeToString())
        r, err = tool_run(hostile, "--compare", os.path.join(d, "hostile-bad.onnx"), "--runtime", "ncnn")
        check(r.returncode == 1 and "verification FAILED" in err, "... and a planted weight error under them fails (exit 1)")
        check(hostile_in not in r.stderr and hostile_out not in r.stderr and b"\xff" not in r.stderr and b"\xfe" not in r.stderr,
              "the log never holds the names' raw bytes")

        # The runtime layer itself: the adapter's messages about such a name are escaped too.
        sys.path.insert(0, MODULE)
        try:
            from dwdeconv_rewrite.runtimes.common import StageError
            from dwdeconv_rewrite.runtimes.ncnn_adapter import NcnnRuntime
        finally:
            sys.path.remove(MODULE)
        from pathlib import Path

        runtime = NcnnRuntime(Path(d) / "work")
        runner = runtime.load(Path(hostile), 1)
        in_name, out_name = hostile_in.decode("utf-8", "surrogateescape"), hostile_out.decode("utf-8", "surrogateescape")
        names = {n.name for n in onnx.load(hostile).graph.input}
        x = rng.standard_normal((2, c, 8, 8)).astype(np.float32)
        try:
            runner.feed({next(iter(names)): x})
            said = ""
        except RuntimeError as e:
            said = str(e)
        # base.Runner refuses it (the graph declares batch 1), before ncnn's own "batch 1 only" would.
        check("is fed shape [2, 4, 8, 8]" in said and "\n" not in said, f"a batch of 2 is refused, the name escaped ({said!r})")
        check(in_name not in said and out_name not in said, "... the name's raw text is not in the message")

        # 2. A dynamic input dim: refused at conversion, naming the input.
        dynamic = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "dynamic",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "H", 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, "H", 8])]),
            opset_imports=[helper.make_opsetid("", 17)])
        dynamic.ir_version = 8
        onnx.save(dynamic, os.path.join(d, "dynamic.onnx"))
        try:
            runtime.prepare(Path(d) / "dynamic.onnx")
            said = ""
        except StageError as e:
            said = str(e)
        check(said.startswith("pnnx: graph input 'x' has the dynamic shape") and "'H'" in said,
              f"a dynamic input dim is a conversion failure naming the input ({said})")

        # 3. pnnx crashing and hanging, through check.py (the binary's command), with stand-ins for the binary.
        inputs = os.path.join(d, "inputs")
        os.makedirs(inputs)
        tensor = numpy_helper.from_array(rng.standard_normal((1, c, 8, 8)).astype(np.float32), "x")
        plain = helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "plain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])]), opset_imports=[helper.make_opsetid("", 17)])
        plain.ir_version = 8
        onnx.save(plain, os.path.join(d, "plain.onnx"))
        with open(os.path.join(inputs, "0.pb"), "wb") as f:
            f.write(tensor.SerializeToString())
        with open(os.path.join(inputs, "inputs.json"), "w") as f:
            json.dump({"tensors": [{"name": "x", "file": "0.pb"}]}, f)
        pids = os.path.join(d, "stand-in.pids")
        stand_ins = {"crash": "kill -SEGV $$", "hang": "exec sleep 600"}
        for name, body in stand_ins.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(f"#!/bin/sh\necho $$ >> '{pids}'\n{body}\n")
            os.chmod(os.path.join(d, name), 0o755)

        def run_check(name, timeout, work):
            out = os.path.join(d, f"out-{name}-{work}")
            os.makedirs(out, exist_ok=True)
            cenv = dict(env, STAND_IN=os.path.join(d, name), TIMEOUT=str(timeout),
                        PYTHONPATH=os.pathsep.join(filter(None, [MODULE, env.get("PYTHONPATH")])))
            cmd = [sys.executable, "-c", WRAPPER, "--runtime", "ncnn", "--work", os.path.join(d, work), "--original",
                   os.path.join(d, "plain.onnx"), "--rewritten", os.path.join(d, "plain.onnx"), "--inputs", inputs, "--out", out]
            return subprocess.Popen(cmd, env=cenv, stdout=subprocess.PIPE, stderr=subprocess.PIPE), out

        def answer(out):
            result = os.path.join(out, "result.jsonl")
            return [json.loads(line) for line in open(result).read().splitlines()] if os.path.exists(result) else []

        def stand_in_pids():
            return [int(p) for p in open(pids).read().split()] if os.path.exists(pids) else []

        def scratch_left(work):
            folder = os.path.join(d, work, "ncnn")
            return [n for n in os.listdir(folder) if n.startswith("pnnx-")] if os.path.isdir(folder) else []

        for name, timeout, said in (("crash", 60, "pnnx failed (signal 11)"), ("hang", 2, "timed out after 2 s")):
            print(f"-- 3. pnnx {name}es", flush=True)
            started = time.monotonic()
            proc, out = run_check(name, timeout, f"work-{name}")
            _, err = proc.communicate(timeout=120)
            lines = answer(out)
            errors = [line for line in lines if line["kind"] == "error"]
            print(f"  exit {proc.returncode}; answer {errors}; {time.monotonic() - started:.1f} s", flush=True)
            check(proc.returncode == 3 and errors and [errors[0]["stage"], errors[0]["side"]] == ["pnnx", "original"]
                  and said in errors[0]["message"],
                  f"pnnx {name}ing is an 'error pnnx original' answer ({said}) and exit 3")
            check(not scratch_left(f"work-{name}"), f"pnnx {name}ing leaves no scratch folder under --work")
            check(stand_in_pids() and not any(alive(p) for p in stand_in_pids()), f"pnnx {name}ing leaves no converter running")
            os.unlink(pids)

        # 4. A signal during the conversion: the check ends, the converter is killed, its scratch folder removed.
        for sig in (signal.SIGINT, signal.SIGTERM):
            print(f"-- 4. {sig.name} while pnnx runs", flush=True)
            proc, _ = run_check("hang", 600, f"work-{sig.name}")
            deadline = time.monotonic() + 60
            while not stand_in_pids() and time.monotonic() < deadline:
                time.sleep(0.05)
            check(bool(stand_in_pids()) and bool(scratch_left(f"work-{sig.name}")),
                  f"{sig.name}: the conversion was under way (a converter and its scratch folder)")
            proc.send_signal(sig)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            time.sleep(0.2)
            check(proc.returncode != 0, f"{sig.name}: the check does not succeed (exit {proc.returncode})")
            check(not scratch_left(f"work-{sig.name}"), f"{sig.name}: no scratch folder is left under --work")
            check(not any(alive(p) for p in stand_in_pids()), f"{sig.name}: the converter is gone")
            for p in stand_in_pids():
                if alive(p):
                    os.kill(p, signal.SIGKILL)
            os.unlink(pids)
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print("every ncnn conversion failure is reported and leaves nothing behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
