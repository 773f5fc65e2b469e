"""The exit codes and the error of the Python API, shared by _api.py and the package."""

# The binary's exit codes (cli/exit_codes.h).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # verification or a gate failed: the rewritten model computes something else, or is too slow
EXIT_USAGE = 2  # a bad option or argument, from Python too
EXIT_INVALID_MODEL = 3  # an invalid model, a model that failed validation, or an I/O error
EXIT_CANNOT_VERIFY = 4  # verification or timing could not be done: a shape not known, an op the executor lacks, a
#                         runtime that cannot convert or run a model (no verdict on the rewrite either way)


class DwdeconvError(Exception):
    """A run that failed. `exit_code` is the binary's (or 2 for an argument Python refused, 127 when there is no
    binary), `message` what went wrong, `log` the binary's stderr, `report` its JSON report when it wrote one."""

    def __init__(self, exit_code, message, log="", report=None):
        super().__init__("%s (exit %d)" % (message, exit_code))
        self.exit_code = exit_code
        self.message = message
        self.log = log
        self.report = report


def usage_error(message):
    """The DwdeconvError of an argument Python refused (exit 2)."""
    return DwdeconvError(EXIT_USAGE, message)
