"""dwdeconv-rewrite from Python: the line after torch.onnx.export.

    import dwdeconv_rewrite
    result = dwdeconv_rewrite.rewrite("generator.onnx", target="litert", verify=True)
    result.save("generator.xnn.onnx")  # with its data file, if it has one; no onnx package needed
    ok = dwdeconv_rewrite.compare("generator.onnx", result, runtime="litert", bench=True)

rewrite() and compare() (the command line's --compare) run the bundled dwdeconv-rewrite binary (the only
implementation) and parse its JSON report; `python -m dwdeconv_rewrite ARGS` is its command line. Result.model is
the rewritten model, an onnx.ModelProto when onnx is importable, else its bytes. Every failure raises DwdeconvError,
which carries the binary's exit code and message (docs/install-pip.md). check() is a deprecated alias of compare(),
kept for one release.
"""

from dwdeconv_rewrite._api import (
    EXIT_CANNOT_VERIFY,
    EXIT_CHECK_FAILED,
    EXIT_INVALID_MODEL,
    EXIT_OK,
    EXIT_USAGE,
    CheckResult,
    DwdeconvError,
    Result,
    check,
    compare,
    rewrite,
)
from dwdeconv_rewrite._binary import EXIT_NOT_FOUND, find_binary

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("dwdeconv-rewrite")
except (ImportError, PackageNotFoundError):  # run from the source tree
    __version__ = "unknown"


def binary_path():
    """The path of the dwdeconv-rewrite binary rewrite() and compare() run; raises DwdeconvError (127) without one."""
    path, problem = find_binary()
    if path is None:
        raise DwdeconvError(EXIT_NOT_FOUND, problem)
    return path


__all__ = [
    "CheckResult",
    "DwdeconvError",
    "EXIT_CANNOT_VERIFY",
    "EXIT_CHECK_FAILED",
    "EXIT_INVALID_MODEL",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "Result",
    "binary_path",
    "check",  # deprecated alias of compare(), for one release
    "compare",
    "rewrite",
]
