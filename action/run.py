#!/usr/bin/env python3
"""The script of action.yml: rewrites, verifies and optionally speed-gates every ONNX model the inputs name.

Runs the same locally and in a workflow. Each option defaults to the INPUT_* variable action.yml sets from its
input of the same name (INPUT_MODELS, INPUT_TARGET, INPUT_VERIFY, INPUT_MIN_SPEEDUP, INPUT_RUNTIME,
INPUT_PRECISION, INPUT_THREADS, INPUT_REPORT, INPUT_OUTPUT_DIR, INPUT_ARGS), so either of these does what the workflow does:

    INPUT_MODELS='models/' INPUT_MIN_SPEEDUP=1.1 python3 action/run.py
    python3 action/run.py --models 'models/**/*.onnx' --target litert --report report.json

MODELS holds files, directories (every *.onnx below them) and globs (** spans directories), one per line, or
separated by spaces when on one line; an entry that names a file is that file, even when its name holds a glob's
characters. Each MODEL is rewritten to OUTPUT_DIR/<its path>.xnn.onnx (under
OUTPUT_DIR by its file name when it lies outside the current directory), with --verify unless verify is false.
With MIN_SPEEDUP the same one call gates it: --verify --bench --min-speedup on RUNTIME (at PRECISION and with
THREADS when given), so the tool verifies and times the rewrite there and, below the minimum, writes nothing and
exits 1. A model with no node rewritten is not timed (its output is the input, and a ratio of two timings of one
model would measure noise): the tool's gate passes it, and the summary says "nothing to rewrite". A
sidecar MODEL.input-shapes (MODEL without .onnx) with one NAME=DIMS per line gives that model's shapes: the tool
reads it itself (docs/cli.md). Found
under a directory or glob, *.xnn.onnx files (an earlier run's outputs) are left out, wherever OUTPUT_DIR is: "."
writes each output beside its model. A MODEL is passed after "--", and paths as --option=PATH, so that no file
name is read as an option.

The REPORT is a JSON list with each model's report (the tool's report schema, as in a batch; with a gate, its
"bench" holds the speedup). It replaces an earlier REPORT or nothing: a REPORT path
that is a model given, that is where a rewritten model, its data or its report goes, or that holds anything but
such a list is refused (exit 2) before any model runs. All models run even when one fails. Exit 0 when all
passed, else the exit code of the first that failed (1 verification or gate, 2 usage, 3 invalid model or I/O, 4
could not verify: a shape not known, an op the executor lacks, a runtime that cannot convert a model);
2 when MODELS matches no model or an input is refused. In GitHub Actions each failure is also an error
annotation, each model's log a group, the results a table in the job summary, and the outputs `report`,
`output-dir` and `failed` are set.

File names, node names and input values reach the log, workflow commands and the summary only through escape():
a name cannot end a line, start a workflow command, or break the summary's table. The tool's own output, which
quotes names from the model, is shown between ::stop-commands::TOKEN and ::TOKEN:: with a new random TOKEN each
time, so the runner takes nothing in it for a command.

A SIGINT or SIGTERM is passed on to the tool that runs (dwdeconv_rewrite._process), which ends its runtime child and
removes what it staged; then the output of a model whose speed gate had not finished is removed, and the script
exits 130 or 143. So is a gated model's output when its run failed: an earlier run's must not ship in its place.

The tool is $DWDECONV_REWRITE, else the binary of the installed dwdeconv_rewrite package.
"""

import argparse
import fnmatch
import glob
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import dwdeconv_rewrite
from dwdeconv_rewrite.runtimes import REGISTRY
from dwdeconv_rewrite._api import BUILTIN_RUNTIME, _cli_path
from dwdeconv_rewrite._process import forward_sigterm, run as run_binary

