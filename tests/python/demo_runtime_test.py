"""A runtime added through the registry alone runs through the binary, the API and the Action.

The runtime is tests/python/demo_runtime/: a registry row and its adapter (ONNX Runtime under another name). Nothing
else names it. ctest builds a test binary with the shipped registry plus that row in place of the shipped one
(DWDECONV_DEMO_REWRITE; tests/python/CMakeLists.txt) and writes that registry (DWDECONV_DEMO_REGISTRY); this test
copies the package with that registry and the adapter, and then:

  1. the binary lists the runtime in --help, and --compare --runtime demo verifies and times a rewrite on it, the
     report naming it and the adapter's label; the shipped binary refuses --runtime demo with the same package (it
     takes no runtime from the environment);
  2. dwdeconv_rewrite.compare(runtime="demo") runs it through the test binary;
  3. action/run.py gates a model on it (runtime: demo), and refuses it with the shipped package.

Runs with DWDECONV_PYTHON (ONNX Runtime's venv in CI); skipped, saying so, where that interpreter lacks onnxruntime."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
sys.path.insert(0, str(SOURCE / "tests" / "e2e"))
import report_archive  # noqa: E402 - the suite's report archive, beside the e2e scripts

BINARY = os.environ["DWDECONV_REWRITE"]
DEMO = os.environ["DWDECONV_DEMO_REWRITE"]
DEMO_REGISTRY = Path(os.environ["DWDECONV_DEMO_REGISTRY"])
MODEL = SOURCE / "examples" / "migan_tiny_deconv.onnx"  # static shapes; --target xnnpack rewrites its 8 upsamplers
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(argv, cwd=None, **env):
    """Runs argv with the environment plus `env`. The shipped binary's reports go to the suite's archive; the test
    binary's do not: docs/report.schema.json lists the shipped registry's runtimes, which rightly lack demo."""
    reports = report_archive.watch(argv, cwd) if argv[0] == BINARY else None
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, **env))
    report_archive.copy_written(reports)
    return r


missing = [m for m in ("numpy", "onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
if missing:
    print(f"SKIPPED: the demo runtime wraps ONNX Runtime; {sys.executable} lacks {', '.join(missing)}", flush=True)
    sys.exit(0)

shipped = json.loads((SOURCE / "python" / "dwdeconv_rewrite" / "runtimes" / "registry.json").read_text())
demo_registry = json.loads(DEMO_REGISTRY.read_text())
check("demo" not in [r["name"] for r in shipped["runtimes"]], "the shipped registry has no demo runtime")
check(demo_registry["runtimes"][:-1] == shipped["runtimes"] and demo_registry["runtimes"][-1]["name"] == "demo",
      "the test registry is the shipped one plus the demo row")

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    package = tmp / "pkg" / "dwdeconv_rewrite"
    shutil.copytree(SOURCE / "python" / "dwdeconv_rewrite", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(DEMO_REGISTRY, package / "runtimes" / "registry.json")
    shutil.copy(SOURCE / "tests" / "python" / "demo_runtime" / "demo_adapter.py", package / "runtimes" / "demo_adapter.py")
    demo_env = {"DWDECONV_PYTHONPATH": str(package.parent), "PYTHONPATH": str(package.parent), "DWDECONV_REWRITE": DEMO}
    rewritten = tmp / "m.xnn.onnx"
    r = run([BINARY, str(MODEL), "-o", str(rewritten), "--target", "xnnpack"])
    check(r.returncode == 0, f"the shipped binary rewrites {MODEL.name}: {r.stderr[-300:]}")

    # 1. The binary.
    help_text = " ".join(run([DEMO, "--help"]).stdout.split())
    check("demo (ONNX Runtime's CPU provider under another name" in help_text, "the test binary's --help lists demo")
    report = tmp / "demo.json"
    r = run([DEMO, str(MODEL), "--compare", str(rewritten), "--verify", "--bench", "--runs", "2", "--runtime", "demo",
             "--python", sys.executable, "--report", str(report)], **demo_env)
    said = json.loads(report.read_text()) if report.exists() else {}
    check(r.returncode == 0 and said.get("verify", {}).get("passed") is True, f"--compare --runtime demo passes: exit "
          f"{r.returncode} {r.stderr[-400:]}")
    runtime = said.get("runtime", {})
    check(runtime.get("name") == "demo" and runtime.get("label", "").startswith("Demo Runtime over ONNX Runtime"),
          f"the report names the demo runtime and its adapter's label: {runtime}")
    check(isinstance(said.get("bench", {}).get("speedup"), (int, float)), "the demo runtime timed both models")
    refused = run([BINARY, str(MODEL), "--compare", str(rewritten), "--verify", "--runtime", "demo", "--python",
                   sys.executable], **dict(demo_env, DWDECONV_REWRITE=BINARY))
    check(refused.returncode == 2 and "demo" not in refused.stderr.split("(known:")[-1],
          f"the shipped binary refuses --runtime demo with the demo package: exit {refused.returncode} {refused.stderr[-200:]}")

    # 2. The API, from the copied package, through the test binary.
    code = ("import json, dwdeconv_rewrite as d\n"
            "r = d.compare(%r, %r, runtime='demo', bench=True)\n"
            "print(json.dumps({'passed': r.passed, 'runtime': r.report['runtime'], 'module': d.__file__}))"
            % (str(MODEL), str(rewritten)))
    r = run([sys.executable, "-c", code], **demo_env)
    api = json.loads(r.stdout.splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else {}
    check(api.get("passed") is True and api.get("runtime", {}).get("name") == "demo"
          and api.get("module", "").startswith(str(package)),
          f"dwdeconv_rewrite.compare(runtime='demo') passes through the test binary: {api or r.stderr[-400:]}")

    # 3. The Action: a speed gate on demo (min-speedup 0.01: any measured speedup passes it).
    work = tmp / "work"
    work.mkdir()
    shutil.copy(MODEL, work / "m.onnx")
    inputs = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    action = dict(inputs, INPUT_MODELS="m.onnx", INPUT_TARGET="xnnpack", INPUT_MIN_SPEEDUP="0.01", INPUT_RUNTIME="demo",
                  INPUT_REPORT=str(tmp / "action.json"), **demo_env)
    r = subprocess.run([sys.executable, str(SOURCE / "action" / "run.py")], cwd=work, env=action, capture_output=True,
                       text=True)
    combined = json.loads((tmp / "action.json").read_text()) if (tmp / "action.json").exists() else [{}]
    gated = combined[0]  # the rewrite's one call verified and timed it on the gate's runtime
    check(r.returncode == 0 and gated.get("runtime", {}).get("name") == "demo" and gated.get("exit_code") == 0
          and isinstance(gated.get("bench", {}).get("speedup"), (int, float)),
          f"the Action gates a model on runtime demo: exit {r.returncode}, {gated.get('runtime')} {r.stderr[-400:]}")
    check("speed gate (min-speedup 0.01) on demo, the runtime input" in r.stderr, "the Action says where it gated")
    shipped_env = dict(action, DWDECONV_PYTHONPATH="", PYTHONPATH=str(SOURCE / "python"), DWDECONV_REWRITE=BINARY)
    r = subprocess.run([sys.executable, str(SOURCE / "action" / "run.py")], cwd=work, env=shipped_env,
                       capture_output=True, text=True)
    check(r.returncode == 2 and "runtime: 'demo' is not one of xnnpack" in r.stderr,
          f"the Action with the shipped package refuses runtime demo: exit {r.returncode} {r.stderr[-300:]}")

if failures:
    print(f"{len(failures)} failed", file=sys.stderr)
    sys.exit(1)
print("all passed")
