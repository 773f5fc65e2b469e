"""rewrite() and compare(): the binary's command line, run on a temporary directory, its JSON report parsed.

The binary is the only implementation. These functions turn keywords into its options, hand it the model as a
file, and read back the model it wrote and its report; every failure is a DwdeconvError with the binary's exit
code and its message. Result.save() has the binary copy the model it wrote where the caller asks (`--copy`), as
`-o PATH` would have written it.
"""

import contextlib
import json
import math
import numbers
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
import weakref

from dwdeconv_rewrite._binary import EXIT_NOT_FOUND, find_binary
from dwdeconv_rewrite._errors import (  # noqa: F401 - the exit codes are part of this module's API
    EXIT_CANNOT_VERIFY,
    EXIT_CHECK_FAILED,
    EXIT_INVALID_MODEL,
    EXIT_OK,
    EXIT_USAGE,
    DwdeconvError,
    usage_error as _usage,
)
from dwdeconv_rewrite._process import run as run_binary

# The built-in runtime: the binary's executor over XNNPACK, which --compare runs without --runtime.
BUILTIN_RUNTIME = "xnnpack"
PRECISIONS = ("fp32", "fp16", "int8", "bf16")  # --precision's values


class Result:
    """What rewrite() returns. `model` is the rewritten model: an onnx.ModelProto when onnx is importable (its
    external data loaded), else the model file's bytes. `report` is the JSON report as a dict, `log` the binary's
    stderr, `path` the output file when `output` was given. save(path) writes the model as `-o PATH` would."""

    def __init__(self, model, report, log, path=None):
        self.model = model
        self.report = report
        self.log = log
        self.path = path
        self._written = None  # the model file the binary wrote: `path`, or one in a directory removed with this Result
        self._input = None  # the input model's path, when the caller gave a path
        self._data_name = None  # the --external-data NAME the rewrite was given, which its data file keeps

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

    def save(self, path):
        """Writes the rewritten model to `path` (a str, bytes or os.PathLike) as `dwdeconv-rewrite MODEL -o PATH`
        writes it, without the onnx package: the binary copies the model it wrote (`--copy`), and when that keeps
        tensors outside, its data file beside PATH under the binary's name (PATH.data, or the `--external-data NAME`
        given in `args`); both are staged and renamed, so an error leaves no partial file. It never writes over the
        input model or a data file the input reads (`--protect`; DwdeconvError, exit 2, naming both), nor over a
        directory or another file that is not a regular one (exit 2); an I/O error is exit 3. It saves the model the
        binary wrote, not later edits to a ModelProto in `model` (onnx.save writes those); a Result made by hand saves
        its `model`. Returns `path` as a str."""
        try:
            target = os.fsdecode(os.fspath(path))
        except TypeError:
            raise _usage("save: expected a path, not %s" % type(path).__name__) from None
        with tempfile.TemporaryDirectory(prefix="dwdeconv-rewrite-") as tmp:
            if self._written is not None:
                source, labels = self._written, [(self._written, self.path or "<Result.model>")]
            else:
                source, kind = _model_file(self.model, tmp, "model.onnx", "model")
                labels = _labels(source, kind and "<Result.model>")
            args = [_cli_path(source), "-o", _cli_path(target), "--copy"]
            if self._input is not None:
                args += ["--protect", _cli_path(self._input)]
            if self._data_name is not None:
                args.append("--external-data=" + self._data_name)
            code, log = _run(args)
            if code != EXIT_OK:
                raise _failure(code, _relabel(log, labels), None)
        return target

    def __repr__(self):
        return "Result(rewritten=%d, kept=%d, verified=%r, model=%s)" % (
            self.rewritten, self.kept, self.verified, type(self.model).__name__)


