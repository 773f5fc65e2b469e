"""rewrite() and compare(): the binary's command line, run on a temporary directory, its JSON report parsed.

The binary is the only implementation. These functions turn keywords into its options, hand it the model as a
file, and read back the model it wrote and its report; every failure is a DwdeconvError with the binary's exit
code and its message. Result.save() writes the model the binary wrote where the caller asks, as `-o PATH` would.
"""

import json
import math
import numbers
import operator
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
import weakref
from pathlib import Path

from dwdeconv_rewrite._binary import EXIT_NOT_FOUND, find_binary
from dwdeconv_rewrite._process import run as run_binary

# The binary's exit codes (cli/exit_codes.h).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # verification or a gate failed: the rewritten model computes something else, or is too slow
EXIT_USAGE = 2  # a bad option or argument, from Python too
EXIT_INVALID_MODEL = 3  # an invalid model, a model that failed validation, or an I/O error
EXIT_CANNOT_VERIFY = 4  # verification or timing could not be done: a shape not known, an op the executor lacks, a
#                         runtime that cannot convert or run a model (no verdict on the rewrite either way)

# The built-in runtime: the binary's executor over XNNPACK, which --compare runs without --runtime.
BUILTIN_RUNTIME = "xnnpack"
PRECISIONS = ("fp32", "fp16", "int8", "bf16")  # --precision's values


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
        writes it, without the onnx package: the binary's model file, and when it keeps tensors outside, its data
        file beside PATH under the binary's name (PATH.data, or the `--external-data NAME` given in `args`). The
        files are written to temporary files in their directories and renamed, data first, so an error leaves no
        partial file. It never writes over the input model or a data file the input reads (DwdeconvError, exit 2,
        naming both), nor over a directory or another file that is not a regular one (exit 2); an I/O error is exit 3.
        It saves the model the binary wrote, not later edits to a ModelProto in `model` (onnx.save writes those).
        Returns `path` as a str."""
        try:
            target = os.fsdecode(os.fspath(path))
        except TypeError:
            raise _usage("save: expected a path, not %s" % type(path).__name__) from None
        if self._written is None:  # a Result made by hand: its model, which has no data file
            model = self.model
            data = model.SerializeToString() if hasattr(model, "SerializeToString") else bytes(model)
            data_files = {}
        else:
            data = _read_file(self._written)
            # Each data file the model names, by the name it gets beside PATH: OUT.data becomes PATH.data.
            default_name = os.path.basename(self._written) + ".data"
            own_name = os.path.basename(target) + ".data"
            renames = {}
            data_files = {}
            try:
                locations = _external_locations(data)
            except ValueError as e:  # the file was changed since the binary wrote it
                raise DwdeconvError(EXIT_INVALID_MODEL, "%s: %s" % (self._written, e)) from None
            for location in sorted(locations):
                name = own_name if location == default_name else location
                renames[location] = name
                data_files[os.path.join(os.path.dirname(target), name)] = os.path.join(os.path.dirname(self._written), location)
            if any(old != new for old, new in renames.items()):
                data = _renamed_locations(data, renames)
        writes = [(target, "the saved model")] + [(f, "the saved model's data file") for f in data_files]
        _refuse_overwrites(writes, self._input_files())
        _write_atomically(target, data, data_files)
        return target

    def _input_files(self):
        """(path, what it is) of each file the rewrite read: the input model and the data files it names."""
        if self._input is None:
            return []
        files = [(self._input, "the input model")]
        try:
            locations = _external_locations(_read_file(self._input))
        except (DwdeconvError, ValueError):  # gone or changed since: the model's own path is still refused
            locations = ()
        directory = os.path.dirname(self._input)
        files += [(os.path.join(directory, loc), "external data that %s reads" % self._input) for loc in sorted(locations)]
        return files

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


# The fields of onnx.proto that hold a TensorProto at some depth, by message: field number -> the field's message.
# Every other field is copied as it is. TensorProto's field 13 is external_data, a list of (key, value) entries;
# the entry "location" names its data file, relative to the model's directory.
_TENSOR_FIELDS = {
    "ModelProto": {7: "GraphProto", 20: "TrainingInfoProto", 25: "FunctionProto"},
    "TrainingInfoProto": {1: "GraphProto", 2: "GraphProto"},
    "FunctionProto": {7: "NodeProto", 11: "AttributeProto"},
    "GraphProto": {1: "NodeProto", 5: "TensorProto", 15: "SparseTensorProto"},
    "NodeProto": {5: "AttributeProto"},
    "AttributeProto": {5: "TensorProto", 6: "GraphProto", 10: "TensorProto", 11: "GraphProto", 22: "SparseTensorProto",
                       23: "SparseTensorProto"},
    "SparseTensorProto": {1: "TensorProto", 2: "TensorProto"},
    "TensorProto": {13: "StringStringEntryProto"},
}
_LENGTH_DELIMITED = 2  # protobuf's wire type of strings, bytes and messages


def _read_varint(data, pos):
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("not a protobuf message: a truncated or overlong varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(data):
    """(field number, wire type, where the field starts, where its value starts, where it ends) of each field of the
    serialized message `data`."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, (_, end) = pos, _read_varint(data, pos)
        elif wire == 1:
            value, end = pos, pos + 8
        elif wire == _LENGTH_DELIMITED:
            length, value = _read_varint(data, pos)
            end = value + length
        elif wire == 5:
            value, end = pos, pos + 4
        else:
            raise ValueError("not an ONNX model: protobuf wire type %d" % wire)
        if end > len(data):
            raise ValueError("not a protobuf message: a field runs past its end")
        yield number, wire, start, value, end
        pos = end


