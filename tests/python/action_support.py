"""action_test.py's helpers: the examples, GitHub's runner reading a step's output, and the tests' fixtures."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

from process_tree import alive, cmdline, descendants, kill_all, wait_for

SOURCE = Path(os.environ["DWDECONV_SOURCE_DIR"])
SCRIPT = SOURCE / "action" / "run.py"
EXAMPLES = sorted((SOURCE / "examples").glob("*.onnx"))  # migan_tiny_deconv, migan_tiny_handwritten, upsampler_small

# The commands GitHub's runner registers (actions/runner, Runner.Worker/ActionCommandManager.cs and its command
# extensions), matched without regard to case.
RUNNER_COMMANDS = {"set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher",
                   "debug", "warning", "error", "notice", "group", "endgroup", "echo", "stop-commands"}


def runner_unescape(text, pairs):
    for escaped, plain in pairs:
        text = text.replace(escaped, plain)
    return text


DATA_ESCAPES = [("%0D", "\r"), ("%0A", "\n"), ("%25", "%")]
PROPERTY_ESCAPES = [("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")]
LEGACY_ESCAPES = [("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%")]


def parse_command(line, names):
    """(name, properties, data) when GitHub's runner takes `line` as a workflow command, else None: the form
    `::name k=v,k=v::data` at the start of the line once leading whitespace is trimmed (ActionCommand.TryParseV2),
    else the legacy `##[name k=v;k=v]data` anywhere in it (ActionCommand.TryParse)."""
    message = line.lstrip()
    if message.startswith("::"):
        end = message.find("::", 2)
        if end >= 0:
            info = message[2:end]
            name = info.split(" ", 1)[0]
            if name.lower() in names:
                props = {}
                if " " in info:
                    for prop in info.split(" ", 1)[1].strip().split(","):
                        pair = [x for x in prop.split("=", 1) if x]
                        if len(pair) == 2:
                            props[pair[0]] = runner_unescape(pair[1], PROPERTY_ESCAPES)
                return name.lower(), props, runner_unescape(message[end + 2:], DATA_ESCAPES)
    start = line.find("##[")
    if start >= 0 and "]" in line[start:]:
        close = line.index("]", start)
        info = line[start + 3:close]
        name = info.split(" ", 1)[0]
        if name.lower() in names:
            return name.lower(), {}, runner_unescape(line[close + 1:], LEGACY_ESCAPES)
    return None


def workflow_commands(stream):
    """The workflow commands GitHub's runner would carry out for one output stream of a step, in order: its lines
    (split at CR, LF or CRLF, as the runner reads them) parsed as the runner does, those between
    `::stop-commands::TOKEN` and `::TOKEN::` ignored. Returns (commands, the stop tokens seen)."""
    found, tokens, token = [], [], None
    for line in re.split(r"\r\n|\r|\n", stream):
        command = parse_command(line, RUNNER_COMMANDS | ({token.lower()} if token else set()))
        if command is None:
            continue
        if token is not None:
            if command[0] == token.lower():
                token = None
            continue
        if command[0] == "stop-commands":
            token = command[2]
            tokens.append(token)
            continue
        found.append(command)
    return found, tokens


def read_github_output(text):
    """The outputs a step's $GITHUB_OUTPUT file sets, as the runner reads it: NAME=VALUE lines and
    NAME<<DELIMITER ... DELIMITER blocks."""
    outputs, lines = {}, text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i)
            outputs[name] = "\n".join(lines[i:end])
            i = end + 1
        else:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def cell_text(cell):
    """A summary cell's text: a code span's content (its `\\|` a `|`), else the cell."""
    span = re.fullmatch(r"(`+) (.*) \1", cell, re.S)
    return span.group(2).replace("\\|", "|") if span else cell


def summary_rows(summary):
    """The job summary's table rows, each as its cells split at the pipes that are not escaped."""
    rows = [line for line in summary.splitlines() if line.startswith("|")][2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


class ActionScriptCase(unittest.TestCase):
    """ActionScriptTest's fixture: a work directory holding the examples, the script run in it as a step, and
    models whose names are hostile."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.work = Path(self.tmp.name)
        models = self.work / "models" / "nested"
        models.mkdir(parents=True)
        for m in EXAMPLES:
            shutil.copy(m, models / m.name)
        self.assertEqual(len(EXAMPLES), 3)

    def tearDown(self):
        self.tmp.cleanup()

    def run_action(self, env=None, args=(), timeout=None):
        """Runs the script in the work directory as a workflow step would; (exit code, stderr, stdout, outputs)."""
        github = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(self.work / "gh-output"),
                  "GITHUB_STEP_SUMMARY": str(self.work / "gh-summary")}
        for f in ("gh-output", "gh-summary"):
            (self.work / f).write_text("")
        full = {k: v for k, v in os.environ.items() if not k.startswith("INPUT_")}
        full.update(github)
        full.update(env or {})
        r = subprocess.run([sys.executable, str(SCRIPT)] + list(args), cwd=self.work, capture_output=True, text=True,
                           env=full, timeout=timeout)
        sys.stderr.write(r.stderr[-3000:])
        outputs = read_github_output((self.work / "gh-output").read_text())
        return r.returncode, r.stderr, r.stdout, outputs

    def report(self, name="dwdeconv-rewrite-report.json"):
        return json.loads((self.work / name).read_text())

    def interrupt_the_speed_gate(self, sig):
        """Runs the action with a speed gate whose bench runs for minutes (a stand-in tool adds --runs 100000 to the
        real binary's gated call, the one with --bench) and sends `sig` to the script once the bench runs; (exit code,
        stderr, the processes below the script before the signal, those alive after, what is left in TMPDIR)."""
        stub = self.work / "slow-bench-tool"
        stub.write_text(textwrap.dedent("""\
            #!%s
            import os, sys
            args = sys.argv[1:]
            if "--bench" in args:  # before the "--" that ends the options
                args[args.index("--"):args.index("--")] = ["--runs", "100000"]
            os.execv(%r, [%r] + args)
            """ % (sys.executable, os.environ["DWDECONV_REWRITE"], os.environ["DWDECONV_REWRITE"])))
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        scratch = self.work / "tmp"
        scratch.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("INPUT_")}
        env.update(DWDECONV_REWRITE=str(stub), TMPDIR=str(scratch), INPUT_MODELS="models/nested/migan_tiny_deconv.onnx",
                   INPUT_MIN_SPEEDUP="1.01", INPUT_TARGET="xnnpack")  # a target that rewrites: the default keeps all
        # SIGINT raises KeyboardInterrupt, as in a foreground job (a shell's & ignores SIGINT).
        start = "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); " \
                "sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')"
        proc = subprocess.Popen([sys.executable, "-c", start, str(SCRIPT)], cwd=self.work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            started = wait_for(lambda: proc.poll() is not None
                               or any("--bench" in cmdline(p) for p in descendants(proc.pid)), 120)
            time.sleep(1)
            seen = descendants(proc.pid)
            self.assertTrue(started and proc.poll() is None, "the speed gate did not get under way: %s" % (
                proc.communicate()[1][-2000:] if proc.poll() is not None else "timed out"))
            os.kill(proc.pid, sig)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            wait_for(lambda: not any(alive(p) for p in seen), 3)
            return proc.returncode, err, seen, [cmdline(p)[:4] for p in seen if alive(p)], sorted(os.listdir(scratch))
        finally:
            kill_all(seen)
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    HOSTILE = ("evil\n::error title=forged::from a file name\n  ::add-mask::x\n::stop-commands::pwned\r"
               "##[warning]legacy;a:b,c %0A %25 \x1b[31m |x| [a](javascript:x) <b>`.onnx")

    def hostile_models(self):
        """Two models whose file names try to forge workflow commands and break the table: one that passes, one
        that fails (symbolic dims, no sidecar), and a name that starts with '::'."""
        d = self.work / "hostile"
        d.mkdir()
        shutil.copy(EXAMPLES[0], d / ("ok " + self.HOSTILE))
        shutil.copy(EXAMPLES[2], d / ("fail " + self.HOSTILE))
        shutil.copy(EXAMPLES[0], d / "::error::starts-with-colons.onnx")
        return sorted(Path("hostile") / p.name for p in d.iterdir())

    def assert_only_these_commands(self, out, err, models, failing):
        """The runner would carry out exactly one group per model and one error annotation on each failing one, each
        naming its file exactly, and nothing from stderr; the tool's log came between stop-commands tokens."""
        expected = []
        for m in models:
            # A group's title is the name, its control characters (but CR and LF) shown as in the log.
            expected += [("group", {}, str(m).replace("\x1b", "\\x1b")), ("endgroup", {}, "")]
            if m in failing:
                expected.append(("error", {"file": str(m), "title": "dwdeconv-rewrite"}, None))
        commands, tokens = workflow_commands(out)
        commands = [(n, p, None if n == "error" else d) for n, p, d in commands]
        self.assertEqual(commands, expected)
        self.assertEqual(workflow_commands(err), ([], []))
        self.assertGreaterEqual(len(tokens), len(models))
        self.assertEqual(len(set(tokens)), len(tokens), "a stop token must not repeat")
        self.assertTrue(all(re.fullmatch(r"[0-9a-f]{32,}", t) for t in tokens), tokens)


class ActionYamlCase(unittest.TestCase):
    """ActionYamlTest's fixture: action.yml as PyYAML reads it, and its install step run."""

    @classmethod
    def setUpClass(cls):
        try:
            import yaml
        except ImportError:
            raise unittest.SkipTest("PyYAML is not importable here (Debian: python3-yaml)")
        cls.action = yaml.safe_load((SOURCE / "action.yml").read_text())

    def install_step(self):
        [step] = [s for s in self.action["runs"]["steps"] if s.get("id") == "install"]
        return step

    @staticmethod
    def gate_runtime_module():
        """action/gate_runtime.py, loaded by its path."""
        import importlib.util
        spec = importlib.util.spec_from_file_location("gate_runtime", SOURCE / "action" / "gate_runtime.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    WHEEL = "dwdeconv_rewrite-0.1.0-py3-none-linux_x86_64.whl"

    def run_install_step(self, **inputs):
        """Runs the install step (action/install.sh of this checkout) with bash, its ${{ inputs.X }} env values from
        `inputs` (else the defaults, but install-dependencies false: no apt-get), an empty cache directory, and a
        python3 whose venvs' python records each pip command and answers `pip wheel` with a wheel file; (exit code,
        log, the pip commands as argument lists, the wheel's file:// URL in the cache)."""
        step = self.install_step()
        values = {k: v.get("default", "") for k, v in self.action["inputs"].items()}
        values["install-dependencies"] = "false"
        values.update({k.replace("_", "-"): v for k, v in inputs.items()})
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            steps = {"cache-key.outputs.dir": str(tmp / "cache")}
            fake_bin = tmp / "fake-bin"
            fake_bin.mkdir()
            (fake_bin / "python3").write_text(textwrap.dedent("""\
                #!/bin/sh
                # The action's gate_runtime.py, run from this checkout by the real interpreter.
                case "$1" in */action/gate_runtime.py) exec "%(python)s" "$@" ;; esac
                # python3 -m venv DIR: a venv whose python records each pip command, one argument a line after a
                # "--- pip" line, and writes a wheel into pip wheel's -w directory.
                [ "$1 $2" = "-m venv" ] || exit 9
                mkdir -p "$3/bin"
                cat >"$3/bin/python" <<'EOF'
                #!/bin/sh
                [ "$1" = -c ] && exec "%(python)s" "$@"   # install.sh's file:// URL of a wheel
                { echo "--- pip"; printf '%%s\\n' "$@"; } >>"%(log)s"
                previous=""
                for arg; do
                  [ "$previous" != -w ] || { mkdir -p "$arg" && : >"$arg/%(wheel)s"; }
                  previous=$arg
                done
                EOF
                printf '#!/bin/sh\\necho dwdeconv-rewrite 0.0.0\\n' >"$3/bin/dwdeconv-rewrite"
                chmod +x "$3/bin/python" "$3/bin/dwdeconv-rewrite"
                """ % {"python": sys.executable, "log": tmp / "pip-calls", "wheel": self.WHEEL}))
            (fake_bin / "python3").chmod(0o755)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
            env.update({"PATH": "%s:%s" % (fake_bin, os.environ["PATH"]), "RUNNER_TEMP": str(tmp),
                        "GITHUB_ACTION_PATH": str(SOURCE), "GITHUB_PATH": str(tmp / "github-path")})
            for key, value in (step.get("env") or {}).items():
                env[key] = re.sub(r"\$\{\{\s*(inputs|steps)\.([\w.-]+)\s*\}\}",
                                  lambda m: (values if m.group(1) == "inputs" else steps)[m.group(2)], str(value))
            r = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True)
            calls = []
            if (tmp / "pip-calls").exists():
                for line in (tmp / "pip-calls").read_text().splitlines():
                    if line == "--- pip":
                        calls.append([])
                    else:
                        calls[-1].append(line)
        return r.returncode, r.stdout + r.stderr, calls, (tmp / "cache" / self.WHEEL).as_uri()
