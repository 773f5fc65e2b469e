"""Result.save(): the rewritten model the binary wrote, and its data files, copied to where the caller asks as
`dwdeconv-rewrite MODEL -o PATH` writes them, without the onnx package: the data files each model names are read
from its serialized protobuf (the fields that hold a TensorProto at some depth), renamed as the binary names them
beside PATH, staged beside their destinations and renamed into place, data first, so that an error leaves no
partial file; and never over the input model or a data file it reads."""

import os
import shutil
import stat
import tempfile
from pathlib import Path

from dwdeconv_rewrite._errors import EXIT_INVALID_MODEL, DwdeconvError, usage_error


def save_written(written, model, target, input_path):
    """Writes the model to `target` (a str) and returns it: the binary's file `written` with its data files, or,
    when `written` is None (a Result made by hand), `model` (a ModelProto or bytes), which has none. `input_path` is
    the input model's path when the caller gave one: it and its data files are never written over."""
    if written is None:
        data = model.SerializeToString() if hasattr(model, "SerializeToString") else bytes(model)
        data_files = {}
    else:
        data = read_file(written)
        # Each data file the model names, by the name it gets beside PATH: OUT.data becomes PATH.data.
        default_name = os.path.basename(written) + ".data"
        own_name = os.path.basename(target) + ".data"
        renames = {}
        data_files = {}
        try:
            locations = external_locations(data)
        except ValueError as e:  # the file was changed since the binary wrote it
            raise DwdeconvError(EXIT_INVALID_MODEL, "%s: %s" % (written, e)) from None
        for location in sorted(locations):
            name = own_name if location == default_name else location
            renames[location] = name
            data_files[os.path.join(os.path.dirname(target), name)] = os.path.join(os.path.dirname(written), location)
        if any(old != new for old, new in renames.items()):
            data = _renamed_locations(data, renames)
    writes = [(target, "the saved model")] + [(f, "the saved model's data file") for f in data_files]
    _refuse_overwrites(writes, _input_files(input_path))
    _write_atomically(target, data, data_files)
    return target


def _input_files(path):
    """(path, what it is) of each file the rewrite read: the input model and the data files it names."""
    if path is None:
        return []
    files = [(path, "the input model")]
    try:
        locations = external_locations(read_file(path))
    except (DwdeconvError, ValueError):  # gone or changed since: the model's own path is still refused
        locations = ()
    directory = os.path.dirname(path)
    files += [(os.path.join(directory, loc), "external data that %s reads" % path) for loc in sorted(locations)]
    return files


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


def external_locations(model_bytes):
    """The data files (locations relative to the model's directory) a serialized ModelProto's tensors name."""
    seen = set()
    _map_locations(memoryview(model_bytes), "ModelProto", {}, seen)
    return seen


def _renamed_locations(model_bytes, rename):
    """A serialized ModelProto with its tensors' data file locations renamed, {old: new}; everything else as it was."""
    return bytes(_map_locations(memoryview(model_bytes), "ModelProto", rename, set()))


def read_file(path):
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
                raise usage_error("refusing to write %s (%s): it is %s (%s), nothing written; choose another path"
                             % (path, what, other, other_what))
        target = os.path.realpath(path)
        try:
            regular = stat.S_ISREG(os.stat(target).st_mode)
        except FileNotFoundError:
            regular = True  # a new file
        except OSError as e:
            raise DwdeconvError(EXIT_INVALID_MODEL, "cannot write %s: %s" % (path, e.strerror or e)) from None
        if not regular:
            raise usage_error("refusing to write %s (%s): %s is not a regular file, nothing written" % (path, what, target))


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
            with ignoring_os_errors():
                os.unlink(temporary)
        for destination, backup in backups:
            with ignoring_os_errors():
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
                with ignoring_os_errors():
                    os.unlink(backup)


class ignoring_os_errors:
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
    with ignoring_os_errors():
        os.unlink(backup)
    os.link(path, backup)
    return backup
