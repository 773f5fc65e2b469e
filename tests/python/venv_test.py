"""The one route, from nothing: bench/runtimes/make_venv.py makes an ONNX Runtime venv from requirements-ort.txt (the
smallest file; the others go the same way, and CI makes every one of them with it), which holds exactly the file's
pins, and on which `dwdeconv-rewrite --runtime ort` verifies a rewrite; made again, it is kept (the file unchanged);
made from another file (its copy in the venv changed), it is replaced; a folder that is not a venv is never removed.

Needs PyPI (about 40 MB; 20-60 s), so it runs only with DWDECONV_VENV_TEST=1 (CI sets it) and otherwise exits 77,
ctest's skip, saying so. ctest supplies DWDECONV_REWRITE and DWDECONV_SOURCE_DIR; standard library only."""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
BINARY = os.environ["DWDECONV_REWRITE"]
MAKE_VENV = SOURCE / "bench" / "runtimes" / "make_venv.py"
sys.path.insert(0, str(MAKE_VENV.parent))
import make_venv  # noqa: E402

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(*args):
    started = time.monotonic()
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    print(f"$ {' '.join(map(str, args))}\n  exit {r.returncode} after {time.monotonic() - started:.0f} s\n  "
          + (r.stdout + r.stderr).strip().replace("\n", "\n  "), flush=True)
    return r


def main():
    if os.environ.get("DWDECONV_VENV_TEST") != "1":
        print("SKIPPED: makes a venv from PyPI with bench/runtimes/make_venv.py (needs the network, 20-60 s); run it "
              "with DWDECONV_VENV_TEST=1 ctest --test-dir build -L venv --output-on-failure")
        return 77
    req = make_venv.read_requirements(MAKE_VENV.parent / "requirements-ort.txt")
    # The venv's Python is the one running make_venv: this interpreter's base, not a venv's (sys._base_executable).
    python = getattr(sys, "_base_executable", sys.executable)
    with tempfile.TemporaryDirectory() as d:
        venv = Path(d) / "ort venv"  # a space in the path, as a user's may have
        r = run(python, MAKE_VENV, "ort", venv)
        check(r.returncode == 0 and "made" in r.stdout, "make_venv ort makes the venv (exit 0)")
        if r.returncode != 0:
            return 1
        venv_python = venv / "bin" / "python"
        # Exactly the file's pins: every distribution in the venv is pinned there at that version, but for the pip
        # (and, on 3.11, setuptools) that `python -m venv` puts in every venv.
        listed = subprocess.run([venv_python, "-c", "import importlib.metadata as m\n"
                                 "for d in m.distributions(): print(d.metadata['Name'], d.version)"],
                                capture_output=True, text=True).stdout.split("\n")
        installed = {make_venv.normalize(n): v for n, v in (line.split() for line in listed if line.strip())}
        extra = {n: v for n, v in installed.items() if n not in req.pins and n not in ("pip", "setuptools")}
        wrong = {n: (installed.get(n), v) for n, v in req.pins.items() if installed.get(n) != v}
        check(not extra and not wrong, f"the venv holds exactly the file's pins (unpinned: {extra}; not as pinned: {wrong})")
        check((venv / make_venv.MARKER).read_bytes() == (MAKE_VENV.parent / "requirements-ort.txt").read_bytes(),
              "the venv keeps a copy of the file it was made from")

        # The binary takes it: a rewrite verified and timed on ONNX Runtime, at the pinned version.
        out = Path(d) / "out.onnx"
        r = run(BINARY, SOURCE / "examples" / "migan_tiny_deconv.onnx", "-o", out, "--target", "xnnpack", "--runtime", "ort",
                "--python", venv_python, "--verify", "--bench", "--runs", 2)
        check(r.returncode == 0 and out.is_file(), "dwdeconv-rewrite --runtime ort --python VENV verifies a rewrite (exit 0)")
        check(f"verified on ONNX Runtime {req.pins['onnxruntime']} (CPU provider)" in r.stderr,
              "the summary names the pinned ONNX Runtime")

        # Made again from the same file: kept, in seconds.
        r = run(python, MAKE_VENV, "ort", venv)
        check(r.returncode == 0 and ": kept" in r.stdout, "made again from the same file, the venv is kept")
        # Made from another file (the copy in the venv stands for the old one): replaced, and current again.
        (venv / make_venv.MARKER).write_text((venv / make_venv.MARKER).read_text().replace("numpy==", "numpy==0.0.0\n# was "))
        r = run(python, MAKE_VENV, "ort", venv)
        check(r.returncode == 0 and "replacing" in r.stdout and "made" in r.stdout, "made from another file, it is replaced")
        check(make_venv.is_current(venv, req), "and then it is current")

        # A folder that is not a venv is never removed.
        folder = Path(d) / "mine"
        folder.mkdir()
        (folder / "keep.txt").write_text("mine")
        r = run(python, MAKE_VENV, "ort", folder)
        check(r.returncode == 2 and "not a virtual environment" in r.stderr and (folder / "keep.txt").is_file(),
              "a folder that is not a venv is refused (exit 2) and left as it was")
        # --imports: the venv's interpreter has what the file names; the bare interpreter (-S: no site-packages) not.
        check(run(python, MAKE_VENV, "--imports", "ort", venv_python).returncode == 0, "--imports: the venv's Python passes")
        bare = Path(d) / "bare-python"
        bare.write_text(f"#!/bin/sh\nexec '{python}' -S \"$@\"\n")
        bare.chmod(0o755)
        check(run(python, MAKE_VENV, "--imports", "ort", bare).returncode == 1, "--imports: a Python without them fails")
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print("the route made a venv that --runtime ort takes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
