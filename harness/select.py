"""``python -m harness.select``: kept as the command name; the code lives in :mod:`harness.selection`."""

import sys

from harness.selection.cli import main

if __name__ == "__main__":
    sys.exit(main())
