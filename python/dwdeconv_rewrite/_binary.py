"""Finds the dwdeconv-rewrite binary this package runs."""

import os
from pathlib import Path

# Where the wheel puts the binary (pyproject.toml: wheel.install-dir plus CMake's bin/).
_BUNDLED = Path(__file__).resolve().parent / "bin" / "dwdeconv-rewrite"

# Not found: the exit code examples/pipeline.sh and shells use for a missing command.
EXIT_NOT_FOUND = 127


def find_binary():
    """The binary's path: $DWDECONV_REWRITE when set (as examples/pipeline.sh reads it), else the one bundled in
    the package. Returns (path, None), or (None, the reason none was found)."""
    override = os.environ.get("DWDECONV_REWRITE")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override, None
        return None, "DWDECONV_REWRITE=%s is not an executable file" % override
    if _BUNDLED.is_file() and os.access(str(_BUNDLED), os.X_OK):
        return str(_BUNDLED), None
    return None, ("the dwdeconv-rewrite binary is not in the package (%s): install the wheel, or set "
                  "DWDECONV_REWRITE=/path/to/dwdeconv-rewrite" % _BUNDLED)
