"""``python -m weir``: the ``weir`` command line."""

import sys

from weir.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