def _sibling(name):
    """The module action/NAME.py, loaded from this file's directory by its path (not from sys.path)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("dwdeconv_action_" + name, Path(__file__).resolve().with_name(name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_gate_runtime = _sibling("gate_runtime")
_io = _sibling("github_io")
ON_GITHUB, escape, command, annotate, say, log_stream, echo, set_outputs = (
    _io.ON_GITHUB, _io.escape, _io.command, _io.annotate, _io.say, _io.log_stream, _io.echo, _io.set_outputs)
# The runtimes the gate runs on: the installed package's registry (the list the binary embeds), and the executor.
RUNTIMES = _gate_runtime.runtimes(REGISTRY)

# The precisions each runtime converts to (registry.json, the list the binary reads too); the executor runs fp32.
PRECISIONS = dict({r["name"]: tuple(r["precisions"]) for r in REGISTRY["runtimes"]}, xnnpack=("fp32",))

# action.yml's install step installs pyproject.toml's extra of the gate runtime's name.
# GitHub drops a step's job summary over 128 KiB (actions/runner, CreateStepSummaryCommand): the table stops at
# SUMMARY_BUDGET bytes, each cell at CELL_LIMIT characters; the report has everything.
SUMMARY_BUDGET = 64 * 1024
CELL_LIMIT = 200


def env(name, default=""):
    return os.environ.get("INPUT_" + name, default).strip() or default


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        """A refused input: the usage, and the message escaped (it may quote the input) and as an annotation."""
        self.print_usage(sys.stderr)
        annotate("error", message)
        say("error: " + message)
        sys.exit(dwdeconv_rewrite.EXIT_USAGE)


def parse_args(argv):
    p = _Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=env("MODELS"), help="files, directories and globs (INPUT_MODELS)")
    p.add_argument("--target", default=env("TARGET"), help="--target of the rewrite; empty: the default profile")
    p.add_argument("--check", default=env("CHECK", "false"),
                   help="true: --check each model (already rewritten) and write none; false: rewrite them")
    p.add_argument("--verify", default=env("VERIFY", "true"), help="--verify each rewrite: true or false")
    p.add_argument("--min-speedup", default=env("MIN_SPEEDUP"), help="fail a model whose speedup on RUNTIME is lower")
    p.add_argument("--runtime", default=env("RUNTIME"),
                   help="the runtime the speed gate measures on: %s (empty: the target's own)" % ", ".join(RUNTIMES))
    p.add_argument("--precision", default=env("PRECISION"),
                   help="the precision the speed gate converts both models to on RUNTIME: fp32, fp16, int8 or bf16, as its "
                        "registry row lists them (empty: fp32)")
    p.add_argument("--threads", default=env("THREADS"), help="the threads both models run with in the speed gate (empty: 1)")
    p.add_argument("--report", default=env("REPORT", "dwdeconv-rewrite-report.json"), help="the combined JSON report")
    p.add_argument("--output-dir", default=env("OUTPUT_DIR", "dwdeconv-rewrite-out"), help="where rewritten models go")
    p.add_argument("--args", default=env("ARGS"), help="further options of the rewrite, split on spaces")
    a = p.parse_args(argv)
    # Each refused here, before any model runs, not by the tool once per model.
    if a.verify not in ("true", "false"):
        p.error("verify: '%s' is not true or false" % a.verify)
    if a.check not in ("true", "false"):
        p.error("check: '%s' is not true or false" % a.check)
    if a.check == "true" and a.min_speedup:
        p.error("check: check mode writes and times nothing, so it has no speed gate; leave min-speedup empty")
    try:
        # Without a gate nothing runs on the runtime, and a bad target is the tool's to refuse, per model.
        a.runtime, a.runtime_why = _gate_runtime.gate_runtime(a.target if a.min_speedup else "", a.runtime, REGISTRY)
    except _gate_runtime.BadInput as e:
        p.error("%s: '%s' is not one of %s" % (e.name, a.runtime if e.name == "runtime" else a.target, ", ".join(e.known)))
    if a.min_speedup:
        try:
            gate = float(a.min_speedup)
        except ValueError:
            gate = math.nan
        if not (math.isfinite(gate) and gate > 0):
            p.error("min-speedup: '%s' is not a finite number > 0" % a.min_speedup)
    # What the gate runs at: only the gate runs on a runtime, so either without min-speedup would be ignored.
    for name in ("precision", "threads"):
        if getattr(a, name) and not a.min_speedup:
            p.error("%s: only the speed gate runs the models at a precision or thread count; set min-speedup too" % name)
    if a.precision:
        a.precision = a.precision.lower()
        has = PRECISIONS.get(a.runtime, ("fp32",))
        if a.precision not in has:
            p.error("precision: '%s' is not one of %s on %s" % (a.precision, ", ".join(has), a.runtime))
    if a.threads:
        if not (re.fullmatch(r"[0-9]{1,3}", a.threads) and 1 <= int(a.threads) <= 256):
            p.error("threads: '%s' is not a whole number from 1 to 256" % a.threads)
    if os.path.isdir(a.report):
        p.error("report: '%s' is a directory" % a.report)
    return a


def lines_of(text):
    """`text`'s lines, split at CR and LF only: str.splitlines() also splits at U+2028, U+0085, \\f, \\v and
    others, which a file name may hold."""
    return re.split(r"\r\n|\r|\n", text)


def entries(models):
    """MODELS as a list of entries: one per line, or split on spaces when it is one line."""
    lines = [line.strip() for line in lines_of(models) if line.strip()]
    return lines if len(lines) > 1 else (lines[0].split() if lines else [])


def glob_files(pattern):
    """The paths `pattern` matches, as glob.glob(pattern, recursive=True) finds them (`*` and `**` pass over names
    starting with "."), except that `**` does not descend into a symbolic link to a directory: a link to an
    ancestor would repeat each model below it until ELOOP, two of them make that 2**40 paths, and a link to "/"
    would walk the whole machine."""
    base = os.sep if pattern.startswith(os.sep) else ""
    parts = [part for part in pattern.split(os.sep) if part]
    found = []

    def walk(path, parts):
        if not parts:
            found.append(path)
            return
        head, rest = parts[0], parts[1:]
        if head == "**":
            walk(path, rest)  # no directory at all
            for entry in _entries(path):
                if entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    walk(os.path.join(path, entry.name), parts)
                elif not rest:  # a trailing ** matches files too
                    found.append(os.path.join(path, entry.name))
        elif glob.has_magic(head):
            for entry in _entries(path):
                if (head.startswith(".") or not entry.name.startswith(".")) and fnmatch.fnmatchcase(entry.name, head):
                    walk(os.path.join(path, entry.name), rest)
        else:
            name = os.path.join(path, head)
            if os.path.lexists(name):
                walk(name, rest)

    walk(base, parts)
    if pattern.endswith(os.sep):  # as glob.glob: directories only
        found = [f for f in found if os.path.isdir(f)]
    return sorted(set(found))


def _entries(path):
    try:
        with os.scandir(path or os.curdir) as it:
            return [e for e in it]
    except OSError:
        return []


def expand(models):
    """The model files MODELS names, in order, each once; (files, entries that matched nothing). An earlier run's
    outputs are named *.xnn.onnx, whatever the output directory: by that name, and not by where they lie, are they
    left out, so an output directory of "." or one that holds the models leaves the models in."""
    found, unmatched = [], []

    def is_output(path):
        return path.name.endswith(".xnn.onnx")

    for entry in entries(models):
        if os.path.isdir(entry):
            matched = sorted(p for p in Path(entry).rglob("*.onnx") if p.is_file() and not is_output(p))
        elif os.path.isfile(entry):
            matched = [Path(entry)]  # a file is that file, even when its name holds *, ? or [
        elif glob.has_magic(entry):
            matched = sorted(Path(p) for p in glob_files(entry) if os.path.isfile(p))
            matched = [p for p in matched if not is_output(p)]
        else:
            matched = [Path(entry)]  # a file, or a missing one the tool will name
        if not matched:
            unmatched.append(entry)
        for p in matched:
            if p not in found:
                found.append(p)
    return found, unmatched


def output_for(model, output_dir):
    """OUTPUT_DIR/<model's path>.xnn.onnx, by file name alone for a model outside the current directory."""
    try:
        relative = model.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        relative = Path(model.name)
    name = relative.name[: -len(".onnx")] if relative.name.endswith(".onnx") else relative.name
    return Path(output_dir) / relative.parent / (name + ".xnn.onnx")


