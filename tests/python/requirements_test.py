"""The runtimes' requirements files (bench/runtimes/requirements-*.txt) are the one route's input and hold the pins
alone: bench/runtimes/make_venv.py parses each (every package pinned `==`, what the venv must import named); none
holds a machine's path; none pins what only a GPU uses (triton, cuda-bindings, cuda-toolkit), and CUDA libraries
(nvidia-*) only ExecuTorch's, whose torch links them; each file covers its registry row (its file name, its
requirements, its check imports); .ci/run pins nothing itself and makes every runtime's venv with make_venv.py; the
docs name no second route. Then make_venv's own rules on small files: what it refuses to parse and which of pip
check's complaints it lets pass.

ctest supplies DWDECONV_SOURCE_DIR. Standard library only; no network (venv_test.py installs from the route)."""
import json
import os
import re
import sys
import tempfile
from pathlib import Path

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
sys.path.insert(0, str(SOURCE / "bench" / "runtimes"))
import make_venv  # noqa: E402

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


REGISTRY = {r["name"]: r for r in json.loads((SOURCE / "python/dwdeconv_rewrite/runtimes/registry.json").read_text())["runtimes"]}
files = sorted((SOURCE / "bench" / "runtimes").glob("requirements-*.txt"))
check(make_venv.runtimes() == sorted(REGISTRY), f"one requirements file per registry runtime: {make_venv.runtimes()}")
# An absolute path or a home-relative one in a file is some machine's (the venvs' folders are the user's choice: DIR).
MACHINE_PATH = re.compile(r"(?:^|[\s'\"(=:])(?:/[A-Za-z]|~/)")
GPU_ONLY = {"triton", "cuda-bindings", "cuda-toolkit", "cuda-pathfinder"}
for path in files:
    name = path.name[len("requirements-"):-len(".txt")]
    try:
        req = make_venv.read_requirements(path)
    except ValueError as e:
        check(False, f"{path.name}: make_venv parses it ({e})")
        continue
    check(True, f"{path.name}: make_venv parses it ({len(req.pins)} pins, every one ==)")
    paths = [f"{k}: {line.strip()}" for k, line in enumerate(path.read_text().splitlines(), 1) if MACHINE_PATH.search(line)]
    check(not paths, f"{path.name}: no machine's path {paths}")
    check(not GPU_ONLY & set(req.pins), f"{path.name}: pins none of {sorted(GPU_ONLY)} (used on a GPU only)")
    cuda = sorted(p for p in req.pins if p.startswith("nvidia-"))
    check(not cuda or name == "executorch", f"{path.name}: CUDA libraries {cuda} only where torch links them (executorch)")
    check(req.python == "3.11", f"{path.name}: says the Python its pins were frozen on (3.11)")
    row = REGISTRY.get(name)
    if row is None:
        continue
    check(row["pinned_requirements"] == f"bench/runtimes/{path.name}", f"{name}: the registry points at {path.name}")
    wanted = {make_venv.normalize(pip) for _, pip in row["requirements"]}
    check(wanted <= set(req.pins), f"{path.name}: pins every requirement of the registry's row {sorted(wanted - set(req.pins))}")
    check(set(row["check_imports"]) <= set(req.imports), f"{path.name}: imports what check.py imports {row['check_imports']}")

ci = (SOURCE / ".ci" / "run").read_text()
check(not re.search(r"==\s*[0-9]", ci), ".ci/run pins no package itself (the requirements files do)")
for name in REGISTRY:
    check(re.search(rf"^runtime_venv {name} DWDECONV_", ci, re.M) is not None, f".ci/run makes the {name} venv with runtime_venv")
check("python3 bench/runtimes/make_venv.py \"$name\" \"$venv\"" in ci, ".ci/run's runtime_venv runs make_venv.py")
for doc in ("docs/runtime-checks.md", "docs/install-pip.md", "bench/runtimes/README.md", "README.md"):
    text = (SOURCE / doc).read_text()
    check(not re.search(r"-r\s+bench/runtimes/requirements", text), f"{doc}: no `pip install -r` of a requirements file (one route)")
for doc in ("docs/runtime-checks.md", "bench/runtimes/README.md"):
    check("bench/runtimes/make_venv.py" in (SOURCE / doc).read_text(), f"{doc}: names the route, make_venv.py")

# make_venv's parser on small files: what it refuses, naming the line.
with tempfile.TemporaryDirectory() as scratch:
    def parsed(text):
        p = Path(scratch) / "requirements-x.txt"
        p.write_text(text)
        try:
            return make_venv.read_requirements(p)
        except ValueError as e:
            return str(e)

    head = "# make_venv imports: numpy\n"
    ok = parsed(head + "# make_venv leaves out: torch\n# make_venv overrides: numpy\nnumpy==2.2.6\nml_dtypes==0.7.0\n")
    check(not isinstance(ok, str) and ok.pins == {"numpy": "2.2.6", "ml-dtypes": "0.7.0"} and ok.left_out == {"torch"},
          "a file of pins and make_venv lines parses")
    for text, said, what in [(head + "numpy>=2\n", "requirements-x.txt:2", "a range"),
                             (head + "numpy\n", "is not a pin", "a name without a version"),
                             (head + "--index-url https://example.org/simple\nnumpy==2.2.6\n", "is not a pin", "an option"),
                             (head + "numpy==2.2.6\nNumPy==2.2.5\n", "pinned twice", "a package pinned twice"),
                             ("numpy==2.2.6\n", "no `# make_venv imports:`", "no imports line"),
                             (head + "# make_venv leaves out: numpy\nnumpy==2.2.6\n", "both pinned and left out", "a pin left out"),
                             (head + "# make_venv overrides: scipy\nnumpy==2.2.6\n", "overridden but not pinned", "an override of nothing"),
                             (head + "# make_venv index: cpu\nnumpy==2.2.6\n", "unknown make_venv line", "an unknown make_venv line")]:
        got = parsed(text)
        check(isinstance(got, str) and said in got, f"the parser refuses {what}: {got if isinstance(got, str) else 'parsed'}")

    # pip check's complaints: a requirement left out and a pin overridden pass; anything else is reported.
    req = parsed(head + "# make_venv leaves out: triton\n# make_venv overrides: ai-edge-litert\nnumpy==2.2.6\nai-edge-litert==2.3.0\n")
    said = ("torch 2.15.0 requires triton, which is not installed.\n"
            "onnx2tf 1.29.24 has requirement ai-edge-litert==2.1.0, but you have ai-edge-litert 2.3.0.\n"
            "executorch 1.5.1 requires pyyaml, which is not installed.\n"
            "onnx 1.19.1 has requirement numpy>=1.22, but you have numpy 1.21.0.\n"
            "sometool 1.0 is not supported on this platform\n")
    check(make_venv.unexpected_complaints(req, said) == said.splitlines()[2:],
          "pip check: a left-out requirement and an overridden pin pass, a missing one, another mismatch and other "
          "complaints are reported")
    check(make_venv.unexpected_complaints(req, "No broken requirements found.\n") == [], "pip check: a clean answer passes")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all requirements checks passed")
