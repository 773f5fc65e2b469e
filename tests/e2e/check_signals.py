"""SIGINT, SIGTERM and SIGHUP leave nothing behind.

Usage: check_signals.py DWDECONV_REWRITE EXAMPLES_DIR. Interrupts the tool mid-run and checks that it exits 128 + N,
that the staged report (`.dwdeconv-*`), the output, an --out-dir it made and its scratch directories are gone, and,
with --runtime ort when this interpreter has onnxruntime, that its Python child (and what that started) is gone too.
Needs only the standard library for the executor's cases; the ORT case is skipped, saying so, without onnxruntime.
"""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

failures = []


def check(condition, what):
    print(("ok: " if condition else "FAILED: ") + what, flush=True)
    if not condition:
        failures.append(what)


def children_of(pid):
    """The pids whose parent is `pid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def interrupt(tool, args, cwd, env, sig, ready, what):
    """Starts the tool, waits until ready(proc) says the run is under way (at most 60 s), sends `sig`."""
    proc = subprocess.Popen([tool] + args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while proc.poll() is None and not ready(proc) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(proc.poll() is None, f"{what}: the run is still going when {sig.name} is sent")
    seen = children_of(proc.pid)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    check(proc.returncode == 128 + sig.value, f"{what}: exit {128 + sig.value} after {sig.name} (got {proc.returncode})")
    # The run ends with one line that says so, and says it once.
    last = err.rstrip("\n").split("\n")[-1] if err.strip() else ""
    check(last.startswith(f"dwdeconv-rewrite: interrupted by {sig.name} (exit {128 + sig.value})")
          and err.count("interrupted by") == 1, f"{what}: one 'interrupted' line ends the log (got {last!r})")
    return seen, err


def main():
    tool, examples = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.onnx")
        shutil.copy(os.path.join(examples, "migan_tiny_deconv.onnx"), model)
        scratch = os.path.join(d, "tmp")
        os.makedirs(scratch)
        env = dict(os.environ, TMPDIR=scratch)

        def leftovers(folder):
            return sorted(n for n in os.listdir(folder) if n.startswith(".dwdeconv-") or n.startswith("dwdeconv-"))

        def staged(_proc):
            return any(n.startswith(".dwdeconv-") for n in os.listdir(d))

        # The executor, a long bench: the report is staged from the start. --target xnnpack rewrites MI-GAN's
        # ConvTransposes (the default keeps them all, and a run with nothing rewritten has nothing to time).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            what = f"executor, {sig.name}"
            interrupt(tool, [model, "-o", "out.onnx", "--target", "xnnpack", "--verify", "--bench", "--runs", "100000",
                             "--report", "r.json"], d, env, sig, staged, what)
            check(leftovers(d) == [] and leftovers(scratch) == [], f"{what}: no staged file is left ({leftovers(d)})")
            check(not os.path.exists(os.path.join(d, "out.onnx")) and not os.path.exists(os.path.join(d, "r.json")),
                  f"{what}: no output and no report")

        # A batch into an --out-dir it makes: the directory goes too while it is still empty.
        interrupt(tool, [model, "--out-dir", "new/out", "--target", "xnnpack", "--verify", "--bench", "--runs", "100000"],
                  d, env, signal.SIGINT, lambda _p: os.path.isdir(os.path.join(d, "new", "out")), "batch, SIGINT")
        check(not os.path.exists(os.path.join(d, "new")), "batch: the --out-dir it made (and its parent) is removed")

        # Started with DWDECONV_EXIT_WITH_PARENT=1 (as the Python API and the Action start it): when its parent is
        # killed, even by SIGKILL, the run ends as for a SIGTERM, leaving nothing behind.
        parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                   "p = subprocess.Popen(sys.argv[1:]); print(p.pid, flush=True); time.sleep(600)",
                                   tool, model, "-o", "out.onnx", "--target", "xnnpack", "--verify", "--bench", "--runs",
                                   "100000", "--report", "r.json"], cwd=d, env=dict(env, DWDECONV_EXIT_WITH_PARENT="1"),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while not staged(None) and time.monotonic() < deadline:
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        check(not alive(child), "parent killed: the run started with DWDECONV_EXIT_WITH_PARENT=1 ends too")
        check(leftovers(d) == [] and not os.path.exists(os.path.join(d, "out.onnx")),
              f"parent killed: nothing is left ({leftovers(d)})")

        if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
            print(f"SKIPPED the --runtime ort case: {sys.executable} lacks onnxruntime or onnx")
        else:
            # ONNX Runtime, a long bench: the Python child, in its own process group, ends with the run.
            # The check child, not the probe before it (both run the module in a dwdeconv-runtime-* directory).
            def child_started(proc):
                return (any(cmdline(p)[2:4] == ["dwdeconv_rewrite.runtimes", "check"] for p in children_of(proc.pid))
                        and any(n.startswith("dwdeconv-runtime-") for n in os.listdir(scratch)))

            seen, _ = interrupt(tool, [model, "-o", "out.onnx", "--target", "xnnpack", "--runtime", "ort", "--python",
                                       sys.executable, "--bench", "--runs", "100000", "--report", "r.json"], d, env,
                                signal.SIGTERM, child_started, "ort, SIGTERM")
            check(bool(seen), f"ort: the Python child was running ({seen})")
            time.sleep(0.2)
            check(not any(alive(p) for p in seen), f"ort: the Python child is gone ({[p for p in seen if alive(p)]})")
            check(leftovers(d) == [] and leftovers(scratch) == [],
                  f"ort: no scratch directory or staged file is left ({leftovers(d) + leftovers(scratch)})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("a signal leaves nothing behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
