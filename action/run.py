#!/usr/bin/env python3
"""The script of action.yml: rewrites, verifies and optionally speed-gates every ONNX model the inputs name.

Runs the same locally and in a workflow. Each option defaults to the INPUT_* variable action.yml sets from its
input of the same name (INPUT_MODELS, INPUT_TARGET, INPUT_VERIFY, INPUT_MIN_SPEEDUP, INPUT_RUNTIME,
INPUT_REPORT, INPUT_OUTPUT_DIR, INPUT_ARGS), so either of these does what the workflow does:

    INPUT_MODELS='models/' INPUT_MIN_SPEEDUP=1.1 python3 action/run.py
    python3 action/run.py --models 'models/**/*.onnx' --target litert --report report.json

MODELS holds files, directories (every *.onnx below them) and globs (** spans directories), one per line, or
separated by spaces when on one line. Each MODEL is rewritten to OUTPUT_DIR/<its path>.xnn.onnx (under
OUTPUT_DIR by its file name when it lies outside the current directory), with --verify unless verify is false,
and, with MIN_SPEEDUP, compared against it on RUNTIME with --bench --min-speedup (dwdeconv_rewrite.check). A
sidecar MODEL.input-shapes (MODEL without .onnx) with one NAME=DIMS per line is passed as --input-shape. Found
under a directory or glob, *.xnn.onnx files (an earlier run's outputs) are left out.

The REPORT is a JSON list with each model's report (the tool's report schema, as in a batch), and, when the
speed gate ran, that check's report under "speed_check". All models run even when one fails. Exit 0 when all
passed, else the exit code of the first that failed (1 verification or gate, 2 usage, 3 invalid model or I/O);
2 when MODELS matches no model. In GitHub Actions each failure is also an error annotation, each model's log a
group, the results a table in the job summary, and the outputs `report`, `output-dir` and `failed` are set.

The tool is $DWDECONV_REWRITE, else the binary of the installed dwdeconv_rewrite package.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import dwdeconv_rewrite

ON_GITHUB = os.environ.get("GITHUB_ACTIONS") == "true"


def env(name, default=""):
    return os.environ.get("INPUT_" + name, default).strip() or default


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=env("MODELS"), help="files, directories and globs (INPUT_MODELS)")
    p.add_argument("--target", default=env("TARGET"), help="--target of the rewrite; empty: the default profile")
    p.add_argument("--verify", default=env("VERIFY", "true"), choices=["true", "false"], help="--verify each rewrite")
    p.add_argument("--min-speedup", default=env("MIN_SPEEDUP"), help="fail a model whose speedup on RUNTIME is lower")
    p.add_argument("--runtime", default=env("RUNTIME", "xnnpack"), help="the runtime the speed gate measures on")
    p.add_argument("--report", default=env("REPORT", "dwdeconv-rewrite-report.json"), help="the combined JSON report")
    p.add_argument("--output-dir", default=env("OUTPUT_DIR", "dwdeconv-rewrite-out"), help="where rewritten models go")
    p.add_argument("--args", default=env("ARGS"), help="further options of the rewrite, split on spaces")
    a = p.parse_args(argv)
    if a.min_speedup:
        try:
            float(a.min_speedup)
        except ValueError:
            p.error("--min-speedup: '%s' is not a number" % a.min_speedup)
    return a


def annotate(kind, message, file=None):
    """A GitHub Actions annotation (error, warning, notice); elsewhere nothing, the log already says it."""
    if ON_GITHUB:
        text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        where = "file=%s," % file if file else ""
        print("::%s %stitle=dwdeconv-rewrite::%s" % (kind, where, text), flush=True)


def entries(models):
    """MODELS as a list of entries: one per line, or split on spaces when it is one line."""
    lines = [line.strip() for line in models.splitlines() if line.strip()]
    return lines if len(lines) > 1 else (lines[0].split() if lines else [])


def expand(models, output_dir):
    """The model files MODELS names, in order, each once; (files, entries that matched nothing)."""
    found, unmatched = [], []
    out = Path(output_dir).resolve()

    def is_output(path):
        return path.name.endswith(".xnn.onnx") or out in path.resolve().parents

    for entry in entries(models):
        if os.path.isdir(entry):
            matched = sorted(p for p in Path(entry).rglob("*.onnx") if p.is_file() and not is_output(p))
        elif glob.has_magic(entry):
            matched = sorted(Path(p) for p in glob.glob(entry, recursive=True) if os.path.isfile(p))
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


def input_shapes(model):
    sidecar = model.with_name((model.name[:-5] if model.name.endswith(".onnx") else model.name) + ".input-shapes")
    if not sidecar.is_file():
        return []
    return [line.strip() for line in sidecar.read_text().splitlines() if line.strip()]


def error_lines(log):
    return [line.split(": error: ", 1)[1] for line in log.splitlines() if ": error: " in line]


def run_model(tool, model, out, a):
    """Rewrites one model (and speed-gates it); (exit code, its report entry, a one-line verdict)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    report_path = out.with_name(out.name[: -len(".onnx")] + ".report.json")
    shapes = input_shapes(model)
    cmd = [tool, str(model), "-o", str(out), "--report", str(report_path)]
    if a.target:
        cmd.append("--target=" + a.target)
    if a.verify == "true":
        cmd.append("--verify")
    cmd += ["--input-shape=" + s for s in shapes] + a.args.split()
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = done.stderr.decode("utf-8", errors="replace")
    sys.stderr.write(log)
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        report = {"input": str(model), "exit_code": done.returncode, "error": "no report written"}
    if done.returncode != 0:
        message = report.get("error") or "; ".join(error_lines(log)) or "exit %d" % done.returncode
        return done.returncode, report, message

    if a.min_speedup:
        def gate_failed(code, verdict):
            # A model that failed its gate is not an output: the artifact upload must not carry it.
            for path in (out, out.with_name(out.name + ".data")):
                if path.exists():
                    path.unlink()
            return code, report, verdict

        try:
            checked = dwdeconv_rewrite.check(str(model), str(out), runtime=a.runtime, bench=True,
                                             min_speedup=float(a.min_speedup),
                                             args=["--input-shape=" + s for s in shapes])
        except dwdeconv_rewrite.DwdeconvError as e:
            sys.stderr.write(e.log)
            report["speed_check"] = e.report
            return gate_failed(e.exit_code, "speed check on %s: %s" % (a.runtime, e.message))
        sys.stderr.write(checked.log)
        report["speed_check"] = checked.report
        if not checked.passed:
            return gate_failed(dwdeconv_rewrite.EXIT_CHECK_FAILED, "speed check on %s: %s (speedup %s, minimum %s)"
                               % (a.runtime, checked.error or "failed", checked.speedup, a.min_speedup))
    return 0, report, "ok"


