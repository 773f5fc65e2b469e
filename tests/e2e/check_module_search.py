"""Where a Python --runtime's code comes from: only where the installation put it.

Usage: check_module_search.py DWDECONV_REWRITE. Runs the binary as an attacker on the same machine would hope:
  1. a copy of the binary in <dir>/a/b/ with a planted <dir>/dwdeconv_rewrite/runtimes/__main__.py (the binary used
     to search <its folder>/../..): nothing planted runs, exit 2 naming where it looked;
  2. from a working directory holding a planted dwdeconv_rewrite package (`python -m` puts its working directory
     first on sys.path): nothing planted runs, the real module answers;
  3. with DWDECONV_PYTHONPATH naming a folder that also holds a planted `onnxruntime` (as a venv's site-packages
     holds the real one beside the package): the interpreter imports its own onnxruntime, and the report names that
     version. Needs onnxruntime in this interpreter; said and skipped otherwise;
  4. a package anyone could change (a world-writable file or __pycache__ in it, a symlink in it, a world-writable
     folder above it, a file owned by another user): refused, exit 2, before any of it runs.
This interpreter is the --runtime's Python (--python). Exits 77 when it cannot run the cases at all.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import report_archive  # beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_PACKAGE = os.path.join(HERE, "..", "..", "python", "dwdeconv_rewrite")
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "upsampler_small.onnx")

failures = []


def check(condition, what):
    print(("ok: " if condition else "FAILED: ") + what, flush=True)
    if not condition:
        failures.append(what)


def plant(folder, marker):
    """A dwdeconv_rewrite package under `folder` whose every entry point writes `marker`."""
    runtimes = os.path.join(folder, "dwdeconv_rewrite", "runtimes")
    os.makedirs(runtimes)
    code = f"open({marker!r}, 'w').write('planted code ran')\n"
    for name in ("__init__.py", "__main__.py"):
        for where in (runtimes, os.path.dirname(runtimes)):
            with open(os.path.join(where, name), "w") as f:
                f.write(code)


def run(args, cwd, env):
    reports = report_archive.watch(args, cwd)
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env)
    report_archive.copy_written(reports)
    print(f"$ {' '.join(args)}  (in {cwd})\n  exit {r.returncode}\n  " + r.stderr.strip().replace("\n", "\n  "), flush=True)
    return r


def main():
    tool = os.path.abspath(sys.argv[1])
    env = {k: v for k, v in os.environ.items() if k not in ("DWDECONV_PYTHONPATH", "PYTHONPATH")}
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "model.onnx")
        shutil.copy(EXAMPLE, model)
        common = ["--dry-run", "--tune", "--input-shape", "1,8,8,8", "--runtime", "ort", "--python", sys.executable]

        # 1. A copy of the binary in a folder of its own, a package planted two levels up.
        marker = os.path.join(d, "ran-1")
        os.makedirs(os.path.join(d, "a", "b"))
        copy = os.path.join(d, "a", "b", "dwdeconv-rewrite")
        shutil.copy(tool, copy)
        plant(d, marker)
        r = run([copy, model] + common, d, env)
        check(not os.path.exists(marker), "1: the package planted at <binary's folder>/../.. never runs")
        check(r.returncode == 2 and "was not found where this installation puts it" in r.stderr,
              "1: the copied binary finds no module (exit 2) and says where it looked")

        # 2. The built binary, run from a working directory holding a planted package.
        work = os.path.join(d, "work")
        os.makedirs(work)
        marker = os.path.join(d, "ran-2")
        plant(work, marker)
        r = run([tool, model] + common, work, env)
        check(not os.path.exists(marker), "2: a dwdeconv_rewrite package in the working directory never runs")
        check("planted" not in r.stderr, "2: nothing planted answered")

        # 4. A package anyone could change, now or between the check and the import: a world-writable file in it, a
        #    world-writable __pycache__ (a planted .pyc is run), a symlink in it, a world-writable folder above it
        #    (no sticky bit), a file owned by another user. Each refused (exit 2) before any of it runs.
        def copied_package(name):
            root = os.path.join(d, "pkg-" + name)
            os.makedirs(root)
            shutil.copytree(os.path.abspath(SOURCE_PACKAGE), os.path.join(root, "dwdeconv_rewrite"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            return root, os.path.join(root, "dwdeconv_rewrite")

        attacks = []
        root, pkg = copied_package("file")
        os.chmod(os.path.join(pkg, "runtimes", "check.py"), 0o666)
        attacks.append(("a world-writable file in it", root, "check.py is writable by its group or by others"))
        root, pkg = copied_package("pycache")
        os.makedirs(os.path.join(pkg, "runtimes", "__pycache__"))
        os.chmod(os.path.join(pkg, "runtimes", "__pycache__"), 0o777)
        attacks.append(("a world-writable __pycache__", root, "__pycache__ is writable by its group or by others"))
        root, pkg = copied_package("link")
        os.symlink(os.path.join(pkg, "runtimes", "check.py"), os.path.join(pkg, "runtimes", "extra.py"))
        attacks.append(("a symbolic link in it", root, "extra.py is a symbolic link"))
        root, pkg = copied_package("parent")
        os.chmod(root, 0o777)
        attacks.append(("a world-writable folder above it", root, "is writable by its group or by others"))
        if os.geteuid() == 0:
            root, pkg = copied_package("owner")
            os.chown(os.path.join(pkg, "__init__.py"), 65534, 65534)
            attacks.append(("a file owned by another user", root, "__init__.py is owned by another user"))
        else:
            print("SKIPPED the other-owner case: it needs root to chown")
        for what, root, said in attacks:
            r = run([tool, model] + common, d, dict(env, DWDECONV_PYTHONPATH=root))
            check(r.returncode == 2 and said in r.stderr, f"4: {what}: refused (exit 2) naming it")

        # 5. A relative --python names the interpreter where the command was run, not in the child's scratch folder.
        exe = os.path.realpath(sys.executable)
        r = run([tool, model] + common[:-1] + [os.path.relpath(exe, d)], d, env)
        check("cannot run the Python interpreter" not in r.stderr and r.returncode in (0, 2),
              "5: a relative --python is found from the working directory")

        # 3. DWDECONV_PYTHONPATH names a folder with the package and a planted onnxruntime beside it.
        if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
            print(f"SKIPPED case 3: {sys.executable} lacks onnxruntime or onnx")
        else:
            import onnxruntime
            site = os.path.join(d, "site")
            os.makedirs(os.path.join(site, "onnxruntime"))
            os.symlink(os.path.abspath(SOURCE_PACKAGE), os.path.join(site, "dwdeconv_rewrite"))
            with open(os.path.join(site, "onnxruntime", "__init__.py"), "w") as f:
                f.write("__version__ = '0.0.0-planted'\n")
            report = os.path.join(d, "r.json")
            out = os.path.join(d, "out.onnx")
            r = run([tool, model, "-o", out, "--verify", "--input-shape", "1,8,8,8", "--target", "xnnpack", "--runtime",
                     "ort", "--python", sys.executable, "--report", report], d, dict(env, DWDECONV_PYTHONPATH=site))
            check(r.returncode == 0, "3: the rewrite is verified on ONNX Runtime")
            with open(report) as f:
                versions = json.load(f)["runtime"]["versions"]
            check(versions.get("onnxruntime") == onnxruntime.__version__,
                  f"3: the report names the interpreter's own onnxruntime {onnxruntime.__version__} ({versions})")
            check("planted" not in r.stderr, "3: the planted onnxruntime was not imported")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("the runtimes' code comes only from where the installation put it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
