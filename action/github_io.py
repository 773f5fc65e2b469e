"""How action/run.py writes to a GitHub Actions runner: escaped log lines, workflow commands, the tool's output
between stop-commands tokens, and the step's outputs. Every name and message the script prints passes through
escape(), so that a file or node name cannot end a line, start a workflow command, or break the summary's table.
Standard library only."""

import os
import re
import secrets
import sys

ON_GITHUB = os.environ.get("GITHUB_ACTIONS") == "true"


def _shown(ch):
    """One character as a log shows it: itself when printable, else \\xNN (\\uNNNN, \\UNNNNNNNN); a byte of a file
    name that is not UTF-8 (os.fsdecode's surrogateescape, U+DC80..U+DCFF) as that byte, \\xNN."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        return "\\x%02x" % (code - 0xDC00)
    if ch.isprintable():
        return ch
    return "\\x%02x" % code if code <= 0xFF else "\\u%04x" % code if code <= 0xFFFF else "\\U%08x" % code


def escape(text, kind="log"):
    """`text` (a file name, a node name, a message, an input value) made safe for where it goes; every name and
    message this script prints or writes passes through here. GitHub's runner reads each line of a step's stdout
    and stderr (split at CR and LF), trims its leading whitespace and takes `::NAME ...::` at its start for a
    workflow command, and also the legacy `##[NAME]` anywhere in it (actions/runner, ActionCommand.cs). So:

    "log"       a plain log line: every unprintable character (CR, LF, ESC, the bidi controls, ...) as \\xNN, a
                legacy `##[` as `##\\x5b`, and a leading `::` as `\\x3a:`.
    "data"      the message of a workflow command (`::error ...::DATA`, `::group::DATA`): `%`, CR, LF as %25,
                %0D, %0A (actions/toolkit, command.ts, escapeData), which the runner unescapes; the other
                unprintable characters as \\xNN, as in the log.
    "property"  a property of one (`file=`, `title=`): `%`, CR, LF, `:`, `,` as %25, %0D, %0A, %3A, %2C
                (escapeProperty), and nothing else changed, so that `file=` names the file.
    "block"     a line of the tool's output, which echo() shows between stop-commands tokens: only the
                unprintable characters, as \\xNN (the runner carries out nothing there).
    "markdown"  a job-summary table cell: unprintable characters as \\xNN, then, but for a number, a speedup
                ("1.50x") or pass, FAIL and ok, the text as a code span: between fences of one backtick more than
                its longest run of them, and a space inside each (one of which Markdown strips on each side), with
                `|` as `\\|` (a table cell ends at any other `|`, inside a code span too, and GFM unescapes that
                one there). Inside a code span nothing is markup: no emphasis (`_`, `*`), link, image, HTML,
                autolink (www., URLs, e-mail addresses), entity, strikethrough or math, and none of the filters
                GitHub runs on the rendered page (emoji, @mentions, issue references) looks into code.
    "markdown-text"  the same code span outside a table, `|` as it is.
    """
    text = str(text)
    if kind in ("data", "property"):
        if kind == "data":
            text = "".join(c if c in "\r\n" else _shown(c) for c in text)
        else:  # but for a byte that is not UTF-8, which cannot be written out otherwise
            text = "".join(_shown(c) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
        text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return text.replace(":", "%3A").replace(",", "%2C") if kind == "property" else text
    shown = "".join(_shown(c) for c in text)
    if kind == "block":
        return shown
    if kind in ("markdown", "markdown-text"):
        if kind == "markdown" and (not shown or re.fullmatch(r"[0-9]+|[0-9]+\.[0-9]+x|pass|FAIL|ok", shown)):
            return shown
        if kind == "markdown":
            shown = shown.replace("|", "\\|")
        fence = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
        return "%s %s %s" % (fence, shown, fence)
    if kind != "log":
        raise ValueError(kind)
    shown = shown.replace("##[", "##\\x5b")
    stripped = shown.lstrip()
    if stripped.startswith("::"):
        at = len(shown) - len(stripped)
        shown = shown[:at] + "\\x3a" + shown[at + 1:]
    return shown


def command(name, message="", **properties):
    """The workflow command ::NAME K=V,...::MESSAGE on GitHub (on stdout, with the tool's log); elsewhere nothing."""
    if ON_GITHUB:
        props = ",".join("%s=%s" % (k, escape(v, "property")) for k, v in properties.items() if v)
        print("::%s%s::%s" % (name, " " + props if props else "", escape(message, "data")), flush=True)


def annotate(kind, message, file=None):
    """A GitHub Actions annotation (error, warning, notice); elsewhere nothing, the log already says it."""
    command(kind, message, file=file, title="dwdeconv-rewrite")


def say(message):
    """One line of this script's own log, on stderr."""
    print("dwdeconv-rewrite action: " + escape(message), file=sys.stderr, flush=True)


def log_stream():
    # On GitHub the tool's output goes where the workflow commands go, so that the runner reads the stop-commands
    # lines around it in order with the annotations after it.
    return sys.stdout if ON_GITHUB else sys.stderr


def echo(text):
    """What the tool printed, in the log: on GitHub between ::stop-commands::TOKEN and ::TOKEN::, a new random
    TOKEN each time, so that nothing in it (it quotes file and node names as they are) is taken for a workflow
    command; its unprintable characters as \\xNN."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return
    # Ends with a newline, so the resume line is a line of its own even when the tool's output did not.
    body = "".join(escape(line, "block") + "\n" for line in lines)
    if ON_GITHUB:
        token = secrets.token_hex(16)
        body = "::stop-commands::%s\n%s::%s::\n" % (token, body, token)
    stream = log_stream()
    stream.write(body)
    stream.flush()


def set_outputs(**values):
    """The step's outputs, NAME=VALUE; a value holding a line break as NAME<<DELIMITER ... DELIMITER with a random
    DELIMITER, so that an input value cannot set another output."""
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8", errors="surrogateescape") as f:
            for key, value in values.items():
                value = str(value)
                if "\n" in value or "\r" in value:
                    delimiter = "dwdeconv_rewrite_" + secrets.token_hex(16)
                    f.write("%s<<%s\n%s\n%s\n" % (key, delimiter, value, delimiter))
                else:
                    f.write("%s=%s\n" % (key, value))
