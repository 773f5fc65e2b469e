"""The runtimes' registry (python/dwdeconv_rewrite/runtimes/registry.json) is the one list: the Python side, the
binary (--help, --runtime's names, the pinned requirements it points at), pyproject.toml's extras and its
requires-python all agree with it, and every row's adapter subclasses the runners' base classes. Each row lists the
--precision values its runtime converts to (fp32 in every one), and check.py refuses the others, and int8 without
--calibration, with an `error usage` answer and exit 2 before it imports anything.

ctest supplies DWDECONV_REWRITE (the built binary), DWDECONV_SOURCE_DIR and PYTHONPATH=<source>/python. Standard
library only (tomllib: Python 3.11, else the pyproject checks are skipped, saying so)."""
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
BINARY = os.environ["DWDECONV_REWRITE"]
RUNTIMES = SOURCE / "python" / "dwdeconv_rewrite" / "runtimes"
REGISTRY = json.loads((RUNTIMES / "registry.json").read_text())
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


rows = REGISTRY["runtimes"]
names = [r["name"] for r in rows]
check(len(set(names)) == len(names) and "xnnpack" not in names, f"registry names are unique and not the executor's: {names}")

import dwdeconv_rewrite.runtimes as runtimes  # noqa: E402 - after the registry is read, so a failure names the file

check(list(runtimes.NAMES) == names, "runtimes.NAMES is the registry's list")
for r in rows:
    name = r["name"]
    required = {m for m, _ in runtimes.REQUIREMENTS[name]}
    check(all(i.split(".")[0] in required for i in runtimes.CHECK_IMPORTS[name]),
          f"{name}: every module check imports is one of its requirements")
    check(set(r["probe_imports"]) <= set(r["check_imports"]), f"{name}: probe imports a subset of what check imports")
    module, cls = r["adapter"].split(":")
    path = RUNTIMES / f"{module}.py"
    check(path.is_file(), f"{name}: adapter module {path.name} exists")
    if not path.is_file():
        continue
    tree = ast.parse(path.read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    check(cls in classes, f"{name}: {path.name} defines {cls}")
    if cls in classes:
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in classes[cls].bases]
        methods = {f.name for f in classes[cls].body if isinstance(f, ast.FunctionDef)}
        check("Runtime" in bases, f"{name}: {cls} subclasses base.Runtime")
        # Its own methods, unless it extends another registered adapter (which then implements them).
        adapters = {row["adapter"].split(":")[1] for row in rows}
        check({"__init__", "versions", "label", "prepare", "load_impl"} <= methods or bool(adapters & set(bases)),
              f"{name}: {cls} implements the Runtime interface (its hooks; base.Runtime.load binds what load_impl loads)")
    runners = [c for c in classes.values() if any(getattr(b, "id", "") == "Runner" for b in c.bases)]
    hooks = {"feed_impl", "invoke", "outputs_impl"}
    own = [{f.name for f in c.body if isinstance(f, ast.FunctionDef)} for c in runners]
    check(len(runners) >= 1 and all(hooks <= methods for methods in own),
          f"{name}: {path.name} has a base.Runner subclass implementing the hooks feed_impl, invoke, outputs_impl")
    # The checks are base.Runner's template methods, written once: no adapter overrides them.
    check(not any({"feed", "outputs"} & methods for methods in own),
          f"{name}: {path.name}'s runners leave feed() and outputs() (the checks) to base.Runner")
    if r["pinned_requirements"]:
        check((SOURCE / r["pinned_requirements"]).is_file(), f"{name}: pinned requirements {r['pinned_requirements']} exist")
    precisions = r.get("precisions")
    check(isinstance(precisions, list) and len(set(precisions)) == len(precisions)
          and set(precisions) <= {"fp32", "fp16", "int8", "bf16"} and "fp32" in precisions,
          f"{name}: precisions {precisions} are distinct values of fp32, fp16, int8, bf16, fp32 among them")
    check(runtimes.PRECISIONS.get(name) == precisions, f"{name}: runtimes.PRECISIONS is the registry's list")
    # What the per-upsampler table reads of a profile: a row says it exactly when its adapter has one.
    profiles = cls in classes and any(f.name == "profile_nodes" for f in classes[cls].body if isinstance(f, ast.FunctionDef))
    check(r.get("node_values", "missing") in (None, "onnx", "layers") and (r.get("node_values") is not None) == profiles,
          f"{name}: node_values {r.get('node_values', 'missing')!r} is onnx or layers exactly when {cls} has profile_nodes")