def _map_locations(data, message, rename, seen):
    """The serialized `message` `data` (a memoryview) with the external data location L of each tensor in it replaced
    by rename[L] where rename has L; each L is added to `seen`. Returns `data` itself when nothing changed."""
    if message == "StringStringEntryProto":
        entry = {number: bytes(data[value:end]) for number, wire, _, value, end in _fields(data) if wire == _LENGTH_DELIMITED}
        if entry.get(1) != b"location" or 2 not in entry:
            return data
        location = entry[2].decode("utf-8", errors="surrogateescape")
        seen.add(location)
        if rename.get(location, location) == location:
            return data
        new = rename[location].encode("utf-8", errors="surrogateescape")
        return b"".join([_varint(1 << 3 | _LENGTH_DELIMITED), _varint(len(entry[1])), entry[1],
                         _varint(2 << 3 | _LENGTH_DELIMITED), _varint(len(new)), new])
    children = _TENSOR_FIELDS[message]
    parts = []
    copied = 0  # data[:copied] is in parts
    for number, wire, start, value, end in _fields(data):
        if wire != _LENGTH_DELIMITED or number not in children:
            continue
        inner = data[value:end]
        new = _map_locations(inner, children[number], rename, seen)
        if new is not inner:
            parts += [data[copied:start], _varint(number << 3 | _LENGTH_DELIMITED), _varint(len(new)), new]
            copied = end
    if not parts:
        return data
    parts.append(data[copied:])
    return b"".join(parts)


def _external_locations(model_bytes):
    """The data files (locations relative to the model's directory) a serialized ModelProto's tensors name."""
    seen = set()
    _map_locations(memoryview(model_bytes), "ModelProto", {}, seen)
    return seen


def _renamed_locations(model_bytes, rename):
    """A serialized ModelProto with its tensors' data file locations renamed, {old: new}; everything else as it was."""
    return bytes(_map_locations(memoryview(model_bytes), "ModelProto", rename, set()))


def _read_file(path):
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise DwdeconvError(EXIT_INVALID_MODEL, "cannot read %s: %s" % (path, e.strerror or e)) from None


