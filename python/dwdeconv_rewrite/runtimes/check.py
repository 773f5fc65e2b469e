"""The two commands dwdeconv-rewrite runs: `probe` and `check`, and the format they answer in.

The binary keeps the decisions: it makes the inputs (the same seeded or given tensors as its own executor), compares
the outputs under its tolerance rules and chooses the exit code. This side converts both models the way the runtime's
users do, runs them on those inputs, writes their outputs, and times them interleaved.

Answers are JSON Lines: each line one JSON object with named keys, its "kind" naming it; numbers are JSON numbers
and lists JSON arrays. bridge.schema.json beside this file defines every kind ($defs/answer), and the binary parses
them by those names (runtime_check/python_answer.cpp):

  python    executable, version                (probe) the interpreter
  missing   module, pip                        (probe) a package the runtime needs that is not importable
  error     stage "import", runtime, message, module, pip
                                               (check, exit 5; probe, exit 5, for the imports it makes) a package
                                               that is installed but raises on import, module the one imported (it
                                               may be a dependency of it that failed), pip the pip package it comes
                                               from, message "importing MODULE failed: TYPE: TEXT"; the last line
                                               written, and no report is to be made of it: the interpreter cannot
                                               run the runtime, as with a missing package
  runtime   name
  label     text                               e.g. "ONNX Runtime 1.32.0 (CPU provider)"
  version   package, version
  precision side, precision                    what side was converted to: fp32, fp16, int8 or bf16 (one per side,
                                               before its outside line)
  outside   side, ops                          ops the converted graph leaves outside the XNNPACK delegate
  note      side, text                         a fact about side's precision the user must know (e.g. an op the
                                               int8 quantizer left in float); none at fp32
  output    side, name, file                   side is original or rewritten; one line per ONNX graph output, in
                                               graph output order, name the output the runtime's tensor was matched
                                               to by name (never by position, but for LiteRT int8's outputs:
                                               litert_adapter.tflite_io_by_name), file the .npy holding it
  quant     side, name, scale, zero_point      (int8) graph output name of side comes out of an int8 tensor: scale
                                               its step in the output's units (a number > 0), zero_point its zero
                                               point (an integer); after side's output lines; none for an output
                                               computed in float (then only the other side may have a step)
  sample    side, ms                           one timed run, in the order run (A B A B), ms a number
  node      side, node, op, ms, inputs, outputs  ms per run of one node (a number), from the runtime's profiler,
                                               with the values it reads and writes (arrays of names)
  error     stage, side, message               a conversion failed (exit 3) or a run did (exit 4; stage "run"),
                                               which includes a runtime whose inputs or outputs cannot be matched
                                               to the ONNX graph's by name, or that returns other outputs than
                                               the graph declares (then no output line is written for side)
  error     stage "usage", message             (check, exit 2) arguments the binary should not have given: a
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
      The inputs are DIR/*.pb TensorProtos listed in DIR/inputs.json (bridge.schema.json's tensor_list: {"tensors":
      [{"name": INPUT, "file": "0.pb"}, ...]} in graph input order); each is fed to the input it names. --precision
      (default fp32) is what both models are converted to; registry.json's "precisions" lists each runtime's.
      --calibration (int8 only, and required there) holds the samples both models are quantized with, the same for
      both: sub-folders 0/, 1/, ... each in the --inputs format. Conversions are cached under --work by model,
      precision and (int8) a hash of the samples.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
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

    def add(self, kind: str, **fields):
        """One line: {"kind": KIND, FIELD: VALUE, ...}, a line of bridge.schema.json's $defs/answer. Numbers and lists
        of names stay what they are; anything else is written as text."""
        def value(v):
            if isinstance(v, bool) or not isinstance(v, (int, float, list)):
                return _text(v)
            return [_text(x) for x in v] if isinstance(v, list) else v

        line = {"kind": kind, **{k: value(v) for k, v in fields.items()}}
        self.lines.append(json.dumps(line, ensure_ascii=False, allow_nan=False))

    def import_error(self, runtime: str, failure: tuple[str, str, str]):
        """The `error import` line of a package that is installed but fails to import (import_failure's triple)."""
        message, module, pip = failure
        self.add("error", stage="import", runtime=runtime, message=message, module=module, pip=pip)

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
    answer.add("python", executable=sys.executable, version=platform.python_version())
    missing = missing_packages(argv[0])
    for module, pip in missing:
        answer.add("missing", module=module, pip=pip)
    if not missing:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the answer
            failure = import_failure(PROBE_IMPORTS[argv[0]])
        if failure is not None:
            answer.import_error(argv[0], failure)
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
    answer.add("runtime", name=args.runtime)

    def usage(message):
        answer.add("error", stage="usage", message=message)
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
        answer.import_error(args.runtime, failure)
        answer.write(result)
        print(f"python -m dwdeconv_rewrite.runtimes check: {failure[0]}", file=sys.stderr)
        return EXIT_IMPORT_FAILED

    failure = import_failure(CHECK_IMPORTS[args.runtime])
    if failure is not None:
        return import_failed(failure)
    from .common import StageError, calibration_key, read_calibration, read_tensor_dir, signature

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
    answer.add("label", text=runtime.label())
    for package, version in runtime.versions().items():
        answer.add("version", package=package, version=version)
    sides = {"original": args.original, "rewritten": args.rewritten}

    def failed(stage, side, message, code):
        answer.add("error", stage=stage, side=side, message=message)
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
        answer.add("precision", side=side, precision=info.get("precision", "fp32"))
        if _outside(info) is not None:
            answer.add("outside", side=side, ops=_outside(info))
        for note in info.get("notes", []):
            answer.add("note", side=side, text=note)

    code = _run_and_time(runtime, sides, inputs, args, answer)
    answer.write(result)
    return 0 if code is None else code


def _run_and_time(runtime, sides: dict, inputs: dict, args, answer: Answer) -> int | None:
    """Runs each converted side on `inputs` and answers its outputs (and int8 steps), then times the two interleaved
    and profiles each, as `args` asks; the exit code of a run that failed (4, its error line answered), else None."""
    import numpy as np

    from .common import time_interleaved

    runners = {}
    for side, path in sides.items():
        try:
            runner = runtime.load(path, args.threads)
            runner.feed(inputs)
            runner.invoke()
            # {ONNX output name: array} in graph output order: base.Runner has checked them against the graph.
            outs = runner.outputs()
        except Exception as e:  # noqa: BLE001
            answer.add("error", stage="run", side=side, message=f"{type(e).__name__}: {e}")
            return 4
        for k, (name, value) in enumerate(outs.items()):
            if value.dtype == np.bool_ or value.dtype.kind in "iu":
                value = value.astype(np.int64)  # the binary reads int64 and compares integers exactly
            file = args.out / f"{side}_{k}.npy"
            np.save(file, np.ascontiguousarray(value))
            answer.add("output", side=side, name=name, file=file)
        quantization = runner.output_quantization()
        for name in outs:
            if name in quantization:
                scale, zero_point = quantization[name]
                if not (math.isfinite(scale) and scale > 0):  # no step to count in: judged in float
                    continue
                answer.add("quant", side=side, name=name, scale=float(scale), zero_point=int(zero_point))
        runners[side] = runner
    if args.runs > 0:
        samples = {}
        time_interleaved(runners["original"].invoke, runners["rewritten"].invoke, 0.0, args.runs, args.runs,
                         warmup=args.warmup, samples=samples)
        for side, key in (("original", "a"), ("rewritten", "b")):
            for ms in samples[key]:
                answer.add("sample", side=side, ms=float(ms))
    if args.profile_runs > 0 and hasattr(runtime, "profile_nodes"):
        for side, path in sides.items():
            for n in runtime.profile_nodes(path, args.threads, inputs, args.profile_runs):
                answer.add("node", side=side, node=n["node"], op=n["op"], ms=float(n["ms"]), inputs=list(n["inputs"]),
                           outputs=list(n["outputs"]))
    return None


__all__ = ["probe", "check", "REQUIREMENTS"]
