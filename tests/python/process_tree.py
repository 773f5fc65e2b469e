"""The processes a test started, from /proc (Linux): what api_test.py and action_test.py use to see that an
interrupted run leaves no process behind."""

import os
import signal
import time


def _stat(pid):
    """(state, parent pid) of `pid`, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def descendants(pid):
    """Every live process below `pid` (children, their children, ...)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[0] != "Z":
                parents.setdefault(stat[1], []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid):
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def wait_for(condition, seconds):
    """Polls `condition` until it is true (returns True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def kill_all(pids):
    """SIGKILLs those of `pids` still alive (what a failing test left running)."""
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
