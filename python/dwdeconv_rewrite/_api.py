"""rewrite() and check(): the binary's command line, run on a temporary directory, its JSON report parsed.

The binary is the only implementation. These functions turn keywords into its options, hand it the model as a
file, and read back the model it wrote and its report; every failure is a DwdeconvError with the binary's exit
code and its message.
"""

import json
import math
import operator
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from dwdeconv_rewrite._binary import EXIT_NOT_FOUND, find_binary
from dwdeconv_rewrite._process import run as run_binary

# The binary's exit codes (cli/exit_codes.h).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # verification or a gate failed, or could not be done
EXIT_USAGE = 2  # a bad option or argument, from Python too
EXIT_INVALID_MODEL = 3  # an invalid model, a model that failed validation, or an I/O error

# The built-in runtime: the binary's executor over XNNPACK, which --compare runs without --runtime.
BUILTIN_RUNTIME = "xnnpack"


class DwdeconvError(Exception):
    """A run that failed. `exit_code` is the binary's (or 2 for an argument Python refused, 127 when there is no
    binary), `message` what went wrong, `log` the binary's stderr, `report` its JSON report when it wrote one."""

    def __init__(self, exit_code, message, log="", report=None):
        super().__init__("%s (exit %d)" % (message, exit_code))
        self.exit_code = exit_code
        self.message = message
        self.log = log
        self.report = report


class Result:
    """What rewrite() returns. `model` is an onnx.ModelProto when onnx is importable, else the model's bytes;
    `report` the JSON report as a dict; `log` the binary's stderr; `path` the output file when `output` was given."""

    def __init__(self, model, report, log, path=None):
        self.model = model
        self.report = report
        self.log = log
        self.path = path

    @property
    def rewritten(self):
        """How many nodes were rewritten."""
        return self.report.get("rewritten", 0)

    @property
    def kept(self):
        """How many nodes were kept, each with its reason in report["nodes"]."""
        return self.report.get("kept", 0)

    @property
    def verified(self):
        """True when verification ran and passed, None when it did not run (verify=False)."""
        verify = self.report.get("verify")
        return None if verify is None else bool(verify.get("passed"))

    def __repr__(self):
        return "Result(rewritten=%d, kept=%d, verified=%r, model=%s)" % (
            self.rewritten, self.kept, self.verified, type(self.model).__name__)


class CheckResult:
    """What check() returns: `passed` (the comparison, and the speedup gate when one was asked for), `report` the
    JSON report as a dict, `log` the binary's stderr, `error` the report's reason when it did not pass."""

    def __init__(self, passed, report, log):
        self.passed = passed
        self.report = report
        self.log = log
        self.error = report.get("error")

    @property
    def speedup(self):
        """original time / rewritten time with bench=True, else None."""
        bench = self.report.get("bench")
        return None if bench is None else bench.get("speedup")

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return "CheckResult(passed=%r, speedup=%r, error=%r)" % (self.passed, self.speedup, self.error)


def _usage(message):
    return DwdeconvError(EXIT_USAGE, message)


def _onnx():
    try:
        import onnx
    except ImportError:
        return None
    return onnx


def _is_model_proto(value):
    onnx = _onnx()
    return onnx is not None and isinstance(value, onnx.ModelProto)