# check.py refuses a precision the row does not list, and int8 without its calibration samples, before it imports any
# runtime package: an `error` answer of stage `usage`, the last line, and exit 2.
with tempfile.TemporaryDirectory() as scratch:
    for r in rows:
        refused = [p for p in ("fp32", "fp16", "int8", "bf16") if p not in r["precisions"]]
        cases = [(p, [], f"--precision {p}") for p in refused]
        if "int8" in r["precisions"]:
            cases.append(("int8", [], "needs --calibration"))
        cases.append(("fp32", ["--calibration", scratch], "--calibration applies to --precision int8"))
        for precision, extra, said in cases:
            out = Path(scratch) / f"{r['name']}-{precision}-{len(extra)}"
            out.mkdir()
            answer = subprocess.run([sys.executable, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", r["name"],
                                     "--work", scratch, "--original", "a.onnx", "--rewritten", "b.onnx", "--inputs", scratch,
                                     "--out", str(out), "--precision", precision] + extra, capture_output=True, text=True)
            lines = [json.loads(line) for line in (out / "result.jsonl").read_text().splitlines()] \
                if (out / "result.jsonl").exists() else []
            check(answer.returncode == 2 and lines and (lines[-1]["kind"], lines[-1]["stage"]) == ("error", "usage")
                  and said in lines[-1]["message"],
                  f"{r['name']}: check {' '.join(['--precision', precision] + extra[:1])} is refused: exit {answer.returncode}, "
                  f"{lines[-1:] or answer.stderr.strip()[-200:]}")

# The binary embeds the registry: --help lists each runtime as the registry describes it, and an unknown --runtime
# is refused naming them all.
help_text = subprocess.run([BINARY, "--help"], capture_output=True, text=True).stdout
flat = " ".join(help_text.split())
for r in rows:
    check(f"{r['name']} ({r['summary']})" in flat, f"--help lists '{r['name']} ({r['summary']})'")
check("--runtime " + "|".join(names) in flat, "--python's help names the registry's runtimes")
# --precision's help says which runtimes convert to each precision, as the rows list them (bf16 on openvino only).
for p in ("fp16", "int8", "bf16"):
    on = [r["name"] for r in rows if p in r["precisions"]]
    check(not on or f"{p} on {', '.join(on)}" in flat, f"--help lists {p} on {', '.join(on) or 'no runtime'}")
bad = subprocess.run([BINARY, str(SOURCE / "examples" / "upsampler_small.onnx"), "--verify", "--runtime", "nope"],
                     capture_output=True, text=True)
check(bad.returncode == 2 and "(known: " + ", ".join(["xnnpack"] + names) + ")" in bad.stderr,
      f"an unknown --runtime is exit 2 naming the registry's runtimes: {bad.stderr.strip()[-200:]}")

# Every row says its other names (--runtime's aliases), and the binary takes each, in any case, as that runtime: a
# --dry-run with --runtime passes the name check and stops at the next one ("--runtime and --python apply to ...").
ROW_KEYS = {"name", "aliases", "display_name", "summary", "adapter", "requirements", "check_imports", "probe_imports",
            "precisions", "pinned_requirements", "node_values"}
every_alias = []
for r in rows:
    check(set(r) <= ROW_KEYS and {"name", "aliases", "display_name", "summary", "adapter"} <= set(r),
          f"{r['name']}: every key is one the registry defines, aliases among them (unknown: {sorted(set(r) - ROW_KEYS)})")
    aliases = r.get("aliases")
    check(isinstance(aliases, list) and all(isinstance(a, str) and a and a == a.lower() for a in aliases)
          and not set(aliases) & (set(names) | {"xnnpack"}),
          f"{r['name']}: aliases {aliases!r} are lower-case names, none a runtime's name")
    every_alias += aliases if isinstance(aliases, list) else []
    for alias in aliases if isinstance(aliases, list) else []:
        for spelling in (alias, alias.upper()):
            took = subprocess.run([BINARY, str(SOURCE / "examples" / "upsampler_small.onnx"), "--dry-run", "--runtime", spelling],
                                  capture_output=True, text=True)
            check(took.returncode == 2 and "--runtime and --python apply to" in took.stderr and "unknown runtime" not in took.stderr,
                  f"{r['name']}: --runtime {spelling} is taken: {took.stderr.strip()[-200:]}")
check(len(set(every_alias)) == len(every_alias), f"no alias names two runtimes: {every_alias}")

try:
    import tomllib
except ImportError:
    tomllib = None
    print(f"SKIPPED: the pyproject.toml checks need tomllib (Python 3.11); this is Python {sys.version.split()[0]}")
if tomllib is not None:
    project = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]
    check(project["requires-python"] == ">=" + REGISTRY["python_minimum"],
          f"pyproject requires-python {project['requires-python']} is the registry's minimum {REGISTRY['python_minimum']}")
    extras = project["optional-dependencies"]
    for r in rows:
        wanted = {pip for _, pip in r["requirements"]}
        have = {e.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower().replace("_", "-")
                for e in extras.get(r["name"], [])}
        wanted = {w.lower().replace("_", "-") for w in wanted}
        check(wanted <= have, f"pyproject extra [{r['name']}] holds the registry's packages (missing: {sorted(wanted - have)})")

if failures:
    print(f"{len(failures)} failed", file=sys.stderr)
    sys.exit(1)
print("all passed")
