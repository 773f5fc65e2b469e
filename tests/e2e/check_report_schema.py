"""The --report JSON against docs/report.schema.json (JSON Schema draft-07, Debian's python3-jsonschema).

    check_report_schema.py setup ARCHIVE BINARY MODEL   empty ARCHIVE, check that the binary writes nothing there and
                                                        that report_archive.py copies its report there
    check_report_schema.py archive ARCHIVE SCHEMA       every report in ARCHIVE passes (and there is at least one)
    check_report_schema.py docs SCHEMA REPORT_MD        the sample in docs/report.md passes
    check_report_schema.py strict SCHEMA REPORT_MD      a sample with a member the schema does not know, or an old or
                                                        wrong type, fails

Each test that runs the binary copies every report it had it write into $DWDECONV_REPORT_ARCHIVE
(tests/e2e/cli_runner.h, report_archive.py); ctest sets that for those tests, `setup` runs first and `archive` last
(tests/CMakeLists.txt). A failure names the file, the command that wrote it, the JSON path and the problem. Exit 0
when all pass, 1 otherwise.
"""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import report_archive  # beside this script

try:
    import jsonschema
except ImportError:
    print("check_report_schema: this interpreter (%s) has no jsonschema; install Debian's python3-jsonschema, or set "
          "DWDECONV_SCHEMA_PYTHON to an interpreter that has it" % sys.executable, file=sys.stderr)
    sys.exit(1)


def json_path(parts):
    """$.nodes[0].form for ["nodes", 0, "form"]."""
    text = "$"
    for p in parts:
        if isinstance(p, int):
            text += "[%d]" % p
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
            text += "." + p
        else:
            text += "[%s]" % json.dumps(p)
    return text


def leaves(error):
    """(path, message) for what is wrong: for a oneOf or anyOf, the problems of the branch that came nearest, which is
    the one for the value's type (a `cpu` object is explained against the object, not against null), else the one
    with the fewest problems; a value of none of the branches' types is said so."""
    if not error.context:
        return [(list(error.absolute_path), error.message)]
    branches = {}
    for e in error.context:
        branches.setdefault(e.relative_schema_path[0], []).append(e)

    def type_errors(errors):
        return [e for e in errors if e.validator == "type" and not e.relative_path]

    if all(type_errors(errors) for errors in branches.values()):
        types = []
        for errors in branches.values():
            for e in type_errors(errors):
                types += e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        return [(list(error.absolute_path), "%r is not of type %s" % (error.instance, " or ".join(map(repr, types))))]
    nearest = min(branches.values(), key=lambda errors: (bool(type_errors(errors)), len(errors)))
    return [leaf for e in nearest for leaf in leaves(e)]


def problems(schema, instance):
    """(JSON path, message) for each way `instance` fails `schema`; [] when it passes."""
    if jsonschema.Draft7Validator(schema).is_valid(instance):
        return []
    # Explained per report object, so that each message points into one object rather than at the list-or-object choice.
    one = jsonschema.Draft7Validator({"$ref": "#/definitions/report", "definitions": schema["definitions"]})
    entries = list(enumerate(instance)) if isinstance(instance, list) else [(None, instance)]
    found = []
    for index, entry in entries:
        for error in sorted(one.iter_errors(entry), key=lambda e: list(map(str, e.absolute_path))):
            for path, message in leaves(error):
                message = message if len(message) <= 300 else message[:300] + "..."
                found.append((json_path(([] if index is None else [index]) + path), message))
    return found or [("$", "neither a report object nor a non-empty list of them")]


def load_schema(path):
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    return schema


def docs_sample(report_md):
    """The first ```json block of docs/report.md, parsed."""
    with open(report_md, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"```json\n(.*?)\n```", text, re.S)
    if block is None:
        raise SystemExit("check_report_schema: no ```json block in %s" % report_md)
    return json.loads(block.group(1))


def setup(archive, binary, model):
    """Empties the archive, then checks that the binary, even with DWDECONV_REPORT_ARCHIVE set, writes nothing there
    (the shipped binary writes no file but those its options name), and that the tests' copier (report_archive.py,
    as cli_runner.h does for the C++ tests) puts the report there with its command."""
    shutil.rmtree(archive, ignore_errors=True)
    os.makedirs(archive)
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "r.json")
        argv = [binary, model, "--dry-run", "--report", report]
        os.environ["DWDECONV_REPORT_ARCHIVE"] = archive
        reports = report_archive.watch(argv)
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.isfile(report):
            print("check_report_schema: %s exited %d, report written: %s:\n%s"
                  % (binary, r.returncode, os.path.isfile(report), r.stderr), file=sys.stderr)
            return 1
        if os.listdir(archive):
            print("check_report_schema: the binary wrote into DWDECONV_REPORT_ARCHIVE=%s (%s): a test hook in the "
                  "shipped binary" % (archive, sorted(os.listdir(archive))), file=sys.stderr)
            return 1
        report_archive.copy_written(reports)
        copies = [n for n in os.listdir(archive) if n.endswith(".json")]
        with open(report, "rb") as f:
            written = f.read()
        copied = None
        if len(copies) == 1:
            with open(os.path.join(archive, copies[0]), "rb") as f:
                copied = f.read()
        if copied != written or not os.path.isfile(os.path.join(archive, copies[0][: -len(".json")] + ".args")):
            print("check_report_schema: report_archive.py did not copy the report with its command into %s (found %s)"
                  % (archive, sorted(os.listdir(archive))), file=sys.stderr)
            return 1
    print("archive %s: emptied; the binary writes nothing there of itself, and the tests' copier does" % archive)
    return 0


