"""The two commands dwdeconv-rewrite runs: `probe` and `check`, and the format they answer in.

The binary keeps the decisions: it makes the inputs (the same seeded or given tensors as its own executor), compares
the outputs under its tolerance rules and chooses the exit code. This side converts both models the way the runtime's
users do, runs them on those inputs, writes their outputs, and times them interleaved.

Answers are JSON Lines: each line one JSON array, its first element naming the line; numbers are JSON numbers and
lists JSON arrays, everything else a string (the binary reads them with nlohmann-json):

  python      EXECUTABLE  VERSION                  (probe) the interpreter
  missing     IMPORT      PIP                      (probe) a package the runtime needs that is not importable
  error  import  RUNTIME  MESSAGE  MODULE  PIP     (check, exit 5; probe, exit 5, for the imports it makes) a
                                                   package that is installed but raises on import, MODULE the one
                                                   imported (it may be a dependency of it that failed), PIP the pip
                                                   package it comes from, MESSAGE "importing MODULE failed: TYPE:
                                                   TEXT"; the last line written, and no report is to be made of it:
                                                   the interpreter cannot run the runtime, as with a missing package
  runtime     NAME
  label       TEXT                                 e.g. "ONNX Runtime 1.32.0 (CPU provider)"
  version     PACKAGE     VERSION
  precision   SIDE        P                        what SIDE was converted to: fp32, fp16, int8 or bf16 (one per
                                                   side, before its outside line)
  outside     SIDE        TEXT                     ops the converted graph leaves outside the XNNPACK delegate
  note        SIDE        TEXT                     a fact about SIDE's precision the user must know (e.g. an op the
                                                   int8 quantizer left in float); none at fp32
  output      SIDE        NAME        FILE.npy     SIDE is original or rewritten; one line per ONNX graph output,
                                                   in graph output order, NAME the output the runtime's tensor was
                                                   matched to by name (never by position, but for LiteRT int8's
                                                   outputs: litert_adapter.tflite_io_by_name)
  quant       SIDE  NAME  SCALE  ZERO_POINT        (int8) graph output NAME of SIDE comes out of an int8 tensor:
                                                   SCALE its step in the output's units, ZERO_POINT its zero point
                                                   (numbers); after SIDE's output lines; none for an output computed
                                                   in float (then only the other side may have a step)
  sample      SIDE        MS                       one timed run, in the order run (A B A B), MS a number
  node        SIDE  NODE  OP  MS  INPUTS  OUTPUTS  ms per run of one node (a number), from the runtime's profiler,
                                                   with the values it reads and writes (arrays of names)
  error       STAGE       SIDE        MESSAGE      a conversion failed (exit 3) or a run did (exit 4; STAGE "run"),
                                                   which includes a runtime whose inputs or outputs cannot be matched
                                                   to the ONNX graph's by name, or that returns other outputs than
                                                   the graph declares (then no output line is written for SIDE)
  error  usage  -  MESSAGE                         (check, exit 2) arguments the binary should not have given: a
                                                   --precision not in the runtime's registry row, int8 without
                                                   --calibration or --calibration without int8, a --calibration DIR
                                                   that is not in the format below or whose samples are not the
                                                   --inputs' names, dtypes and shapes; the last line written

probe RUNTIME writes to stdout: the python line, a missing line per package that is not there, and, only when none
      is missing, an error import line (exit 5) for the first of __init__.PROBE_IMPORTS that fails to import: those
      that import in well under a second (for executorch numpy and onnx only: torch and executorch.runtime take
      seconds; check answers for them).

check [--runs N --warmup W] [--profile-runs P] --runtime NAME --work DIR --original A.onnx --rewritten B.onnx
      --inputs DIR --out DIR --threads T [--precision fp32|fp16|int8|bf16] [--calibration DIR]  writes DIR/result.jsonl.
      The inputs are DIR/*.pb TensorProtos listed in DIR/inputs.txt (one file name a line, graph input order); each
      is fed to the input its TensorProto names. --precision (default fp32) is what both models are converted to;
      registry.json's "precisions" lists each runtime's. --calibration (int8 only, and required there) holds the
      samples both models are quantized with, the same for both: sub-folders 0/, 1/, ... each in the --inputs
      format. Conversions are cached under --work by model, precision and (int8) a hash of the samples.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
from pathlib import Path

from . import CHECK_IMPORTS, NAMES, PRECISIONS, PROBE_IMPORTS, REQUIREMENTS, import_failure, load_runtime, missing_packages

# The exit code of an `error import` answer.
EXIT_IMPORT_FAILED = 5
# The exit code of an `error usage` answer (the binary's own exit code for a usage error).
EXIT_USAGE = 2


def _text(value) -> str:
    """`value` as a string that is valid UTF-8: a path decoded with surrogateescape (a file name that is not UTF-8) has
    each such byte replaced by U+FFFD, as the binary shows names, instead of failing to encode."""
    return str(value).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class Answer:
    """Collects answer lines and writes them to a file (or stdout) in one go."""

    def __init__(self):
        self.lines: list[str] = []

    def add(self, *fields):
        self.lines.append(json.dumps([f if isinstance(f, (int, float, list)) else _text(f) for f in fields],
                                     ensure_ascii=False, allow_nan=False))

    def write(self, path: Path | None):
        data = "".join(line + "\n" for line in self.lines).encode("utf-8")  # whatever the locale's encoding
        if path is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)


def probe(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in NAMES:
        print(f"usage: probe {'|'.join(NAMES)}", file=sys.stderr)
        return 2
    answer = Answer()
    answer.add("python", sys.executable, platform.python_version())
    missing = missing_packages(argv[0])
    for module, pip in missing:
        answer.add("missing", module, pip)
    if not missing:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the answer
            failure = import_failure(PROBE_IMPORTS[argv[0]])
        if failure is not None:
            answer.add("error", "import", argv[0], *failure)
            print(f"python -m dwdeconv_rewrite.runtimes probe {argv[0]}: {failure[0]}", file=sys.stderr)
            answer.write(None)
            return EXIT_IMPORT_FAILED
    answer.write(None)
    return 0


def _outside(info: dict) -> str | None:
    """The ops a converted graph leaves outside the XNNPACK delegate, as 'GATHER x2, SPLIT' ('none' when all is in)."""
    if "xnnpack_partitions" not in info:
        return None
    ops = info.get("not_delegated") or {}
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def check(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dwdeconv_rewrite.runtimes check")
    parser.add_argument("--runtime", choices=NAMES, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--original", type=Path, required=True)
    parser.add_argument("--rewritten", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=0, help="timed pairs (0: no timing)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--profile-runs", type=int, default=0)
    parser.add_argument("--precision", default="fp32", help="fp32, fp16, int8 or bf16, as the runtime's registry row allows")
    parser.add_argument("--calibration", type=Path, help="int8: the calibration samples, DIR/0/, DIR/1/, ...")
    args = parser.parse_args(argv)

    answer = Answer()
    result = args.out / "result.jsonl"
    answer.add("runtime", args.runtime)

    def usage(message):
        answer.add("error", "usage", "-", message)
        answer.write(result)
        print(f"python -m dwdeconv_rewrite.runtimes check: {message}", file=sys.stderr)
        return EXIT_USAGE

    # Refused before anything is imported: the binary refuses these first, so reaching here is its mistake.
    allowed = PRECISIONS[args.runtime]
    if args.precision not in allowed:
        return usage(f"--precision {args.precision}: --runtime {args.runtime} converts to {', '.join(allowed)}")
    if args.precision == "int8" and args.calibration is None:
        return usage("--precision int8 needs --calibration DIR (the samples both models are quantized with)")
    if args.precision != "int8" and args.calibration is not None:
        return usage(f"--calibration applies to --precision int8, not {args.precision}")

    def import_failed(failure):
        answer.add("error", "import", args.runtime, *failure)
        answer.write(result)
        print(f"python -m dwdeconv_rewrite.runtimes check: {failure[0]}", file=sys.stderr)
        return EXIT_IMPORT_FAILED

    failure = import_failure(CHECK_IMPORTS[args.runtime])
    if failure is not None:
        return import_failed(failure)
    import numpy as np

    from .common import (StageError, calibration_key, onnx_output_shapes, read_calibration, read_tensor_dir, signature,
                         time_interleaved)

    inputs = read_tensor_dir(args.inputs)
    calibration, key = None, ""
    if args.calibration is not None:
        try:
            calibration = read_calibration(args.calibration)
        except ValueError as e:
            return usage(str(e))
        # Each sample is one more value of the inputs: the same names (in any order), dtypes and shapes.
        if sorted(signature(calibration[0])) != sorted(signature(inputs)):
            return usage(f"--calibration's samples have inputs {signature(calibration[0])}; --inputs has {signature(inputs)}")
        key = calibration_key(calibration)

    try:
        runtime = load_runtime(args.runtime, args.work)
    except ImportError as e:  # an import CHECK_IMPORTS does not list
        module = e.name or "the runtime's adapter"
        top = module.split(".")[0]
        pip = {m: p for m, p in REQUIREMENTS[args.runtime]}.get(top, top)
        return import_failed((f"importing {module} failed: {type(e).__name__}: {' '.join(str(e).split())[:800]}",
                              module, pip))
    runtime.child_stdout = sys.stderr  # converter progress is a log, not an answer
    runtime.set_precision(args.precision, args.calibration, key)
    answer.add("label", runtime.label())
    for package, version in runtime.versions().items():
        answer.add("version", package, version)
    sides = {"original": args.original, "rewritten": args.rewritten}

    def failed(stage, side, message, code):
        answer.add("error", stage, side, message)
        answer.write(result)
        return code

    if hasattr(runtime, "convert_all"):
        runtime.convert_all(list(sides.values()))
    for side, path in sides.items():
        try:
            info = runtime.prepare(path)
        except StageError as e:
            return failed(e.stage, side, str(e).removeprefix(f"{e.stage}: "), 3)
        except Exception as e:  # noqa: BLE001 - a converter's own failure, reported with its message
            return failed("conversion", side, f"{type(e).__name__}: {e}", 3)
        answer.add("precision", side, info.get("precision", "fp32"))
        if _outside(info) is not None:
            answer.add("outside", side, _outside(info))
        for note in info.get("notes", []):
            answer.add("note", side, note)

    runners = {}
    for side, path in sides.items():
        graph_outputs = list(onnx_output_shapes(path))
        try:
            runner = runtime.load(path, args.threads)
            runner.feed(inputs)
            runner.invoke()
            outs = runner.outputs()  # {ONNX output name: array}, matched by name by the adapter
        except Exception as e:  # noqa: BLE001
            return failed("run", side, f"{type(e).__name__}: {e}", 4)
        if not isinstance(outs, dict):
            return failed("run", side, f"the {args.runtime} adapter returned its outputs as a {type(outs).__name__}, "
                          "not by name", 4)
        if len(outs) != len(graph_outputs) or set(outs) != set(graph_outputs):
            missing = [n for n in graph_outputs if n not in outs]
            extra = [n for n in outs if n not in set(graph_outputs)]
            return failed("run", side, f"{runtime.label()} returned {len(outs)} outputs {list(outs)} for the "
                          f"{len(graph_outputs)} the ONNX graph declares {graph_outputs}"
                          + (f"; missing {missing}" if missing else "") + (f"; not graph outputs: {extra}" if extra else ""),
                          4)
        for k, name in enumerate(graph_outputs):
            value = np.asarray(outs[name])
            if value.dtype == np.bool_ or value.dtype.kind in "iu":
                value = value.astype(np.int64)  # the binary reads int64 and compares integers exactly
            file = args.out / f"{side}_{k}.npy"
            np.save(file, np.ascontiguousarray(value))
            answer.add("output", side, name, file)
        quantization = runner.output_quantization() if hasattr(runner, "output_quantization") else {}
        for name in graph_outputs:
            if name in quantization:
                scale, zero_point = quantization[name]
                answer.add("quant", side, name, float(scale), int(zero_point))
        runners[side] = runner
    if args.runs > 0:
        samples = {}
        time_interleaved(runners["original"].invoke, runners["rewritten"].invoke, 0.0, args.runs, args.runs,
                         warmup=args.warmup, samples=samples)
        for side, key in (("original", "a"), ("rewritten", "b")):
            for ms in samples[key]:
                answer.add("sample", side, float(ms))
    if args.profile_runs > 0 and hasattr(runtime, "profile_nodes"):
        for side, path in sides.items():
            for n in runtime.profile_nodes(path, args.threads, inputs, args.profile_runs):
                answer.add("node", side, n["node"], n["op"], float(n["ms"]), [str(v) for v in n["inputs"]],
                           [str(v) for v in n["outputs"]])
    answer.write(result)
    return 0


__all__ = ["probe", "check", "REQUIREMENTS"]