class CheckResult:
    """What compare() returns: `passed` (the comparison, and the speedup gate when one was asked for), `report` the
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


def _option_value(options, name):
    """The value of the last `name VALUE` or `name=VALUE` in the command line `options`, or None."""
    value = None
    for i, option in enumerate(options):
        if option == name and i + 1 < len(options):
            value = options[i + 1]
        elif option.startswith(name + "="):
            value = option[len(name) + 1:]
    return value


def _read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DwdeconvError(EXIT_INVALID_MODEL, "cannot read %s: %s" % (path, e.strerror or e)) from None


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
    """The path the binary reads `model` from: the path itself, or a file in `directory` holding its bytes. Returns
    (path, None) for a path, else (path, what the caller gave: "bytes", "ModelProto" or "Result")."""
    kind = None
    if isinstance(model, Result):
        kind = "Result"
        model = model.path if model.path is not None else model.model
    if isinstance(model, (str, os.PathLike)):
        return _cli_path(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        kind = kind or "bytes"
    elif _is_model_proto(model):
        onnx = _onnx()
        path = os.path.join(directory, name)
        # Over protobuf's 2 GB limit the model can only be a file with its tensors outside, which the binary reads.
        large = model.ByteSize() >= 2**31 - 1
        onnx.save_model(model, path, save_as_external_data=large, location=name + ".data")
        return path, kind or "ModelProto"
    elif hasattr(model, "SerializeToString"):
        raise _usage("%s: an onnx.ModelProto needs the onnx package importable here" % what)
    else:
        raise _usage("%s: expected a path, bytes or an onnx.ModelProto, not %s" % (what, type(model).__name__))
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path, kind


def _labels(path, label):
    """(temporary path, what messages name it instead) for a model the binary read from `path` and its data file."""
    if label is None:
        return []
    return [(path + ".data", label[:-1] + " data>"), (path, label)]


def _relabel(value, labels):
    """`value` (the binary's stderr, or its report) with each temporary path of `labels` replaced by its label, so
    that a message names the model as the caller gave it, not a file that is gone."""
    if isinstance(value, str):
        for path, label in labels:
            value = value.replace(path, label)
        return value
    if isinstance(value, list):
        return [_relabel(v, labels) for v in value]
    if isinstance(value, dict):
        return {k: _relabel(v, labels) for k, v in value.items()}
    return value


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
    """Rewrites `model` (a path, bytes or an onnx.ModelProto) as `dwdeconv-rewrite MODEL -o OUT` does, and returns a
    Result whose `model` is the rewritten model: an onnx.ModelProto when onnx is importable, else its bytes.
    Result.save(path) writes it, with its data file, without onnx.

    target: a --target name (None: the default profile). verify: run both models through XNNPACK and compare.
    forms: the --forms to rewrite (a list or "a,b"). only, skip: node names. input_shapes: {"image": (1, 4, 256,
    256)} for --verify on symbolic dims. output: also keep the rewritten model at this path. args: further
    options, as on the command line. Raises DwdeconvError on any failure, a failed verification included (exit_code
    EXIT_CHECK_FAILED, 1; EXIT_CANNOT_VERIFY, 4, when it could not be done); its message, log and report name a
    model given as bytes `<bytes>` and one given as a ModelProto `<ModelProto>`."""
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

    tmp = tempfile.mkdtemp(prefix="dwdeconv-rewrite-")
    kept = False  # tmp holds the rewritten model for the Result, which removes it
    try:
        source, kind = _model_file(model, tmp, "model.onnx", "model")
        out = os.fsdecode(output) if output is not None else os.path.join(tmp, "model.xnn.onnx")
        report_path = os.path.join(tmp, "report.json")
        labels = _labels(source, kind and "<%s>" % kind) + [(os.path.join(tmp, "model.xnn.onnx"), "<Result.model>")]
        code, log = _run([source, "-o", _cli_path(out), "--report", report_path] + options)
        report = _relabel(_read_report(report_path), labels)
        log = _relabel(log, labels)
        if code != EXIT_OK:
            raise _failure(code, log, report)
        if report is None:
            raise DwdeconvError(EXIT_INVALID_MODEL, "the run passed but wrote no readable report", log)
        data_name = _option_value(options, "--external-data")
        onnx = _onnx()
        if onnx is not None:
            rewritten = onnx.load_model(out)  # with its external data
        else:
            rewritten = _read_file(out)
            # The binary names its data file OUT.data, or NAME with --external-data NAME.
            data_file = os.path.join(os.path.dirname(out), data_name or os.path.basename(out) + ".data")
            if output is None and os.path.exists(data_file):
                raise DwdeconvError(EXIT_INVALID_MODEL, "the rewritten model keeps tensors in external data (%s), "
                                    "which bytes cannot carry: install onnx, or pass output=PATH"
                                    % os.path.basename(data_file), log, report)
        result = Result(rewritten, report, log, out if output is not None else None)
        # Absolute, so that save() finds them after a chdir.
        result._written = os.path.abspath(out)
        result._input = os.path.abspath(source) if kind is None else None
        result._data_name = data_name
        if output is None:
            # The binary's files stay for save(): the model and its data file, while the Result lives.
            for name in ("model.onnx", "model.onnx.data", "report.json"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(tmp, name))
            weakref.finalize(result, shutil.rmtree, tmp, True)
            kept = True
        return result
    finally:
        if not kept:
            shutil.rmtree(tmp, ignore_errors=True)


def compare(original, rewritten, *, runtime=BUILTIN_RUNTIME, bench=False, min_speedup=None, input_shapes=None,
            python=None, precision=None, threads=None, args=()):
    """Compares `rewritten` against `original` (each a path, bytes, an onnx.ModelProto, or a rewrite() Result) on
    `runtime`, as the command line's --compare does: `dwdeconv-rewrite ORIGINAL --compare REWRITTEN [--bench]
    --report R.json`, with `--verify --runtime NAME --python PATH` for a runtime other than the built-in "xnnpack"
    (`python` defaults to this interpreter, where the extras [ort], [litert], [executorch], [openvino] and [mnn] install
    those runtimes). bench: time both too; min_speedup: fail below this speedup (--min-speedup). precision: "fp32",
    "fp16", "int8" or "bf16" (any case), both models converted to it on the runtime (--precision: litert and
    executorch have fp32, fp16 and int8, openvino fp32 and bf16, mnn fp32 and fp16; the binary refuses, exit 2, what the runtime
    lacks). threads: the thread count both models run with (--threads, a whole number from 1 to 256; default 1).
    Returns a CheckResult, false when the comparison or the gate failed (exit 1); raises DwdeconvError when the
    comparison could not run at all: exit_code EXIT_CANNOT_VERIFY (4) when the models could not be run and compared (a
    shape not known, an op the executor lacks, a runtime that cannot convert one), 2 for a bad argument, 3 for an
    unreadable model. Messages name a model not given as a path
    by what it was and its side: `<bytes: original>`, `<ModelProto: rewritten>`, `<Result: rewritten>`."""
    if not isinstance(runtime, str) or not runtime:
        raise _usage("runtime: expected a runtime name such as 'xnnpack', 'ort', 'litert' or 'executorch'")
    options = []
    # The binary takes any case and the targets' aliases (tflite, onnxruntime) and refuses a name it does not know
    # with its list: the name goes to it as given. Only whether it is the executor (which takes no --python) is
    # decided here, in the binary's terms: without regard to case.
    if runtime.lower() != BUILTIN_RUNTIME:
        options += ["--verify", "--runtime=" + runtime, "--python=" + os.fspath(python or sys.executable)]
    elif python is not None:
        raise _usage("python: only a runtime other than the built-in 'xnnpack' runs in Python")
    if bench or min_speedup is not None:
        options.append("--bench")
    if min_speedup is not None:
        options.append("--min-speedup=%r" % _speedup_gate(min_speedup))
    if precision is not None:
        if not isinstance(precision, str) or precision.lower() not in PRECISIONS:
            raise _usage("precision: expected one of %s, not %r" % (", ".join(PRECISIONS), precision))
        options.append("--precision=" + precision.lower())
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
            raise _usage("threads: expected a whole number >= 1, not %r" % (threads,))
        options.append("--threads=%d" % threads)
    options += _input_shape_args(input_shapes)
    options += _names(args, "args")

    with tempfile.TemporaryDirectory(prefix="dwdeconv-rewrite-") as tmp:
        first, first_kind = _model_file(original, tmp, "original.onnx", "original")
        second, second_kind = _model_file(rewritten, tmp, "rewritten.onnx", "rewritten")
        labels = (_labels(first, first_kind and "<%s: original>" % first_kind)
                  + _labels(second, second_kind and "<%s: rewritten>" % second_kind))
        report_path = os.path.join(tmp, "report.json")
        code, log = _run([first, "--compare", second, "--report", report_path] + options)
        report = _relabel(_read_report(report_path), labels)
        log = _relabel(log, labels)
        if code == EXIT_OK and report is not None:
            return CheckResult(True, report, log)
        if code == EXIT_CHECK_FAILED and report is not None:
            return CheckResult(False, report, log)
        raise _failure(code, log, report)


def check(original, rewritten, **options):
    """Deprecated alias of compare(), for one release: the command line's --compare, not its --check (the gate that
    exits 1 when a node is left to rewrite). Warns with a DeprecationWarning, then returns compare(...)."""
    warnings.warn("dwdeconv_rewrite.check() is deprecated and will be removed in the next release: call "
                  "dwdeconv_rewrite.compare(), the same function (the command line's --compare)",
                  DeprecationWarning, stacklevel=2)
    return compare(original, rewritten, **options)
