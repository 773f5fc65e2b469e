"""`python -m dwdeconv_rewrite.runtimes COMMAND ...`: what dwdeconv-rewrite's --runtime runs.

  probe RUNTIME        which of the runtime's packages are missing or (the cheap ones) fail to import, and the
                       interpreter (check.py's line format)
  check ARGS...        convert, run, compare-ready outputs, time and profile one pair (see check.py)
  _onnx2tf, _executorch  the converter child processes of the LiteRT and ExecuTorch adapters (WORK [--precision P]
                       [--calibration DIR] [--] MODEL...)
  _mnnconvert OUT MODEL  the MNN adapter's converter child (one model into the scratch folder OUT)

Imports only the standard library before the command is known, so that `probe` works in any interpreter.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "probe":
        from .check import probe

        return probe(rest)
    if command == "check":
        from .check import check

        return check(rest)
    if command == "_onnx2tf":
        from pathlib import Path

        from .litert_adapter import onnx2tf_child

        return onnx2tf_child(Path(rest[0]), rest[1:]) or 0
    if command == "_executorch":
        from pathlib import Path

        from .executorch_adapter import executorch_child

        return executorch_child(Path(rest[0]), rest[1:])
    if command == "_mnnconvert":
        from pathlib import Path

        from .mnn_adapter import mnnconvert_child

        return mnnconvert_child(Path(rest[0]), Path(rest[1]))
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