def _same_file(a, b):
    """Whether paths a and b are one file: the same path once `..` and symbolic links are resolved, or, for files
    that exist, the same file (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_overwrites(writes, reads):
    """Raises DwdeconvError (exit 2) when a file of `writes` is one of `reads`, another of `writes`, or exists and is
    not a regular file; each a list of (path, what it is). As the binary refuses its outputs (cli/output_files.cpp)."""
    for i, (path, what) in enumerate(writes):
        for other, other_what in reads + writes[:i]:
            if _same_file(path, other):
                raise _usage("refusing to write %s (%s): it is %s (%s), nothing written; choose another path"
                             % (path, what, other, other_what))
        target = os.path.realpath(path)
        try:
            regular = stat.S_ISREG(os.stat(target).st_mode)
        except FileNotFoundError:
            regular = True  # a new file
        except OSError as e:
            raise DwdeconvError(EXIT_INVALID_MODEL, "cannot write %s: %s" % (path, e.strerror or e)) from None
        if not regular:
            raise _usage("refusing to write %s (%s): %s is not a regular file, nothing written" % (path, what, target))


def _umask():
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, ValueError, StopIteration, IndexError):
        mask = os.umask(0o022)  # briefly, where /proc does not say (Linux before 4.7)
        os.umask(mask)
        return mask


def _staged(path, write):
    """A temporary file in `path`'s directory (through a symbolic link `path`, its target's) that write(file) fills,
    with the mode `path` has, or the one a new file gets (0666 less the umask); (its path, the path to rename it
    to)."""
    final = os.path.realpath(path)  # a symbolic link is written through, and stays a link
    directory, name = os.path.split(final)
    fd, staged = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = stat.S_IMODE(os.stat(final).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(staged, mode)
    except BaseException:
        os.unlink(staged)
        raise
    return staged, final


def _write_atomically(target, model_bytes, data_files):
    """Writes `model_bytes` to `target` and copies each data file {destination: source}, all staged beside their
    destinations, then renamed, data files first. When a rename fails, the data files already renamed are put back
    as they were (the old file, kept through a hard link, or none): nothing is left half written."""
    staged_data = []  # (temporary file, destination)
    staged_model = None
    backups = []  # (destination, its old file's hard link or None), for each data file renamed
    try:
        for destination, source in data_files.items():
            staged_data.append(_staged(destination, lambda f, source=source: _copy_into(source, f)))
        staged_model = _staged(target, lambda f: f.write(model_bytes))
        for temporary, destination in staged_data:
            backups.append((destination, _hard_link_backup(destination)))
            os.replace(temporary, destination)
        os.replace(*staged_model)
    except BaseException as e:  # an interrupt too leaves no temporary file
        for temporary, _ in staged_data + ([staged_model] if staged_model else []):
            with _ignoring_os_errors():
                os.unlink(temporary)
        for destination, backup in backups:
            with _ignoring_os_errors():
                if backup is None:
                    os.unlink(destination)
                else:
                    os.replace(backup, destination)
        if not isinstance(e, OSError):
            raise
        raise DwdeconvError(EXIT_INVALID_MODEL, "cannot write %s: %s; nothing written"
                            % (e.filename or target, e.strerror or e)) from None
    finally:
        for _, backup in backups:
            if backup is not None:
                with _ignoring_os_errors():
                    os.unlink(backup)


class _ignoring_os_errors:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return kind is not None and issubclass(kind, OSError)


def _copy_into(source, f):
    try:
        with open(source, "rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)
    except FileNotFoundError as e:
        raise OSError(e.errno, "the rewritten model's data file is gone", source) from None


def _hard_link_backup(path):
    """A hard link to the file at `path` beside it, to put back if the model's rename fails; None when there is none."""
    if not os.path.lexists(path):
        return None
    backup = "%s.%d.bak.tmp" % (path, os.getpid())
    with _ignoring_os_errors():
        os.unlink(backup)
    os.link(path, backup)
    return backup


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
        onnx = _onnx()
        if onnx is not None:
            rewritten = onnx.load_model(out)  # with its external data
        else:
            rewritten = _read_file(out)
            data_files = sorted(_external_locations(rewritten))
            if output is None and data_files:
                raise DwdeconvError(EXIT_INVALID_MODEL, "the rewritten model keeps tensors in external data (%s), "
                                    "which bytes cannot carry: install onnx, or pass output=PATH" % ", ".join(data_files),
                                    log, report)
        result = Result(rewritten, report, log, out if output is not None else None)
        # Absolute, so that save() finds them after a chdir.
        result._written = os.path.abspath(out)
        result._input = os.path.abspath(source) if kind is None else None
        if output is None:
            # The binary's files stay for save(): the model and its data file, while the Result lives.
            for name in ("model.onnx", "model.onnx.data", "report.json"):
                with _ignoring_os_errors():
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
