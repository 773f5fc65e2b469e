"""The one way to make a runtime's Python environment: a venv from bench/runtimes/requirements-RUNTIME.txt.

    python3 bench/runtimes/make_venv.py RUNTIME DIR       make DIR (or find it made from this very file, and keep it)
    python3 bench/runtimes/make_venv.py --imports RUNTIME PYTHON   exit 0 when PYTHON imports what the file names

RUNTIME is ort, litert, executorch, openvino, mnn or ncnn. The venv's Python is the one running this script, with no
system site-packages. Every package comes from PyPI at the version the file pins, installed with `pip install
--no-deps`: the file is the whole environment, so pip resolves nothing (onnx2tf's pin of ai-edge-litert, torch's of
triton and pnnx's of torch are deliberately not followed; the files say why). Then `pip check` must report nothing
but what the file says it leaves out or overrides, and the venv must import what the file names. Last, the file is
copied into DIR as make_venv.requirements.txt: a DIR holding an identical copy that still imports is kept as it is
(seconds), and any other venv there is replaced. `dwdeconv-rewrite --runtime RUNTIME --python DIR/bin/python` then
uses it; .ci/run makes its venvs with this script.

A requirements file is pip's format with `name==version` lines only, and these comment lines, which this reads:
    # make_venv imports: a, b.c          what the venv must import (the runtime's adapter and converters)
    # make_venv leaves out: x, y         requirements of pinned packages that are not installed, and why in a comment
    # make_venv overrides: z             packages pinned at another version than a pinned package requires
    # make_venv python: 3.11             the Python the pins were frozen on (another one gets a warning)
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = "make_venv.requirements.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
DIRECTIVE = re.compile(r"^#\s*make_venv\s+([a-z ]+):\s*(.*)$")
# pip check's two kinds of complaint (pip 23 to 25).
MISSING = re.compile(r"^(\S+) (\S+) requires (\S+), which is not installed\.$")
MISMATCH = re.compile(r"^(\S+) (\S+) has requirement (.+), but you have (\S+) (\S+)\.$")


def normalize(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503): case and runs of -, _ and . do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Requirements:
    """A requirements file as this script reads it: its pins and its make_venv lines."""
    path: Path
    pins: dict[str, str] = field(default_factory=dict)  # normalized name -> version
    imports: list[str] = field(default_factory=list)
    left_out: set[str] = field(default_factory=set)  # normalized names
    overrides: set[str] = field(default_factory=set)  # normalized names
    python: str = ""


def requirements_path(runtime: str) -> Path:
    return HERE / f"requirements-{runtime}.txt"


def runtimes() -> list[str]:
    """The runtimes that have a requirements file, in name order."""
    return sorted(p.name[len("requirements-"):-len(".txt")] for p in HERE.glob("requirements-*.txt"))


def read_requirements(path: Path) -> Requirements:
    """Parses PATH, raising ValueError naming the line for anything but a `name==version` pin, a comment or a
    make_venv line that names what it must (a pin twice, an option, a URL, a range, an unknown make_venv line)."""
    req = Requirements(path)
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        where = f"{path.name}:{number}"
        directive = DIRECTIVE.match(line)
        if directive:
            key, words = directive.group(1).strip(), [w for w in re.split(r"[,\s]+", directive.group(2)) if w]
            if key == "imports":
                req.imports += words
            elif key == "leaves out":
                req.left_out |= {normalize(w) for w in words}
            elif key == "overrides":
                req.overrides |= {normalize(w) for w in words}
            elif key == "python" and len(words) == 1:
                req.python = words[0]
            else:
                raise ValueError(f"{where}: unknown make_venv line {raw!r} (imports, leaves out, overrides, python)")
            continue
        if not line or line.startswith("#"):
            continue
        pin = PIN.match(line)
        if not pin:
            raise ValueError(f"{where}: {raw!r} is not a pin `name==version` (every package is pinned, and nothing else "
                             "goes in the file: it is installed with --no-deps)")
        name = normalize(pin.group(1))
        if name in req.pins:
            raise ValueError(f"{where}: {pin.group(1)} is pinned twice")
        req.pins[name] = pin.group(2)
    if not req.imports:
        raise ValueError(f"{path.name}: no `# make_venv imports:` line (what the venv must import)")
    for name in sorted(req.left_out & set(req.pins)):
        raise ValueError(f"{path.name}: {name} is both pinned and left out")
    for name in sorted(req.overrides - set(req.pins)):
        raise ValueError(f"{path.name}: {name} is overridden but not pinned")
    return req


def unexpected_complaints(req: Requirements, pip_check: str) -> list[str]:
    """The lines of `pip check`'s output that the file does not account for: a requirement missing that it does not
    leave out, a version mismatch of a package it does not override, or anything else pip says."""
    left = []
    for line in pip_check.splitlines():
        line = line.strip()
        missing, mismatch = MISSING.match(line), MISMATCH.match(line)
        if not line or line == "No broken requirements found.":
            continue
        if missing and normalize(re.split(r"[<>=!~;\[ ]", missing.group(3))[0]) in req.left_out:
            continue
        if mismatch and normalize(mismatch.group(4)) in req.overrides:
            continue
        left.append(line)
    return left


def imports_ok(python: str, req: Requirements, quiet: bool = True) -> bool:
    """Whether PYTHON imports every module the file names. What the imports print is dropped (TensorFlow's and torch's
    warnings), unless they fail and quiet is False: then the last lines of their stderr are shown."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    try:
        r = subprocess.run([python, "-c", "import " + ", ".join(req.imports)], env=env, capture_output=True, text=True)
    except OSError as e:
        r = subprocess.CompletedProcess([python], 1, "", str(e))
    if r.returncode != 0 and not quiet:
        print("\n".join(r.stderr.strip().splitlines()[-5:]), file=sys.stderr)
    return r.returncode == 0


