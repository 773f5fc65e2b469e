"""Runs the binary so that an interrupt or a SIGTERM of this Python process ends it the way a signal to the binary
does: it ends its runtime child, removes its staged files and scratch directories, and exits 128 + N.

Killing it instead, as subprocess.run does on a KeyboardInterrupt (SIGKILL after 0.25 s), left its runtime child
running (that child sits in a process group of its own, so neither a Ctrl-C nor the SIGKILL reaches it) and its
scratch directory behind; a SIGTERM, left to its default action, ended this process alone and the binary ran on.

So: a KeyboardInterrupt while the binary runs sends it SIGINT, gives it GRACE_SECONDS to end (it takes 2-3 s), kills
it only then, and is raised again. A SIGTERM is passed on to it by forward_sigterm, which run() installs for the
duration of the run when it runs in the main thread and the SIGTERM handler is the default one (and restores the
default after), and which a script (action/run.py) may install for good: the binary gets SIGTERM, the same grace,
and run() then raises SystemExit(143), so that the caller's `finally` blocks and temporary directories are cleaned
up as the process exits. And every binary runs with DWDECONV_EXIT_WITH_PARENT=1, which asks it to have Linux send it
SIGTERM when this process dies (PR_SET_PDEATHSIG), so that even a kill -9 of this process ends it cleanly.
"""

import os
import signal
import subprocess
import threading
import time

# How long the binary has to end after the SIGINT or SIGTERM passed on to it (it gives its runtime child 2 s) before
# it is killed.
GRACE_SECONDS = 10.0

# Set to 1 in the binary's environment: end (SIGTERM, through PR_SET_PDEATHSIG) when the process that started it dies.
EXIT_WITH_PARENT = "DWDECONV_EXIT_WITH_PARENT"

_running = []  # the Popen of each binary running now
_main_run = []  # non-empty while run() runs in the main thread
_terminating = []  # the SIGTERM forward_sigterm passed on during that run(), which raises SystemExit for it


def forward_sigterm(signum, frame):
    """A SIGTERM handler: the signal is passed on to each running binary (which is killed if it has not ended
    GRACE_SECONDS later), and the main thread, once its binary has ended, raises SystemExit(128 + signum): run()
    does, or this handler when the main thread is not in run()."""
    for proc in list(_running):
        _forward(proc, signum)
    if not _main_run:
        raise SystemExit(128 + signum)
    _terminating.append(signum)


def _forward(proc, signum):
    proc.send_signal(signum)  # nothing once it has ended
    timer = threading.Timer(GRACE_SECONDS, _kill, (proc,))
    timer.daemon = True
    timer.start()


def _kill(proc):
    if proc.poll() is None:
        proc.kill()


def _install():
    """Installs forward_sigterm for SIGTERM when this is the main thread and the handler is the default; whether it
    did."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, forward_sigterm)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        return False
    return True


def _uninstall():
    if signal.getsignal(signal.SIGTERM) is forward_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop(proc, signum):
    """Sends `signum` to the binary and waits for it to end, GRACE_SECONDS at most, then kills it. A second
    KeyboardInterrupt meanwhile does not cut its clean-up short."""
    proc.send_signal(signum)
    deadline = time.monotonic() + GRACE_SECONDS
    while True:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            return
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return
        except KeyboardInterrupt:
            continue


def run(cmd, stdout, stderr, env=None):
    """Runs `cmd` (the binary and its arguments) with no stdin and the given stdout and stderr (as Popen takes them)
    until it ends; its exit code (negative: killed by that signal). Raises KeyboardInterrupt, or in the main thread
    SystemExit(143), after the binary, told so, has ended (see the module's docstring)."""
    env = dict(os.environ if env is None else env)
    env[EXIT_WITH_PARENT] = "1"
    main = threading.current_thread() is threading.main_thread()
    installed = _install()
    if main:
        _main_run.append(True)
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env)
        _running.append(proc)
        try:
            if main and _terminating:  # came before the binary was there to pass it on to
                _forward(proc, _terminating[-1])
            try:
                code = proc.wait()
            except KeyboardInterrupt:
                _stop(proc, signal.SIGINT)
                raise
        finally:
            _running.remove(proc)
        if main and _terminating:
            raise SystemExit(128 + _terminating[-1])
        return code
    finally:
        if main:
            _main_run.pop()
            del _terminating[:]
        if installed:
            _uninstall()
