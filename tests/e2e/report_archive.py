"""The suite's report archive, for the Python tests that run the binary (tests/CMakeLists.txt).

The binary knows nothing of the archive: a test copies each report it asked for with --report, once the run has
ended, so that check_report_schema.py's `archive` step checks it against docs/report.schema.json. C++ tests do the
same in tests/e2e/cli_runner.h (ReportArchive).

    reports = report_archive.watch(argv, cwd)   # before the run
    ...run argv in cwd...
    report_archive.copy_written(reports)        # after it: each --report file the run wrote (new or changed)
"""

import itertools
import os
import shlex

_copied = itertools.count()


def watch(argv, cwd=None):
    """The --report PATH files of `argv` (relative to `cwd`), each with what it held before the run."""
    if not os.environ.get("DWDECONV_REPORT_ARCHIVE"):
        return None
    argv = [str(a) for a in argv]
    paths = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--report"]
    paths += [a[len("--report="):] for a in argv if a.startswith("--report=")]
    watched = []
    for p in paths:
        if p in ("", "-"):
            continue
        path = os.path.join(cwd or os.getcwd(), p)
        before = None
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                before = (os.stat(path).st_mtime_ns, f.read())
        watched.append((path, before))
    return (argv, cwd or os.getcwd(), watched)


def copy_written(reports):
    """Copies each watched report the run wrote into $DWDECONV_REPORT_ARCHIVE as NAME.json, beside NAME.args with
    the command that wrote it."""
    archive = os.environ.get("DWDECONV_REPORT_ARCHIVE")
    if not archive or reports is None:
        return
    argv, cwd, watched = reports
    for path, before in watched:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            now = (os.stat(path).st_mtime_ns, f.read())
        if now == before:
            continue
        os.makedirs(archive, exist_ok=True)
        stem = os.path.join(archive, "py-%d-%d" % (os.getpid(), next(_copied)))
        with open(stem + ".args", "w", encoding="utf-8") as f:
            f.write("cd %s && %s\n" % (shlex.quote(cwd), shlex.join(argv)))
        with open(stem + ".json.tmp", "wb") as f:
            f.write(now[1])
        os.replace(stem + ".json.tmp", stem + ".json")  # whole or not at all: the check reads every NAME.json