def is_current(venv: Path, req: Requirements) -> bool:
    """Whether VENV was made from exactly this file and still imports what it names."""
    marker = venv / MARKER
    return marker.is_file() and marker.read_bytes() == req.path.read_bytes() and imports_ok(str(venv / "bin" / "python"), req)


def make(runtime: str, venv: Path) -> int:
    req = read_requirements(requirements_path(runtime))
    said = f"make_venv {runtime}"
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if req.python and req.python != here:
        print(f"{said}: warning: the pins were frozen on Python {req.python}; this is Python {here}, on which some of "
              "them may have no wheel", file=sys.stderr)
    if is_current(venv, req):
        print(f"{said}: {venv} was made from {req.path.name} as it is, and imports {', '.join(req.imports)}: kept")
        return 0
    if venv.exists():
        # Only a venv (or an empty folder) is replaced: a DIR given by mistake (a home directory) is never removed.
        if not (venv / "pyvenv.cfg").is_file() and any(venv.iterdir()):
            print(f"{said}: {venv} exists and is not a virtual environment: not replacing it", file=sys.stderr)
            return 2
        print(f"{said}: replacing {venv} (made from another {req.path.name}, or no longer importing)")
        shutil.rmtree(venv)
    started = time.monotonic()
    print(f"{said}: making {venv} with Python {here} from {req.path} ({len(req.pins)} pinned packages)", flush=True)
    python = str(venv / "bin" / "python")
    steps = [("venv", [sys.executable, "-m", "venv", str(venv)]),
             ("pip install", [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--progress-bar", "off",
                              "--no-deps", "--requirement", str(req.path)])]
    for what, command in steps:
        if subprocess.run(command).returncode != 0:
            print(f"{said}: FAILED: {what} into {venv} ({' '.join(command)}); the venv is not marked made, so the next run "
                  "remakes it", file=sys.stderr)
            return 1
    check = subprocess.run([python, "-m", "pip", "check", "--disable-pip-version-check"], capture_output=True, text=True)
    unexpected = unexpected_complaints(req, check.stdout + check.stderr)
    if unexpected:
        print(f"{said}: FAILED: pip check found requirements {req.path.name} neither pins, leaves out nor overrides (pin "
              "them, or say why they are left out):\n  " + "\n  ".join(unexpected), file=sys.stderr)
        return 1
    if not imports_ok(python, req, quiet=False):
        print(f"{said}: FAILED: {venv} does not import {', '.join(req.imports)}", file=sys.stderr)
        return 1
    shutil.copyfile(req.path, venv / MARKER)
    print(f"{said}: made {venv} in {time.monotonic() - started:.0f} s; use it with --runtime {runtime} --python {python}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make_venv.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imports", action="store_true", help="only check that the interpreter DIR imports what the file names")
    parser.add_argument("runtime", choices=runtimes())
    parser.add_argument("dir", metavar="DIR", help="the venv to make (or, with --imports, the interpreter to check)")
    args = parser.parse_args(argv)
    if args.imports:
        return 0 if imports_ok(args.dir, read_requirements(requirements_path(args.runtime))) else 1
    return make(args.runtime, Path(os.path.abspath(args.dir)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