def read_report(path):
    """The tool's JSON report at `path` as a dict, or None."""
    try:
        report = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def error_lines(log):
    return [line.split(": error: ", 1)[1] for line in log.splitlines() if ": error: " in line]


def model_report_for(out):
    """Where the tool writes the report of the rewrite to `out`: OUT.xnn.report.json beside it."""
    return out.with_name(out.name[: -len(".onnx")] + ".report.json")


def is_combined_report(path):
    """Whether `path` holds what this script writes as REPORT: a JSON list of model reports (objects with an
    "input")."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > 256 * 1024 * 1024:
            return False
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(value, list) and all(isinstance(e, dict) and "input" in e for e in value)


def report_problem(report, models, output_dir):
    """Why REPORT may not be written where it is asked for, or None. It replaces an earlier report or nothing: not a
    model given, nor where a rewritten model, its external data or its report goes, nor any other file (a model's
    external data, say)."""
    where = os.path.realpath(report)
    for model in models:
        if os.path.realpath(model) == where:
            return "report: '%s' is one of the models" % report
        out = output_for(model, output_dir)
        for path, what in ((out, "the rewritten model of %s" % model),
                           (out.with_name(out.name + ".data"), "the external data of the rewritten model of %s" % model),
                           (model_report_for(out), "the report of the rewrite of %s" % model)):
            if os.path.realpath(path) == where:
                return "report: '%s' is where %s goes" % (report, what)
    if os.path.lexists(report) and not is_combined_report(report):
        return ("report: '%s' exists and is not a report of this action (a JSON list of model reports); refusing to "
                "replace it" % report)
    return None


def run_model(tool, model, out, a):
    """Rewrites one model (and speed-gates it); (exit code, its report entry, a one-line verdict)."""
    report_path = model_report_for(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # An earlier run's report is not this run's: a tool that fails before writing one must not be read from it.
        if report_path.exists() or report_path.is_symlink():
            report_path.unlink()
    except OSError as e:
        message = "%s: %s" % (e.filename or model, e.strerror or e)
        return dwdeconv_rewrite.EXIT_INVALID_MODEL, {"input": str(model), "exit_code": 3, "error": message}, message
    # Paths as --option=PATH, and the model after "--" (as ./-NAME when it starts with "-", which alone is stdin),
    # so that no file name is taken for an option.
    # Check mode writes no model: --check, against the target the model records unless target is given.
    cmd = [tool, "--check" if a.check == "true" else "--output=" + str(out), "--report=" + str(report_path)]
    if a.target:
        cmd.append("--target=" + a.target)
    if a.verify == "true" and a.check != "true" and not a.min_speedup:
        cmd.append("--verify")
    cmd += gate_options(a) + a.args.split() + ["--", _cli_path(str(model))]
    print(escape("$ " + " ".join(shlex.quote(c) for c in cmd)), file=log_stream(), flush=True)
    try:
        return rewrite_and_gate(cmd, model, out, report_path, a)
    except BaseException:
        # An interrupt or SIGTERM (passed on to the tool, which has ended and removed what it staged) before the
        # speed gate finished: the output was never gated, and the artifact upload must not carry it.
        if a.min_speedup:
            remove_output(out)
        raise


def remove_output(out):
    for path in (out, out.with_name(out.name + ".data")):
        if path.exists():
            path.unlink()


def rewrite_and_gate(cmd, model, out, report_path, a):
    with tempfile.TemporaryFile() as captured:
        returncode = run_binary(cmd, stdout=captured, stderr=subprocess.STDOUT)
        captured.seek(0)
        log = captured.read().decode("utf-8", errors="backslashreplace")
    echo(log)
    report = read_report(report_path)
    if report is None:
        report = {"input": str(model), "exit_code": returncode,
                  "error": "; ".join(error_lines(log)) or "no report written"}
    if returncode != 0:
        if a.min_speedup:
            remove_output(out)  # not gated: an earlier run's output must not ship in its place
        message = report.get("error") or "; ".join(error_lines(log)) or "exit %d" % returncode
        return returncode, report, message
    if not a.min_speedup:
        return 0, report, "ok"
    if report.get("rewritten") == 0:
        # The output is the input: the tool did the right thing, and what ships is the original, so its gate passed
        # untimed (a ratio of two timings of one model is noise), and the summary says so.
        why = "no node was rewritten, so the output is the input"
        print(escape("nothing to rewrite: %s; min-speedup %g passes untimed" % (why, float(a.min_speedup))),
              file=log_stream(), flush=True)
        return 0, report, "nothing to rewrite"
    return 0, report, "ok"


def gate_options(a):
    """The speed gate as options of the rewrite's one call: --bench and --min-speedup on the gate's runtime (its
    interpreter this one, which the install step gave the runtime's extra), verified there too, at the precision and
    thread count asked for. The binary times, judges and, below the minimum, writes nothing; [] without a gate."""
    if not a.min_speedup:
        return []
    options = ["--verify", "--bench", "--min-speedup=%r" % float(a.min_speedup), "--runtime=" + a.runtime]
    if a.runtime != BUILTIN_RUNTIME:
        options.append("--python=" + sys.executable)
    options += ["--precision=" + a.precision] if a.precision else []
    options += ["--threads=" + a.threads] if a.threads else []
    return options


def summary_row(model, code, report, verdict):
    verify = report.get("verify") or {}
    bench = report.get("bench") or {}
    cells = [str(model), str(report.get("rewritten", "")), str(report.get("kept", "")),
             "" if not verify else ("pass" if verify.get("passed") else "FAIL"),
             "%.2fx" % bench["speedup"] if isinstance(bench.get("speedup"), (int, float)) else "",
             ("ok" if verdict == "ok" else "ok: " + verdict) if code == 0 else "exit %d: %s" % (code, verdict)]
    cells = [c if len(c) <= CELL_LIMIT else c[: CELL_LIMIT - 1] + "\u2026" for c in cells]
    return "| " + " | ".join(escape(c, "markdown") for c in cells) + " |"


def gate_text(a):
    """Where the speed gate measured, and why there: "speed gate (min-speedup 1.1) on litert, the runtime of
    --target litert"; "" without a gate."""
    if not a.min_speedup:
        return ""
    at = [a.precision] if a.precision else []
    at += ["%d thread%s" % (int(a.threads), "" if int(a.threads) == 1 else "s")] if a.threads else []
    return "speed gate (min-speedup %g) on %s%s, %s" % (float(a.min_speedup), a.runtime,
                                                        " at " + ", ".join(at) if at else "", a.runtime_why)


def write_summary(path, rows, passed, report_path, gate=""):
    """The job summary: a heading, where the speed gate ran, and the table, cut at SUMMARY_BUDGET bytes with a line
    that says so."""
    lines = ["### dwdeconv-rewrite: %d of %d models passed" % (passed, len(rows)), ""]
    if gate:
        lines += ["The speedup column: %s." % gate, ""]  # numbers and names of this script's own, nothing from a model
    lines += ["| model | rewritten | kept | verify | speedup | result |", "|---|---|---|---|---|---|"]
    size = sum(len(line.encode()) + 1 for line in lines)
    for i, row in enumerate(rows):
        size += len(row.encode()) + 1
        if size > SUMMARY_BUDGET:
            lines += ["", "%d more models: see the report, %s" % (len(rows) - i, escape(report_path, "markdown-text"))]
            break
        lines.append(row)
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    # The runner reads UTF-8; a name this locale cannot encode is escaped instead of ending the run.
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(encoding="utf-8", errors="backslashreplace")
    # A SIGTERM (a cancelled workflow) is passed on to the running tool; once it has cleaned up, and the speed gate
    # it was running has removed its unchecked output, this script exits 143.
    signal.signal(signal.SIGTERM, forward_sigterm)
    a = parse_args(argv)
    try:
        tool = dwdeconv_rewrite.binary_path()
    except dwdeconv_rewrite.DwdeconvError as e:
        annotate("error", e.message)
        say(e.message)
        return e.exit_code
    models, unmatched = expand(a.models)
    for entry in unmatched:
        annotate("warning", "'%s' matches no .onnx file" % entry)
        say("warning: '%s' matches no .onnx file" % entry)
    if not models:
        message = "models: no ONNX model found in '%s'" % a.models.strip() if a.models.strip() else "models: none given"
        annotate("error", message)
        say("error: " + message)
        return dwdeconv_rewrite.EXIT_USAGE

    model_files = {os.path.realpath(m): m for m in models}
    problem = report_problem(a.report, models, a.output_dir)
    if problem:
        annotate("error", problem)
        say("error: " + problem)
        return dwdeconv_rewrite.EXIT_USAGE

    reports, rows, failed, first_code = [], [], [], 0
    outputs = {}
    if a.min_speedup:
        say(gate_text(a))
    for model in models:
        out = output_for(model, a.output_dir)
        where = os.path.realpath(out)
        if where in outputs or where in model_files:
            # Two models outside the current directory with one file name, or (output-dir ".") an output that
            # would replace a model given too.
            if where in outputs:
                verdict = "its output %s is also %s's" % (out, outputs[where])
            else:
                verdict = "its output %s would overwrite the model %s" % (out, model_files[where])
            code, report = dwdeconv_rewrite.EXIT_USAGE, {"input": str(model), "exit_code": 2, "error": verdict}
        else:
            outputs[where] = model
            command("group", str(model))
            code, report, verdict = run_model(tool, model, out, a)
            command("endgroup")
        reports.append(report)
        rows.append(summary_row(model, code, report, verdict))
        if code != 0:
            failed.append(str(model))
            first_code = first_code or code
            annotate("error", verdict, file=str(model))  # the tool's messages name the file already
        say("%s: %s" % (model, ("ok" if verdict == "ok" else "ok: " + verdict) if code == 0 else "FAILED (exit %d): %s" % (code, verdict)))

    report_path = Path(a.report)
    try:
        if report_path.parent != Path(""):
            report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        message = "report: cannot write %s: %s" % (report_path, e.strerror or e)
        annotate("error", message)
        say("error: " + message)
        first_code = first_code or dwdeconv_rewrite.EXIT_INVALID_MODEL
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        write_summary(summary, rows, len(models) - len(failed), report_path, gate_text(a))
    set_outputs(report=str(report_path), **{"output-dir": a.output_dir}, failed=len(failed))
    say("%d of %d models passed; report in %s" % (len(models) - len(failed), len(models), report_path))
    if failed:
        say("failed: %s" % " ".join(failed))
    return first_code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the tool it was running has ended, and cleaned up
        say("interrupted")
        sys.exit(130)
