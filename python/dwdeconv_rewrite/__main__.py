"""`python -m dwdeconv_rewrite ARGS` and the `dwdeconv-rewrite` command: the bundled binary with ARGS.

The process becomes the binary (os.execv), so its exit code, stdin, stdout and stderr are the command's own and
`-o -` streams a model as the binary does.
"""

import os
import sys

from dwdeconv_rewrite._binary import EXIT_NOT_FOUND, find_binary


def main(argv=None):
    binary, problem = find_binary()
    if binary is None:
        sys.stderr.write("dwdeconv-rewrite: error: %s\n" % problem)
        return EXIT_NOT_FOUND
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [binary] + args)
    return EXIT_NOT_FOUND  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main())