def summary_row(model, code, report, verdict):
    verify = report.get("verify") or {}
    bench = (report.get("speed_check") or {}).get("bench") or {}
    cells = [str(model), str(report.get("rewritten", "")), str(report.get("kept", "")),
             "" if not verify else ("pass" if verify.get("passed") else "FAIL"),
             "%.2fx" % bench["speedup"] if "speedup" in bench else "",
             "ok" if code == 0 else "exit %d: %s" % (code, verdict)]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def set_outputs(**values):
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            for key, value in values.items():
                f.write("%s=%s\n" % (key, value))


def main(argv=None):
    a = parse_args(argv)
    try:
        tool = dwdeconv_rewrite.binary_path()
    except dwdeconv_rewrite.DwdeconvError as e:
        annotate("error", e.message)
        print("dwdeconv-rewrite action: %s" % e.message, file=sys.stderr)
        return e.exit_code
    models, unmatched = expand(a.models, a.output_dir)
    for entry in unmatched:
        annotate("warning", "'%s' matches no .onnx file" % entry)
        print("dwdeconv-rewrite action: warning: '%s' matches no .onnx file" % entry, file=sys.stderr)
    if not models:
        message = "models: no ONNX model found in '%s'" % a.models.strip() if a.models.strip() else "models: none given"
        annotate("error", message)
        print("dwdeconv-rewrite action: error: " + message, file=sys.stderr)
        return dwdeconv_rewrite.EXIT_USAGE

    reports, rows, failed, first_code = [], [], [], 0
    outputs = {}
    for model in models:
        out = output_for(model, a.output_dir)
        if out in outputs:  # two models outside the current directory with one file name
            code, report = dwdeconv_rewrite.EXIT_USAGE, {"input": str(model), "exit_code": 2, "error": None}
            verdict = "its output %s is also %s's" % (out, outputs[out])
            report["error"] = verdict
        else:
            outputs[out] = model
            if ON_GITHUB:
                print("::group::%s" % model, flush=True)
            code, report, verdict = run_model(tool, model, out, a)
            if ON_GITHUB:
                print("::endgroup::", flush=True)
        reports.append(report)
        rows.append(summary_row(model, code, report, verdict))
        if code != 0:
            failed.append(str(model))
            first_code = first_code or code
            annotate("error", verdict, file=str(model))  # the tool's messages name the file already
        print("dwdeconv-rewrite action: %s: %s" % (model, "ok" if code == 0 else "FAILED (exit %d): %s" % (code, verdict)),
              file=sys.stderr, flush=True)

    report_path = Path(a.report)
    if report_path.parent != Path(""):
        report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(reports, indent=2) + "\n")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write("### dwdeconv-rewrite: %d of %d models passed\n\n" % (len(models) - len(failed), len(models)))
            f.write("| model | rewritten | kept | verify | speedup | result |\n|---|---|---|---|---|---|\n")
            f.write("\n".join(rows) + "\n")
    set_outputs(report=str(report_path), **{"output-dir": a.output_dir}, failed=len(failed))
    print("dwdeconv-rewrite action: %d of %d models passed; report in %s" % (len(models) - len(failed), len(models),
          report_path), file=sys.stderr)
    if failed:
        print("dwdeconv-rewrite action: failed: %s" % " ".join(failed), file=sys.stderr)
    return first_code


if __name__ == "__main__":
    sys.exit(main())