def check_archive(archive, schema_path):
    schema = load_schema(schema_path)
    names = sorted(n for n in os.listdir(archive) if n.endswith(".json")) if os.path.isdir(archive) else []
    if not names:
        print("check_report_schema: no report in %s: no test had the binary write one, or no test copied it there "
              "(DWDECONV_REPORT_ARCHIVE unset)" % archive, file=sys.stderr)
        return 1
    failed = 0
    for name in names:
        path = os.path.join(archive, name)
        try:
            with open(path, encoding="utf-8") as f:
                found = problems(schema, json.load(f))
        except ValueError as e:
            found = [("$", "not JSON: %s" % e)]
        if not found:
            continue
        failed += 1
        try:
            with open(path[: -len(".json")] + ".args", encoding="utf-8", errors="replace") as f:
                command = f.read().strip()
        except OSError:
            command = "(unknown)"
        print("FAIL %s, written by: %s" % (path, command))
        for where, message in found:
            print("  %s: %s" % (where, message))
    print("%d of %d reports in %s pass %s" % (len(names) - failed, len(names), archive, schema_path))
    return 1 if failed else 0


def check_docs(schema_path, report_md):
    found = problems(load_schema(schema_path), docs_sample(report_md))
    for where, message in found:
        print("FAIL the sample in %s: %s: %s" % (report_md, where, message))
    if not found:
        print("the sample in %s passes %s" % (report_md, schema_path))
    return 1 if found else 0


def check_strict(schema_path, report_md):
    """Each change below must fail the schema, at the path named; the unchanged sample, alone or in a list, passes."""
    schema = load_schema(schema_path)
    sample = docs_sample(report_md)

    def changed(change):
        report = copy.deepcopy(sample)
        change(report)
        return report

    cases = [
        ("an unknown top-level member", changed(lambda r: r.update(surprise=1)), "$"),
        ("an unknown member of a node row", changed(lambda r: r["nodes"][0].update(surprise=1)), "$.nodes[0]"),
        ("an unknown member of cpu", changed(lambda r: r["cpu"].update(sse=True)), "$.cpu"),
        # The sample's target (xnnpack) leaves nothing outside a delegate: executorch's row, with a member too many.
        ("an unknown member of an outside_delegate row", changed(lambda r: r.update(outside_delegate=[
            {"op": "Gather", "layout": "gather_crd", "runtime": "executorch", "runs_as": "aten.index.Tensor",
             "on": "portable kernels", "why": "x"}])),
         "$.outside_delegate[0]"),
        ("an unknown member of verify", changed(lambda r: r["verify"].update(surprise=1)), "$.verify"),
        ("an unknown member of bench", changed(lambda r: r["bench"].update(surprise=1)), "$.bench"),
        ("cpu as the sentence of schema 0", changed(lambda r: r.update(cpu="AVX-512F: no")), "$.cpu"),
        ("outside_delegate as the sentence of schema 0", changed(lambda r: r.update(outside_delegate="the Gather")),
         "$.outside_delegate"),
        ("no schema_version", changed(lambda r: r.pop("schema_version")), "$"),
        ("another schema_version", changed(lambda r: r.update(schema_version=2)), "$.schema_version"),
        ("a decision the tool does not take", changed(lambda r: r["nodes"][0].update(decision="maybe")), "$.nodes[0].decision"),
        ("a form the tool does not know", changed(lambda r: r["nodes"][0].update(form="deconv")), "$.nodes[0].form"),
        ("an unknown target", changed(lambda r: r.update(target="tflite")), "$.target"),
        ("an exit code the tool does not use", changed(lambda r: r.update(exit_code=5)), "$.exit_code"),
        ("a count as a string", changed(lambda r: r.update(rewritten="1")), "$.rewritten"),
        ("a batch with one bad entry", [sample, changed(lambda r: r.update(surprise=1))], "$[1]"),
        ("an empty batch", [], "$"),
    ]
    failed = 0
    for what, report, where in cases:
        found = problems(schema, report)
        if not any(path == where for path, _ in found):
            failed += 1
            print("FAIL %s: expected a problem at %s, got %s" % (what, where, found or "none"))
        else:
            print("ok: %s fails (%s)" % (what, "; ".join("%s: %s" % p for p in found)[:200]))
    for what, report in (("the sample", sample), ("a batch of the sample", [sample, sample])):
        found = problems(schema, report)
        if found:
            failed += 1
            print("FAIL %s: %s" % (what, found))
    return 1 if failed else 0


def main(argv):
    commands = {"setup": (setup, 3), "archive": (check_archive, 2), "docs": (check_docs, 2), "strict": (check_strict, 2)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    function, _ = commands[argv[1]]
    return function(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
