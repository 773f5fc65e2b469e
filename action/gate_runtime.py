#!/usr/bin/env python3
"""Which runtime the Action's speed gate measures on: the `runtime` input when given, else the target's own.

A target is meant for one runtime (litert for LiteRT, ort for ONNX Runtime, executorch for ExecuTorch, xnnpack for
XNNPACK's API, which this tool's executor runs), and a speedup belongs to a runtime: by default the gate times the
rewrite where it ships. The default target is meant for every runtime and has none of its own, so its gate runs on
the tool's executor (xnnpack) and the summary says so. Names are matched as --target and --runtime match them: any
case, and tflite for litert, onnxruntime for ort (rewrite/targets.json and runtimes/registry.json;
tests/python/action_test.py holds the two equal through the binary).

The runtimes are the registry's (python/dwdeconv_rewrite/runtimes/registry.json, the list the binary embeds), read
from this checkout, or passed in by action/run.py from the installed package; the executor (xnnpack) is always one.
The targets, their aliases and the runtime each runs on are rewrite/targets.json's (the table the binary embeds),
read from this checkout.

No imports beyond the standard library: action.yml's install step runs it before anything is installed, as
`python3 gate_runtime.py` with INPUT_TARGET and INPUT_RUNTIME set, and it prints the runtime or exits 2.
"""

import json
import os
import sys
from pathlib import Path

# The registry of this checkout, which the install step installs.
REGISTRY_PATH = Path(__file__).resolve().parents[1] / "python" / "dwdeconv_rewrite" / "runtimes" / "registry.json"
# The registry's runtimes the gate does not run on, and why: the Action installs the gate runtime's extra.
NOT_GATED = {"ncnn": "its extra would install torch through pnnx, several GB for a gate"}
# The targets (rewrite/targets.json, the table the binary embeds), read from this checkout: each one's aliases and
# the runtime it runs on ("" for the default, which is meant for every runtime).
TARGETS_PATH = Path(__file__).resolve().parents[1] / "rewrite" / "targets.json"


def load_targets(path=TARGETS_PATH):
    """{target name: runtime it runs on, or None}, and {alias: target name}, from targets.json."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["targets"]
    runs_on = {r["name"]: r.get("runs_on") or None for r in rows}
    return runs_on, {a.lower(): r["name"] for r in rows for a in r.get("aliases", [])}


# The target's own runtime (rewrite::Target::runs_on); the default target has none. A gate for a target whose
# runtime is not gated (ncnn) names the runtime it runs on.
TARGET_RUNTIME, TARGET_ALIASES = load_targets()


def load_registry(path=REGISTRY_PATH):
    """The runtimes' registry (registry.json) as a dict."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def runtimes(registry):
    """The runtimes the gate runs on: the executor, then the registry's, in its order, but those NOT_GATED."""
    return ("xnnpack",) + tuple(r["name"] for r in registry["runtimes"] if r["name"] not in NOT_GATED)


def aliases(registry):
    """{alias: name} for every other name --runtime and --target take: the registry rows' and the targets'."""
    named = {a.lower(): r["name"] for r in registry["runtimes"] for a in r.get("aliases", [])}
    return dict(TARGET_ALIASES, **named)


REGISTRY = load_registry()
RUNTIMES = runtimes(REGISTRY)


def canonical(name, registry=REGISTRY):
    """The target or runtime `name` means (any case, an alias), or the lower-cased name when it is none of them."""
    lower = name.strip().lower()
    return aliases(registry).get(lower, lower)


class BadInput(ValueError):
    """An input that names no runtime or target: `name` is the input's name ("runtime", "target"), `known` the names
    it takes. The message does not hold the value, which may be anything."""

    def __init__(self, name, known, why=None):
        super().__init__(why or "%s: not one of %s" % (name, ", ".join(known)))
        self.name = name
        self.known = known


def gate_runtime(target, runtime, registry=REGISTRY):
    """(runtime, why): where the speed gate runs and how that was chosen, or raises BadInput. `registry` is the
    runtimes' registry (this checkout's unless given)."""
    gated = runtimes(registry)
    if runtime.strip():
        chosen = canonical(runtime, registry)
        if chosen not in gated:
            raise BadInput("runtime", gated)
        return chosen, "the runtime input"
    name = canonical(target, registry) if target.strip() else "default"
    if name not in TARGET_RUNTIME:
        raise BadInput("target", tuple(TARGET_RUNTIME))
    own = TARGET_RUNTIME[name]
    if own is not None and own not in gated:
        raise BadInput("runtime", gated, "runtime: the speed gate does not run on %s, the runtime of --target %s (%s); "
                                         "give the runtime input, one of %s"
                       % (own, name, NOT_GATED.get(own, "not in the registry"), ", ".join(gated)))
    if own is None:
        return "xnnpack", "this tool's executor: the default target is meant for every runtime and has none of its own"
    return own, "the runtime of --target %s" % name


def main():
    """Prints the runtime the gate measures on; with no gate (INPUT_MIN_SPEEDUP empty), the runtime input is still
    checked, but the target is the tool's to judge, and nothing runs on a runtime: xnnpack."""
    target = os.environ.get("INPUT_TARGET", "") if os.environ.get("INPUT_MIN_SPEEDUP", "").strip() else ""
    try:
        runtime, _ = gate_runtime(target, os.environ.get("INPUT_RUNTIME", ""))
    except BadInput as e:
        # A workflow command, naming the input but not echoing its value: the runner would parse it.
        print("::error title=dwdeconv-rewrite::%s" % e)
        return 2
    print(runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
