#!/usr/bin/env python3
"""Which runtime the Action's speed gate measures on: the `runtime` input when given, else the target's own.

A target is meant for one runtime (litert for LiteRT, ort for ONNX Runtime, executorch for ExecuTorch, xnnpack for
XNNPACK's API, which this tool's executor runs), and a speedup belongs to a runtime: by default the gate times the
rewrite where it ships. The default target is meant for every runtime and has none of its own, so its gate runs on
the tool's executor (xnnpack) and the summary says so. Names are matched as --target and --runtime match them: any
case, and tflite for litert, onnxruntime for ort (rewrite/targets.json and runtimes/registry.json;
tests/python/action_test.py holds the two equal through the binary).

No imports beyond the standard library: action.yml's install step runs it before anything is installed, as
`python3 gate_runtime.py` with INPUT_TARGET and INPUT_RUNTIME set, and it prints the runtime or exits 2.
"""

import os
import sys

RUNTIMES = ("xnnpack", "ort", "litert", "executorch", "openvino", "mnn")
ALIASES = {"tflite": "litert", "onnxruntime": "ort", "ov": "openvino"}
# The target's own runtime (rewrite::Target::runs_on); the default target has none. ncnn's is not a gate runtime: its
# extra pulls torch through pnnx, several GB for a gate, so a gate for --target ncnn names the runtime it runs on.
TARGET_RUNTIME = {"default": None, "xnnpack": "xnnpack", "litert": "litert", "ort": "ort", "executorch": "executorch",
                  "openvino": "openvino", "mnn": "mnn", "ncnn": "ncnn"}


def canonical(name):
    """The target or runtime `name` means (any case, an alias), or the lower-cased name when it is none of them."""
    lower = name.strip().lower()
    return ALIASES.get(lower, lower)


class BadInput(ValueError):
    """An input that names no runtime or target: `name` is the input's name ("runtime", "target"), `known` the names
    it takes. The message does not hold the value, which may be anything."""

    def __init__(self, name, known, why=None):
        super().__init__(why or "%s: not one of %s" % (name, ", ".join(known)))
        self.name = name
        self.known = known


def gate_runtime(target, runtime):
    """(runtime, why): where the speed gate runs and how that was chosen, or raises BadInput."""
    if runtime.strip():
        chosen = canonical(runtime)
        if chosen not in RUNTIMES:
            raise BadInput("runtime", RUNTIMES)
        return chosen, "the runtime input"
    name = canonical(target) if target.strip() else "default"
    if name not in TARGET_RUNTIME:
        raise BadInput("target", tuple(TARGET_RUNTIME))
    own = TARGET_RUNTIME[name]
    if own is not None and own not in RUNTIMES:
        raise BadInput("runtime", RUNTIMES, "runtime: the speed gate does not run on %s, the runtime of --target %s (its "
                                            "extra would install torch); give the runtime input, one of %s"
                       % (own, name, ", ".join(RUNTIMES)))
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