def _names(value, what):
    """A name or an iterable of names, as a list of str."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    try:
        names = [os.fspath(v) for v in value]
    except TypeError:
        raise _usage("%s: expected a str or a list of str, not %s" % (what, type(value).__name__)) from None
    if not all(isinstance(n, str) for n in names):
        raise _usage("%s: expected a str or a list of str" % what)
    return names


def _input_shape_args(input_shapes):
    """{"image": (1, 4, 256, 256)} or ["image=1x4x256x256"] as --input-shape options."""
    if input_shapes is None:
        return []
    if isinstance(input_shapes, dict):
        texts = []
        for name, dims in input_shapes.items():
            if isinstance(dims, str):
                texts.append("%s=%s" % (name, dims))
            else:
                # Whole numbers only: int(8.7) would run the model at 8 and report it verified; True is not 1.
                try:
                    if isinstance(dims, (bytes, bytearray)) or any(isinstance(d, bool) for d in dims):
                        raise TypeError
                    whole = [operator.index(d) for d in dims]
                except TypeError:
                    raise _usage("input_shapes[%r]: expected a sequence of ints or 'AxBxC', not %r" % (name, dims)) from None
                texts.append("%s=%s" % (name, "x".join(str(d) for d in whole)))
    else:
        texts = _names(input_shapes, "input_shapes")
    return ["--input-shape=" + t for t in texts]


def _cli_path(path):
    """A path (str, bytes or os.PathLike) as an argument the binary reads as a file: '-' is its stdin, and a leading
    '-' an option, so such a relative path is given as ./PATH."""
    path = os.fsdecode(path)
    return "./" + path if path.startswith("-") else path


def _model_file(model, directory, name, what):
    """The path the binary reads `model` from: the path itself, or a file in `directory` holding its bytes."""
    if isinstance(model, Result):
        model = model.path if model.path is not None else model.model
    if isinstance(model, (str, os.PathLike)):
        return _cli_path(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif _is_model_proto(model):
        onnx = _onnx()
        path = os.path.join(directory, name)
        # Over protobuf's 2 GB limit the model can only be a file with its tensors outside, which the binary reads.
        large = model.ByteSize() >= 2**31 - 1
        onnx.save_model(model, path, save_as_external_data=large, location=name + ".data")
        return path
    elif hasattr(model, "SerializeToString"):
        raise _usage("%s: an onnx.ModelProto needs the onnx package importable here" % what)
    else:
        raise _usage("%s: expected a path, bytes or an onnx.ModelProto, not %s" % (what, type(model).__name__))
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _run(args):
    """Runs the binary with `args`; (exit code, stderr text). A KeyboardInterrupt or SIGTERM meanwhile is passed on to
    the binary, which cleans up before the KeyboardInterrupt (or SystemExit(143)) goes on (_process.run)."""
    binary, problem = find_binary()
    if binary is None:
        raise DwdeconvError(EXIT_NOT_FOUND, problem)
    # stderr to an unnamed file, not a pipe: nothing to read while waiting, and nothing left behind however this ends.
    with tempfile.TemporaryFile() as err:
        code = run_binary([binary] + args, stdout=subprocess.DEVNULL, stderr=err)
        err.seek(0)
        return code, err.read().decode("utf-8", errors="replace")


def _read_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# "dwdeconv-rewrite: error: MESSAGE", the binary's error lines (with or without the program name).
_ERROR_LINE = re.compile(r"(?:^|: )error: (.*)")


def _failure(code, log, report):
    """The DwdeconvError for a run that exited `code`: the report's error, else the binary's error lines."""
    message = report.get("error") if isinstance(report, dict) else None
    if not message:
        errors = [m.group(1) for m in map(_ERROR_LINE.search, log.splitlines()) if m]
        # A command-line parse error is printed without the prefix, and ends with this hint.
        others = [line for line in log.strip().splitlines() if line and line != "Run with --help for more information."]
        message = "; ".join(errors or others) or "dwdeconv-rewrite exited %d" % code
    return DwdeconvError(code, message, log, report)


def _speedup_gate(value):
    """min_speedup as the float --min-speedup takes: a finite number > 0, as the binary requires; not a bool
    (float(True) would make it 1.0)."""
    number = None
    if not isinstance(value, bool) and getattr(getattr(value, "dtype", None), "kind", "") != "b":
        try:
            number = float(value)
        except (TypeError, ValueError):
            pass
    if number is None or not (math.isfinite(number) and number > 0):
        raise _usage("min_speedup: expected a finite number > 0, not %r" % (value,))
    return number


def rewrite(model, *, target=None, verify=False, forms=None, only=(), skip=(), input_shapes=None, output=None,
            args=()):
    """Rewrites `model` (a path, bytes or an onnx.ModelProto) as `dwdeconv-rewrite MODEL -o OUT` does.

    target: a --target name (None: the default profile). verify: run both models through XNNPACK and compare.
    forms: the --forms to rewrite (a list or "a,b"). only, skip: node names. input_shapes: {"image": (1, 4, 256,
    256)} for --verify on symbolic dims. output: also keep the rewritten model at this path. args: further
    options, as on the command line. Raises DwdeconvError on any failure, a failed verification included."""
    if not isinstance(verify, bool):
        raise _usage("verify: expected True or False, not %r" % (verify,))
    options = []
    if target is not None:
        if not isinstance(target, str):
            raise _usage("target: expected a str, not %s" % type(target).__name__)
        options.append("--target=" + target)
    if verify:
        options.append("--verify")
    if forms is not None:
        form_list = forms.split(",") if isinstance(forms, str) else _names(forms, "forms")
        options.append("--forms=" + ",".join(form_list))
    options += ["--only=" + n for n in _names(only, "only")]
    options += ["--skip=" + n for n in _names(skip, "skip")]
    options += _input_shape_args(input_shapes)
    options += _names(args, "args")

    with tempfile.TemporaryDirectory(prefix="dwdeconv-rewrite-") as tmp:
        source = _model_file(model, tmp, "model.onnx", "model")
        out = os.fsdecode(output) if output is not None else os.path.join(tmp, "model.xnn.onnx")
        report_path = os.path.join(tmp, "report.json")
        code, log = _run([source, "-o", _cli_path(out), "--report", report_path] + options)
        report = _read_report(report_path)
        if code != EXIT_OK:
            raise _failure(code, log, report)
        if report is None:
            raise DwdeconvError(EXIT_INVALID_MODEL, "the run passed but wrote no readable report", log)
        onnx = _onnx()
        if onnx is not None:
            rewritten = onnx.load_model(out)  # with its external data, read before the directory goes
        else:
            data_files = [p for p in os.listdir(tmp) if p not in ("model.onnx", "model.xnn.onnx", "report.json")]
            if output is None and data_files:
                raise DwdeconvError(EXIT_INVALID_MODEL, "the rewritten model keeps tensors in external data (%s), "
                                    "which bytes cannot carry: install onnx, or pass output=PATH" % ", ".join(data_files),
                                    log, report)
            rewritten = Path(out).read_bytes()
        return Result(rewritten, report, log, out if output is not None else None)


def check(original, rewritten, *, runtime=BUILTIN_RUNTIME, bench=False, min_speedup=None, input_shapes=None,
          python=None, args=()):
    """Compares `rewritten` against `original` (each a path, bytes, an onnx.ModelProto, or a rewrite() Result) on
    `runtime`: `dwdeconv-rewrite ORIGINAL --compare REWRITTEN [--bench] --report R.json`, with `--verify --runtime
    NAME --python PATH` for a runtime other than the built-in "xnnpack" (`python` defaults to this interpreter,
    where the extras [ort], [litert] and [executorch] install those runtimes). bench: time both too; min_speedup:
    fail below this speedup (--min-speedup). Returns a CheckResult, false when the comparison or the gate failed
    (exit 1); raises DwdeconvError when the check could not run at all (a bad argument, an unreadable model)."""
    if not isinstance(runtime, str) or not runtime:
        raise _usage("runtime: expected a runtime name such as 'xnnpack', 'ort', 'litert' or 'executorch'")
    options = []
    if runtime != BUILTIN_RUNTIME:
        options += ["--verify", "--runtime=" + runtime, "--python=" + os.fspath(python or sys.executable)]
    elif python is not None:
        raise _usage("python: only a runtime other than the built-in 'xnnpack' runs in Python")
    if bench or min_speedup is not None:
        options.append("--bench")
    if min_speedup is not None:
        options.append("--min-speedup=%r" % _speedup_gate(min_speedup))
    options += _input_shape_args(input_shapes)
    options += _names(args, "args")

    with tempfile.TemporaryDirectory(prefix="dwdeconv-rewrite-") as tmp:
        first = _model_file(original, tmp, "original.onnx", "original")
        second = _model_file(rewritten, tmp, "rewritten.onnx", "rewritten")
        report_path = os.path.join(tmp, "report.json")
        code, log = _run([first, "--compare", second, "--report", report_path] + options)
        report = _read_report(report_path)
        if code == EXIT_OK and report is not None:
            return CheckResult(True, report, log)
        if code == EXIT_CHECK_FAILED and report is not None:
            return CheckResult(False, report, log)
        raise _failure(code, log, report)
